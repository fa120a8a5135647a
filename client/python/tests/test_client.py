"""primserve.Client against a CPU primserve: every method and dtype against numpy, and the errors."""

import numpy as np
import pytest

import primserve
import reference as ref
from reference import DTYPES, INTEGER_DTYPES


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print(f"seed {seed}")  # shown with a failure, to replay it
    return np.random.default_rng(seed)


def random_length(rng) -> int:
    return int(rng.integers(1000, 3000))


def magnitude(a: np.ndarray) -> float:
    return float(np.abs(a.astype(np.float64)).sum())


def test_installed_copy_is_tested(request, address):
    # conftest installed the package with pip; the tests must run that copy,
    # whose generated modules also serve callers who want the raw stub.
    import grpc
    from primserve.v1 import primitives_pb2, primitives_pb2_grpc

    site = str(request.config.primserve_site)
    assert primserve.__file__.startswith(site) and primitives_pb2_grpc.__file__.startswith(site)
    with grpc.insecure_channel(address) as channel:
        response = primitives_pb2_grpc.PrimitivesStub(channel).Scan(primitives_pb2.ScanRequest(
            input=primitives_pb2.Array(dtype=primitives_pb2.INT64, data=np.int64([2, 3, 4]).tobytes()),
            op=primitives_pb2.SUM))
    assert np.frombuffer(response.output.data, np.int64).tolist() == [2, 5, 9]


def test_method_docstring_examples(client):
    # The examples in help(primserve.Client) are what the server answers.
    import doctest

    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(primserve.Client, globs={"client": client, "np": np}):
        # The class's own example names an address; shared_memory's needs --shared_memory (test_shared_memory).
        if test.name not in ("Client", "Client.shared_memory") and test.examples:
            runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0 and results.attempted >= 15


def test_server_error_docstring_quotes_the_server(client):
    import doctest

    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(primserve.ServerError, globs={"client": client, "np": np,
                                                                          "primserve": primserve}):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0 and results.attempted == 1


def test_health(client):
    assert client.health() == "SERVING"


def test_health_of_unknown_service(client):
    with pytest.raises(primserve.ServerError) as error:
        client.health("no.such.Service")
    assert error.value.code.name == "NOT_FOUND"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max"])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("segmented", [False, True])
def test_scan(client, rng, dtype, op, exclusive, segmented):
    a = ref.random_array(rng, dtype, random_length(rng), for_prod=op == "prod")
    segments = ref.random_segments(rng, len(a)) if segmented else None
    got = client.scan(a, op=op, exclusive=exclusive, segments=segments)
    ref.assert_matches(got, ref.scan(a, op, exclusive, segments), dtype, len(a), magnitude(a))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max"])
def test_reduce(client, rng, dtype, op):
    a = ref.random_array(rng, dtype, random_length(rng), for_prod=op == "prod")
    got = client.reduce(a, op=op)
    assert isinstance(got, np.generic)  # a numpy scalar, like a.sum()
    ref.assert_matches(np.array([got]), ref.reduce(a, op), dtype, len(a), magnitude(a))

    segments = ref.random_segments(rng, len(a))
    got = client.reduce(a, op=op, segments=segments)
    ref.assert_matches(got, ref.reduce(a, op, segments), dtype, len(a), magnitude(a))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["argmin", "argmax"])
def test_reduce_arg(client, rng, dtype, op):
    # Few distinct values, so the extreme occurs more than once: the first index wins.
    a = ref.random_array(rng, dtype, 64)[rng.integers(0, 64, random_length(rng))]
    value, index = client.reduce(a, op=op)
    assert a[index] == value and index == (np.argmin(a) if op == "argmin" else np.argmax(a))
    assert isinstance(index, np.int64) and value.dtype == np.dtype(dtype)

    segments = ref.random_segments(rng, len(a))
    got = client.reduce(a, op=op, segments=segments)
    assert isinstance(got, primserve.ArgExtreme)
    values, indices = ref.reduce(a, op, segments)
    ref.assert_matches(got.value, values, dtype)
    ref.assert_matches(got.index, indices, np.int64)
    assert -1 in got.index  # random_segments has empty segments


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_min_max_propagate_nan(client, rng, dtype):
    a = ref.random_array(rng, dtype, random_length(rng))
    a[[100, 200]] = np.nan
    assert np.isnan(client.reduce(a, op="min")) and np.isnan(client.reduce(a, op="max"))
    assert client.reduce(a, op="argmax").index == 100 == np.argmax(a)
    ref.assert_matches(client.scan(a, op="min"), np.minimum.accumulate(a), dtype)


def predicates(a: np.ndarray):
    """(where, mask) pairs: every kind, with operands drawn from a (as the Python numbers a
    caller writes) so that each matches some elements and not others."""
    x5, x7, x9 = a[5].item(), a[7].item(), a[9].item()
    low, high = sorted((a[0].item(), a[1].item()))
    return [
        ("nonzero", a != 0),
        (("nonzero",), a != 0),
        (("eq", x5), a == a[5]),
        (("ne", x5), a != a[5]),
        (("lt", x7), a < a[7]),
        (("<=", x7), a <= a[7]),
        (("gt", x9), a > a[9]),
        ((">=", x9), a >= a[9]),
        (("in_range", low, high), (a >= a.dtype.type(low)) & (a < a.dtype.type(high))),
    ]


@pytest.mark.parametrize("dtype", DTYPES)
def test_select_where(client, rng, dtype):
    # Few distinct values (and zeros), so EQ and NONZERO have both outcomes.
    a = ref.random_array(rng, dtype, 50)
    a[:3] = 0
    a = a[rng.integers(0, 50, random_length(rng))]
    if a.dtype.kind == "f":
        a[[11, 12]] = np.nan  # fails every comparison but ne and nonzero, as in numpy
    for where, mask in predicates(a):
        ref.assert_matches(client.select(a, where), a[mask], dtype)
        ref.assert_matches(client.select(a, where, output="indices"), np.flatnonzero(mask), np.int64)
        assert client.select(a, where, output="count") == np.count_nonzero(mask)
        both = client.select(a, where, output="both")
        ref.assert_matches(both.values, a[mask], dtype)
        ref.assert_matches(both.indices, np.flatnonzero(mask), np.int64)


def test_float_operand_is_compared_exactly_as_given(client):
    a = np.array([np.float32(0.1), 0.5], dtype=np.float32)  # float32(0.1) is just above the double 0.1
    assert client.select(a, ("gt", 0.1), output="count") == 2
    assert client.select(a, ("gt", np.float32(0.1)), output="count") == np.count_nonzero(a > 0.1) == 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_select_partition(client, rng, dtype):
    a = ref.random_array(rng, dtype, random_length(rng))
    operand = a[3].item()
    mask = a > a[3]
    kept, rejected = client.select(a, ("gt", operand), partition=True)
    ref.assert_matches(kept, a[mask], dtype)
    ref.assert_matches(rejected, a[~mask], dtype)
    parts = client.select(a, ("gt", operand), output="both", partition=True)
    ref.assert_matches(parts.selected.indices, np.flatnonzero(mask), np.int64)
    ref.assert_matches(parts.rejected.indices, np.flatnonzero(~mask), np.int64)
    ref.assert_matches(parts.rejected.values, a[~mask], dtype)
    indices = client.select(a, ("gt", operand), output="indices", partition=True)
    ref.assert_matches(np.concatenate(indices), np.concatenate([np.flatnonzero(mask), np.flatnonzero(~mask)]), np.int64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("flags_dtype", INTEGER_DTYPES + [np.bool_])
def test_select_flags(client, rng, dtype, flags_dtype):
    a = ref.random_array(rng, dtype, random_length(rng))
    flags = (rng.integers(0, 3, len(a)) * rng.integers(1, 100, len(a))).astype(flags_dtype)
    mask = flags != 0
    ref.assert_matches(client.select(a, flags=flags), a[mask], dtype)
    assert client.select(a, flags=flags, output="count") == np.count_nonzero(mask)


def runs_of(rng, dtype, n_runs: int = 400) -> np.ndarray:
    """Random values repeated 1-4 times, with equal neighbours now and then."""
    values = ref.random_array(rng, dtype, 16)[rng.integers(0, 16, n_runs)]
    return np.repeat(values, rng.integers(1, 5, n_runs))


@pytest.mark.parametrize("dtype", DTYPES)
def test_unique_and_run_length_encode(client, rng, dtype):
    a = runs_of(rng, dtype)
    values, lengths = ref.run_length_encode(a)
    ref.assert_matches(client.unique(a), values, dtype)
    runs = client.run_length_encode(a)
    ref.assert_matches(runs.values, values, dtype)
    ref.assert_matches(runs.lengths, lengths, np.int64)


def test_unique_compares_bit_patterns(client):
    a = np.array([0.0, -0.0, -0.0, np.nan, np.nan, 1.0])
    got = client.unique(a)
    assert got.view(np.uint64).tolist() == a[[0, 1, 3, 5]].view(np.uint64).tolist()


@pytest.mark.parametrize("key_dtype, value_dtype",
                         [(k, np.float64) for k in DTYPES] + [(np.int32, v) for v in DTYPES])
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max"])
def test_reduce_by_key(client, rng, key_dtype, value_dtype, op):
    keys = runs_of(rng, key_dtype)
    values = ref.random_array(rng, value_dtype, len(keys), for_prod=op == "prod")
    got = client.reduce_by_key(keys, values, op=op)
    want_keys, want_values = ref.reduce_by_key(keys, values, op)
    ref.assert_matches(got.keys, want_keys, key_dtype)
    ref.assert_matches(got.values, want_values, value_dtype, 4, magnitude(values))


@pytest.mark.parametrize("key_dtype", INTEGER_DTYPES)
@pytest.mark.parametrize("value_dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "min", "max"])
def test_aggregate_by_key(client, rng, key_dtype, value_dtype, op):
    n = random_length(rng)
    num_keys = 40
    keys = rng.integers(0, num_keys - 5, n).astype(key_dtype)  # the last keys never occur: identity
    values = ref.random_array(rng, value_dtype, n)
    got = client.aggregate_by_key(keys, values, num_keys, op=op)
    ref.assert_matches(got, ref.aggregate_by_key(keys, values, num_keys, op), value_dtype, n, magnitude(values))


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_arrays(client, dtype):
    empty = np.array([], dtype=dtype)
    ref.assert_matches(client.scan(empty), empty, dtype)
    ref.assert_matches(client.reduce(empty, segments=[0]), np.zeros(1), dtype)
    assert client.select(empty, ("gt", 1), output="count") == 0
    ref.assert_matches(client.unique(empty), empty, dtype)


def test_answers_are_read_only_views(client):
    got = client.scan(np.arange(10, dtype=np.int32))
    assert not got.flags.writeable
    with pytest.raises(ValueError):
        got[0] = 1


# --- Errors ---------------------------------------------------------------

@pytest.fixture(scope="module")
def nowhere():
    """A client of an address nobody listens on: a check that sent something would raise
    ServerError (UNAVAILABLE) instead of the TypeError or ValueError the tests expect."""
    with primserve.Client("127.0.0.1:1", timeout=5) as c:
        yield c


A = np.arange(10, dtype=np.int32)


@pytest.mark.parametrize("call, error, message", [
    (lambda c: c.scan(["1", "2"]), TypeError, "<U1"),
    (lambda c: c.scan(np.ma.masked_array(A, A > 5)), TypeError, "masked array"),
    (lambda c: c.reduce(A[:0], op="min"), ValueError, "zero-size array"),
    (lambda c: c.reduce(A[:0], op="argmax"), ValueError, "zero-size array"),
    (lambda c: c.scan(np.arange(4, dtype=np.int16)), TypeError, "int16"),
    (lambda c: c.scan(np.ones(4, dtype=np.float16)), TypeError, "float16"),
    (lambda c: c.scan(np.ones(4, dtype=bool)), TypeError, "bool"),
    (lambda c: c.scan(np.ones(4, dtype=np.complex64)), TypeError, "complex64"),
    (lambda c: c.scan(np.arange(4, dtype=">i4")), TypeError, "big-endian"),
    (lambda c: c.scan(np.zeros((2, 3), dtype=np.int32)), ValueError, "1-D"),
    (lambda c: c.scan(np.array(5, dtype=np.int32)), ValueError, "1-D"),
    (lambda c: c.scan(A[::2]), ValueError, "not contiguous"),
    (lambda c: c.scan(A, op="argmin"), ValueError, "scan takes op"),
    (lambda c: c.scan(A, op="mean"), ValueError, "scan takes op"),
    (lambda c: c.scan(A, segments=[]), ValueError, "segments is empty"),
    (lambda c: c.scan(A, segments=[0, -1]), ValueError, "non-negative"),
    (lambda c: c.scan(A, segments=[0.0, 1.5]), TypeError, "integers"),
    (lambda c: c.reduce(A, op="median"), ValueError, "reduce takes op"),
    (lambda c: c.select(A), ValueError, "exactly one"),
    (lambda c: c.select(A, ("gt", 1), flags=A), ValueError, "exactly one"),
    (lambda c: c.select(A, ("gt", "1")), TypeError, "must be a number"),
    (lambda c: c.select(A, ("gt", True)), TypeError, "must be a number"),
    (lambda c: c.select(A, ("between", 1, 2)), ValueError, "where must start with"),
    (lambda c: c.select(A, ("gt",)), ValueError, "takes 1 operand"),
    (lambda c: c.select(A, ("in_range", 1)), ValueError, "takes 2 operand"),
    (lambda c: c.select(A, 5), TypeError, "where must be"),
    (lambda c: c.select(A, flags=A.astype(np.float32)), TypeError, "flags"),
    (lambda c: c.select(A, flags=A[:5]), ValueError, "10 elements but flags has 5"),
    (lambda c: c.select(A, ("gt", 1), output="mask"), ValueError, "output must be"),
    (lambda c: c.select(A, ("gt", 1), output="count", partition=True), ValueError, "partition"),
    (lambda c: c.reduce_by_key(A, A[:3]), ValueError, "keys has 10 elements"),
    (lambda c: c.reduce_by_key(A, A, op="argmax"), ValueError, "reduce_by_key takes op"),
    (lambda c: c.aggregate_by_key(A.astype(np.float32), A, 10), TypeError, "keys"),
    (lambda c: c.aggregate_by_key(A, A, 0), ValueError, "num_keys"),
    (lambda c: c.aggregate_by_key(A, A, 10, op="prod"), ValueError, "aggregate_by_key takes op"),
])
def test_bad_arguments_raise_before_sending(nowhere, call, error, message):
    with pytest.raises(error) as raised:
        call(nowhere)
    assert message in str(raised.value)


@pytest.mark.parametrize("call, message", [
    (lambda c: c.scan(np.arange(5, dtype=np.int32), segments=[0, 7]), "segment_offsets[1]"),
    (lambda c: c.reduce(np.arange(5, dtype=np.int32), segments=[0, 3, 2]), "segment_offsets"),
    (lambda c: c.scan(np.arange(5, dtype=np.int32), segments=[1, 3]), "segment_offsets"),
    (lambda c: c.aggregate_by_key(np.array([0, 5], dtype=np.int32), np.ones(2), 3), "keys"),
])
def test_server_refusal_raises_server_error(client, call, message):
    with pytest.raises(primserve.ServerError) as raised:
        call(client)
    assert raised.value.code.name == "INVALID_ARGUMENT"
    assert message in raised.value.details
    assert "INVALID_ARGUMENT" in str(raised.value)


def test_no_server_raises_unavailable(nowhere):
    with pytest.raises(primserve.ServerError) as raised:
        nowhere.scan(A)
    assert raised.value.code.name == "UNAVAILABLE"


def test_timeout_raises_deadline_exceeded(address):
    with primserve.Client(address, timeout=1e-6) as impatient:
        with pytest.raises(primserve.ServerError) as raised:
            impatient.scan(np.arange(1 << 20, dtype=np.int64))
    assert raised.value.code.name == "DEADLINE_EXCEEDED"


def test_anything_numpy_asarray_takes_is_an_input(client):
    expected = np.cumsum(np.arange(10, dtype=np.int64))
    for given in ([int(x) for x in range(10)], memoryview(np.arange(10, dtype=np.int64)),
                  range(10), np.arange(10, dtype=np.int64).tolist()):
        ref.assert_matches(client.scan(given), expected, np.int64)

    class Column:  # a pandas or pyarrow column: it has __array__
        def __array__(self, dtype=None, copy=None):
            return np.arange(10, dtype=np.int64)

    ref.assert_matches(client.scan(Column()), expected, np.int64)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_real_bounds_on_integer_arrays_keep_what_numpy_keeps(client, dtype):
    a = np.array([0, 1, 2, 3, 4, 5, np.iinfo(dtype).max, np.iinfo(dtype).min], dtype=dtype)
    big = float(np.iinfo(np.uint64).max) * 4
    for where, keep in [
        (("gt", 1.5), a > 1.5), (("ge", 1.5), a >= 1.5), (("lt", 2.5), a < 2.5), (("le", 2.5), a <= 2.5),
        (("eq", 2.0), a == 2), (("eq", 2.5), a == 2.5), (("ne", 2.5), a != 2.5), (("ne", 2.0), a != 2),
        (("in_range", 1.5, 3), (a >= 1.5) & (a < 3)), (("in_range", 0.5, 4.5), (a >= 0.5) & (a < 4.5)),
        (("gt", -big), a > -big), (("lt", big), a < big), (("gt", big), a > big), (("le", -big), a <= -big),
        (("gt", float("inf")), a > np.inf), (("gt", -float("inf")), a > -np.inf),
        (("lt", float("nan")), a < np.nan), (("ne", float("nan")), a != np.nan),
        (("gt", -1), a.astype(object) > -1), (("lt", 2**70), a.astype(object) < 2**70),
    ]:
        got = client.select(a, where, output="indices")
        assert got.tolist() == np.flatnonzero(keep).tolist(), where
