#!/usr/bin/env bash
# On a GPU machine with two or more GPUs, from a folder holding primserve,
# primctl and primload (tools/pack_gpu.sh --engine) with their shared
# libraries in lib/: large int32 scans at concurrency 1, 2, 4, 8 on one device
# (--cuda_devices=0) and on two (--cuda_devices=0,1), each in a server of its
# own, on a path where no array crosses the transport per call:
#   resident  inputs uploaded once into resident buffers, outputs left in
#             buffers (each request runs on its input buffer's device);
#   shm       inputs and outputs in one POSIX shared-memory region, which the
#             server pins: each device copies over its own PCIe link;
# then the ratio two/one per level and where the requests ran
# (primserve_device_requests_total). Admission's per-caller bounds (one
# caller may hold 96 MiB in flight: one such scan at a time) are raised: the
# one load generator stands for many callers. Issue 34 asks for >= 1.8x with
# two at concurrency >= 2.
#   gpu_multi_bench.sh OUTPUT_DIR [resident|shm] [ELEMENTS (default 2^28 = 1 GiB)]
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[[ -x $here/primserve ]] || here="$(cd "$here/.." && pwd)/gpu_bundle"
out="${1:?usage: gpu_multi_bench.sh OUTPUT_DIR [resident|shm] [ELEMENTS]}"
placement="${2:-resident}"
n="${3:-268435456}"
case "$placement" in
  resident) server_flags=(--max_buffer_bytes_per_caller=$((64 << 30))) load_flags=(--resident) ;;
  shm) server_flags=(--shared_memory) load_flags=(--shm) ;;
  *) echo "placement is resident or shm, not '$placement'" >&2; exit 2 ;;
esac
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib"
{ nvidia-smi -L; date -u; echo "commit: $(cat "$here/commit.txt" 2>/dev/null || echo unknown)"; } |
  tee "$out/device.txt"

port=50071
metrics_port=9481
address=localhost:$port
scrape() {
  curl -s "localhost:$metrics_port/metrics" 2>/dev/null ||
    python3 -c "import urllib.request; print(urllib.request.urlopen('http://localhost:$metrics_port/metrics').read().decode())"
}

for devices in 0 0,1; do
  name="${placement}_devices_${devices/,/_}"
  "$here/primserve" --port=$port --metrics_port=$metrics_port --backend=cuda \
    --cuda_devices="$devices" --max_in_flight_bytes=$((64 << 30)) \
    --max_peer_in_flight_bytes=$((64 << 30)) --max_peer_queued_bytes=$((64 << 30)) \
    "${server_flags[@]}" >"$out/server_$name.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do "$here/primctl" --address=$address health >/dev/null 2>&1 && break; sleep 0.2; done
  # Four distinct requests. Resident: each its own input buffer; buffers go
  # to the device with the most room, so on two devices they alternate, and
  # each output buffer is made beside its input (a caller holds 4 inputs, 4
  # outputs and up to 8 outputs replacing them: more than the default
  # 16 GiB). Shared memory: the least loaded device takes each.
  "$here/primload" --address=$address --rpc=scan --dtype=int32 --n="$n" --distinct_requests=4 \
    --concurrency=1,2,4,8 --channels=8 "${load_flags[@]}" --warmup_seconds=1 --measure_seconds=4 \
    --csv="$out/$name.csv" >"$out/$name.txt" 2>&1
  echo "rc=$?" >>"$out/$name.txt"
  scrape | grep -E '^primserve_device_(requests_total|kernel_seconds_total|up)' | tee "$out/${name}_devices.txt"
  kill -TERM "$server"
  wait "$server"
  tail -6 "$out/$name.txt"
done

# requests/s on two devices over one, per concurrency level; GB/s counts the
# scans' bytes read and written on the devices (4 + 4 per int32 element; no
# payload crosses the transport).
one="$out/${placement}_devices_0.csv" two="$out/${placement}_devices_0_1.csv"
python3 - "$one" "$two" <<'PY' | tee "$out/${placement}_ratio.txt"
import csv, sys
def rows(path):
    with open(path) as f:
        return {r["concurrency"]: r for r in csv.DictReader(f)}
one, two = rows(sys.argv[1]), rows(sys.argv[2])
print("concurrency  one_req/s  two_req/s  one_GB/s  two_GB/s  two/one  one_p50_ms  two_p50_ms")
for level in one:
    if level in two:
        a, b = float(one[level]["requests/s"]), float(two[level]["requests/s"])
        ga, gb = (float(r[level]["items/s"]) * 8 / 1e9 for r in (one, two))
        print(f"{level:>11}  {a:9.1f}  {b:9.1f}  {ga:8.1f}  {gb:8.1f}  {b / a:7.2f}  "
              f"{one[level]['p50_ms']:>10}  {two[level]['p50_ms']:>10}")
PY
