#!/usr/bin/env bash
# On the GPU machine, from the repository root with the folder
# `tools/pack_gpu.sh --engine` makes (gpu_bundle/): re-runs one row of each
# table of perf/README.md, each through the script that row names, and prints
# what it measured beside the committed figure for this card (H200 or H100):
#   1. kernels: int32 inclusive SUM scan of 2^28 elements against CUB's
#      InclusiveSum (tools/kernel_bench.sh);
#   2. service: a 64M-element int32 scan over loopback TCP, unary, beside Echo
#      of the same bytes (tools/gpu_engine_bench.sh --only=large_scan_vs_echo);
#   3. shared memory: the 64M scan with input and output in one registered
#      system region, from Python; and CUDA IPC: a 2^28 scan in place in
#      another process's device memory over a Unix socket
#      (tools/shm_ipc_bench.sh --only=python_shm,cuda_ipc).
#   tools/perf_rerun_rows.sh OUT_DIR
# About 3 minutes. Every step's raw output stays under OUT_DIR. Exits 1 if a
# step failed (a wrong answer among them).
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
bundle="$repo/gpu_bundle"
out="${1:?usage: perf_rerun_rows.sh OUT_DIR}"
for binary in primitives_bench primserve primctl primload primload_cuda shm_bench.py; do
  [[ -e $bundle/$binary ]] ||
    { echo "no $binary in $bundle (run tools/pack_gpu.sh --engine first)" >&2; exit 2; }
done
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
card="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
case "$card" in
  *H200*) card=H200 ;;
  *H100*) card=H100 ;;
  *) echo "card $card: perf/README.md has no figures for it; measuring anyway" ;;
esac
echo "card: $card; bundle commit: $(cat "$bundle/commit.txt" 2>/dev/null || echo unknown); $(date -u)"
status=0

# The committed figure of each row for this card, as perf/README.md gives it.
committed() {  # row
  case "$1/$card" in
    kernels/H200) echo "664.4 us vs CUB 687.3 us, 1.034x (2026-11-26, e0742f4, perf/runs/2026-11-26-h200-kernels-issue13-round3)" ;;
    kernels/H100) echo "843.4 us vs CUB 880.9 us, 1.045x (2026-11-26, a19262c, perf/runs/2026-11-26-h100-kernels-issue13-round2)" ;;
    service/H200) echo "2.112 GB/s, p50 253.8 ms, 0.808x Echo (2026-11-26, f78d3b8, perf/runs/2026-11-26-h200-data-path)" ;;
    service/H100) echo "1.646 GB/s, p50 319.6 ms, 0.708x Echo (2026-11-26, ae7191f, perf/runs/2026-11-26-h100-data-path)" ;;
    shm/H200) echo "6.91 ms, 77.7 GB/s; numpy.cumsum 215.8-217.0 ms (2026-11-25, 92c595a, perf/runs/2026-11-25-h200-shm)" ;;
    shm/H100) echo "6.94 ms, 77.4 GB/s; numpy.cumsum 239 ms (2026-11-25, 3b51589, perf/runs/2026-11-25-h100-shm-table)" ;;
    ipc/H100) echo "p50 1.248 ms; kernel alone 0.908 ms (2026-11-25, 3b51589, perf/runs/2026-11-25-h100-shm-table)" ;;
    *) echo "none committed for this card" ;;
  esac
}
report() {  # row, title, measured lines
  local row=$1 title=$2; shift 2
  printf '\n== %s\n   committed: %s\n   now:\n' "$title" "$(committed "$row")"
  printf '%s\n' "$@" | sed 's/^/     /'
}

# 1. Kernels.
"$repo/tools/kernel_bench.sh" "$out/kernels" --primitives=scan --dtypes=int32 --log2n=28 \
  --compaction_dtypes= >"$out/kernels.log" 2>&1 || status=1
report kernels "kernels: scan_inclusive_sum int32 2^28 (ours us, CUB us, ours/CUB)" \
  "$(grep -E '^\| scan_inclusive_sum +\| int32' "$out/kernels/primitives_bench.log" ||
     echo "no row: see $out/kernels.log")"

# 2. The service against Echo.
"$repo/tools/gpu_engine_bench.sh" "$out/service" --only=large_scan_vs_echo >"$out/service.log" 2>&1 ||
  status=1
report service "service: 64M int32 scan, unary over TCP, concurrency 1, beside Echo" \
  "$(grep -E '^(target|scan|echo|scan/echo) +(concurrency|1) ' "$out/service/large_scan_vs_echo.txt" ||
     echo "no figures: see $out/service.log")"

# 3. Shared memory and CUDA IPC, against one server with --shared_memory.
"$repo/tools/shm_ipc_bench.sh" "$out/shm" --only=python_shm,cuda_ipc >"$out/shm.log" 2>&1 || status=1
report shm "shared memory: 64M int32 scan in and out of a system region, Python (median of 7)" \
  "$(grep -E 'shared memory|inline|numpy' "$out/shm/python_shm.txt" || echo "no figures: see $out/shm.log")"
report ipc "CUDA IPC: 2^28 int32 scan in place in another process's device memory, Unix socket" \
  "$(grep -m2 -E '^(target|scan) ' "$out/shm/cuda_ipc.txt" || echo "no figures: see $out/shm.log")"
exit $status
