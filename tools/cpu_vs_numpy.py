#!/usr/bin/python3
"""The CPU backend beside numpy: every primitive on one large array per dtype.

Against a running `primserve --backend=cpu --shared_memory` on this host, each
primitive runs with its inputs (and, where the method takes out=, its values)
in one registered region, so what is timed is the backend and the call, not
the bytes through gRPC; numpy does the same work in this process on one core.
Each answer is checked against numpy's first; then ours and numpy's are
called in turn --runs times, and the medians printed with their ratio (ours /
numpy's: below 1 is faster than numpy).

Needs the primserve package (pip install ./client/python) on Debian's python3.

  tools/cpu_vs_numpy.py --address=localhost:50051 --n=16777216 --runs=5
"""
import argparse
import statistics
import time

import numpy as np

import primserve


def seconds(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def medians_ms(ours, theirs, runs: int):
    """The median times of ours and numpy's, called in turn, so that on a
    shared machine both see the same load."""
    mine, numpys = [], []
    for _ in range(runs):
        mine.append(seconds(ours))
        numpys.append(seconds(theirs))
    return statistics.median(mine) * 1e3, statistics.median(numpys) * 1e3


def starts(k):
    """Where each run of equal consecutive elements starts."""
    return np.concatenate(([True], k[1:] != k[:-1]))


def equal(x, y) -> bool:
    return np.array_equal(np.asarray(x), np.asarray(y))


def close(x, y) -> bool:
    """Float sums: ours adds in lanes, numpy pairwise; the same within rounding."""
    return np.allclose(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64), rtol=1e-4)


def rows_for(client, region, dtype: np.dtype, n: int, rng):
    """The rows of one dtype: (name, ours, numpy's, whether they agree), with
    their arrays written into the region (five slots of 8 bytes an element)."""
    def slot(k, of=dtype):
        return region.array(of, n, offset=k * 8 * n)

    integer = np.issubdtype(dtype, np.integer)
    a = slot(0)  # small values, negatives, many repeats
    a[:] = rng.integers(-1000, 1000, n) if integer else rng.random(n) * 2 - 1
    keys = slot(1)  # sorted: runs of ~16
    keys[:] = np.sort(rng.integers(0, n // 16, n))
    idx = slot(2, np.int64)
    idx[:] = rng.integers(0, n, n)
    out = slot(3)
    wide = slot(4)  # the sort's keys: all distinct but a few
    wide[:] = (rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, n, dtype=dtype, endpoint=True)
               if integer else rng.standard_normal(n) * 1e3)
    zero = dtype.type(0)
    name = dtype.name
    sum_agrees = equal if integer else close
    return [
        (f"scan {name} sum", lambda: client.scan(a, out=out), lambda: np.cumsum(a, dtype=dtype), equal),
        (f"reduce {name} sum", lambda: client.reduce(a), lambda: a.sum(dtype=dtype), sum_agrees),
        (f"reduce {name} max", lambda: client.reduce(a, op="max"), lambda: a.max(), equal),
        (f"select {name} > 0, values", lambda: client.select(a, ("gt", zero), out=out),
         lambda: a[a > zero], equal),
        (f"select {name} > 0, count", lambda: client.select(a, ("gt", zero), output="count"),
         lambda: np.count_nonzero(a > zero), equal),
        (f"unique (consecutive) {name}", lambda: client.unique(keys, out=out), lambda: keys[starts(keys)], equal),
        (f"run_length_encode {name}", lambda: client.run_length_encode(keys),
         lambda: np.diff(np.flatnonzero(np.concatenate((starts(keys), [True])))),
         lambda x, y: equal(x.lengths, y)),
        (f"gather {name} by int64", lambda: client.gather(a, idx, out=out), lambda: np.take(a, idx), equal),
        (f"sort {name} (stable)", lambda: client.sort(wide, out=out), lambda: np.sort(wide, kind="stable"), equal),
    ]


def int32_extras(client, region, n: int, rng):
    """Rows of int32 only: a widened sum and the keyed reductions."""
    a = region.array(np.int32, n)
    a[:] = rng.integers(-1000, 1000, n, dtype=np.int32)
    keys = region.array(np.int32, n, offset=8 * n)
    keys[:] = np.sort(rng.integers(0, n // 16, n, dtype=np.int32))
    groups = region.array(np.int32, n, offset=16 * n)
    groups[:] = rng.integers(0, 1024, n, dtype=np.int32)
    return [
        ("reduce int32 sum into int64", lambda: client.reduce(a, dtype=np.int64),
         lambda: a.sum(dtype=np.int64), equal),
        ("reduce_by_key int32 sum", lambda: client.reduce_by_key(keys, a),
         lambda: np.add.reduceat(a, np.flatnonzero(starts(keys))), lambda x, y: equal(x.values, y)),
        ("aggregate_by_key int32 sum", lambda: client.aggregate_by_key(groups, a, 1024),
         lambda: np.bincount(groups, weights=a, minlength=1024).astype(np.int32), equal),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default="localhost:50051")
    parser.add_argument("--n", type=int, default=1 << 24, help="elements of each input")
    parser.add_argument("--runs", type=int, default=5, help="timed calls of each, after one checked call")
    parser.add_argument("--dtypes", default="int32,int64,float32,float64", help="comma-separated")
    args = parser.parse_args()
    n = args.n
    rng = np.random.default_rng(1)
    client = primserve.Client(args.address, timeout=600)
    print(f"n={n}, median of {args.runs}; inputs and out= in a shared-memory region; numpy on one core")
    print(f"{'':34}{'ours ms':>10}{'numpy ms':>10}{'ratio':>8}")
    with client.shared_memory(5 * 8 * n) as region:
        tables = [lambda d=np.dtype(d): rows_for(client, region, d, n, rng) for d in args.dtypes.split(",")]
        if "int32" in args.dtypes.split(","):
            tables.append(lambda: int32_extras(client, region, n, rng))
        for table in tables:
            for name, ours, theirs, agree in table():
                if not agree(ours(), theirs()):
                    raise SystemExit(f"{name}: the server's answer differs from numpy's")
                mine, numpys = medians_ms(ours, theirs, args.runs)
                print(f"{name:34}{mine:10.1f}{numpys:10.1f}{mine / numpys:8.2f}", flush=True)


if __name__ == "__main__":
    main()
