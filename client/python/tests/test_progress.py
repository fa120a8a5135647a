"""progress= is told every byte a streamed call sends and put()/get() move, piece by piece, as tqdm's update is."""

import asyncio
import io
import threading

import numpy as np
import pytest

import primserve
import primserve.aio


class Bar:
    """What a progress callback sees: tqdm's update(n), called from any thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.updates = []

    def update(self, n):
        with self.lock:
            self.updates.append(n)


N = 10_000
PIECE = 4096  # bytes: N int64 elements go in 20 pieces, the last one short


def test_streamed_calls_report_each_piece(address):
    bar = Bar()
    a = np.arange(N, dtype=np.int64)
    with primserve.Client(address, timeout=60, stream_bytes=1000, piece_bytes=PIECE, progress=bar.update) as client:
        assert (client.scan(a) == np.cumsum(a)).all()
        assert bar.updates == [PIECE] * (a.nbytes // PIECE) + [a.nbytes % PIECE]
        del bar.updates[:]
        keys, values = a // 100, np.ones(N, dtype=np.float32)
        assert client.reduce_by_key(keys, values).keys.size == 100  # two arrays: both counted
        assert sum(bar.updates) == keys.nbytes + values.nbytes and len(bar.updates) == 30
        del bar.updates[:]
        assert client.reduce(a) == a.sum()  # a stream answered once
        assert sum(bar.updates) == a.nbytes
        del bar.updates[:]
        client.scan(a[:10])  # unary: nothing to report
        assert bar.updates == []


@pytest.mark.parametrize("stripes", [1, 3])
def test_put_and_get_report_every_byte(address, stripes):
    bar = Bar()
    a = np.arange(6 << 20, dtype=np.int32)  # 24 MiB: several pieces per stripe
    with primserve.Client(address, timeout=60, progress=bar.update) as client:
        with client.put(a, stripes=stripes) as x:
            assert sum(bar.updates) == a.nbytes and len(bar.updates) > stripes
            del bar.updates[:]
            assert (client.get(x, stripes=stripes) == a).all()
            assert sum(bar.updates) == a.nbytes and len(bar.updates) > stripes


def test_aio_reports_streams_put_and_get(address):
    bar = Bar()
    a = np.arange(N, dtype=np.int64)

    async def main():
        async with primserve.aio.Client(address, timeout=60, stream_bytes=1000, piece_bytes=PIECE,
                                        progress=bar.update) as client:
            assert ((await client.scan(a)) == np.cumsum(a)).all()
            assert sum(bar.updates) == a.nbytes and len(bar.updates) == 20
            del bar.updates[:]
            x = await client.put(a, stripes=2)
            assert sum(bar.updates) == a.nbytes
            del bar.updates[:]
            assert ((await client.get(x, stripes=2)) == a).all()
            assert sum(bar.updates) == a.nbytes
            await client.free(x)

    asyncio.run(main())


def test_with_tqdm(address):
    tqdm = pytest.importorskip("tqdm")
    a = np.arange(N, dtype=np.int64)
    with tqdm.tqdm(total=a.nbytes, unit="B", file=io.StringIO()) as bar:
        with primserve.Client(address, timeout=60, stream_bytes=1000, piece_bytes=PIECE,
                              progress=bar.update) as client:
            client.scan(a)
        assert bar.n == a.nbytes
