#!/usr/bin/env bash
# Issue 13, second round (helper K2), device call 2, after the last kernel
# change (runs.cu: the single-tile RunsKernel as its own instantiation, so
# the many-tile kernels are main's code again): the compaction family of
# old/ (main 69ffe46) and new/ (this build) in alternation, twice; the kernel
# GPU tests of new/; compute-sanitizer memcheck over the select/partition,
# unique/RLE and ReduceByKey tests; the full primitives_bench table of new/;
# ncu over ReduceByKey's RunsKernel with int32 and float32 values (2^24) and
# over one Partition / Select call at 2^16 int32; ReduceByKey of new1/ (call
# 1's build, 3beadf9) against tree/ (new1/ with RunsLookback's tree combine
# instead of the in-order fold; an experiment build, never committed) at
# 2^24 and 2^28, alternating, twice. Logs in one tar.
#   bash .b-k2/run2.sh OUT_DIR
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
logs="$out/logs"
mkdir -p "$logs"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; date -u
  echo "command: bash .b-k2/run2.sh \$OUT"; } | tee "$logs/device.txt"
step() {  # log name timeout command...
  local log=$1 name=$2 t=$3; shift 3
  local started=$SECONDS
  echo "=== $name: $*" >>"$logs/$log"
  (cd "$here" && timeout "$t" "$@") >"$logs/step.tmp" 2>&1
  local rc=$?
  cat "$logs/step.tmp" >>"$logs/$log"
  printf '%-26s rc=%-3d %4ds  %s\n' "$name" "$rc" $((SECONDS - started)) \
    "$(grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|all outputs match|SOME OUTPUTS' "$logs/step.tmp" | tr '\n' ' ')" |
    tee -a "$logs/summary.txt"
}
C=(--primitives=select,partition,unique,rle,rbk --log2n= --compaction_log2n=10,12,13,16,20,24,28)
for round in 1 2; do
  for v in old new; do step ab.log "${v}_compaction_$round" 150 "$v/primitives_bench" "${C[@]}"; done
done
for t in compaction_gpu_test reproducible_gpu_test scan_gpu_test bounds_gpu_test; do
  step tests.log "$t" 300 "new/$t"
done
san="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
step memcheck.log memcheck_select 200 "$san" --tool memcheck --error-exitcode 99 new/compaction_gpu_test \
  --gtest_filter='CompactionGpu.SelectIfEveryPredicate:CompactionGpu.SelectAllAndNone:CompactionGpu.SelectOptionalOutputs:CompactionGpu.SelectInPlace:CompactionGpu.BadArguments'
step memcheck.log memcheck_flagged_runs 240 "$san" --tool memcheck --error-exitcode 99 new/compaction_gpu_test \
  --gtest_filter='CompactionGpu.SelectAndPartitionFlagged:CompactionGpu.UniqueAndRunLengthEncode:CompactionGpu.ReduceByKey:CompactionGpu.ReduceByKeyLongRuns'
step full_bench.log new_full 300 new/primitives_bench
ncu="$(command -v ncu || echo ncu)"
for d in int32 float32; do
  step ncu_rbk.log "ncu_rbk_$d" 150 "$ncu" --clock-control none --kernel-name-base demangled \
    -k 'regex:::RunsKernel<' -s 3 -c 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
    --section SourceCounters --section MemoryWorkloadAnalysis \
    new/primitives_bench --primitives=rbk --log2n= --compaction_log2n=24 --compaction_dtypes=$d
done
for p in partition select; do
  step ncu_small.log "ncu_${p}_2p16" 150 "$ncu" --clock-control none --kernel-name-base demangled \
    -k 'regex:CountKeptKernel|SelectKernel|CompactionInitKernel' -s 0 -c 4 --section SpeedOfLight \
    new/primitives_bench --primitives=$p --log2n= --compaction_log2n=16 --compaction_dtypes=int32
done
for round in 1 2; do
  for v in new1 tree; do
    step ab_rbk.log "${v}_rbk_$round" 120 "$v/primitives_bench" --primitives=rbk --log2n= --compaction_log2n=24,28
  done
done
rm -f "$logs/step.tmp"
tar -C "$out" -czf "$out/logs.tgz" logs
cp "$logs/summary.txt" "$out/summary.txt"
rm -rf "$logs"
cat "$out/summary.txt"
