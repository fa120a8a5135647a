"""CUDA shared memory from Python: what CI checks without a GPU (the CPU
server's refusal of RegisterCuda, the argument checks, CUDA arrays that are
not in a region refused before anything is sent), and with CuPy and a GPU the
CuPy regions themselves (skipped where CuPy is not installed; the full check
against a CUDA server is tests/gpu_cuda_ipc.py on the GPU machine)."""

import asyncio

import grpc
import numpy as np
import pytest

import primserve
import primserve.aio


class CudaLike:
    """An object with a CUDA array interface (as CuPy's, Numba's, PyTorch's
    arrays have) whose memory is in no region of the client."""

    def __init__(self, typestr="<i4", shape=(16,), strides=None, pointer=0x7F0000000000):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (pointer, False),
                                         "strides": strides, "version": 3}


@pytest.fixture
def shm_client(shm_address):
    with primserve.Client(shm_address, timeout=60) as c:
        yield c


def test_import_needs_no_cupy():
    import sys
    assert "cupy" not in sys.modules or sys.modules["cupy"] is not None
    assert hasattr(primserve.Client, "cuda_shared_memory")
    assert hasattr(primserve.aio.Client, "cuda_shared_memory")


def test_cpu_server_refuses_register_cuda(shm_client):
    with pytest.raises(primserve.ServerError) as error:
        shm_client.register_cuda("gpu-region", bytes(64), 4096, device=0)
    assert error.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert error.value.details
    # The refusal leaves the server answering, and no region named so.
    assert shm_client.scan(np.arange(5, dtype=np.int32)).tolist() == [0, 1, 3, 6, 10]
    with pytest.raises(primserve.ServerError) as error:
        shm_client.unregister("gpu-region")
    assert error.value.code == grpc.StatusCode.NOT_FOUND


def test_server_without_shared_memory_answers_unimplemented(client):
    with pytest.raises(primserve.ServerError) as error:
        client.register_cuda("gpu-region", bytes(64), 4096)
    assert error.value.code == grpc.StatusCode.UNIMPLEMENTED


def test_aio_cpu_server_refuses_register_cuda(shm_address):
    async def main():
        async with primserve.aio.Client(shm_address, timeout=60) as c:
            with pytest.raises(primserve.ServerError) as error:
                await c.register_cuda("gpu-region-aio", bytes(64), 4096)
            assert error.value.code == grpc.StatusCode.FAILED_PRECONDITION
            with pytest.raises(ValueError, match="63 bytes"):
                await c.register_cuda("x", bytes(63), 4096)
            with pytest.raises(TypeError, match="not in a region|not a view into a CUDA region"):
                await c.scan(CudaLike())
    asyncio.run(main())


@pytest.mark.parametrize("args, error, match", [
    (("x", bytes(63), 4096), ValueError, "63 bytes"),
    (("x", bytes(65), 4096), ValueError, "65 bytes"),
    (("x", "0" * 64, 4096), TypeError, "64 bytes of a cudaIpcMemHandle_t"),
    (("", bytes(64), 4096), ValueError, "non-empty"),
    (("x", bytes(64), 0), ValueError, "byte_size"),
    (("x", bytes(64), -1), ValueError, "byte_size"),
    (("x", bytes(64), 4096.0), ValueError, "byte_size"),
    (("x", bytes(64), 4096, -1), ValueError, "device"),
    (("x", bytes(64), 4096, True), ValueError, "device"),
])
def test_register_cuda_arguments_checked_before_sending(client, args, error, match):
    # `client` serves no --shared_memory: a sent request would be UNIMPLEMENTED.
    with pytest.raises(error, match=match):
        client.register_cuda(*args)


@pytest.mark.parametrize("what, error, match", [
    (0, ValueError, "size must be an integer >= 1"),
    (-4, ValueError, "size must be an integer >= 1"),
    (True, TypeError, "size in bytes or a CuPy array"),
    (np.zeros(4, dtype=np.int32), TypeError, "not a numpy array"),
    ("4096", TypeError, "size in bytes or a CuPy array"),
])
def test_cuda_shared_memory_arguments(client, what, error, match):
    with pytest.raises(error, match=match):
        client.cuda_shared_memory(what)


def test_cuda_shared_memory_without_cupy_says_so(client):
    try:
        import cupy  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="needs CuPy"):
            client.cuda_shared_memory(4096)
    else:
        pytest.skip("CuPy is installed")


def test_cuda_array_not_in_a_region_is_a_type_error(shm_client):
    for call in (lambda: shm_client.scan(CudaLike()),
                 lambda: shm_client.reduce(CudaLike(typestr="<f8")),
                 lambda: shm_client.reduce_by_key(CudaLike(), np.arange(16, dtype=np.int32)),
                 lambda: shm_client.scan(np.arange(16, dtype=np.int32), out=CudaLike())):
        with pytest.raises(TypeError, match="not a view into a CUDA region"):
            call()
    with shm_client.multiplex() as stream:
        with pytest.raises(TypeError, match="CUDA array"):
            stream.scan(CudaLike())


@pytest.mark.parametrize("like, error, match", [
    (CudaLike(typestr="<f2"), TypeError, "dtype float16"),
    (CudaLike(typestr="|b1"), TypeError, "dtype bool"),
    (CudaLike(shape=(4, 4)), ValueError, "must be 1-D"),
    (CudaLike(strides=(8,)), ValueError, "not contiguous"),
])
def test_cuda_array_checks_match_numpys(shm_client, like, error, match):
    with pytest.raises(error, match=match):
        shm_client.scan(like)


def test_cuda_array_lengths_checked(shm_client):
    with pytest.raises(ValueError, match="16 elements but values has 5"):
        shm_client.reduce_by_key(CudaLike(), np.arange(5, dtype=np.int32))


# With CuPy (a GPU host): the regions themselves, against whatever server the
# fixtures start (the CPU one refuses registration, checked above); the full
# check against a CUDA server is tests/gpu_cuda_ipc.py.
def test_cupy_region_refused_by_cpu_server_frees_nothing_twice(shm_client):
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no driver or device
        pytest.skip("no CUDA device")
    with pytest.raises(primserve.ServerError) as error:
        shm_client.cuda_shared_memory(1 << 20)
    assert error.value.code == grpc.StatusCode.FAILED_PRECONDITION
    x = cupy.arange(1000, dtype=cupy.int32)
    with pytest.raises(primserve.ServerError):
        shm_client.cuda_shared_memory(x)
    assert int(x.sum()) == 499500  # the wrapped array is the caller's, untouched
