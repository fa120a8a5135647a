"""Several servers behind one address: calls spread over them, and a server
that shuts down or dies mid-load costs no call (health checking and retries,
as the C++ client's defaults)."""

import numpy as np

import primserve


def test_calls_survive_a_server_going_away(start_server):
    servers = [start_server(), start_server()]
    target = "ipv4:" + ",".join(f"127.0.0.1:{s.port}" for s in servers)
    rng = np.random.default_rng(21)
    with primserve.Client(target, timeout=30) as client:
        for _ in range(20):
            a = rng.integers(-100, 100, size=1000, dtype=np.int64)
            np.testing.assert_array_equal(client.scan(a), np.cumsum(a))
        servers[0].stop()
        for _ in range(40):
            a = rng.integers(-100, 100, size=1000, dtype=np.int64)
            np.testing.assert_array_equal(client.scan(a), np.cumsum(a))
        assert client.health() == "SERVING"
