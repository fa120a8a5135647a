"""A large call through its streaming RPC: the request cut into pieces, the answers joined.

The blocking and asyncio clients share these and differ only in how they
send the pieces and read the answers. The pieces are produced lazily, each
one serialized by _wire from views of the caller's arrays as gRPC asks for
it, so the whole array is never copied, and the answers are read while the
later pieces are still being sent.
"""

from types import SimpleNamespace
from typing import Iterable, Iterator

import numpy as np

from primserve import _calls, _wire


def streams(call: _calls.Call, stream_bytes: int) -> bool:
    """Whether `call` goes through its streaming RPC: it has one, and its arrays total more than stream_bytes."""
    return call.stream is not None and sum(a.nbytes for a in call.arrays.values()) > stream_bytes


def pieces(call: _calls.Call, piece_bytes: int) -> Iterator[bytes]:
    """The streaming requests: the first holds every parameter and the first piece of each array,
    each later one only the next pieces (of equal element counts, at most piece_bytes for the
    widest array, whole elements); an empty array goes as one message."""
    length = len(next(iter(call.arrays.values())))
    step = max(1, piece_bytes // max(a.itemsize for a in call.arrays.values()))
    # Later messages carry only the arrays' data: an empty message of the same type, whose Array
    # fields _wire.serialize adds; the server takes each dtype from the first message.
    later = type(call.message)()
    for start in range(0, max(length, 1), step):
        piece = {name: a[start:start + step] for name, a in call.arrays.items()}
        yield _wire.serialize(call.message if start == 0 else later, piece)


def join(call: _calls.Call, buffers: Iterable[bytes]) -> object:
    """What the unary call returns, from the streaming RPC's answers: each array field the
    concatenation of the answers' (read-only, like a unary answer's), each count the last answer's."""
    answers = [_wire.parse(buffer, call.response) for buffer in buffers]
    if not answers:
        raise ValueError(f"the server's {call.stream} ended without an answer")
    joined = SimpleNamespace(**vars(answers[-1]))
    for name, last in vars(answers[-1]).items():
        if isinstance(last, np.ndarray) or last is None:
            parts = [getattr(answer, name) for answer in answers if getattr(answer, name) is not None]
            if parts:
                whole = np.concatenate(parts)
                whole.flags.writeable = False
                setattr(joined, name, whole)
    return call.parse(joined)
