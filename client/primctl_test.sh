#!/bin/bash
# End-to-end test of primctl: starts a CPU primserve on a free loopback port,
# checks primctl's exact output for each RPC and its exit codes on errors, then
# stops the server with SIGTERM and checks that it exits 0.
#
# Usage: primctl_test.sh <primserve binary> <primctl binary>
set -u

readonly PRIMSERVE="$1"
readonly PRIMCTL="$2"
readonly TMP="${TEST_TMPDIR:-$(mktemp -d)}"

fail() {
  echo "FAIL: $*" >&2
  [[ -f "$TMP/server.log" ]] && { echo "--- server log:" >&2; cat "$TMP/server.log" >&2; }
  exit 1
}

PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')" ||
  fail "cannot pick a free port"
readonly ADDRESS="127.0.0.1:$PORT"

"$PRIMSERVE" --backend=cpu --host=127.0.0.1 --port="$PORT" --metrics_port=0 --shutdown_grace_seconds=5 \
  >"$TMP/server.log" 2>&1 &
readonly SERVER_PID=$!
trap 'kill -KILL "$SERVER_PID" 2>/dev/null' EXIT

primctl() {
  "$PRIMCTL" --address="$ADDRESS" "$@"
}

for ((i = 0; ; i++)); do
  primctl health >/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "server exited before serving"
  ((i < 100)) || fail "server not SERVING after 10 s"
  sleep 0.1
done

# expect <expected stdout> <primctl args...>: primctl must exit 0 printing exactly that.
expect() {
  local expected="$1" actual
  shift
  actual="$(primctl "$@" 2>"$TMP/stderr")" || fail "primctl $* exited $?: $(cat "$TMP/stderr")"
  [[ "$actual" == "$expected" ]] ||
    fail "primctl $*"$'\n'"printed:  ${actual//$'\n'/|}"$'\n'"expected: ${expected//$'\n'/|}"
}

# expect_exit <code> <stderr substring> <primctl args...>
expect_exit() {
  local code="$1" message="$2" status
  shift 2
  primctl "$@" >/dev/null 2>"$TMP/stderr"
  status=$?
  ((status == code)) || fail "primctl $* exited $status, expected $code: $(cat "$TMP/stderr")"
  grep -qF -- "$message" "$TMP/stderr" ||
    fail "primctl $* stderr lacks '$message': $(cat "$TMP/stderr")"
}

expect "SERVING" health
# A CPU server has no devices, so no device's health service.
expect_exit 1 "primctl: health: " health --service=primserve.device.0
[[ "$(primctl health --service=primserve.device.0 2>/dev/null)" == NOT_FOUND ]] ||
  fail "health of device 0 on a CPU server is not NOT_FOUND"

# scan
expect "1,3,6,10" scan --values=1,2,3,4 --print=all
expect "0,1,3,6" scan --values=1,2,3,4 --exclusive --print=all
expect "1,3,3,7,12" scan --values=1,2,3,4,5 --segments=0,2 --print=all
expect "5,5,4,1" scan --values=5,7,4,1 --op=min --print=all
expect "1.5,0.5,-1" scan --dtype=float32 --values="1.5 -1 -1.5" --print=all

# reduce
expect $'9\n1' reduce --values=3,9,2,9 --op=argmax --print=all
expect $'3,-2147483648\n2,-1' reduce --values=1,2,3 --segments=0,3 --op=argmax --print=all
expect "0" reduce --dtype=uint64 --values=18446744073709551615,1 --print=all
expect "18446744073709551615" reduce --dtype=uint64 --values=18446744073709551615,1 --op=max --print=all
expect "499500" reduce --generate=sequence --n=1000 --dtype=int64 --print=all

# select
expect $'5,7,9,1,3\n0,2,4,1,3\n3' select --values=5,1,7,3,9 --predicate=gt --operand=4 \
  --output=values_and_indices --partition --print=all
expect $'1,3\n2' select --values=0,1,0,3 --predicate=nonzero --output=indices --print=all
expect "1" select --dtype=float64 --values=0.5,1.5,2.5,3 --predicate=in_range --operand=1 \
  --upper=2.5 --output=count --print=all
printf '1 0 0 1\n' >"$TMP/flags.txt"
expect $'10,40\n2' select --dtype=uint64 --values=10,20,30,40 --flags="$TMP/flags.txt" --print=all

# streaming (--piece_bytes): the same answers as the unary calls
expect "1,3,6,10" scan --values=1,2,3,4 --piece_bytes=4 --print=all
expect "1,3,3,7,12" scan --values=1,2,3,4,5 --segments=0,2 --piece_bytes=8 --print=all
expect "0,1,3,6" scan --values=1,2,3,4 --exclusive --piece_bytes=12 --print=all
expect $'1,3\n2' select --values=0,1,0,3 --predicate=nonzero --output=indices --piece_bytes=4 \
  --print=all
expect $'10,40\n2' select --dtype=uint64 --values=10,20,30,40 --flags="$TMP/flags.txt" \
  --piece_bytes=8 --print=all
expect_exit 1 "partition is not supported by SelectStream" select --values=1,0 \
  --predicate=nonzero --partition --piece_bytes=4

# unique and rle (bit-pattern equality: -0 and 0 differ)
expect "0.5,-0,0,nan" unique --dtype=float64 --values=0.5,0.5,-0,0,nan,nan --print=all
expect $'1,2,3\n2,3,1' rle --values=1,1,2,2,2,3 --print=all

# reduce_by_key and aggregate_by_key, keys from files, text and binary
printf '7 7 8 8 8\n' >"$TMP/keys.txt"
expect $'7,8\n2,5' reduce_by_key --keys="$TMP/keys.txt" --values=1,2,3,4,5 --op=max --print=all
# ... and through their streams (--piece_bytes), runs across pieces joined
expect "0.5,-0,0,nan" unique --dtype=float64 --values=0.5,0.5,-0,0,nan,nan --piece_bytes=8 \
  --print=all
expect $'1,2,3\n2,3,1' rle --values=1,1,2,2,2,3 --piece_bytes=8 --print=all
expect $'7,8\n2,5' reduce_by_key --keys="$TMP/keys.txt" --values=1,2,3,4,5 --op=max \
  --piece_bytes=16 --print=all
printf '\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00' >"$TMP/keys.bin"
expect "4,4,2" aggregate_by_key --keys="$TMP/keys.bin" --input_format=binary --values=1,2,3,4 \
  --num_keys=3 --print=all
printf '1,2,3,4 5\n' >"$TMP/values.txt"
expect "-inf,-inf,-inf,-inf,-inf,-inf,-inf,2,5" aggregate_by_key --keys="$TMP/keys.txt" \
  --key_dtype=uint32 --input="$TMP/values.txt" --dtype=float32 --num_keys=9 --op=max --print=all

# sort: keys alone, with values and indices (stable), descending with NaN and
# zeros, segments
expect "1,2,3" sort --values=3,1,2 --print=all
expect $'1,1,2,3\n1,3,2,0\n1,3,2,0' sort --values=3,1,2,1 --sort_values=sequence --return_indices \
  --print=all
expect $'3,2,1,1\n0,2,1,3' sort --values=3,1,2,1 --segments=0,1,3 --descending \
  --sort_values=sequence --value_dtype=uint64 --print=all
expect "2,1,-0,0,nan" sort --dtype=float32 --values=1,nan,-0,2,0 --descending --print=all
expect "-1,0,nan" sort --dtype=float64 --values=nan,0,-1 --print=all
expect "1,2,3,8,9" sort --values=3,1,2,9,8 --segments=0,3 --print=all

# generated data: seeded, so two runs agree
first="$(primctl aggregate_by_key --generate=random --n=5000 --generate_keys=random --num_keys=8 \
  --seed=3 --print=all)" || fail "aggregate_by_key with generated data failed"
expect "$first" aggregate_by_key --generate=random --n=5000 --generate_keys=random --num_keys=8 \
  --seed=3 --print=all
[[ "$(tr ',' '\n' <<<"$first" | wc -l)" == 8 ]] || fail "expected 8 groups, got $first"
expect "5000" select --generate=random --n=5000 --generate_flags=1 --output=count --print=all
expect "0" select --generate=random --n=5000 --generate_flags=0 --output=count --print=all
expect "0,1,2,3,4,5" unique --generate=sequence --n=6 --dtype=float32 --print=all
keys="$(primctl reduce_by_key --generate=sequence --n=1000 --generate_keys=runs --run_length=1 \
  --print=all | head -1)" || fail "reduce_by_key with generated keys failed"
[[ "$keys" == "$(seq -s, 0 999)" ]] || fail "--run_length=1 keys are not 0..999: $keys"

# summary and none
summary="$(primctl scan --values=1,2,3,4)" || fail "scan summary failed"
[[ "$(head -1 <<<"$summary")" == "output: 4 x INT32 [1, 3, 6, 10]" ]] || fail "summary: $summary"
grep -qE '^latency [0-9.]+ ms, payload [0-9.]+ MB, [0-9.]+ MB/s$' <<<"$summary" ||
  fail "summary lacks latency: $summary"
summary="$(primctl scan --generate=sequence --n=100)" || fail "scan summary failed"
[[ "$(head -1 <<<"$summary")" == "output: 100 x INT32 [0, 1, 3, 6, ..., 4656, 4753, 4851, 4950]" ]] ||
  fail "long summary: $summary"
expect "" scan --values=1,2 --print=none

# RPC errors exit 1 with the status code; usage errors exit 2
expect_exit 1 "error: INVALID_ARGUMENT: " scan --values=1,2,3 --segments=5
expect_exit 1 "error: INVALID_ARGUMENT: " reduce_by_key --keys="$TMP/keys.txt" --values=1,2
expect_exit 1 "error: INVALID_ARGUMENT: " scan --values=1,2 --op=argmin
expect_exit 1 "error: INVALID_ARGUMENT: " aggregate_by_key --keys="$TMP/keys.txt" \
  --values=1,2,3,4,5 --num_keys=3
expect_exit 2 "unknown rpc 'scann'" scann --values=1
expect_exit 2 "no rpc given" --values=1
expect_exit 2 "--dtype=int8 is not one of" scan --dtype=int8 --values=1
expect_exit 2 "not a valid INT32" scan --values=1,x
expect_exit 2 "exactly one of --input, --values, --generate" scan --values=1 --generate=random
expect_exit 2 "--predicate=lt needs --operand" select --values=1 --predicate=lt
expect_exit 2 "exactly one of --predicate, --flags, --generate_flags" select --values=1
expect_exit 2 "Unknown command line flag" scan --values=1 --segment=0
expect_exit 1 "error: INVALID_ARGUMENT: " sort --values=1,2 --segments=0,5
echo "7 8 9" >"$TMP/sort_values.txt"
expect_exit 1 "error: INVALID_ARGUMENT: " sort --values=1,2 --sort_values="$TMP/sort_values.txt"
expect_exit 2 "--value_dtype=int8 is not one of" sort --values=1 --sort_values=random \
  --value_dtype=int8

# Resident buffers: put (striped), inputs from a buffer (whole and a range),
# an output into a buffer, get, list, free, and their errors.
expect "" put --name=x --values=1,2,3,4 --stripes=3 --print=none
expect "1,3,6,10" scan --buffer=x --print=all
expect "2,5" scan --buffer=x --buffer_offset=1 --buffer_length=2 --print=all
expect "output: in buffer y, 4 x INT32" scan --buffer=x --output_buffer=y --print=all
expect "1,3,6,10" get --name=y --print=all
expect "1,3,6,10" get --name=y --stripes=1 --print=all
expect "keys: in buffer z, 4 x INT32" sort --buffer=y --descending --output_buffer=z --print=all
expect "10,6,3,1" get --name=z --print=all
expect "" free --name=z
listed="$(primctl list)" || fail "primctl list exited $?"
[[ "$listed" == *"x: 4 x INT32 on the host at "* && "$listed" == *"y: 4 x INT32 on the host at "* &&
  "$listed" == *"32 bytes used of "* ]] || fail "primctl list printed: $listed"
expect "" free --name=y
expect_exit 1 "error: NOT_FOUND: " get --name=y
expect_exit 1 "error: NOT_FOUND: " scan --buffer=y
expect_exit 1 "error: ALREADY_EXISTS: " put --name=x --values=1
expect_exit 1 "error: INVALID_ARGUMENT: " scan --buffer=x --buffer_offset=5
expect_exit 2 "give the buffer's --name" get
expect_exit 2 "exactly one of --input, --values, --generate, --buffer" scan --values=1 --buffer=x
expect "" free --name=x

# Two servers as one address: each put lands on one of them, and scan, get
# and free of a buffer reach the one holding it, whichever the address picks.
PORT2="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')" ||
  fail "cannot pick a second free port"
"$PRIMSERVE" --backend=cpu --host=127.0.0.1 --port="$PORT2" --metrics_port=0 >"$TMP/server2.log" 2>&1 &
readonly SERVER2_PID=$!
trap 'kill -KILL "$SERVER_PID" "$SERVER2_PID" 2>/dev/null' EXIT
for ((i = 0; ; i++)); do
  "$PRIMCTL" --address="127.0.0.1:$PORT2" health >/dev/null && break
  ((i < 100)) || fail "second server not SERVING after 10 s"
  sleep 0.1
done
both="ipv4:$ADDRESS,127.0.0.1:$PORT2"
# Each primctl is a fresh process whose first call goes to whichever server
# its channel reaches first: put until both hold some.
count_on() { "$PRIMCTL" --address="$1" list | grep -c '^r[0-9]*:'; }
for ((n = 0; n < 40; n++)); do
  "$PRIMCTL" --address="$both" put --name="r$n" --values=1,2,3,$n --print=none || fail "put r$n on both"
  on1="$(count_on "$ADDRESS")"
  on2="$(count_on "127.0.0.1:$PORT2")"
  ((on1 + on2 == n + 1)) || fail "after $((n + 1)) puts the servers hold $on1 and $on2"
  ((on1 > 0 && on2 > 0)) && break
done
((on1 > 0 && on2 > 0)) || fail "every put landed on one server"
for ((i = 0; i <= n; i++)); do
  for _ in 1 2; do
    [[ "$("$PRIMCTL" --address="$both" scan --buffer="r$i" --print=all)" == "1,3,6,$((6 + i))" ]] ||
      fail "scan of r$i through both servers"
    [[ "$("$PRIMCTL" --address="$both" get --name="r$i" --print=all)" == "1,2,3,$i" ]] ||
      fail "get of r$i through both servers"
  done
  "$PRIMCTL" --address="$both" free --name="r$i" || fail "free of r$i through both servers"
done
(($(count_on "$ADDRESS") + $(count_on "127.0.0.1:$PORT2") == 0)) || fail "buffers left after the frees"
kill -TERM "$SERVER2_PID"
wait "$SERVER2_PID"

# pipeline: a PipelineRequest in JSON (RLE of 7,7,1, then the runs' offsets)
cat >"$TMP/pipeline.json" <<'JSON'
{"steps": [{"run_length_encode": {"input": {"dtype": "INT32", "data": "BwAAAAcAAAABAAAA"}}, "returned": true},
           {"scan": {"op": "SUM", "exclusive": true, "input": {"step": {"step": 0, "output": "LENGTHS"}}},
            "returned": true}]}
JSON
expect '{"results":[{"run_length_encode":{"values":{"dtype":"INT32","data":"BwAAAAEAAAA="},"lengths":{"dtype":"INT64","data":"AgAAAAAAAAABAAAAAAAAAA=="}}},{"step":1,"scan":{"output":{"dtype":"INT64","data":"AAAAAAAAAAACAAAAAAAAAA=="}}}]}' \
  pipeline --request="$TMP/pipeline.json" --print=all
summary="$(primctl pipeline --request="$TMP/pipeline.json")" || fail "pipeline summary failed"
[[ "$summary" == "step 0 run_length_encode values: 2 INT32 lengths: 2 INT64"$'\n'"step 1 scan output: 2 INT64"$'\n'"latency "* ]] ||
  fail "pipeline printed: $summary"
echo '{"steps": [{"gather": {"values": {"dtype": "INT32", "data": "AQAAAA=="}, "indices": {"dtype": "INT64", "data": "AQAAAAAAAAA="}}, "returned": true}]}' \
  >"$TMP/bad_pipeline.json"
expect_exit 1 "step 0: indices[0] = 1 is outside [0, len(values)=1)" pipeline --request="$TMP/bad_pipeline.json"
echo '{"steps": [{"bogus": 1}]}' >"$TMP/not_pipeline.json"
expect_exit 2 "is not a PipelineRequest in protobuf's JSON mapping" pipeline --request="$TMP/not_pipeline.json"
expect_exit 2 "pipeline takes --request" pipeline

# Progress of long transfers (put, get, streams) on a terminal only:
# on_terminal <primctl args...> runs primctl with stderr on a pseudo-terminal
# and leaves what it drew there in $TMP/terminal.
on_terminal() {
  python3 - "$TMP/terminal" "$PRIMCTL" --address="$ADDRESS" "$@" <<'PY' >/dev/null || fail "primctl $* on a terminal failed"
import os, pty, subprocess, sys
leader, follower = pty.openpty()
code = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=follower, timeout=60).returncode
os.close(follower)
drawn = b""
while True:
    try:
        chunk = os.read(leader, 65536)
    except OSError:  # EIO: drained
        break
    if not chunk:
        break
    drawn += chunk
open(sys.argv[1], "wb").write(drawn)
sys.exit(code)
PY
}
on_terminal put --name=big --generate=random --n=1000000 --stripes=2
grep -q $'\r\e\[Kput big: 4.0 of 4.0 MB' "$TMP/terminal" || fail "put drew no progress: $(cat -v "$TMP/terminal")"
[[ "$(tail -c 4 "$TMP/terminal")" == $'\r\e[K' ]] || fail "put left its progress line: $(cat -v "$TMP/terminal")"
on_terminal get --name=big --print=none
grep -q $'\r\e\[Kget big: 4.0 of 4.0 MB' "$TMP/terminal" || fail "get drew no progress: $(cat -v "$TMP/terminal")"
on_terminal scan --generate=random --n=1000000 --piece_bytes=100000 --print=none
grep -q $'\r\e\[KScanRequest stream: 4.0 of 4.0 MB' "$TMP/terminal" ||
  fail "a streamed scan drew no progress: $(cat -v "$TMP/terminal")"
# In a pipe: nothing on stderr.
primctl put --name=big2 --generate=random --n=1000000 >/dev/null 2>"$TMP/stderr" || fail "put in a pipe failed"
primctl scan --generate=random --n=1000000 --piece_bytes=100000 --print=none >/dev/null 2>>"$TMP/stderr" ||
  fail "a streamed scan in a pipe failed"
[[ ! -s "$TMP/stderr" ]] || fail "progress in a pipe: $(cat -v "$TMP/stderr")"
primctl free --name=big && primctl free --name=big2 || fail "freeing big, big2"

# SIGTERM: the server drains and exits 0; then nothing answers, which health
# reports as UNAVAILABLE with gRPC's reason, not as a draining NOT_SERVING.
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
status=$?
((status == 0)) || fail "server exited $status after SIGTERM"
health="$(primctl health 2>"$TMP/stderr")"
status=$?
((status == 1)) || fail "health with no server exited $status, not 1"
[[ "$health" == "UNAVAILABLE" ]] || fail "health with no server printed '$health', not UNAVAILABLE"
grep -q "^primctl: health: ." "$TMP/stderr" || fail "health with no server gave no reason: $(cat "$TMP/stderr")"
expect_exit 1 "error: UNAVAILABLE: " scan --values=1

echo PASS
