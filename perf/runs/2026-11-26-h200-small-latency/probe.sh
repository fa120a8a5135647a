#!/usr/bin/env bash
# Where a 1K-element scan's time goes at concurrency 1, on a GPU machine:
# primload against primserve (CUDA backend, inline runs on and off; CPU
# backend) beside Echo on the same server, and the server's own stage
# histograms (queue, h2d, kernel, d2h, compute, total) after each load.
# Usage: probe.sh BUNDLE_DIR OUTPUT_DIR
set -uo pipefail
b="${1:?bundle}"; out="${2:?out}"; mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib"
nvidia-smi -L | tee "$out/device.txt"; date -u | tee -a "$out/device.txt"; nproc | tee -a "$out/device.txt"
port=50071; mport=9481
run() {  # name, server flags...
  local name=$1; shift
  "$b/primserve" --port=$port --metrics_port=$mport --enable_echo "$@" >"$out/$name.server.log" 2>&1 &
  local server=$!
  for _ in $(seq 50); do "$b/primctl" --address=localhost:$port health >/dev/null 2>&1 && break; sleep 0.2; done
  "$b/primload" --address=localhost:$port --rpc=scan --n=1024 --concurrency=1 --channels=1 \
    --warmup_seconds=1 --measure_seconds=4 --mode=both >"$out/$name.txt" 2>&1
  python3 -c "import urllib.request; print(urllib.request.urlopen('http://localhost:$mport/metrics').read().decode())" |
    grep -E '^primserve_(request_duration_seconds|batch)[a-z_]*(sum|count)' >"$out/$name.metrics.txt"
  kill -TERM $server; wait $server
  echo "== $name"; grep -E "^(scan|echo)" "$out/$name.txt"
  python3 - "$out/$name.metrics.txt" <<'PY'
import re,sys
s={};c={}
for line in open(sys.argv[1]):
    m=re.match(r'primserve_request_duration_seconds_(sum|count)\{(.*)\} (\S+)',line)
    if not m: continue
    labels=dict(re.findall(r'(\w+)="([^"]*)"',m.group(2)))
    if labels.get('rpc')!='Scan': continue
    key=labels.get('stage','?')
    (s if m.group(1)=='sum' else c)[key]=float(m.group(3))
for k in s:
    if c.get(k): print(f"  stage {k}: mean {1e6*s[k]/c[k]:.1f} us over {int(c[k])}")
PY
}
run cuda_inline --batch_timeout_micros=0
run cuda_handoff --batch_timeout_micros=0 --run_small_requests_inline=false
run cuda_default
run cpu --backend=cpu --batch_timeout_micros=0

