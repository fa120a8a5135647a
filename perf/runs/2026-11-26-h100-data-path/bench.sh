#!/usr/bin/env bash
# Issue 11's table, call 1 of 2: tools/gpu_engine_bench.sh (primload against
# the CUDA server, every figure beside Echo or EchoStream of the same bytes in
# the same run; numpy.cumsum on one core), then the Python client's 64M scan
# (stock grpcio) unary and through ScanStream. Run from the repository root
# on the GPU machine with the bundle of `tools/pack_gpu.sh --engine` in
# .b-final/ (and the Python package in .b-final/py): bench.sh OUT_DIR
set -uo pipefail
here="$(cd .b-final && pwd)"
out="${1:?usage: bench.sh OUT_DIR}"
mkdir -p "$out/bench"
"$here/gpu_engine_bench.sh" "$out/bench" > "$out/bench/engine_bench.log" 2>&1
export LD_LIBRARY_PATH="$here/lib"
"$here/primserve" --port=50062 --metrics_port=-1 > "$out/bench/python_server.log" 2>&1 &
server=$!
for _ in $(seq 50); do "$here/primctl" --address=localhost:50062 health >/dev/null 2>&1 && break; sleep 0.2; done
PYTHONPATH="$here/py" timeout 150 python3 -m primserve.bench --address=localhost:50062 \
  --n=67108864 --repeats=5 > "$out/bench/python_client.txt" 2>&1
kill -TERM "$server"; wait "$server"
tar -C "$out" -czf "$out/bench.tgz" bench
grep -E '^==|GB/s|req/s|p50|ratio' "$out/bench/engine_bench.log" | tail -n 80
cat "$out/bench/python_client.txt"
