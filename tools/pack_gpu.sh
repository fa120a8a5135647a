#!/usr/bin/env bash
# Builds and packs everything that needs a GPU into gpu_bundle/ (git-ignored),
# to be copied to the GPU machine:
#  - every test tagged gpu (bazel query 'attr(tags, gpu, tests(//...))'),
#  - the benchmarks (cc_binary targets tagged gpu under //kernels),
#  - with --engine, also the server and client tools that gpu_checks.sh,
#    gpu_engine_bench.sh, shm_ipc_bench.sh, huge_stream_check.sh and
#    perf_rerun_rows.sh drive (soak, sanitizers over the engine tests,
#    service, shared-memory and CUDA IPC measurements) and the Python client
#    in py/ (its modules generated from proto/; the GPU machine's Python has
#    grpcio, numpy and protobuf),
# stripped, with the shared libraries a bare CUDA host lacks in lib/, the
# commit it was built from in commit.txt, and the runners. On the GPU machine,
# from the repository root (each script finds gpu_bundle/ there; copies of
# them in gpu_bundle/ run from anywhere):
#   tools/gpu_run_all.sh OUT_DIR [--only=NAME,...] [--memcheck=NAME,...]
#                                           (gpu_bundle/run_all.sh)
#   tools/kernel_bench.sh OUT_DIR [--bench=NAME] [BENCHMARK ARGS...]
#   tools/gpu_checks.sh OUT_DIR tests|soak [SECONDS]|verify     (--engine)
#   tools/gpu_engine_bench.sh OUT_DIR [--only=NAME,...]         (--engine)
#   tools/shm_ipc_bench.sh OUT_DIR [--only=PART,...]           (--engine)
#   tools/huge_stream_check.sh OUT_DIR [--n=N] [--piece_bytes=B] (--engine)
#   tools/gpu_multi_bench.sh OUT_DIR [resident|shm] [ELEMENTS]  one GPU against two (--engine)
#   tools/gpu_bdp_probe_ab.sh OUT_DIR [ROUNDS]  gRPC's BDP probe off (default) against on (--engine)
#   tools/sort_gpu_round.sh OUT_DIR [--bench] [--service] ...   the sort's round
#                                      (--only=sort_gpu_test,sort_bench,sort_variants,
#                                      with --server for --service)
#   tools/perf_rerun_rows.sh OUT_DIR   one row of each table of perf/README.md
#                                      (--engine; from the repository root only)
# The device code is built for Hopper (sm_90) only, the GPU machines' chips:
# a third of the size. Check the size printed at the end: one device call
# carries at most 64 MiB with the repository (about 5 MB), and everything
# with --engine is about 90 MB: pack the engine tools (--engine) for engine
# runs only, and name what a run needs with --only.
# --server packs primserve and py/ alone of the engine tools (the sort's
# service row: tools/sort_gpu_round.sh --service; about 30 MB).
# Usage: tools/pack_gpu.sh [--engine | --server] [--only=NAME,...] [extra bazel build flags]
# (--only=NAME,...: only these tests and benchmarks, e.g. --only=primitives_bench;
# the engine tools still come with --engine).
set -euo pipefail
cd "$(dirname "$0")/.."

tests=$(bazel query --noshow_progress 'attr(tags, gpu, tests(//...))')
benchmarks=$(bazel query --noshow_progress 'kind(cc_binary, attr(tags, gpu, //kernels/...))')
engine=()
only=""
while [[ ${1:-} == --engine || ${1:-} == --server || ${1:-} == --only=* ]]; do
  case "$1" in
    --engine) engine=(//server:primserve //client:primctl //client:primload //client:primload_cuda
      //tests:soak_test) ;;
    --server) engine=(//server:primserve) ;;
    --only=*) only="${1#--only=}" ;;
  esac
  shift
done
# --only: the named tests and benchmarks alone (a whole bundle is over the
# device call's 64 MiB).
if [[ -n $only ]]; then
  keep() { for target in "$@"; do [[ ",$only," == *",${target##*:},"* ]] && echo "$target"; done; true; }
  # shellcheck disable=SC2086
  tests=$(keep $tests)
  # shellcheck disable=SC2086
  benchmarks=$(keep $benchmarks)
fi
set -- --define=cuda_gencode=hopper "$@"
# shellcheck disable=SC2086
bazel build "$@" $tests $benchmarks "${engine[@]+"${engine[@]}"}"
bin="$(bazel info "$@" bazel-bin)"

out=gpu_bundle
rm -rf "$out"
mkdir -p "$out/lib"
binaries=()
copy() {  # label
  local path="${1#//}"
  local file="$bin/${path/://}"
  cp "$file" "$out/"
  binaries+=("$out/$(basename "$file")")
}
: >"$out/tests.txt"
: >"$out/benchmarks.txt"
for target in $tests; do copy "$target"; basename "${target/://}" >>"$out/tests.txt"; done
for target in $benchmarks; do copy "$target"; basename "${target/://}" >>"$out/benchmarks.txt"; done
for target in "${engine[@]+"${engine[@]}"}"; do copy "$target"; done
cp tools/gpu_run_all.sh "$out/run_all.sh"
cp tools/kernel_bench.sh tools/gpu_checks.sh tools/gpu_engine_bench.sh tools/huge_stream_check.sh \
  tools/shm_ipc_bench.sh tools/shm_bench.py tools/gpu_buffers_bench.sh tools/gpu_pipeline_bench.sh \
  tools/pipeline_bench.py tools/sort_gpu_round.sh tools/sort_service_bench.py \
  tools/gpu_multi_bench.sh tools/gpu_bdp_probe_ab.sh "$out/"
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!gpu_bundle' || echo '+changes')" \
  >"$out/commit.txt"
if [[ ${#engine[@]} -gt 0 ]]; then
  py="$(pwd)/$out/py"
  (cd client/python && python3 setup.py -q build_py --build-lib "$py") >/dev/null
fi
chmod u+w "$out"/*
# Everything the binaries load but glibc, libstdc++ and libgcc, which every
# host has (the CUDA runtime is linked in statically).
for binary in "${binaries[@]}"; do
  ldd "$binary" | awk '/=> \// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+)\.so' |
  xargs -r -I{} cp -L {} "$out/lib/"
chmod -R u+w "$out/lib"
strip "${binaries[@]}"
if compgen -G "$out/lib/*" >/dev/null; then strip --strip-unneeded "$out"/lib/*; fi
du -sh "$out"
echo "tests: $(tr '\n' ' ' <"$out/tests.txt")"
echo "benchmarks: $(tr '\n' ' ' <"$out/benchmarks.txt")"
