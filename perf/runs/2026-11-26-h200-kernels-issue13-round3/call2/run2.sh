#!/usr/bin/env bash
# Issue 13, third round (helper K3), device call 2:
#   old/ = main ff4111f; new/ = 93d8d0d (float MIN/MAX scans over ordered keys);
#   new2/ = dab551d (keys kept in place; float MIN/MAX reduce over keys);
#   v7/, v6/ = new2/ with 28 KB select tiles at 7 blocks/SM and 24 KB at 8
#   (kSelectNumVec / kSelectMinBlocksPerSm 7/7, 6/8; experiment builds).
# scan+reduce rows of old/new/new2 alternating, three rounds; compaction rows
# of new2/v7/v6 alternating, three rounds; the four kernel GPU tests of new2;
# memcheck over the new bit-exact scan test; the select/unique compaction tests
# of v7 and v6; the full primitives_bench table of new2.
#   bash .b-k3/run2.sh OUT_DIR
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
logs="$out/logs"
mkdir -p "$logs"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; date -u
  echo "command: bash .b-k3/run2.sh \$OUT"; } | tee "$logs/device.txt"
step() {  # log name timeout command...
  local log=$1 name=$2 t=$3; shift 3
  local started=$SECONDS
  echo "=== $name: $*" >>"$logs/$log"
  (cd "$here" && timeout "$t" "$@") >"$logs/step.tmp" 2>&1
  local rc=$?
  cat "$logs/step.tmp" >>"$logs/$log"
  printf '%-26s rc=%-3d %4ds  %s\n' "$name" "$rc" $((SECONDS - started)) \
    "$(grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|all outputs match|SOME OUTPUTS|differ' "$logs/step.tmp" | head -3 | tr '\n' ' ')" |
    tee -a "$logs/summary.txt"
}
S=(--primitives=scan,reduce --dtypes=int32,float32,float64 --log2n=10,12,16,20,24,28 --compaction_log2n=)
C=(--primitives=select,partition,unique --log2n= --compaction_log2n=12,13,14,16,18,20,24,28)
for round in 1 2 3; do
  for v in old new new2; do step ab_scan.log "${v}_scan_$round" 100 "$v/primitives_bench" "${S[@]}"; done
  for v in new2 v7 v6; do step ab_compaction.log "${v}_compaction_$round" 100 "$v/primitives_bench" "${C[@]}"; done
done
for t in scan_gpu_test compaction_gpu_test reproducible_gpu_test bounds_gpu_test; do
  step tests.log "new2_$t" 300 "new2/$t"
done
san="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
step memcheck.log memcheck_scan_bits 120 "$san" --tool memcheck --error-exitcode 99 new2/scan_gpu_test \
  --gtest_filter='ScanGpuTest.FloatMinMaxZerosAndNanPayloadsBitExact'
F='CompactionGpu.SelectIfEveryPredicate:CompactionGpu.SelectAllAndNone:CompactionGpu.SelectOptionalOutputs:CompactionGpu.SelectInPlace:CompactionGpu.SelectOver2To31:CompactionGpu.UniqueAndRunLengthEncode:CompactionGpu.BadArguments'
for v in v7 v6; do step tests.log "${v}_compaction_select" 150 "$v/compaction_gpu_test" --gtest_filter="$F"; done
step full_bench.log new2_full 300 new2/primitives_bench
rm -f "$logs/step.tmp"
cat "$logs/summary.txt"
