#!/usr/bin/env bash
# Issue 13, second round (helper K2), device call 1: the compaction family of
# old/ (main 69ffe46) and new/ (partition counting pass with one atomic per
# block and a grid sized to n; single-tile launches without the status reset
# and the tile counter) in alternation, twice; the kernel GPU tests of new/;
# compute-sanitizer memcheck over the select/partition tests of new/; the
# full primitives_bench table of new/; ncu over ReduceByKey int32 vs float32
# values and select int32 vs int64 (2^24). Logs into one tar (a call returns at most 8 files).
#   bash .b-k2/run1.sh OUT_DIR
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
logs="$out/logs"
mkdir -p "$logs"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; date -u
  echo "command: bash .b-k2/run1.sh \$OUT"; } | tee "$logs/device.txt"
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
  --gtest_filter='CompactionGpu.SelectAndPartitionFlagged:CompactionGpu.UniqueAndRunLengthEncode:CompactionGpu.ReduceByKey'
step full_bench.log new_full 300 new/primitives_bench
ncu="$(command -v ncu || echo ncu)"
for d in int32 float32; do
  step ncu.log "ncu_rbk_$d" 120 "$ncu" --clock-control none -k regex:RunsKernel -s 3 -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
    new/primitives_bench --primitives=rbk --log2n= --compaction_log2n=24 --compaction_dtypes=$d
done
for d in int32 int64; do
  step ncu.log "ncu_select_$d" 120 "$ncu" --clock-control none -k regex:SelectKernel -s 3 -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
    new/primitives_bench --primitives=select --log2n= --compaction_log2n=24 --compaction_dtypes=$d
done
rm -f "$logs/step.tmp"
tar -C "$out" -czf "$out/logs.tgz" logs
cp "$logs/summary.txt" "$out/summary.txt"
rm -rf "$logs"
cat "$out/summary.txt"
