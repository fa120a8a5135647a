#!/usr/bin/env bash
# Python's resident-buffer Put and Get beside the C++ client's, over the same
# transport in the same run (issue 28): a N-element int32 array (default 64M,
# 268 MB) put into a buffer and read back over loopback TCP, striped over
# STRIPES connections (default 4), by primctl put/get (BuffersClient) and by
# primserve.Client.put/get, REPEATS times each (default 7), interleaved so
# that both see the same machine; prints each run's MB/s and the medians,
# with Python's as a fraction of C++'s. The transport is what is measured:
# the CPU backend (default) does as well as a GPU for it.
#
#   tools/buffers_bench.sh [OUTPUT_DIR]
#   env: PRIMSERVE, PRIMCTL (default bazel-bin's), BACKEND (cpu|cuda), N,
#        REPEATS, STRIPES, PORT, PYTHON (default /usr/bin/python3, which has
#        the packages tools/setup.sh installs); the primserve package is used
#        if it imports, else installed from client/python into a
#        temporary folder (needs protoc or grpcio-tools, as pip install does).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
primserve="${PRIMSERVE:-$repo/bazel-bin/server/primserve}"
primctl="${PRIMCTL:-$repo/bazel-bin/client/primctl}"
backend="${BACKEND:-cpu}"
n="${N:-67108864}"
repeats="${REPEATS:-7}"
stripes="${STRIPES:-4}"
port="${PORT:-50071}"
address="127.0.0.1:$port"
work="$(mktemp -d)"
python="${PYTHON:-/usr/bin/python3}"

"$primserve" --backend="$backend" --host=127.0.0.1 --port="$port" --metrics_port=-1 \
  >"$out/server.log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do "$primctl" --address="$address" health >/dev/null 2>&1 && break; sleep 0.2; done

if ! "$python" -c "import primserve" 2>/dev/null; then
  mkdir -p "$work/src/client"
  cp -r "$repo/client/python" "$work/src/client/python"
  rm -rf "$work/src/client/python/build" "$work/src/client/python/"*.egg-info
  cp -r "$repo/proto" "$work/src/proto"
  "$python" -m pip install --quiet --no-index --no-build-isolation --no-deps --disable-pip-version-check \
    --target "$work/site" "$work/src/client/python" >/dev/null
  export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
fi

# One Python put and get of the same size, checked; prints "put MB/s get MB/s".
cat >"$work/python_put_get.py" <<'EOF'
import sys, time
import numpy as np
import primserve
address, n, stripes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
a = np.random.default_rng().integers(-1000, 1000, n).astype(np.int32)
with primserve.Client(address, timeout=600) as client:
    start = time.perf_counter()
    buf = client.put(a, name="bench-py", stripes=stripes)
    put = time.perf_counter() - start
    start = time.perf_counter()
    got = client.get(buf, stripes=stripes)
    get = time.perf_counter() - start
    client.free(buf)
if not np.array_equal(got, a):
    raise SystemExit("python get differs from what was put")
print(f"{a.nbytes / put / 1e6:.1f} {a.nbytes / get / 1e6:.1f}")
EOF

{
  echo "# $(date -u +%FT%TZ) $(uname -n), $(nproc) cores; backend $backend; $n int32 ($((n * 4)) bytes)" \
       "over loopback TCP, $stripes stripes, $repeats runs each"
  echo "# run client put_MB/s get_MB/s"
} | tee "$out/runs.txt"
for run in $(seq "$repeats"); do
  put=$("$primctl" --address="$address" put --name=bench-cpp --generate=random --n="$n" \
          --stripes="$stripes" | sed -n 's/.*, \([0-9.]*\) MB\/s$/\1/p')
  get=$("$primctl" --address="$address" get --name=bench-cpp --stripes="$stripes" \
          | sed -n 's/.*, \([0-9.]*\) MB\/s$/\1/p')
  "$primctl" --address="$address" free --name=bench-cpp
  echo "$run c++ $put $get" | tee -a "$out/runs.txt"
  echo "$run python $("$python" "$work/python_put_get.py" "$address" "$n" "$stripes")" | tee -a "$out/runs.txt"
done

"$python" - "$out/runs.txt" <<'EOF' | tee "$out/summary.txt"
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if not line.startswith("#")]
median = {(client, i): statistics.median(float(r[2 + i]) for r in rows if r[1] == client)
          for client in ("c++", "python") for i in (0, 1)}
print(f"{'median MB/s':12}{'put':>10}{'get':>10}")
for client in ("c++", "python"):
    print(f"{client:12}{median[client, 0]:10.1f}{median[client, 1]:10.1f}")
print(f"{'python/c++':12}{median['python', 0] / median['c++', 0]:10.2f}{median['python', 1] / median['c++', 1]:10.2f}")
EOF
