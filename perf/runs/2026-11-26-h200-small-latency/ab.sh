#!/usr/bin/env bash
# A/B of the 1K-scan probe (probe.sh) between two bundles on one machine, the
# old and the new alternating twice, then the engine GPU tests of the new one.
# ab.sh OLD_BUNDLE NEW_BUNDLE OUT_DIR
set -uo pipefail
old=$1; new=$2; out=$3; mkdir -p "$out"
here="$(cd "$(dirname "$0")" && pwd)"
for round in 1 2; do
  for which in old new; do
    bundle=$old; [[ $which == new ]] && bundle=$new
    bash "$here/probe.sh" "$bundle" "$out/$which$round" > "$out/$which$round.log" 2>&1
    echo "#### $which round $round"; grep -E "^==|^(scan|echo) |scan/echo|stage total|stage queue" "$out/$which$round.log"
  done
done
export LD_LIBRARY_PATH="$new/lib"
for t in cuda_service_gpu_test cuda_fault_gpu_test cuda_sticky_gpu_test cuda_lane_gpu_test \
         cuda_lane_sticky_gpu_test cuda_staging_gpu_test; do
  (cd "$new" && timeout 150 "./$t") > "$out/$t.log" 2>&1
  echo "$t exit $? $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$t.log" | tr '\n' ' ')"
done
tar -C "$out" -czf "$out.tgz" .
