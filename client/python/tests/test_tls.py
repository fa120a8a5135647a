"""TLS: a primserve with a throwaway certificate (openssl), reached with each form of `tls`."""

import asyncio
import shutil
import subprocess

import grpc
import numpy as np
import pytest

import primserve
import primserve.aio

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl (tools/setup.sh installs it)")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """A CA and a server certificate it signs for localhost."""
    directory = tmp_path_factory.mktemp("tls")

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    for name in ("ca", "server"):
        openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key")
    openssl("req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=primserve python test CA", "-days", "1",
            "-out", "ca.pem", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-new", "-key", "server.key", "-subj", "/CN=localhost", "-out", "server.csr")
    (directory / "server.ext").write_text("subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "1", "-extfile", "server.ext", "-out", "server.pem")
    return directory


@pytest.fixture(scope="module")
def tls_address(start_server, certificates):
    server = start_server(f"--tls_cert={certificates / 'server.pem'}", f"--tls_key={certificates / 'server.key'}")
    return f"localhost:{server.port}"


def test_each_form_of_tls(tls_address, certificates):
    ca = certificates / "ca.pem"
    a = np.array([3, 1, 4, 1, 5], dtype=np.int32)
    for tls in (ca.read_bytes(), str(ca), ca, grpc.ssl_channel_credentials(ca.read_bytes())):
        with primserve.Client(tls_address, tls=tls, timeout=30) as client:
            assert client.scan(a).tolist() == [3, 4, 8, 9, 14]

    async def main():
        async with primserve.aio.Client(tls_address, tls=ca, timeout=30) as client:
            return await client.reduce(a)

    assert asyncio.run(main()) == 14


def test_plaintext_and_untrusted_clients_fail(tls_address):
    a = np.arange(4, dtype=np.int32)
    with primserve.Client(tls_address, timeout=5) as plaintext:
        with pytest.raises(primserve.ServerError) as raised:
            plaintext.scan(a)
    assert raised.value.code.name == "UNAVAILABLE"
    # True trusts the system's roots, which did not sign this server's certificate.
    with primserve.Client(tls_address, tls=True, timeout=5) as system_roots:
        with pytest.raises(primserve.ServerError) as raised:
            system_roots.scan(a)
    assert raised.value.code.name == "UNAVAILABLE"


def test_bad_tls_argument():
    with pytest.raises(TypeError, match="tls must be"):
        primserve.Client("localhost:1", tls=42)
