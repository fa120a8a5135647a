"""primserve.bench runs against a CPU primserve and prints its three rows; progress only on a terminal."""

import os
import pty
import subprocess
import sys

import pytest


def test_bench_prints_unary_streamed_and_numpy_rows(request, address, tmp_path):
    environment = dict(os.environ, PYTHONPATH=str(request.config.primserve_site))
    result = subprocess.run([sys.executable, "-m", "primserve.bench", f"--address={address}", "--n=200000",
                             "--repeats=3", "--piece_bytes=65536"],
                            env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no progress in a pipe
    lines = result.stdout.splitlines()
    assert lines[0] == "int32 sum scan, n=200000, median of 3"
    rows = {line[:24].strip(): [float(x) for x in line[24:].split()] for line in lines[2:]}
    assert set(rows) == {"Client.scan unary", "Client.scan streamed", "numpy.cumsum"}
    for milliseconds, input_gbs, payload_gbs in rows.values():
        assert milliseconds > 0 and input_gbs > 0
        assert payload_gbs == pytest.approx(2 * input_gbs, rel=1e-2, abs=2e-3)


def test_bench_shows_progress_on_a_terminal(request, address, tmp_path):
    environment = dict(os.environ, PYTHONPATH=str(request.config.primserve_site))
    leader, follower = pty.openpty()
    with open(follower, "wb", closefd=True) as terminal:
        result = subprocess.run([sys.executable, "-m", "primserve.bench", f"--address={address}", "--n=1000",
                                 "--repeats=2"], env=environment, cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=terminal, timeout=120)
    shown = b""
    while True:  # the child has exited: read what it left on the terminal
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: nothing more
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert result.returncode == 0
    assert b"Client.scan streamed: call 2 of 2" in shown and shown.endswith(b"\r\033[K")
    assert result.stdout.decode().startswith("int32 sum scan, n=1000")
