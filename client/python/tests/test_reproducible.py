"""reproducible=True on scan, reduce, reduce_by_key and aggregate_by_key.

The session's CPU server runs without --reproducible_floats, so only the
request's flag makes it reproducible. In reproducible mode the CPU backend
combines float SUM/PROD in the GPU kernels' order (reference/gpu_order.h):
a float32 scan of mixed magnitudes then differs in bits from the plain
sequential scan it answers otherwise, and a scan streamed in any piece sizes
gives the unary answer's bits (its pieces are scanned at multiples of the
8192-element tile, with the prefix carried).
"""

import asyncio
import inspect

import numpy as np
import pytest

import primserve
import primserve.aio
from primserve.v1 import primitives_pb2 as pb
from reference import DTYPES, INTEGER_DTYPES

N = 3 * 8192 + 1234  # float32: more than two scan tiles, not a multiple of one
METHODS = ("scan", "reduce", "reduce_by_key", "aggregate_by_key")


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def mixed(rng, n=N, dtype=np.float32):
    """Both signs over 2^-20..2^20: the low bits of a sum depend on the order of the additions."""
    return np.ldexp(rng.uniform(-1, 1, n), rng.integers(-20, 21, n)).astype(dtype)


def bits(x):
    x = np.asarray(x)
    return x.dtype, x.shape, x.tobytes()


def calls(rng, dtype=np.float32, reproducible=True):
    """(name, call on a client) for every method with a float SUM."""
    a = mixed(rng, dtype=dtype)
    segments = np.sort(rng.integers(0, N, 5))
    segments[0] = 0
    sorted_keys = np.sort(rng.integers(0, 40, N)).astype(np.int32)
    keys = rng.integers(0, 40, N).astype(np.int32)
    near_one = (1 + a.astype(np.float64) * 2.0**-30).astype(dtype)  # a product that stays finite
    return [
        ("scan", lambda c: c.scan(a, reproducible=reproducible)),
        ("scan exclusive", lambda c: c.scan(a, exclusive=True, reproducible=reproducible)),
        ("scan segments", lambda c: c.scan(a, segments=segments, reproducible=reproducible)),
        ("scan prod", lambda c: c.scan(near_one, op="prod", reproducible=reproducible)),
        ("reduce", lambda c: c.reduce(a, reproducible=reproducible)),
        ("reduce segments", lambda c: c.reduce(a, segments=segments, reproducible=reproducible)),
        ("reduce_by_key", lambda c: c.reduce_by_key(sorted_keys, a, reproducible=reproducible)),
        ("aggregate_by_key", lambda c: c.aggregate_by_key(keys, a, 40, reproducible=reproducible)),
    ]


def test_the_flag_reaches_the_server(client):
    # Fixed input: the two orders are known to differ on it, checked here too.
    a = mixed(np.random.default_rng(18), 300001)
    plain = client.scan(a)
    reproducible = client.scan(a, reproducible=True)
    assert bits(plain) == bits(np.cumsum(a))  # the CPU backend's own order: left to right
    assert bits(plain) != bits(reproducible)  # the kernels' order: tiles, warps, lanes
    # Both are sums of a, to float32's rounding.
    exact = np.cumsum(a.astype(np.float64))
    assert np.abs(reproducible - exact).max() <= 1e-5 * np.abs(a.astype(np.float64)).sum()
    # reproducible=False is the default.
    assert bits(client.scan(a, reproducible=False)) == bits(plain)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_repeated_calls_give_the_same_bits(client, rng, dtype):
    for name, call in calls(rng, dtype):
        first = call(client)
        for _ in range(2):
            again = call(client)
            if isinstance(first, tuple):
                assert [bits(x) for x in again] == [bits(x) for x in first], name
            else:
                assert bits(again) == bits(first), name


def test_streamed_scans_give_the_unary_bits_in_any_piece_sizes(address, client, rng):
    a = mixed(rng)
    unary = client.scan(a, reproducible=True)
    plain = bits(client.scan(a))
    stitched = []
    for piece_elements in [1000, 8192, 12345, *rng.integers(100, N, 3).tolist()]:
        with primserve.Client(address, timeout=60, stream_bytes=1000, piece_bytes=4 * piece_elements) as streaming:
            assert bits(streaming.scan(a, reproducible=True)) == bits(unary), piece_elements
            stitched.append(bits(streaming.scan(a)))
    # Without the flag a streamed scan combines in another order than the
    # unary one: other bits, in some piece size at least.
    assert any(answer != plain for answer in stitched)


def test_every_method_streams_with_the_flag_on_its_first_message(address, client, rng):
    sent = []

    with primserve.Client(address, timeout=60, stream_bytes=1000, piece_bytes=4 * 3000) as streaming:
        def spy(rpc, method):
            def call(requests, **kwargs):
                def each():
                    for i, request in enumerate(requests):
                        sent.append((rpc, i, request))
                        yield request
                return method(each(), **kwargs)
            return call

        streaming._streams = {rpc: spy(rpc, method) for rpc, method in streaming._streams.items()}
        for name, call in calls(rng):
            del sent[:]
            answer = call(streaming)
            expected = call(client)
            rpc = sent[0][0]
            assert len(sent) > 2, name
            messages = [getattr(pb, rpc + "Request").FromString(request) for _, _, request in sent]
            assert messages[0].reproducible and not any(m.reproducible for m in messages[1:]), name
            if isinstance(expected, tuple):
                assert [bits(x) for x in answer] == [bits(x) for x in expected], name
            else:
                assert bits(answer) == bits(expected), name


def test_multiplex_and_aio_give_the_unary_bits(address, client, rng):
    named = calls(rng)
    unary = [call(client) for _, call in named]
    with client.multiplex() as stream:
        futures = [call(stream) for _, call in named]
    multiplexed = [f.result() for f in futures]

    async def main():
        async with primserve.aio.Client(address, timeout=60, stream_bytes=1000, piece_bytes=4 * 5000) as aio:
            streamed = await asyncio.gather(*(call(aio) for _, call in named))
            async with aio.multiplex() as stream:
                framed = await asyncio.gather(*(call(stream) for _, call in named))
            return streamed, framed

    streamed, framed = asyncio.run(main())
    for (name, _), want, *got in zip(named, unary, multiplexed, streamed, framed):
        for answer in got:
            if isinstance(want, tuple):
                assert [bits(x) for x in answer] == [bits(x) for x in want], name
            else:
                assert bits(answer) == bits(want), name


@pytest.mark.parametrize("dtype", INTEGER_DTYPES + [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_non_float_sums_and_other_ops_are_unchanged(client, rng, dtype):
    a = rng.integers(0 if np.dtype(dtype).kind == "u" else -100, 100, N).astype(dtype)
    keys = rng.integers(0, 30, N).astype(np.int32)
    sorted_keys = np.sort(keys)
    ops = ("sum", "prod", "min", "max") if np.dtype(dtype).kind != "f" else ("min", "max")
    for op in ops:
        assert bits(client.scan(a, op=op, reproducible=True)) == bits(client.scan(a, op=op)), op
        assert bits(client.reduce(a, op=op, reproducible=True)) == bits(client.reduce(a, op=op)), op
        got = client.reduce_by_key(sorted_keys, a, op=op, reproducible=True)
        want = client.reduce_by_key(sorted_keys, a, op=op)
        assert [bits(x) for x in got] == [bits(x) for x in want], op
        if op != "prod":
            assert bits(client.aggregate_by_key(keys, a, 30, op=op, reproducible=True)) == \
                bits(client.aggregate_by_key(keys, a, 30, op=op)), op
    for op in ("argmin", "argmax"):
        assert client.reduce(a, op=op, reproducible=True) == client.reduce(a, op=op)
    if np.dtype(dtype).kind != "f":
        assert bits(client.scan(a, reproducible=True)) == bits(np.cumsum(a, dtype=dtype))


@pytest.mark.parametrize("value", [1, 0, "yes", None, 1.0, np.int32(1)], ids=repr)
def test_a_non_bool_raises_type_error_before_sending(value):
    # Nothing listens at port 1: a call that got as far as sending would raise ServerError.
    a = np.arange(10, dtype=np.float32)
    keys = np.zeros(10, dtype=np.int32)
    with primserve.Client("127.0.0.1:1", timeout=5) as client:
        with client.multiplex() as stream:
            for target in (client, stream):
                for call in (lambda c: c.scan(a, reproducible=value), lambda c: c.reduce(a, reproducible=value),
                             lambda c: c.reduce_by_key(keys, a, reproducible=value),
                             lambda c: c.aggregate_by_key(keys, a, 1, reproducible=value)):
                    with pytest.raises(TypeError, match="reproducible must be a bool"):
                        call(target)

    async def main():
        async with primserve.aio.Client("127.0.0.1:1", timeout=5) as client:
            for call in (lambda c: c.scan(a, reproducible=value), lambda c: c.reduce(a, reproducible=value),
                         lambda c: c.reduce_by_key(keys, a, reproducible=value),
                         lambda c: c.aggregate_by_key(keys, a, 1, reproducible=value)):
                with pytest.raises(TypeError, match="reproducible must be a bool"):
                    await call(client)

    asyncio.run(main())


def test_numpy_bools_are_taken(client):
    a = mixed(np.random.default_rng(3))
    assert bits(client.scan(a, reproducible=np.bool_(True))) == bits(client.scan(a, reproducible=True))


def test_reproducible_is_keyword_only_and_defaults_to_false():
    classes = (primserve.Client, primserve.client.Multiplex, primserve.aio.Client, primserve.aio.Multiplex)
    for cls in classes:
        for name in METHODS:
            parameter = inspect.signature(getattr(cls, name)).parameters["reproducible"]
            assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, (cls, name)
            assert parameter.default is False and parameter.annotation in (bool, "bool"), (cls, name)
