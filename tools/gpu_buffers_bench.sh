#!/usr/bin/env bash
# On a GPU machine, from a folder holding primserve, primctl, primload and
# cuda_buffers_gpu_test (CUDA builds) with their shared libraries in lib/:
# the CUDA backend's buffer test, then resident buffers measured against the
# baselines of the same run (issue 28):
#  1. a 64M-element int32 (268 MB) Put and Get over loopback TCP, striped on 4
#     connections and on 1, beside one unary 64M Scan's bytes/s (in + out);
#  2. a Scan of a resident 2^28-element int32 buffer into a buffer, end to end,
#     beside the kernel stage the server measured for the same calls and an
#     Echo of as few bytes on the same server (gRPC's round trip);
#  3. Scans of a resident 64M int32 buffer into a buffer at concurrency 1 and 4
#     (in + out bytes/s = 8 bytes per element), beside numpy.cumsum on one core,
#     with the per-caller bounds raised (one load generator for 4 callers).
# Results go to $1.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: gpu_buffers_bench.sh OUTPUT_DIR}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib"
{ nvidia-smi -L; date -u; } | tee "$out/device.txt"

echo "== cuda_buffers_gpu_test"
timeout 120 "$here/cuda_buffers_gpu_test" --gtest_brief=1 >"$out/cuda_buffers_gpu_test.txt" 2>&1
echo "exit $?" | tee -a "$out/cuda_buffers_gpu_test.txt"
tail -3 "$out/cuda_buffers_gpu_test.txt"

port=50061
metrics_port=9471
address=localhost:$port
start_server() {
  "$here/primserve" --port=$port --metrics_port=$metrics_port --backend=cuda "$@" \
    >>"$out/server.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do "$here/primctl" --address=$address health >/dev/null 2>&1 && return; sleep 0.2; done
  echo "server did not start"; cat "$out/server.log"; exit 1
}
stop_server() { kill -TERM "$server"; wait "$server"; }
# The mean of a stage's request durations (seconds) in the server's metrics.
scrape() {
  curl -s "localhost:$metrics_port/metrics" 2>/dev/null ||
    python3 -c "import urllib.request; print(urllib.request.urlopen('http://localhost:$metrics_port/metrics').read().decode())"
}
stage_mean() {  # stage
  scrape | awk -v stage="$1" '
    $0 ~ "^primserve_request_duration_seconds_sum\\{.*rpc=\"Scan\".*stage=\"" stage "\"" {s=$2}
    $0 ~ "^primserve_request_duration_seconds_count\\{.*rpc=\"Scan\".*stage=\"" stage "\"" {c=$2}
    END {if (c > 0) printf "%.1f us over %d calls\n", s / c * 1e6, c}'
}

n64=67108864
start_server
echo "== 1. put/get 64M int32 over TCP" | tee "$out/put_get.txt"
for stripes in 4 1 4 1; do
  "$here/primctl" --address=$address put --name=p --generate=random --n=$n64 --stripes=$stripes \
    | tail -1 | sed "s/^/put stripes=$stripes: /" | tee -a "$out/put_get.txt"
  "$here/primctl" --address=$address get --name=p --stripes=$stripes | tail -1 \
    | sed "s/^/get stripes=$stripes: /" | tee -a "$out/put_get.txt"
  "$here/primctl" --address=$address free --name=p
done
"$here/primload" --address=$address --rpc=scan --n=$n64 --distinct_requests=1 --concurrency=1 \
  --channels=1 --warmup_seconds=1 --measure_seconds=5 2>&1 | tee "$out/unary_scan_64m.txt" | tail -4
stop_server

echo "== 2. scan of a resident 2^28 int32 buffer into a buffer"
start_server --enable_echo
"$here/primload" --address=$address --rpc=scan --n=268435456 --distinct_requests=1 \
  --concurrency=1 --channels=4 --resident --warmup_seconds=1 --measure_seconds=5 2>&1 \
  | tee "$out/resident_scan_2e28.txt" | tail -4
{ echo -n "kernel stage mean: "; stage_mean kernel; echo -n "total stage mean: "; stage_mean total; } \
  | tee -a "$out/resident_scan_2e28.txt"
# gRPC's own round trip for messages of that size on the same server: Echo of
# 64 bytes each way (the resident call sends 60 and gets about as many back).
"$here/primload" --address=$address --rpc=scan --mode=echo --n=16 --distinct_requests=1 \
  --concurrency=1 --channels=4 --warmup_seconds=1 --measure_seconds=3 2>&1 \
  | tee -a "$out/resident_scan_2e28.txt" | tail -2
stop_server

echo "== 3. scans of a resident 64M int32 buffer, concurrency 1 and 4"
# The one load generator stands for 4 callers: each caller's in-flight and
# queued bounds (96 and 256 MiB by default) would refuse a second 268 MB scan.
start_server --max_peer_in_flight_bytes=$((8 << 30)) --max_peer_queued_bytes=$((8 << 30))
"$here/primload" --address=$address --rpc=scan --n=$n64 --distinct_requests=1 \
  --concurrency=1,4 --channels=4 --resident --warmup_seconds=1 --measure_seconds=5 2>&1 \
  | tee "$out/resident_scan_64m.txt" | tail -5
stop_server
python3 - <<'EOF' 2>&1 | tee "$out/numpy_cumsum.txt"
import time
import numpy as np
a = np.random.default_rng(1).integers(-100, 100, 1 << 26).astype(np.int32)
times = []
for _ in range(5):
    start = time.perf_counter()
    np.cumsum(a, dtype=np.int32)
    times.append(time.perf_counter() - start)
best = min(times)
print(f"numpy.cumsum 64M int32 on one core: best {best * 1e3:.1f} ms, {a.size * 8 / best / 1e9:.2f} GB/s in+out")
EOF
