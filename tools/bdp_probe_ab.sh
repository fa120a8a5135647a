#!/usr/bin/env bash
# What primserve's default of gRPC's bandwidth-delay probe off costs a large
# transfer: two CPU primservers on loopback TCP, one with --grpc_bdp_probe
# (gRPC's own default) and one with the default, each answering one
# caller's 64M-element int32 scans (256 MiB each way) one at a time with
# primload, in turns (on, off, on, off, ...) so both see the same machine.
#   tools/bdp_probe_ab.sh OUT_DIR [--n=67108864] [--rounds=3] [--measure_seconds=8]
# Output: OUT_DIR/summary.txt (each turn's p50 and the medians, also
# printed), OUT_DIR/<on|off>-<round>.csv (primload's rows), the servers' logs.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: bdp_probe_ab.sh OUT_DIR [--n=N] [--rounds=R] [--measure_seconds=S]}"
shift
n=67108864
rounds=3
measure=8
for arg in "$@"; do
  case "$arg" in
    --n=*) n="${arg#--n=}" ;;
    --rounds=*) rounds="${arg#--rounds=}" ;;
    --measure_seconds=*) measure="${arg#--measure_seconds=}" ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done
cd "$repo"
bazel build //server:primserve //client:primload >/dev/null
bin="$(bazel info bazel-bin 2>/dev/null)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
pids=()
stop_servers() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop_servers EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
declare -A port
for probe in on off; do
  port[$probe]="$(free_port)"
  flags=(--backend=cpu --host=127.0.0.1 --port="${port[$probe]}" --metrics_port=-1)
  [[ $probe == on ]] && flags+=(--grpc_bdp_probe)
  "$bin/server/primserve" "${flags[@]}" >"$out/primserve-$probe.log" 2>&1 &
  pids+=("$!")
done
sleep 2

summary="$out/summary.txt"
{
  echo "date: $(date -u +%FT%TZ)  commit: $(git rev-parse --short HEAD)  host: $(nproc) cores, $(uname -r)"
  echo "scan int32 SUM, n=$n, 1 caller, concurrency 1, loopback TCP, CPU backend, ${measure} s a turn"
} >"$summary"
declare -A p50s
for ((round = 1; round <= rounds; round++)); do
  for probe in on off; do
    csv="$out/$probe-$round.csv"
    "$bin/client/primload" --address="127.0.0.1:${port[$probe]}" --rpc=scan --n="$n" \
      --distinct_requests=1 --concurrency=1 --warmup_seconds=2 --measure_seconds="$measure" \
      --csv="$csv" >/dev/null
    # The row's p50_ms, p99_ms and ok (calls measured) columns.
    row="$(python3 -c '
import csv, sys
r = next(csv.DictReader(open(sys.argv[1])))
print(r["p50_ms"], r["p99_ms"], r["ok"], r["errors"])' "$csv")"
    read -r p50 p99 calls errors <<<"$row"
    p50s[$probe]+="$p50 "
    echo "round $round, probe $probe: p50 $p50 ms, p99 $p99 ms, $calls calls, errors: $errors" |
      tee -a "$summary"
  done
done
for probe in on off; do
  # shellcheck disable=SC2086
  python3 -c 'import statistics, sys; print(f"probe {sys.argv[1]}: median of the turns'"'"' p50s {statistics.median(map(float, sys.argv[2:])):.1f} ms")' \
    "$probe" ${p50s[$probe]} | tee -a "$summary"
done
