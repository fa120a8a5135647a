"""primserve.Client.sort against numpy on a CPU primserve: numpy.sort / argsort(kind="stable") order,
descending, values, indices, segments, bits kept, and the errors."""

import numpy as np
import pytest

import primserve
import reference as ref
from reference import DTYPES


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print(f"seed {seed}")  # shown with a failure, to replay it
    return np.random.default_rng(seed)


def bits(a: np.ndarray) -> list:
    return a.view(np.uint32 if a.itemsize == 4 else np.uint64).tolist()


def numpy_order(keys: np.ndarray, descending: bool) -> np.ndarray:
    """numpy.argsort(kind="stable"); descending: the distinct keys reversed, NaNs still last, ties in input order."""
    if not descending:
        return np.argsort(keys, kind="stable")
    _, rank = np.unique(keys, return_inverse=True)  # -0.0 == 0.0; every NaN one rank, the last
    rank = rank.reshape(-1).astype(np.int64)
    nan = np.isnan(keys) if keys.dtype.kind == "f" else np.zeros(len(keys), bool)
    return np.argsort(np.where(nan, len(keys), -rank), kind="stable")


def sort_keys(rng, dtype, n: int) -> np.ndarray:
    """Keys with many ties; floats with NaNs of both signs, both zeros and infinities."""
    keys = ref.random_array(rng, dtype, n)[rng.integers(0, max(1, n // 8), n)]
    if np.dtype(dtype).kind == "f":
        special = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf], dtype=dtype)
        where = rng.integers(0, n, n // 5)
        keys[where] = special[rng.integers(0, len(special), len(where))]
    return keys


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_matches_numpy(client, rng, dtype, descending):
    n = int(rng.integers(1000, 3000))
    keys = sort_keys(rng, dtype, n)
    values = ref.random_array(rng, np.float32, n)
    order = numpy_order(keys, descending)
    got = client.sort(keys, values=values, descending=descending, return_indices=True)
    assert got.indices.dtype == np.int64 and got.indices.tolist() == order.tolist()
    assert bits(got.keys) == bits(keys[order])
    assert bits(got.values) == bits(values[order])
    plain = client.sort(keys, descending=descending)
    assert isinstance(plain, np.ndarray) and bits(plain) == bits(keys[order])
    if not descending:
        assert bits(plain) == bits(np.sort(keys, kind="stable"))


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_segmented_sort(client, rng, dtype):
    n = 2000
    keys = sort_keys(rng, dtype, n)
    starts = np.array([0, 0, 5, 6, 700, 700, 1999, 2000], dtype=np.uint64)
    ends = list(starts[1:]) + [n]
    got = client.sort(keys, return_indices=True, segment_offsets=starts)
    want = np.concatenate([b + numpy_order(keys[b:e], False) for b, e in zip(starts.astype(int), ends)])
    assert got.indices.tolist() == want.tolist()
    assert bits(got.keys) == bits(keys[want])
    assert got.values is None


def test_sort_empty(client):
    got = client.sort(np.array([], dtype=np.float32), return_indices=True)
    assert len(got.keys) == 0 and len(got.indices) == 0


@pytest.mark.parametrize("call, error, message", [
    (lambda c: c.sort(np.ma.masked_array([3, 1], [0, 1])), TypeError, "masked array"),
    (lambda c: c.sort(np.arange(4, dtype=np.int16)), TypeError, "int16"),
    (lambda c: c.sort(np.arange(4, dtype=np.int32), values=np.arange(3, dtype=np.int32)), ValueError,
     "keys has 4 elements"),
    (lambda c: c.sort(np.arange(4, dtype=np.int32), segment_offsets=[]), ValueError, "segments is empty"),
])
def test_bad_sort_arguments_raise_before_sending(call, error, message):
    with primserve.Client("127.0.0.1:1", timeout=5) as nowhere:
        with pytest.raises(error) as raised:
            call(nowhere)
    assert message in str(raised.value)


@pytest.mark.parametrize("segments, message", [
    ([0, 7], "segment_offsets[1] = 7 is past the end"),
    ([0, 3, 2], "segment_offsets[2] = 2 is less than"),
    ([1, 3], "the first segment must start at 0"),
])
def test_bad_segments_are_invalid_argument(client, segments, message):
    with pytest.raises(primserve.ServerError) as raised:
        client.sort(np.arange(5, dtype=np.int32), segment_offsets=segments)
    assert raised.value.code.name == "INVALID_ARGUMENT"
    assert message in raised.value.details


def test_sort_through_multiplex(client, rng):
    keys = sort_keys(rng, np.float32, 500)
    with client.multiplex() as stream:
        futures = [stream.sort(keys, descending=d, return_indices=True) for d in (False, True)]
        answers = [f.result() for f in futures]
    for d, got in zip((False, True), answers):
        assert got.indices.tolist() == numpy_order(keys, d).tolist()
