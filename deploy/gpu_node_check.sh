#!/usr/bin/env bash
# The primserve image serving every GPU of a machine the way a Kubernetes GPU
# node runs it (deploy/k8s/primserve.yaml), with no container runtime: on a
# GPU machine, as root,
#  1. the image's root filesystem (deploy/image_root.sh's dist/image/root, or
#     `podman export` of the image, as deploy/image_test.sh makes it) gets
#     what the NVIDIA container toolkit adds to a container: the host
#     driver's libraries (libcuda, libnvidia-ml, libnvidia-ptxjitcompiler,
#     libnvidia-nvvm) bind-mounted read-only into /usr/lib/x86_64-linux-gnu,
#     and the device nodes /dev/nvidia* bind-mounted into /dev; plus what the
#     runtime mounts (/proc, /sys read-only, the pod's /tmp emptyDir) and the
#     manifest's readOnlyRootFilesystem (the root bind-mounted read-only);
#  2. the image's entrypoint runs chrooted as the image's user (10001) with
#     the manifest's args and env, behind the edge: HAProxy with
#     deploy/haproxy.cfg on 127.0.0.1:50051, primserve on 127.0.0.1:50052;
#  3. through the edge, with the image's own primctl (chrooted, as the
#     HEALTHCHECK runs it): health SERVING, each GPU's health service
#     primserve.device.N SERVING, and on each GPU a resident buffer (buffers
#     go to the GPU with the most room, so one each) scanned against its
#     known answer; /metrics shows each GPU up with its requests;
#  4. SIGTERM ends primserve with status 0; everything is unmounted.
# Usage: gpu_node_check.sh ROOTFS HAPROXY_DIR OUTPUT_DIR
#   HAPROXY_DIR holds the haproxy binary and, in lib/, the libraries it needs
#   that the machine lacks (the pod's edge container has them).
# Exits non-zero at the first failed check; logs go to OUTPUT_DIR.
set -uo pipefail
deploy="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "${1:?usage: gpu_node_check.sh ROOTFS HAPROXY_DIR OUTPUT_DIR}" && pwd)"
haproxy_dir="$(cd "${2:?usage: gpu_node_check.sh ROOTFS HAPROXY_DIR OUTPUT_DIR}" && pwd)"
out="${3:?usage: gpu_node_check.sh ROOTFS HAPROXY_DIR OUTPUT_DIR}"
mkdir -p "$out"
readonly user=10001:10001 edge=127.0.0.1:50051 upstream=127.0.0.1:50052
mounts=()
server="" proxy=""

cleanup() {
  [[ -n $proxy ]] && kill -TERM "$proxy" 2>/dev/null
  [[ -n $server ]] && kill -KILL "$server" 2>/dev/null
  wait 2>/dev/null
  # Last mounted first.
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null; done
}
trap cleanup EXIT
# A timeout's SIGTERM still unmounts.
trap 'exit 143' TERM INT
fail() {
  echo "FAIL: $*" | tee -a "$out/summary.txt" >&2
  exit 1
}
ok() { echo "ok: $*" | tee -a "$out/summary.txt"; }
mount_on() {  # mount args... target
  mount "$@" || fail "mount $*"
  mounts+=("${!#}")
}

gpus="$(nvidia-smi -L | tee "$out/gpus.txt" | grep -c '^GPU ')"
((gpus > 0)) || fail "nvidia-smi lists no GPU"
echo "GPUs: $gpus; root filesystem $root: $(du -sh "$root" | cut -f1)" | tee "$out/summary.txt"

# 1. The driver's libraries the toolkit's "compute" and "utility"
# capabilities mount, under their sonames (what the loader and cudart's
# dlopen ask for), resolved to the files they name on the host.
libs=/usr/lib/x86_64-linux-gnu
mkdir -p "$root$libs" "$root/dev" "$root/proc" "$root/sys" "$root/tmp"
# The loader's cache first; a driver installed outside it (/usr/local/nvidia,
# as some GPU hosts mount it) after.
driver_libs="$(
  {
    ldconfig -p | awk '$1 ~ /^lib(cuda|nvidia-ml|nvidia-ptxjitcompiler|nvidia-nvvm)\.so\.[0-9]+$/ && /x86-64/ {print $1, $NF}'
    for dir in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
      for path in "$dir"/lib{cuda,nvidia-ml,nvidia-ptxjitcompiler,nvidia-nvvm}.so.[0-9]*; do
        [[ -e $path && $(basename "$path") =~ ^lib[a-z-]+\.so\.[0-9]+$ ]] && echo "$(basename "$path") $path"
      done
    done
  } | awk '!seen[$1]++'
)"
grep -q '^libcuda\.so\.1 ' <<<"$driver_libs" || fail "no libcuda.so.1 on this host: '$driver_libs'"
while read -r soname path; do
  touch "$root$libs/$soname"
done <<<"$driver_libs"
nodes=()
for node in /dev/nvidia*; do
  [[ -e $node ]] || continue
  if [[ -d $node ]]; then mkdir -p "$root$node"; else touch "$root$node"; fi
  nodes+=("$node")
done
((${#nodes[@]})) || fail "no /dev/nvidia* device nodes on this host"
# readOnlyRootFilesystem: every mount point exists now; the root goes
# read-only, and the mounts below go on top of it.
mount_on --bind "$root" "$root"
mount -o remount,bind,ro "$root" "$root" || fail "cannot make the root read-only"
while read -r soname path; do
  mount_on --bind -o ro "$(readlink -f "$path")" "$root$libs/$soname"
  echo "driver library: $soname <- $(readlink -f "$path")" >>"$out/mounts.txt"
done <<<"$driver_libs"
for node in "${nodes[@]}"; do
  mount_on --bind "$node" "$root$node"
  echo "device node: $node" >>"$out/mounts.txt"
done
mount_on -t proc proc "$root/proc"
mount_on -t sysfs -o ro sysfs "$root/sys"
mount_on -t tmpfs -o mode=1777 tmpfs "$root/tmp"
ok "toolkit mounts: $(wc -l <"$out/mounts.txt") ($(echo "$driver_libs" | awk '{print $1}' | tr '\n' ' ')and ${#nodes[@]} device nodes)"

# 2. The pod: the manifest's args and env, and the edge in front.
mapfile -t args < <(awk '/^ +args:/ {f = 1; next} f && /^ +- --/ {print $2} f && /^ +ports:/ {exit}' \
  "$deploy/k8s/primserve.yaml")
((${#args[@]})) || fail "no args in deploy/k8s/primserve.yaml"
echo "args: ${args[*]}" | tee -a "$out/summary.txt"
# The container's environment: the manifest's env alone.
env -i CUDA_CACHE_PATH=/tmp/cuda-cache \
  "$(command -v chroot)" --userspec="$user" "$root" /opt/primserve/bin/primserve "${args[@]}" \
  >"$out/primserve.log" 2>&1 &
server=$!
PRIMSERVE_EDGE_BIND=$edge PRIMSERVE_UPSTREAM=$upstream LD_LIBRARY_PATH="$haproxy_dir/lib" \
  "$haproxy_dir/haproxy" -W -db -f "$deploy/haproxy.cfg" >"$out/haproxy.log" 2>&1 &
proxy=$!

primctl() {
  chroot --userspec="$user" "$root" /opt/primserve/bin/primctl --address=$edge \
    --timeout_seconds=10 "$@"
}
for ((i = 0; i < 300; i++)); do
  [[ $(primctl health 2>/dev/null) == SERVING ]] && break
  kill -0 "$server" 2>/dev/null || fail "primserve exited: $(tail -5 "$out/primserve.log")"
  kill -0 "$proxy" 2>/dev/null || fail "haproxy exited: $(tail -5 "$out/haproxy.log")"
  sleep 0.2
done
uid="$(awk '/^Uid:/ {print $2}' "/proc/$server/status")"
[[ $uid == "${user%%:*}" ]] || fail "primserve runs as uid $uid, not ${user%%:*}"

# 3. Through the edge.
health="$(primctl health 2>&1)"
[[ $health == SERVING ]] || fail "health through the edge: $health"
ok "health through the edge: $health (primserve uid $uid)"
for ((d = 0; d < gpus; d++)); do
  health="$(primctl health --service=primserve.device.$d 2>&1)"
  [[ $health == SERVING ]] || fail "health of device $d: $health"
  ok "health --service=primserve.device.$d: $health"
done
declare -A on_device=()
for ((d = 0; d < gpus; d++)); do
  put="$(primctl put --name=b$d --dtype=int64 --values=5,-2,7,0,11 2>&1)" || fail "put b$d: $put"
  device="$(sed -n 's/.* on device \([0-9]*\) .*/\1/p' <<<"$put" | tail -1)"
  [[ -n $device ]] || fail "put b$d: no device in '$put'"
  on_device[$device]=b$d
  scan="$(primctl scan --buffer=b$d --dtype=int64 --print=all 2>&1)"
  [[ $scan == 5,3,10,10,21 ]] || fail "scan of b$d on device $device: got '$scan', expected 5,3,10,10,21"
  ok "buffer b$d on device $device: scan 5,-2,7,0,11 -> $scan"
done
((${#on_device[@]} == gpus)) || fail "the buffers landed on ${#on_device[@]} devices, not $gpus"

metrics_port="$(printf '%s\n' "${args[@]}" | sed -n 's/^--metrics_port=//p')"
curl -sSf --max-time 10 "http://127.0.0.1:$metrics_port/metrics" >"$out/metrics.txt" ||
  fail "cannot scrape /metrics"
for ((d = 0; d < gpus; d++)); do
  up="$(awk -v s="primserve_device_up{device=\"$d\"}" '$1 == s {print $2}' "$out/metrics.txt")"
  requests="$(awk -v s="primserve_device_requests_total{device=\"$d\"}" '$1 == s {print $2}' "$out/metrics.txt")"
  [[ $up == 1 ]] || fail "/metrics: device $d up is '$up'"
  [[ -n $requests && $requests != 0 ]] || fail "/metrics: device $d ran '$requests' requests"
  ok "/metrics device $d: up $up, requests $requests"
done
grep '^primserve_build_info' "$out/metrics.txt" | tee -a "$out/summary.txt"

# 4. Shutdown as the kubelet does it (the preStop sleep aside).
kill -TERM "$server"
for ((i = 0; i < 400; i++)); do
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$server" 2>/dev/null && fail "primserve still running 40 s after SIGTERM"
wait "$server"
status=$?
server=""
((status == 0)) || fail "primserve exited $status after SIGTERM"
ok "SIGTERM: primserve exited 0"
echo "PASS gpu_node_check" | tee -a "$out/summary.txt"
