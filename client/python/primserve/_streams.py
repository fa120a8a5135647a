"""A Call through its *Stream RPC: the request in pieces, the answers joined.

The blocking and the asyncio clients share these and differ only in how they
send the pieces and read the answers. Pieces are made as gRPC asks for them,
from memoryviews of the arrays (no copy of a whole array); the answers' arrays
are concatenated once, so the method's parse sees what the unary call returns.
"""

from types import SimpleNamespace
from typing import Any, Callable, Iterator, List, Optional

import numpy as np

from primserve import _calls, _channel, _wire
from primserve.v1 import primitives_pb2 as pb

# The *Stream RPCs answering once, when the stream ends; the others answer each piece.
ONE_ANSWER = ("Reduce", "AggregateByKey")
PATHS = {rpc: _channel.RPC_PATHS[rpc + "Stream"] for rpc in _channel.RPC_PATHS if rpc + "Stream" in _channel.RPC_PATHS}

DEFAULT_STREAM_BYTES = 64 << 20
DEFAULT_PIECE_BYTES = 8 << 20


def wanted(call: _calls.Call, stream_bytes: int) -> bool:
    """Whether the call goes through its *Stream RPC: its arrays total more than stream_bytes."""
    return call.streams and sum(a.nbytes for a in call.arrays.values()) > stream_bytes


Progress = Optional[Callable[[int], Any]]


def pieces(call: _calls.Call, piece_bytes: int, progress: Progress = None) -> Iterator[bytes]:
    """The serialized messages of the stream: every parameter and the first
    piece of each array, then the next pieces of the same (equal) length,
    each at most piece_bytes of data (at least one element). progress(bytes)
    is told each piece's array bytes once gRPC has taken it."""
    length = len(next(iter(call.arrays.values())))
    step = max(1, piece_bytes // sum(a.itemsize for a in call.arrays.values()))
    later = type(call.message)()  # the later messages repeat only the arrays' dtypes
    for name in call.arrays:
        getattr(later, name).CopyFrom(getattr(call.message, name))
    for start in range(0, max(length, 1), step):
        piece = {name: a[start:start + step] for name, a in call.arrays.items()}
        yield _wire.serialize(call.message if start == 0 else later, piece)
        if progress is not None:
            progress(sum(a.nbytes for a in piece.values()))


def join(call: _calls.Call, answers: List[bytes]) -> Any:
    """What the method returns, from the stream's answers in order: each
    array the concatenation of the answers', the scalars (a Select's count)
    from the last."""
    parsed = [_wire.parse(answer, call.response) for answer in answers]
    if not parsed:
        raise ValueError(f"the server ended {call.rpc}Stream without an answer")
    joined = SimpleNamespace(**vars(parsed[-1]))
    for field in call.response.fields:
        if field.message_type is not None and field.message_type.full_name == pb.Array.DESCRIPTOR.full_name:
            parts = [getattr(answer, field.name) for answer in parsed if getattr(answer, field.name) is not None]
            setattr(joined, field.name, _concatenate(parts))
    return call.parse(joined)


def _concatenate(parts: List[np.ndarray]) -> Optional[np.ndarray]:
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
