"""Ctrl-C during a streamed call, put() or get() ends the call at once.

A child process loops on one kind of long call; SIGINT goes to it once it
has started calling, and it must exit within a few seconds with its
KeyboardInterrupt (once, a streamed scan hung 11 minutes here: the pieces
kept going out from gRPC's thread). The server then answers the next call.
"""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import primserve

CALLS = {
    "streamed scan": "client.scan(a)",
    "streamed reduce": "client.reduce(a)",  # a stream answered once
    "streamed select": "client.select(a, ('gt', 5), output='count')",
    "put": "client.put(a, stripes=3).free()",
    "get": "client.get(x, stripes=3)",
}

CHILD = """
import sys
import numpy as np
import primserve

client = primserve.Client(sys.argv[1], stream_bytes=1000, piece_bytes=1 << 16)
a = np.arange(1 << 24, dtype=np.int64)  # 128 MiB in 64 KiB pieces: seconds of streaming
x = client.put(a[:1 << 22]) if "x" in sys.argv[2] else None
print("calling", flush=True)
while True:
    {call}
"""


@pytest.mark.parametrize("kind", list(CALLS))
def test_ctrl_c_ends_the_call_promptly(request, tmp_path, address, kind):
    for delay in (0.05, 0.3, 0.6):  # early in a call, and later
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD.replace("{call}", CALLS[kind]), address, CALLS[kind]],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
            env=dict(os.environ, PYTHONPATH=str(request.config.primserve_site)))
        try:
            assert child.stdout.readline() == "calling\n", child.stderr.read()
            time.sleep(delay)
            child.send_signal(signal.SIGINT)
            sent = time.monotonic()
            child.wait(timeout=10)
            took = time.monotonic() - sent
        finally:
            child.kill()
            child.wait()
        stderr = child.stderr.read()
        assert child.returncode != 0 and "KeyboardInterrupt" in stderr, stderr
        assert took < 5, f"{kind}: exited {took:.1f} s after SIGINT"
    with primserve.Client(address, timeout=10) as client:
        assert client.scan(np.arange(4, dtype=np.int32)).tolist() == [0, 1, 3, 6]
