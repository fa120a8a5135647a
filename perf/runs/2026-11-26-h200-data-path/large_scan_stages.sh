#!/usr/bin/env bash
# Where a 64M int32 unary scan's time goes in the server: large scans alone
# against a fresh server (TCP, c=1, beside Echo), then the server's stage
# histograms for Scan (queue, h2d, kernel, d2h: CUDA events; total: from the
# handler's start to the answer). large_scan_stages.sh OUT_DIR
set -uo pipefail
here="$(cd .b-final && pwd)"
out="${1:?}"; mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib"
{ nvidia-smi -L; date -u; } > "$out/stages_device.txt"
"$here/primserve" --port=50064 --metrics_port=9474 --enable_echo > "$out/stages_server.log" 2>&1 &
server=$!
for _ in $(seq 50); do "$here/primctl" --address=localhost:50064 health >/dev/null 2>&1 && break; sleep 0.2; done
"$here/primload" --address=localhost:50064 --rpc=scan --n=67108864 --distinct_requests=2 \
  --concurrency=1 --channels=1 --mode=both --warmup_seconds=3 --measure_seconds=10 > "$out/stages_load.txt" 2>&1
python3 -c "import urllib.request; print(urllib.request.urlopen('http://localhost:9474/metrics').read().decode())" |
  grep -E '^primserve_request_duration_seconds_(sum|count)\{rpc="Scan"' > "$out/stages_metrics.txt"
kill -TERM $server; wait $server
cat "$out/stages_load.txt"
python3 - "$out/stages_metrics.txt" <<'PY'
import re, sys
s, c = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r'primserve_request_duration_seconds_(sum|count)\{(.*)\} (\S+)', line)
    if not m: continue
    stage = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))['stage']
    (s if m.group(1) == 'sum' else c)[stage] = float(m.group(3))
for k in ('queue', 'h2d', 'kernel', 'd2h', 'total'):
    if c.get(k): print(f"Scan stage {k}: mean {1e3 * s[k] / c[k]:.2f} ms over {int(c[k])} requests")
PY
