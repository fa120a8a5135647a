#!/bin/bash
# Issue 12's CUDA IPC latency over TCP and a Unix domain socket, on the GPU machine.
# Usage: .ipc3bundle/run.sh OUT
set -u
B=$(cd "$(dirname "$0")" && pwd); O=$1
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$O/device.txt" 2>&1
date -u >> "$O/device.txt"; nproc >> "$O/device.txt"
L=$O/primload.log
echo "== kernel alone and C++ end to end over TCP (cuda_shared_memory_gpu_test, server in-process)" | tee -a "$L"
timeout 150 "$B/cuda_shared_memory_gpu_test" --gtest_filter='*CudaIpcLargeScanInPlaceLatency*' > "$O/gtest_latency.log" 2>&1
echo "gtest rc=$?" | tee -a "$L"; grep -E "CUDA IPC 2\^28|PASSED|FAILED" "$O/gtest_latency.log" | tee -a "$L"
SOCK=/tmp/primserve-ipc3.sock
"$B/primserve" --backend=cuda --shared_memory --enable_echo --host=127.0.0.1 --port=50051 \
  --unix_socket=$SOCK --metrics_host=127.0.0.1 --metrics_port=9464 > "$O/primserve.log" 2>&1 &
SP=$!
for i in $(seq 100); do "$B/primctl" --address=127.0.0.1:50051 health >/dev/null 2>&1 && break; sleep 0.2; done
"$B/primctl" --address=unix:$SOCK health | tee -a "$L"
M=$O/metrics.txt
snap() { echo "== metrics $1" >> "$M"; python3 -c 'import urllib.request;print(urllib.request.urlopen("http://127.0.0.1:9464/metrics").read().decode())' | grep -E '^primserve_request_duration_seconds_(sum|count)\{.*rpc="Scan"' >> "$M"; }
TCP=127.0.0.1:50051; UNIX=unix:$SOCK
common="--concurrency=1 --warmup_seconds=1 --measure_seconds=4 --timeout_seconds=60"
# correctness first: the placed 2^28 scan (not in place) verified against the reference, over unix
echo "== verify: 2^28 int32 scan, input and output in a CUDA IPC region, unix socket" | tee -a "$L"
"$B/primload_cuda" --address=$UNIX --rpc=scan --dtype=int32 --n=268435456 --cuda_shm --distinct_requests=1 \
  --concurrency=1 --warmup_seconds=0 --measure_seconds=3 --verify --verify_every=1 2>&1 | tee -a "$L"
for round in 1 2; do
  for t in unix tcp; do
    [[ $t == unix ]] && A=$UNIX || A=$TCP
    echo "== round $round, $t: 2^28 int32 inclusive sum in place, --cuda_shm" | tee -a "$L"
    snap "before $round $t"
    "$B/primload_cuda" --address=$A --rpc=scan --dtype=int32 --n=268435456 --cuda_shm --in_place \
      --distinct_requests=1 $common 2>&1 | tee -a "$L"
    snap "after $round $t"
  done
done
for t in unix tcp; do
  [[ $t == unix ]] && A=$UNIX || A=$TCP
  echo "== $t floor: Echo of 1 int32 (no work)" | tee -a "$L"
  "$B/primload_cuda" --address=$A --mode=echo --rpc=scan --n=1 $common 2>&1 | tee -a "$L"
  echo "== $t floor: 1-element inline scan" | tee -a "$L"
  "$B/primload_cuda" --address=$A --rpc=scan --n=1 --verify $common 2>&1 | tee -a "$L"
  echo "== $t: 1-element scan in a CUDA IPC region" | tee -a "$L"
  "$B/primload_cuda" --address=$A --rpc=scan --n=1 --cuda_shm --verify $common 2>&1 | tee -a "$L"
done
kill -TERM $SP; wait $SP; echo "primserve rc=$?" | tee -a "$L"
