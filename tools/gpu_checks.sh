#!/usr/bin/env bash
# On a GPU machine, with the folder `tools/pack_gpu.sh --engine` makes
# (gpu_bundle/ at the repository root, or the folder holding this script when
# it is the bundle's copy):
#   gpu_checks.sh OUTPUT_DIR tests   the engine's GPU tests (end to end against
#                                    the CPU backend, fault injection, the
#                                    sticky error), then compute-sanitizer's
#                                    memcheck, racecheck and synccheck over them
#   gpu_checks.sh OUTPUT_DIR soak [SECONDS]   the soak on the CUDA backend
#                                    (default 180 s)
#   gpu_checks.sh OUTPUT_DIR verify  every answer of 2^25 + 1 element scans,
#                                    selects, reduce-by-keys and uniques, unary
#                                    and streamed, against the CPU reference
# Each step gets STEP_TIMEOUT seconds (default 150; rc=124 when cut short).
# Logs go to OUTPUT_DIR, one summary line per step to OUTPUT_DIR/summary.txt.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[[ -x $here/primserve ]] || here="$(cd "$here/.." && pwd)/gpu_bundle"
out="${1:?usage: gpu_checks.sh OUTPUT_DIR tests|soak [SECONDS]|verify}"
what="${2:?usage: gpu_checks.sh OUTPUT_DIR tests|soak [SECONDS]|verify}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib"
sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
{ nvidia-smi -L; date -u; echo "commit: $(cat "$here/commit.txt" 2>/dev/null || echo unknown)"; } |
  tee -a "$out/device.txt"

step() {  # name, command...: runs it, logs it, records its exit status
  local name=$1; shift
  local started=$SECONDS
  timeout "${STEP_TIMEOUT:-150}" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  printf '%-24s rc=%-3d %4ds  %s\n' "$name" "$rc" $((SECONDS - started)) \
    "$(grep -E '^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|RACECHECK SUMMARY|^soak:|^leave: (cuda|cpu|gauges)' "$out/$name.log" |
       tr '\n' ' ')" | tee -a "$out/summary.txt"
}

# Under the sanitizers: the kernels in exact-size buffers (memcheck), the
# fault tests (every RPC, the pipelined scan, the failure paths) and the
# service test (memcheck: all of it; synccheck: its batched small scans;
# racecheck takes minutes over it, so only the fault tests). API errors are
# not reported: the fault tests cause them on purpose, and the backend checks
# every CUDA call's result itself.
sanitize() {  # tool, name, binary, args...
  local tool=$1 name=$2; shift 2
  step "${tool}_$name" "$sanitizer" --tool "$tool" --report-api-errors no --error-exitcode 99 "$@"
}

case "$what" in
  tests)
    step bounds_gpu_test "$here/bounds_gpu_test"
    step cuda_service_gpu_test "$here/cuda_service_gpu_test"
    step cuda_fault_gpu_test "$here/cuda_fault_gpu_test"
    step cuda_sticky_gpu_test "$here/cuda_sticky_gpu_test"
    sanitize memcheck bounds "$here/bounds_gpu_test"
    sanitize memcheck faults "$here/cuda_fault_gpu_test"
    sanitize memcheck service "$here/cuda_service_gpu_test"
    sanitize racecheck faults "$here/cuda_fault_gpu_test"
    sanitize synccheck faults "$here/cuda_fault_gpu_test"
    sanitize synccheck batched "$here/cuda_service_gpu_test" --gtest_filter='*Batched*'

    ;;
  soak)
    STEP_TIMEOUT=$((${3:-180} + 120)) step soak "$here/soak_test" --backend=cuda \
      --soak_seconds="${3:-180}" --callers=16
    ;;
  verify)
    # An odd size (2^25 + 1), every answer checked; primload exits 1 on a wrong one.
    "$here/primserve" --port=50063 --metrics_port=-1 >"$out/verify_server.log" 2>&1 &
    server=$!
    for _ in $(seq 50); do "$here/primctl" --address=localhost:50063 health >/dev/null 2>&1 && break; sleep 0.2; done
    for rpc in scan select reduce_by_key unique; do
      for piece in 0 4194304; do
        step "verify_${rpc}_piece$piece" "$here/primload" --address=localhost:50063 --rpc=$rpc \
          --predicate=gt --operand=0 --n=33554433 --concurrency=1,2 --verify --verify_every=1 \
          --stream_piece_bytes=$piece --warmup_seconds=0.5 --measure_seconds=2
      done
    done
    kill -TERM "$server"; wait "$server"
    ;;
  *) echo "unknown: $what (tests, soak or verify)"; exit 2 ;;
esac
