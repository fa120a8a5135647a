#!/usr/bin/env bash
# Installs what the build needs, builds the server and the client tools, and
# runs the server in the foreground (gRPC on port 50051, metrics on 9464,
# unless flags say otherwise). Flags are passed to the server: see
# `dist/bin/primserve --help`. The binaries are copied to dist/bin/, which
# stays put whatever Bazel builds next.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh
bazel build //server:primserve //client:primctl //client:primload
bin="$(bazel info output_path)/k8-opt/bin"
mkdir -p dist/bin
install -m 755 "$bin/server/primserve" "$bin/client/primctl" "$bin/client/primload" dist/bin/
exec dist/bin/primserve "$@"
