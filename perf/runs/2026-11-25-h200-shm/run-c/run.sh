#!/usr/bin/env bash
# GPU run C (2026-11-25): engine GPU tests after the pinned-input StagedRun change (memcheck over the shared-memory
# suite's large scan and select), tools/shm_bench.py with 1K-element scans, and primload's 64M scan (C++ client) beside
# Echo.
set -u
w=/tmp/w; rm -rf $w; mkdir -p $w; tar -xJf dist/lead/bundle.tar.xz -C $w
b=$w/gpu_bundle; o="$OUT/c"; mkdir -p "$o"
STEP_TIMEOUT=300 $b/run_all.sh "$o/tests" --only=cuda_shared_memory_gpu_test,cuda_service_gpu_test,cuda_staging_gpu_test,cuda_lane_gpu_test,cuda_lane_sticky_gpu_test,cuda_sticky_gpu_test,cuda_fault_gpu_test,cuda_cpu_backend_gpu_test > /dev/null 2>&1
export LD_LIBRARY_PATH=$b/lib
(cd $b && timeout 300 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 99 ./cuda_shared_memory_gpu_test --gtest_filter='*ALarge*:*EveryRpc*' > "$o/tests/memcheck_shared_memory.log" 2>&1; echo "memcheck_shared_memory rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$o/tests/memcheck_shared_memory.log" | tr '\n' ' ')" >> "$o/tests/summary.txt")
cat "$o/tests/summary.txt"
python3 -m pip install --quiet --no-index --no-deps --target /tmp/primserve-py $b/wheels/*.whl
$b/primserve --port=50061 --metrics_port=9471 --shared_memory --enable_echo > "$o/server.log" 2>&1 &
srv=$!
for _ in $(seq 50); do $b/primctl --address=localhost:50061 health >/dev/null 2>&1 && break; sleep 0.2; done
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; echo "command: tools/shm_bench.py --address=localhost:50061 --n=67108864 --runs=7 --small_runs=3000 (server: primserve --shared_memory --enable_echo, CUDA backend)"; } > "$o/shm_bench.txt"
PYTHONPATH=/tmp/primserve-py timeout 200 python3 tools/shm_bench.py --address=localhost:50061 --n=67108864 --runs=7 --small_runs=3000 >> "$o/shm_bench.txt" 2>&1
echo "rc=$?" >> "$o/shm_bench.txt"
cat "$o/shm_bench.txt"
{ date -u; echo "command: primload --address=localhost:50061 --rpc=scan --n=67108864 --distinct_requests=2 --concurrency=1 --channels=1 --mode=both --warmup_seconds=2 --measure_seconds=10"; } > "$o/primload_64m.txt"
timeout 120 $b/primload --address=localhost:50061 --rpc=scan --n=67108864 --distinct_requests=2 --concurrency=1 --channels=1 --mode=both --warmup_seconds=2 --measure_seconds=10 >> "$o/primload_64m.txt" 2>&1
echo "rc=$?" >> "$o/primload_64m.txt"
tail -15 "$o/primload_64m.txt"
kill -TERM $srv; wait $srv
cd "$OUT" && tar -czf res.tgz c && rm -rf c
