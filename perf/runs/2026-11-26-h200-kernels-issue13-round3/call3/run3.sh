#!/usr/bin/env bash
# Issue 13, third round (helper K3), device call 3:
#   old/ = main ff4111f; new2/ = dab551d (float MIN/MAX scans over ordered keys
#   kept in place); new3/ = e0742f4 (threads with no NaN and no zero use the
#   hardware min/max; keys mapped on the fly).
# scan rows of old/new2/new3 alternating, three rounds; the four kernel GPU
# tests of new3; memcheck over the bit-exact scan test; the full
# primitives_bench table of new3.
#   bash .b-k3/run3.sh OUT_DIR
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
logs="$out/logs"
mkdir -p "$logs"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; date -u
  echo "command: bash .b-k3/run3.sh \$OUT"; } | tee "$logs/device.txt"
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
S=(--primitives=scan --dtypes=int32,float32,int64,float64 --log2n=12,16,20,24,28 --compaction_log2n=)
for round in 1 2 3; do
  for v in old new2 new3; do step ab_scan.log "${v}_scan_$round" 100 "$v/primitives_bench" "${S[@]}"; done
done
for t in scan_gpu_test compaction_gpu_test reproducible_gpu_test bounds_gpu_test; do
  step tests.log "new3_$t" 300 "new3/$t"
done
san="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
step memcheck.log memcheck_scan_bits 120 "$san" --tool memcheck --error-exitcode 99 new3/scan_gpu_test \
  --gtest_filter='ScanGpuTest.FloatMinMaxZerosAndNanPayloadsBitExact'
step full_bench.log new3_full 300 new3/primitives_bench
rm -f "$logs/step.tmp"
cat "$logs/summary.txt"
