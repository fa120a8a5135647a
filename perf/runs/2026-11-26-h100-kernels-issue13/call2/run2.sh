#!/usr/bin/env bash
# Issue 13 (compaction look-back, helper K), device call 2: the compaction
# family of old/ (main 7520964), new/ (first round, commit 8e13ffe) and
# cand/ (second round) in alternation; the full primitives_bench table and
# small-n scans/reduces of cand/; the kernel GPU tests of cand/.
# Few output files (a call returns at most 8).
#   bash .b-k/run2.sh OUT_DIR
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; date -u
  echo "command: bash .b-k/run2.sh \$OUT"; } | tee "$out/device.txt"
step() {  # log name timeout command...
  local log=$1 name=$2 t=$3; shift 3
  local started=$SECONDS
  echo "=== $name: $*" >>"$out/$log"
  (cd "$here" && timeout "$t" "$@") >"$out/step.tmp" 2>&1
  local rc=$?
  cat "$out/step.tmp" >>"$out/$log"
  printf '%-26s rc=%-3d %4ds  %s\n' "$name" "$rc" $((SECONDS - started)) \
    "$(grep -E '^\[  (PASSED|FAILED)  \]|all outputs match|SOME OUTPUTS' "$out/step.tmp" | tr '\n' ' ')" |
    tee -a "$out/summary.txt"
}
C=(--primitives=select,partition,unique,rle,rbk --log2n= --compaction_log2n=12,16,20,24,28)
for round in 1 2; do
  for v in old new cand; do step ab.log "${v}_compaction_$round" 150 "$v/primitives_bench" "${C[@]}"; done
done
step full_bench.log cand_full 300 cand/primitives_bench
step small.log cand_small 150 cand/primitives_bench --primitives=scan,reduce,segreduce --log2n=10,12,14,16,18 --compaction_log2n=
step small.log old_small 150 old/primitives_bench --primitives=scan,reduce,segreduce --log2n=10,12,14,16,18 --compaction_log2n=
for t in compaction_gpu_test reproducible_gpu_test scan_gpu_test bounds_gpu_test; do
  step tests.log "$t" 300 "cand/$t"
done
rm -f "$out/step.tmp"
cat "$out/summary.txt"
