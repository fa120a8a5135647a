#!/usr/bin/env bash
# On the GPU machine, from the repository root with the folder
# tools/pack_gpu.sh makes (gpu_bundle/) beside it, or from inside that folder
# (pack_gpu.sh copies this script there): runs one kernel benchmark and keeps
# its output with the device, date and commit it ran on.
#   tools/kernel_bench.sh OUT_DIR [--bench=NAME] [--bundle=DIR] [BENCHMARK ARGS...]
# --bench: primitives_bench (default; every primitive against CUB's fastest
#   call), scan_variants, reproducible_bench or reduce_probe (the experiments
#   of perf/NOTES.md). The remaining arguments go to the benchmark as they
#   are: for primitives_bench --primitives=scan,reduce,... (prefixes of the
#   row names), --dtypes=int32,..., --log2n=16,20,24,28,
#   --compaction_log2n=20,28, --compaction_dtypes=..., --reps=N,
#   --settle_ms=N (kernels/bench/primitives_bench.cc); for scan_variants and
#   reproducible_bench the log2 sizes (scan_variants also --ab); for
#   reduce_probe `state` and/or `variants`.
# Output: OUT_DIR/NAME.log (the table), OUT_DIR/device.txt. The benchmark's
# exit status is the script's (1 when any output differs from CUB's).
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
usage="usage: kernel_bench.sh OUT_DIR [--bench=NAME] [--bundle=DIR] [BENCHMARK ARGS...]"
out="${1:?$usage}"
shift
bench=primitives_bench
bundle=""
args=()
for arg in "$@"; do
  case "$arg" in
    --bench=*) bench="${arg#--bench=}" ;;
    --bundle=*) bundle="${arg#--bundle=}" ;;
    *) args+=("$arg") ;;
  esac
done
# The bundle: as given, else the folder holding this script when it is the
# bundle's copy, else gpu_bundle/ at the repository root.
if [[ -z $bundle ]]; then
  here="$(cd "$(dirname "$0")" && pwd)"
  if [[ -f $here/benchmarks.txt ]]; then bundle="$here"; else bundle="$repo/gpu_bundle"; fi
fi
if ! grep -qx "$bench" "$bundle/benchmarks.txt" 2>/dev/null; then
  echo "no benchmark $bench in $bundle (run tools/pack_gpu.sh first; it packs:" \
    "$(tr '\n' ' ' <"$bundle/benchmarks.txt" 2>/dev/null))" >&2
  exit 2
fi
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  date -u
  echo "commit: $(cat "$bundle/commit.txt" 2>/dev/null || echo unknown)"
  echo "command: tools/kernel_bench.sh $out --bench=$bench ${args[*]+"${args[*]}"}"
} | tee "$out/device.txt"
"$bundle/$bench" ${args[@]+"${args[@]}"} 2>&1 | tee "$out/$bench.log"
exit "${PIPESTATUS[0]}"
