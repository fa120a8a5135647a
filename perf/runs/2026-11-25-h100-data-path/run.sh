#!/usr/bin/env bash
# Issue 11's table in one run: tools/gpu_engine_bench.sh (primload against the
# CUDA server, each figure beside Echo; numpy.cumsum), then the Python client's
# 64M scan unary and through ScanStream.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?}"
mkdir -p "$out/bench"
"$here/gpu_engine_bench.sh" "$out/bench" > "$out/bench/engine_bench.log" 2>&1
export LD_LIBRARY_PATH="$here/lib"
"$here/primserve" --port=50062 --metrics_port=-1 > "$out/bench/python_server.log" 2>&1 &
server=$!
for _ in $(seq 50); do "$here/primctl" --address=localhost:50062 health >/dev/null 2>&1 && break; sleep 0.2; done
PYTHONPATH="$here/py" timeout 240 python3 -m primserve.bench --address=localhost:50062 \
  --n=67108864 --repeats=5 > "$out/bench/python_client.txt" 2>&1
kill -TERM "$server"; wait "$server"
# Large answers checked, every one (pinned payloads under the CUDA engine).
"$here/primserve" --port=50063 --metrics_port=-1 > "$out/bench/verify_server.log" 2>&1 &
server=$!
for _ in $(seq 50); do "$here/primctl" --address=localhost:50063 health >/dev/null 2>&1 && break; sleep 0.2; done
for rpc in scan select reduce_by_key unique; do
  "$here/primload" --address=localhost:50063 --rpc=$rpc --predicate=gt --operand=0 --n=33554433 \
    --concurrency=1,2 --verify --verify_every=1 --warmup_seconds=0.5 --measure_seconds=2 \
    > "$out/bench/verify_$rpc.txt" 2>&1
done
kill -TERM "$server"; wait "$server"
(cd "$here" && LD_LIBRARY_PATH="$here/lib" timeout 300 ./cuda_service_gpu_test) > "$out/bench/cuda_service_gpu_test.log" 2>&1
echo "cuda_service_gpu_test exit $?" >> "$out/bench/cuda_service_gpu_test.log"
tar -C "$out" -czf "$out/bench.tgz" bench
cat "$out/bench/engine_bench.log" "$out/bench/python_client.txt" | tail -n 150
tail -n 4 "$out"/bench/verify_*.txt
tail -n 5 "$out/bench/cuda_service_gpu_test.log"
