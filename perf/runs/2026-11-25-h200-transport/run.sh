#!/usr/bin/env bash
# GPU run D (2026-11-25): server transport settings (--grpc_channel_args) against Echo and Scan of 64M int32
# (268 MB each way), primload on the same host, 1 channel, concurrency 1; then 1K Echo at concurrency 256.
set -u
w=/tmp/w; rm -rf $w; mkdir -p $w; tar -xJf dist/lead/bundle.tar.xz -C $w
b=$w/gpu_bundle; o="$OUT/d"; mkdir -p "$o"
export LD_LIBRARY_PATH=$b/lib
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > "$o/device.txt"
run() {  # name, channel args
  local name=$1 args=$2
  $b/primserve --port=50061 --metrics_port=0 --enable_echo --grpc_channel_args="$args" > "$o/server_$name.log" 2>&1 &
  local srv=$!
  for _ in $(seq 50); do $b/primctl --address=localhost:50061 health >/dev/null 2>&1 && break; sleep 0.2; done
  { echo "server --grpc_channel_args=$args"; echo "primload --rpc=scan --n=67108864 --distinct_requests=2 --concurrency=1 --channels=1 --mode=both --warmup_seconds=2 --measure_seconds=6"; } > "$o/$name.txt"
  timeout 60 $b/primload --address=localhost:50061 --rpc=scan --n=67108864 --distinct_requests=2 --concurrency=1 --channels=1 --mode=both --warmup_seconds=2 --measure_seconds=6 >> "$o/$name.txt" 2>&1
  echo "primload --rpc=scan --n=1024 --concurrency=256 --channels=4 --mode=echo --warmup_seconds=1 --measure_seconds=3" >> "$o/$name.txt"
  timeout 30 $b/primload --address=localhost:50061 --rpc=scan --n=1024 --concurrency=256 --channels=4 --mode=echo --warmup_seconds=1 --measure_seconds=3 >> "$o/$name.txt" 2>&1
  kill -TERM $srv; wait $srv
  echo "== $name ($args)"; grep -E "^(scan|echo) " "$o/$name.txt"
}
run default ""
run frame16m "grpc.http2.max_frame_size=16777215"
run nobdp_window64m "grpc.http2.bdp_probe=0,grpc.http2.lookahead_bytes=67108864"
run read4m "grpc.experimental.tcp_read_chunk_size=4194304,grpc.experimental.tcp_min_read_chunk_size=1048576,grpc.experimental.tcp_max_read_chunk_size=8388608"
run write8m "grpc.http2.write_buffer_size=8388608"
run all "grpc.http2.max_frame_size=16777215,grpc.experimental.tcp_read_chunk_size=4194304,grpc.experimental.tcp_min_read_chunk_size=1048576,grpc.experimental.tcp_max_read_chunk_size=8388608,grpc.http2.write_buffer_size=8388608"
run default2 ""
cd "$OUT" && tar -czf res.tgz d && rm -rf d
