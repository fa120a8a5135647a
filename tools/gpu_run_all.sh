#!/usr/bin/env bash
# On the GPU machine, with the folder tools/pack_gpu.sh makes (gpu_bundle/ at
# the repository root, or the folder holding this script when it is the
# bundle's copy, run_all.sh): runs every GPU test (tests.txt) and benchmark
# (benchmarks.txt), then compute-sanitizer memcheck over the tests named with
# --memcheck.
#   tools/gpu_run_all.sh OUT_DIR [--only=NAME,...] [--memcheck=NAME,...]
# --only limits the run to the named tests and benchmarks. Each step gets
# STEP_TIMEOUT seconds (default 600; rc=124 when cut short). Logs go to
# OUT_DIR/NAME.log, one line per step to OUT_DIR/summary.txt, the device,
# date and command to OUT_DIR/device.txt. Exits 1 if any step failed.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[[ -f $here/tests.txt ]] || here="$(cd "$here/.." && pwd)/gpu_bundle"
out="${1:?usage: run_all.sh OUT_DIR [--only=NAME,...] [--memcheck=NAME,...]}"
shift
only="" memcheck=""
for arg in "$@"; do
  case "$arg" in
    --only=*) only="${arg#--only=}" ;;
    --memcheck=*) memcheck="${arg#--memcheck=}" ;;
    *) echo "unknown argument: $arg"; exit 2 ;;
  esac
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  date -u
  echo "commit: $(cat "$here/commit.txt" 2>/dev/null || echo unknown)"
  echo "command: run_all.sh $out $*"
} | tee "$out/device.txt"

status=0
step() {  # name, command...: runs it, logs it, records its exit status
  local name=$1; shift
  local started=$SECONDS
  (cd "$here" && timeout "${STEP_TIMEOUT:-600}" "$@") >"$out/$name.log" 2>&1
  local rc=$?
  [[ $rc -eq 0 ]] || status=1
  printf '%-28s rc=%-3d %4ds  %s\n' "$name" "$rc" $((SECONDS - started)) \
    "$(grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|all outputs match|SOME OUTPUTS' \
       "$out/$name.log" | tr '\n' ' ')" | tee -a "$out/summary.txt"
}
wanted() { [[ -z $only || ",$only," == *",$1,"* ]]; }

while read -r name; do
  if wanted "$name"; then step "$name" "./$name"; fi
done <"$here/tests.txt"
while read -r name; do
  if wanted "$name"; then step "$name" "./$name"; fi
done <"$here/benchmarks.txt"
for name in ${memcheck//,/ }; do
  step "memcheck_$name" "$sanitizer" --tool memcheck --error-exitcode 99 "./$name"
done
exit $status
