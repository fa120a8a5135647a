"""64M int32 inclusive SUM on a running primserve: unary Scan vs ScanStream in
8 MiB pieces (grpcio, the generated stubs of the primserve wheel), each answer
checked against numpy; medians of 5 after one warm-up."""
import sys, time
import grpc, numpy as np
from primserve.v1 import primitives_pb2 as pb, primitives_pb2_grpc as rpc

address, n, piece = sys.argv[1], 1 << 26, (8 << 20) // 4
a = np.random.default_rng(3).integers(-1000, 1000, size=n, dtype=np.int32)
want = np.cumsum(a, dtype=np.int32)
opts = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
stub = rpc.PrimitivesStub(grpc.insecure_channel(address, options=opts))

def unary():
    r = stub.Scan(pb.ScanRequest(input=pb.Array(dtype=pb.INT32, data=a.tobytes()), op=pb.SUM))
    return np.frombuffer(r.output.data, dtype=np.int32)

def pieces():
    for k in range(0, n, piece):
        m = pb.ScanRequest(input=pb.Array(dtype=pb.INT32, data=a[k:k + piece].tobytes()))
        if k == 0:
            m.op = pb.SUM
        yield m

def streamed():
    return np.concatenate([np.frombuffer(r.output.data, dtype=np.int32) for r in stub.ScanStream(pieces())])

for name, call in (("unary Scan", unary), ("ScanStream 8 MiB pieces", streamed)):
    assert np.array_equal(call(), want), name
    times = []
    for _ in range(5):
        t = time.perf_counter(); out = call(); times.append(time.perf_counter() - t)
        assert np.array_equal(out, want), name
    t = sorted(times)[2]
    print(f"{name:26s} median {t * 1e3:8.1f} ms  {2 * a.nbytes / t / 1e9:5.2f} GB/s in+out (exact)")
