#!/usr/bin/python3
"""The CPU backend beside numpy: every primitive on one large array.

Against a running `primserve --backend=cpu --shared_memory` on this host, each
primitive runs with its inputs (and, where the method takes out=, its values)
in one registered region, so what is timed is the backend and the call, not
the bytes through gRPC; numpy does the same work in this process on one core.
Each answer is checked against numpy's first; the medians of --runs are
printed with their ratio (ours / numpy's: below 1 is faster than numpy).

Needs the primserve package (pip install ./client/python) on Debian's python3.

  tools/cpu_vs_numpy.py --address=localhost:50051 --n=16777216 --runs=3
"""
import argparse
import statistics
import time

import numpy as np

import primserve


def median_ms(function, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default="localhost:50051")
    parser.add_argument("--n", type=int, default=1 << 24, help="elements of each input")
    parser.add_argument("--runs", type=int, default=3, help="timed calls of each, after one checked call")
    args = parser.parse_args()
    n = args.n
    rng = np.random.default_rng(1)
    client = primserve.Client(args.address, timeout=600)
    # Room for: a (int32), keys (int32), f (float32), idx (int64), out (8 bytes per element).
    with client.shared_memory(n * (4 + 4 + 4 + 8 + 8)) as region:
        a = region.array(np.int32, n)
        a[:] = rng.integers(-1000, 1000, n, dtype=np.int32)
        keys = region.array(np.int32, n, offset=4 * n)
        keys[:] = np.sort(rng.integers(0, n // 16, n, dtype=np.int32))  # runs of ~16
        f = region.array(np.float32, n, offset=8 * n)
        f[:] = rng.random(n, dtype=np.float32)
        idx = region.array(np.int64, n, offset=12 * n)
        idx[:] = rng.integers(0, n, n)
        out32 = region.array(np.int32, n, offset=20 * n)
        outf = region.array(np.float32, n, offset=20 * n)
        groups = rng.integers(0, 1024, n, dtype=np.int32)
        g = region.array(np.int32, n, offset=4 * n)  # reuses keys' room for the group-by rows

        starts = lambda k: np.concatenate(([True], k[1:] != k[:-1]))  # noqa: E731
        equal = lambda x, y: np.array_equal(np.asarray(x), np.asarray(y))  # noqa: E731
        rows = [  # name, ours, numpy's, whether they agree
            ("scan int32 sum", lambda: client.scan(a, out=out32), lambda: np.cumsum(a, dtype=np.int32), equal),
            ("reduce int32 sum", lambda: client.reduce(a), lambda: a.sum(dtype=np.int32), equal),
            ("reduce int32 sum into int64", lambda: client.reduce(a, dtype=np.int64),
             lambda: a.sum(dtype=np.int64), equal),
            ("reduce float32 max", lambda: client.reduce(f, op="max"), lambda: f.max(), equal),
            ("select float32 > 0.5, values", lambda: client.select(f, ("gt", np.float32(0.5)), out=outf),
             lambda: f[f > np.float32(0.5)], equal),
            ("select int32 > 0, count", lambda: client.select(a, ("gt", 0), output="count"),
             lambda: np.count_nonzero(a > 0), equal),
            ("unique (consecutive) int32", lambda: client.unique(keys, out=out32), lambda: keys[starts(keys)], equal),
            ("run_length_encode int32", lambda: client.run_length_encode(keys),
             lambda: np.diff(np.flatnonzero(np.concatenate((starts(keys), [True])))),
             lambda x, y: equal(x.lengths, y)),
            ("reduce_by_key int32 sum", lambda: client.reduce_by_key(keys, a),
             lambda: np.add.reduceat(a, np.flatnonzero(starts(keys))), lambda x, y: equal(x.values, y)),
            ("gather int32 by int64", lambda: client.gather(a, idx, out=out32), lambda: np.take(a, idx), equal),
            ("sort float32", lambda: client.sort(f, out=outf), lambda: np.sort(f, kind="stable"), equal),
            ("aggregate_by_key int32 sum", lambda: client.aggregate_by_key(g, a, 1024),
             lambda: np.bincount(g, weights=a, minlength=1024).astype(np.int32), equal),
        ]
        print(f"n={n}, median of {args.runs}; inputs and out= in a shared-memory region; numpy on one core")
        print(f"{'':32}{'ours ms':>10}{'numpy ms':>10}{'ratio':>8}")
        for name, ours, theirs, agree in rows:
            if name.startswith("aggregate_by_key"):
                g[:] = groups  # over the keys: the rows before are done with them
            if not agree(ours(), theirs()):
                raise SystemExit(f"{name}: the server's answer differs from numpy's")
            mine, numpys = median_ms(ours, args.runs), median_ms(theirs, args.runs)
            print(f"{name:32}{mine:10.1f}{numpys:10.1f}{mine / numpys:8.2f}", flush=True)

if __name__ == "__main__":
    main()
