#!/usr/bin/env bash
# On the GPU machine, with the folder `tools/pack_gpu.sh --engine` makes
# (gpu_bundle/ at the repository root, or the folder holding this script when
# it is the bundle's copy): an int32 SUM scan of more than 2^31 elements
# through ScanStream (primctl in pieces) against a CUDA server. Checks the
# answer's first and last elements against the closed form i(i+1)/2 mod 2^32
# and samples the server's resident memory against its idle size (the bound:
# idle + 1 GiB).
#   tools/huge_stream_check.sh OUT_DIR [--n=2147495993] [--piece_bytes=8388608]
#                                      [--port=50070] [--bundle=DIR]
# Output: OUT_DIR/huge_summary.txt (the verdict, also printed),
# huge_primctl.txt, huge_rss_kb.txt, huge_server.log, huge_device.txt.
# Exits 1 when the answer is wrong or the bound is broken.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: huge_stream_check.sh OUT_DIR [--n=N] [--piece_bytes=B] [--port=P] [--bundle=DIR]}"
shift
n=2147495993  # 2^31 + 12345: past int32 element counts and 2 GiB messages
piece_bytes=8388608
port=50070
bundle=""
for arg in "$@"; do
  case "$arg" in
    --n=*) n="${arg#--n=}" ;;
    --piece_bytes=*) piece_bytes="${arg#--piece_bytes=}" ;;
    --port=*) port="${arg#--port=}" ;;
    --bundle=*) bundle="${arg#--bundle=}" ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done
if [[ -z $bundle ]]; then
  here="$(cd "$(dirname "$0")" && pwd)"
  if [[ -x $here/primserve ]]; then bundle="$here"; else bundle="$repo/gpu_bundle"; fi
fi
[[ -x $bundle/primserve && -x $bundle/primctl ]] ||
  { echo "no primserve/primctl in $bundle (run tools/pack_gpu.sh --engine first)" >&2; exit 2; }
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  nvidia-smi -L
  date -u
  echo "commit: $(cat "$bundle/commit.txt" 2>/dev/null || echo unknown)"
  echo "command: tools/huge_stream_check.sh $out --n=$n --piece_bytes=$piece_bytes"
} >"$out/huge_device.txt"

"$bundle/primserve" --port="$port" --metrics_port=-1 >"$out/huge_server.log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null' EXIT
for _ in $(seq 50); do "$bundle/primctl" --address="localhost:$port" health >/dev/null 2>&1 && break; sleep 0.2; done
# Warm the engine (lanes, staging) before reading the idle size.
"$bundle/primctl" --address="localhost:$port" scan --generate=sequence --n=67108864 \
  --piece_bytes="$piece_bytes" >/dev/null
idle_kb=$(awk '/VmRSS/ {print $2}' "/proc/$server/status")
(while kill -0 "$server" 2>/dev/null; do
  awk '/VmRSS/ {print $2}' "/proc/$server/status"; sleep 0.2
done) >"$out/huge_rss_kb.txt" &
sampler=$!
start=$(date +%s.%N)
"$bundle/primctl" --address="localhost:$port" --timeout_seconds=600 scan --dtype=int32 \
  --generate=sequence --n="$n" --piece_bytes="$piece_bytes" >"$out/huge_primctl.txt" 2>&1
rc=$?
end=$(date +%s.%N)
peak_kb=$(sort -n "$out/huge_rss_kb.txt" | tail -1)
kill "$sampler" 2>/dev/null
kill -TERM "$server"; wait "$server"
trap - EXIT
python3 - "$n" "$idle_kb" "$peak_kb" "$rc" "$start" "$end" "$out/huge_primctl.txt" <<'PY' | tee "$out/huge_summary.txt"
import re, sys
n, idle, peak, rc = (int(v) for v in sys.argv[1:5])
start, end, path = float(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
text = open(path).read()
print(text.strip())
def s32(v):
    v %= 1 << 32
    return v - (1 << 32) if v >= 1 << 31 else v
first = [s32(i * (i + 1) // 2) for i in range(4)]
last = [s32(i * (i + 1) // 2) for i in range(n - 4, n)]
m = re.search(r"output: (\d+) x INT32 \[(.*)\]", text)
equal = False
if m:
    nums = [int(x) for x in m.group(2).replace("...,", "").split(",") if x.strip()]
    equal = int(m.group(1)) == n and nums[:4] == first and nums[-4:] == last
within = peak - idle <= 1024 * 1024
print(f"primctl exit {rc}; {n} elements; first {first} last {last}: {'equal' if equal else 'NOT EQUAL'}")
print(f"wall {end - start:.1f} s; server RSS idle {idle / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB, "
      f"peak - idle {(peak - idle) / 1024:.0f} MiB (bound 1024 MiB: {'within' if within else 'OVER'})")
sys.exit(0 if rc == 0 and equal and within else 1)
PY
exit "${PIPESTATUS[0]}"
