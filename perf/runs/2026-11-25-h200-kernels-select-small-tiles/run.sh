#!/usr/bin/env bash
# Kernel A/B (2026-11-25): Select/Partition/Unique with 8 KB tiles up to 8 MiB of input (new) against main's 32 KB tiles
# (old, the same build flags), interleaved, three times each; compaction_gpu_test on the new build first.
set -u
w=/tmp/k; rm -rf $w; mkdir -p $w; tar -xJf dist/lead/k.tar.xz -C $w
cd $w/k; export LD_LIBRARY_PATH=$w/k/lib
o="$OUT/ks"; mkdir -p "$o"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > "$o/device.txt"
timeout 300 ./compaction_gpu_test > "$o/compaction_gpu_test.log" 2>&1; echo "compaction_gpu_test rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$o/compaction_gpu_test.log" | tr '\n' ' ')" | tee "$o/summary.txt"
args="--primitives=select,partition,unique --compaction_log2n=10,14,16,18,20,21,22,24,28 --compaction_dtypes=int32,float32,int64,float64"
for r in 1 2 3; do
  timeout 120 ./primitives_bench_old $args > "$o/bench_old_$r.log" 2>&1; echo "bench_old_$r rc=$?" >> "$o/summary.txt"
  timeout 120 ./primitives_bench $args > "$o/bench_new_$r.log" 2>&1; echo "bench_new_$r rc=$?" >> "$o/summary.txt"
done
cat "$o/summary.txt"
cd "$OUT" && tar -czf res.tgz ks && rm -rf ks
