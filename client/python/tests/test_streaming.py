"""Arrays above stream_bytes go through the *Stream RPCs in pieces, and answer as the unary calls do.

The inputs hold small integers (floats included), so every sum is exact in
any order and the answers can be compared bit for bit.
"""

import asyncio

import numpy as np
import pytest

import primserve
import primserve.aio
import reference as ref
from reference import DTYPES

N = 3001  # elements: more than a few pieces, and no piece size below divides it
# (piece_bytes, expected pieces for a one-array int64 input): not dividing N, one piece, less than one piece.
PIECES = [(8 * 400, 8), (8 * N, 1), (8 * 8 * N, 1)]


class Spy:
    """Counts a client's unary calls, streams and the pieces they sent."""

    def __init__(self, client):
        self.unary = 0
        self.streams = 0
        self.pieces = 0
        self._wrap(client)

    def _wrap(self, client):
        def unary(method):
            def call(*args, **kwargs):
                self.unary += 1
                return method(*args, **kwargs)
            return call

        def stream(method):
            def call(requests, **kwargs):
                self.streams += 1
                return method(self._count(requests), **kwargs)
            return call

        client._rpcs = {rpc: unary(method) for rpc, method in client._rpcs.items()}
        client._streams = {rpc: stream(method) for rpc, method in client._streams.items()}

    def _count(self, requests):
        for request in requests:
            self.pieces += 1
            yield request


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def small(rng, dtype, n=N, low=-100, high=100):
    dtype = np.dtype(dtype)
    if dtype.kind == "u":
        low = 0
    return rng.integers(low, high, n).astype(dtype)


def same(actual, expected):
    """Equal bit for bit: same dtype, same length, same bytes."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.tobytes() == expected.tobytes()


def streaming_client(address, piece_bytes):
    return primserve.Client(address, timeout=60, stream_bytes=1000, piece_bytes=piece_bytes)


def method_calls(rng, dtype):
    """(name, call on a client, numpy's answer in the form the method returns) for every streaming method."""
    a = small(rng, dtype)
    keys = rng.integers(0, 30, N).astype(np.int32)
    runs = np.sort(small(rng, dtype, low=0, high=40))
    segments = ref.random_segments(rng, N)
    values, indices = ref.reduce(a, "argmin", segments)
    return [
        ("scan", lambda c: c.scan(a), ref.scan(a, "sum", False).astype(dtype)),
        ("scan exclusive max segments", lambda c: c.scan(a, op="max", exclusive=True, segments=segments),
         ref.scan(a, "max", True, segments).astype(dtype)),
        ("reduce", lambda c: c.reduce(a), np.asarray(ref.reduce(a, "sum")[0]).astype(dtype)),
        ("reduce argmin segments", lambda c: c.reduce(a, op="argmin", segments=segments),
         primserve.ArgExtreme(values.astype(dtype), indices)),
        ("select where", lambda c: c.select(a, ("gt", 0)), a[a > 0]),
        ("select flags both", lambda c: c.select(a, flags=a % 3 == 0, output="both"),
         primserve.Selection(a[a % 3 == 0], np.flatnonzero(a % 3 == 0).astype(np.int64))),
        ("select count", lambda c: c.select(a, ("lt", 10), output="count"), int(np.count_nonzero(a < 10))),
        ("unique", lambda c: c.unique(runs), runs[ref.run_heads(runs)]),
        ("run_length_encode", lambda c: c.run_length_encode(runs), primserve.Runs(*ref.run_length_encode(runs))),
        ("reduce_by_key", lambda c: c.reduce_by_key(np.sort(keys), a, op="min"),
         primserve.KeyedReduction(*(x.astype(d) for x, d in zip(ref.reduce_by_key(np.sort(keys), a, "min"),
                                                                    (np.int32, dtype))))),
        ("aggregate_by_key", lambda c: c.aggregate_by_key(keys, a, 30, op="sum"),
         ref.aggregate_by_key(keys, a, 30, "sum").astype(dtype)),
    ]


def assert_same_answer(actual, expected):
    if isinstance(expected, tuple):
        assert type(actual) is type(expected)
        for part, expected_part in zip(actual, expected):
            same(part, expected_part)
    elif isinstance(expected, int):
        assert actual == expected
    else:
        same(actual, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("piece_bytes", [p for p, _ in PIECES], ids=["pieces", "one_piece", "less_than_a_piece"])
def test_every_method_streams_and_answers_as_unary(address, client, rng, dtype, piece_bytes):
    with streaming_client(address, piece_bytes) as streaming:
        spy = Spy(streaming)
        for name, call, expected in method_calls(rng, dtype):
            streams, pieces = spy.streams, spy.pieces
            answer = call(streaming)
            assert spy.streams == streams + 1, f"{name} did not stream"
            assert_same_answer(answer, expected)
            assert_same_answer(answer, call(client))  # the unary call (the session's client streams at 64 MiB)
            if piece_bytes < 8 * N and name == "scan" and np.dtype(dtype).itemsize == 8:
                assert spy.pieces - pieces == -(-N // 400)  # 8 pieces, the last one short
        assert spy.unary == 0


def test_small_calls_and_partition_stay_unary(address, rng):
    a = small(rng, np.int64)
    with streaming_client(address, 800) as streaming:
        spy = Spy(streaming)
        assert streaming.reduce(a[:100]) == a[:100].sum()  # 800 bytes: not above stream_bytes
        answer = streaming.select(a, ("gt", 0), partition=True)  # the server does not stream partitions
        same(answer.selected, a[a > 0])
        same(answer.rejected, a[a <= 0])
        assert (spy.unary, spy.streams) == (2, 0)


def test_default_threshold(client):
    assert (client.stream_bytes, client.piece_bytes) == (64 << 20, 8 << 20)


def test_error_mid_stream_raises_server_error(address, rng):
    keys = rng.integers(0, 10, N).astype(np.int32)
    keys[2500] = 10  # in a late piece
    values = small(rng, np.float64)
    with streaming_client(address, 8 * 300) as streaming:
        with pytest.raises(primserve.ServerError) as error:
            streaming.aggregate_by_key(keys, values, 10)
        assert error.value.code.name == "INVALID_ARGUMENT"
        assert "stream message" in error.value.details
        keys[2500] = 9  # the next good request is answered
        same(streaming.aggregate_by_key(keys, values, 10), ref.aggregate_by_key(keys, values, 10, "sum"))


def test_aio_streams_every_method(address, rng):
    calls = [(name, call, expected) for dtype in (np.uint32, np.float64) for name, call, expected in method_calls(rng, dtype)]

    async def main():
        async with primserve.aio.Client(address, timeout=60, stream_bytes=1000, piece_bytes=1000) as streaming:
            spy = Spy(streaming)
            answers = await asyncio.gather(*(call(streaming) for _, call, _ in calls))
            return spy, answers

    spy, answers = asyncio.run(main())
    assert (spy.unary, spy.streams) == (0, len(calls))
    assert spy.pieces > 3 * len(calls)
    for (name, _, expected), answer in zip(calls, answers):
        assert_same_answer(answer, expected)


def test_aio_error_mid_stream(address, rng):
    a = small(rng, np.int32)

    async def main():
        async with primserve.aio.Client(address, timeout=60, stream_bytes=1000, piece_bytes=1000) as streaming:
            with pytest.raises(primserve.ServerError) as error:
                await streaming.scan(a, segments=[0, N + 1])
            return error.value.code.name, await streaming.scan(a)

    code, answer = asyncio.run(main())
    assert code == "INVALID_ARGUMENT"
    same(answer, np.cumsum(a, dtype=np.int32))
