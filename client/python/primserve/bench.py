"""The Python client's throughput for an int32 sum scan, unary and streamed, next to numpy.cumsum's.

    python3 -m primserve.bench --address=localhost:50051 --n=67108864 --repeats=10

The client scans the array once as one unary call (Scan) and once through
ScanStream in --piece_bytes pieces, whatever its size. Each is timed
`repeats` times after one warm-up (the client's answer is checked against
numpy's then); the medians are printed as milliseconds and as GB/s two ways:
the input's bytes per second, and the payload's (request + response bytes,
as primload counts them; for numpy the bytes read + written). On a terminal,
stderr shows which call is running; in a pipe it stays empty. The client's
time is the whole call: packing the request, the round trip, the server's
work and np.frombuffer on the answer (and for the stream, joining the
pieces' answers).
"""

import argparse
import statistics
import sys
import time

import numpy as np

import primserve


class Progress:
    """A status line on stderr while it is a terminal (nothing in a pipe or a file)."""

    def __init__(self) -> None:
        self.shown = sys.stderr.isatty()

    def show(self, text: str) -> None:
        if self.shown:
            sys.stderr.write(f"\r\033[K{text}")
            sys.stderr.flush()

    def clear(self) -> None:
        self.show("")


def median_seconds(function, repeats: int, progress: Progress, name: str) -> float:
    times = []
    for i in range(repeats):
        progress.show(f"{name}: call {i + 1} of {repeats}")
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default="localhost:50051", help="the primserve server")
    parser.add_argument("--n", type=int, default=64 << 20, help="int32 elements to scan (default 64M)")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls of each, after one warm-up")
    parser.add_argument("--piece_bytes", type=int, default=8 << 20, help="bytes of one streamed piece")
    args = parser.parse_args()

    a = np.random.default_rng().integers(-1000, 1000, size=args.n, dtype=np.int32)
    expected = np.cumsum(a, dtype=np.int32)
    rows = []
    progress = Progress()
    # stream_bytes: never above it (unary), always above it (streamed).
    for name, stream_bytes in (("Client.scan unary", a.nbytes), ("Client.scan streamed", 0)):
        with primserve.Client(args.address, stream_bytes=stream_bytes, piece_bytes=args.piece_bytes) as client:
            progress.show(f"{name}: warm-up")
            if not np.array_equal(client.scan(a), expected):
                progress.clear()
                raise SystemExit(f"the server's scan ({name}) differs from numpy.cumsum")
            rows.append((name, median_seconds(lambda: client.scan(a), args.repeats, progress, name)))
    rows.append(("numpy.cumsum", median_seconds(lambda: np.cumsum(a, dtype=np.int32), args.repeats, progress,
                                                "numpy.cumsum")))
    progress.clear()
    input_bytes = a.nbytes
    print(f"int32 sum scan, n={args.n}, median of {args.repeats}")
    print(f"{'':24}{'ms':>10}{'input GB/s':>12}{'payload GB/s':>14}")
    for name, seconds in rows:
        print(f"{name:24}{seconds * 1e3:10.2f}{input_bytes / seconds / 1e9:12.3f}{2 * input_bytes / seconds / 1e9:14.3f}")


if __name__ == "__main__":
    main()
