#!/bin/bash
# CI checks of deploy/: promtool validates the Prometheus config and alert
# rules and runs the alerts' unit tests; then a live CPU primserve (after one
# scan, so its per-request series exist) provides the metric names and flags
# check_deploy.py holds the dashboard, alerts, manifests and Dockerfile to.
# The server serves its metrics on loopback unless told otherwise, and the
# edge (haproxy.cfg, run in front of it) serves /metrics to the allowed
# networks only, beside 60 idle connections.
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
command -v haproxy >/dev/null || fail "haproxy is not installed (tools/setup.sh installs it)"

# No --metrics_host: the default must be loopback.
"$PRIMSERVE" --backend=cpu --host=127.0.0.1 --port=0 \
  --metrics_port=0 --shutdown_grace_seconds=1 >"$TMP/server.log" 2>&1 &
readonly SERVER_PID=$!
EDGE_PID="" IDLE_PID=""
trap 'kill -KILL "$SERVER_PID" $EDGE_PID $IDLE_PID 2>/dev/null' EXIT

GRPC_PORT="" METRICS_PORT=""
for ((i = 0; i < 200; i++)); do
  GRPC_PORT="$(sed -n 's/.*primserve listening on [^ ]*:\([0-9]*\) .*/\1/p' "$TMP/server.log")"
  METRICS_PORT="$(sed -n 's|.*metrics at http://[^ ]*:\([0-9]*\)/metrics.*|\1|p' "$TMP/server.log")"
  [[ -n $GRPC_PORT && -n $METRICS_PORT ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "primserve exited before listening"
  sleep 0.1
done
[[ -n $GRPC_PORT && -n $METRICS_PORT ]] || fail "primserve not listening after 20 s"
grep -q "metrics at http://127.0.0.1:" "$TMP/server.log" ||
  fail "--metrics_host does not default to loopback"

"$PRIMCTL" --address="127.0.0.1:$GRPC_PORT" scan --values=1,2,3 --print=none ||
  fail "primctl scan failed"
curl -sSf "http://127.0.0.1:$METRICS_PORT/metrics" >"$TMP/metrics" || fail "cannot scrape /metrics"
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
EDGE_METRICS="$(free_port)"
PRIMSERVE_EDGE_BIND="127.0.0.1:$(free_port)" PRIMSERVE_UPSTREAM="127.0.0.1:$GRPC_PORT" \
  PRIMSERVE_METRICS_BIND="127.0.0.1:$EDGE_METRICS" \
  PRIMSERVE_METRICS_UPSTREAM="127.0.0.1:$METRICS_PORT" PRIMSERVE_METRICS_ALLOW="127.0.0.1/32" \
  haproxy -db -f "$DEPLOY/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 &
EDGE_PID=$!
# code <curl args...>: the HTTP status of a GET through the edge's metrics port.
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
for ((i = 0; i < 100; i++)); do
  [[ $(code "http://127.0.0.1:$EDGE_METRICS/metrics") == 200 ]] && break
  kill -0 "$EDGE_PID" 2>/dev/null || { cat "$TMP/haproxy.log" >&2; fail "haproxy exited"; }
  sleep 0.1
done
curl -sSf "http://127.0.0.1:$EDGE_METRICS/metrics" >"$TMP/edge_metrics" &&
  grep -q '^primserve_requests_total' "$TMP/edge_metrics" ||
  fail "no scrape through the edge's metrics port"
[[ $(code "http://127.0.0.1:$EDGE_METRICS/") == 404 ]] || fail "the edge passes paths but /metrics"
[[ $(code -X POST "http://127.0.0.1:$EDGE_METRICS/metrics") == 404 ]] ||
  fail "the edge passes methods but GET"
[[ $(code --interface 127.0.0.3 "http://127.0.0.1:$EDGE_METRICS/metrics") == 403 ]] ||
  fail "the edge serves /metrics outside PRIMSERVE_METRICS_ALLOW"
# 60 idle connections, held past the edge's 2 s request timeout: a scrape
# still answers within 1 s.
/usr/bin/python3 -c '
import socket, sys, time
held = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(60)]
time.sleep(30)' "$EDGE_METRICS" &
IDLE_PID=$!
sleep 2.5
for ((i = 0; i < 5; i++)); do
  curl -sSf -m 1 "http://127.0.0.1:$EDGE_METRICS/metrics" -o /dev/null ||
    fail "a scrape through the edge took over 1 s beside 60 idle connections"
done

# --helpfull: absl's --help lists only flags of a file named after the binary.
"$PRIMSERVE" --helpfull >"$TMP/server_help"
"$PRIMCTL" --helpfull >"$TMP/client_help"

/usr/bin/python3 "$CHECK" --deploy_dir="$DEPLOY" --scrape="$TMP/metrics" \
  --metrics_source="$METRICS_SOURCE" --server_help="$TMP/server_help" \
  --client_help="$TMP/client_help" || fail "check_deploy.py found problems"
echo PASS
