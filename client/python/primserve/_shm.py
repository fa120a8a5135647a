"""Shared memory: system regions a client registers, and requests that name them.

An input that is a view into a registered region (a numpy view into a system
region, or a CuPy view into a CUDA region, see _cuda) goes as an Array.shm
ref (its bytes are not sent); `out=`, a view into one, becomes the request's
output_location, and the answer comes back as a view of what the server
wrote there (a CuPy view for a CUDA region).
"""

import numbers
import weakref
from multiprocessing import shared_memory
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from primserve import _arrays, _calls, _cuda
from primserve.v1 import primitives_pb2 as pb


def _drop(shm: shared_memory.SharedMemory, name: str, forget: Optional[Callable[[str], None]]) -> None:
    """A region never closed, at garbage collection or interpreter exit:
    unregistered (best effort: the server drops the regions of callers gone
    idle itself) and its object unlinked, so neither outlives the client."""
    if forget is not None:
        try:
            forget(name)
        except Exception:  # the server or its channel may be gone already
            pass
    try:
        shm.unlink()
    except FileNotFoundError:
        pass


class Memory:
    """A new POSIX shared-memory object and numpy views into it; Region and
    aio.Region add its registration with the server.

    Its life is tied to this object's: if it is never closed, it is unlinked
    (and, with `forget`, unregistered by name) when the object is collected
    or the interpreter exits.
    """

    def __init__(self, name: Optional[str], size: int, forget: Optional[Callable[[str], None]] = None):
        self.shm = shared_memory.SharedMemory(create=True, size=size)
        self.name = name or self.shm.name
        self.size = size
        self.closed = False
        self._finalizer = weakref.finalize(self, _drop, self.shm, self.name, forget)

    @property
    def key(self) -> str:
        """The shm object's name as shm_open takes it: its file is /dev/shm/<key without '/'>."""
        return "/" + self.shm.name

    def array(self, dtype: Any, count: int, offset: int = 0) -> np.ndarray:
        """A writable view of `count` elements of `dtype` from byte `offset` of the region."""
        dtype = np.dtype(dtype)
        if dtype not in _arrays.DTYPES:
            raise TypeError(f"a region holds arrays of {', '.join(d.name for d in _arrays.DTYPES)}; got {dtype}")
        if offset % dtype.itemsize or offset < 0 or offset + count * dtype.itemsize > self.size:
            raise ValueError(f"{count} elements of {dtype} from byte {offset} do not fit "
                             f"the region's {self.size} bytes at element boundaries")
        return np.frombuffer(self.shm.buf, dtype=dtype, count=count, offset=offset)

    def ref(self, a: np.ndarray) -> Optional[pb.SharedMemoryRef]:
        """The region's ref to the bytes of a (1-D, contiguous), or None if they are not all in it."""
        if self.closed or isinstance(a, _cuda.DeviceArray):
            return None
        start = a.ctypes.data - np.frombuffer(self.shm.buf, dtype=np.uint8, count=0).ctypes.data
        if start < 0 or start + a.nbytes > self.size:
            return None
        return pb.SharedMemoryRef(region=self.name, offset=start, byte_size=a.nbytes)

    def release(self) -> None:
        """Unlinks the object and unmaps it."""
        self.closed = True
        self._finalizer.detach()
        self.shm.unlink()
        try:
            self.shm.close()
        except BufferError:
            # Views outlive the region: the mapping goes with the last of them.
            self.shm._mmap = None
            self.shm.close()


class Region(Memory):
    """A POSIX shared-memory object registered with the server, from Client.shared_memory().

    ``array(dtype, count, offset)`` gives numpy views into it; pass them as
    inputs or as ``out=`` to the client's methods. ``close()`` (or leaving the
    ``with`` block) unregisters the region and unlinks the object; views
    into it stay readable (the mapping is kept until the last one goes) but
    are ordinary memory to the client from then on.
    """

    def __init__(self, name: Optional[str], size: int, unregister: Callable[["Region"], None],
                 forget: Optional[Callable[[str], None]] = None):
        super().__init__(name, size, forget)
        self._unregister = unregister

    def close(self) -> None:
        """Unregisters the region, unlinks the object and unmaps it."""
        if self.closed:
            return
        try:
            self._unregister(self)
        finally:
            self.release()

    def __enter__(self) -> "Region":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def check_size(size: int) -> int:
    if isinstance(size, (bool, np.bool_)) or not isinstance(size, numbers.Integral) or size < 1:
        raise ValueError(f"size must be an integer >= 1; got {size!r}")
    return int(size)


Regions = List[Any]  # Memory and _cuda.CudaRegion


def _ref(regions: Regions, a: np.ndarray) -> Optional[pb.SharedMemoryRef]:
    return next((ref for ref in (region.ref(a) for region in regions) if ref is not None), None)


def _not_in_a_region(name: str) -> TypeError:
    return TypeError(f"{name} is a CUDA array that is not a view into a CUDA region of this client: "
                     f"primserve reads device memory only through cuda_shared_memory() "
                     f"(region.array(...), or cuda_shared_memory(array) to wrap it)")


def place(call: _calls.Call, regions: Regions, out: Optional[Any]) -> Tuple[_calls.Call, Dict[str, Any]]:
    """The call with its inputs in the regions as refs and `out` as its
    output_location, and the response's placed fields for _wire.parse.

    A CUDA array (CuPy) must lie in a CUDA region (TypeError otherwise); the
    devices of the CUDA regions a call uses are synchronized first, so the
    server reads what the caller's kernels wrote."""
    inputs = {name: _ref(regions, a) for name, a in call.arrays.items()}
    for name, a in call.arrays.items():
        if inputs[name] is None and isinstance(a, _cuda.DeviceArray):
            raise _not_in_a_region(name)
    placements = _calls.outputs(call, out)
    if not placements and not any(inputs.values()):
        return call, {}
    message = type(call.message)()
    message.CopyFrom(call.message)
    for name, ref in inputs.items():
        if ref is not None:
            getattr(message, name).shm.CopyFrom(ref)
    placed = {}
    used = {ref.region for ref in inputs.values() if ref is not None}
    for location_field, response_field, array in placements:
        array = _arrays.check_array(array, "out")
        ref = _ref(regions, array)
        if ref is None:
            if isinstance(array, _cuda.DeviceArray):
                raise _not_in_a_region("out")
            raise ValueError("out must be a view into a region from this client's shared_memory()")
        getattr(message.output_location, location_field).CopyFrom(ref)
        placed[response_field] = array.source if isinstance(array, _cuda.DeviceArray) else array
        used.add(ref.region)
    for region in regions:
        if isinstance(region, _cuda.CudaRegion) and region.name in used:
            region.synchronize()
    arrays = {name: a for name, a in call.arrays.items() if inputs[name] is None}
    # The server reads and writes regions in unary calls only.
    return call._replace(message=message, arrays=arrays, streams=False), placed
