"""Large calls through the streaming RPCs: the same answers as the unary calls and numpy's.

The clients here stream everything (stream_bytes=0) in small pieces, so
arrays of a few thousand elements go in many pieces; a spy on the client's
streaming callables checks that the streaming RPC was used, with the
expected number of messages.
"""

import asyncio

import numpy as np
import pytest

import primserve
import primserve.aio
import reference as ref
from reference import DTYPES, INTEGER_DTYPES


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print(f"seed {seed}")  # shown with a failure, to replay it
    return np.random.default_rng(seed)


class Spy:
    """Wraps a client's streaming callables; records (rpc, messages sent) for each call."""

    def __init__(self, client):
        self.calls = []
        for name, method in list(client._streams.items()):
            client._streams[name] = self._wrap(name, method)

    def _wrap(self, name, method):
        def call(requests, **kwargs):
            record = [name, 0]
            self.calls.append(record)

            def counted():
                for request in requests:
                    record[1] += 1
                    yield request

            return method(counted(), **kwargs)

        return call

    def take(self):
        calls, self.calls = [tuple(call) for call in self.calls], []
        return calls


def assert_same(streamed, unary, exact: bool = True):
    """Bit for bit: equal types, dtypes and bytes (NaNs included). Not `exact`: a float sum,
    which the server may associate differently per piece (the proto says so), within rounding."""
    assert type(streamed) is type(unary)
    if isinstance(unary, tuple):
        for s, u in zip(streamed, unary):
            assert_same(s, u, exact)
    elif isinstance(unary, (np.ndarray, np.generic)):
        assert streamed.dtype == unary.dtype and streamed.shape == unary.shape
        if exact or unary.dtype.kind != "f":
            assert streamed.tobytes() == unary.tobytes()
        else:
            eps = np.finfo(unary.dtype).eps
            scale = np.abs(unary).max(initial=0) + 1
            np.testing.assert_allclose(streamed, unary, rtol=0, atol=64 * eps * scale * np.sqrt(unary.size + 1))
    else:
        assert streamed == unary


# Calls whose floats may round differently when streamed: sums.
ROUNDING = ("scan", "reduce")


def pieces_of(n: int, step: int) -> int:
    return max(1, -(-n // step))


# Each method's calls on one dtype: (name, function of a client -> answer, numpy's answer or None,
# its arrays' length and widest itemsize for the expected number of pieces).
def cases(rng, dtype, n):
    a = ref.random_array(rng, dtype, n)
    a[rng.integers(0, n, 5)] = a[0]  # ties for argmin/argmax and the predicates
    runs = np.sort(rng.choice(a[:40], n)) if n else a
    keys = np.sort(rng.integers(0, 30, n)).astype(dtype if np.dtype(dtype).kind in "iu" else np.int32)
    unsorted_keys = rng.integers(0, 30, n).astype(keys.dtype)
    flags = (rng.random(n) < 0.3).astype(np.int64)
    segments = ref.random_segments(rng, n)
    width = max(np.dtype(dtype).itemsize, keys.itemsize)
    both_width = max(np.dtype(dtype).itemsize, flags.itemsize)
    mag = float(np.abs(ref.work(a)).sum())
    return [
        ("scan", lambda c: c.scan(a), lambda s: ref.assert_matches(s, ref.scan(a, "sum", False), dtype, n, mag),
         np.dtype(dtype).itemsize),
        ("scan max exclusive segments", lambda c: c.scan(a, op="max", exclusive=True, segments=segments),
         lambda s: ref.assert_matches(s, ref.scan(a, "max", True, segments), dtype), np.dtype(dtype).itemsize),
        ("reduce", lambda c: c.reduce(a, segments=segments),
         lambda s: ref.assert_matches(s, ref.reduce(a, "sum", segments), dtype, n, mag), np.dtype(dtype).itemsize),
        ("reduce argmin", lambda c: c.reduce(a, op="argmin"), None, np.dtype(dtype).itemsize),
        ("reduce argmax segments", lambda c: c.reduce(a, op="argmax", segments=segments),
         lambda s: [ref.assert_matches(x, y, t) for x, y, t in
                    zip(s, ref.reduce(a, "argmax", segments), (dtype, np.int64))], np.dtype(dtype).itemsize),
        ("select where", lambda c: c.select(a, (">", a[0])), lambda s: ref.assert_matches(s, a[a > a[0]], dtype),
         np.dtype(dtype).itemsize),
        ("select flags both", lambda c: c.select(a, flags=flags, output="both"),
         lambda s: (ref.assert_matches(s.values, a[flags != 0], dtype),
                    ref.assert_matches(s.indices, np.flatnonzero(flags), np.int64)), both_width),
        ("select indices", lambda c: c.select(a, ("<=", a[0]), output="indices"),
         lambda s: ref.assert_matches(s, np.flatnonzero(a <= a[0]), np.int64), np.dtype(dtype).itemsize),
        ("select count", lambda c: c.select(a, flags=flags, output="count"),
         lambda s: s == np.count_nonzero(flags), both_width),
        ("unique", lambda c: c.unique(runs),
         lambda s: ref.assert_matches(s, ref.run_length_encode(runs)[0], dtype), np.dtype(dtype).itemsize),
        ("run_length_encode", lambda c: c.run_length_encode(runs),
         lambda s: [ref.assert_matches(x, y, t) for x, y, t in
                    zip(s, ref.run_length_encode(runs), (dtype, np.int64))], np.dtype(dtype).itemsize),
        ("reduce_by_key", lambda c: c.reduce_by_key(keys, a, op="max"),
         lambda s: [ref.assert_matches(x, y, t) for x, y, t in
                    zip(s, ref.reduce_by_key(keys, a, "max"), (keys.dtype, dtype))], width),
        ("aggregate_by_key", lambda c: c.aggregate_by_key(unsorted_keys, a, 30, op="min"),
         lambda s: ref.assert_matches(s, ref.aggregate_by_key(unsorted_keys, a, 30, "min"), dtype), width),
    ]


STREAMS = {"scan": "ScanStream", "reduce": "ReduceStream", "select": "SelectStream", "unique": "UniqueStream",
           "run_length_encode": "RunLengthEncodeStream", "reduce_by_key": "ReduceByKeyStream",
           "aggregate_by_key": "AggregateByKeyStream"}


@pytest.mark.parametrize("pieces", ["many", "one"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_streamed_equals_unary_and_numpy(client, address, rng, dtype, pieces):
    n = int(rng.integers(1000, 3000))
    if pieces == "many":
        piece_bytes = int(rng.integers(16, 2000))
        while n % (piece_bytes // 8) == 0 or n % (piece_bytes // 4) == 0:
            n += 1  # the last piece is short whichever array is widest
    else:
        piece_bytes = 1 << 20  # the arrays are smaller than one piece
    with primserve.Client(address, timeout=60, stream_bytes=0, piece_bytes=piece_bytes) as streaming:
        spy = Spy(streaming)
        for name, invoke, check, width in cases(rng, dtype, n):
            streamed = invoke(streaming)
            assert spy.take() == [(STREAMS[name.split()[0]], pieces_of(n, piece_bytes // width))], name
            assert_same(streamed, invoke(client), exact=name not in ROUNDING)
            if check is not None:
                assert check(streamed) is not False, name


@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_small_arrays_stay_unary(address, rng, dtype):
    a = ref.random_array(rng, dtype, 1000)
    with primserve.Client(address, timeout=60, stream_bytes=a.nbytes, piece_bytes=64) as client:
        spy = Spy(client)
        client.scan(a)
        client.select(a, flags=np.ones(len(a), np.int32), partition=True)  # never streamed
        assert spy.take() == []
        client.scan(np.append(a, a[:1]))
        assert spy.take() == [("ScanStream", pieces_of(1001, 64 // a.itemsize))]


def test_partition_is_not_streamed(address, rng):
    a = ref.random_array(rng, np.int64, 2000)
    with primserve.Client(address, timeout=60, stream_bytes=0, piece_bytes=64) as client:
        spy = Spy(client)
        kept, rejected = client.select(a, (">", 0), partition=True)
        assert spy.take() == []
    np.testing.assert_array_equal(kept, a[a > 0])
    np.testing.assert_array_equal(rejected, a[a <= 0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_aio_streamed_equals_unary(client, address, rng, dtype):
    n = int(rng.integers(1000, 3000))
    piece_bytes = int(rng.integers(16, 2000))
    calls = cases(rng, dtype, n)

    async def main():
        async with primserve.aio.Client(address, timeout=60, stream_bytes=0, piece_bytes=piece_bytes) as streaming:
            spy = Spy(streaming)
            answers = await asyncio.gather(*(invoke(streaming) for _, invoke, _, _ in calls))
            return answers, spy.take()

    answers, spied = asyncio.run(main())
    assert sorted(spied) == sorted((STREAMS[name.split()[0]], pieces_of(n, piece_bytes // width))
                                   for name, _, _, width in calls)
    for (name, invoke, check, _), streamed in zip(calls, answers):
        assert_same(streamed, invoke(client), exact=name not in ROUNDING)
        if check is not None:
            assert check(streamed) is not False, name


def test_empty_arrays_stream_as_one_message(client, address):
    # An empty input is never above the threshold; its stream is sent here as the client would.
    from primserve import _calls, _streaming

    empty = np.array([], np.float32)
    keys = np.array([], np.int32)
    calls = [_calls.scan(empty, "sum", False, None), _calls.reduce(empty, "argmax", None),
             _calls.select(empty, ("gt", 0), None, "both", False), _calls.unique(empty),
             _calls.run_length_encode(empty), _calls.reduce_by_key(keys, empty, "sum"),
             _calls.aggregate_by_key(keys, empty, 4, "max")]
    for call in calls:
        requests = list(_streaming.pieces(call, 64))
        assert len(requests) == 1
        answers = client._streams[call.stream](iter(requests), timeout=60)
        streamed = _streaming.join(call, answers if not isinstance(answers, bytes) else [answers])
        assert_same(streamed, client._invoke(call))


def test_error_in_mid_stream(address, rng):
    # Segment offsets past the end are found only when the stream ends; a bad flag piece mid stream.
    a = ref.random_array(rng, np.int32, 3000)
    with primserve.Client(address, timeout=60, stream_bytes=0, piece_bytes=400) as client:
        spy = Spy(client)
        with pytest.raises(primserve.ServerError) as error:
            client.scan(a, segments=[0, 10, 3001])
        assert error.value.code.name == "INVALID_ARGUMENT" and "3001" in error.value.details
        assert spy.take() == [("ScanStream", pieces_of(3000, 100))]
        with pytest.raises(primserve.ServerError) as error:
            client.aggregate_by_key(np.where(np.arange(3000) == 2500, 99, 1).astype(np.int32), a, 10)
        assert error.value.code.name == "INVALID_ARGUMENT" and "stream message" in error.value.details
        np.testing.assert_array_equal(client.scan(a), np.cumsum(a, dtype=np.int32))  # the next call is answered


def test_aio_error_in_mid_stream(address, rng):
    a = ref.random_array(rng, np.int64, 3000)

    async def main():
        async with primserve.aio.Client(address, timeout=60, stream_bytes=0, piece_bytes=800) as client:
            with pytest.raises(primserve.ServerError) as error:
                await client.reduce(a, op="min", segments=[0, 3001])
            assert error.value.code.name == "INVALID_ARGUMENT"
            return await client.reduce(a, op="min")

    assert asyncio.run(main()) == a.min()


def test_bad_arguments_are_refused_before_sending(address):
    with primserve.Client(address, stream_bytes=0, piece_bytes=64) as client:
        spy = Spy(client)
        with pytest.raises(TypeError):
            client.scan(np.arange(100, dtype=np.int16))
        with pytest.raises(ValueError):
            client.reduce_by_key(np.arange(100, dtype=np.int32), np.arange(99, dtype=np.int32))
        with pytest.raises(ValueError):
            client.select(np.arange(100, dtype=np.int32), (">", 0), flags=np.ones(100, np.int32))
        assert spy.take() == []


@pytest.mark.parametrize("sizes", [{"stream_bytes": -1}, {"piece_bytes": 0}, {"piece_bytes": 1.5}])
def test_bad_sizes(sizes):
    with pytest.raises(ValueError):
        primserve.Client("127.0.0.1:1", **sizes)
