#!/usr/bin/env bash
# Issue 11 item 1 (unary answers from pinned answer buffers, a large scan's
# input copied chunk by chunk under the pipeline) on one GPU machine, in one
# call: cuda_service_gpu_test; primload --verify of every answer for scan,
# select, reduce_by_key and unique of 33,554,433 int32; then 64M int32 scan
# and select unary over TCP and over the Unix socket, each beside Echo of the
# same bytes (primload --mode=both), with the server's stage metrics; then
# the same four loads against the server built from main ($here/base/, the
# baseline), and numpy.cumsum on one core. Everything is written to a scratch
# folder and comes back as $1/all.tgz.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
final="${1:?usage: run.sh OUTPUT_DIR}"
out=/tmp/answers-run
rm -rf "$out"; mkdir -p "$out" "$final"
export LD_LIBRARY_PATH="$here/lib"
{ nvidia-smi -L; date -u; nproc; } | tee "$out/device.txt"

(cd "$here" && timeout 150 ./cuda_service_gpu_test) > "$out/cuda_service_gpu_test.log" 2>&1
echo "cuda_service_gpu_test exit $?" | tee -a "$out/cuda_service_gpu_test.log"

port=50063
metrics_port=9473
socket=/tmp/primserve-answers.sock
start_server() {  # binary, flags...
  local binary=$1; shift
  "$binary" --port=$port --metrics_port=$metrics_port "$@" >>"$out/server.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do "$here/primctl" --address=localhost:$port health >/dev/null 2>&1 && return; sleep 0.2; done
  echo "server did not start"; tail "$out/server.log"; exit 1
}
stop_server() { kill -TERM "$server"; wait "$server"; }
stages() {  # file
  python3 -c "import urllib.request; print(urllib.request.urlopen('http://localhost:$metrics_port/metrics').read().decode())" |
    grep -E '^primserve_request_duration_seconds_(sum|count)' | sort >"$1"
}

# Every answer checked against the CPU reference.
start_server "$here/primserve"
for rpc in scan select reduce_by_key unique; do
  timeout 60 "$here/primload" --address=localhost:$port --rpc=$rpc --predicate=gt --operand=0 \
    --n=33554433 --concurrency=1,2 --verify --verify_every=1 --warmup_seconds=0.5 \
    --measure_seconds=2 >"$out/verify_$rpc.txt" 2>&1
  echo "verify $rpc exit $?: $(grep -ci mismatch "$out/verify_$rpc.txt") lines naming mismatches"
done
stop_server

large() {  # label, binary
  local label=$1 binary=$2
  start_server "$binary" --enable_echo --unix_socket=$socket
  for transport in tcp unix; do
    address=localhost:$port
    [[ $transport == unix ]] && address=unix:$socket
    timeout 90 "$here/primload" --address=$address --rpc=scan --n=67108864 --distinct_requests=2 \
      --concurrency=1 --channels=1 --mode=both --warmup_seconds=2 --measure_seconds=8 \
      --csv="$out/${label}_scan_$transport.csv" >"$out/${label}_scan_$transport.txt" 2>&1
    tail -4 "$out/${label}_scan_$transport.txt"
  done
  stages "$out/${label}_scan_stages.txt"
  for transport in tcp unix; do
    address=localhost:$port
    [[ $transport == unix ]] && address=unix:$socket
    timeout 90 "$here/primload" --address=$address --rpc=select --predicate=gt --operand=0 \
      --n=67108864 --distinct_requests=2 --concurrency=1 --channels=1 --mode=both \
      --warmup_seconds=2 --measure_seconds=8 --csv="$out/${label}_select_$transport.csv" \
      >"$out/${label}_select_$transport.txt" 2>&1
    tail -4 "$out/${label}_select_$transport.txt"
  done
  stages "$out/${label}_all_stages.txt"
  stop_server
}
echo "== this branch"; large new "$here/primserve"
echo "== main (baseline)"; [[ -x "$here/base/primserve" ]] && large base "$here/base/primserve"

python3 - <<'PY' 2>&1 | tee "$out/numpy_cumsum.txt"
import time, numpy as np
a = np.random.default_rng(1).integers(-1000, 1000, size=1 << 26, dtype=np.int32)
times = []
for _ in range(7):
    t = time.perf_counter(); np.cumsum(a, dtype=np.int32); times.append(time.perf_counter() - t)
t = sorted(times)[3]
print(f"numpy.cumsum 64M int32, one core: median {t * 1e3:.1f} ms, {2 * a.nbytes / t / 1e9:.2f} GB/s in+out")
PY
tar -C "$out" -czf "$final/all.tgz" .
