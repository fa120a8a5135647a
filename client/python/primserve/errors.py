"""The exception a failed call raises."""

from typing import Optional

import grpc


class ServerError(Exception):
    """A call ended with a non-OK gRPC status.

    The server refused the request (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, ...)
    or the call did not complete (UNAVAILABLE: no server at the address or it
    is shutting down; DEADLINE_EXCEEDED: past the client's timeout).

    Attributes:
        code: the ``grpc.StatusCode``.
        details: the server's message, e.g. ``"segment_offsets[1] = 7 is
            greater than the input's length 5"``.

    >>> try:
    ...     client.scan(a, segments=[0, 7])
    ... except primserve.ServerError as e:
    ...     print(e.code, e.details)
    """

    def __init__(self, code: grpc.StatusCode, details: Optional[str]):
        self.code = code
        self.details = details or ""
        super().__init__(f"{code.name}: {self.details}")

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "ServerError":
        """The ServerError for a failed call's grpc.RpcError (or grpc.aio.AioRpcError)."""
        return cls(error.code(), error.details())
