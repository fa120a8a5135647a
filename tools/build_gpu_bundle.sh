#!/usr/bin/env bash
# Builds the GPU test and benchmark binaries on this (GPU-less) machine into
# gpu_bundle/ (git-ignored), statically linked against cudart, gtest and absl,
# plus gpu_bundle/run_all.sh, which runs everything there with one command:
#   tools/build_gpu_bundle.sh && (on the GPU machine) gpu_bundle/run_all.sh [OUT_DIR]
# Env: GENCODE (default sm_90 only, for speed), JOBS (parallel nvcc jobs).
#
# Adding binaries (K2): put .cu sources in a CUDA_SRCS_<name> list, add a
# link_binary line, and append the command to run_all.sh's heredoc below.
set -euo pipefail
cd "$(dirname "$0")/.."

NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
GENCODE=${GENCODE:--gencode arch=compute_90,code=sm_90}
JOBS=${JOBS:-2}
OUT=gpu_bundle
OBJ=${OBJ_DIR:-${TMPDIR:-/tmp}/primserve_gpu_obj}  # outside gpu_bundle: keeps the carried folder small
mkdir -p "$OBJ"

NVCC_FLAGS="-std=c++17 -O3 --expt-relaxed-constexpr $GENCODE -I. -Xptxas -warn-spills"
CXX_FLAGS="-std=c++17 -O2 -I. -I/usr/local/cuda/include"
LIBDIR=/usr/lib/x86_64-linux-gnu
LINK_LIBS="-L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread"  # libstdc++/glibc dynamic: needs only GLIBC 2.34 / GLIBCXX 3.4.29 there
ABSL_LIBS="-Wl,--start-group $(ls $LIBDIR/libabsl_*.a | tr '\n' ' ') -Wl,--end-group"

# Compiles src to $OBJ/<path_with_underscores>.o unless the object is newer
# than the source and every header under kernels/.
compile() {
  local src=$1 obj=$OBJ/$(echo "$1" | tr '/' '_').o
  if [[ -f $obj && -z $(find "$src" kernels \( -path "$src" -o -name '*.h' -o -name '*.cuh' \) \
                          -newer "$obj" -print -quit) ]]; then
    return
  fi
  echo "compiling $src" >&2
  case $src in
    *.cu) $NVCC $NVCC_FLAGS -c "$src" -o "$obj" ;;
    *) g++ $CXX_FLAGS -c "$src" -o "$obj" ;;
  esac
}
export -f compile
export NVCC NVCC_FLAGS CXX_FLAGS OBJ

CUDA_SRCS="kernels/scan.cu kernels/reduce.cu kernels/gpu_baseline.cu kernels/bench/scan_variants.cu"
HOST_SRCS="core/primitives.cc kernels/scan_gpu_test.cc kernels/bench/scan_reduce_bench.cc"
# K2: the compaction family (select/partition/segmented/unique/RLE/RBK/aggregate).
CUDA_SRCS_K2="kernels/select.cu kernels/runs.cu kernels/segmented_select.cu kernels/aggregate.cu kernels/compaction_test_util.cu"
CUDA_SRCS="$CUDA_SRCS $CUDA_SRCS_K2"
HOST_SRCS="$HOST_SRCS kernels/compaction_gpu_test.cc"
echo $CUDA_SRCS $HOST_SRCS | tr ' ' '\n' | xargs -P "$JOBS" -I{} bash -c 'compile {}'
o() { echo "$OBJ/$(echo "$1" | tr '/' '_').o"; }

link_binary() {  # name, objects...
  local name=$1; shift
  g++ -s -o "$OUT/$name" "$@" $LINK_LIBS  # stripped: the carried folder stays small
}
link_binary scan_gpu_test $(o kernels/scan_gpu_test.cc) $(o kernels/scan.cu) $(o kernels/reduce.cu) \
  $(o kernels/gpu_baseline.cu) $(o core/primitives.cc) $LIBDIR/libgtest.a $ABSL_LIBS
link_binary scan_reduce_bench $(o kernels/bench/scan_reduce_bench.cc) $(o kernels/scan.cu) \
  $(o kernels/reduce.cu) $(o kernels/gpu_baseline.cu) $(o core/primitives.cc) \
  $(for f in $CUDA_SRCS_K2; do o $f; done)
link_binary scan_variants $(o kernels/bench/scan_variants.cu) $(o kernels/gpu_baseline.cu)
link_binary compaction_gpu_test $(o kernels/compaction_gpu_test.cc) $(o core/primitives.cc) \
  $(for f in $CUDA_SRCS_K2; do o $f; done) $LIBDIR/libgtest.a $ABSL_LIBS

cat > $OUT/run_all.sh <<'RUN'
#!/usr/bin/env bash
# Runs every GPU test and benchmark of the bundle; logs go to ${1:-.}.
cd "$(dirname "$0")"
LOGS=${1:-.}
mkdir -p "$LOGS"
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOGS/device.txt"
./scan_gpu_test --gtest_brief=1 2>&1 | tee "$LOGS/scan_gpu_test.log" || status=1
./scan_reduce_bench 2>&1 | tee "$LOGS/scan_reduce_bench.log" || status=1
./compaction_gpu_test --gtest_brief=1 2>&1 | tee "$LOGS/compaction_gpu_test.log" || status=1
./scan_reduce_bench --primitives=select,partition,unique,rle,rbk,agg --dtypes=int32,float32,int64,float64 \
  --min_log2=16 --max_log2=28 --scan_max_log2=0 2>&1 | tee "$LOGS/compaction_bench.log" || status=1
exit $status
RUN
chmod +x $OUT/run_all.sh
ls -la $OUT
