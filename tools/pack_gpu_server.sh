#!/usr/bin/env bash
# Packs the CUDA server, the client tools and the GPU tests with the shared
# libraries a bare CUDA host lacks (gRPC, protobuf, Abseil, prometheus-cpp...)
# into dist/gpu_server/, stripped to fit a device call. Run there:
#   dist/gpu_server/gpu_checks.sh OUTPUT_DIR        (tests, sanitizers, soak)
#   dist/gpu_server/gpu_engine_bench.sh OUTPUT_DIR  (throughput and latency)
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(//server:primserve //client:primctl //client:primload //tests:cuda_service_gpu_test
  //tests:cuda_fault_gpu_test //tests:cuda_sticky_gpu_test //tests:soak_test
  //kernels:bounds_gpu_test)
bazel build "${targets[@]}"
bin="$(bazel info output_path)/k8-opt/bin"
out=dist/gpu_server
rm -rf "$out" && mkdir -p "$out/lib"
binaries=()
for target in "${targets[@]}"; do
  path="${target#//}"
  cp "$bin/${path/://}" "$out/"
  binaries+=("$out/${path#*:}")
done
cp tools/gpu_engine_bench.sh tools/gpu_checks.sh "$out/"
chmod u+w "$out"/*
# Everything the binaries load but glibc, libstdc++ and libgcc, which every host has.
for binary in "${binaries[@]}"; do
  ldd "$binary" | awk '/=> \// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+)\.so' |
  xargs -I{} cp -L {} "$out/lib/"
chmod u+w "$out"/lib/*
strip "${binaries[@]}"
strip --strip-unneeded "$out"/lib/*
du -sh "$out"
