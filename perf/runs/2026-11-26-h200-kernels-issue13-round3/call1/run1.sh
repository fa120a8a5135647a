#!/usr/bin/env bash
# Issue 13, third round (helper K3), device call 1: A/B of
#   old/ = main ff4111f, new/ = float MIN/MAX scans over ordered keys (93d8d0d),
#   v12/, v16/ = new/ with kSelectNumVec 12 / 16 (48 / 64 KB select tiles;
#   experiment builds) ;
# compaction rows of old/new/v12/v16 in alternation, three rounds; scan rows
# (int32/float32/int64/float64) of old/new alternating, three rounds;
# scan_gpu_test of new/; the select/unique compaction tests of v12/ and v16/.
#   bash .b-k3/run1.sh OUT_DIR
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
logs="$out/logs"
mkdir -p "$logs"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; date -u
  echo "command: bash .b-k3/run1.sh \$OUT"; } | tee "$logs/device.txt"
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
C=(--primitives=select,partition,unique,rle,rbk --log2n= --compaction_log2n=10,12,13,14,16,18,20,24,28)
S=(--primitives=scan --dtypes=int32,float32,int64,float64 --log2n=16,20,24,28 --compaction_log2n=)
for round in 1 2 3; do
  for v in old new v12 v16; do step ab_compaction.log "${v}_compaction_$round" 100 "$v/primitives_bench" "${C[@]}"; done
  for v in old new; do step ab_scan.log "${v}_scan_$round" 100 "$v/primitives_bench" "${S[@]}"; done
done
step tests.log new_scan_gpu_test 200 new/scan_gpu_test
F='CompactionGpu.SelectIfEveryPredicate:CompactionGpu.SelectAllAndNone:CompactionGpu.SelectOptionalOutputs:CompactionGpu.SelectInPlace:CompactionGpu.SelectOver2To31:CompactionGpu.UniqueAndRunLengthEncode:CompactionGpu.BadArguments'
for v in v16 v12; do step tests.log "${v}_compaction_select" 150 "$v/compaction_gpu_test" --gtest_filter="$F"; done
rm -f "$logs/step.tmp"
cat "$logs/summary.txt"
