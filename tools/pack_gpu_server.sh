#!/usr/bin/env bash
# Packs the CUDA server, the client tools and the GPU end-to-end test with the
# shared libraries a bare CUDA host lacks (gRPC, protobuf, Abseil,
# prometheus-cpp...) into dist/gpu_server/, stripped to fit a device call.
# Run there: dist/gpu_server/gpu_engine_bench.sh OUTPUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //server:primserve //client:primctl //client:primload //tests:cuda_service_gpu_test
bin="$(bazel info output_path)/k8-opt/bin"
out=dist/gpu_server
rm -rf "$out" && mkdir -p "$out/lib"
cp "$bin/server/primserve" "$bin/client/primctl" "$bin/client/primload" \
  "$bin/tests/cuda_service_gpu_test" "$out/"
cp tools/gpu_engine_bench.sh "$out/"
chmod u+w "$out"/*
# Everything the binaries load but glibc, libstdc++ and libgcc, which every host has.
for binary in "$out"/primserve "$out"/primctl "$out"/primload "$out"/cuda_service_gpu_test; do
  ldd "$binary" | awk '/=> \// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+)\.so' |
  xargs -I{} cp -L {} "$out/lib/"
chmod u+w "$out"/lib/*
strip "$out"/primserve "$out"/primctl "$out"/primload "$out"/cuda_service_gpu_test
strip --strip-unneeded "$out"/lib/*
du -sh "$out"
