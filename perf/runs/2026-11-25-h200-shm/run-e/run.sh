#!/usr/bin/env bash
# GPU run E (2026-11-25): the Python client as landed (streaming and shared memory): primserve.bench (64M int32 scan
# unary vs streamed vs numpy.cumsum) and a 64M scan through Client.shared_memory, against primserve --shared_memory.
set -u
w=/tmp/w; rm -rf $w; mkdir -p $w; tar -xJf dist/lead/bundle.tar.xz -C $w
b=$w/gpu_bundle; o="$OUT/e"; mkdir -p "$o"
export LD_LIBRARY_PATH=$b/lib
python3 -m pip install --quiet --no-index --no-deps --target /tmp/primserve-py dist/lead/wheels/*.whl
$b/primserve --port=50061 --metrics_port=0 --shared_memory > "$o/server.log" 2>&1 &
srv=$!
for _ in $(seq 50); do $b/primctl --address=localhost:50061 health >/dev/null 2>&1 && break; sleep 0.2; done
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; echo "command: python3 -m primserve.bench --address=localhost:50061 --n=67108864 --repeats=5"; } > "$o/python_client.txt"
PYTHONPATH=/tmp/primserve-py timeout 200 python3 -m primserve.bench --address=localhost:50061 --n=67108864 --repeats=5 >> "$o/python_client.txt" 2>&1
echo "rc=$?" >> "$o/python_client.txt"
cat "$o/python_client.txt"
cat > /tmp/py_shm.py <<'PY'
import statistics, time
import numpy as np
import primserve
n = 1 << 26
client = primserve.Client("localhost:50061")
with client.shared_memory(2 * 4 * n) as region:
    a = region.array(np.int32, n)
    a[:] = np.random.default_rng(3).integers(-1000, 1000, n, dtype=np.int32)
    out = region.array(np.int32, n, offset=4 * n)
    want = np.cumsum(a, dtype=np.int32)
    t0 = time.perf_counter(); got = client.scan(a, out=out); first = time.perf_counter() - t0
    assert np.array_equal(got, want) and np.shares_memory(got, out)
    times = []
    for _ in range(9):
        out[:] = -1
        t0 = time.perf_counter(); client.scan(a, out=out); times.append(time.perf_counter() - t0)
        assert np.array_equal(out, want)
    t = statistics.median(times)
    print(f"Client.scan in and out of Client.shared_memory, n={n}: first call {first*1e3:.2f} ms, median of 9 {t*1e3:.2f} ms, {2*4*n/t/1e9:.1f} GB/s in+out (answers checked against numpy)")
    tn = statistics.median([(lambda s: (np.cumsum(a, dtype=np.int32), time.perf_counter() - s)[1])(time.perf_counter()) for _ in range(5)])
    print(f"numpy.cumsum on the same array: median of 5 {tn*1e3:.1f} ms")
PY
{ date -u; echo "command: python3 /tmp/py_shm.py (run.sh holds it)"; } > "$o/python_shm.txt"
PYTHONPATH=/tmp/primserve-py timeout 120 python3 /tmp/py_shm.py >> "$o/python_shm.txt" 2>&1
echo "rc=$?" >> "$o/python_shm.txt"
cat "$o/python_shm.txt"
kill -TERM $srv; wait $srv
cd "$OUT" && tar -czf res.tgz e && rm -rf e
