"""Resident buffers from Python against a CPU primserve: put and get of every dtype
(striped), buffers wherever an array goes (whole and sliced) equal the inline answers,
outputs into a named buffer, freeing as a context manager, Multiplex, asyncio, and
the errors."""

import asyncio

import numpy as np
import pytest

import primserve
import primserve.aio
from reference import DTYPES


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def same(actual, expected):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.tobytes() == expected.tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("stripes", [1, 4])
def test_put_get_round_trip(client, rng, dtype, stripes):
    a = (rng.integers(-1000, 1000, 100003)).astype(dtype)
    with client.put(a, stripes=stripes) as buf:
        assert len(buf) == a.size and buf.dtype == a.dtype and buf.device == -1
        assert buf.location
        same(client.get(buf, stripes=stripes), a)
        same(client.get(buf[10:20]), a[10:20])
        names = [b.name for b in client.buffers()]
        assert buf.name in names
    assert buf.name not in [b.name for b in client.buffers()]


def test_empty_buffer(client):
    with client.put(np.zeros(0, dtype=np.float64), name="py.empty") as buf:
        assert len(buf) == 0
        same(client.get(buf), np.zeros(0, dtype=np.float64))


def test_buffers_go_wherever_arrays_go(client, rng):
    a = rng.integers(-50, 50, 5000).astype(np.int64)
    keys = np.repeat(np.arange(1000, dtype=np.int32), 5)
    with client.put(a) as buf, client.put(keys) as kbuf:
        same(client.scan(buf), client.scan(a))
        same(client.scan(buf[100:900], op="max"), client.scan(a[100:900], op="max"))
        assert client.reduce(buf) == client.reduce(a)
        same(client.select(buf, ("gt", 10)), client.select(a, ("gt", 10)))
        same(client.select(buf[5:], flags=a[5:] > 0), client.select(a[5:], flags=a[5:] > 0))
        same(client.unique(buf), client.unique(a))
        got, want = client.run_length_encode(buf[:77]), client.run_length_encode(a[:77])
        same(got.values, want.values)
        same(got.lengths, want.lengths)
        got, want = client.reduce_by_key(kbuf, buf), client.reduce_by_key(keys, a)
        same(got.keys, want.keys)
        same(got.values, want.values)
        same(client.aggregate_by_key(kbuf, buf, 1000), client.aggregate_by_key(keys, a, 1000))


def test_outputs_into_a_named_buffer(client):
    a = np.arange(10, dtype=np.int32)
    with client.put(a, name="py.in") as buf:
        out = client.scan(buf, out="py.out")
        assert isinstance(out, primserve.Buffer) and out.name == "py.out" and len(out) == 10
        same(client.get("py.out"), np.cumsum(a, dtype=np.int32))
        # In place: the output replaces its input.
        client.scan(buf, out=buf)
        same(client.get(buf), np.cumsum(a, dtype=np.int32))
        indices = client.select(buf, ("gt", 20), output="indices", out="py.out")
        assert indices.dtype == np.int64
        same(client.get(indices), np.flatnonzero(np.cumsum(a) > 20))
        client.free("py.out")


def test_several_outputs_into_named_buffers(client):
    a = np.array([3, 3, 1, 1, 1, 2, 3, 3], dtype=np.int32)
    runs = client.run_length_encode(a, out=("py.values", "py.lengths"))
    assert runs.values.name == "py.values" and runs.lengths.name == "py.lengths"
    same(client.get("py.values"), np.array([3, 1, 2, 3], dtype=np.int32))
    same(client.get("py.lengths"), np.array([2, 3, 1, 2], dtype=np.int64))
    # None leaves that array inline; a Sort's one out= is its keys.
    keyed = client.reduce_by_key(a, np.arange(8, dtype=np.int64), out=(None, "py.values"))
    same(keyed.keys, np.array([3, 1, 2, 3], dtype=np.int32))
    same(client.get(keyed.values), np.array([1, 9, 5, 13], dtype=np.int64))
    client.sort(a, out="py.values")
    same(client.get("py.values"), np.sort(a))
    with pytest.raises(TypeError, match="lengths must be a buffer's name"):
        client.run_length_encode(a, out=("py.values", np.zeros(8, dtype=np.int64)))
    with pytest.raises(ValueError, match="answers 2"):
        client.run_length_encode(a, out=("py.values",))
    client.free("py.values")
    client.free("py.lengths")


def test_multiplex_takes_buffers(client):
    a = np.arange(100, dtype=np.float64)
    with client.put(a) as buf, client.multiplex() as stream:
        futures = [stream.scan(buf[i:]) for i in range(10)]
        for i, future in enumerate(futures):
            same(future.result(), np.cumsum(a[i:]))


def test_errors(client):
    with pytest.raises(primserve.ServerError) as error:
        client.get("py.nothing")
    assert error.value.code.name == "NOT_FOUND"
    with pytest.raises(ValueError, match="A-Za-z0-9"):
        client.put(np.zeros(3), name="a b")
    with client.put(np.zeros(3, dtype=np.int32), name="py.taken") as buf:
        with pytest.raises(primserve.ServerError) as error:
            client.put(np.zeros(3), name="py.taken")
        assert error.value.code.name == "ALREADY_EXISTS"
        with pytest.raises(ValueError, match="no step"):
            buf[::2]
        with pytest.raises(ValueError, match="A-Za-z0-9"):
            client.scan(buf, out="bad/name")
    with pytest.raises(primserve.ServerError) as error:
        client.scan(buf)  # freed
    assert error.value.code.name == "NOT_FOUND"
    same(client.scan(np.array([1, 2], dtype=np.int32)), np.array([1, 3], dtype=np.int32))


def test_asyncio(address):
    async def main():
        async with primserve.aio.Client(address, timeout=60) as client:
            a = np.arange(50000, dtype=np.uint32)
            async with await client.put(a, stripes=3) as buf:
                same(await client.get(buf), a)
                same(await client.scan(buf[1:]), np.cumsum(a[1:], dtype=np.uint32))
                out = await client.scan(buf, out="py.aio.out")
                same(await client.get(out), np.cumsum(a, dtype=np.uint32))
                await client.free(out)
                async with client.multiplex() as stream:
                    same(await stream.reduce(buf), np.uint32(a.sum(dtype=np.uint32)))
            assert buf.name not in [b.name for b in await client.buffers()]

    asyncio.run(main())
