#!/usr/bin/env bash
# Kernel A/B on one GPU: new tests, then the old (main 2cdc709) and new primitives_bench twice each, interleaved.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/k"
export LD_LIBRARY_PATH="$here/k/lib"
o="$OUT/kern"; mkdir -p "$o"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > "$o/device.txt"
for t in scan_gpu_test compaction_gpu_test bounds_gpu_test; do
  timeout 300 ./$t > "$o/$t.log" 2>&1; echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$o/$t.log" | tr '\n' ' ')" >> "$o/summary.txt"
done
timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 99 ./compaction_gpu_test --gtest_filter='*UniqueAndRunLengthEncode*:*ReduceByKey*:*SegmentedSelect*' > "$o/memcheck_compaction.log" 2>&1; echo "memcheck_compaction rc=$? $(grep 'ERROR SUMMARY' "$o/memcheck_compaction.log")" >> "$o/summary.txt"
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 99 ./scan_gpu_test --gtest_filter='ScanGpuTest.Int64:ScanGpuTest.Float64:SegmentedScanGpuTest.Int32' > "$o/memcheck_scan.log" 2>&1; echo "memcheck_scan rc=$? $(grep 'ERROR SUMMARY' "$o/memcheck_scan.log")" >> "$o/summary.txt"
args="--primitives=scan,select,rle,rbk,unique --log2n=16,20,28 --compaction_log2n=20,28"
for r in 1 2; do
  timeout 150 ./primitives_bench_old $args > "$o/bench_old_$r.log" 2>&1; echo "bench_old_$r rc=$?" >> "$o/summary.txt"
  timeout 150 ./primitives_bench $args > "$o/bench_new_$r.log" 2>&1; echo "bench_new_$r rc=$?" >> "$o/summary.txt"
done
cat "$o/summary.txt"
