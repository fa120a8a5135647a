"""Client.multiplex() and primserve.aio's: many calls on one stream, each answer to its own call."""

import asyncio
import threading

import numpy as np
import pytest

import primserve
import primserve.aio
import reference as ref
from reference import DTYPES


def calls_and_answers(rng):
    """(method name, args, kwargs, the numpy answer) for every method and dtype, on small arrays."""
    cases = []
    for dtype in DTYPES:
        a = ref.random_array(rng, dtype, int(rng.integers(1, 200)))
        runs = np.repeat(a[:8], 3)
        keys = (np.arange(len(a)) % 5).astype(np.int32)
        cases += [
            ("scan", (a,), {"op": "max"}, ref.scan(a, "max", False)),
            ("reduce", (a,), {"op": "min"}, np.array([a.min()])),
            ("select", (a,), {"flags": a > a[0], "output": "values"}, a[a > a[0]]),
            ("unique", (runs,), {}, a[:8][ref.run_heads(a[:8])]),
            ("run_length_encode", (runs,), {}, ref.run_length_encode(runs)[1]),
            ("reduce_by_key", (np.sort(keys), a), {"op": "max"}, ref.reduce_by_key(np.sort(keys), a, "max")[1]),
            ("aggregate_by_key", (keys, a, 6), {"op": "min"}, ref.aggregate_by_key(keys, a, 6, "min")),
        ]
    return cases


def check(name, answer, expected):
    if name == "reduce":
        answer = np.array([answer])
    elif name == "run_length_encode":
        answer = answer.lengths
    elif name == "reduce_by_key":
        answer = answer.values
    np.testing.assert_array_equal(answer, expected)  # exact: max, min and lengths do not round


def test_every_method_from_several_threads(client):
    rng = np.random.default_rng(np.random.SeedSequence().entropy)
    cases = calls_and_answers(rng) * 20
    futures = [None] * len(cases)

    with client.multiplex() as stream:
        def send(first):
            for i in range(first, len(cases), 4):
                name, args, kwargs, _ = cases[i]
                futures[i] = getattr(stream, name)(*args, **kwargs)

        threads = [threading.Thread(target=send, args=(first,)) for first in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for (name, _, _, expected), future in zip(cases, futures):
        assert future.done()  # leaving the with block waited for every answer
        check(name, future.result(), expected)


def test_a_refused_call_fails_alone(client):
    a = np.arange(5, dtype=np.int32)
    with client.multiplex() as stream:
        before = stream.scan(a)
        refused = stream.reduce(a, segments=[0, 9])
        after = stream.select(a, ("gt", 2), output="count")
    assert before.result().tolist() == [0, 1, 3, 6, 10] and after.result() == 2
    with pytest.raises(primserve.ServerError) as raised:
        refused.result()
    assert raised.value.code.name == "INVALID_ARGUMENT" and "segment_offsets[1]" in raised.value.details


def test_bad_arguments_raise_at_the_call_and_a_closed_stream_takes_none(client):
    stream = client.multiplex()
    with pytest.raises(TypeError):
        stream.scan(np.ma.masked_array(np.arange(3), [0, 1, 0]))
    assert stream.unique(np.int64([4, 4, 5])).result().tolist() == [4, 5]
    stream.close()
    with pytest.raises(ValueError, match="closed"):
        stream.scan(np.arange(3, dtype=np.int32))


def test_calls_in_flight_fail_when_the_channel_closes(address):
    local = primserve.Client(address)
    stream = local.multiplex()
    pending = stream.scan(np.arange(8 << 20, dtype=np.int32))
    local.close()
    with pytest.raises(primserve.ServerError) as raised:
        pending.result(timeout=30)
    assert raised.value.code.name == "CANCELLED"


def test_aio_every_method_at_once(address):
    rng = np.random.default_rng(np.random.SeedSequence().entropy)
    cases = calls_and_answers(rng) * 10

    async def main():
        async with primserve.aio.Client(address) as client:
            async with client.multiplex() as stream:
                answers = await asyncio.gather(*(getattr(stream, name)(*args, **kwargs)
                                                 for name, args, kwargs, _ in cases))
                with pytest.raises(primserve.ServerError) as raised:
                    await stream.aggregate_by_key(np.int32([0, 7]), np.ones(2), 3)
                assert raised.value.code.name == "INVALID_ARGUMENT"
                # The stream goes on after the refusal.
                assert (await stream.reduce(np.arange(10, dtype=np.uint64))) == 45
            with pytest.raises(ValueError, match="closed"):
                await stream.scan(np.arange(3, dtype=np.int32))
            return answers

    for (name, _, _, expected), answer in zip(cases, asyncio.run(main())):
        check(name, answer, expected)
