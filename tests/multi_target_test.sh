#!/bin/bash
# primctl and primload dial several servers as the C++ client does (issue 16):
# two CPU primservers on loopback, one ipv4: target naming both. primload's
# verified calls must all succeed and each server's primserve_requests_total
# must show a share of them (round robin); primctl must answer a scan and a
# health check through the same target, and still answer once one server is
# gone.
#
# Usage: multi_target_test.sh <primserve> <primctl> <primload>
set -u

readonly PRIMSERVE="$1" PRIMCTL="$2" PRIMLOAD="$3"
readonly TMP="${TEST_TMPDIR:-$(mktemp -d)}"
PIDS=()
trap 'for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done' EXIT

fail() {
  echo "FAIL: $*" >&2
  for log in "$TMP"/server*.log; do echo "--- $log:" >&2; cat "$log" >&2; done
  exit 1
}

# start <index>: a server on free ports; sets GRPC_PORT[i] and METRICS_PORT[i].
GRPC_PORT=() METRICS_PORT=()
start() {
  local log="$TMP/server$1.log"
  : >"$log"
  "$PRIMSERVE" --backend=cpu --host=127.0.0.1 --port=0 --metrics_host=127.0.0.1 --metrics_port=0 \
    --shutdown_grace_seconds=1 >"$log" 2>&1 &
  PIDS[$1]=$!
  for ((i = 0; i < 200; i++)); do
    GRPC_PORT[$1]="$(sed -n 's/.*primserve listening on [^ ]*:\([0-9]*\) .*/\1/p' "$log")"
    METRICS_PORT[$1]="$(sed -n 's|.*metrics at http://[^ ]*:\([0-9]*\)/metrics.*|\1|p' "$log")"
    [[ -n ${GRPC_PORT[$1]} && -n ${METRICS_PORT[$1]} ]] && return
    sleep 0.1
  done
  fail "server $1 not listening after 20 s"
}

requests() {
  curl -sSf "http://127.0.0.1:${METRICS_PORT[$1]}/metrics" |
    awk '/^primserve_requests_total\{/ {sum += $NF} END {print sum + 0}'
}

start 0
start 1
readonly TARGET="ipv4:127.0.0.1:${GRPC_PORT[0]},127.0.0.1:${GRPC_PORT[1]}"

"$PRIMLOAD" --address="$TARGET" --rpc=scan --dtype=int64 --n=10000 --concurrency=4 \
  --warmup_seconds=0.2 --measure_seconds=1 --verify --verify_every=1 >"$TMP/primload.out" 2>&1 ||
  { cat "$TMP/primload.out"; fail "primload over $TARGET (failed or mismatched calls)"; }
cat "$TMP/primload.out"
first="$(requests 0)" second="$(requests 1)"
echo "primload over $TARGET: server 0 answered $first, server 1 $second"
total=$((first + second))
((first * 4 > total && second * 4 > total)) || fail "round robin should give each server a share"

[[ "$("$PRIMCTL" --address="$TARGET" health)" == SERVING ]] || fail "primctl health over $TARGET"
scan="$("$PRIMCTL" --address="$TARGET" scan --values=3,1,4 --print=all)"
[[ $scan == 3,4,8 ]] || fail "primctl scan over $TARGET: $scan"

kill -TERM "${PIDS[0]}"
wait "${PIDS[0]}"
for ((i = 0; i < 5; i++)); do
  scan="$("$PRIMCTL" --address="$TARGET" scan --values=2,2 --print=all)" || fail "primctl with server 0 gone"
  [[ $scan == 2,4 ]] || fail "primctl scan with server 0 gone: $scan"
done
echo PASS
