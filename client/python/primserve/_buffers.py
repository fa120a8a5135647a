"""Resident buffers: arrays kept on the server that calls name instead of sending.

A Buffer (from Client.put, or an output stored with ``out="name"``) stands
for a range of a buffer; it goes wherever an array goes, as an Array.buffer
ref, and ``out=`` takes a Buffer or a name to store an output in a buffer.
Both clients share this module: they differ only in how they send.

Writes and reads are striped: a large array is cut into one contiguous range
per channel, each written (read) on its own connection at once, in messages
whose data is spliced into the serialized bytes without protobuf's copies.
"""

from __future__ import annotations

import inspect
import numbers
import re
import uuid
from typing import Any, Callable, Iterator, List, Optional, Tuple

import numpy as np

from primserve import _arrays, _calls, _wire
from primserve.v1 import primitives_pb2 as pb

# Bytes of array data in each Write and Read message.
PIECE_BYTES = 4 << 20
# Connections a put or get is striped over by default.
DEFAULT_STRIPES = 4

_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
_WRITE = pb.WriteBufferRequest.DESCRIPTOR.fields_by_name
_READ = pb.ReadBufferResponse.DESCRIPTOR.fields_by_name
_REF = pb.BufferRef.DESCRIPTOR.fields_by_name


class Buffer:
    """A range of a resident buffer on the server (elements [offset, offset + len)).

    Pass it wherever a method takes an array: the server reads it where it
    lies, and nothing travels. ``buf[i:j]`` is a sub-range (a step is
    ValueError). ``client.get(buf)`` downloads it. Used as a context manager
    (``with client.put(a) as buf:``; ``async with`` from primserve.aio) the
    buffer is freed on leaving the block; ``buf.free()`` frees it at once
    (awaited from primserve.aio). Freeing a buffer that requests are using
    lets them finish with the data they started with.
    """

    def __init__(self, name: str, dtype: np.dtype, length: int, offset: int = 0, *,
                 device: int = -1, location: str = "", free: Optional[Callable[[str], Any]] = None):
        self.name = name
        self.dtype = np.dtype(dtype)
        self.offset = offset
        self._length = length
        self.device = device
        self.location = location
        self._free = free

    def __len__(self) -> int:
        return self._length

    @property
    def nbytes(self) -> int:
        return self._length * self.dtype.itemsize

    def __repr__(self) -> str:
        return (f"Buffer(name={self.name!r}, dtype={self.dtype}, offset={self.offset}, "
                f"length={self._length})")

    def __getitem__(self, key: Any) -> "Buffer":
        if isinstance(key, numbers.Integral):
            index = int(key) + (self._length if key < 0 else 0)
            if not 0 <= index < self._length:
                raise IndexError(f"index {key} is out of range for a buffer of {self._length} elements")
            key = slice(index, index + 1)
        if not isinstance(key, slice):
            raise TypeError(f"a Buffer takes slices, not {type(key).__name__}")
        start, stop, step = key.indices(self._length)
        if step != 1:
            raise ValueError("a Buffer range has no step: the server reads contiguous elements")
        return Buffer(self.name, self.dtype, max(0, stop - start), self.offset + start,
                      device=self.device, location=self.location, free=self._free)

    def ref(self) -> pb.BufferRef:
        return pb.BufferRef(name=self.name, offset=self.offset, length=self._length)

    def stand_in(self) -> "BufferArray":
        """The ndarray that stands for this range among a call's arrays (for the checks)."""
        # np.empty maps the length without touching it: no host memory is used.
        standin = np.empty(self._length, dtype=self.dtype).view(BufferArray)
        standin.buffer = self
        return standin

    def free(self) -> Any:
        """Frees the buffer on the server (NOT_FOUND raises ServerError); from
        primserve.aio, a coroutine to await."""
        if self._free is None:
            raise ValueError(f"buffer {self.name!r} came from a call's answer: free it with client.free()")
        return self._free(self.name)

    def __enter__(self) -> "Buffer":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        freeing = self.free()
        if inspect.isawaitable(freeing):
            freeing.close()
            raise TypeError("a Buffer from primserve.aio frees with `async with`")

    async def __aenter__(self) -> "Buffer":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.free()


class BufferArray(np.ndarray):
    """A Buffer's stand-in among a call's arrays; its own bytes are never used."""

    buffer: Optional[Buffer] = None

    def __array_finalize__(self, obj: Any) -> None:
        self.buffer = getattr(obj, "buffer", None)


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"a buffer name has 1 to 128 characters of [A-Za-z0-9._-]; got {name!r}")
    return name


def fresh_name() -> str:
    return f"py-{uuid.uuid4().hex}"


def place(call: _calls.Call, out: Any) -> _calls.Call:
    """The call with its Buffer inputs as refs and `out` (a name or a Buffer)
    as its output buffer (the response's Array then names the buffer, which
    _wire.parse gives as a Buffer)."""
    inputs = {name: a.buffer for name, a in call.arrays.items() if isinstance(a, BufferArray)}
    placements = _calls.outputs(call, out)
    if not placements and not inputs:
        return call
    message = type(call.message)()
    message.CopyFrom(call.message)
    for name, buffer in inputs.items():
        getattr(message, name).buffer.CopyFrom(buffer.ref())
    for field, _, name in placements:
        if not isinstance(name, (str, Buffer)):
            raise TypeError(f"out= names buffers, so its {field} must be a buffer's name or a Buffer too; "
                            f"got {type(name).__name__}")
        setattr(message.output_buffers, field, check_name(name.name if isinstance(name, Buffer) else name))
    arrays = {name: a for name, a in call.arrays.items() if name not in inputs}
    # The server takes buffers in unary calls and Multiplex only.
    return call._replace(message=message, arrays=arrays, streams=False)


def wants_buffers(call: _calls.Call, out: Any) -> bool:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return (any(isinstance(o, (str, Buffer)) for o in outs)
            or any(isinstance(a, BufferArray) for a in call.arrays.values()))


def stripes(length: int, count: int) -> List[Tuple[int, int]]:
    """[begin, end) element ranges: `count` (at most `length`, at least 1) contiguous parts."""
    count = max(1, min(count, length))
    return [(length * i // count, length * (i + 1) // count) for i in range(count)]


def write_messages(name: str, data: memoryview, offset: int, itemsize: int,
                   progress: Optional[Callable[[int], Any]] = None) -> Iterator[bytes]:
    """The serialized WriteBufferRequests of one stripe: the first names the
    buffer and its offset, the rest continue after it; each piece's bytes are
    joined once with its small header (one copy, no protobuf copies).
    progress(bytes) is told each piece's data once gRPC has taken it."""
    piece = max(itemsize, PIECE_BYTES // itemsize * itemsize)
    at = 0
    first = True
    while first or at < len(data):
        chunk = data[at:at + piece]
        head = b""
        if first:
            head = (_wire.key(_WRITE["name"].number, _wire.LEN) + _wire.varint(len(name.encode()))
                    + name.encode())
            if offset:
                head += _wire.key(_WRITE["offset"].number, _wire.VARINT) + _wire.varint(offset)
        head += _wire.key(_WRITE["data"].number, _wire.LEN) + _wire.varint(len(chunk))
        yield b"".join((head, chunk))
        if progress is not None:
            progress(len(chunk))
        first = False
        at += len(chunk)


def read_request(name: str, begin: int, end: int) -> bytes:
    return pb.ReadBufferRequest(name=name, offset=begin, length=end - begin,
                                piece_bytes=PIECE_BYTES).SerializeToString()


def take_piece(piece: bytes, out: np.ndarray, base: int) -> int:
    """Copies one serialized ReadBufferResponse into out, which holds the
    buffer's elements from `base` on; returns the bytes copied."""
    offset, span = 0, (0, 0)
    for number, wire_type, value in _wire.fields(piece, 0, len(piece)):
        if number == _READ["offset"].number and wire_type == _wire.VARINT:
            offset = value
        elif number == _READ["data"].number and wire_type == _wire.LEN:
            span = value
    count = (span[1] - span[0]) // out.itemsize
    at = offset - base
    if at < 0 or at + count > out.size:
        raise ValueError("the server sent a piece outside the range asked for")
    out[at:at + count] = np.frombuffer(piece, dtype=out.dtype, count=count, offset=span[0])
    return count * out.itemsize


def info_of(message: pb.BufferInfo, free: Optional[Callable[[str], Any]]) -> Buffer:
    return Buffer(message.name, _arrays.NUMPY_DTYPES[message.dtype], message.length, device=message.device_id,
                  location=message.location, free=free)


def stored_buffer(name: str, dtype: np.dtype, length: int) -> Buffer:
    """An output the server stored: its whole buffer."""
    return Buffer(name, dtype, length)
