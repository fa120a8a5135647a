#!/usr/bin/env bash
# On a GPU machine, from gpu_bundle/ (tools/pack_gpu.sh --engine
# --only=cuda_pipeline_gpu_test): the CUDA backend's pipeline test, the same
# under compute-sanitizer memcheck, then pipelines measured against their
# baselines in the same run (pipeline_bench.py, issue 29) against a CUDA
# primserve. Results go to $1; --n=N rows (default 2^26).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: gpu_pipeline_bench.sh OUTPUT_DIR [--n=N]}"
n=67108864
[[ ${2:-} == --n=* ]] && n="${2#--n=}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib"
{ nvidia-smi -L; date -u; cat "$here/commit.txt"; } | tee "$out/device.txt"

echo "== cuda_pipeline_gpu_test"
timeout 240 "$here/cuda_pipeline_gpu_test" --gtest_brief=1 >"$out/cuda_pipeline_gpu_test.txt" 2>&1
echo "exit $?" | tee -a "$out/cuda_pipeline_gpu_test.txt"
tail -3 "$out/cuda_pipeline_gpu_test.txt"

port=50071
metrics_port=9481
"$here/primserve" --port=$port --metrics_port=$metrics_port --backend=cuda >"$out/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do "$here/primctl" --address=localhost:$port health >/dev/null 2>&1 && break; sleep 0.2; done
echo "== pipeline_bench n=$n"
PYTHONPATH="$here/py" timeout 300 python3 "$here/pipeline_bench.py" --address=localhost:$port \
  --metrics_port=$metrics_port --n="$n" 2>&1 | tee "$out/pipeline_bench.txt"
kill -TERM "$server"
wait "$server"

echo "== compute-sanitizer memcheck over cuda_pipeline_gpu_test"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode=1 \
  "$here/cuda_pipeline_gpu_test" --gtest_brief=1 >"$out/memcheck.txt" 2>&1
echo "exit $?" | tee -a "$out/memcheck.txt"
tail -4 "$out/memcheck.txt"
