#!/bin/bash
# End-to-end test of primctl --shm and primload --shm (issue 12): starts a CPU
# primserve with --shared_memory and one without, on free loopback ports.
# primctl's answers for every RPC with inputs and outputs in a shared-memory
# region equal its inline answers; primload's --shm sweeps of every RPC
# (unary and Multiplex, one and several in flight) verify every response it
# reads back from the region; --in_place runs. Each tool's objects are gone
# from /dev/shm after it exits, also after the server refused a request, a
# region (no --shared_memory: exit 1, saying so) or an interrupted run
# (SIGTERM). Flag refusals exit 2 with their messages.
#
# Usage: shm_tools_test.sh <primserve binary> <primctl binary> <primload binary>
set -u

readonly PRIMSERVE="$1"
readonly PRIMCTL="$2"
readonly PRIMLOAD="$3"
readonly TMP="${TEST_TMPDIR:-$(mktemp -d)}"

fail() {
  echo "FAIL: $*" >&2
  for log in "$TMP"/server*.log; do
    [[ -f "$log" ]] && { echo "--- $log:" >&2; cat "$log" >&2; }
  done
  exit 1
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

PORT="$(free_port)" || fail "cannot pick a free port"
PLAIN_PORT="$(free_port)" || fail "cannot pick a free port"
readonly SHM="127.0.0.1:$PORT" PLAIN="127.0.0.1:$PLAIN_PORT"

"$PRIMSERVE" --backend=cpu --host=127.0.0.1 --port="$PORT" --metrics_port=-1 --shared_memory \
  >"$TMP/server.log" 2>&1 &
readonly SERVER_PID=$!
"$PRIMSERVE" --backend=cpu --host=127.0.0.1 --port="$PLAIN_PORT" --metrics_port=-1 \
  >"$TMP/server_plain.log" 2>&1 &
readonly PLAIN_PID=$!
trap 'kill -KILL "$SERVER_PID" "$PLAIN_PID" 2>/dev/null' EXIT

for address in "$SHM" "$PLAIN"; do
  for ((i = 0; ; i++)); do
    "$PRIMCTL" --address="$address" health >/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null && kill -0 "$PLAIN_PID" 2>/dev/null ||
      fail "a server exited before serving"
    ((i < 100)) || fail "$address not SERVING after 10 s"
    sleep 0.1
  done
done

# made_by <pid>: the /dev/shm objects process <pid> of this test made (newer
# than $TMP/start: a killed process of another run with the same pid may have
# left one of its name behind long ago).
touch "$TMP/start"
made_by() {
  find /dev/shm -maxdepth 1 -name "primserve-client-$1-*" -newer "$TMP/start"
}

# run <out> <binary> <args...>: runs it, its stdout and stderr in $TMP/<out>
# and $TMP/<out>.err; sets STATUS and checks that nothing of its process is
# left in /dev/shm.
run() {
  local out="$1" pid
  shift
  "$@" >"$TMP/$out" 2>"$TMP/$out.err" &
  pid=$!
  wait "$pid"
  STATUS=$?
  [[ -z "$(made_by "$pid")" ]] || fail "$* left $(made_by "$pid") behind"
}

# same <primctl args...>: --print=all answers, inline and with --shm, equal.
same() {
  run inline.out "$PRIMCTL" --address="$SHM" --print=all "$@"
  ((STATUS == 0)) || fail "primctl $* exited $STATUS: $(cat "$TMP/inline.out.err")"
  run shm.out "$PRIMCTL" --address="$SHM" --print=all --shm "$@"
  ((STATUS == 0)) || fail "primctl --shm $* exited $STATUS: $(cat "$TMP/shm.out.err")"
  [[ -s "$TMP/inline.out" ]] || fail "primctl $* printed nothing"
  cmp -s "$TMP/inline.out" "$TMP/shm.out" ||
    fail "primctl --shm $* differs from inline:"$'\n'"$(diff "$TMP/inline.out" "$TMP/shm.out" | head)"
}

# refused <code> <stderr substring> <binary> <args...>
refused() {
  local code="$1" message="$2"
  shift 2
  run refused.out "$@"
  ((STATUS == code)) || fail "$* exited $STATUS, expected $code: $(cat "$TMP/refused.out.err")"
  grep -qF -- "$message" "$TMP/refused.out.err" "$TMP/refused.out" ||
    fail "$* does not say '$message': $(cat "$TMP/refused.out.err")"
}

primctl_checks=0
for dtype in int32 uint64 float64; do
  same scan --dtype="$dtype" --generate=random --n=5000 --seed=3
  same scan --dtype="$dtype" --generate=random --n=5000 --op=max --exclusive --segments=0,100,2000
  same reduce --dtype="$dtype" --generate=random --n=5000 --op=argmax --segments=0,10,4000
  same reduce --dtype="$dtype" --generate=random --n=5000 --op=sum
  same select --dtype="$dtype" --generate=random --n=5000 --predicate=gt --operand=0 \
    --output=values_and_indices
  same select --dtype="$dtype" --generate=random --n=5000 --generate_flags=0.3 --output=indices \
    --partition
  same select --dtype="$dtype" --generate=random --n=5000 --predicate=lt --operand=0 --output=count
  same unique --dtype="$dtype" --values=1,1,2,3,3,3,1,7,7
  same rle --dtype="$dtype" --values=1,1,2,3,3,3,1,7,7
  same reduce_by_key --dtype="$dtype" --generate=random --n=5000 --generate_keys=runs \
    --key_dtype=int64 --op=min
  same aggregate_by_key --dtype="$dtype" --generate=random --n=5000 --generate_keys=random \
    --num_keys=37 --op=sum
  primctl_checks=$((primctl_checks + 11))
done
# The summary (element counts, first and last elements) reads the region too.
run summary.out "$PRIMCTL" --address="$SHM" --shm scan --values=3,1,4,1,5
((STATUS == 0)) && grep -qF "output: 5 x INT32 [3, 4, 8, 9, 14]" "$TMP/summary.out" ||
  fail "primctl --shm summary: $(cat "$TMP/summary.out" "$TMP/summary.out.err")"

# Refusals: the server's (with the region removed), then the command line's.
refused 1 "INVALID_ARGUMENT" "$PRIMCTL" --address="$SHM" --shm reduce --values=1,2,3 --segments=2,1
refused 1 "--shared_memory" "$PRIMCTL" --address="$PLAIN" --shm scan --values=1,2,3
refused 2 "--piece_bytes" "$PRIMCTL" --address="$SHM" --shm --piece_bytes=64 scan --values=1,2
refused 2 "health" "$PRIMCTL" --address="$SHM" --shm health
echo "primctl: $primctl_checks --shm answers equal the inline ones; refusals ok"

# load <name> <primload args...>: a short --shm run that must exit 0 with
# ok calls, no mismatch or error in any row, and with --verify every ok call
# verified.
load() {
  local name="$1"
  shift
  run "$name.out" "$PRIMLOAD" --address="$SHM" --shm --warmup_seconds=0.1 --measure_seconds=0.3 "$@"
  ((STATUS == 0)) || fail "primload --shm $* exited $STATUS: $(cat "$TMP/$name.out" "$TMP/$name.out.err")"
  grep -qF "POSIX shared-memory region" "$TMP/$name.out" || fail "$name: header: $(cat "$TMP/$name.out")"
  local verified=0
  [[ " $* " == *" --verify "* ]] && verified=1
  awk -v v="$verified" 'NR > 2 { if ($9 == 0 || (v && $10 != $9) || $11 != 0 || $12 != 0) bad = 1; rows++ }
       END { exit (bad || rows == 0) }' "$TMP/$name.out" ||
    fail "$name: a row not all verified:"$'\n'"$(cat "$TMP/$name.out")"
}

verify=(--verify --verify_every=1)
load scan --rpc=scan --n=20000 --concurrency=1,4 "${verify[@]}"
load scan_segments --rpc=scan --dtype=float32 --op=sum --segments=7 --n=20000 --concurrency=2 "${verify[@]}"
load reduce --rpc=reduce --dtype=int64 --op=argmin --segments=5 --n=20000 --concurrency=2 "${verify[@]}"
load select --rpc=select --dtype=float64 --output=values_and_indices --n=20000 --concurrency=2 "${verify[@]}"
load select_count --rpc=select --output=count --n=20000 --concurrency=1 "${verify[@]}"
load unique --rpc=unique --dtype=uint32 --n=20000 --concurrency=2 "${verify[@]}"
load rle --rpc=rle --n=20000 --concurrency=2 "${verify[@]}"
load reduce_by_key --rpc=reduce_by_key --n=20000 --concurrency=2 --multiplex "${verify[@]}"
load aggregate_by_key --rpc=aggregate_by_key --dtype=float32 --num_keys=100 --n=20000 \
  --concurrency=2 --multiplex "${verify[@]}"
load in_place --rpc=scan --n=20000 --concurrency=1 --distinct_requests=1 --in_place
grep -qF ", in place;" "$TMP/in_place.out" || fail "in_place header: $(cat "$TMP/in_place.out")"

refused 1 "--shared_memory" "$PRIMLOAD" --address="$PLAIN" --shm --measure_seconds=0.1
refused 2 "--mode=primitive" "$PRIMLOAD" --address="$SHM" --shm --mode=echo
refused 2 "--mode=primitive" "$PRIMLOAD" --address="$SHM" --shm --mode=both
refused 2 "primload_cuda" "$PRIMLOAD" --address="$SHM" --cuda_shm
refused 2 "one of --shm and --cuda_shm" "$PRIMLOAD" --address="$SHM" --shm --cuda_shm
refused 2 "--in_place needs" "$PRIMLOAD" --address="$SHM" --in_place
refused 2 "only --rpc=scan" "$PRIMLOAD" --address="$SHM" --shm --in_place --rpc=reduce
refused 2 "--verify" "$PRIMLOAD" --address="$SHM" --shm --in_place --verify

# Interrupted mid-run: SIGTERM still removes the object.
"$PRIMLOAD" --address="$SHM" --shm --n=20000 --concurrency=1 --warmup_seconds=30 \
  >"$TMP/term.out" 2>&1 &
pid=$!
for ((i = 0; i < 100; i++)); do
  [[ -n "$(made_by "$pid")" ]] && break
  sleep 0.1
done
[[ -n "$(made_by "$pid")" ]] || fail "primload made no region"
kill -TERM "$pid"
wait "$pid"
[[ -z "$(made_by "$pid")" ]] || fail "SIGTERM left the region behind"
echo "primload: every RPC verified through --shm; refusals ok; nothing left in /dev/shm"

kill -TERM "$SERVER_PID" "$PLAIN_PID"
wait "$SERVER_PID" || fail "server exited $? on SIGTERM"
echo PASS
