#!/usr/bin/env python3
"""CUDA IPC from Python on a GPU host (not collected by pytest: no test_ prefix).

Needs CuPy and a running ``primserve --backend=cuda --shared_memory`` on this
host's GPU; starts nothing itself:

    PYTHONPATH=client/python python3 client/python/tests/gpu_cuda_ipc.py --address 127.0.0.1:50051

1. Every method with CuPy inputs and outputs in a CUDA region
   (client.cuda_shared_memory) on fresh random data of every dtype, against
   numpy (tests/reference.py: integers equal, floats within rounding); a
   wrapped CuPy array too.
2. Refusals: an output too small (INVALID_ARGUMENT), a second region of the
   same name (ALREADY_EXISTS), a CuPy array outside any region (TypeError),
   each followed by a good call.
3. A 2^28 int32 inclusive sum in place in the region from Python, end to end,
   next to cupy.cumsum on the same GPU timed with CUDA events; a table.

Exit status 0 when every check passes (the timing target is reported, not
asserted).
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference as ref  # noqa: E402

import cupy as cp  # noqa: E402
import grpc  # noqa: E402

import primserve  # noqa: E402

N = 100_003
checks = {"passed": 0, "failed": 0}


def check(what, fn):
    try:
        fn()
    except Exception as error:  # noqa: BLE001 - report every failure, go on
        checks["failed"] += 1
        print(f"FAIL {what}: {type(error).__name__}: {error}", flush=True)
    else:
        checks["passed"] += 1


def matches(actual, expected, dtype, terms=1, magnitude=0.0):
    ref.assert_matches(cp.asnumpy(actual), expected, dtype, terms, magnitude)


def every_method(client, region, rng):
    """Inputs at the region's start, outputs after them; fresh data per dtype."""
    for dtype in ref.DTYPES:
        dtype = np.dtype(dtype)
        name = dtype.name
        host = ref.random_array(rng, dtype, N)
        size = N * dtype.itemsize
        out_offset = (size + 255) // 256 * 256
        a = region.array(dtype, N)
        a[:] = cp.asarray(host)
        out = region.array(dtype, N, offset=out_offset)
        mag = float(np.abs(host.astype(np.float64)).sum())

        for op in ("sum", "min", "max"):
            for exclusive in (False, True):
                def scan(op=op, exclusive=exclusive):
                    answer = client.scan(a, op=op, exclusive=exclusive, out=out)
                    assert isinstance(answer, cp.ndarray) and answer.data.ptr == out.data.ptr
                    matches(answer, ref.scan(host, op, exclusive), dtype, N, mag)
                check(f"scan {op} exclusive={exclusive} {name}", scan)
        segments = ref.random_segments(rng, N)
        check(f"scan segmented {name}", lambda: matches(
            client.scan(a, segments=segments, out=out), ref.scan(host, "sum", False, segments), dtype, N, mag))

        def in_place():
            b = region.array(dtype, N, offset=out_offset)
            b[:] = a
            answer = client.scan(b, out=b)
            assert answer.data.ptr == b.data.ptr
            matches(answer, ref.scan(host, "sum", False), dtype, N, mag)
        check(f"scan in place {name}", in_place)

        for op in ("sum", "min", "max"):
            check(f"reduce {op} {name}", lambda op=op: matches(
                client.reduce(a, op=op, segments=segments, out=out),
                ref.reduce(host, op, segments), dtype, N, mag))
        for op in ("argmin", "argmax"):
            def arg(op=op):
                answer = client.reduce(a, op=op)
                value, index = ref.reduce(host, op)
                assert answer.index == int(index[0]), (answer.index, index)
                matches(np.asarray([answer.value]), np.asarray([value[0]]), dtype)
            check(f"reduce {op} {name} (input in the region)", arg)

        threshold = host[N // 2]
        expected_values = host[host > threshold]
        check(f"select values {name}", lambda: matches(
            client.select(a, ("gt", threshold), out=out), expected_values, dtype))
        index_out = region.array(np.int64, N, offset=out_offset)
        check(f"select indices {name}", lambda: np.testing.assert_array_equal(
            cp.asnumpy(client.select(a, ("gt", threshold), output="indices", out=index_out)),
            np.flatnonzero(host > threshold)))
        check(f"select count {name}", lambda: (
            None if client.select(a, ("gt", threshold), output="count") == len(expected_values)
            else (_ for _ in ()).throw(AssertionError("count"))))
        flag_host = rng.integers(0, 2, size=N, dtype=np.int32)
        flags = region.array(np.int32, N, offset=out_offset + ((N * 8 + 255) // 256) * 256)
        flags[:] = cp.asarray(flag_host)
        check(f"select flags in the region {name}", lambda: matches(
            client.select(a, flags=flags, out=out), host[flag_host != 0], dtype))

        runs = np.repeat(host[: N // 10], rng.integers(1, 4, size=N // 10))[:N]
        n_runs = len(runs)
        a_runs = region.array(dtype, n_runs)
        a_runs[:] = cp.asarray(runs)
        out_runs = region.array(dtype, n_runs, offset=out_offset)
        values, lengths = ref.run_length_encode(runs)
        check(f"unique {name}", lambda: matches(client.unique(a_runs, out=out_runs), values, dtype))

        def rle():
            answer = client.run_length_encode(a_runs, out=out_runs)
            matches(answer.values, values, dtype)
            np.testing.assert_array_equal(cp.asnumpy(answer.lengths), lengths)
        check(f"run_length_encode {name}", rle)

        keys_host = np.sort(rng.integers(0, 1000, size=n_runs)).astype(np.int32)
        keys_offset = out_offset + ((n_runs * 8 + 255) // 256) * 256
        keys = region.array(np.int32, n_runs, offset=keys_offset)
        keys[:] = cp.asarray(keys_host)
        vmag = float(np.abs(runs.astype(np.float64)).sum())

        def rbk():
            answer = client.reduce_by_key(keys, a_runs, out=out_runs)
            expected_keys, expected_values = ref.reduce_by_key(keys_host, runs, "sum")
            np.testing.assert_array_equal(cp.asnumpy(answer.keys), expected_keys)
            matches(answer.values, expected_values, dtype, n_runs, vmag)
        check(f"reduce_by_key {name}", rbk)
        unsorted = cp.asarray(rng.integers(0, 1000, size=n_runs).astype(np.int32))
        keys[:] = unsorted
        check(f"aggregate_by_key {name}", lambda: matches(
            client.aggregate_by_key(keys, a_runs, 1000, out=out_runs),
            ref.aggregate_by_key(cp.asnumpy(unsorted), runs, 1000, "sum"), dtype, n_runs, vmag))


def wrapped(client, rng):
    x = cp.asarray(ref.random_array(rng, np.int64, N))
    host = cp.asnumpy(x)
    with client.cuda_shared_memory(x) as region:
        check("wrapped array: scan in place", lambda: ref.assert_matches(
            cp.asnumpy(client.scan(x, out=x)), ref.scan(host, "sum", False), np.int64))
        check("wrapped array: a slice of it", lambda: ref.assert_matches(
            np.asarray([client.reduce(x[10:20])]), np.asarray([np.cumsum(host)[10:20].sum()]), np.int64))
        assert region.size == x.nbytes


def refusals(client, region):
    a = region.array(np.int32, 1000)
    a[:] = 1

    def small_output():
        try:
            client.scan(a, out=region.array(np.int32, 999, offset=8192))
        except primserve.ServerError as error:
            assert error.code == grpc.StatusCode.INVALID_ARGUMENT, error
        else:
            raise AssertionError("an output of 999 elements for 1000 was taken")
        assert int(client.scan(a, out=a)[-1]) == 1000
    check("refusal: output too small, then a good call", small_output)

    def same_name():
        try:
            client.cuda_shared_memory(4096, name=region.name)
        except primserve.ServerError as error:
            assert error.code == grpc.StatusCode.ALREADY_EXISTS, error
        else:
            raise AssertionError("a second region of the same name was registered")
        assert client.reduce(region.array(np.int32, 1000)) == 500500
    check("refusal: ALREADY_EXISTS, then a good call", same_name)

    def outside():
        try:
            client.scan(cp.arange(10, dtype=cp.int32))
        except TypeError:
            pass
        else:
            raise AssertionError("a CuPy array outside every region was sent")
    check("refusal: CuPy array outside a region is TypeError", outside)


def timed_ms(fn, repeats, warmup=3):
    times = []
    for i in range(warmup + repeats):
        start = time.perf_counter()
        fn()
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
    return times


def event_ms(fn, repeats, warmup=3):
    begin, end = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for i in range(warmup + repeats):
        begin.record()
        fn()
        end.record()
        end.synchronize()
        if i >= warmup:
            times.append(cp.cuda.get_elapsed_time(begin, end))
    return times


def scrape(url):
    """{stage: (sum seconds, count)} of primserve_request_duration_seconds for rpc="Scan"."""
    import re
    import urllib.request
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    stages = {}
    for m in re.finditer(r'primserve_request_duration_seconds_(sum|count)\{([^}]*)\} ([0-9.e+-]+)', text):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if labels.get("rpc") != "Scan":
            continue
        entry = stages.setdefault(labels["stage"], [0.0, 0.0])
        entry[0 if m.group(1) == "sum" else 1] += float(m.group(3))
    return stages


def large_scan(client, n, repeats, metrics_url=None):
    rows = []
    with client.cuda_shared_memory(n * 4, name="py-large-scan") as region:
        a = region.array(np.int32, n)
        a[:] = cp.random.randint(-100, 100, size=n, dtype=cp.int32)
        expected = cp.cumsum(a, dtype=cp.int32)
        answer = client.scan(a, out=a)
        check("2^28 int32 scan in place equals cupy.cumsum", lambda: (
            None if bool(cp.array_equal(answer, expected)) else (_ for _ in ()).throw(AssertionError("differs"))))
        del expected
        before = scrape(metrics_url) if metrics_url else None
        e2e = timed_ms(lambda: client.scan(a, out=a), repeats)
        if metrics_url:
            after = scrape(metrics_url)
            print("\nserver stages per request over the timed calls (metrics, mean; the warm-up calls included):")
            for stage in ("queue", "h2d", "kernel", "d2h", "total"):
                if stage in after:
                    b = before.get(stage, [0.0, 0.0])
                    count = after[stage][1] - b[1]
                    if count:
                        print(f"  {stage}: {(after[stage][0] - b[0]) / count * 1e3:.3f} ms over {count:.0f}")
        # The same scan where the answer is ready when the call returns: the
        # client's device sync is in the Python figure already.
    tiny = np.arange(1, dtype=np.int32)
    rows.append(("Python client, 1-element inline scan (the call's floor)", timed_ms(lambda: client.scan(tiny), repeats)))
    x = cp.random.randint(-100, 100, size=n, dtype=cp.int32)
    y = cp.empty_like(x)
    cumsum = event_ms(lambda: cp.cumsum(x, out=y), repeats)
    rows.append(("Python client, scan in place in a CUDA region (end to end)", e2e))
    rows.append(("cupy.cumsum on the same GPU (CUDA events)", cumsum))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", required=True, help="host:port of primserve --backend=cuda --shared_memory")
    parser.add_argument("--large", type=int, default=1 << 28, help="elements of the timed int32 scan")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--metrics_url", default=None,
                        help="the server's Prometheus /metrics, for its stage times of the timed scan")
    parser.add_argument("--kernel_ms", type=float, default=None,
                        help="the server kernel's time for the same scan (from the C++ test), for the table")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % (1 << 32))
    print(f"seed {seed}; device {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}", flush=True)
    rng = np.random.default_rng(seed)

    with primserve.Client(args.address, timeout=120) as client:
        with client.cuda_shared_memory(16 << 20, name="py-every-method") as region:
            every_method(client, region, rng)
            refusals(client, region)
        wrapped(client, rng)
        rows = large_scan(client, args.large, args.repeats, args.metrics_url)

    print(f"\nchecks: {checks['passed']} passed, {checks['failed']} failed\n")
    print(f"| 2^{int(np.log2(args.large))} int32 inclusive sum, {args.repeats} runs | median ms | min ms |")
    print("| --- | --- | --- |")
    for what, times in rows:
        print(f"| {what} | {statistics.median(times):.3f} | {min(times):.3f} |")
    e2e = statistics.median(next(t for w, t in rows if 'in place' in w))
    cumsum = statistics.median(next(t for w, t in rows if 'cupy.cumsum' in w))
    kernel = args.kernel_ms if args.kernel_ms is not None else cumsum
    source = "the server kernel (--kernel_ms)" if args.kernel_ms is not None else "cupy.cumsum"
    over = (e2e - kernel) * 1e3
    print(f"\nPython end to end - {source}: {over:.1f} us (target <= 150 us): "
          f"{'met' if over <= 150 else 'not met'}")
    return 1 if checks["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
