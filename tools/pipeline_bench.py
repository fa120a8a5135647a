#!/usr/bin/env python3
"""Pipelines measured against their baselines in the same run (issue 29).

Against a running primserve (the CUDA backend for the issue's figures) whose
/metrics is on --metrics_port:
  1. SELECT k, SUM(v) WHERE a > t GROUP BY k over three resident columns of
     --n rows (a int32, k int32 in [0, 1024), v float32, about half kept) as
     one pipeline (select indices, gather k, gather v, aggregate by key),
     end to end over the client's transport; beside numpy on this process's
     one core (mask, bincount with weights), the same steps as separate calls
     with buffers, and as separate calls inline; the server's time per
     pipeline and per step beside the kernels' own (the kernel stage the
     server times for the separate calls).
  2. Run-length encoding then the exclusive scan of the lengths over --n
     elements (runs of 1 to 7), the offsets into a buffer: the pipeline's
     server time beside the two kernels alone.
Prints one line per figure; every figure is a median of --runs calls after
warm-up.
"""

import argparse
import re
import statistics
import time
import urllib.request

import numpy as np

import primserve

NUM_KEYS = 1024


def median_ms(f, runs: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        f()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        f()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


class Metrics:
    """Sums and counts of the server's duration histograms, to difference between two scrapes."""

    LINE = re.compile(r'^(primserve_request_duration_seconds|primserve_pipeline_step_duration_seconds)'
                      r'_(sum|count)\{([^}]*)\} (\S+)$')

    def __init__(self, port: int):
        self.url = f"http://127.0.0.1:{port}/metrics"

    def scrape(self) -> dict:
        values = {}
        for line in urllib.request.urlopen(self.url).read().decode().splitlines():
            m = self.LINE.match(line)
            if m:
                labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(3)))
                key = (m.group(1), labels.get("rpc") or labels.get("step"), labels.get("stage", ""), m.group(2))
                values[key] = float(m.group(4))
        return values

    @staticmethod
    def kernel_us(before: dict, after: dict, rpc: str) -> float:
        """The kernel stage's mean (the CPU backend's compute stage where there is none)."""
        us = Metrics.mean_us(before, after, "request_duration_seconds", rpc, "kernel")
        return us if us == us else Metrics.mean_us(before, after, "request_duration_seconds", rpc, "compute")

    @staticmethod
    def mean_us(before: dict, after: dict, family: str, rpc: str, stage: str = "") -> float:
        name = f"primserve_{family}"
        s = after.get((name, rpc, stage, "sum"), 0) - before.get((name, rpc, stage, "sum"), 0)
        c = after.get((name, rpc, stage, "count"), 0) - before.get((name, rpc, stage, "count"), 0)
        return s / c * 1e6 if c else float("nan")


def group_by(client, metrics, n: int, runs: int, rng) -> None:
    a = rng.integers(-1 << 30, 1 << 30, n, dtype=np.int32)
    k = rng.integers(0, NUM_KEYS, n, dtype=np.int32)
    v = rng.random(n, dtype=np.float32)
    t = 0
    def numpy_group_by():
        keep = a > t  # once: the baseline as a numpy user writes it
        return np.bincount(k[keep], weights=v[keep], minlength=NUM_KEYS)

    numpy_ms = median_ms(numpy_group_by, max(3, runs // 4), 1)
    expected = numpy_group_by()
    ab, kb, vb = client.put(a, "bench-a"), client.put(k, "bench-k"), client.put(v, "bench-v")

    def pipeline():
        return client.pipeline().select(ab, gt=t, indices=True).gather(kb).gather(vb) \
            .aggregate_by_key(num_keys=NUM_KEYS, op="sum").run()

    got = pipeline()
    if not np.allclose(got, expected, rtol=1e-3, atol=1e-2):
        raise SystemExit(f"pipeline answer differs from numpy: max diff {np.max(np.abs(got - expected))}")
    before = metrics.scrape()
    pipeline_ms = median_ms(pipeline, runs)
    after = metrics.scrape()
    server_us = Metrics.mean_us(before, after, "request_duration_seconds", "Pipeline", "total")
    steps_us = {step: Metrics.mean_us(before, after, "pipeline_step_duration_seconds", step)
                for step in ("Select", "Gather", "AggregateByKey")}

    def separate_buffers():
        rows = client.select(ab, ("gt", t), output="indices", out="bench-rows")
        kk = client.gather(kb, rows, out="bench-kk")
        vv = client.gather(vb, rows, out="bench-vv")
        return client.aggregate_by_key(kk, vv, NUM_KEYS, "sum")

    separate_buffers()
    before = metrics.scrape()
    buffers_ms = median_ms(separate_buffers, runs)
    after = metrics.scrape()
    kernel_us = {rpc: Metrics.kernel_us(before, after, rpc) for rpc in ("Select", "Gather", "AggregateByKey")}
    call_us = {rpc: Metrics.mean_us(before, after, "request_duration_seconds", rpc, "total")
               for rpc in ("Select", "Gather", "AggregateByKey")}
    kernels_us = kernel_us["Select"] + 2 * kernel_us["Gather"] + kernel_us["AggregateByKey"]

    def separate_inline():
        rows = client.select(a, ("gt", t), output="indices")
        return client.aggregate_by_key(client.gather(k, rows), client.gather(v, rows), NUM_KEYS, "sum")

    inline_ms = median_ms(separate_inline, 3, 1)
    for name in ("bench-a", "bench-k", "bench-v", "bench-rows", "bench-kk", "bench-vv"):
        client.free(name)
    kept = int(np.count_nonzero(a > t))
    print(f"group-by n={n} kept={kept} num_keys={NUM_KEYS}")
    print(f"  pipeline end to end p50 {pipeline_ms:.3f} ms; numpy one core {numpy_ms:.1f} ms "
          f"({numpy_ms / pipeline_ms:.1f}x)")
    print(f"  separate calls with buffers p50 {buffers_ms:.3f} ms; separate calls inline p50 {inline_ms:.1f} ms")
    print(f"  server time per pipeline {server_us:.0f} us; its steps: "
          + ", ".join(f"{s} {u:.0f} us" for s, u in steps_us.items()) + " (Gather: mean of its two)")
    print(f"  kernels alone (the separate calls' kernel stage): "
          + ", ".join(f"{s} {u:.0f} us" for s, u in kernel_us.items())
          + f"; sum {kernels_us:.0f} us; server/kernels {server_us / kernels_us:.2f}x")
    print(f"  separate calls' server time: " + ", ".join(f"{s} {u:.0f} us" for s, u in call_us.items()))


def runs_offsets(client, metrics, n: int, runs: int, rng) -> None:
    lengths = rng.integers(1, 8, n // 4 + 1)
    x = np.repeat(rng.integers(0, 1 << 30, len(lengths), dtype=np.int32), lengths)[:n].copy()
    xb = client.put(x, "bench-x")

    # The offsets stay on the server too (a buffer): what is measured is the
    # server's work, not 128 MB crossing the transport.
    def pipeline():
        p = client.pipeline().run_length_encode(xb)
        return p.scan(p.output(0, "lengths"), exclusive=True, out="bench-offsets").run()

    offsets = client.get(pipeline())
    _, counts = np.unique(np.concatenate([[True], x[1:] != x[:-1]]).cumsum(), return_counts=True)
    if not np.array_equal(offsets, np.concatenate([[0], np.cumsum(counts)[:-1]])):
        raise SystemExit("RLE then offsets differs from numpy")
    before = metrics.scrape()
    pipeline_ms = median_ms(pipeline, runs)
    after = metrics.scrape()
    server_us = Metrics.mean_us(before, after, "request_duration_seconds", "Pipeline", "total")

    lengths_buffer = client.put(counts.astype(np.int64), "bench-lengths")

    def separate():
        client.run_length_encode(xb)  # only the kernels' time counts here
        return client.scan(lengths_buffer, exclusive=True, out="bench-offsets")

    before = metrics.scrape()
    median_ms(separate, max(3, runs // 4), 1)
    after = metrics.scrape()
    rle_us = Metrics.kernel_us(before, after, "RunLengthEncode")
    scan_us = Metrics.kernel_us(before, after, "Scan")
    for name in ("bench-x", "bench-lengths", "bench-offsets"):
        client.free(name)
    print(f"rle+offsets n={n} runs={len(counts)}")
    print(f"  pipeline end to end p50 {pipeline_ms:.3f} ms; server time {server_us:.0f} us; kernels alone: "
          f"RLE {rle_us:.0f} us + exclusive scan {scan_us:.0f} us = {rle_us + scan_us:.0f} us; "
          f"server/kernels {server_us / (rle_us + scan_us):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="localhost:50051")
    parser.add_argument("--metrics_port", type=int, required=True)
    parser.add_argument("--n", type=int, default=1 << 26)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng()
    with primserve.Client(args.address, timeout=600) as client:
        metrics = Metrics(args.metrics_port)
        group_by(client, metrics, args.n, args.runs, rng)
        runs_offsets(client, metrics, args.n, args.runs, rng)


if __name__ == "__main__":
    main()
