"""CUDA shared memory: device memory a client registers (CUDA IPC), and CuPy views into it.

CuPy is imported only when a CUDA region is made: ``import primserve`` works
without it. An input that is a CuPy array (anything with
``__cuda_array_interface__``) stands in the call as a DeviceArray, a numpy
array of its dtype and length that carries the device array and whose bytes
are never read or sent; _shm.place turns it into an Array.shm ref when it is
a view into a registered CUDA region, and refuses it (TypeError) otherwise.
"""

import ctypes
import numbers
from typing import Any, Awaitable, Callable, Optional, Tuple, Union

import numpy as np

from primserve.v1 import primitives_pb2 as pb

# The bytes of a cudaIpcMemHandle_t.
HANDLE_BYTES = 64


class DeviceArray(np.ndarray):
    """A device array's stand-in among a call's arrays: dtype and length for the
    checks, ``source`` for its place. Its own (host) bytes are never used."""

    source: Any = None
    pointer: int = 0

    def __array_finalize__(self, obj: Any) -> None:
        self.source = getattr(obj, "source", None)
        self.pointer = getattr(obj, "pointer", 0)


def is_device_array(a: Any) -> bool:
    """Whether `a` is a CUDA array (CuPy's, or anything with __cuda_array_interface__)."""
    return not isinstance(a, np.ndarray) and hasattr(a, "__cuda_array_interface__")


def stand_in(a: Any, name: str, supported: Any) -> DeviceArray:
    """The DeviceArray for `a` (it has __cuda_array_interface__), after the same
    checks as a numpy array: one of the six dtypes (TypeError), 1-D and
    contiguous (ValueError)."""
    try:
        interface = a.__cuda_array_interface__
        shape = tuple(interface["shape"])
        dtype = np.dtype(interface["typestr"])
        pointer = int(interface["data"][0])
    except (AttributeError, KeyError, TypeError, IndexError) as error:
        raise TypeError(f"{name} has a malformed __cuda_array_interface__: {error}") from error
    if dtype not in supported:
        raise TypeError(f"{name} is a CUDA array of dtype {dtype}; primserve takes "
                        f"int32, int64, uint32, uint64, float32 or float64")
    if len(shape) != 1:
        raise ValueError(f"{name} must be 1-D, not of shape {shape}; pass {name}.ravel() for the flat elements")
    strides = interface.get("strides")
    if strides is not None and shape[0] > 1 and tuple(strides) != (dtype.itemsize,):
        raise ValueError(f"{name} is not contiguous (a strided CUDA view); pass cupy.ascontiguousarray({name}) "
                         f"into a region")
    # np.empty maps the length without touching it: no host memory is used.
    standin = np.empty(shape[0], dtype=dtype).view(DeviceArray)
    standin.source = a
    standin.pointer = pointer
    return standin


def _cupy() -> Any:
    try:
        import cupy  # noqa: PLC0415 - optional, imported only for CUDA regions
    except ImportError as error:
        raise ImportError("CUDA shared memory needs CuPy (pip install cupy-cuda12x or the wheel for your "
                          "CUDA version) and a GPU on the server's host") from error
    return cupy


def _allocation_of(pointer: int) -> Tuple[int, int]:
    """(base, size) of the cudaMalloc allocation that holds `pointer` (the
    driver's cuMemGetAddressRange): an IPC handle names a whole allocation,
    which the server opens at its base."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        raise RuntimeError(f"the CUDA driver library is not loadable: {error}") from error
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    result = libcuda.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(pointer))
    if result != 0:
        raise RuntimeError(f"cuMemGetAddressRange({pointer:#x}) failed with CUresult {result}: "
                           f"not memory of the current device's context")
    return base.value, size.value


def check_registration(name: str, raw_handle: Any, byte_size: Any, device: Any) -> pb.RegisterCudaRequest:
    """The RegisterCudaRequest, or ValueError/TypeError before anything is sent."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string; got {name!r}")
    if not isinstance(raw_handle, (bytes, bytearray, memoryview)):
        raise TypeError(f"raw_handle must be the {HANDLE_BYTES} bytes of a cudaIpcMemHandle_t, "
                        f"not {type(raw_handle).__name__}")
    raw_handle = bytes(raw_handle)
    if len(raw_handle) != HANDLE_BYTES:
        raise ValueError(f"raw_handle has {len(raw_handle)} bytes; a cudaIpcMemHandle_t has {HANDLE_BYTES}")
    if isinstance(byte_size, (bool, np.bool_)) or not isinstance(byte_size, numbers.Integral) or byte_size < 1:
        raise ValueError(f"byte_size must be an integer >= 1; got {byte_size!r}")
    if isinstance(device, (bool, np.bool_)) or not isinstance(device, numbers.Integral) or device < 0:
        raise ValueError(f"device must be a CUDA device ordinal >= 0; got {device!r}")
    return pb.RegisterCudaRequest(name=name, raw_handle=raw_handle, device_id=int(device), byte_size=int(byte_size))


class Export:
    """Device memory made ready to register: the allocation's base, the range
    the region covers in it, the IPC handle, and what keeps it alive."""

    def __init__(self, what: Union[int, Any], device: Optional[int]):
        cupy = _cupy()
        if isinstance(what, numbers.Integral) and not isinstance(what, (bool, np.bool_)):
            if what < 1:
                raise ValueError(f"size must be an integer >= 1; got {what!r}")
            with cupy.cuda.Device(0 if device is None else device):
                # A plain cudaMalloc (not CuPy's pool, which carves arrays out
                # of larger allocations): the region is the whole allocation.
                self.memory = cupy.cuda.Memory(int(what))
                self.device = self.memory.device_id
                self.base = self.pointer = self.memory.ptr
                self.size = self.allocation = int(what)
                self.keep = self.memory
                self.handle = cupy.cuda.runtime.ipcGetMemHandle(self.base)
            return
        if not isinstance(what, cupy.ndarray):
            raise TypeError(f"cuda_shared_memory takes a size in bytes or a CuPy array to wrap, "
                            f"not {type(what).__name__}")
        if not what.flags.c_contiguous:
            raise ValueError("the CuPy array to wrap must be C-contiguous")
        if what.nbytes < 1:
            raise ValueError("the CuPy array to wrap is empty")
        if device is not None and device != what.device.id:
            raise ValueError(f"the array is on device {what.device.id}, not device {device}")
        with what.device:
            self.memory = None
            self.device = what.device.id
            self.pointer = what.data.ptr
            self.size = what.nbytes
            self.base, self.allocation = _allocation_of(self.pointer)
            self.keep = what
            self.handle = cupy.cuda.runtime.ipcGetMemHandle(self.base)

    @property
    def byte_size(self) -> int:
        """What the server maps: the allocation from its base to the region's end."""
        return self.pointer - self.base + self.size

    def free(self) -> None:
        self.keep = None
        self.memory = None


class CudaRegion:
    """Device memory registered with the server (CUDA IPC), from Client.cuda_shared_memory().

    ``array(dtype, count, offset=0)`` gives CuPy views into it; pass them as
    inputs or as ``out=`` to the client's methods: the server's kernels read
    and write them in place. ``close()`` (or leaving the ``with`` block)
    unregisters the region and frees memory the region allocated itself (a
    wrapped CuPy array stays the caller's).

    Attributes:
        name: the region's name on the server.
        size: its bytes (offsets in array() count from its start).
        device: the CUDA device ordinal.
    """

    def __init__(self, name: str, export: Export):
        self.name = name
        self.size = export.size
        self.device = export.device
        self.closed = False
        self._export = export

    @property
    def pointer(self) -> int:
        """The device address of the region's first byte."""
        return self._export.pointer

    def array(self, dtype: Any, count: int, offset: int = 0) -> Any:
        """A CuPy view of `count` elements of `dtype` from byte `offset` of the region."""
        from primserve import _arrays  # noqa: PLC0415 - _arrays imports nothing of this module
        cupy = _cupy()
        if self.closed:
            raise ValueError(f"CUDA region '{self.name}' is closed")
        dtype = np.dtype(dtype)
        if dtype not in _arrays.DTYPES:
            raise TypeError(f"a region holds arrays of {', '.join(d.name for d in _arrays.DTYPES)}; got {dtype}")
        for what, value in (("count", count), ("offset", offset)):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 0:
                raise ValueError(f"{what} must be an integer >= 0; got {value!r}")
        if offset % dtype.itemsize or offset + count * dtype.itemsize > self.size:
            raise ValueError(f"{count} elements of {dtype} from byte {offset} do not fit "
                             f"the region's {self.size} bytes at element boundaries")
        memory = cupy.cuda.UnownedMemory(self.pointer, self.size, self._export.keep, self.device)
        return cupy.ndarray((count,), dtype=dtype, memptr=cupy.cuda.MemoryPointer(memory, offset))

    def ref(self, a: Any) -> Optional[pb.SharedMemoryRef]:
        """The ref to a DeviceArray's bytes if they all lie in the region, else None."""
        if self.closed or not isinstance(a, DeviceArray):
            return None
        start = a.pointer - self.pointer
        if start < 0 or start + a.nbytes > self.size:
            return None
        base_offset = self._export.pointer - self._export.base
        return pb.SharedMemoryRef(region=self.name, offset=base_offset + start, byte_size=a.nbytes)

    def synchronize(self) -> None:
        """Waits for the device's work (the caller's writes into the region)
        before the server reads it."""
        cupy = _cupy()
        cupy.cuda.Device(self.device).synchronize()

    def _release(self) -> None:
        self.closed = True
        self._export.free()


class Region(CudaRegion):
    """CudaRegion for the blocking client."""

    def __init__(self, name: str, export: Export, unregister: Callable[["Region"], None]):
        super().__init__(name, export)
        self._unregister = unregister

    def close(self) -> None:
        """Unregisters the region (the server closes its handle once requests
        using it are done), then frees memory the region allocated."""
        if self.closed:
            return
        try:
            self._unregister(self)
        finally:
            self._release()

    def __enter__(self) -> "Region":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class AioRegion(CudaRegion):
    """CudaRegion for the asyncio client: ``await close()`` or ``async with``."""

    def __init__(self, name: str, export: Export, unregister: Callable[["AioRegion"], Awaitable[None]]):
        super().__init__(name, export)
        self._unregister = unregister

    async def close(self) -> None:
        """CudaRegion.close, awaited."""
        if self.closed:
            return
        try:
            await self._unregister(self)
        finally:
            self._release()

    async def __aenter__(self) -> "AioRegion":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()


def default_name(export: Export) -> str:
    return f"cuda-{export.device}-{export.base:x}-{export.pointer - export.base:x}"


def check_what(what: Any) -> None:
    """Refusals that need no CuPy: a size that is not >= 1, a numpy array."""
    if isinstance(what, np.ndarray):
        raise TypeError("cuda_shared_memory wraps a CuPy array (device memory), not a numpy array; "
                        "for host memory use shared_memory()")
    if isinstance(what, (bool, np.bool_)):
        raise TypeError(f"cuda_shared_memory takes a size in bytes or a CuPy array; got {what!r}")
    if isinstance(what, numbers.Integral) and what < 1:
        raise ValueError(f"size must be an integer >= 1; got {what!r}")
    if not isinstance(what, numbers.Integral) and not hasattr(what, "__cuda_array_interface__"):
        raise TypeError(f"cuda_shared_memory takes a size in bytes or a CuPy array, not {type(what).__name__}")
