"""Installs the package and starts primserve servers for the tests (the CPU
backend unless --primserve_backend says otherwise).

The tests import primserve as `pip install` puts it, not from the source
tree: before collection, the package is built and installed offline into a
temporary --target directory (from a copy of client/python and proto/, so the
checkout gets no build/ directory), which goes first on sys.path.

    python3 -m pytest client/python/tests --primserve=bazel-bin/server/primserve
"""

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
_install_dir = None


def pytest_addoption(parser):
    parser.addoption(
        "--primserve",
        default=os.environ.get("PRIMSERVE", str(REPO / "bazel-bin" / "server" / "primserve")),
        help="the primserve binary to test against (default: $PRIMSERVE, else bazel-bin/server/primserve)",
    )
    parser.addoption(
        "--primserve_backend",
        default=os.environ.get("PRIMSERVE_BACKEND", "cpu"),
        help="the servers' --backend (default: $PRIMSERVE_BACKEND, else cpu; cuda on a GPU machine)",
    )


def pytest_configure(config):
    global _install_dir
    _install_dir = pathlib.Path(tempfile.mkdtemp(prefix="primserve-pytest-"))
    source = _install_dir / "src"
    shutil.copytree(REPO / "client" / "python", source / "client" / "python",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "*_pb2*.py"))
    shutil.copytree(REPO / "proto", source / "proto")
    site = _install_dir / "site"
    # Offline: no build isolation (it would fetch setuptools) and no
    # dependencies (--target would fetch them even where Debian has them).
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-build-isolation", "--no-deps",
         "--disable-pip-version-check", "--root-user-action=ignore", "--target", str(site), str(source / "client" / "python")],
        check=True,
    )
    sys.path.insert(0, str(site))
    config.primserve_site = site


def pytest_unconfigure(config):
    if _install_dir is not None:
        shutil.rmtree(_install_dir, ignore_errors=True)


class Server:
    """A primserve child process on a free loopback port, its log in a file."""

    def __init__(self, binary: str, log_path: pathlib.Path, *flags: str, backend: str = "cpu"):
        if not os.access(binary, os.X_OK):
            pytest.exit(f"no primserve binary at {binary}: build //server:primserve or pass --primserve", 2)
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [binary, f"--backend={backend}", "--host=127.0.0.1", "--port=0", "--metrics_port=-1",
             "--shutdown_grace_seconds=2", *flags],
            stdout=self._log, stderr=subprocess.STDOUT,
        )
        self.port = self._wait_for_port()

    def _wait_for_port(self) -> int:
        marker = b"primserve listening on 127.0.0.1:"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()
            at = text.find(marker)
            if at >= 0:
                digits = text[at + len(marker):].split(b" ", 1)[0]
                return int(digits)
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        pytest.fail(f"primserve did not start:\n{self.log_path.read_text(errors='replace')}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


@pytest.fixture(scope="session")
def start_server(request, tmp_path_factory):
    """Starts a primserve (--primserve_backend) with extra flags; every one is stopped at the end of the session."""
    servers = []

    def start(*flags: str) -> Server:
        log = tmp_path_factory.mktemp("primserve") / "server.log"
        servers.append(Server(request.config.getoption("--primserve"), log, *flags,
                              backend=request.config.getoption("--primserve_backend")))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def address(start_server):
    """host:port of a plaintext primserve shared by the session."""
    return f"127.0.0.1:{start_server().port}"


@pytest.fixture(scope="session")
def client(address):
    import primserve

    with primserve.Client(address, timeout=60) as c:
        yield c


@pytest.fixture(scope="session")
def shm_address(start_server):
    """host:port of a plaintext primserve with --shared_memory."""
    return f"127.0.0.1:{start_server('--shared_memory').port}"
