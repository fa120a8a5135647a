#!/usr/bin/env bash
# On a GPU machine, from the folder tools/pack_gpu.sh --engine makes: what
# primserve's default of gRPC's bandwidth-delay probe off costs a large
# transfer there. Two CUDA primservers, one with --grpc_bdp_probe (gRPC's own
# default) and one without, each answering one caller's 64M-element int32
# scans (268 MB each way) one at a time over loopback TCP beside Echo of the
# same bytes (primload --mode=both), in turns (off, on, off, on, ...) so that
# both see the same machine.
#   gpu_bdp_probe_ab.sh OUTPUT_DIR [ROUNDS (3)]
# Output: OUTPUT_DIR/bdp_ab.txt (each turn's rows), the servers' logs.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[[ -x $here/primserve ]] || here="$(cd "$here/.." && pwd)/gpu_bundle"
out="${1:?usage: gpu_bdp_probe_ab.sh OUTPUT_DIR [ROUNDS]}"
rounds="${2:-3}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib"
"$here/primserve" --backend=cuda --port=50081 --metrics_port=-1 --enable_echo \
  >"$out/bdp_off.log" 2>&1 &
off=$!
"$here/primserve" --backend=cuda --port=50082 --metrics_port=-1 --enable_echo --grpc_bdp_probe \
  >"$out/bdp_on.log" 2>&1 &
on=$!
trap 'kill -TERM $off $on 2>/dev/null; wait $off $on 2>/dev/null' EXIT
for port in 50081 50082; do
  for _ in $(seq 100); do
    "$here/primctl" --address=localhost:$port health >/dev/null 2>&1 && break
    sleep 0.2
  done
done
for round in $(seq "$rounds"); do
  for probe in off on; do
    port=50081
    [[ $probe == on ]] && port=50082
    "$here/primload" --address=localhost:$port --rpc=scan --n=67108864 --distinct_requests=1 \
      --concurrency=1 --channels=1 --mode=both --warmup_seconds=1 --measure_seconds=4 2>&1 |
      grep -E "^(scan|echo) " | sed "s/^/$probe round $round: /" | tee -a "$out/bdp_ab.txt"
  done
done
