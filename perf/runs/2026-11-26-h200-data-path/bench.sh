#!/usr/bin/env bash
# Issue 11's table, call 1 of 2, from the repository root on the GPU machine
# with the bundle (`tools/pack_gpu.sh --engine` layout, Python client in
# .b-final/py) in .b-final/: tools/gpu_engine_bench.sh (primload against the
# CUDA server, each figure beside Echo or EchoStream of the same bytes in the
# same run; numpy.cumsum on one core); Multiplex over 16 channels; the Python
# client's 64M scan (stock grpcio); and where a 1K scan's time goes at
# concurrency 1 (../h200-2026-11-26-small-latency/probe.sh: stage histograms, inline
# and handed-off runs, the CPU backend). bench.sh OUT_DIR
set -uo pipefail
here="$(cd .b-final && pwd)"
out="${1:?usage: bench.sh OUT_DIR}"
mkdir -p "$out/bench"
"$here/gpu_engine_bench.sh" "$out/bench" > "$out/bench/engine_bench.log" 2>&1
export LD_LIBRARY_PATH="$here/lib"
"$here/primserve" --port=50062 --metrics_port=-1 --enable_echo --batch_timeout_micros=200 \
  --max_batch_size=256 --batch_threads=8 > "$out/bench/multiplex16_server.log" 2>&1 &
server=$!
for _ in $(seq 50); do "$here/primctl" --address=localhost:50062 health >/dev/null 2>&1 && break; sleep 0.2; done
"$here/primload" --address=localhost:50062 --rpc=scan --n=1024 --concurrency=256,1024 --verify \
  --multiplex --channels=16 --warmup_seconds=1 --measure_seconds=3 \
  > "$out/bench/small_scan_multiplex16.txt" 2>&1
PYTHONPATH="$here/py" timeout 150 python3 -m primserve.bench --address=localhost:50062 \
  --n=67108864 --repeats=5 > "$out/bench/python_client.txt" 2>&1
kill -TERM "$server"; wait "$server"
bash server/results/h200-2026-11-26-small-latency/probe.sh "$here" "$out/bench/probe" > "$out/bench/probe.log" 2>&1
tar -C "$out" -czf "$out/bench.tgz" bench
grep -E '^==|GB/s|req/s|p50|ratio|median' "$out/bench/engine_bench.log" | tail -n 80
cat "$out/bench/small_scan_multiplex16.txt" "$out/bench/python_client.txt" "$out/bench/probe.log"
