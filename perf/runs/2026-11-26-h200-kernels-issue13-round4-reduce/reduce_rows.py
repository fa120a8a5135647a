#!/usr/bin/env python3
"""Our and CUB's reduce rows at 2^24 and 2^28 in every primitives_bench run
of the third round's H200 logs (../h200-2026-11-26-issue13-round3/: nine
A/B runs of calls 2 and 3 and the full table of call 3): min / median / max
of the runs, and the median ours/CUB. Run from this folder."""
import glob
import re
import statistics

ROW = re.compile(r"\| (reduce_sum|reduce_min|reduce_argmin) +\| (\w+) +\| 2\^(\d+) .*?"
                 r"\| +([\d.]+) \| +([\d.]+) \|")
logs = sorted(glob.glob("../h200-2026-11-26-issue13-round3/call*/ab_scan.log"))
logs.append("../h200-2026-11-26-issue13-round3/call3/full_bench.log")
rows = {}
for log in logs:
    for line in open(log):
        m = ROW.match(line)
        if m:
            primitive, dtype, log2n, ours, cub = m.groups()
            rows.setdefault((dtype, log2n, primitive), []).append((float(ours), float(cub)))
print("| dtype | n | row | runs | ours us min / median / max | CUB us min / median / max "
      "| ours/CUB (median) |")
print("|---|---|---|---:|---|---|---:|")
for (dtype, log2n, primitive), v in sorted(rows.items()):
    if log2n not in ("24", "28"):
        continue
    ours = [o for o, _ in v]
    cub = [c for _, c in v]
    print(f"| {dtype} | 2^{log2n} | {primitive} | {len(v)} | {min(ours):.1f} / "
          f"{statistics.median(ours):.1f} / {max(ours):.1f} | {min(cub):.1f} / "
          f"{statistics.median(cub):.1f} / {max(cub):.1f} | "
          f"{statistics.median(c / o for o, c in v):.3f} |")
