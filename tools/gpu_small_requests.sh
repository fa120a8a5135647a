#!/usr/bin/env bash
# On a GPU machine: the small-request loads of gpu_engine_bench.sh (1K-element
# scans at concurrency 1 and 256 outstanding, unary and through Multiplex,
# each beside Echo of the same bytes; and the 1M scan beside Echo), with the
# same server flags, for one or more primserve binaries in turn (an A/B of
# the CUDA backend's host path: the baseline first). Also the server's and
# primload's CPU time per request of each load, from /proc and bash's times.
# Each binary serves each load with each API of RPC_APIS (--rpc_api; default
# "callback completion_queue"; API:N also sets --completion_queues=N), in
# turn, ROUNDS times (default 1): an A/B of gRPC's APIs on the same machine
# in the same call, alternated so that drift falls on both. Rows are
# labelled LABEL-API (LABEL-API-qN with :N; -rR past round 1). A binary
# without --rpc_api: RPC_APIS=callback.
#   [RPC_APIS="callback completion_queue"] [ROUNDS=N] \
#     tools/gpu_small_requests.sh OUT_DIR BUNDLE LABEL=PRIMSERVE...
# BUNDLE: a folder from tools/pack_gpu.sh --engine (primload, primctl, lib/).
# Extra server flags for every server (e.g. --completion_queues=8): SERVER_FLAGS;
# the gRPC port: PORT (default 50061).
set -uo pipefail
out="${1:?usage: gpu_small_requests.sh OUT_DIR BUNDLE LABEL=PRIMSERVE...}"
bundle="${2:?usage: gpu_small_requests.sh OUT_DIR BUNDLE LABEL=PRIMSERVE...}"
shift 2
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib"
port=${PORT:-50061}
ticks=$(getconf CLK_TCK)
server_cpu() { awk '{print $14 + $15}' "/proc/$server/stat"; }  # utime + stime, in ticks

start_server() {  # primserve, flags...
  local binary=$1; shift
  "$binary" --port=$port --metrics_port=9471 --enable_echo ${SERVER_FLAGS:-} "$@" >>"$out/server.log" 2>&1 &
  server=$!
  for _ in $(seq 50); do "$bundle/primctl" --address=localhost:$port health >/dev/null 2>&1 && return; sleep 0.2; done
  echo "server did not start"; cat "$out/server.log"; exit 1
}
stop_server() { kill -TERM "$server"; wait "$server"; }

# One primload run at one level, one mode: its table row, then the server's
# and primload's CPU per completed request (requests/s x measured seconds is
# the count; warm-up requests are in the CPU time too, so the CPU figures are
# upper bounds by about warmup/(warmup+measure) for both alike).
load() {  # label, name, flags...
  local label=$1 name=$2; shift 2
  local csv="$out/$label-$name.csv"
  local before; before=$(server_cpu)
  { time -p "$bundle/primload" --address=localhost:$port --warmup_seconds=1 --measure_seconds=3 \
      --channels=4 --csv="$csv" "$@" >"$out/$label-$name.txt" 2>&1; } 2>"$out/$label-$name.time"
  local after; after=$(server_cpu)
  local row; row=$(sed -n 2p "$csv")
  local client; client=$(awk '/^user|^sys/ {s += $2} END {print s}' "$out/$label-$name.time")
  python3 - "$label" "$name" "$row" "$before" "$after" "$ticks" "$client" <<'PY' | tee -a "$out/summary.txt"
import sys
label, name, row, before, after, ticks, client = sys.argv[1:]
f = row.split(",")
rps = float(f[2]); requests = rps * 4.0  # warm-up + measure: every request the server saw
server_us = (int(after) - int(before)) / int(ticks) / requests * 1e6
client_us = float(client) / requests * 1e6
print(f"{label:22s} {name:22s} {rps:9.0f}/s p50 {f[5]:>8s} p99 {f[7]:>8s} ms  ok {f[8]} "
      f"mismatches {f[10]} errors {f[11]}  CPU us/req: server {server_us:5.1f} primload {client_us:5.1f}")
PY
}

{
  nvidia-smi -L
  date -u
} | tee "$out/device.txt"
apis=${RPC_APIS:-callback completion_queue}
rounds=${ROUNDS:-1}
for build in "$@"; do
  binary=${build#*=}
  echo "=== ${build%%=*}: $binary ($(cat "$(dirname "$binary")/commit.txt" 2>/dev/null))"
  for round in $(seq "$rounds"); do
    for entry in $apis; do
      api=(--rpc_api="${entry%%:*}")
      label=${build%%=*}-${entry%%:*}
      if [[ $entry == *:* ]]; then
        api+=(--completion_queues="${entry#*:}")
        label=$label-q${entry#*:}
      fi
      [[ $round -gt 1 ]] && label=$label-r$round
      start_server "$binary" "${api[@]}" --batch_timeout_micros=200 --max_batch_size=256 --batch_threads=8
      for c in 1 256; do
        load "$label" "scan-c$c" --rpc=scan --n=1024 --concurrency=$c --verify
        load "$label" "echo-c$c" --rpc=scan --n=1024 --concurrency=$c --mode=echo
      done
      load "$label" "scan-multiplex-c256" --rpc=scan --n=1024 --concurrency=256 --verify --multiplex
      load "$label" "scan-multiplex-c1024" --rpc=scan --n=1024 --concurrency=1024 --verify --multiplex
      stop_server
      start_server "$binary" "${api[@]}"
      load "$label" "scan-1M" --rpc=scan --n=1048576 --concurrency=1 --channels=1
      load "$label" "echo-1M" --rpc=scan --n=1048576 --concurrency=1 --channels=1 --mode=echo
      stop_server
    done
  done
done
