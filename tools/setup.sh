#!/usr/bin/env bash
# Installs the Debian packages primserve builds and tests with. Idempotent:
# runs apt-get update at most once, and only when something is missing.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap bazel-rules-java bazel-platforms
  g++ clang libclang-rt-14-dev
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libgrpc++-dev libgrpc-dev libabsl-dev
  prometheus-cpp-dev libgtest-dev libgmock-dev
  prometheus python3 python3-yaml curl patchelf openssl
  podman
  haproxy python3-hpack
  python3-grpcio python3-protobuf python3-numpy python3-pytest python3-pip python3-setuptools python3-venv
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
