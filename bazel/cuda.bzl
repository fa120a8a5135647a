"""CUDA sources -> objects through nvcc (CUDA 13 at /usr/local/cuda).

By default builds machine code for sm_80 and sm_90 plus compute_90 PTX, so the
objects run on A100 and H100/H200 and JIT on newer chips; test-only libraries
may ask for fewer architectures (`gencode`) to build faster, and
`--define=cuda_gencode=hopper` builds every library for sm_90 only (the packed
GPU bundle, //bazel:cuda_hopper_only). Host-facing
headers stay free of CUDA, so code that only calls the kernels builds with
plain g++.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

NVCC = "/usr/local/cuda/bin/nvcc"

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-Xcompiler=-fPIC",
    "-Xcompiler=-Wall",
    "--expt-relaxed-constexpr",
    # Device code compressed for size: about 5x smaller objects and binaries
    # (the packed GPU bundle must travel), decompressed once at module load.
    "--compress-mode=size",
    "-I.",
    "-I$(GENDIR)",
]

# Machine code for A100 (sm_80) and Hopper (sm_90), PTX for newer chips.
ALL_GENCODE = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

# Hopper only: the GPU machines the tests and benchmarks run on.
HOPPER_GENCODE = ["-gencode=arch=compute_90,code=sm_90"]

def cuda_library(name, srcs, hdrs = [], cuda_hdrs = [], deps = [], copts = [], gencode = ALL_GENCODE, visibility = None, **kwargs):
    """A cc_library of the objects nvcc makes from `srcs` (.cu files).

    Args:
      name: the cc_library's name.
      srcs: .cu files, compiled one object each.
      hdrs: host-facing headers (no CUDA in them) that users include.
      cuda_hdrs: device headers (.cuh) the sources include.
      deps: cc_library deps, for users of the library (headers of deps that the
        .cu files include must be listed in cuda_hdrs too).
      copts: extra nvcc flags.
      gencode: nvcc -gencode flags (ALL_GENCODE or HOPPER_GENCODE).
      visibility: as usual.
      **kwargs: passed to cc_library (testonly, tags...).
    """
    objects = []
    for src in srcs:
        obj = "_objs/%s/%s.o" % (name, src[:-len(".cu")])
        compile = ["-c", "$(location %s)" % src, "-o", "$@"]
        native.genrule(
            name = "%s_%s_nvcc" % (name, src.replace("/", "_").replace(".", "_")),
            srcs = [src] + hdrs + cuda_hdrs,
            outs = [obj],
            cmd = select({
                "//bazel:cuda_hopper_only": " ".join([NVCC] + NVCC_FLAGS + HOPPER_GENCODE + copts + compile),
                "//conditions:default": " ".join([NVCC] + NVCC_FLAGS + gencode + copts + compile),
            }),
            testonly = kwargs.get("testonly", False),
        )
        objects.append(obj)
    cc_library(
        name = name,
        srcs = objects,
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart_static"],
        visibility = visibility,
        **kwargs
    )
