#!/usr/bin/env bash
# On a GPU machine, with the folder `tools/pack_gpu.sh --engine` makes
# (gpu_bundle/ at the repository root, or the folder holding this script when
# it is the bundle's copy): measures the service with primload, each figure
# beside the Echo method on the same payload (the transport's limit): 1K-element
# scans unary (batching on and off) and through Multiplex, a 1M-element scan,
# 64M-element scans and selects over TCP and over a Unix socket, the 64M scan
# also through ScanStream beside EchoStream of the same pieces (TCP and Unix
# socket); then what a client would do instead (numpy.cumsum on one core) and
# the Python client's 64M scan (gpu_bundle/py).
#   tools/gpu_engine_bench.sh OUT_DIR [--only=NAME,...]
# --only runs the named loads alone (small_scan_batching_on,
# small_scan_multiplex, small_scan_batching_off, medium_scan_vs_echo,
# large_scan_vs_echo, large_scan_unix_vs_echo, large_scan_stream_vs_echo_stream,
# large_scan_stream_unix_vs_echo_stream, large_select_vs_echo, numpy_cumsum,
# python_client). Each load writes OUT_DIR/NAME.txt and NAME.csv.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
[[ -x $here/primserve ]] || here="$repo/gpu_bundle"
out="${1:?usage: gpu_engine_bench.sh OUTPUT_DIR [--only=NAME,...]}"
only=""
case "${2:-}" in
  "") ;;
  --only=*) only="${2#--only=}" ;;
  *) echo "unknown argument: $2"; exit 2 ;;
esac
wanted() { [[ -z $only || ",$only," == *",$1,"* ]]; }
[[ -x $here/primserve ]] || { echo "no primserve in $here (run tools/pack_gpu.sh --engine first)"; exit 2; }
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib"
{
  nvidia-smi -L
  date -u
  echo "commit: $(cat "$here/commit.txt" 2>/dev/null || echo unknown)"
  echo "command: tools/gpu_engine_bench.sh $out${only:+ --only=$only}"
} | tee "$out/device.txt"

port=50061
metrics_port=9471
start_server() {  # flags...
  "$here/primserve" --port=$port --metrics_port=$metrics_port --enable_echo "$@" >"$out/server.log" 2>&1 &
  server=$!
  for _ in $(seq 50); do "$here/primctl" --address=localhost:$port health >/dev/null 2>&1 && return; sleep 0.2; done
  echo "server did not start"; cat "$out/server.log"; exit 1
}
stop_server() { kill -TERM "$server"; wait "$server"; }

load() {  # name, flags... (later flags override the defaults)
  local name=$1; shift
  wanted "$name" || return 0
  echo "== $name"
  "$here/primload" --address=localhost:$port --warmup_seconds=1 --measure_seconds=3 \
    --channels=4 --csv="$out/$name.csv" "$@" 2>&1 | tee "$out/$name.txt" | tail -12
}

# Small requests; Echo of the same 4 KB payload at each level is the ceiling.
start_server --batch_timeout_micros=200 --max_batch_size=256 --batch_threads=8
load small_scan_batching_on --rpc=scan --n=1024 --concurrency=1,16,64,256 --verify --mode=both
# The same requests on one Multiplex stream per channel.
load small_scan_multiplex --rpc=scan --n=1024 --concurrency=256,1024 --verify --multiplex
stop_server
start_server --batch_timeout_micros=0 --batch_threads=8
load small_scan_batching_off --rpc=scan --n=1024 --concurrency=1,16,64,256 --verify
stop_server

# Large requests take about a second each: a 15 s window holds enough of them
# that one request more or less moves the ratio by a few percent, not 2x.
socket=/tmp/primserve-bench.sock
start_server --unix_socket=$socket
load medium_scan_vs_echo --rpc=scan --n=1048576 --concurrency=1 --mode=both --channels=1 \
  --measure_seconds=5
load large_scan_vs_echo --rpc=scan --n=67108864 --distinct_requests=2 --concurrency=1,2 \
  --mode=both --warmup_seconds=3 --measure_seconds=15
load large_scan_unix_vs_echo --address=unix:$socket --rpc=scan --n=67108864 --distinct_requests=2 \
  --concurrency=1 --channels=1 --mode=both --warmup_seconds=3 --measure_seconds=15
# The 64M scan through ScanStream in 4 MiB pieces (the C++ client's default),
# beside EchoStream carrying the same pieces and answer bytes.
load large_scan_stream_vs_echo_stream --rpc=scan --n=67108864 --distinct_requests=2 \
  --stream_piece_bytes=4194304 --concurrency=1 --channels=1 --mode=both --warmup_seconds=3 \
  --measure_seconds=15
load large_scan_stream_unix_vs_echo_stream --address=unix:$socket --rpc=scan --n=67108864 \
  --distinct_requests=2 --stream_piece_bytes=4194304 --concurrency=1 --channels=1 --mode=both \
  --warmup_seconds=3 --measure_seconds=15
load large_select_vs_echo --rpc=select --predicate=gt --operand=0 --n=67108864 \
  --distinct_requests=2 --concurrency=1 --mode=both --warmup_seconds=3 --measure_seconds=15
# Where the server's time went (stage sums and counts per RPC).
python3 -c "import urllib.request; print(urllib.request.urlopen('http://localhost:$metrics_port/metrics').read().decode())" |
  grep -E '^primserve_request_duration_seconds_(sum|count)' >"$out/large_stages.txt"

# What the client would do itself: numpy.cumsum of 64M int32 on one core
# (medians of 7), as GB/s of input + output like primload's.
if wanted numpy_cumsum; then
  python3 - <<'PY' 2>&1 | tee "$out/numpy_cumsum.txt"
import time, numpy as np
a = np.random.default_rng(1).integers(-1000, 1000, size=1 << 26, dtype=np.int32)
times = []
for _ in range(7):
    t = time.perf_counter(); np.cumsum(a, dtype=np.int32); times.append(time.perf_counter() - t)
t = sorted(times)[3]
print(f"numpy.cumsum 64M int32, one core: median {t * 1e3:.1f} ms, {2 * a.nbytes / t / 1e9:.2f} GB/s in+out")
PY
fi
# The Python client's 64M scan (the machine's grpcio, numpy and protobuf;
# the package as tools/pack_gpu.sh --engine builds it into py/).
if wanted python_client; then
  if [[ -d $here/py/primserve ]]; then
    PYTHONPATH="$here/py" python3 -m primserve.bench --address=localhost:$port \
      --n=67108864 --repeats=5 2>&1 | tee "$out/python_client.txt"
  else
    echo "no Python client in $here/py (tools/pack_gpu.sh --engine builds it)" | tee "$out/python_client.txt"
  fi
fi
stop_server
