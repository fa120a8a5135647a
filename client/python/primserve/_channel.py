"""What the blocking and asyncio clients share about their channel: TLS and options."""

import os
from typing import Optional, Union

import grpc

from primserve.v1 import health_pb2, primitives_pb2

# TLS settings a client takes: None or False for plaintext; True for TLS
# trusting the system's root certificates; bytes for the PEM of the CA that
# signed the server's certificate; a str or os.PathLike naming a PEM file of
# it; or any grpc.ChannelCredentials (grpc.ssl_channel_credentials(ca, key,
# chain) for mutual TLS).
Tls = Union[None, bool, bytes, str, "os.PathLike[str]", grpc.ChannelCredentials]

# Arrays can be far larger than gRPC's default 4 MB receive limit; the server
# has its own (--max_receive_message_bytes).
OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]

# The Primitives methods' paths, by name. The clients call them with bytes in
# and out: _wire serializes the requests and reads the responses.
_SERVICE = primitives_pb2.DESCRIPTOR.services_by_name["Primitives"]
RPC_PATHS = {method.name: f"/{_SERVICE.full_name}/{method.name}" for method in _SERVICE.methods}

HEALTH_CHECK = "/grpc.health.v1.Health/Check"
HEALTH_REQUEST = health_pb2.HealthCheckRequest
HEALTH_RESPONSE = health_pb2.HealthCheckResponse


def credentials(tls: Tls) -> Optional[grpc.ChannelCredentials]:
    """The channel credentials for a client's `tls` argument; None for plaintext."""
    if tls is None or tls is False:
        return None
    if tls is True:
        return grpc.ssl_channel_credentials()
    if isinstance(tls, grpc.ChannelCredentials):
        return tls
    if isinstance(tls, bytes):
        return grpc.ssl_channel_credentials(root_certificates=tls)
    if isinstance(tls, (str, os.PathLike)):
        with open(tls, "rb") as ca:
            return grpc.ssl_channel_credentials(root_certificates=ca.read())
    raise TypeError(
        f"tls must be None, a bool, the CA's PEM bytes, a path to it, or grpc.ChannelCredentials; "
        f"not {type(tls).__name__}"
    )


def health_status(response: health_pb2.HealthCheckResponse) -> str:
    """The status's name: "SERVING", "NOT_SERVING", ..."""
    return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
