#!/bin/bash
# CI checks of deploy/: promtool validates the Prometheus config and alert
# rules and runs the alerts' unit tests; then a live CPU primserve (after one
# scan, so its per-request series exist) provides the metric names and flags
# check_deploy.py holds the dashboard, alerts, manifests and Dockerfile to.
#
# Usage: deploy_test.sh <primserve> <primctl> <check_deploy.py> <server/engine/metrics.cc>
set -u

readonly PRIMSERVE="$1" PRIMCTL="$2" CHECK="$3" METRICS_SOURCE="$4"
readonly DEPLOY="$(dirname "$CHECK")"
readonly TMP="${TEST_TMPDIR:-$(mktemp -d)}"

fail() {
  echo "FAIL: $*" >&2
  [[ -f "$TMP/server.log" ]] && { echo "--- server log:" >&2; cat "$TMP/server.log" >&2; }
  exit 1
}

if [[ -x /usr/bin/promtool ]]; then
  /usr/bin/promtool check config "$DEPLOY/prometheus.yml" || fail "promtool check config"
  /usr/bin/promtool check rules "$DEPLOY/alerts.yml" || fail "promtool check rules"
  /usr/bin/promtool test rules "$DEPLOY/alerts_test.yml" || fail "promtool test rules"
else
  echo "SKIPPED promtool checks: /usr/bin/promtool is missing (package prometheus, tools/setup.sh)"
fi

: >"$TMP/server.log"  # exists before the server starts, for the loop below to read
"$PRIMSERVE" --backend=cpu --host=127.0.0.1 --port=0 \
  --metrics_host=127.0.0.1 --metrics_port=0 --shutdown_grace_seconds=1 >"$TMP/server.log" 2>&1 &
readonly SERVER_PID=$!
trap 'kill -KILL "$SERVER_PID" 2>/dev/null' EXIT

GRPC_PORT="" METRICS_PORT=""
for ((i = 0; i < 200; i++)); do
  GRPC_PORT="$(sed -n 's/.*primserve listening on [^ ]*:\([0-9]*\) .*/\1/p' "$TMP/server.log")"
  METRICS_PORT="$(sed -n 's|.*metrics at http://[^ ]*:\([0-9]*\)/metrics.*|\1|p' "$TMP/server.log")"
  [[ -n $GRPC_PORT && -n $METRICS_PORT ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "primserve exited before listening"
  sleep 0.1
done
[[ -n $GRPC_PORT && -n $METRICS_PORT ]] || fail "primserve not listening after 20 s"

"$PRIMCTL" --address="127.0.0.1:$GRPC_PORT" scan --values=1,2,3 --print=none ||
  fail "primctl scan failed"
curl -sSf "http://127.0.0.1:$METRICS_PORT/metrics" >"$TMP/metrics" || fail "cannot scrape /metrics"
# --helpfull: absl's --help lists only flags of a file named after the binary.
"$PRIMSERVE" --helpfull >"$TMP/server_help"
"$PRIMCTL" --helpfull >"$TMP/client_help"

/usr/bin/python3 "$CHECK" --deploy_dir="$DEPLOY" --scrape="$TMP/metrics" \
  --metrics_source="$METRICS_SOURCE" --server_help="$TMP/server_help" \
  --client_help="$TMP/client_help" || fail "check_deploy.py found problems"
echo PASS
