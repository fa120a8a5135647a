#!/usr/bin/env bash
# Packs issue 34's runs on a two-GPU machine (tools/gpu_multi_run.sh) into one
# archive for the device tool's carry (64 MiB at most): the engine bundle
# (tools/pack_gpu.sh --engine, with cuda_multi_device_gpu_test) and
# device_isolation_probe, the image's root filesystem (deploy/image_root.sh),
# HAProxy with the libraries a bare host lacks, and the deploy files
# gpu_node_check.sh reads.
#   tools/pack_gpu_multi.sh DEST_DIR     writes DEST_DIR/multigpu.tar.xz
# On the GPU machine:
#   mkdir -p /tmp/m && tar -xJf multigpu.tar.xz -C /tmp/m && /tmp/m/m/run.sh OUT [STEP...]
set -euo pipefail
cd "$(dirname "$0")/.."
dest="$(mkdir -p "${1:?usage: pack_gpu_multi.sh DEST_DIR}" && cd "$1" && pwd)"

tools/pack_gpu.sh --engine --only=cuda_multi_device_gpu_test >&2
bazel build --define=cuda_gencode=hopper //server/cuda:device_isolation_probe >&2
deploy/image_root.sh >&2

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
m="$stage/m"
mkdir -p "$m/gpu_bundle" "$m/haproxy/lib" "$m/deploy/k8s"
cp -a gpu_bundle/{primserve,primctl,primload,cuda_multi_device_gpu_test,gpu_multi_bench.sh,commit.txt,lib} \
  "$m/gpu_bundle/"
cp "$(bazel info --define=cuda_gencode=hopper bazel-bin)/server/cuda/device_isolation_probe" \
  "$m/gpu_bundle/"
cp -a dist/image/root "$m/rootfs"
haproxy="$(command -v haproxy)"
cp "$haproxy" "$m/haproxy/"
# What every glibc host has stays behind.
ldd "$haproxy" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
  grep -vE '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+)\.so' |
  xargs -r -I{} cp -L {} "$m/haproxy/lib/"
cp deploy/gpu_node_check.sh deploy/haproxy.cfg "$m/deploy/"
cp deploy/k8s/primserve.yaml "$m/deploy/k8s/"
cp tools/gpu_multi_run.sh "$m/run.sh"
tar -cJf "$dest/multigpu.tar.xz" -C "$stage" m
du -h "$dest/multigpu.tar.xz"
