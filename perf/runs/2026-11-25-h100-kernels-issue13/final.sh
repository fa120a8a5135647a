#!/usr/bin/env bash
# Issue 13's final GPU call: the kernel GPU tests after the last kernel change,
# the A/B of the scan policy (OLD vs DEFAULT), and the full primitives_bench.
#   .kbundle13/final.sh OUT_DIR      (binaries stripped beside this script)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; date -u
  echo "command: .kbundle13/final.sh \$OUT"; } | tee "$out/device.txt"
step() {  # name timeout command...
  local name=$1 t=$2; shift 2
  local started=$SECONDS
  (cd "$here" && timeout "$t" "$@") >"$out/$name.log" 2>&1
  local rc=$?
  printf '%-26s rc=%-3d %4ds  %s\n' "$name" "$rc" $((SECONDS - started)) \
    "$(grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|all outputs match|SOME OUTPUTS|wrong outputs' \
       "$out/$name.log" | tr '\n' ' ')" | tee -a "$out/summary.txt"
}
step scan_gpu_test 300 ./scan_gpu_test
step reproducible_gpu_test 300 ./reproducible_gpu_test
step bounds_gpu_test 120 ./bounds_gpu_test
step compaction_gpu_test 300 ./compaction_gpu_test
step primitives_bench 300 ./primitives_bench
step scan_variants_ab 200 ./scan_variants --ab 20 24 28
cat "$out/summary.txt"
