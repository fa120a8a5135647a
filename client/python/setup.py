"""Builds the primserve package (metadata in pyproject.toml).

The protobuf and gRPC modules under primserve/v1/ are not in git: the build
generates them from the repository's proto/ directory (two levels up, or the
copy an sdist carries beside this file, or $PRIMSERVE_PROTO), so the client
always speaks the API the server was built from. Nothing is written into the
source tree: it installs from a read-only checkout. It uses `protoc` and
`grpc_python_plugin` (Debian: protobuf-compiler, protobuf-compiler-grpc), or
the `grpc_tools` package where those are not installed; $PROTOC and
$GRPC_PYTHON_PLUGIN override the lookup.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = pathlib.Path(__file__).resolve().parent


def proto_root() -> pathlib.Path:
    """The API's proto/ directory: $PRIMSERVE_PROTO, else the one beside this
    package (an sdist ships it there), else the checkout's (two levels up)."""
    for candidate in (os.environ.get("PRIMSERVE_PROTO"), HERE / "proto", HERE.parent.parent / "proto"):
        if candidate and (pathlib.Path(candidate) / "primserve/v1/primitives.proto").is_file():
            return pathlib.Path(candidate)
    sys.exit(f"primserve: the API's proto/ directory is not beside {HERE} nor two levels up; "
             f"set PRIMSERVE_PROTO to a primserve checkout's proto/")

# (proto file under proto_root(), whether it needs a gRPC stub module). The
# health messages get no stub: grpc_python_plugin's stub would import them as
# `grpc.health.v1`, inside grpcio's own package; the client calls Check by name.
PROTOS = [
    ("primserve/v1/primitives.proto", True),
    ("grpc/health/v1/health.proto", False),
]


def protoc_command() -> list:
    """The protoc invocation, with the gRPC Python plugin available to it."""
    protoc = os.environ.get("PROTOC") or shutil.which("protoc")
    plugin = os.environ.get("GRPC_PYTHON_PLUGIN") or shutil.which("grpc_python_plugin")
    if protoc and plugin:
        return [protoc, f"--plugin=protoc-gen-grpc_python={plugin}"]
    try:
        import grpc_tools  # noqa: F401  (pip's grpcio-tools bundles protoc and the plugin)
    except ImportError:
        sys.exit(
            "primserve: generating the gRPC modules needs protoc and grpc_python_plugin "
            "(Debian: apt-get install protobuf-compiler protobuf-compiler-grpc) "
            "or the grpcio-tools package"
        )
    return [sys.executable, "-m", "grpc_tools.protoc"]


def generate_modules(destination: pathlib.Path) -> None:
    """Writes primitives_pb2.py, primitives_pb2_grpc.py and health_pb2.py."""
    root = proto_root()
    destination.mkdir(parents=True, exist_ok=True)
    command = protoc_command()
    with tempfile.TemporaryDirectory() as out:
        for proto, with_stub in PROTOS:
            args = command + [f"-I{root}", f"--python_out={out}"]
            if with_stub:
                args.append(f"--grpc_python_out={out}")
            subprocess.run(args + [proto], check=True)
            # primserve/v1/x.proto -> primserve/v1/x_pb2.py: the stub imports it
            # as `primserve.v1.x_pb2`, which is this package's v1 subpackage.
            stem = pathlib.Path(out) / pathlib.Path(proto).with_suffix("")
            for suffix in ("_pb2.py", "_pb2_grpc.py") if with_stub else ("_pb2.py",):
                shutil.copy(f"{stem}{suffix}", destination / f"{stem.name}{suffix}")


class BuildPyWithGeneratedModules(build_py):
    """build_py, then the generated modules into the build's primserve/v1/."""

    def run(self) -> None:
        super().run()
        generate_modules(pathlib.Path(self.build_lib) / "primserve" / "v1")


class SdistWithProtos(sdist):
    """sdist, carrying the API's proto/ beside setup.py (where proto_root finds it)."""

    def make_release_tree(self, base_dir, files) -> None:
        super().make_release_tree(base_dir, files)
        shutil.copytree(proto_root(), pathlib.Path(base_dir) / "proto")


# Build output goes to a temporary directory, not into the source tree, so
# that a read-only checkout or a copied folder installs (pip builds in place).
_SCRATCH = tempfile.mkdtemp(prefix="primserve-build-")

setup(
    cmdclass={"build_py": BuildPyWithGeneratedModules, "sdist": SdistWithProtos},
    options={"build": {"build_base": _SCRATCH}, "egg_info": {"egg_base": _SCRATCH}},
)
