#!/bin/bash
# TLS end to end. Makes a throwaway CA with server and client certificates
# (openssl), starts primserve on loopback with TLS, then with mutual TLS, and
# checks with primctl who gets through:
#   TLS:        a client trusting the CA works; a plaintext client and a
#               client trusting another CA fail.
#   mutual TLS: a client without a certificate fails; one with a certificate
#               the client CA signed works; one with a self-signed one fails.
# Also: bad TLS flags stop the server at start with a message, not a crash.
#
# Usage: tls_test.sh <primserve binary> <primctl binary>
set -u

# Absolute: the test works in $TMP, where it writes the certificates.
readonly PRIMSERVE="$(realpath "$1")"
readonly PRIMCTL="$(realpath "$2")"
readonly TMP="${TEST_TMPDIR:-$(mktemp -d)}"
SERVER_PID=""

fail() {
  echo "FAIL: $*" >&2
  [[ -f "$TMP/server.log" ]] && { echo "--- server log:" >&2; cat "$TMP/server.log" >&2; }
  exit 1
}
trap '[[ -n "$SERVER_PID" ]] && kill -KILL "$SERVER_PID" 2>/dev/null' EXIT

# --- Certificates: a CA, a server certificate for 127.0.0.1/localhost and a
# client certificate it signs; another CA; a self-signed client certificate.
cd "$TMP" || fail "no temp dir"
new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
self_signed() {  # <name> <CN>
  new_key "$1.key" && openssl req -x509 -new -key "$1.key" -subj "/CN=$2" -days 1 -out "$1.pem" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}
signed_by_ca() {  # <name> <CN> <extensions>
  new_key "$1.key" &&
    openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr" 2>/dev/null &&
    printf '%s\n' "$3" >"$1.ext" &&
    openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
      -extfile "$1.ext" -out "$1.pem" 2>/dev/null
}
self_signed ca "primserve test CA" || fail "openssl: cannot make the CA"
self_signed other_ca "another CA" || fail "openssl: cannot make the other CA"
signed_by_ca server localhost $'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth' ||
  fail "openssl: cannot make the server certificate"
signed_by_ca client "primserve test client" 'extendedKeyUsage=clientAuth' ||
  fail "openssl: cannot make the client certificate"
self_signed rogue_client "rogue client" || fail "openssl: cannot make the rogue certificate"

PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')" ||
  fail "cannot pick a free port"
readonly ADDRESS="127.0.0.1:$PORT"

primctl() {
  "$PRIMCTL" --address="$ADDRESS" --timeout_seconds=10 "$@"
}

# start_server <flags...>: starts primserve with TLS flags and waits until a
# client with the CA (and the client certificate) sees it SERVING.
start_server() {
  "$PRIMSERVE" --backend=cpu --host=127.0.0.1 --port="$PORT" --metrics_port=-1 \
    --shutdown_grace_seconds=2 "$@" >"$TMP/server.log" 2>&1 &
  SERVER_PID=$!
  for ((i = 0; ; i++)); do
    primctl --tls_ca=ca.pem --tls_cert=client.pem --tls_key=client.key health >/dev/null 2>&1 && break
    kill -0 "$SERVER_PID" 2>/dev/null || fail "server exited before serving"
    ((i < 100)) || fail "server not SERVING after 10 s"
    sleep 0.1
  done
}

stop_server() {
  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID" || fail "server exited $? after SIGTERM"
  SERVER_PID=""
}

# works <what> <primctl flags...>: a scan must come back right.
works() {
  local what="$1" out
  shift
  out="$(primctl "$@" scan --values=1,2,3 --print=all 2>"$TMP/stderr")" ||
    fail "$what: primctl exited $?: $(cat "$TMP/stderr")"
  [[ "$out" == "1,3,6" ]] || fail "$what: printed '$out'"
  echo "ok: $what"
}

# refused <what> <primctl flags...>: the scan must fail with UNAVAILABLE (the
# handshake fails, so no call is made).
refused() {
  local what="$1"
  shift
  primctl "$@" scan --values=1,2,3 --print=all >/dev/null 2>"$TMP/stderr" &&
    fail "$what: the call went through"
  grep -q "UNAVAILABLE" "$TMP/stderr" || fail "$what: unexpected error: $(cat "$TMP/stderr")"
  echo "ok: $what refused"
}

# --- TLS
start_server --tls_cert=server.pem --tls_key=server.key
grep -q "(backend cpu, TLS)" "$TMP/server.log" || fail "the log does not say TLS"
works "TLS client trusting the CA" --tls_ca=ca.pem
refused "plaintext client"
refused "TLS client trusting another CA" --tls_ca=other_ca.pem
stop_server

# --- mutual TLS
start_server --tls_cert=server.pem --tls_key=server.key --tls_client_ca=ca.pem
grep -q "(backend cpu, mutual TLS)" "$TMP/server.log" || fail "the log does not say mutual TLS"
works "client with a certificate from the client CA" --tls_ca=ca.pem --tls_cert=client.pem \
  --tls_key=client.key
refused "client without a certificate" --tls_ca=ca.pem
refused "client with a self-signed certificate" --tls_ca=ca.pem --tls_cert=rogue_client.pem \
  --tls_key=rogue_client.key
refused "plaintext client"
stop_server

# --- bad flags: exit 1 with the reason
# bad_start <message> <flags...>
bad_start() {
  local message="$1" status
  shift
  "$PRIMSERVE" --backend=cpu --host=127.0.0.1 --port="$PORT" --metrics_port=-1 "$@" \
    >"$TMP/server.log" 2>&1
  status=$?
  ((status == 1)) || fail "primserve $* exited $status, expected 1"
  grep -qF -- "$message" "$TMP/server.log" || fail "primserve $* did not say '$message'"
  echo "ok: refuses to start: $message"
}
bad_start "TLS needs both a certificate and its private key" --tls_cert=server.pem
bad_start "a client CA (mutual TLS) needs TLS" --tls_client_ca=ca.pem
bad_start "cannot open the TLS private key file missing.key" --tls_cert=server.pem \
  --tls_key=missing.key
printf 'not a key\n' >garbage.key
bad_start "cannot listen" --tls_cert=server.pem --tls_key=garbage.key

echo PASS
