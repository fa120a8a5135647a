"""primserve.aio.Client: the same calls awaited, many at once, and its errors."""

import asyncio

import numpy as np
import pytest

import primserve
import primserve.aio
import reference as ref
from reference import DTYPES


def run(coroutine):
    return asyncio.run(coroutine)


def test_every_method_concurrently(address):
    rng = np.random.default_rng(np.random.SeedSequence().entropy)
    arrays = {dtype: ref.random_array(rng, dtype, int(rng.integers(1000, 3000))) for dtype in DTYPES}
    keys = np.repeat(rng.integers(0, 20, 300).astype(np.int32), rng.integers(1, 4, 300))

    async def main():
        async with primserve.aio.Client(address, timeout=60) as client:
            calls = []
            for dtype, a in arrays.items():
                calls += [client.scan(a), client.reduce(a, op="max"), client.select(a, flags=a > a[0]),
                          client.unique(np.sort(a)), client.run_length_encode(np.sort(a)),
                          client.reduce_by_key(keys, np.resize(a, len(keys)), op="min"),
                          client.aggregate_by_key(keys, np.resize(a, len(keys)), 20, op="max")]
            return await client.health(), await asyncio.gather(*calls)

    health, answers = run(main())
    assert health == "SERVING"
    answers = iter(answers)
    for dtype, a in arrays.items():
        ref.assert_matches(next(answers), ref.scan(a, "sum", False), dtype, len(a), float(np.abs(a.astype(float)).sum()))
        assert next(answers) == a.max()
        ref.assert_matches(next(answers), a[a > a[0]], dtype)
        ref.assert_matches(next(answers), ref.run_length_encode(np.sort(a))[0], dtype)
        values, lengths = ref.run_length_encode(np.sort(a))
        runs = next(answers)
        ref.assert_matches(runs.values, values, dtype)
        ref.assert_matches(runs.lengths, lengths, np.int64)
        values = np.resize(a, len(keys))
        by_key = next(answers)
        ref.assert_matches(by_key.values, ref.reduce_by_key(keys, values, "min")[1], dtype)
        ref.assert_matches(next(answers), ref.aggregate_by_key(keys, values, 20, "max"), dtype)


def test_errors(address):
    async def main():
        async with primserve.aio.Client(address) as client:
            with pytest.raises(ValueError, match="not contiguous"):
                await client.scan(np.arange(10, dtype=np.int64)[::2])
            with pytest.raises(primserve.ServerError) as raised:
                await client.reduce(np.arange(5, dtype=np.int32), segments=[0, 9])
            assert raised.value.code.name == "INVALID_ARGUMENT"
            assert "segment_offsets" in raised.value.details
            with pytest.raises(primserve.ServerError) as raised:
                await client.health("no.such.Service")
            assert raised.value.code.name == "NOT_FOUND"

    run(main())
