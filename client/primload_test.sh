#!/bin/bash
# End-to-end test of primload: starts a CPU primserve on a free loopback port,
# runs short load tests of every RPC with --verify, in closed and open loop,
# against the primitive and the Echo method, and checks the printed table: the
# expected rows, calls that succeeded and were all verified, no mismatches,
# no errors. Then checks that failed calls are counted by status code and that
# the exit status tells.
#
# Then the same through the streaming RPCs (--stream_piece_bytes) and
# EchoStream.
#
# Usage: primload_test.sh <primserve binary> <primctl binary> <primload binary>
set -u

readonly PRIMSERVE="$1"
readonly PRIMCTL="$2"
readonly PRIMLOAD="$3"
readonly TMP="${TEST_TMPDIR:-$(mktemp -d)}"
# The server refuses larger requests: the error case below sends one.
readonly MAX_ELEMENTS=100000

fail() {
  echo "FAIL: $*" >&2
  [[ -f "$TMP/server.log" ]] && { echo "--- server log:" >&2; cat "$TMP/server.log" >&2; }
  exit 1
}

PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')" ||
  fail "cannot pick a free port"
readonly ADDRESS="127.0.0.1:$PORT"

"$PRIMSERVE" --backend=cpu --host=127.0.0.1 --port="$PORT" --metrics_port=-1 --enable_echo \
  --max_request_elements="$MAX_ELEMENTS" >"$TMP/server.log" 2>&1 &
readonly SERVER_PID=$!
trap 'kill -KILL "$SERVER_PID" 2>/dev/null' EXIT

for ((i = 0; ; i++)); do
  "$PRIMCTL" --address="$ADDRESS" health >/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "server exited before serving"
  ((i < 100)) || fail "server not SERVING after 10 s"
  sleep 0.1
done

# load <name> <primload args...>: runs a short load test that must exit 0;
# its output goes to $TMP/<name>.out.
load() {
  local name="$1"
  shift
  "$PRIMLOAD" --address="$ADDRESS" --warmup_seconds=0.2 --measure_seconds=0.5 "$@" \
    >"$TMP/$name.out" 2>&1 || fail "primload $* exited $?: $(cat "$TMP/$name.out")"
}

# expect_row <name> <target> <level>: the output of `load <name>` has that row
# once, with ok calls, every one verified, no mismatches and no errors.
expect_row() {
  local name="$1" target="$2" level="$3" row
  row="$(awk -v t="$target" -v l="$level" '$1 == t && $2 == l' "$TMP/$name.out")"
  [[ "$(wc -l <<<"$row")" == 1 && -n "$row" ]] ||
    fail "$name: not one '$target $level' row in:"$'\n'"$(cat "$TMP/$name.out")"
  read -r _ _ _ _ _ _ _ _ ok verified mismatches errors extra <<<"$row"
  [[ -z "$extra" ]] || fail "$name: row has more than 12 columns: $row"
  ((ok > 0)) || fail "$name: no ok calls: $row"
  ((verified == ok)) || fail "$name: $verified verified of $ok: $row"
  [[ "$mismatches" == 0 && "$errors" == 0 ]] || fail "$name: mismatches or errors: $row"
}

# expect_rows <name> <count>: the output has exactly a header line, the column
# names and <count> rows.
expect_rows() {
  local lines
  lines="$(wc -l <"$TMP/$1.out")"
  ((lines == $2 + 2)) || fail "$1: $lines lines, expected $(($2 + 2)):"$'\n'"$(cat "$TMP/$1.out")"
}

# Closed loop, every response verified against the reference, and the CSV.
load scan --rpc=scan --n=50000 --concurrency=1,4 --verify --verify_every=1 --csv="$TMP/scan.csv"
expect_rows scan 2
expect_row scan scan 1
expect_row scan scan 4
# The same calls as requests on Multiplex streams (one per channel).
load multiplex --rpc=reduce_by_key --n=20000 --concurrency=1,16 --channels=2 --multiplex --verify \
  --verify_every=1
expect_rows multiplex 2
expect_row multiplex reduce_by_key/multiplex 1
expect_row multiplex reduce_by_key/multiplex 16
readonly COLUMNS="target concurrency requests/s items/s GB/s p50_ms p90_ms p99_ms ok verified \
mismatches errors"
[[ "$(sed -n 2p "$TMP/scan.out" | tr -s ' ')" == "$COLUMNS" ]] ||
  fail "scan: no column names in: $(cat "$TMP/scan.out")"
[[ "$(head -1 "$TMP/scan.csv")" == "${COLUMNS// /,}" ]] ||
  fail "csv header: $(head -1 "$TMP/scan.csv")"
[[ "$(grep -c '^scan,[14],' "$TMP/scan.csv")" == 2 ]] || fail "csv rows: $(cat "$TMP/scan.csv")"

# The Echo method alone, and side by side with the primitive.
load echo --rpc=scan --n=50000 --concurrency=1,4 --mode=echo --verify --verify_every=1
expect_rows echo 2
expect_row echo echo 1
expect_row echo echo 4
load both --rpc=reduce --dtype=float32 --n=50000 --concurrency=2 --mode=both --verify \
  --verify_every=1
expect_rows both 3
expect_row both reduce 2
expect_row both echo 2
awk '$1 == "reduce/echo" && $2 == 2 && $3 > 0 { found = 1 } END { exit !found }' "$TMP/both.out" ||
  fail "both: no reduce/echo ratio row: $(cat "$TMP/both.out")"

# Open loop: 40 requests/s for 0.5 s is 20 calls, give or take the window's
# edges (a closed loop would make hundreds).
load rate --rpc=select --dtype=int64 --n=20000 --rate=40 --channels=2 --verify --verify_every=1
expect_rows rate 1
expect_row rate select 40
awk '$1 == "select" { exit !($9 >= 15 && $9 <= 25) }' "$TMP/rate.out" ||
  fail "rate: not about 20 ok calls: $(cat "$TMP/rate.out")"

# The other RPCs, with float SUM checked within the tolerance.
load unique --rpc=unique --dtype=uint32 --n=20000 --concurrency=2 --verify --verify_every=1
expect_row unique unique 2
load rle --rpc=rle --dtype=float64 --n=20000 --concurrency=2 --verify --verify_every=1
expect_row rle rle 2
load reduce_by_key --rpc=reduce_by_key --dtype=float32 --n=20000 --concurrency=2 --verify \
  --verify_every=1
expect_row reduce_by_key reduce_by_key 2
load aggregate_by_key --rpc=aggregate_by_key --dtype=float64 --op=max --n=20000 --concurrency=2 \
  --verify --verify_every=1
expect_row aggregate_by_key aggregate_by_key 2
load segmented --rpc=scan --dtype=float32 --segments=7 --n=20000 --concurrency=2 --verify \
  --verify_every=1
expect_row segmented scan 2

# Streams: each request cut into pieces through the RPC's *Stream form, the
# answers joined and verified against the reference; arrays larger than one
# request may hold (MAX_ELEMENTS) stream through. Beside EchoStream.
load stream --rpc=scan --n=$((MAX_ELEMENTS * 3 / 2)) --stream_piece_bytes=65536 \
  --concurrency=1,4 --mode=both --verify --verify_every=1
expect_rows stream 6
expect_row stream scan/stream 1
expect_row stream scan/stream 4
expect_row stream echo/stream 1
expect_row stream echo/stream 4
for rpc in select unique rle reduce_by_key; do
  load "stream_$rpc" --rpc="$rpc" --dtype=int64 --n=50000 --stream_piece_bytes=40000 \
    --concurrency=2 --verify --verify_every=1
  expect_row "stream_$rpc" "$rpc/stream" 2
done
load stream_segmented --rpc=scan --dtype=float32 --segments=7 --n=50000 \
  --stream_piece_bytes=12345 --concurrency=2 --verify --verify_every=1
expect_row stream_segmented scan/stream 2
load stream_count --rpc=select --output=count --dtype=uint32 --n=50000 \
  --stream_piece_bytes=4096 --concurrency=2 --verify --verify_every=1
expect_row stream_count select/stream 2

# Resident inputs (uploaded once over 2 connections): answers inline and
# verified, unary and multiplexed; then outputs into buffers.
load resident --rpc=select --n=20000 --concurrency=2 --channels=2 --resident \
  --resident_output=inline --verify --verify_every=1
expect_row resident select 2
grep -q "inputs resident: .* uploaded once in .* over 2 connections" "$TMP/resident.out" ||
  fail "resident: no upload line in: $(cat "$TMP/resident.out")"
load resident_multiplex --rpc=reduce_by_key --n=20000 --concurrency=4 --resident \
  --resident_output=inline --multiplex --verify --verify_every=1
expect_row resident_multiplex reduce_by_key/multiplex 4
load resident_outputs --rpc=scan --n=20000 --concurrency=1 --resident
awk '$1 == "scan" && $2 == 1 && $9 > 0 && $12 == 0 { found = 1 } END { exit !found }' \
  "$TMP/resident_outputs.out" || fail "resident_outputs: $(cat "$TMP/resident_outputs.out")"

# Failed calls: counted by status code, and primload exits 1.
"$PRIMLOAD" --address="$ADDRESS" --n=$((MAX_ELEMENTS + 1)) --concurrency=1 --warmup_seconds=0 \
  --measure_seconds=0.3 >"$TMP/too_large.out" 2>&1
status=$?
((status == 1)) || fail "too_large: exited $status, expected 1: $(cat "$TMP/too_large.out")"
awk '$1 == "scan" && $9 == 0 && $12 ~ /^RESOURCE_EXHAUSTED=[0-9]+$/ { found = 1 }
     END { exit !found }' "$TMP/too_large.out" ||
  fail "too_large: no RESOURCE_EXHAUSTED count: $(cat "$TMP/too_large.out")"

# Bad command lines exit 2.
for args in "--rpc=scan --op=argmax" "--concurrency=0" "--mode=fast" "--no_such_flag" \
  "--stream_piece_bytes=4096 --multiplex" "--stream_piece_bytes=4096 --shm" \
  "--resident --shm" "--resident --verify" "--resident --resident_output=disk"; do
  # shellcheck disable=SC2086
  "$PRIMLOAD" --address="$ADDRESS" $args >/dev/null 2>&1
  status=$?
  ((status == 2)) || fail "primload $args exited $status, expected 2"
done

echo PASS
