"""A GPU benchmark made of one .cu file: its nvcc objects and the binary."""

load("@rules_cc//cc:defs.bzl", "cc_binary")
load("//bazel:cuda.bzl", "HOPPER_GENCODE", "cuda_library")

# What every benchmark's .cu includes: the timing helpers, our kernels'
# headers and CUB's baseline calls.
_COMMON_HDRS = [
    "timing.h",
    "//core:primitives.h",
    "//kernels:device_headers",
    "//kernels:runs.h",
    "//kernels:select.h",
    "//kernels/testing:cub_baseline.h",
    "//kernels/testing:device_helpers.h",
]

_COMMON_DEPS = [
    "//kernels/testing:cub_baseline",
    "//kernels/testing:device_helpers",
]

def cuda_bench(name, src, cuda_hdrs = [], deps = []):
    """`name`: a binary, tagged gpu (tools/pack_gpu.sh packs it), built for Hopper from `src`.

    Args:
      name: the binary.
      src: its one .cu file.
      cuda_hdrs: headers it includes beyond the common ones.
      deps: libraries it links beyond CUB's baseline and the device helpers.
    """
    cuda_library(
        name = name + "_main",
        testonly = True,
        srcs = [src],
        cuda_hdrs = _COMMON_HDRS + cuda_hdrs,
        gencode = HOPPER_GENCODE,
        deps = _COMMON_DEPS + deps,
    )
    cc_binary(
        name = name,
        testonly = True,
        linkstatic = True,
        tags = ["gpu"],
        deps = [":" + name + "_main"],
    )
