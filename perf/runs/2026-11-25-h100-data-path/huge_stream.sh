#!/usr/bin/env bash
# Issue 11: a scan of 2^31 + 12345 int32 through ScanStream (primctl, 8 MiB
# pieces) against the CUDA server; its first and last elements checked against
# the closed form, and the server's resident memory sampled against idle.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?}"
export LD_LIBRARY_PATH="$here/lib"
n=2147495993
{ nvidia-smi -L; date -u; echo "command: .ebundle11/huge_stream.sh \$OUT"; } > "$out/huge_device.txt"
"$here/primserve" --port=50070 --metrics_port=-1 > "$out/huge_server.log" 2>&1 &
server=$!
for _ in $(seq 50); do "$here/primctl" --address=localhost:50070 health >/dev/null 2>&1 && break; sleep 0.2; done
# Warm the engine (lanes, staging) before reading idle.
"$here/primctl" --address=localhost:50070 scan --generate=sequence --n=67108864 --piece_bytes=8388608 >/dev/null
idle_kb=$(awk '/VmRSS/ {print $2}' /proc/$server/status)
( while kill -0 $server 2>/dev/null; do awk '/VmRSS/ {print $2}' /proc/$server/status; sleep 0.2; done ) > "$out/huge_rss_kb.txt" &
sampler=$!
start=$(date +%s.%N)
"$here/primctl" --address=localhost:50070 --timeout_seconds=600 scan --dtype=int32 --generate=sequence \
  --n=$n --piece_bytes=8388608 > "$out/huge_primctl.txt" 2>&1
rc=$?
end=$(date +%s.%N)
peak_kb=$(sort -n "$out/huge_rss_kb.txt" | tail -1)
kill $sampler 2>/dev/null
kill -TERM $server; wait $server
python3 - "$n" "$idle_kb" "$peak_kb" "$rc" "$start" "$end" "$out/huge_primctl.txt" <<'PY' | tee "$out/huge_summary.txt"
import re, sys
n, idle, peak, rc, start, end, path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
text = open(path).read()
print(text.strip())
def s32(v):
    v %= 1 << 32
    return v - (1 << 32) if v >= 1 << 31 else v
first = [s32(i * (i + 1) // 2) for i in range(4)]
last = [s32(i * (i + 1) // 2) for i in range(n - 4, n)]
m = re.search(r"output: (\d+) x INT32 \[(.*)\]", text)
ok = False
if m:
    nums = [int(x) for x in m.group(2).replace("...,", "").split(",") if x.strip()]
    ok = int(m.group(1)) == n and nums[:4] == first and nums[-4:] == last
print(f"primctl exit {rc}; {n} elements; first {first} last {last}: {'equal' if ok else 'NOT EQUAL'}")
print(f"wall {end - start:.1f} s; server RSS idle {idle / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB, "
      f"peak - idle {(peak - idle) / 1024:.0f} MiB (target <= 1024 MiB)")
PY
