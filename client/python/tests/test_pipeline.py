"""primserve.Client.pipeline and gather against numpy on a CPU primserve: the filtered group-by of the
docstring, chains with explicit outputs, buffers in and out, the returned steps, and the errors (each
naming its step); the same pipelines from primserve.aio and on Multiplex streams."""

import asyncio

import numpy as np
import pytest

import primserve
import primserve.aio


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print(f"seed {seed}")  # shown with a failure, to replay it
    return np.random.default_rng(seed)


def test_gather_is_numpy_take(client, rng):
    values = rng.standard_normal(1000)
    indices = rng.integers(0, 1000, 5000)
    np.testing.assert_array_equal(client.gather(values, indices), np.take(values, indices))
    with pytest.raises(TypeError, match="int64"):
        client.gather(values, indices.astype(np.int32))
    with pytest.raises(primserve.ServerError, match=r"indices\[1\] = 1000 is outside"):
        client.gather(values, np.array([0, 1000]))


@pytest.mark.parametrize("n", [0, 1, 100_000])
def test_filtered_group_by_is_bincount(client, rng, n):
    a = rng.standard_normal(n).astype(np.float32)
    k = rng.integers(0, 64, n).astype(np.int32)
    v = rng.integers(-1000, 1000, n).astype(np.int64)
    sums = client.pipeline().select(a, gt=0.25, indices=True).gather(k).gather(v) \
        .aggregate_by_key(num_keys=64, op="sum").run()
    keep = a > 0.25
    np.testing.assert_array_equal(sums, np.bincount(k[keep], weights=v[keep], minlength=64).astype(np.int64))


def test_runs_then_offsets_with_every_step_returned(client, rng):
    x = np.sort(rng.integers(0, 50, 10_000)).astype(np.int64)
    p = client.pipeline()
    p.run_length_encode(x, returned=True)
    p.scan(p.output(0, "lengths"), exclusive=True, returned=True)
    runs, offsets = p.run()
    values, counts = np.unique(x, return_counts=True)
    np.testing.assert_array_equal(runs.values, values)
    np.testing.assert_array_equal(runs.lengths, counts)
    np.testing.assert_array_equal(offsets, np.concatenate([[0], np.cumsum(counts)[:-1]]))


def test_sort_then_reduce_by_key_from_buffers_into_a_buffer(client, rng):
    keys = rng.integers(0, 100, 20_000).astype(np.int32)
    values = rng.integers(-5, 5, 20_000).astype(np.int64)
    with client.put(keys) as kb, client.put(values) as vb:
        p = client.pipeline().sort(kb, vb)
        p.reduce_by_key(p.output(0, "keys"), p.output(0, "values"), "sum", returned=True)
        p.unique(p.output(1, "keys"), out="py-pipeline-unique")
        by_key, stored = p.run()
        try:
            order = np.argsort(keys, kind="stable")
            distinct = np.unique(keys)
            np.testing.assert_array_equal(by_key.keys, distinct)
            np.testing.assert_array_equal(by_key.values,
                                          np.bincount(keys, weights=values, minlength=100)[distinct].astype(np.int64))
            assert isinstance(stored, primserve.Buffer) and stored.name == "py-pipeline-unique"
            np.testing.assert_array_equal(client.get(stored), distinct)
            assert len(order) == len(keys)
        finally:
            client.free("py-pipeline-unique")


def test_an_extreme_of_a_step_output_is_asked_of_the_server(client):
    a = np.array([3, -1, 7, 2], dtype=np.int32)
    assert client.pipeline().scan(a).reduce(op="max").run() == 11  # of 3 2 9 11
    assert client.pipeline().select(a, gt=0).reduce(op="argmin").run() == (2, 2)  # of 3 7 2
    # Nothing kept: the server's answer for an empty segment, the op's identity (index -1).
    assert client.pipeline().select(a, gt=100).reduce(op="max").run() == np.iinfo(np.int32).min
    assert client.pipeline().select(a, gt=100).reduce(op="argmax").run() == (np.iinfo(np.int32).min, -1)


def test_refusals_name_their_step(client):
    a = np.arange(10, dtype=np.int32)
    p = client.pipeline().select(a, gt=3, indices=True).gather(np.arange(5, dtype=np.int64))
    with pytest.raises(primserve.ServerError, match=r"step 1: indices\[\d+\] = \d+ is outside"):
        p.run()
    p = client.pipeline().scan(a)
    with pytest.raises(ValueError, match="makes no indices"):
        p.output(0, "indices")
    with pytest.raises(ValueError, match="no earlier step makes indices"):
        client.pipeline().gather(a)
    with pytest.raises(ValueError, match="no step"):
        client.pipeline().run()
    with pytest.raises(TypeError, match="unexpected keyword"):
        client.pipeline().select(a, between=3)


def test_asyncio_and_multiplexed_pipelines_equal_the_blocking_ones(client, address, rng):
    a = rng.standard_normal(20_000)
    k = rng.integers(0, 40, 20_000).astype(np.int32)
    x = np.sort(rng.integers(0, 30, 5_000)).astype(np.int64)

    def build(p, kb):
        """The same pipelines on any client or stream: a filtered group-by, and runs with their offsets."""
        group_by = p().select(a, gt=0.0, indices=True).gather(kb).gather(a).aggregate_by_key(num_keys=40)
        runs = p()
        runs.run_length_encode(x, returned=True)
        runs.scan(runs.output(0, "lengths"), exclusive=True, returned=True)
        return group_by, runs

    with client.put(k) as kb:
        blocking = [p.run() for p in build(client.pipeline, kb)]
        with client.multiplex() as stream:
            futures = [p.run() for p in build(stream.pipeline, kb)]
        multiplexed = [future.result() for future in futures]

        async def main():
            async with primserve.aio.Client(address, timeout=60) as aio:
                async with aio.multiplex() as aio_stream:
                    return (await asyncio.gather(*(p.run() for p in build(aio.pipeline, kb))),
                            await asyncio.gather(*(p.run() for p in build(aio_stream.pipeline, kb))))

        awaited, aio_multiplexed = asyncio.run(main())
    for answers in (multiplexed, awaited, aio_multiplexed):
        np.testing.assert_array_equal(answers[0], blocking[0])
        (runs, offsets), (expected_runs, expected_offsets) = answers[1], blocking[1]
        np.testing.assert_array_equal(runs.values, expected_runs.values)
        np.testing.assert_array_equal(runs.lengths, expected_runs.lengths)
        np.testing.assert_array_equal(offsets, expected_offsets)
    keep = a > 0
    np.testing.assert_allclose(blocking[0], np.bincount(k[keep], weights=a[keep], minlength=40))
