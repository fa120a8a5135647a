"""The asyncio client, on grpc.aio.

Its methods are primserve.Client's, awaited: same arguments, same checks
before anything is sent, same answers and the same ServerError.

>>> import asyncio, numpy as np, primserve.aio
>>> async def main():
...     async with primserve.aio.Client("localhost:50051") as client:
...         return await asyncio.gather(*(client.reduce(np.arange(n, dtype=np.int64)) for n in (10, 100)))
>>> asyncio.run(main())
[45, 4950]
"""

from typing import Any, Optional, Union

import grpc
import grpc.aio
import numpy as np

from primserve import _calls, _channel, _wire
from primserve.errors import ServerError
from primserve.results import KeyedReduction, Partition, Runs, Selection


class Client:
    """A grpc.aio connection to a primserve server; see primserve.Client for the arguments.

    Create it inside the event loop it is used from.
    """

    def __init__(self, address: str, *, tls: _channel.Tls = None, timeout: Optional[float] = None):
        creds = _channel.credentials(tls)
        if creds is None:
            self._channel = grpc.aio.insecure_channel(address, options=_channel.OPTIONS)
        else:
            self._channel = grpc.aio.secure_channel(address, creds, options=_channel.OPTIONS)
        self._rpcs = {name: self._channel.unary_unary(path) for name, path in _channel.RPC_PATHS.items()}
        self._health = self._channel.unary_unary(
            _channel.HEALTH_CHECK,
            request_serializer=_channel.HEALTH_REQUEST.SerializeToString,
            response_deserializer=_channel.HEALTH_RESPONSE.FromString,
        )
        self.timeout = timeout

    async def close(self) -> None:
        """Closes the channel; calls in flight end with CANCELLED."""
        await self._channel.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    async def _invoke(self, call: _calls.Call) -> Any:
        try:
            response = await self._rpcs[call.rpc](call.request, timeout=self.timeout)
        except grpc.RpcError as error:
            raise ServerError.from_rpc_error(error) from error
        return call.parse(_wire.parse(response, call.response))

    async def scan(self, a: np.ndarray, op: str = "sum", exclusive: bool = False,
                   segments: _calls.Segments = None) -> np.ndarray:
        """primserve.Client.scan, awaited."""
        return await self._invoke(_calls.scan(a, op, exclusive, segments))

    async def reduce(self, a: np.ndarray, op: str = "sum", segments: _calls.Segments = None) -> Any:
        """primserve.Client.reduce, awaited."""
        return await self._invoke(_calls.reduce(a, op, segments))

    async def select(self, a: np.ndarray, where: Optional[_calls.Where] = None, *,
                     flags: Optional[np.ndarray] = None, output: str = "values",
                     partition: bool = False) -> Union[np.ndarray, Selection, Partition, int]:
        """primserve.Client.select, awaited."""
        return await self._invoke(_calls.select(a, where, flags, output, partition))

    async def unique(self, a: np.ndarray) -> np.ndarray:
        """primserve.Client.unique, awaited."""
        return await self._invoke(_calls.unique(a))

    async def run_length_encode(self, a: np.ndarray) -> Runs:
        """primserve.Client.run_length_encode, awaited."""
        return await self._invoke(_calls.run_length_encode(a))

    async def reduce_by_key(self, keys: np.ndarray, values: np.ndarray, op: str = "sum") -> KeyedReduction:
        """primserve.Client.reduce_by_key, awaited."""
        return await self._invoke(_calls.reduce_by_key(keys, values, op))

    async def aggregate_by_key(self, keys: np.ndarray, values: np.ndarray, num_keys: int,
                               op: str = "sum") -> np.ndarray:
        """primserve.Client.aggregate_by_key, awaited."""
        return await self._invoke(_calls.aggregate_by_key(keys, values, num_keys, op))

    async def health(self, service: str = "") -> str:
        """primserve.Client.health, awaited."""
        try:
            response = await self._health(_channel.HEALTH_REQUEST(service=service), timeout=self.timeout)
        except grpc.RpcError as error:
            raise ServerError.from_rpc_error(error) from error
        return _channel.health_status(response)
