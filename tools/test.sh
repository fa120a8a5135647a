#!/usr/bin/env bash
# Installs what the build needs (Debian packages), then builds everything and
# runs every test that needs no GPU. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh
bazel test //... "$@"
