"""scan(dtype=) and reduce(dtype=): SUM and PROD accumulated in a wider dtype, as numpy's
cumsum/cumprod/sum/prod(dtype=)."""

import asyncio

import numpy as np
import pytest

import primserve
import primserve.aio

WIDER = [(np.int32, np.int64), (np.uint32, np.uint64), (np.float32, np.float64)]


@pytest.mark.parametrize("narrow,wide", WIDER)
def test_sum_and_prod_in_the_wider_dtype_are_numpys(client, narrow, wide):
    rng = np.random.default_rng(5)
    if np.dtype(narrow).kind == "f":
        a = rng.random(100_000).astype(narrow) * 1e4
    else:
        a = rng.integers(np.iinfo(narrow).max // 2, np.iinfo(narrow).max, 100_000).astype(narrow)
    got = client.reduce(a, dtype=wide)
    assert got.dtype == wide
    if np.dtype(narrow).kind == "f":
        assert got == pytest.approx(a.sum(dtype=wide), rel=1e-12)
    else:
        assert got == a.sum(dtype=wide)  # exact: numpy's int64 sum of values that wrap in int32
        assert client.reduce(a) == a.sum(dtype=narrow)  # without dtype=: a's own, wrapping
    small = np.array([3, 1, 4, 1, 5], dtype=narrow)
    assert client.reduce(small, op="prod", dtype=wide) == small.prod(dtype=wide)
    segmented = client.reduce(a, segments=[0, 10, 10], dtype=wide)
    expected = [a[:10].sum(dtype=wide), 0, a[10:].sum(dtype=wide)]
    assert segmented.dtype == wide and segmented.tolist() == pytest.approx(expected, rel=1e-12)


def test_issue_example_does_not_wrap(client):
    a = np.array([2**31 - 1, 1], dtype=np.int32)
    assert client.reduce(a) == -2**31  # int32, as a.sum(dtype=np.int32)
    assert client.reduce(a, dtype=np.int64) == 2**31
    assert client.reduce(a, dtype=np.int32) == -2**31  # a's own dtype: nothing to widen


def test_a_large_widened_reduce_stays_unary(address):
    a = np.full(1 << 12, 2**30, dtype=np.int32)
    with primserve.Client(address, timeout=60, stream_bytes=1000) as streaming:
        assert streaming.reduce(a, dtype=np.int64) == a.sum(dtype=np.int64)
        assert streaming.reduce(a) == a.sum(dtype=np.int32)  # streamed, wrapping as int32


def test_multiplex_and_aio(address, client):
    a = np.array([2**31 - 1, 2**31 - 1], dtype=np.int32)
    with client.multiplex() as stream:
        assert stream.reduce(a, dtype=np.int64).result() == 2**32 - 2

    async def main():
        async with primserve.aio.Client(address, timeout=60) as aio_client:
            return await aio_client.reduce(a, dtype="int64")

    assert asyncio.run(main()) == 2**32 - 2


@pytest.mark.parametrize("call,message", [
    (lambda c: c.reduce(np.arange(4, dtype=np.int32), op="max", dtype=np.int64),
     "accumulator_dtype INT64 applies to SUM and PROD, not MAX"),
    (lambda c: c.reduce(np.arange(4, dtype=np.float32), dtype=np.int64),
     "accumulator_dtype INT64 does not widen a FLOAT32 input"),
    (lambda c: c.reduce(np.arange(4, dtype=np.int64), dtype=np.int32),
     "accumulator_dtype INT32 does not widen a INT64 input"),
])
def test_refusals_name_what_is_wrong_and_the_next_call_is_answered(client, call, message):
    with pytest.raises(primserve.ServerError) as refused:
        call(client)
    assert refused.value.code.name == "INVALID_ARGUMENT" and message in refused.value.details
    assert client.reduce(np.arange(4, dtype=np.int32), dtype=np.int64) == 6


def test_an_unsupported_dtype_is_a_type_error(client):
    with pytest.raises(TypeError, match="dtype int16 is not one of"):
        client.reduce(np.arange(4, dtype=np.int32), dtype=np.int16)


def test_reduce_stream_and_pipeline_steps_refuse_it(client):
    import grpc
    from primserve.v1 import primitives_pb2 as pb

    request = pb.ReduceRequest(input=pb.Array(dtype=pb.INT32, data=np.arange(4, dtype=np.int32).tobytes()),
                               op=pb.SUM, accumulator_dtype=pb.INT64)
    with pytest.raises(grpc.RpcError) as refused:
        client._streams["Reduce"](iter([request.SerializeToString()]), timeout=10).result()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "accumulator_dtype is not taken by ReduceStream" in refused.value.details()
    pipeline = pb.PipelineRequest(steps=[pb.PipelineStep(reduce=request, returned=True)])
    with pytest.raises(grpc.RpcError) as refused:
        client._rpcs["Pipeline"](pipeline.SerializeToString(), timeout=10)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "reduce.accumulator_dtype is not taken in a Pipeline step" in refused.value.details()
    assert client.reduce(np.arange(4, dtype=np.int32), dtype=np.int64) == 6


@pytest.mark.parametrize("narrow,wide", WIDER)
def test_scans_in_the_wider_dtype_are_numpys(client, narrow, wide):
    rng = np.random.default_rng(6)
    if np.dtype(narrow).kind == "f":
        a = rng.random(10_000).astype(narrow) * 1e4
    else:
        a = rng.integers(np.iinfo(narrow).max // 2, np.iinfo(narrow).max, 10_000).astype(narrow)
    got = client.scan(a, dtype=wide)
    assert got.dtype == wide
    if np.dtype(narrow).kind == "f":
        np.testing.assert_allclose(got, np.cumsum(a, dtype=wide), rtol=1e-12)
    else:
        assert (got == np.cumsum(a, dtype=wide)).all()
        excl = client.scan(a, exclusive=True, dtype=wide)
        assert excl[0] == 0 and (excl[1:] == np.cumsum(a, dtype=wide)[:-1]).all()
    small = np.array([3, 1, 4, 1, 5], dtype=narrow)
    assert (client.scan(small, op="prod", dtype=wide) == np.cumprod(small, dtype=wide)).all()


def test_widened_scans_stay_unary_multiplex_and_aio(address, client):
    a = np.full(1 << 12, 2**30, dtype=np.int32)
    with primserve.Client(address, timeout=60, stream_bytes=1000) as streaming:
        assert (streaming.scan(a, dtype=np.int64) == np.cumsum(a, dtype=np.int64)).all()
    with client.multiplex() as stream:
        assert stream.scan(a[:4], dtype=np.int64).result().tolist() == [2**30, 2**31, 3 * 2**30, 2**32]

    async def main():
        async with primserve.aio.Client(address, timeout=60) as aio_client:
            return await aio_client.scan(a[:2], dtype=np.int64)

    assert asyncio.run(main()).tolist() == [2**30, 2**31]
    with pytest.raises(primserve.ServerError) as refused:
        client.scan(a, op="max", dtype=np.int64)
    assert "accumulator_dtype INT64 applies to SUM and PROD, not MAX" in refused.value.details
    assert client.scan(a[:2], dtype=np.int64).tolist() == [2**30, 2**31]


def test_scan_stream_and_pipeline_steps_refuse_it(client):
    import grpc
    from primserve.v1 import primitives_pb2 as pb

    request = pb.ScanRequest(input=pb.Array(dtype=pb.INT32, data=np.arange(4, dtype=np.int32).tobytes()),
                             op=pb.SUM, accumulator_dtype=pb.INT64)
    with pytest.raises(grpc.RpcError) as refused:
        list(client._streams["Scan"](iter([request.SerializeToString()]), timeout=10))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "accumulator_dtype is not taken by ScanStream" in refused.value.details()
    pipeline = pb.PipelineRequest(steps=[pb.PipelineStep(scan=request, returned=True)])
    with pytest.raises(grpc.RpcError) as refused:
        client._rpcs["Pipeline"](pipeline.SerializeToString(), timeout=10)
    assert "scan.accumulator_dtype is not taken in a Pipeline step" in refused.value.details()
    assert client.scan(np.arange(4, dtype=np.int32), dtype=np.int64).tolist() == [0, 1, 3, 6]
