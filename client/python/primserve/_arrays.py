"""Checks on the numpy arrays a call takes, and their dtypes in the API's Array message."""

from typing import Any, Dict

import numpy as np

from primserve import _buffers, _cuda, _steps
from primserve.v1 import primitives_pb2 as pb

# The six dtypes the server takes, little-endian as the wire format is.
DTYPES: Dict[np.dtype, int] = {
    np.dtype("<i4"): pb.INT32,
    np.dtype("<i8"): pb.INT64,
    np.dtype("<u4"): pb.UINT32,
    np.dtype("<u8"): pb.UINT64,
    np.dtype("<f4"): pb.FLOAT32,
    np.dtype("<f8"): pb.FLOAT64,
}
NUMPY_DTYPES: Dict[int, np.dtype] = {code: dtype for dtype, code in DTYPES.items()}

SUPPORTED = "int32, int64, uint32, uint64, float32 or float64"


def check_array(a: Any, name: str) -> np.ndarray:
    """`a` (or numpy.asarray(a)) if it is a 1-D C-contiguous array of a supported dtype.

    Raises TypeError for a masked array, for what numpy.asarray does not take
    and for unsupported dtypes, and ValueError for other shapes or a
    non-contiguous layout, so nothing is sent.
    A CUDA array (CuPy's) passes the same checks and comes back as its
    _cuda.DeviceArray stand-in, to be sent as a ref into a CUDA region.
    """
    if _cuda.is_device_array(a):
        return _cuda.stand_in(a, name, DTYPES)
    if isinstance(a, (_buffers.Buffer, _steps.StepOutput)):
        return a.stand_in()
    if isinstance(a, np.ma.MaskedArray):
        raise TypeError(
            f"{name} is a masked array, and primserve would ignore its mask; pass {name}.compressed() "
            f"for the unmasked elements or {name}.filled(value) to fill the masked ones"
        )
    if not isinstance(a, np.ndarray):
        # Whatever numpy takes as an array: lists, memoryviews, and objects
        # with __array__ or the buffer protocol (pandas and pyarrow columns).
        try:
            a = np.asarray(a)
        except Exception as error:
            raise TypeError(f"{name} ({type(a).__name__}) is not something numpy.asarray takes: {error}") from error
    if a.dtype not in DTYPES:
        hint = ""
        if a.dtype.newbyteorder("<") in DTYPES:
            hint = f"; it is big-endian: use {name}.astype('{a.dtype.newbyteorder('<').str}')"
        raise TypeError(f"{name} has dtype {a.dtype}; primserve takes {SUPPORTED}{hint}")
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, not of shape {a.shape}; pass {name}.ravel() for the flat elements")
    if not a.flags.c_contiguous:
        raise ValueError(
            f"{name} is not contiguous (a strided view); pass numpy.ascontiguousarray({name}), "
            f"which copies it"
        )
    return a


def check_integer_array(a: Any, name: str) -> np.ndarray:
    """check_array, and the dtype must be one of the four integer ones."""
    a = check_array(a, name)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} has dtype {a.dtype}; it must be int32, int64, uint32 or uint64")
    return a


def header(a: np.ndarray) -> pb.Array:
    """The Array message for a checked array, without its data (_wire.serialize adds it)."""
    return pb.Array(dtype=DTYPES[a.dtype])


def check_same_length(a: np.ndarray, a_name: str, b: np.ndarray, b_name: str) -> None:
    # A pipeline step's output has its length only on the server (which checks it).
    if isinstance(a, _steps.StepArray) or isinstance(b, _steps.StepArray):
        return
    if a.shape != b.shape:
        raise ValueError(f"{a_name} has {a.size} elements but {b_name} has {b.size}")


def to_offsets(segments: Any) -> np.ndarray:
    """Segment start positions as uint64, from any 1-D sequence of non-negative integers."""
    offsets = np.asarray(segments)
    if offsets.ndim != 1:
        raise ValueError(f"segments must be 1-D, not of shape {offsets.shape}")
    if offsets.size == 0:
        return offsets.astype(np.uint64)
    if offsets.dtype.kind not in "iu":
        raise TypeError(f"segments must be integers, not {offsets.dtype}")
    if offsets.dtype.kind == "i" and offsets.min() < 0:
        raise ValueError(f"segments must be non-negative; got {offsets.min()}")
    return offsets.astype(np.uint64)
