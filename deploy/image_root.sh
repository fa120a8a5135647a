#!/usr/bin/env bash
# Assembles the primserve image's root filesystem in dist/image/root (with
# deploy/Containerfile beside it: dist/image is the build context) from
# tools/build_node_bundle.sh's bundle plus the C/C++ runtime the binaries need:
#
#   /opt/primserve/bin/primserve, primctl   RPATH /opt/primserve/lib
#   /opt/primserve/lib/                     gRPC, protobuf, absl, ..., glibc
#                                           (with libdl, libpthread, librt,
#                                           which the driver's libcuda needs)
#   /lib64/ld-linux-x86-64.so.2             the loader the binaries name
#   /etc/passwd, /etc/group                 root and primserve (10001)
#   /tmp                                    for CUDA's JIT cache
#
# No shell, compiler or package manager. The CUDA runtime is linked in
# statically; the NVIDIA container toolkit mounts the driver's libcuda into
# /usr/lib/x86_64-linux-gnu, where the loader looks by default.
# deploy/build_image.sh (podman) and deploy/Dockerfile (Docker) run it.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly CONTEXT=dist/image
readonly ROOT="$CONTEXT/root"

tools/build_node_bundle.sh >&2

rm -rf "$CONTEXT"
mkdir -p "$ROOT/opt/primserve/bin" "$ROOT/opt/primserve/lib" "$ROOT/lib64" "$ROOT/etc" "$ROOT/tmp"
chmod 1777 "$ROOT/tmp"
for tool in primserve primctl; do
  # An absolute RPATH: $ORIGIN needs /proc mounted.
  patchelf --force-rpath --set-rpath /opt/primserve/lib \
    --output "$ROOT/opt/primserve/bin/$tool" "dist/node_bundle/bin/$tool"
done
cp dist/node_bundle/lib/* "$ROOT/opt/primserve/lib/"
# What the bundle leaves to the host (glibc, libstdc++, libgcc_s) but the
# NVIDIA driver's libraries, which must match the node's kernel module.
for binary in "$ROOT"/opt/primserve/bin/*; do
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3} $1 ~ /^\/.*ld-linux/ {print "loader", $1}' |
    while read -r soname path; do
      if [[ $soname == loader ]]; then
        cp -L "$path" "$ROOT/lib64/$(basename "$path")"
      elif [[ ! $soname =~ ^lib(cuda|nvidia-) && ! -e "$ROOT/opt/primserve/lib/$soname" ]]; then
        cp -L "$path" "$ROOT/opt/primserve/lib/$soname"
      fi
    done
done
# The NVIDIA driver's libcuda needs these too (glibc's, tiny since 2.34); the
# loader finds them through the binaries' RPATH.
glibc_dir="$(dirname "$(ldd "$ROOT/opt/primserve/bin/primserve" | awk '$1 == "libc.so.6" {print $3}')")"
for soname in libdl.so.2 libpthread.so.0 librt.so.1; do
  [[ -e "$ROOT/opt/primserve/lib/$soname" ]] || cp -L "$glibc_dir/$soname" "$ROOT/opt/primserve/lib/"
done
chmod 0644 "$ROOT"/opt/primserve/lib/* "$ROOT"/lib64/*
chmod 0755 "$ROOT"/lib64/ld-linux-x86-64.so.2
cat >"$ROOT/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
primserve:x:10001:10001:primserve:/nonexistent:/sbin/nologin
PASSWD
cat >"$ROOT/etc/group" <<'GROUP'
root:x:0:
primserve:x:10001:
GROUP
cp deploy/Containerfile "$CONTEXT/"
echo "image_root: $(du -sh "$ROOT" | cut -f1) in $ROOT"
