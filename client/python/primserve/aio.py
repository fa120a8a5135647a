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

import asyncio
import itertools
from typing import Any, Callable, Awaitable, Dict, List, Optional, Tuple, Union

import grpc
import grpc.aio
import numpy as np

from primserve import (_arrays, _buffers, _calls, _channel, _cuda, _methods, _multiplex, _pipeline, _routes, _shm,
                       _streams)
from primserve.errors import ServerError
from primserve.results import KeyedReduction, Partition, Runs, Selection
from primserve.v1 import primitives_pb2 as pb


class _Methods:
    """The RPCs as awaitable methods, shared by Client (one call each) and
    Multiplex (requests on one stream); each subclass defines _invoke."""

    async def _invoke(self, call: _calls.Call, out: Optional[np.ndarray]) -> Any:
        raise NotImplementedError

    async def scan(self, a: np.ndarray, op: str = "sum", exclusive: bool = False,
                   segments: _calls.Segments = None, out: Optional[np.ndarray] = None, *,
                   reproducible: bool = False, dtype: Any = None) -> np.ndarray:
        """primserve.Client.scan, awaited (reproducible=True: float sum/prod get the same bits every
        time; dtype=: the accumulator, as numpy's cumsum(dtype=))."""
        return await self._invoke(_calls.scan(a, op, exclusive, segments, reproducible, dtype), out)

    async def reduce(self, a: np.ndarray, op: str = "sum", segments: _calls.Segments = None,
                     out: Optional[np.ndarray] = None, *, reproducible: bool = False, dtype: Any = None) -> Any:
        """primserve.Client.reduce, awaited (reproducible=True: float sum/prod get the same bits every
        time; dtype=: the accumulator, as numpy's sum(dtype=))."""
        return await self._invoke(_calls.reduce(a, op, segments, reproducible, dtype), out)

    async def select(self, a: np.ndarray, where: Optional[_calls.Where] = None, *,
                     flags: Optional[np.ndarray] = None, output: str = "values",
                     partition: bool = False, out: Optional[np.ndarray] = None) -> Union[np.ndarray, Selection, Partition, int]:
        """primserve.Client.select, awaited."""
        return await self._invoke(_calls.select(a, where, flags, output, partition), out)

    async def unique(self, a: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        """primserve.Client.unique, awaited."""
        return await self._invoke(_calls.unique(a), out)

    async def run_length_encode(self, a: np.ndarray, out: Optional[np.ndarray] = None) -> Runs:
        """primserve.Client.run_length_encode, awaited."""
        return await self._invoke(_calls.run_length_encode(a), out)

    async def reduce_by_key(self, keys: np.ndarray, values: np.ndarray, op: str = "sum",
                            out: Optional[np.ndarray] = None, *, reproducible: bool = False) -> KeyedReduction:
        """primserve.Client.reduce_by_key, awaited (reproducible=True: float sum/prod get the same bits every time)."""
        return await self._invoke(_calls.reduce_by_key(keys, values, op, reproducible), out)

    async def aggregate_by_key(self, keys: np.ndarray, values: np.ndarray, num_keys: int,
                               op: str = "sum", out: Optional[np.ndarray] = None, *,
                               reproducible: bool = False) -> np.ndarray:
        """primserve.Client.aggregate_by_key, awaited (reproducible=True: float sum gets the same bits every time)."""
        return await self._invoke(_calls.aggregate_by_key(keys, values, num_keys, op, reproducible), out)

    async def sort(self, keys: np.ndarray, values: Optional[np.ndarray] = None, descending: bool = False,
                   return_indices: bool = False, segment_offsets: _calls.Segments = None,
                   out: Optional[np.ndarray] = None) -> Any:
        """primserve.Client.sort, awaited."""
        return await self._invoke(_calls.sort(keys, values, descending, return_indices, segment_offsets), out)

    async def gather(self, values: np.ndarray, indices: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        """primserve.Client.gather, awaited."""
        return await self._invoke(_calls.gather(values, indices), out)

    def pipeline(self) -> _pipeline.Pipeline:
        """primserve.Client.pipeline, the same builder: ``await p.run()``.

        >>> await client.pipeline().select(a, gt=0.5, indices=True).gather(k).gather(v) \\
        ...     .aggregate_by_key(num_keys=16, op="sum").run()
        """
        return _pipeline.Pipeline(lambda call: self._invoke(call, None))


class Client(_Methods):
    """A grpc.aio connection to a primserve server; see primserve.Client for the
    arguments (stream_bytes, piece_bytes and progress included).

    Create it inside the event loop it is used from.
    """

    def __init__(self, address: str, *, tls: _channel.Tls = None, timeout: Optional[float] = None,
                 stream_bytes: int = _streams.DEFAULT_STREAM_BYTES, piece_bytes: int = _streams.DEFAULT_PIECE_BYTES,
                 progress: _streams.Progress = None):
        creds = _channel.credentials(tls)
        if creds is None:
            self._channel = grpc.aio.insecure_channel(address, options=_channel.OPTIONS)
        else:
            self._channel = grpc.aio.secure_channel(address, creds, options=_channel.OPTIONS)
        (self._rpcs, self._streams, self._register, self._unregister, self._register_cuda,
         self._multiplex, self._health) = _methods.bind(self._channel)
        self._regions: List[Any] = []  # _shm.Memory and _cuda.CudaRegion
        self._address, self._credentials = address, creds
        self._buffers = _BufferMethods(self._channel)
        self._stripes: List[Tuple[grpc.aio.Channel, _BufferMethods]] = []  # extra channels, made on first use
        self._routes = _routes.Routes(address, self._connect) if _routes.spreads(address) else None
        self.timeout = timeout
        self.stream_bytes = stream_bytes
        self.piece_bytes = piece_bytes
        self.progress = progress

    async def close(self) -> None:
        """Closes the regions still open (unregistered, unlinked) and the
        channel; calls in flight end with CANCELLED."""
        # Registrations end with their client, while the channel can still say so.
        for region in list(self._regions):
            try:
                await region.close()
            except ServerError:  # a server gone took its registrations with it
                pass
        await self._channel.close()
        for channel, _ in self._stripes:
            await channel.close()
        for instance in self._routes.close() if self._routes is not None else []:
            await instance.channel.close()

    def _connect(self, location: str, index: int) -> "_Instance":
        """Connection `index` to the instance at `location` (a buffer's)."""
        options = _channel.stripe_options(index) if index else _channel.OPTIONS
        channel = (grpc.aio.insecure_channel(location, options=options) if self._credentials is None
                   else grpc.aio.secure_channel(location, self._credentials, options=options))
        return _Instance(channel)

    async def _listings(self) -> List[Any]:
        """primserve.Client._listings: those that answer."""
        methods = [self._buffers] + [instance.buffers for instance in self._routes.instances()]
        listed = await asyncio.gather(*(method.list(pb.ListBuffersRequest(), timeout=self.timeout)
                                        for method in methods), return_exceptions=True)
        return [response for response in listed if not isinstance(response, BaseException)]

    async def _find(self, name: str) -> str:
        """primserve.Client._find, awaited."""
        location = self._routes.location_of(name) or self._routes.find_in(name, await self._listings())
        if location is None:
            raise _routes.not_found(name)
        return location

    async def _route(self, call: _calls.Call) -> Optional[_routes.Route]:
        """primserve.Client._route, awaited."""
        if self._routes is None:
            return None
        inputs, outputs = _routes.named(call)
        if not inputs and not outputs:
            return None
        location = first = None
        for name in inputs:
            at = await self._find(name)
            if location is None:
                location, first = at, name
            elif at != location:
                raise _routes.different(first, location, name, at)
        if location is None:
            location = next(filter(None, map(self._routes.location_of, outputs)), None)
        if location is None:
            try:
                location = (await self._buffers.list(pb.ListBuffersRequest(), timeout=self.timeout)).location
            except grpc.RpcError as error:
                raise ServerError.from_rpc_error(error) from error
        return _routes.Route(location, (inputs + outputs)[0], outputs)

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    async def _invoke(self, call: _calls.Call, out: Optional[np.ndarray]) -> Any:
        if _buffers.wants_buffers(call, out):
            call = _buffers.place(call, out)
            out = None
        route = await self._route(call)
        rpcs = self._rpcs if route is None else self._routes.instance(route.location).methods.rpcs
        call, placed = _shm.place(call, self._regions, out)
        if _streams.wanted(call, self.stream_bytes):
            return await self._stream(call)
        try:
            response = await rpcs[call.rpc](call.request, timeout=self.timeout)
        except grpc.RpcError as error:
            failure = ServerError.from_rpc_error(error)
            raise (failure if route is None else route.failed(failure)) from error
        if route is not None:
            self._routes.remember(route.outputs, route.location)
        return call.answer(response, placed=placed)

    async def _stream(self, call: _calls.Call) -> Any:
        # grpc.aio sends the pieces from a task of its own while this one reads the answers.
        try:
            answers = self._streams[call.rpc](_streams.pieces(call, self.piece_bytes, self.progress), timeout=self.timeout)
            answers = [await answers] if call.rpc in _streams.ONE_ANSWER else [answer async for answer in answers]
        except grpc.RpcError as error:
            raise ServerError.from_rpc_error(error) from error
        return _streams.join(call, answers)

    def _stripe_methods(self, count: int) -> List["_BufferMethods"]:
        """Buffer methods on `count` channels with connections of their own."""
        while len(self._stripes) < count - 1:
            options = _channel.stripe_options(len(self._stripes) + 1)
            channel = (grpc.aio.insecure_channel(self._address, options=options) if self._credentials is None
                       else grpc.aio.secure_channel(self._address, self._credentials, options=options))
            self._stripes.append((channel, _BufferMethods(channel)))
        return [self._buffers] + [methods for _, methods in self._stripes[:count - 1]]

    async def put(self, a: np.ndarray, name: Optional[str] = None, *,
                  stripes: int = _buffers.DEFAULT_STRIPES) -> _buffers.Buffer:
        """primserve.Client.put, awaited; the Buffer frees with ``await client.free(buf)``."""
        a = _arrays.check_array(a, "a")
        if isinstance(a, (_buffers.BufferArray, _cuda.DeviceArray)):
            raise TypeError("put takes a numpy array")
        name = _buffers.check_name(name if name is not None else _buffers.fresh_name())
        try:
            info = await self._buffers.create(pb.CreateBufferRequest(name=name, dtype=_arrays.DTYPES[a.dtype],
                                                                     length=a.size), timeout=self.timeout)
            ranges = _buffers.stripes(a.size, stripes)
            if self._routes is not None:
                self._routes.remember([name], info.location)
                methods = [self._routes.instance(info.location, i).buffers for i in range(len(ranges))]
            else:
                methods = self._stripe_methods(len(ranges))
            data = memoryview(a).cast("B")
            await asyncio.gather(*(
                methods[i].write(_buffers.write_messages(name, data[begin * a.itemsize:end * a.itemsize], begin,
                                                         a.itemsize, self.progress), timeout=self.timeout)
                for i, (begin, end) in enumerate(ranges) if begin != end or not a.size))
        except grpc.RpcError as error:
            raise ServerError.from_rpc_error(error) from error
        return _buffers.info_of(info, self.free)

    async def get(self, buffer: Union[_buffers.Buffer, str], *,
                  stripes: int = _buffers.DEFAULT_STRIPES) -> np.ndarray:
        """primserve.Client.get, awaited."""
        if isinstance(buffer, str):
            buffer = await self.buffer(buffer)
        out = np.empty(len(buffer), dtype=buffer.dtype)
        ranges = _buffers.stripes(len(buffer), stripes)
        location = None
        if self._routes is not None:
            location = self._routes.location_of(buffer.name) or buffer.location or await self._find(buffer.name)
            methods = [self._routes.instance(location, i).buffers for i in range(len(ranges))]
        else:
            methods = self._stripe_methods(len(ranges))

        async def read(i: int, begin: int, end: int) -> None:
            request = _buffers.read_request(buffer.name, buffer.offset + begin, buffer.offset + end)
            async for piece in methods[i].read(request, timeout=self.timeout):
                taken = _buffers.take_piece(piece, out, buffer.offset)
                if self.progress is not None:
                    self.progress(taken)

        try:
            await asyncio.gather(*(read(i, begin, end) for i, (begin, end) in enumerate(ranges)
                                   if begin != end or not len(buffer)))
        except grpc.RpcError as error:
            failure = ServerError.from_rpc_error(error)
            raise (failure if location is None else _routes.gone(failure, buffer.name, location)) from error
        return out

    async def buffer(self, name: str) -> _buffers.Buffer:
        """primserve.Client.buffer, awaited."""
        methods, location = self._buffers, None
        if self._routes is not None:
            location = await self._find(name)
            methods = self._routes.instance(location).buffers
        try:
            listed = await methods.list(pb.ListBuffersRequest(), timeout=self.timeout)
        except grpc.RpcError as error:
            failure = ServerError.from_rpc_error(error)
            raise (failure if location is None else _routes.gone(failure, name, location)) from error
        for info in listed.buffers:
            if info.name == name:
                return _buffers.info_of(info, self.free)
        if self._routes is not None:
            self._routes.forget(name)
        raise ServerError(grpc.StatusCode.NOT_FOUND, f"no buffer named {name}")

    async def buffers(self) -> List[_buffers.Buffer]:
        """primserve.Client.buffers, awaited."""
        if self._routes is not None:
            found = {(info.name, info.location): info for listed in await self._listings() for info in listed.buffers}
            return [_buffers.info_of(info, self.free) for info in found.values()]
        try:
            listed = await self._buffers.list(pb.ListBuffersRequest(), timeout=self.timeout)
        except grpc.RpcError as error:
            raise ServerError.from_rpc_error(error) from error
        return [_buffers.info_of(info, self.free) for info in listed.buffers]

    async def free(self, buffer: Union[_buffers.Buffer, str]) -> None:
        """primserve.Client.free, awaited."""
        name = buffer.name if isinstance(buffer, _buffers.Buffer) else buffer
        methods, location = self._buffers, None
        if self._routes is not None:
            location = await self._find(name)
            methods = self._routes.instance(location).buffers
        try:
            await methods.free(pb.FreeBufferRequest(name=name), timeout=self.timeout)
        except grpc.RpcError as error:
            failure = ServerError.from_rpc_error(error)
            if location is not None and failure.code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAVAILABLE):
                self._routes.forget(name)
            raise (failure if location is None else _routes.gone(failure, name, location)) from error
        if location is not None:
            self._routes.forget(name)

    async def shared_memory(self, size: int, name: Optional[str] = None) -> "Region":
        """primserve.Client.shared_memory, awaited; the region closes with ``await region.close()``
        or ``async with``.

        >>> async with await client.shared_memory(8 * 5) as region:
        ...     a = region.array(np.int32, 5)
        ...     a[:] = [3, 1, 4, 1, 5]
        ...     print(await client.scan(a, out=region.array(np.int32, 5, offset=20)))
        [ 3  4  8  9 14]
        """
        async def unregister(region: Region) -> None:
            self._regions.remove(region)
            try:
                await self._unregister(pb.UnregisterRequest(name=region.name), timeout=self.timeout)
            except grpc.RpcError as error:
                raise ServerError.from_rpc_error(error) from error

        region = Region(name, _shm.check_size(size), unregister)
        try:
            await self._register(pb.RegisterSystemRequest(name=region.name, key=region.key, byte_size=region.size),
                                 timeout=self.timeout)
        except grpc.RpcError as error:
            region.release()
            raise ServerError.from_rpc_error(error) from error
        self._regions.append(region)
        return region

    async def register_cuda(self, name: str, raw_handle: bytes, byte_size: int, device: int = 0) -> None:
        """primserve.Client.register_cuda, awaited."""
        request = _cuda.check_registration(name, raw_handle, byte_size, device)
        try:
            await self._register_cuda(request, timeout=self.timeout)
        except grpc.RpcError as error:
            raise ServerError.from_rpc_error(error) from error

    async def unregister(self, name: str) -> None:
        """primserve.Client.unregister, awaited."""
        if not isinstance(name, str):
            raise TypeError(f"name must be a string, not {type(name).__name__}")
        try:
            await self._unregister(pb.UnregisterRequest(name=name), timeout=self.timeout)
        except grpc.RpcError as error:
            raise ServerError.from_rpc_error(error) from error

    async def cuda_shared_memory(self, what: Any, name: Optional[str] = None, *,
                                 device: Optional[int] = None) -> _cuda.AioRegion:
        """primserve.Client.cuda_shared_memory, awaited; the region closes with
        ``await region.close()`` or ``async with``.

        >>> async with await client.cuda_shared_memory(4 * 1024) as region:  # doctest: +SKIP
        ...     a = region.array(np.int32, 1024)
        ...     a[:] = cupy.arange(1024, dtype=cupy.int32)
        ...     await client.scan(a, out=a)
        """
        _cuda.check_what(what)
        export = _cuda.Export(what, device)
        region = _cuda.AioRegion(name or _cuda.default_name(export), export, self._unregister_region)
        try:
            await self.register_cuda(region.name, export.handle, export.byte_size, export.device)
        except BaseException:
            region._release()
            raise
        self._regions.append(region)
        return region

    async def _unregister_region(self, region: Any) -> None:
        if region in self._regions:
            self._regions.remove(region)
        await self.unregister(region.name)

    def multiplex(self) -> "Multiplex":
        """A Multiplex stream (see primserve.Client.multiplex): many calls on one gRPC
        stream (with several servers, one per instance whose buffers they name),
        each method awaited for its own answer.

        >>> async with client.multiplex() as stream:
        ...     await asyncio.gather(*(stream.reduce(np.arange(n, dtype=np.int64)) for n in (10, 100)))
        [45, 4950]
        """
        return Multiplex(self)

    async def health(self, service: str = "") -> str:
        """primserve.Client.health, awaited."""
        try:
            response = await self._health(_channel.HEALTH_REQUEST(service=service), timeout=self.timeout)
        except grpc.RpcError as error:
            raise ServerError.from_rpc_error(error) from error
        return _channel.health_status(response)


class _Instance:
    """One connection to a buffer's instance, with the methods called on it."""

    def __init__(self, channel: grpc.aio.Channel):
        self.channel = channel
        self.methods = _methods.bind(channel)
        self.buffers = _BufferMethods(channel)


class _BufferMethods:
    """The Buffers service's methods on one grpc.aio channel."""

    def __init__(self, channel: grpc.aio.Channel):
        paths = _channel.BUFFER_PATHS
        self.create = channel.unary_unary(paths["Create"], request_serializer=pb.CreateBufferRequest.SerializeToString,
                                          response_deserializer=pb.BufferInfo.FromString)
        self.write = channel.stream_unary(paths["Write"])
        self.read = channel.unary_stream(paths["Read"])
        self.free = channel.unary_unary(paths["Free"], request_serializer=pb.FreeBufferRequest.SerializeToString,
                                        response_deserializer=pb.FreeBufferResponse.FromString)
        self.list = channel.unary_unary(paths["List"], request_serializer=pb.ListBuffersRequest.SerializeToString,
                                        response_deserializer=pb.ListBuffersResponse.FromString)


class Region(_shm.Memory):
    """primserve.Client.shared_memory's Region for the asyncio client: ``await close()``."""

    def __init__(self, name: Optional[str], size: int, unregister: Callable[["Region"], Awaitable[None]]):
        super().__init__(name, size)
        self._unregister = unregister

    async def close(self) -> None:
        """Unregisters the region, unlinks the object and unmaps it."""
        if self.closed:
            return
        try:
            await self._unregister(self)
        finally:
            self.release()

    async def __aenter__(self) -> "Region":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()


def _failed(failure: Exception, route: Optional[_routes.Route]) -> Exception:
    """A call's failure, as seen from a stream to its route's instance."""
    return route.failed(failure) if route is not None and isinstance(failure, ServerError) else failure


class _Stream:
    """One Multiplex gRPC stream: frames written one at a time, and a task
    matching each answer to its call by id. Once the stream fails, every call
    on it fails with that error, later ones at once."""

    def __init__(self, method: Any, routes: Optional[_routes.Routes]):
        self._stream = method()
        self._pending: Dict[int, Tuple[asyncio.Future, _calls.Call, Optional[_routes.Route]]] = {}
        self._ids = itertools.count()
        self._closed = False
        self._failure: Optional[Exception] = None
        self._routes = routes
        self._writing = asyncio.Lock()  # gRPC takes one message write at a time
        self._reader = asyncio.ensure_future(self._read())

    async def send(self, call: _calls.Call, route: Optional[_routes.Route]) -> Any:
        if self._closed:
            raise ValueError("this Multiplex stream is closed")
        if self._failure is not None:
            raise _failed(self._failure, route)
        request_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (future, call, route)
        try:
            async with self._writing:
                await self._stream.write(_multiplex.frame(request_id, call))
        except (grpc.RpcError, asyncio.InvalidStateError):
            pass  # the stream ended: the reader fails this call with its error
        return await future

    async def _read(self) -> None:
        failure: Exception = ServerError(grpc.StatusCode.UNKNOWN, "the Multiplex stream ended before answering")
        try:
            while (buffer := await self._stream.read()) is not grpc.aio.EOF:
                answer = _multiplex.read(buffer)
                future, call, route = self._pending.pop(answer.id, (None, None, None))
                if future is None:
                    raise ValueError(f"the server answered Multiplex id {answer.id}, which no call has")
                try:
                    result = _multiplex.result(call, buffer, answer)
                except ServerError as error:
                    future.set_exception(_failed(error, route))
                    continue
                if route is not None:
                    self._routes.remember(route.outputs, route.location)
                future.set_result(result)
        except grpc.RpcError as error:
            failure = ServerError.from_rpc_error(error)
        except ValueError as error:  # a malformed answer: the stream cannot be trusted further
            self._stream.cancel()
            failure = error
        self._failure = failure
        unanswered, self._pending = list(self._pending.values()), {}
        for future, _, route in unanswered:
            future.set_exception(_failed(failure, route))

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            async with self._writing:
                await self._stream.done_writing()
        await self._reader


class Multiplex(_Methods):
    """Calls on Multiplex streams, from Client.multiplex(); use it in one event loop.

    Each method sends its request at once and returns the answer when it
    arrives, as the unary call would (a refusal raises ServerError and the
    stream goes on); pipeline()'s run() is awaited likewise. Calls naming no
    buffer go on one stream to the client's address; with several servers, a
    call naming buffers goes on a stream to the instance holding them (opened
    on first use), as primserve.Client.multiplex's. A task per stream reads
    its answers; an error that ends a stream fails every call still waiting
    on it with its ServerError.
    """

    def __init__(self, client: Client):
        self._client = client
        self._streams: Dict[Optional[str], _Stream] = {}  # by location; None: the client's address
        self._closed = False

    async def _invoke(self, call: _calls.Call, out: Optional[np.ndarray]) -> Any:
        if out is not None:
            raise ValueError("out= is for the Client's own calls, not a Multiplex stream's")
        if self._closed:
            raise ValueError("this Multiplex stream is closed")
        call = _buffers.place(call, None)
        route = await self._client._route(call)
        location = None if route is None else route.location
        stream = self._streams.get(location)
        if stream is None:
            if self._closed:  # closed while the route was looked up
                raise ValueError("this Multiplex stream is closed")
            method = (self._client._multiplex if location is None
                      else self._client._routes.instance(location).methods.multiplex)
            stream = self._streams[location] = _Stream(method, self._client._routes)
        return await stream.send(call, route)

    async def close(self) -> None:
        """Sends no more calls and waits for the answers to those sent."""
        self._closed = True
        for stream in list(self._streams.values()):
            await stream.close()

    async def __aenter__(self) -> "Multiplex":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()
