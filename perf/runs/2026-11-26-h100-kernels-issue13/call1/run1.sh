#!/usr/bin/env bash
# Issue 13 (compaction look-back, helper K), device call 1: the compaction
# family before (old/, main 7520964) and after (new/: 1500/800 ns delays;
# newb/: 700/350 ns) in alternation, small-n scans and reduces of the old
# build, then the kernel GPU tests of new/.
#   bash .b-k/run1.sh OUT_DIR
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; date -u
  echo "command: bash .b-k/run1.sh \$OUT"; } | tee "$out/device.txt"
step() {  # name timeout command...
  local name=$1 t=$2; shift 2
  local started=$SECONDS
  (cd "$here" && timeout "$t" "$@") >"$out/$name.log" 2>&1
  local rc=$?
  printf '%-26s rc=%-3d %4ds  %s\n' "$name" "$rc" $((SECONDS - started)) \
    "$(grep -E '^\[  (PASSED|FAILED)  \]|all outputs match|SOME OUTPUTS' \
       "$out/$name.log" | tr '\n' ' ')" | tee -a "$out/summary.txt"
}
C=(--primitives=select,partition,unique,rle,rbk --log2n= --compaction_log2n=12,16,20,24,28)
for round in 1 2; do
  for v in old new newb; do
    [[ -x "$here/$v/primitives_bench" ]] && step "${v}_compaction_$round" 150 "$v/primitives_bench" "${C[@]}"
  done
done
step old_small_scan 150 old/primitives_bench --primitives=scan,reduce --log2n=10,12,14,16,18 --compaction_log2n=
step compaction_gpu_test 300 new/compaction_gpu_test
step reproducible_gpu_test 200 new/reproducible_gpu_test
step scan_gpu_test 200 new/scan_gpu_test
step bounds_gpu_test 60 new/bounds_gpu_test
cat "$out/summary.txt"
