"""primserve._wire against protobuf's own serializer and parser."""

import numpy as np
import pytest

import primserve
from primserve import _arrays, _wire
from primserve.v1 import primitives_pb2 as pb
import reference as ref
from reference import DTYPES


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def full(a: np.ndarray) -> pb.Array:
    return pb.Array(dtype=_arrays.DTYPES[a.dtype], data=a.tobytes())


# Lengths around the varint boundaries of the data's length (127/128 bytes, 16383/16384).
LENGTHS = [0, 1, 31, 32, 4095, 4096, 100000]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", LENGTHS)
def test_spliced_request_parses_as_the_full_one(rng, dtype, n):
    a = ref.random_array(rng, dtype, n)
    flags = rng.integers(0, 2, n).astype(np.uint32)
    request = pb.SelectRequest(input=_arrays.header(a), flags=_arrays.header(flags), output=pb.SelectRequest.COUNT,
                               partition=True)
    parsed = pb.SelectRequest.FromString(_wire.serialize(request, {"input": a, "flags": flags}))
    assert parsed == pb.SelectRequest(input=full(a), flags=full(flags), output=pb.SelectRequest.COUNT,
                                      partition=True)

    request = pb.ScanRequest(input=_arrays.header(a), op=pb.MAX, exclusive=True, segment_offsets=[0, n // 2])
    parsed = pb.ScanRequest.FromString(_wire.serialize(request, {"input": a}))
    assert parsed == pb.ScanRequest(input=full(a), op=pb.MAX, exclusive=True, segment_offsets=[0, n // 2])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", LENGTHS)
def test_parse_reads_what_protobuf_wrote(rng, dtype, n):
    values = ref.random_array(rng, dtype, n)
    indices = rng.integers(-1, n + 1, n).astype(np.int64)
    response = pb.SelectResponse(values=full(values), indices=full(indices), count=n * 1000 + 7)
    buffer = response.SerializeToString()
    answer = _wire.parse(buffer, pb.SelectResponse.DESCRIPTOR)
    assert answer.values.dtype == values.dtype and answer.values.tobytes() == values.tobytes()
    assert answer.indices.dtype == np.int64 and np.array_equal(answer.indices, indices)
    assert answer.count == n * 1000 + 7
    assert not answer.values.flags.writeable and answer.values.base is not None  # a view, not a copy


def test_parse_merges_repeated_occurrences_and_skips_unknown_fields():
    first = pb.ReduceResponse(values=pb.Array(dtype=pb.INT32, data=np.int32([1, 2]).tobytes())).SerializeToString()
    second = pb.ReduceResponse(values=pb.Array(data=np.int32([5, 6, 7]).tobytes()),
                               indices=pb.Array(dtype=pb.INT64, data=np.int64([3]).tobytes())).SerializeToString()
    unknown = bytes([15 << 3 | 0, 99, 14 << 3 | 2, 2, 0xAA, 0xBB, 13 << 3 | 1]) + bytes(8) + bytes([12 << 3 | 5]) + bytes(4)
    buffer = first + unknown + second
    expected = pb.ReduceResponse.FromString(buffer)
    answer = _wire.parse(buffer, pb.ReduceResponse.DESCRIPTOR)
    assert answer.values.tolist() == np.frombuffer(expected.values.data, np.int32).tolist() == [5, 6, 7]
    assert answer.indices.tolist() == [3]


def test_absent_fields_read_as_defaults():
    answer = _wire.parse(b"", pb.SelectResponse.DESCRIPTOR)
    assert answer.values is None and answer.indices is None and answer.count == 0


@pytest.mark.parametrize("buffer, message", [
    (pb.ScanResponse(output=pb.Array(dtype=pb.INT32, data=b"123456")).SerializeToString(), "6 bytes of int32"),
    (pb.ScanResponse(output=pb.Array(data=b"1234")).SerializeToString(), "dtype 0"),
    (pb.ScanResponse(output=pb.Array(dtype=pb.INT32, data=b"1234")).SerializeToString()[:-1], "truncated"),
    (bytes([1 << 3 | 0, 0x80]), "malformed varint"),
    (bytes([1 << 3 | 3]), "wire type 3"),
])
def test_malformed_answers_raise(buffer, message):
    with pytest.raises(ValueError, match=message):
        _wire.parse(buffer, pb.ScanResponse.DESCRIPTOR)


def test_multiplex_frames_match_protobuf():
    from primserve import _calls, _multiplex

    a = np.arange(300, dtype=np.float32)
    call = _calls.select(a, ("in_range", 1.5, 9), None, "both", False)
    frame = pb.MultiplexRequest.FromString(_multiplex.frame(2**40 + 3, call))
    assert frame.id == 2**40 + 3 and frame.WhichOneof("request") == "select"
    assert frame.select == pb.SelectRequest.FromString(call.request)

    values = np.float32([2, 3])
    answer_bytes = pb.MultiplexResponse(id=7, select=pb.SelectResponse(
        values=full(values), indices=full(np.int64([2, 3])), count=2)).SerializeToString()
    answer = _multiplex.read(answer_bytes)
    assert answer.id == 7 and answer.code == 0
    result = _multiplex.result(call, answer_bytes, answer)
    assert result.values.tolist() == [2, 3] and result.indices.tolist() == [2, 3]

    refusal = pb.MultiplexResponse(id=8, code=8, message="queue full").SerializeToString()
    with pytest.raises(primserve.ServerError) as raised:
        _multiplex.result(call, refusal, _multiplex.read(refusal))
    assert raised.value.code.name == "RESOURCE_EXHAUSTED" and raised.value.details == "queue full"

    wrong_type = pb.MultiplexResponse(id=9, unique=pb.UniqueResponse(values=full(values))).SerializeToString()
    with pytest.raises(ValueError, match="not a SelectResponse"):
        _multiplex.result(call, wrong_type, _multiplex.read(wrong_type))
