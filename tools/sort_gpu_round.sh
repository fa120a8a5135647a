#!/usr/bin/env bash
# On the GPU machine, from the repository root with gpu_bundle/ packed by
#   tools/pack_gpu.sh --only=sort_gpu_test,sort_bench,sort_variants
# the radix sort's whole device round in one call (perf/NOTES.md, issue 30):
#   1. sort_gpu_test (against the CPU reference and CUB: every dtype, pairs,
#      indices, descending, segmented, poisoned outputs, past 2^31 keys),
#   2. compute-sanitizer memcheck over its small cases,
#   3. sort_variants (onesweep policies beside CUB) at VARIANT_LOG2N,
#   4. with --profile, Nsight Compute over one uint32 2^28 sort of ours and
#      one of CUB's (histogram and onesweep kernels: duration, occupancy,
#      warp stall reasons),
#   5. sort_bench, the sweep beside CUB (the results table).
#   tools/sort_gpu_round.sh OUT_DIR [--profile] [--variants=28,24]
# Logs: OUT_DIR/<step>.log, one line per step in OUT_DIR/summary.txt (from
# run_all.sh), the device in OUT_DIR/device.txt. Exits 1 if any step failed.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
bundle="$repo/gpu_bundle"
out="${1:?usage: sort_gpu_round.sh OUT_DIR [--profile] [--variants=LOG2N,...]}"
shift
profile=0
variants=28
for arg in "$@"; do
  case "$arg" in
    --profile) profile=1 ;;
    --variants=*) variants="${arg#--variants=}" ;;
    *) echo "unknown argument: $arg"; exit 2 ;;
  esac
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
"$bundle/run_all.sh" "$out" --only=sort_gpu_test || status=1

step() {  # name, command...: as run_all.sh's steps, appended to its summary
  local name=$1; shift
  local started=$SECONDS
  (cd "$bundle" && timeout "${STEP_TIMEOUT:-300}" "$@") >"$out/$name.log" 2>&1
  local rc=$?
  [[ $rc -eq 0 ]] || status=1
  printf '%-28s rc=%-3d %4ds  %s\n' "$name" "$rc" $((SECONDS - started)) \
    "$(grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|all outputs match|SOME OUTPUTS|MISMATCH' \
       "$out/$name.log" | sort -u | tr '\n' ' ')" | tee -a "$out/summary.txt"
}

sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
GTEST_FILTER='-*2Pow28*:*PastTwoToThe31*:*MatchesCub*' \
  step memcheck_sort_gpu_test "$sanitizer" --tool memcheck --error-exitcode 99 ./sort_gpu_test
# shellcheck disable=SC2046
step sort_variants ./sort_variants $(tr ',' ' ' <<<"$variants")
if [[ $profile -eq 1 ]]; then
  ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
  # The first uint32 row: ours (check run: histogram, 4 passes), then CUB's.
  step ncu_uint32_2pow28 "$ncu" --clock-control none -k 'regex:Onesweep|Histogram' -c 10 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats ./sort_bench --log2n=28 --reps=1 --segmented=0
fi
step sort_bench ./sort_bench
exit $status
