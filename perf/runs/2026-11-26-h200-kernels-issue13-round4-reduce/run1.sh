#!/usr/bin/env bash
# Issue 13, fourth round (reduce), device call 1 (prepared; not run: the
# team's device time ran out, see README.md):
#   old/ = primitives_bench of main d303bd4; new/ = branch r4reduce (kernels
#   unchanged; primitives_bench with the reduce rows first and --settle_ms;
#   reduce_probe; the four kernel GPU tests), stripped, with the shared
#   libraries ldd names in lib/.
# SASS of ReduceKernel<int, SUM/MIN>; reduce_probe (state, variants);
# scan+reduce rows of old / new --settle_ms=0 / new --settle_ms=200
# alternating, three rounds; reduce rows alone (old); the four GPU tests.
#   bash .b-r4reduce/run1.sh OUT_DIR
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
logs="$out/logs"
mkdir -p "$logs"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader; date -u
  echo "command: bash .b-r4reduce/run1.sh \$OUT"; } | tee "$logs/device.txt"
step() {  # log name timeout command...
  local log=$1 name=$2 t=$3; shift 3
  local started=$SECONDS
  echo "=== $name: $*" >>"$logs/$log"
  (cd "$here" && timeout "$t" "$@") >"$logs/step.tmp" 2>&1
  local rc=$?
  cat "$logs/step.tmp" >>"$logs/$log"
  printf '%-26s rc=%-3d %4ds  %s\n' "$name" "$rc" $((SECONDS - started)) \
    "$(grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|all outputs match|SOME OUTPUTS|MISMATCH' "$logs/step.tmp" | head -3 | tr '\n' ' ')" |
    tee -a "$logs/summary.txt"
}
cuobjdump="$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)"
"$cuobjdump" -sass "$here/new/primitives_bench" 2>/dev/null |
  awk '/Function : /{keep = ($0 ~ /ReduceKernelI[ifld]LNS_2OpE[13]E/)} keep' >"$logs/reduce_sass.txt"
echo "sass lines: $(wc -l <"$logs/reduce_sass.txt")" | tee -a "$logs/summary.txt"
step probe.log probe 150 new/reduce_probe
S=(--primitives=scan,reduce --dtypes=int32,float32,int64,float64 --log2n=24,28 --compaction_log2n=)
for round in 1 2 3; do
  step ab.log "old_$round" 120 old/primitives_bench "${S[@]}"
  step ab.log "new_settle0_$round" 120 new/primitives_bench "${S[@]}" --settle_ms=0
  step ab.log "new_settle200_$round" 120 new/primitives_bench "${S[@]}" --settle_ms=200
done
step ab.log old_reduce_only 60 old/primitives_bench --primitives=reduce --dtypes=int32,float32,int64,float64 --log2n=24,28 --compaction_log2n=
for t in scan_gpu_test compaction_gpu_test reproducible_gpu_test bounds_gpu_test; do
  step tests.log "new_$t" 300 "new/$t"
done
rm -f "$logs/step.tmp"
cp "$0" "$logs/"
tar -C "$out" -czf "$out/call1.tgz" logs
cat "$logs/summary.txt"
