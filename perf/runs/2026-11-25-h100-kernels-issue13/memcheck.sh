#!/usr/bin/env bash
# compute-sanitizer memcheck over the scan GPU tests after issue 13's look-back change.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
export LD_LIBRARY_PATH="$here/lib"
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
{ nvidia-smi -L; date -u; echo "command: .kbundle13/memcheck.sh \$OUT ($cs)"; } > "$out/device.txt"
cd "$here"
timeout 420 "$cs" --tool memcheck --leak-check full --error-exitcode 9 ./scan_gpu_test \
  --gtest_filter='ScanGpuTest.Int32:ScanGpuTest.Float64:ScanWithCarryGpuTest.Int64:SegmentedScanGpuTest.Float32' \
  > "$out/memcheck_scan_gpu_test.log" 2>&1
echo "exit $?" >> "$out/memcheck_scan_gpu_test.log"
tail -n 8 "$out/memcheck_scan_gpu_test.log"
