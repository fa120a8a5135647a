#!/usr/bin/python3
"""The sort through the service: 64M int32 keys, end to end, beside numpy.

Times, against a running `primserve --shared_memory` on this host (over
loopback TCP), an ascending int32 Sort three ways: the keys inline (bytes
through gRPC both ways), in and out of one registered shared-memory region,
and in a resident buffer sorted into another (uploaded once beforehand, not
timed; only the request and its answer travel). Beside them
numpy.sort(kind="stable") on one core (numpy's sort is single-threaded).
Every path's answer is checked against numpy's once before timing. Prints
each one's median of --runs and its keys per second.

  tools/sort_service_bench.py --address=127.0.0.1:50051 --n=67108864 --runs=3
"""
import argparse
import os
import sys
from multiprocessing import shared_memory

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shm_bench import median_seconds, stubs  # noqa: E402  (beside this script)

UPLOAD_PIECE = 32 << 20  # bytes per Write message


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="localhost:50051")
    parser.add_argument("--n", type=int, default=64 << 20, help="int32 keys")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    pb, rpc = stubs()
    n, size = args.n, 4 * args.n
    channel = grpc.insecure_channel(args.address, options=[
        ("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)])
    grpc.channel_ready_future(channel).result(timeout=120)  # the server may be starting
    primitives = rpc.PrimitivesStub(channel)
    shm = rpc.SharedMemoryStub(channel)
    buffers = rpc.BuffersStub(channel)
    keys = np.random.default_rng(3).integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    want = np.sort(keys, kind="stable")

    inline = pb.SortRequest(keys=pb.Array(dtype=pb.INT32, data=keys.tobytes()))

    def run_inline():
        return np.frombuffer(primitives.Sort(inline).keys.data, np.int32)

    assert (run_inline() == want).all(), "inline answer differs from numpy"

    region = shared_memory.SharedMemory(create=True, size=2 * size)
    name = f"sort_bench_{os.getpid()}"
    try:
        arrays = np.ndarray((2, n), np.int32, buffer=region.buf)
        arrays[0] = keys
        shm.RegisterSystem(pb.RegisterSystemRequest(name=name, key="/" + region.name,
                                                    byte_size=2 * size))
        ref = lambda offset: pb.SharedMemoryRef(region=name, offset=offset, byte_size=size)
        placed = pb.SortRequest(keys=pb.Array(dtype=pb.INT32, shm=ref(0)),
                                output_location=pb.OutputLocation(keys=ref(size)))
        primitives.Sort(placed)
        assert (arrays[1] == want).all(), "shared-memory answer differs from numpy"

        source, sorted_name = f"sort_bench_in_{os.getpid()}", f"sort_bench_out_{os.getpid()}"
        buffers.Create(pb.CreateBufferRequest(name=source, dtype=pb.INT32, length=n))
        data = keys.tobytes()
        buffers.Write(pb.WriteBufferRequest(name=source, offset=at // 4,
                                            data=data[at:at + UPLOAD_PIECE])
                      for at in range(0, size, UPLOAD_PIECE))
        resident = pb.SortRequest(keys=pb.Array(buffer=pb.BufferRef(name=source)),
                                  output_buffers=pb.OutputBuffers(keys=sorted_name))
        primitives.Sort(resident)
        read = b"".join(piece.data for piece in
                        buffers.Read(pb.ReadBufferRequest(name=sorted_name)))
        assert (np.frombuffer(read, np.int32) == want).all(), "resident answer differs from numpy"

        results = [
            ("inline (TCP)", median_seconds(run_inline, args.runs)),
            ("shared memory", median_seconds(lambda: primitives.Sort(placed), args.runs)),
            ("resident buffer", median_seconds(lambda: primitives.Sort(resident), args.runs)),
            ("numpy.sort stable, 1 core",
             median_seconds(lambda: np.sort(keys, kind="stable"), args.runs)),
        ]
        print(f"int32 ascending sort, n={n}, median of {args.runs}")
        for label, seconds in results:
            print(f"  {label:26} {seconds * 1e3:9.2f} ms  {n / seconds / 1e6:8.1f} Mkeys/s")
        numpy_seconds = results[-1][1]
        for label, seconds in results[:-1]:
            print(f"  {label} / numpy time: {seconds / numpy_seconds:.3f}")
        buffers.Free(pb.FreeBufferRequest(name=source))
        buffers.Free(pb.FreeBufferRequest(name=sorted_name))
        shm.Unregister(pb.UnregisterRequest(name=name))
        del arrays
    finally:
        region.close()
        region.unlink()


if __name__ == "__main__":
    main()
