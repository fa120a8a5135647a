"""Buffers on several servers behind one address: put spreads them, every call
naming one (inputs, out=, get, free) reaches the instance at its location, a
call naming buffers of two instances is refused, and a buffer whose instance
went away is NOT_FOUND saying so; the blocking and the asyncio client."""

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
    for call in (lambda: client.scan(gone), lambda: client.get(gone), lambda: client.free(gone)):
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
            servers[1].stop()
            with pytest.raises(primserve.ServerError) as error:
                await client.scan(seen[locations[1]])
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
