#!/bin/bash
# ab.sh BINARY PORT LABEL EXTRA_FLAGS...: one CPU-backend server, 1K int32 scans and Echo at concurrency 1 and 256
bin=$1; port=$2; label=$3; shift 3
$bin --backend=cpu --enable_echo --port=$port --metrics_port=-1 --batch_threads=8 "$@" >/tmp/server_$label.log 2>&1 &
s=$!
sleep 1.5
./primload --address=localhost:$port --rpc=scan --n=1024 --concurrency=1,256 --mode=both --channels=4 --warmup_seconds=1 --measure_seconds=3 2>&1 | tail -8
kill -TERM $s; wait $s
