#!/usr/bin/python3
"""The CPU backend beside numpy: every primitive on one large array per dtype.

Against a running `primserve --backend=cpu --shared_memory` on this host, each
primitive runs with its inputs (and, where the method takes out=, its values)
in one registered region, so what is timed is the backend and the call, not
the bytes through gRPC; numpy does the same work in this process on one core.
Unique, run-length encode and reduce-by-key put their answers in the
region too (out=, a tuple for the run lengths and the keyed reduction's
keys). Each answer is checked against numpy's first; then ours and numpy's are
called in turn --runs times, and the medians printed with their ratio (ours /
numpy's: below 1 is faster than numpy).

Needs the primserve package (pip install ./client/python) on Debian's python3.

  tools/cpu_vs_numpy.py --address=localhost:50051 --n=16777216 --runs=5

With --baseline=HOST:PORT (another build's server), that server's calls are
timed in the same turns on the same values: a before/after that both see the
same load.
"""
import argparse
import contextlib
import statistics
import time

import numpy as np

import primserve


def seconds(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def medians_ms(functions, runs: int):
    """The median times of each function, called in turn, so that on a shared
    machine all see the same load."""
    times = [[] for _ in functions]
    for _ in range(runs):
        for f, t in zip(functions, times):
            t.append(seconds(f))
    return [statistics.median(t) * 1e3 for t in times]


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
    their arrays written into the region (six slots of 8 bytes an element)."""
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
    lengths = slot(5, np.int64)  # run lengths
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
        (f"run_length_encode {name}", lambda: client.run_length_encode(keys, out=(out, lengths)),
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
    out = region.array(np.int32, n, offset=24 * n)
    run_keys = region.array(np.int32, n, offset=32 * n)
    return [
        ("reduce int32 sum into int64", lambda: client.reduce(a, dtype=np.int64),
         lambda: a.sum(dtype=np.int64), equal),
        ("reduce_by_key int32 sum", lambda: client.reduce_by_key(keys, a, out=(run_keys, out)),
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
    parser.add_argument("--baseline", default="",
                        help="another server (another build) to time in the same turns, on the same arrays "
                             "in a region of its own: its ms and ratio are printed first")
    parser.add_argument("--only", default="",
                        help="comma-separated substrings: only the rows whose name holds one of them")
    args = parser.parse_args()
    n = args.n
    dtypes = args.dtypes.split(",")
    addresses = ([args.baseline] if args.baseline else []) + [args.address]
    clients = [primserve.Client(address, timeout=600) for address in addresses]
    print(f"n={n}, median of {args.runs}; inputs and out= in a shared-memory region; numpy on one core")
    if args.baseline:
        print(f"baseline {args.baseline}, ours {args.address}: each row's calls in turn, on the same arrays")
        print(f"{'':34}{'base ms':>10}{'ratio':>8}{'ours ms':>10}{'numpy ms':>10}{'ratio':>8}")
    else:
        print(f"{'':34}{'ours ms':>10}{'numpy ms':>10}{'ratio':>8}")
    with contextlib.ExitStack() as stack:
        regions = [stack.enter_context(client.shared_memory(6 * 8 * n)) for client in clients]
        # Each server's arrays from a generator of the same seed: the same values.
        rngs = [np.random.default_rng(1) for _ in clients]

        def tables_of(k):
            client, region, rng = clients[k], regions[k], rngs[k]
            tables = [lambda d=np.dtype(d): rows_for(client, region, d, n, rng) for d in dtypes]
            if "int32" in dtypes:
                tables.append(lambda: int32_extras(client, region, n, rng))
            return tables

        for tables in zip(*(tables_of(k) for k in range(len(clients)))):
            for rows in zip(*(table() for table in tables)):
                name, _, theirs, agree = rows[-1]
                if args.only and not any(part in name for part in args.only.split(",")):
                    continue
                for row in rows:
                    if not agree(row[1](), theirs()):
                        raise SystemExit(f"{name}: the server's answer differs from numpy's")
                times = medians_ms([row[1] for row in rows] + [theirs], args.runs)
                numpys = times[-1]
                line = f"{name:34}"
                if args.baseline:
                    line += f"{times[0]:10.1f}{times[0] / numpys:8.2f}"
                line += f"{times[-2]:10.1f}{numpys:10.1f}{times[-2] / numpys:8.2f}"
                print(line, flush=True)


if __name__ == "__main__":
    main()
