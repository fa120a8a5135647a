#!/bin/bash
# Issue 12 on the GPU machine, one call: the CUDA shared-memory GPU tests,
# then the whole target table side by side.
# Usage: .sbundle12/run.sh OUT
set -u
B=$(cd "$(dirname "$0")" && pwd); O=$1; R=$(cd "$B/.." && pwd)
export LD_LIBRARY_PATH=$B/lib
T=$O/table.log
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; date -u; nproc; df -h /dev/shm | tail -1; } > "$O/device.txt" 2>&1
cat "$O/device.txt"
# 1. GPU tests (server in-process; the CUDA IPC exporter is the test binary re-run as a second process).
( cd "$B" && timeout 240 ./cuda_shared_memory_gpu_test > "$O/cuda_shared_memory_gpu_test.log" 2>&1; echo "gtest rc=$?" >> "$O/cuda_shared_memory_gpu_test.log" )
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|tests? ran|CUDA IPC|too little|system region|gtest rc" "$O/cuda_shared_memory_gpu_test.log" | tee -a "$T"
# 2. The server: CUDA backend, shared memory, Echo, TCP and a Unix socket, metrics.
SOCK=/tmp/primserve-12.sock
"$B/primserve" --backend=cuda --shared_memory --enable_echo --host=127.0.0.1 --port=50051 \
  --unix_socket=$SOCK --metrics_host=127.0.0.1 --metrics_port=9464 > "$O/primserve.log" 2>&1 &
SP=$!
for i in $(seq 150); do "$B/primctl" --address=127.0.0.1:50051 health >/dev/null 2>&1 && break; sleep 0.2; done
M=$O/metrics.txt
snap() { echo "== metrics $1" >> "$M"; python3 -c 'import urllib.request;print(urllib.request.urlopen("http://127.0.0.1:9464/metrics").read().decode())' | grep -E '^primserve_(request_duration_seconds|stage_seconds|batch_wait)[a-z_]*_(sum|count)\{.*rpc="Scan"' >> "$M"; }
TCP=127.0.0.1:50051; UNIX=unix:$SOCK
c1="--concurrency=1 --warmup_seconds=1 --measure_seconds=4 --timeout_seconds=60"
# Row 1: 64M int32 inclusive SUM, system region, concurrency 1, vs inline and numpy.cumsum (one core).
echo "== row 1: tools/shm_bench.py --address=$TCP --n=67108864 --runs=7 --small_runs=3000" | tee -a "$T"
PYTHONPATH=$B/py timeout 150 python3 "$B/shm_bench.py" --address=$TCP --n=67108864 --runs=7 --small_runs=3000 2>&1 | tee -a "$T"
echo "== row 1: numpy.cumsum alone (one core), 64M int32, median of 7" | tee -a "$T"
python3 -c 'import numpy as np,time,statistics as st
a=np.random.default_rng(1).integers(-100,100,1<<26,dtype=np.int32)
t=[]
for _ in range(7):
  s=time.perf_counter(); np.cumsum(a,dtype=np.int32); t.append(time.perf_counter()-s)
m=st.median(t); print(f"numpy.cumsum {m*1e3:.2f} ms {2*4*(1<<26)/m/1e9:.2f} GB/s (numpy {np.__version__})")' 2>&1 | tee -a "$T"
echo "== row 1 (C++ client): primload_cuda --shm --n=67108864 (input and output in one system region)" | tee -a "$T"
snap "before row1 shm"
timeout 60 "$B/primload_cuda" --address=$TCP --rpc=scan --dtype=int32 --n=67108864 --shm --distinct_requests=1 --verify --verify_every=3 $c1 2>&1 | tee -a "$T"
snap "after row1 shm"
echo "== row 1 (C++ client): primload_cuda inline --n=67108864" | tee -a "$T"
timeout 60 "$B/primload_cuda" --address=$TCP --rpc=scan --dtype=int32 --n=67108864 --distinct_requests=1 --concurrency=1 --warmup_seconds=1 --measure_seconds=6 --timeout_seconds=60 2>&1 | tee -a "$T"
# Row 2: 2^28 int32 inclusive SUM in place in CUDA IPC memory (kernel time: the gtest above, same run).
echo "== row 2 verify: 2^28 in a CUDA region (not in place), unix socket" | tee -a "$T"
timeout 60 "$B/primload_cuda" --address=$UNIX --rpc=scan --dtype=int32 --n=268435456 --cuda_shm --distinct_requests=1 \
  --concurrency=1 --warmup_seconds=0 --measure_seconds=2 --verify --verify_every=1 2>&1 | tee -a "$T"
for t in unix tcp; do
  [[ $t == unix ]] && A=$UNIX || A=$TCP
  echo "== row 2, $t: 2^28 int32 inclusive SUM in place, --cuda_shm --in_place" | tee -a "$T"
  snap "before row2 $t"
  timeout 60 "$B/primload_cuda" --address=$A --rpc=scan --dtype=int32 --n=268435456 --cuda_shm --in_place \
    --distinct_requests=1 $c1 2>&1 | tee -a "$T"
  snap "after row2 $t"
  echo "== row 2 floor, $t: Echo of one int32 (the gRPC round trip)" | tee -a "$T"
  timeout 60 "$B/primload_cuda" --address=$A --mode=echo --rpc=scan --n=1 $c1 2>&1 | tee -a "$T"
done
# Row 3: 1K int32 scans through a system region vs inline, p50 and req/s.
for level in 1 16; do
  echo "== row 3, concurrency $level: 1K int32 scans, system region (--shm)" | tee -a "$T"
  timeout 60 "$B/primload_cuda" --address=$TCP --rpc=scan --n=1024 --shm --verify --concurrency=$level --warmup_seconds=1 --measure_seconds=4 2>&1 | tee -a "$T"
  echo "== row 3, concurrency $level: 1K int32 scans inline" | tee -a "$T"
  timeout 60 "$B/primload_cuda" --address=$TCP --rpc=scan --n=1024 --verify --concurrency=$level --warmup_seconds=1 --measure_seconds=4 2>&1 | tee -a "$T"
done
echo "== row 3 (CUDA region): 1K int32 scans, --cuda_shm, concurrency 1" | tee -a "$T"
timeout 60 "$B/primload_cuda" --address=$TCP --rpc=scan --n=1024 --cuda_shm --verify $c1 2>&1 | tee -a "$T"
kill -TERM $SP; wait $SP; echo "primserve rc=$?" | tee -a "$T"
