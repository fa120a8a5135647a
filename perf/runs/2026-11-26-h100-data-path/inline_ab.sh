#!/usr/bin/env bash
# 1K int32 scans at concurrency 1 and 256 against the CUDA server with
# --run_small_requests_inline on and off (alternating, twice), each beside
# Echo on the same server: inline_ab.sh OUT_DIR
set -uo pipefail
here="$(cd .b-final && pwd)"
out="${1:?}"; mkdir -p "$out/inline_ab"
export LD_LIBRARY_PATH="$here/lib"
for round in 1 2; do
  for inline in true false; do
    "$here/primserve" --port=50071 --metrics_port=-1 --enable_echo --batch_threads=8 \
      --run_small_requests_inline=$inline > "$out/inline_ab/server_${inline}_$round.log" 2>&1 &
    server=$!
    for _ in $(seq 50); do "$here/primctl" --address=localhost:50071 health >/dev/null 2>&1 && break; sleep 0.2; done
    "$here/primload" --address=localhost:50071 --rpc=scan --n=1024 --concurrency=1,256 --mode=both \
      --channels=4 --warmup_seconds=1 --measure_seconds=3 > "$out/inline_ab/inline_${inline}_$round.txt" 2>&1
    kill -TERM $server; wait $server
    echo "== inline=$inline round $round"; grep -E '^(scan|echo)' "$out/inline_ab/inline_${inline}_$round.txt"
  done
done
