#!/usr/bin/env bash
# Packs the server and the client tools with every shared library they need
# that a plain CUDA host lacks (e.g. Ubuntu 24.04 with only the NVIDIA driver)
# into dist/node_bundle/ (git-ignored), runnable from any directory:
#
#   bin/primserve, bin/primctl (bin/primload when built)
#                   RPATH $ORIGIN/../lib: found without LD_LIBRARY_PATH
#   lib/            gRPC, protobuf, absl, re2, c-ares, OpenSSL, upb,
#                   prometheus-cpp, zlib, ...: everything ldd lists but glibc,
#                   libstdc++/libgcc_s (newer on the target) and the driver
#   run_check.sh    smoke test on the target: see its header
#
#   tools/build_node_bundle.sh && scp -r dist/node_bundle gpu-host: &&
#   ssh gpu-host node_bundle/run_check.sh --backend=cuda
#
# The binaries need glibc >= this machine's (Debian 12: 2.36).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=dist/node_bundle
# What every glibc host has, or must not come from here: the NVIDIA driver's
# libraries match the host's kernel module.
readonly HOST_LIBS='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libutil|libresolv|libgcc_s|libstdc\+\+|libcuda|libnvidia-[a-z-]+)\.so'

./tools/setup.sh
bazel build //server:primserve //client:all
# Not the bazel-bin symlink: it follows whichever configuration (a sanitizer's,
# say) the last bazel command on this workspace built.
BIN="$(bazel info bazel-bin)"

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib"
tools=(server/primserve client/primctl)
[[ -x $BIN/client/primload ]] && tools+=(client/primload)

for tool in "${tools[@]}"; do
  binary="$OUT/bin/$(basename "$tool")"
  # Symbols stay for stack traces; debug info goes.
  strip --strip-debug -o "$binary" "$BIN/$tool"
  # DT_RPATH, unlike RUNPATH, also serves the libraries' own dependencies.
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$binary"
  # "libfoo.so.1 => /path/libfoo.so.1.2.3 (0x...)": copy under the soname.
  ldd "$BIN/$tool" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
    while read -r soname path; do
      [[ $soname =~ $HOST_LIBS ]] && continue
      [[ -e "$OUT/lib/$soname" ]] || cp -L "$path" "$OUT/lib/$soname"
    done
  if ldd "$BIN/$tool" | grep -q 'not found'; then
    echo "build_node_bundle: $tool has unresolved libraries here" >&2
    exit 1
  fi
done
chmod 0644 "$OUT"/lib/*

cat >"$OUT/run_check.sh" <<'CHECK'
#!/usr/bin/env bash
# Smoke test of this bundle on this host, with LD_LIBRARY_PATH unset: starts
# bin/primserve on free loopback ports, checks gRPC health, a small scan and a
# 1M-element reduce with bin/primctl, scrapes /metrics, then stops the server
# with SIGTERM. Exits non-zero on any failure.
#
#   run_check.sh [primserve flags...]     e.g. --backend=cuda (default: auto)
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
TMP="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  [[ -n $SERVER_PID ]] && kill -KILL "$SERVER_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "--- server log:" >&2
  cat "$TMP/server.log" >&2
  exit 1
}
run() { env -u LD_LIBRARY_PATH "$@"; }

for binary in primserve primctl; do
  if run ldd "$HERE/bin/$binary" | grep 'not found'; then fail "bin/$binary misses libraries"; fi
done

# env execs the server, so $! is the server's pid. Without GRPC_VERBOSITY the
# server logs its INFO lines, the ports among them. The log exists before the
# server starts, for the loop below to read.
: >"$TMP/server.log"
env -u LD_LIBRARY_PATH -u GRPC_VERBOSITY "$HERE/bin/primserve" --host=127.0.0.1 --port=0 \
  --metrics_host=127.0.0.1 --metrics_port=0 --shutdown_grace_seconds=5 "$@" \
  >"$TMP/server.log" 2>&1 &
SERVER_PID=$!

GRPC_PORT="" METRICS_PORT=""
for ((i = 0; i < 600; i++)); do
  GRPC_PORT="$(sed -n 's/.*primserve listening on [^ ]*:\([0-9]*\) .*/\1/p' "$TMP/server.log")"
  METRICS_PORT="$(sed -n 's|.*metrics at http://[^ ]*:\([0-9]*\)/metrics.*|\1|p' "$TMP/server.log")"
  [[ -n $GRPC_PORT && -n $METRICS_PORT ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "primserve exited before listening"
  sleep 0.1
done
[[ -n $GRPC_PORT && -n $METRICS_PORT ]] || fail "primserve not listening after 60 s"
echo "primserve up: gRPC 127.0.0.1:$GRPC_PORT, metrics 127.0.0.1:$METRICS_PORT"

# expect <expected output> <primctl args...>
expect() {
  local expected="$1" actual
  shift
  actual="$(run "$HERE/bin/primctl" --address="127.0.0.1:$GRPC_PORT" "$@" 2>&1)" ||
    fail "primctl $* failed: $actual"
  [[ $actual == "$expected" ]] || fail "primctl $*: got '$actual', expected '$expected'"
  echo "ok: primctl $*"
}
expect SERVING health
expect 3,4,8,9,14 scan --dtype=int32 --op=sum --values=3,1,4,1,5 --print=all
# 0 + 1 + ... + 999999, large enough to run alone (unbatched).
expect 499999500000 reduce --dtype=int64 --op=sum --generate=sequence --n=1000000 --print=all

# /metrics over bash's /dev/tcp: no curl needed on the host.
exec 3<>"/dev/tcp/127.0.0.1/$METRICS_PORT" || fail "cannot connect to the metrics port"
printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
cat <&3 >"$TMP/metrics"
exec 3<&-
grep -q '^primserve_requests_total{code="OK",dtype="INT32",op="SUM",rpc="Scan"} 1$' "$TMP/metrics" ||
  fail "/metrics lacks the scan: $(grep primserve_requests_total "$TMP/metrics")"
grep -q '^primserve_requests_total{code="OK",dtype="INT64",op="SUM",rpc="Reduce"} 1$' "$TMP/metrics" ||
  fail "/metrics lacks the reduce: $(grep primserve_requests_total "$TMP/metrics")"
echo "ok: /metrics: $(grep '^primserve_build_info' "$TMP/metrics")"
grep '^primserve_gpu_memory_bytes' "$TMP/metrics" || true

kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
status=$?
SERVER_PID=""
((status == 0)) || fail "primserve exited $status after SIGTERM"
echo "PASS"
CHECK
chmod +x "$OUT/run_check.sh"

# Self-check here, where the same libraries also sit in /usr/lib: every
# non-host library must resolve inside the bundle.
bundle_lib="$(realpath "$OUT/lib")"
for binary in "$OUT"/bin/*; do
  env -u LD_LIBRARY_PATH ldd "$binary" | awk '$2 == "=>" {print $1, $3}' |
    while read -r soname path; do
      [[ $soname =~ $HOST_LIBS ]] && continue
      if [[ $path == "not" || "$(dirname "$(realpath "$path")")" != "$bundle_lib" ]]; then
        echo "build_node_bundle: $binary loads $soname from $path, not the bundle" >&2
        exit 1
      fi
    done
done
echo "build_node_bundle: $(du -sh "$OUT" | cut -f1) in $OUT ($(ls "$OUT/lib" | wc -l) libraries)"
