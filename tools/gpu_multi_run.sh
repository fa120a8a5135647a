#!/usr/bin/env bash
# Issue 34's runs on a machine with two GPUs, in one go, from a folder made
# by tools/pack_gpu_multi.sh (the bundle in gpu_bundle/, the image's root
# filesystem in rootfs/, HAProxy in haproxy/, deploy/ and this script):
#  test            cuda_multi_device_gpu_test: verified answers on every
#                  device, then the sticky fault on device 1 under load;
#  probe           device_isolation_probe: does a sticky error on device 1
#                  leave device 0 usable in the same process?
#  bench_resident  tools/gpu_multi_bench.sh: resident scans, one device
#                  against two;
#  bench_shm       the same through shared memory (2^27 elements);
#  image           deploy/gpu_node_check.sh: the image serving both GPUs
#                  behind the edge;
#  memcheck        compute-sanitizer memcheck over the test's verified-answers
#                  part (the fault part traps on purpose, which memcheck
#                  would report), with fewer calls (MULTI_DEVICE_CALLS=2).
# The steps named after OUTPUT_DIR, in the order above; all when none is.
# A summary line per step goes to OUTPUT_DIR/summary.txt, and every log, packed
# after each step, to OUTPUT_DIR/logs.tar.gz: the device tool brings back a
# few files only, and a run cut short still brings back the steps it finished.
#   gpu_multi_run.sh OUTPUT_DIR [STEP...]
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: gpu_multi_run.sh OUTPUT_DIR [STEP...]}"
shift
steps=" ${*:-test probe bench_resident bench_shm image memcheck} "
mkdir -p "$out"
scratch="$(mktemp -d)"
logs="$scratch/logs"
mkdir -p "$logs"
export LD_LIBRARY_PATH="$here/gpu_bundle/lib"
# NVLink multicast stays off (the machine's rule; nothing here uses it).
export NCCL_NVLS_ENABLE=0
sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
{
  nvidia-smi -L
  nvidia-smi topo -m
  date -u
  echo "commit: $(cat "$here/gpu_bundle/commit.txt")"
} 2>&1 | tee "$logs/device.txt"

step() {  # name, seconds, command...: runs it if asked, logs it, records its status
  local name=$1 seconds=$2
  shift 2
  [[ $steps == *" $name "* ]] || return 0
  local started=$SECONDS
  timeout "$seconds" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  printf '%-16s rc=%-3d %4ds  %s\n' "$name" "$rc" $((SECONDS - started)) \
    "$(grep -E '^\[  (PASSED|FAILED|  OK|SKIPPED) |ERROR SUMMARY|^PASS|^FAIL' "$logs/$name.log" |
      tr '\n' ' ')" | tee -a "$out/summary.txt"
  cp "$out/summary.txt" "$logs/"
  tar -czf "$out/logs.tar.gz" -C "$scratch" logs
}

step test 80 "$here/gpu_bundle/cuda_multi_device_gpu_test"
step probe 30 "$here/gpu_bundle/device_isolation_probe"
step bench_resident 120 "$here/gpu_bundle/gpu_multi_bench.sh" "$logs/bench" resident
step bench_shm 110 "$here/gpu_bundle/gpu_multi_bench.sh" "$logs/bench" shm 134217728
step image 50 "$here/deploy/gpu_node_check.sh" "$here/rootfs" "$here/haproxy" "$logs/image"
cat "$logs/probe.log" "$logs"/bench/*_ratio.txt "$logs/image/summary.txt" 2>/dev/null
step memcheck 80 env MULTI_DEVICE_CALLS=2 "$sanitizer" --tool memcheck --report-api-errors no \
  --error-exitcode 99 "$here/gpu_bundle/cuda_multi_device_gpu_test" \
  --gtest_filter='*VerifiedAnswersOnEveryDevice*'
