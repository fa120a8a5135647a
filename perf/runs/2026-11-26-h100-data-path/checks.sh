#!/usr/bin/env bash
# Issue 11, call 2 of 2, same bundle: large answers checked one by one
# against the CPU reference (unary and streamed), then the engine's GPU tests.
# checks.sh OUT_DIR
set -uo pipefail
here="$(cd .b-final && pwd)"
out="${1:?usage: checks.sh OUT_DIR}"
mkdir -p "$out/checks"
export LD_LIBRARY_PATH="$here/lib"
{ nvidia-smi -L; date -u; } > "$out/checks/device.txt"
"$here/primserve" --port=50063 --metrics_port=-1 > "$out/checks/verify_server.log" 2>&1 &
server=$!
for _ in $(seq 50); do "$here/primctl" --address=localhost:50063 health >/dev/null 2>&1 && break; sleep 0.2; done
for rpc in scan select reduce_by_key unique; do
  for piece in 0 4194304; do
    timeout 60 "$here/primload" --address=localhost:50063 --rpc=$rpc --predicate=gt --operand=0 \
      --n=33554433 --concurrency=1,2 --verify --verify_every=1 --stream_piece_bytes=$piece \
      --warmup_seconds=0.5 --measure_seconds=2 > "$out/checks/verify_${rpc}_piece$piece.txt" 2>&1
    echo "verify $rpc piece=$piece exit $?" >> "$out/checks/summary.txt"
  done
done
kill -TERM "$server"; wait "$server"
for t in cuda_service_gpu_test cuda_shared_memory_gpu_test cuda_reproducible_gpu_test \
         cuda_fault_gpu_test cuda_sticky_gpu_test cuda_lane_gpu_test cuda_lane_sticky_gpu_test cuda_staging_gpu_test \
         cuda_cpu_backend_gpu_test; do
  [[ -x "$here/$t" ]] || { echo "$t missing" >> "$out/checks/summary.txt"; continue; }
  (cd "$here" && timeout 150 "./$t") > "$out/checks/$t.log" 2>&1
  echo "$t exit $? $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/checks/$t.log" | tr '\n' ' ')" >> "$out/checks/summary.txt"
done
tar -C "$out" -czf "$out/checks.tgz" checks
cat "$out/checks/summary.txt"
grep -hE 'mismatch|error' "$out"/checks/verify_*.txt | head -20
