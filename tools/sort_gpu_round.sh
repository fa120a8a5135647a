#!/usr/bin/env bash
# On the GPU machine, from the repository root with gpu_bundle/ packed by
#   tools/pack_gpu.sh --only=sort_gpu_test,sort_bench,sort_variants
# the radix sort's device round in one call (perf/NOTES.md, issue 30), what a
# release needs first:
#   1. sort_gpu_test (against the CPU reference and CUB: every dtype, pairs,
#      indices, descending, segmented, poisoned outputs, past 2^31 keys),
#   2. with --bench, sort_bench, the sweep beside CUB (the results table),
#   3. with --service, a 64M int32 Sort through primserve (CUDA backend, over
#      loopback TCP: inline, shared memory, resident buffers) beside
#      numpy.sort(kind="stable") on one core (sort_service_bench.py; the
#      bundle then also holds primserve, sort_service_bench.py, shm_bench.py
#      and the Python modules in py/),
#   4. sort_variants (onesweep policies beside CUB) at each --variants size,
#   5. with --profile, Nsight Compute over one uint32 2^28 sort of ours and
#      one of CUB's (histogram and onesweep kernels: duration, occupancy,
#      warp stall reasons),
#   6. unless --no_memcheck, compute-sanitizer memcheck over sort_gpu_test's
#      small cases (MEMCHECK_FILTER: a gtest filter instead).
#   tools/sort_gpu_round.sh OUT_DIR [--bundle=DIR] [--profile] [--bench] [--no_memcheck]
#                           [--service] [--variants=28,24]
# --bundle: the packed folder when it is not gpu_bundle/ (a helper's
# worktree carries its own bundle in a folder of the session's checkout).
# --variants=: none. Each step gets STEP_TIMEOUT seconds (default 300).
# Logs: OUT_DIR/<step>.log, one line per step in OUT_DIR/summary.txt, the
# device in OUT_DIR/device.txt. Exits 1 if any step failed.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
bundle="$repo/gpu_bundle"
out="${1:?usage: sort_gpu_round.sh OUT_DIR [--bundle=DIR] [--profile] [--bench] [--no_memcheck] [--service] [--variants=LOG2N,...]}"
shift
profile=0
bench=0
memcheck=1
service=0
variants=28
for arg in "$@"; do
  case "$arg" in
    --bundle=*) bundle="$(cd "${arg#--bundle=}" && pwd)" ;;
    --profile) profile=1 ;;
    --bench) bench=1 ;;
    --no_memcheck) memcheck=0 ;;
    --service) service=1 ;;
    --variants=*) variants="${arg#--variants=}" ;;
    *) echo "unknown argument: $arg"; exit 2 ;;
  esac
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  date -u
  echo "commit: $(cat "$bundle/commit.txt")"
  echo "command: sort_gpu_round.sh $out $*"
} | tee "$out/device.txt"

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

# What a release needs first (tests, the table, the service row), then the
# experiments.
step sort_gpu_test ./sort_gpu_test
if [[ $bench -eq 1 ]]; then step sort_bench ./sort_bench; fi
if [[ $service -eq 1 ]]; then
  "$bundle/primserve" --backend=cuda --shared_memory --host=127.0.0.1 --port=50071 \
    --metrics_port=-1 >"$out/server.log" 2>&1 &
  server=$!
  PYTHONPATH="$bundle/py" step sort_service python3 sort_service_bench.py \
    --address=127.0.0.1:50071 --n=67108864 --runs=3
  kill -TERM "$server"
  wait "$server"
fi
if [[ -n $variants && $variants != none ]]; then
  # shellcheck disable=SC2046
  step sort_variants ./sort_variants $(tr ',' ' ' <<<"$variants")
fi
if [[ $profile -eq 1 ]]; then
  ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
  # The first uint32 row: ours (check run: histogram, 4 passes), then CUB's.
  step ncu_uint32_2pow28 "$ncu" --clock-control none -k 'regex:Onesweep|Histogram' -c 10 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats ./sort_bench --log2n=28 --reps=1 --segmented=0
fi
if [[ $memcheck -eq 1 ]]; then
  sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  GTEST_FILTER="${MEMCHECK_FILTER:--*2Pow28*:*PastTwoToThe31*:*MatchesCub*}" \
    step memcheck_sort_gpu_test "$sanitizer" --tool memcheck --error-exitcode 99 ./sort_gpu_test
fi
exit $status
