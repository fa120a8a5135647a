#!/usr/bin/env bash
# Installs what the build needs, builds the server and runs it in the
# foreground (gRPC on port 50051 unless --port says otherwise). Flags are
# passed to the server: see `bazel-bin/server/primserve --help`.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh
bazel build //server:primserve //client:all
exec bazel-bin/server/primserve "$@"
