#!/usr/bin/env bash
# On the GPU machine, with the folder `tools/pack_gpu.sh --engine` makes
# (gpu_bundle/ at the repository root, or the folder holding this script when
# it is the bundle's copy): shared memory and CUDA IPC against one CUDA server
# with --shared_memory, each beside its inline baseline in the same run:
#   python_shm   64M int32 scan in and out of one system region from Python
#                (shm_bench.py: beside the inline call and numpy.cumsum on one
#                core), then 1K scans one call at a time through the region
#                and inline
#   cpp_shm      the 64M scan with primload_cuda --shm, and inline
#   small_shm    1K scans at concurrency 1 and 16 through a system region and
#                inline (every answer of the region checked)
#   cuda_ipc     a 2^28 int32 scan in place in another process's device memory
#                (primload_cuda --cuda_shm --in_place), over the Unix socket
#                and TCP, and the floors: Echo of one element, a 1-element
#                scan inline and in a CUDA region
#   tools/shm_ipc_bench.sh OUT_DIR [--only=python_shm,cpp_shm,small_shm,cuda_ipc]
# Each part writes OUT_DIR/PART.txt. Exits 1 if a part failed.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
[[ -x $here/primserve ]] || here="$repo/gpu_bundle"
out="${1:?usage: shm_ipc_bench.sh OUT_DIR [--only=PART,...]}"
only=""
case "${2:-}" in
  "") ;;
  --only=*) only="${2#--only=}" ;;
  *) echo "unknown argument: $2"; exit 2 ;;
esac
wanted() { [[ -z $only || ",$only," == *",$1,"* ]]; }
for binary in primserve primctl primload_cuda; do
  [[ -x $here/$binary ]] || { echo "no $binary in $here (run tools/pack_gpu.sh --engine first)"; exit 2; }
done
# shm_bench.py sits beside this script in the bundle, under tools/ in the repository.
shm_bench="$here/shm_bench.py"
[[ -f $shm_bench ]] || shm_bench="$repo/tools/shm_bench.py"
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib"
{
  nvidia-smi -L
  date -u
  echo "commit: $(cat "$here/commit.txt" 2>/dev/null || echo unknown)"
  echo "command: tools/shm_ipc_bench.sh $out${only:+ --only=$only}"
} | tee "$out/device.txt"

tcp=127.0.0.1:50065
socket=/tmp/primserve-shm-ipc-bench.sock
"$here/primserve" --backend=cuda --shared_memory --enable_echo --host=127.0.0.1 --port=50065 \
  --unix_socket=$socket --metrics_port=-1 >"$out/server.log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null' EXIT
for _ in $(seq 50); do "$here/primctl" --address=$tcp health >/dev/null 2>&1 && break; sleep 0.2; done

status=0
part() {  # name, command...: runs it into OUT_DIR/NAME.txt (appending), records failure
  local name=$1; shift
  echo "== $*" >>"$out/$name.txt"
  timeout 120 "$@" >>"$out/$name.txt" 2>&1
  local rc=$?
  if [[ $rc -ne 0 ]]; then status=1; echo "== exit $rc" >>"$out/$name.txt"; fi
}
level1=(--concurrency=1 --warmup_seconds=1 --measure_seconds=4)

if wanted python_shm; then
  part python_shm env PYTHONPATH="$here/py" python3 "$shm_bench" --address=$tcp --n=67108864 \
    --runs=7 --small_runs=3000
fi
if wanted cpp_shm; then
  part cpp_shm "$here/primload_cuda" --address=$tcp --rpc=scan --dtype=int32 --n=67108864 --shm \
    --distinct_requests=1 --verify --verify_every=3 "${level1[@]}"
  part cpp_shm "$here/primload_cuda" --address=$tcp --rpc=scan --dtype=int32 --n=67108864 \
    --distinct_requests=1 --concurrency=1 --warmup_seconds=1 --measure_seconds=6 --timeout_seconds=60
fi
if wanted small_shm; then
  for level in 1 16; do
    part small_shm "$here/primload_cuda" --address=$tcp --rpc=scan --n=1024 --shm --verify \
      --concurrency=$level --warmup_seconds=1 --measure_seconds=4
    part small_shm "$here/primload_cuda" --address=$tcp --rpc=scan --n=1024 --verify \
      --concurrency=$level --warmup_seconds=1 --measure_seconds=4
  done
fi
if wanted cuda_ipc; then
  for address in unix:$socket $tcp; do
    part cuda_ipc "$here/primload_cuda" --address="$address" --rpc=scan --dtype=int32 --n=268435456 \
      --cuda_shm --in_place --distinct_requests=1 "${level1[@]}"
    part cuda_ipc "$here/primload_cuda" --address="$address" --mode=echo --rpc=scan --n=1 "${level1[@]}"
    part cuda_ipc "$here/primload_cuda" --address="$address" --rpc=scan --n=1 "${level1[@]}"
    part cuda_ipc "$here/primload_cuda" --address="$address" --rpc=scan --n=1 --cuda_shm "${level1[@]}"
  done
fi
kill -TERM "$server"; wait "$server"
trap - EXIT
for name in python_shm cpp_shm small_shm cuda_ipc; do
  if [[ -f $out/$name.txt ]]; then
    echo "== $name"
    grep -vE '^primload:' "$out/$name.txt"
  fi
done
exit $status
