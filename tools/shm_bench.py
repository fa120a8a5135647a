#!/usr/bin/python3
"""Shared memory vs inline: a 64M-element int32 inclusive SUM scan.

Times, against a running `primserve --shared_memory` on this host, the scan
with input and output in one registered system region, the same scan inline
(bytes through gRPC), and numpy.cumsum on one core; prints each one's median
of --runs and its GB/s counted as input + output bytes.

Uses Debian's python3 (grpcio, numpy). The gRPC modules are the installed
`primserve` package's if it imports (pip install ./client/python), else they
are generated from proto/ with protoc and grpc_python_plugin into a
temporary directory.

  tools/shm_bench.py --address=localhost:50051 --n=67108864 --runs=5 --small_runs=2000
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing import shared_memory

import grpc
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stubs():
    try:
        from primserve.v1 import primitives_pb2, primitives_pb2_grpc
        if hasattr(primitives_pb2, "SharedMemoryRef"):
            return primitives_pb2, primitives_pb2_grpc
    except ImportError:
        pass
    out = tempfile.mkdtemp(prefix="primserve_stubs_")
    subprocess.run(["protoc", f"-I{REPO}/proto", f"--python_out={out}", f"--grpc_out={out}",
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
                    "primserve/v1/primitives.proto"], check=True)
    sys.path.insert(0, out)
    for module in list(sys.modules):
        if module == "primserve" or module.startswith("primserve."):
            del sys.modules[module]
    from primserve.v1 import primitives_pb2, primitives_pb2_grpc
    return primitives_pb2, primitives_pb2_grpc


def median_seconds(call, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def small_scan(pb, primitives, name, offset, n, runs):
    """Many small scans, one call at a time: in and out of the region (at `offset`) vs inline."""
    size = 4 * n
    data = np.random.default_rng(2).integers(-100, 100, n, dtype=np.int32)
    ref = lambda at: pb.SharedMemoryRef(region=name, offset=at, byte_size=size)
    placed = pb.ScanRequest(input=pb.Array(dtype=pb.INT32, shm=ref(offset)), op=pb.SUM,
                            output_location=pb.OutputLocation(values=ref(offset + size)))
    inline = pb.ScanRequest(input=pb.Array(dtype=pb.INT32, data=data.tobytes()), op=pb.SUM)
    want = np.cumsum(data, dtype=np.int32)
    assert (np.frombuffer(primitives.Scan(inline).output.data, np.int32) == want).all()
    for _ in range(100):  # warm-up, both paths
        primitives.Scan(placed)
        primitives.Scan(inline)
    shm_seconds = median_seconds(lambda: primitives.Scan(placed), runs)
    inline_seconds = median_seconds(lambda: primitives.Scan(inline), runs)
    print(f"int32 inclusive SUM scan, n={n}, one call at a time, median of {runs}")
    print(f"  shared memory  {shm_seconds * 1e6:9.1f} us")
    print(f"  inline         {inline_seconds * 1e6:9.1f} us")
    print(f"  shared memory / inline time: {shm_seconds / inline_seconds:.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="localhost:50051")
    parser.add_argument("--n", type=int, default=64 << 20, help="int32 elements")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--small_n", type=int, default=1024, help="int32 elements of the small scans")
    parser.add_argument("--small_runs", type=int, default=0,
                        help="small scans to time each way (0: none)")
    args = parser.parse_args()
    pb, rpc = stubs()
    n, size = args.n, 4 * args.n
    channel = grpc.insecure_channel(args.address, options=[
        ("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)])
    primitives = rpc.PrimitivesStub(channel)
    shm = rpc.SharedMemoryStub(channel)
    region = shared_memory.SharedMemory(create=True, size=2 * size)
    name = f"shm_bench_{os.getpid()}"
    try:
        arrays = np.ndarray((2, n), np.int32, buffer=region.buf)
        arrays[0] = np.random.default_rng(1).integers(-100, 100, n, dtype=np.int32)
        want = np.cumsum(arrays[0], dtype=np.int32)
        shm.RegisterSystem(pb.RegisterSystemRequest(name=name, key="/" + region.name,
                                                    byte_size=2 * size))
        ref = lambda offset: pb.SharedMemoryRef(region=name, offset=offset, byte_size=size)
        placed = pb.ScanRequest(input=pb.Array(dtype=pb.INT32, shm=ref(0)), op=pb.SUM,
                                output_location=pb.OutputLocation(values=ref(size)))
        inline = pb.ScanRequest(input=pb.Array(dtype=pb.INT32, data=arrays[0].tobytes()),
                                op=pb.SUM)

        def run_inline():
            out = np.frombuffer(primitives.Scan(inline).output.data, np.int32)
            assert out.size == n

        primitives.Scan(placed)  # warm up both paths, and check them
        assert (arrays[1] == want).all(), "shared-memory answer differs from numpy"
        run_inline()
        results = [
            ("shared memory", median_seconds(lambda: primitives.Scan(placed), args.runs)),
            ("inline", median_seconds(run_inline, args.runs)),
            ("numpy.cumsum", median_seconds(lambda: np.cumsum(arrays[0], dtype=np.int32),
                                            args.runs)),
        ]
        print(f"int32 inclusive SUM scan, n={n}, median of {args.runs} "
              f"(GB/s counts input + output, {2 * size / 1e9:.2f} GB)")
        for label, seconds in results:
            print(f"  {label:14} {seconds * 1e3:9.2f} ms  {2 * size / seconds / 1e9:7.2f} GB/s")
        if args.small_runs:
            small_scan(pb, primitives, name, size, args.small_n, args.small_runs)
        shm.Unregister(pb.UnregisterRequest(name=name))
        del arrays
    finally:
        region.close()
        region.unlink()


if __name__ == "__main__":
    main()
