"""What the blocking and asyncio clients share about their channel: TLS and options."""

import json
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

# The same defaults as the C++ client's ConnectOptions (client/client.h), so an
# address may name several replicas ("ipv4:10.0.0.1:50051,10.0.0.2:50051" or
# "dns:///primserve-headless:50051"): calls spread round-robin over the
# servers that report SERVING (client-side health checking), and a call a
# server refused as UNAVAILABLE, or cancelled while shutting down, is retried
# on another (every primitive is idempotent) up to 4 attempts in all.
SERVICE_CONFIG = json.dumps({
    "loadBalancingConfig": [{"round_robin": {}}],
    "healthCheckConfig": {"serviceName": ""},
    "methodConfig": [{
        "name": [{"service": "primserve.v1.Primitives"}],
        "retryPolicy": {
            "maxAttempts": 4,
            "initialBackoff": "0.05s",
            "maxBackoff": "1s",
            "backoffMultiplier": 2,
            "retryableStatusCodes": ["UNAVAILABLE", "CANCELLED"],
        },
    }],
})

# Arrays can be far larger than gRPC's default 4 MB receive limit; the server
# has its own (--max_receive_message_bytes). Calls above the retry buffer
# (64 MiB) are not retried; reconnecting backs off to at most 5 s.
OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.service_config", SERVICE_CONFIG),
    ("grpc.enable_retries", 1),
    ("grpc.per_rpc_retry_buffer_size", 64 << 20),
    ("grpc.max_reconnect_backoff_ms", 5000),
]

# The Primitives methods' paths, by name. The clients call them with bytes in
# and out: _wire serializes the requests and reads the responses.
_SERVICE = primitives_pb2.DESCRIPTOR.services_by_name["Primitives"]
RPC_PATHS = {method.name: f"/{_SERVICE.full_name}/{method.name}" for method in _SERVICE.methods}
_SHM_SERVICE = primitives_pb2.DESCRIPTOR.services_by_name["SharedMemory"]
SHM_PATHS = {method.name: f"/{_SHM_SERVICE.full_name}/{method.name}" for method in _SHM_SERVICE.methods}

_BUFFERS_SERVICE = primitives_pb2.DESCRIPTOR.services_by_name["Buffers"]
BUFFER_PATHS = {method.name: f"/{_BUFFERS_SERVICE.full_name}/{method.name}" for method in _BUFFERS_SERVICE.methods}


def stripe_options(index: int) -> list:
    """OPTIONS for the index-th extra channel of a striped transfer: a channel
    argument of its own, so that gRPC gives it a connection of its own."""
    return OPTIONS + [("primserve.channel_index", index)]


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
