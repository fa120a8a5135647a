#!/usr/bin/env bash
# GPU run B (2026-11-25): engine GPU tests after the pinned shared-memory path (memcheck over its large scan),
# tools/shm_bench.py against primserve --shared_memory (CUDA backend), the Python client's 64M scan unary vs
# streamed vs numpy.cumsum, and the server's stage sums.
set -u
w=/tmp/w; rm -rf $w; mkdir -p $w; tar -xJf dist/lead/bundle.tar.xz -C $w
b=$w/gpu_bundle; o="$OUT/b"; mkdir -p "$o"
STEP_TIMEOUT=300 $b/run_all.sh "$o/tests" --only=cuda_shared_memory_gpu_test,cuda_service_gpu_test,cuda_staging_gpu_test,cuda_lane_gpu_test,cuda_lane_sticky_gpu_test,cuda_sticky_gpu_test,cuda_fault_gpu_test,cuda_cpu_backend_gpu_test > /dev/null 2>&1
export LD_LIBRARY_PATH=$b/lib
(cd $b && timeout 300 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 99 ./cuda_shared_memory_gpu_test --gtest_filter='*ALargeScan*:*EveryRpc*' > "$o/tests/memcheck_shared_memory.log" 2>&1; echo "memcheck_shared_memory rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$o/tests/memcheck_shared_memory.log" | tr '\n' ' ')" >> "$o/tests/summary.txt")
cat "$o/tests/summary.txt"
python3 -m pip install --quiet --no-index --no-deps --target /tmp/primserve-py $b/wheels/*.whl
$b/primserve --port=50061 --metrics_port=9471 --shared_memory > "$o/server.log" 2>&1 &
srv=$!
for _ in $(seq 50); do $b/primctl --address=localhost:50061 health >/dev/null 2>&1 && break; sleep 0.2; done
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; echo "command: tools/shm_bench.py --address=localhost:50061 --n=67108864 --runs=7 (server: primserve --shared_memory, CUDA backend)"; } > "$o/shm_bench.txt"
PYTHONPATH=/tmp/primserve-py timeout 200 python3 tools/shm_bench.py --address=localhost:50061 --n=67108864 --runs=7 >> "$o/shm_bench.txt" 2>&1
echo "rc=$?" >> "$o/shm_bench.txt"
python3 -c "import urllib.request; print(urllib.request.urlopen('http://localhost:9471/metrics').read().decode())" | grep -E '^primserve_.*_(sum|count)' > "$o/stages_shm.txt"
cat "$o/shm_bench.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; echo "command: python3 -m primserve.bench --address=localhost:50061 --n=67108864 --repeats=5"; } > "$o/python_client.txt"
PYTHONPATH=/tmp/primserve-py timeout 200 python3 -m primserve.bench --address=localhost:50061 --n=67108864 --repeats=5 >> "$o/python_client.txt" 2>&1
echo "rc=$?" >> "$o/python_client.txt"
cat "$o/python_client.txt"
kill -TERM $srv; wait $srv
cd "$OUT" && tar -czf res.tgz b && rm -rf b
