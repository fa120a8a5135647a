#!/usr/bin/env bash
# On a GPU machine, from the folder `tools/pack_gpu.sh --engine` makes (gpu_bundle/):
#   gpu_checks.sh OUTPUT_DIR tests   the engine's GPU tests (end to end against
#                                    the CPU backend, fault injection, the
#                                    sticky error), then compute-sanitizer's
#                                    memcheck, racecheck and synccheck over them
#   gpu_checks.sh OUTPUT_DIR soak [SECONDS]   the soak on the CUDA backend
#                                    (default 180 s)
# Each step gets STEP_TIMEOUT seconds (default 150; rc=124 when cut short).
# Logs go to OUTPUT_DIR, one summary line per step to OUTPUT_DIR/summary.txt.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: gpu_checks.sh OUTPUT_DIR tests|soak [SECONDS]}"
what="${2:?usage: gpu_checks.sh OUTPUT_DIR tests|soak [SECONDS]}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib"
sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
{ nvidia-smi -L; date -u; } | tee -a "$out/device.txt"

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
  *) echo "unknown: $what (tests or soak)"; exit 2 ;;
esac
