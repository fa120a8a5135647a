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
        details: the server's message.

    >>> try:
    ...     client.scan(np.arange(5), segments=[0, 7])
    ... except primserve.ServerError as e:
    ...     print(e.code.name, e.details)
    INVALID_ARGUMENT segment_offsets[1] = 7 is past the end of the input (5 elements)
    """

    def __init__(self, code: grpc.StatusCode, details: Optional[str]):
        self.code = code
        self.details = details or ""
        super().__init__(f"{code.name}: {self.details}")

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "ServerError":
        """The ServerError for a failed call's grpc.RpcError (or grpc.aio.AioRpcError)."""
        return cls(error.code(), error.details())
