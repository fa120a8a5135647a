"""Array bytes in and out of serialized messages without protobuf's copies.

protobuf's Python API copies a bytes field at every step: into the Array
message, into the request holding it, into the serialized string; and back
out of the response when it is parsed and again when the field is read. For a
64M-element array that is a gigabyte of memcpy per call. Here:

- A request goes out as its message serialized without the arrays' data,
  followed by each array's data as a second occurrence of the same Array
  field. Protobuf merges repeated occurrences of a message field (the
  encoding's rule for concatenated messages), so the server reads one
  request, and the data is copied once, into the joined bytes.
- A response is walked field by field (the wire format's varint, 64-bit,
  length-delimited and 32-bit fields) and each Array becomes np.frombuffer
  over the response's own bytes, with no copy.

Field numbers and types come from the generated descriptors.
"""

from types import SimpleNamespace
from typing import Dict, List, Optional, Tuple

import numpy as np
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from primserve import _arrays, _buffers, _cuda
from primserve.v1 import primitives_pb2 as pb

# Wire types.
VARINT, _I64, LEN, _I32 = 0, 1, 2, 5
_ARRAY_DTYPE = pb.Array.DESCRIPTOR.fields_by_name["dtype"].number
_ARRAY_DATA = pb.Array.DESCRIPTOR.fields_by_name["data"].number
_ARRAY_SHM = pb.Array.DESCRIPTOR.fields_by_name["shm"].number
_REF_BYTE_SIZE = pb.SharedMemoryRef.DESCRIPTOR.fields_by_name["byte_size"].number
_ARRAY_BUFFER = pb.Array.DESCRIPTOR.fields_by_name["buffer"].number
_BUFFER_NAME = pb.BufferRef.DESCRIPTOR.fields_by_name["name"].number
_BUFFER_LENGTH = pb.BufferRef.DESCRIPTOR.fields_by_name["length"].number
# The responses' scalar fields (SelectResponse.count): non-negative varints.
_UNSIGNED = (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_BOOL)


def _is_array(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.full_name == pb.Array.DESCRIPTOR.full_name


def varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(field_number: int, wire_type: int) -> bytes:
    """A field's tag."""
    return varint(field_number << 3 | wire_type)


def serialize(request: Message, arrays: Dict[str, np.ndarray]) -> bytes:
    """The request's bytes with each array's data as its Array field's `data`.

    `request` holds each Array field's dtype (and no data); `arrays` maps those
    fields' names to checked (1-D, contiguous) arrays.
    """
    for name, a in arrays.items():
        if isinstance(a, _buffers.BufferArray):
            raise TypeError(f"{name} is a resident buffer: it goes as a ref in a unary call or a Multiplex stream")
        if isinstance(a, _cuda.DeviceArray):
            raise TypeError(f"{name} is a CUDA array: it goes as a ref into a CUDA region from "
                            f"cuda_shared_memory() in a unary call (not in a Multiplex stream)")
    parts: List[object] = [request.SerializeToString()]
    numbers = request.DESCRIPTOR.fields_by_name
    for name, a in arrays.items():
        data_header = key(_ARRAY_DATA, LEN) + varint(a.nbytes)
        parts += [key(numbers[name].number, LEN), varint(len(data_header) + a.nbytes), data_header,
                  memoryview(a).cast("B")]
    return b"".join(parts)


def _read_varint(buffer: bytes, at: int, end: int) -> Tuple[int, int]:
    value = shift = 0
    while True:
        if at >= end or shift > 63:
            raise ValueError("malformed varint in the server's answer")
        byte = buffer[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def fields(buffer: bytes, at: int, end: int):
    """(field number, wire type, value) for each field in buffer[at:end]: an int for a
    varint, (start, end) of the payload for a length-delimited field."""
    while at < end:
        tag, at = _read_varint(buffer, at, end)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == VARINT:
            value, at = _read_varint(buffer, at, end)
        elif wire_type == LEN:
            length, at = _read_varint(buffer, at, end)
            value = (at, at + length)
            at += length
        elif wire_type in (_I64, _I32):
            at += 8 if wire_type == _I64 else 4
            value = None
        else:
            raise ValueError(f"wire type {wire_type} in the server's answer")
        if at > end:
            raise ValueError("the server's answer is truncated")
        yield number, wire_type, value


def parse(buffer: bytes, descriptor: Descriptor, start: int = 0, end: Optional[int] = None,
          placed: Optional[Dict[str, np.ndarray]] = None) -> SimpleNamespace:
    """The fields by name of the response in buffer[start:end]: each Array as a
    read-only ndarray over `buffer` (None if the response has none), each
    unsigned integer as an int (0 if absent).

    `placed` maps the fields the request placed in shared memory to the
    arrays over that memory; such a field's Array carries `shm` with the bytes
    written, and comes back as the start of its array, of the answer's dtype.
    A field stored in a resident buffer (Array.buffer) comes back as the
    _buffers.Buffer of it."""
    by_number = {field.number: field for field in descriptor.fields}
    # name -> [dtype code, (start, end) of data, bytes written in shared memory, (buffer name, length)]
    arrays: Dict[str, List] = {}
    scalars: Dict[str, int] = {}
    for number, wire_type, value in fields(buffer, start, len(buffer) if end is None else end):
        field = by_number.get(number)
        if field is None:
            continue  # a field this client predates
        if _is_array(field) and wire_type == LEN:
            # A repeated occurrence merges into the earlier one, as protobuf's parser does.
            array = arrays.setdefault(field.name, [pb.DTYPE_UNSPECIFIED, (0, 0), None, None])
            for inner_number, inner_type, inner in fields(buffer, *value):
                if inner_number == _ARRAY_DTYPE and inner_type == VARINT:
                    array[0] = inner
                elif inner_number == _ARRAY_DATA and inner_type == LEN:
                    array[1] = inner
                elif inner_number == _ARRAY_SHM and inner_type == LEN:
                    array[2] = next((size for number, kind, size in fields(buffer, *inner)
                                     if number == _REF_BYTE_SIZE and kind == VARINT), 0)
                elif inner_number == _ARRAY_BUFFER and inner_type == LEN:
                    name, length = "", 0
                    for number, kind, ref_value in fields(buffer, *inner):
                        if number == _BUFFER_NAME and kind == LEN:
                            name = bytes(buffer[ref_value[0]:ref_value[1]]).decode()
                        elif number == _BUFFER_LENGTH and kind == VARINT:
                            length = ref_value
                    array[3] = (name, length)
        elif field.type in _UNSIGNED and wire_type == VARINT:
            scalars[field.name] = value
    answer = SimpleNamespace()
    for field in descriptor.fields:
        if _is_array(field):
            array = arrays.get(field.name)
            if array is None:
                setattr(answer, field.name, None)
            elif array[3] is not None:
                setattr(answer, field.name, _buffers.stored_buffer(array[3][0], _dtype(array[0], field.name),
                                                                   array[3][1]))
            elif array[2] is not None:
                setattr(answer, field.name, _placed(placed or {}, field.name, array[0], array[2]))
            else:
                setattr(answer, field.name, _to_ndarray(buffer, field.name, array[0], array[1]))
        elif field.type in _UNSIGNED:
            setattr(answer, field.name, scalars.get(field.name, 0))
    return answer


def _dtype(dtype_code: int, name: str) -> np.dtype:
    dtype = _arrays.NUMPY_DTYPES.get(dtype_code)
    if dtype is None:
        raise ValueError(f"the server's answer has dtype {dtype_code} in {name}")
    return np.dtype(dtype)


def _placed(placed: Dict[str, np.ndarray], name: str, dtype_code: int, byte_size: int) -> np.ndarray:
    out = placed.get(name)
    dtype = _dtype(dtype_code, name)
    if out is None or byte_size > out.nbytes or byte_size % dtype.itemsize:
        raise ValueError(f"the server's answer placed {byte_size} bytes of {name} where the request gave no room")
    return out.view(np.uint8)[:byte_size].view(dtype)


def _to_ndarray(buffer: bytes, name: str, dtype_code: int, span: Tuple[int, int]) -> np.ndarray:
    dtype = _dtype(dtype_code, name)
    start, end = span
    if (end - start) % dtype.itemsize:
        raise ValueError(f"the server's answer has {end - start} bytes of {dtype} in {name}")
    return np.frombuffer(buffer, dtype=dtype, count=(end - start) // dtype.itemsize, offset=start)
