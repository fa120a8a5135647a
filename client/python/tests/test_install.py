"""The package installs from a checkout it cannot write to and from its sdist: the build writes
nothing into the source tree and finds the API's protos beside setup.py or two levels up."""

import pathlib
import shutil
import subprocess
import sys
import tarfile

REPO = pathlib.Path(__file__).resolve().parents[3]


def tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def pip_install(source, target):
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--no-index", "--target", str(target), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def imports_from(target):
    done = subprocess.run([sys.executable, "-c", "import primserve.v1.primitives_pb2 as pb; print(pb.ScanRequest)"],
                          capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(target)}, cwd=target)
    assert done.returncode == 0 and "ScanRequest" in done.stdout, done.stderr


def test_installs_without_writing_into_the_checkout(tmp_path):
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / "client" / "python", checkout / "client" / "python",
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "v1"))
    shutil.copytree(REPO / "proto", checkout / "proto")
    (checkout / "client" / "python" / "primserve" / "v1").mkdir()
    shutil.copy(REPO / "client" / "python" / "primserve" / "v1" / "__init__.py",
                checkout / "client" / "python" / "primserve" / "v1")
    before = tree(checkout)
    pip_install(checkout / "client" / "python", tmp_path / "site")
    assert tree(checkout) == before
    imports_from(tmp_path / "site")


def test_the_sdist_carries_the_protos_and_installs_alone(tmp_path):
    build = tmp_path / "build"
    shutil.copytree(REPO / "client" / "python", build / "client" / "python",
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    shutil.copytree(REPO / "proto", build / "proto")
    done = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "--dist-dir", str(tmp_path / "dist")],
                          cwd=build / "client" / "python", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (sdist,) = (tmp_path / "dist").glob("primserve-*.tar.gz")
    with tarfile.open(sdist) as archive:
        assert any(name.endswith("/proto/primserve/v1/primitives.proto") for name in archive.getnames())
    shutil.rmtree(build)  # nothing of the checkout is left to fall back on
    pip_install(sdist, tmp_path / "site")
    imports_from(tmp_path / "site")
