#!/bin/bash
# ScanStream and the other streams on the CUDA backend (pinned payloads), verified; then a rough 64M stream vs EchoStream.
h=$(cd "$(dirname "$0")" && pwd); export LD_LIBRARY_PATH=$h/lib; o=${OUT:-/tmp/o}; mkdir -p $o
nvidia-smi -L > $o/device.txt; date -u >> $o/device.txt
$h/primserve --backend=cuda --port=50061 --metrics_port=-1 --enable_echo --unix_socket=/tmp/ps.sock > $o/server.log 2>&1 & s=$!
for i in $(seq 100); do $h/primctl --address=localhost:50061 health >/dev/null 2>&1 && break; sleep 0.3; done
L() { n=$1; shift; timeout 100 $h/primload --address=localhost:50061 --warmup_seconds=0.5 --measure_seconds=2 --channels=1 "$@" > $o/$n.txt 2>&1; echo "$n rc=$?"; tail -n +2 $o/$n.txt; }
L scan_stream_verify --rpc=scan --n=16777216 --distinct_requests=2 --stream_piece_bytes=4194304 --concurrency=1,2 --verify --verify_every=1 --mode=both
L scan_stream_f32_verify --rpc=scan --dtype=float32 --n=4000037 --distinct_requests=2 --stream_piece_bytes=1048576 --concurrency=2 --verify --verify_every=1
for r in select unique rle reduce_by_key; do L ${r}_stream_verify --rpc=$r --dtype=int64 --n=4000037 --distinct_requests=2 --stream_piece_bytes=2097152 --concurrency=2 --verify --verify_every=1; done
L multiplex_verify --rpc=scan --n=1024 --multiplex --concurrency=64 --verify --verify_every=1
L scan64m_stream_tcp --rpc=scan --n=67108864 --distinct_requests=2 --stream_piece_bytes=4194304 --concurrency=1 --mode=both --warmup_seconds=2 --measure_seconds=8
L scan64m_stream_unix --address=unix:/tmp/ps.sock --rpc=scan --n=67108864 --distinct_requests=2 --stream_piece_bytes=4194304 --concurrency=1 --mode=both --warmup_seconds=2 --measure_seconds=8
kill -TERM $s; wait $s; echo server_rc=$?; tail -3 $o/server.log
