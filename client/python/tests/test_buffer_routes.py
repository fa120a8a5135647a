"""Buffers on several servers behind one address: put spreads them, every call
naming one (inputs, out=, get, free, pipelines, Multiplex requests) reaches the
instance at its location, a call naming buffers of two instances is refused,
and a buffer whose instance went away is NOT_FOUND saying so; the blocking and
the asyncio client."""

import asyncio

import grpc
import numpy as np
import pytest

import primserve
import primserve.aio


def one_per_server(client, a, locations):
    """Puts buffers until one lands on each server (round_robin spreads the
    creates once both connections are up); their Buffers by location."""
    on = {}
    for i in range(100):
        buf = client.put(a, name=f"routed-{i}")
        on.setdefault(buf.location, buf)
        if set(on) == set(locations):
            return on
    pytest.fail(f"every put landed on {sorted(on)}")


def put_on(client, location, a, name):
    """Puts `a` until it lands on the server at `location`; its Buffer there
    (the puts that landed elsewhere are freed)."""
    for i in range(100):
        buf = client.put(a, name=f"{name}-{i}")
        if buf.location == location:
            return buf
        client.free(buf)
    pytest.fail(f"no put of {name} landed on {location}")


def names_on(location):
    with primserve.Client(location, timeout=30) as direct:
        return {b.name for b in direct.buffers()}


@pytest.fixture
def two(start_server):
    servers = [start_server(), start_server()]
    locations = [f"127.0.0.1:{s.port}" for s in servers]
    with primserve.Client("ipv4:" + ",".join(locations), timeout=30) as client:
        yield servers, locations, client


def test_every_call_naming_a_buffer_reaches_its_instance(two):
    servers, locations, client = two
    a = np.arange(20000, dtype=np.int32) % 97
    on = one_per_server(client, a, locations)
    for location, buf in on.items():
        other = next(l for l in locations if l != location)
        assert buf.name in names_on(location) and buf.name not in names_on(other)
        for _ in range(4):  # round_robin alone would send some to the other
            np.testing.assert_array_equal(client.scan(buf), np.cumsum(a, dtype=np.int32))
            np.testing.assert_array_equal(client.get(buf), a)
            np.testing.assert_array_equal(client.get(buf.name), a)
        stored = client.scan(buf[10:], out=buf.name + ".sums")
        assert stored.name in names_on(location)
        np.testing.assert_array_equal(client.get(stored), np.cumsum(a[10:], dtype=np.int32))
        assert client.reduce(stored, op="max") == np.cumsum(a[10:], dtype=np.int32).max()
        assert client.buffer(buf.name).location == location
    with pytest.raises(ValueError, match="different instances"):
        first, second = on.values()
        client.reduce_by_key(first, second)
    # An inline call's output lands on one instance and is found there.
    sums = client.scan(a, out="fresh")
    assert sum("fresh" in names_on(l) for l in locations) == 1
    np.testing.assert_array_equal(client.get(sums), np.cumsum(a, dtype=np.int32))
    assert {b.location for b in client.buffers()} == set(locations)
    for location, buf in on.items():
        client.free(buf)
        assert buf.name not in names_on(location)


def test_a_buffer_whose_instance_went_away_is_not_found(two):
    servers, locations, client = two
    a = np.arange(1000, dtype=np.int64)
    on = one_per_server(client, a, locations)
    servers[1].stop()
    gone = on[locations[1]]
    def multiplexed():
        with client.multiplex() as stream:
            return stream.scan(gone).result()

    for call in (lambda: client.scan(gone), lambda: client.get(gone),
                 lambda: client.pipeline().scan(gone).reduce().run(), multiplexed, lambda: client.free(gone)):
        with pytest.raises(primserve.ServerError) as error:
            call()
        assert error.value.code == grpc.StatusCode.NOT_FOUND, error.value
        assert "went away" in error.value.details and locations[1] in error.value.details
    # Freed (forgotten), it is a name no instance holds.
    with pytest.raises(primserve.ServerError) as error:
        client.scan(gone)
    assert error.value.code == grpc.StatusCode.NOT_FOUND and "no buffer named" in error.value.details
    # The other instance's buffers, and calls naming none, still work.
    kept = on[locations[0]]
    np.testing.assert_array_equal(client.scan(kept), np.cumsum(a))
    np.testing.assert_array_equal(client.scan(a), np.cumsum(a))


def test_pipelines_reach_the_instance_holding_their_buffers(two):
    servers, locations, client = two
    rng = np.random.default_rng(5)
    n = 5000
    a = rng.standard_normal(n).astype(np.float32)
    k = rng.integers(0, 32, n).astype(np.int32)
    v = rng.integers(-100, 100, n).astype(np.int64)
    keep = a > 0
    columns = {}
    for s, location in enumerate(locations):
        ab, kb, vb = (put_on(client, location, x, f"p{s}{name}") for name, x in (("a", a), ("k", k), ("v", v)))
        columns[location] = ab, kb, vb
        with primserve.Client(location, timeout=30) as direct:
            there = direct.pipeline().select(ab, gt=0.0, indices=True).gather(kb).gather(vb) \
                .aggregate_by_key(num_keys=32).run()
            for _ in range(4):  # round_robin alone would send some to the other
                routed = client.pipeline().select(ab, gt=0.0, indices=True).gather(kb).gather(vb) \
                    .aggregate_by_key(num_keys=32).run()
                np.testing.assert_array_equal(routed, there)
        np.testing.assert_array_equal(there, np.bincount(k[keep], weights=v[keep], minlength=32).astype(np.int64))
        # A step's output stored in a buffer lands with the inputs, and is found there.
        p = client.pipeline().select(ab, gt=0.0, indices=True)
        stored = p.gather(kb, out=f"p{s}-kept").run()
        assert stored.name in names_on(location)
        np.testing.assert_array_equal(client.get(stored.name), k[keep])
        np.testing.assert_array_equal(client.pipeline().scan(stored).run(), np.cumsum(k[keep], dtype=np.int32))
    # Buffers of two instances: refused before anything is sent, naming both.
    (a0, k0, _), (_, k1, _) = columns.values()
    with pytest.raises(ValueError, match="different instances") as error:
        client.pipeline().select(a0, gt=0.0, indices=True).gather(k0).gather(k1).run()
    assert all(location in str(error.value) for location in locations), error.value
    # The next pipeline is answered.
    np.testing.assert_array_equal(client.pipeline().select(a0, gt=0.0, indices=True).gather(k0).run(), k[keep])


def direct_answers(location, calls):
    """Each call made with a client of the server at `location` alone."""
    with primserve.Client(location, timeout=30) as direct:
        return [call(direct) for call in calls]


def test_a_multiplex_session_spans_instances(two):
    servers, locations, client = two
    a = np.arange(20000, dtype=np.int32) % 97
    on = one_per_server(client, a, locations)
    positions = np.arange(0, 20000, 7, dtype=np.int64)

    def calls(buf):
        """Each call as a function of a client (or a stream, then a Future's result)."""
        return [
            lambda c: c.scan(buf),
            lambda c: c.reduce(buf[10:], op="max"),
            lambda c: c.select(buf, ("gt", 50)),
            lambda c: c.gather(buf, positions),
            lambda c: c.pipeline().select(buf, gt=50, indices=True).gather(buf).scan().run(),
            lambda c: c.scan(a),  # inline: on the address's stream
        ]

    expected = {location: direct_answers(location, calls(buf)) for location, buf in on.items()}
    futures = {location: [] for location in on}
    with client.multiplex() as stream:
        for _ in range(5):
            for location, buf in on.items():
                futures[location] += [call(stream) for call in calls(buf)]
    for location, sent in futures.items():
        for future, answer in zip(sent, expected[location] * 5):
            np.testing.assert_array_equal(future.result(), answer)

    first, second = (on[location] for location in locations)
    with client.multiplex() as stream:
        # One request reads buffers of one instance: refused at the call, naming both.
        with pytest.raises(ValueError, match="different instances") as error:
            stream.reduce_by_key(first, second)
        assert all(location in str(error.value) for location in locations), error.value
        with pytest.raises(ValueError, match="different instances"):
            stream.pipeline().scan(first).gather(second, positions).run()
        unknown = stream.scan(primserve.Buffer("never-made", np.int32, 4))
        # A pipeline's output stored in a buffer is remembered where it landed.
        stored = stream.pipeline().scan(second, out="mx-sums").run()
        after = stream.reduce(first)
    with pytest.raises(primserve.ServerError) as raised:
        unknown.result()
    assert raised.value.code == grpc.StatusCode.NOT_FOUND and "never-made" in raised.value.details
    assert after.result() == a.sum()
    assert stored.result().name == "mx-sums" and "mx-sums" in names_on(locations[1])
    np.testing.assert_array_equal(client.get("mx-sums"), np.cumsum(a, dtype=np.int32))


def test_asyncio_routes_as_the_blocking_client(two):
    servers, locations, _ = two

    async def run():
        async with primserve.aio.Client("ipv4:" + ",".join(locations), timeout=30) as client:
            a = np.arange(5000, dtype=np.float64)
            seen = {}
            for i in range(100):
                buf = await client.put(a, name=f"aio-{i}")
                seen.setdefault(buf.location, buf)
                if len(seen) == 2:
                    break
            assert set(seen) == set(locations)
            for location, buf in seen.items():
                for _ in range(4):
                    np.testing.assert_array_equal(await client.scan(buf), np.cumsum(a))
                    np.testing.assert_array_equal(await client.get(buf.name), a)
                stored = await client.scan(buf, out=buf.name + ".sums")
                assert stored.name in names_on(location)
                np.testing.assert_array_equal(await client.get(stored), np.cumsum(a))
            with pytest.raises(ValueError, match="different instances"):
                await client.reduce_by_key(*seen.values())
            # Pipelines and a Multiplex session reach each buffer's instance as the blocking client's do.
            first, second = (seen[location] for location in locations)
            keep = (a > 2500).nonzero()[0]
            async with client.multiplex() as stream:
                kept = await asyncio.gather(*(
                    call for buf in (first, second) for call in (
                        client.pipeline().select(buf, gt=2500.0, indices=True).gather(buf).run(),
                        stream.pipeline().select(buf, gt=2500.0, indices=True).gather(buf).run(),
                        stream.gather(buf, keep))))
                sums = await asyncio.gather(stream.scan(first), stream.scan(second), stream.scan(a))
                with pytest.raises(ValueError, match="different instances"):
                    await stream.pipeline().scan(first).gather(second, keep).run()
            for answer in kept:
                np.testing.assert_array_equal(answer, a[keep])
            for answer in sums:
                np.testing.assert_array_equal(answer, np.cumsum(a))
            servers[1].stop()
            with pytest.raises(primserve.ServerError) as error:
                await client.scan(seen[locations[1]])
            assert error.value.code == grpc.StatusCode.NOT_FOUND and "went away" in error.value.details
            async def multiplexed():
                async with client.multiplex() as stream:
                    return await stream.scan(second)

            for call in (lambda: client.pipeline().scan(second).run(), multiplexed):
                with pytest.raises(primserve.ServerError) as error:
                    await call()
                assert error.value.code == grpc.StatusCode.NOT_FOUND and "went away" in error.value.details
            await client.free(seen[locations[0]])
            assert seen[locations[0]].name not in names_on(locations[0])

    asyncio.run(run())


def test_a_new_client_finds_buffers_on_every_server_the_address_names(two):
    servers, locations, client = two
    a = np.arange(100, dtype=np.int32)
    on = one_per_server(client, a, locations)
    with primserve.Client("ipv4:" + ",".join(locations), timeout=30) as fresh:
        for location, buf in on.items():
            got = fresh.buffer(buf.name)
            assert got.location == location
            np.testing.assert_array_equal(fresh.scan(got), np.cumsum(a))
            fresh.free(buf.name)
            assert buf.name not in names_on(location)


def test_addresses_of_a_target():
    from primserve import _routes
    assert _routes.addresses("ipv4:10.0.0.1:1,10.0.0.2:2") == ["10.0.0.1:1", "10.0.0.2:2"]
    assert set(_routes.addresses("dns:///localhost:7")) & {"127.0.0.1:7", "[::1]:7"}
    assert _routes.addresses("localhost:7") == []
