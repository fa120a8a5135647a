"""Client.shared_memory against a CPU primserve with --shared_memory: inputs and outputs in a
region answer as inline calls do, the errors, and nothing left in /dev/shm."""

import asyncio
import os
import subprocess
import sys

import numpy as np
import pytest

import primserve
import primserve.aio
import reference as ref
from reference import DTYPES

N = 1000


@pytest.fixture
def shm_client(shm_address):
    # stream_bytes=0: an inline call of these sizes would stream, a region's stays unary.
    with primserve.Client(shm_address, timeout=60, stream_bytes=0) as c:
        yield c


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def shm_files():
    return set(os.listdir("/dev/shm"))


def same(actual, expected):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.tobytes() == expected.tobytes()


def test_docstring_example(shm_client):
    import doctest

    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(primserve.Client.shared_memory, "Client.shared_memory",
                                             globs={"client": shm_client, "np": np}):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0 and results.attempted == 1  # the with block, its printed answer checked


def test_region_is_registered_and_gone_after_close(shm_client):
    before = shm_files()
    with shm_client.shared_memory(4096, name="test-region") as region:
        assert region.key[1:] in shm_files()
        a = region.array(np.int64, 10)
        a[:] = np.arange(10)
        assert shm_client.reduce(a) == 45
    assert shm_files() == before
    assert shm_client.reduce(a) == 45  # a view of a closed region goes inline (a ref would be NOT_FOUND)
    with shm_client.shared_memory(64, name="test-region"):  # the name was unregistered
        pass


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_inputs_and_outputs_in_a_region_equal_inline(shm_client, client, rng, dtype):
    before = shm_files()
    a_inline = np.sort(rng.integers(0, 100, N)).astype(dtype)  # runs for unique and run_length_encode
    keys_inline = np.sort(rng.integers(0, 20, N)).astype(np.int32)
    with shm_client.shared_memory(64 * N) as region:
        a = region.array(dtype, N)
        a[:] = a_inline
        keys = region.array(np.int32, N, offset=8 * N)
        keys[:] = keys_inline
        out = region.array(dtype, N, offset=16 * N)
        indices = region.array(np.int64, N, offset=32 * N)
        # `out` takes each answer in turn: compare each as it comes.
        calls = [
            lambda c, a, keys, out: c.scan(a, out=out),
            lambda c, a, keys, out: c.scan(a, op="max", exclusive=True, segments=[0, 10, 500]),
            lambda c, a, keys, out: c.reduce(a, segments=[0, 100, 100], out=out),
            lambda c, a, keys, out: c.reduce(a, op="argmin", out=out),
            lambda c, a, keys, out: c.select(a, ("gt", 50), out=out),
            lambda c, a, keys, out: c.select(a, flags=keys, output="indices",
                                             out=None if out is None else indices),
            lambda c, a, keys, out: c.select(a, flags=keys, output="both", out=out),
            lambda c, a, keys, out: c.unique(a, out=out),
            lambda c, a, keys, out: c.run_length_encode(a, out=out),
            lambda c, a, keys, out: c.reduce_by_key(keys, a, op="min", out=out),
            lambda c, a, keys, out: c.aggregate_by_key(keys, a, 20, out=out),
            lambda c, a, keys, out: c.sort(a, descending=True, out=out),
            lambda c, a, keys, out: c.sort(a, values=keys, return_indices=True, out=out),
            lambda c, a, keys, out: c.gather(a, np.arange(N - 1, -1, -3, dtype=np.int64), out=out),
        ]
        for call in calls:
            placed, inline = call(shm_client, a, keys, out), call(client, a_inline, keys_inline, None)
            if isinstance(inline, tuple):
                assert type(placed) is type(inline)
                for part, inline_part in zip(placed, inline):
                    same(part, inline_part)
            else:
                same(placed, inline)
        same(shm_client.scan(a, out=out), np.cumsum(a_inline, dtype=dtype))
        assert np.shares_memory(shm_client.scan(a, out=out), out)  # written into the region
    assert shm_files() == before


def test_several_answers_each_into_its_array(shm_client, client, rng):
    a_inline = np.sort(rng.integers(0, 100, N)).astype(np.int64)
    v_inline = rng.integers(-50, 50, N).astype(np.int64)
    with shm_client.shared_memory(64 * N) as region:
        a = region.array(np.int64, N)
        a[:] = a_inline
        v = region.array(np.int64, N, offset=8 * N)
        v[:] = v_inline
        outs = [region.array(np.int64, N, offset=(16 + 8 * i) * N) for i in range(3)]

        def placed(answer, want, into):
            for part, want_part, out in zip(answer, want, into):
                same(part, want_part)
                assert (out is not None) == np.shares_memory(part, out if out is not None else a)

        placed(shm_client.run_length_encode(a, out=(outs[0], outs[1])),
               client.run_length_encode(a_inline), outs[:2])
        placed(shm_client.run_length_encode(a, out=(None, outs[1])),
               client.run_length_encode(a_inline), [None, outs[1]])
        placed(shm_client.reduce_by_key(a, v, out=(outs[0], outs[1])),
               client.reduce_by_key(a_inline, v_inline), outs[:2])
        placed(shm_client.select(v, ("gt", 0), output="both", out=(outs[0], outs[1])),
               client.select(v_inline, ("gt", 0), output="both"), outs[:2])
        placed(shm_client.sort(v, values=a, return_indices=True, out=tuple(outs)),
               client.sort(v_inline, values=a_inline, return_indices=True), outs)
        with pytest.raises(ValueError, match="answers 2"):
            shm_client.run_length_encode(a, out=(outs[0],))
        with pytest.raises(ValueError, match="answers 0"):
            shm_client.select(v, ("gt", 0), output="count", out=(outs[0],))


def test_answers_in_one_region_each(shm_client, client, rng):
    a_inline = rng.integers(0, 100, N).astype(np.float64)
    with shm_client.shared_memory(16 * N) as region:
        a = region.array(np.float64, N)
        a[:] = a_inline
        out = region.array(np.float64, N, offset=8 * N)
        same(shm_client.scan(a, out=out), client.scan(a_inline))
        same(out, np.cumsum(a_inline))
        same(shm_client.select(a, ("lt", 30), out=out), a_inline[a_inline < 30])
        same(shm_client.reduce(a, op="max", out=out), a_inline.max())


def test_output_region_too_small(shm_client, rng):
    with shm_client.shared_memory(8 * N) as region:
        a = region.array(np.int32, N)
        a[:] = rng.integers(0, 100, N)
        with pytest.raises(primserve.ServerError) as error:
            shm_client.scan(a, out=region.array(np.int32, N // 2, offset=4 * N))
        assert error.value.code.name == "INVALID_ARGUMENT"
        with pytest.raises(primserve.ServerError) as error:
            shm_client.select(a, ("ge", 0), out=region.array(np.int32, 10, offset=4 * N))
        assert error.value.code.name == "INVALID_ARGUMENT"
        # The next good request is answered.
        same(shm_client.scan(a, out=region.array(np.int32, N, offset=4 * N)), np.cumsum(a, dtype=np.int32))


def test_out_outside_a_region_and_bad_regions(shm_client):
    with pytest.raises(ValueError, match="out must be a view"):
        shm_client.scan(np.arange(4), out=np.empty(4, dtype=np.int64))
    with pytest.raises(ValueError):
        shm_client.shared_memory(0)
    with shm_client.shared_memory(64, name="twice"):
        with pytest.raises(primserve.ServerError) as error:
            shm_client.shared_memory(64, name="twice")
        assert error.value.code.name == "ALREADY_EXISTS"
    with pytest.raises(TypeError):
        with shm_client.shared_memory(64) as region:
            region.array(np.int16, 4)


def test_server_without_shared_memory(client):
    before = shm_files()
    with pytest.raises(primserve.ServerError) as error:
        client.shared_memory(64)
    assert error.value.code.name == "UNIMPLEMENTED"
    assert shm_files() == before


def test_inputs_in_a_region_are_not_sent(shm_client):
    sent = []
    scan = shm_client._rpcs["Scan"]

    def spy(request, **kwargs):
        sent.append(len(request))
        return scan(request, **kwargs)

    shm_client._rpcs = dict(shm_client._rpcs, Scan=spy)
    with shm_client.shared_memory(16 * N) as region:
        a = region.array(np.int64, N)
        a[:] = np.arange(N)
        same(shm_client.scan(a, out=region.array(np.int64, N, offset=8 * N)), np.cumsum(np.arange(N)))
    assert len(sent) == 1 and sent[0] < 100  # refs, not the 8000 bytes


def test_aio(shm_address, rng):
    import grpc

    from primserve.v1 import primitives_pb2 as pb

    before = shm_files()
    a_inline = rng.integers(0, 100, N).astype(np.uint64)

    async def main():
        async with primserve.aio.Client(shm_address, timeout=60, stream_bytes=0) as aio_client:
            async with await aio_client.shared_memory(16 * N) as region:
                a = region.array(np.uint64, N)
                a[:] = a_inline
                out = region.array(np.uint64, N, offset=8 * N)
                scanned = await aio_client.scan(a, out=out)
                assert np.shares_memory(scanned, out)
                same(scanned, np.cumsum(a_inline, dtype=np.uint64))
                same(await aio_client.select(a, ("gt", 50), out=out), a_inline[a_inline > 50])
                async with aio_client.multiplex() as stream:
                    with pytest.raises(ValueError, match="out= is for"):
                        await stream.scan(a, out=out)
            with pytest.raises(grpc.RpcError) as error:  # closing unregistered it
                await aio_client._unregister(pb.UnregisterRequest(name=region.name))
            assert error.value.code() == grpc.StatusCode.NOT_FOUND

    asyncio.run(main())
    assert shm_files() == before


def test_a_region_never_closed_is_unregistered_and_unlinked_at_exit(shm_address):
    name = f"never-closed-{os.getpid()}"
    script = "\n".join([
        "import numpy as np, primserve",
        f"client = primserve.Client({shm_address!r}, timeout=10)",
        f"region = client.shared_memory(4096, name={name!r})",
        "region.array(np.int32, 4)[:] = 7",
        "print(region.shm.name)",
    ])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    # Python's resource tracker warns of objects left behind; none is.
    assert "leaked" not in done.stderr, done.stderr
    assert done.stdout.strip().lstrip("/") not in shm_files()
    # The server forgot the region: its name registers again.
    with primserve.Client(shm_address, timeout=10) as client:
        with client.shared_memory(64, name=name) as region:
            assert region.name == name


def test_closing_the_client_closes_its_regions(shm_address):
    before = shm_files()
    name = f"client-closed-{os.getpid()}"
    client = primserve.Client(shm_address, timeout=10)
    region = client.shared_memory(4096, name=name)
    kept = region.array(np.int32, 4)  # a view outliving the close keeps the mapping, not the registration
    client.close()
    assert region.closed and shm_files() == before
    kept[:] = 1

    async def main():
        aio_client = primserve.aio.Client(shm_address, timeout=10)
        aio_region = await aio_client.shared_memory(4096, name=name)  # the name was free again
        await aio_client.close()
        return aio_region

    assert asyncio.run(main()).closed and shm_files() == before
    with primserve.Client(shm_address, timeout=10) as again:
        with again.shared_memory(64, name=name) as region:  # the server forgot both registrations
            assert region.name == name
