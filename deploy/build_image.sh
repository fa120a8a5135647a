#!/usr/bin/env bash
# Builds the primserve container image with podman from Debian's own packages,
# no registry needed: deploy/image_root.sh assembles the root filesystem, and
# deploy/Containerfile copies it onto an empty (scratch) base. Prints the
# image's size.
#
#   deploy/build_image.sh [TAG]      default TAG: primserve:latest
#   podman save primserve:latest | ssh gpu-node podman load    (or podman push)
#
# PODMAN overrides the podman command (e.g. with --root for a throwaway store).
set -euo pipefail
cd "$(dirname "$0")/.."

readonly TAG="${1:-primserve:latest}"
read -r -a podman <<<"${PODMAN:-podman}"

deploy/image_root.sh
"${podman[@]}" build --quiet --format=docker -t "$TAG" -f dist/image/Containerfile dist/image >&2
size="$("${podman[@]}" image inspect --format '{{.Size}}' "$TAG")"
echo "build_image: $TAG, $((size / 1024 / 1024)) MiB ($size bytes)"
