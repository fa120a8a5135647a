"""The blocking client, and its Multiplex stream."""

import atexit
import itertools
import queue
import threading
import time
import traceback
import weakref
from concurrent.futures import Future
from typing import Any, Dict, List, Optional, Tuple, Union

import grpc
import numpy as np

from primserve import (_arrays, _buffers, _calls, _channel, _cuda, _methods, _multiplex, _pipeline, _routes, _shm,
                       _streams)
from primserve.errors import ServerError
from primserve.results import KeyedReduction, Partition, Runs, Selection
from primserve.v1 import primitives_pb2 as pb


# Clients not yet closed. At interpreter exit their channels are closed while
# gRPC's threads still run: left to the garbage collector after those threads
# are frozen, a channel's finalizer can wait forever on a lock one of them
# holds (1 of 261 interrupted calls hung at exit so here).
_OPEN: "weakref.WeakSet[Client]" = weakref.WeakSet()


@atexit.register
def _close_open_channels() -> None:
    for client in list(_OPEN):
        client._close_channels()
    # gRPC's threads (daemons: a call's request sender, a channel's poller)
    # end a moment after their calls are cancelled and channels closed; one
    # that meets interpreter exit inside a call's lock dies holding it, and
    # the call's finalizer then waits for it forever. They get a second.
    deadline = time.monotonic() + 1
    for thread in threading.enumerate():
        if thread.daemon and getattr(getattr(thread, "_target", None), "__module__", "").startswith("grpc."):
            thread.join(timeout=max(0.0, deadline - time.monotonic()))


class Client:
    """A connection to a primserve server; its methods block until the answer.

    Arrays go in as anything ``numpy.asarray`` takes (numpy arrays, lists,
    memoryviews, pandas and pyarrow columns) that is 1-D, C-contiguous and
    int32, int64, uint32, uint64, float32 or float64, and come back as
    read-only numpy arrays over the response's bytes. Anything else (another
    dtype, a 2-D array, a strided view, a masked array, whose mask would be
    ignored) raises TypeError or ValueError before anything is sent; a call
    the server refuses or that fails raises ServerError. Comparisons with
    real bounds (``("gt", 1.5)``, ``("in_range", 0.5, 1e30)``) keep on an
    integer array what numpy's comparison keeps.

    Args:
        address: ``"host:port"`` of the server.
        tls: None for plaintext; True to verify the server against the
            system's root certificates; the PEM bytes of the CA that signed
            the server's certificate, or the path to that PEM file; or any
            ``grpc.ChannelCredentials``, such as
            ``grpc.ssl_channel_credentials(ca, client_key, client_chain)`` for
            mutual TLS.
        timeout: seconds each call may take; None for no limit. A call past
            it raises ServerError with code DEADLINE_EXCEEDED.
        stream_bytes: a call whose input arrays total more than this many
            bytes goes through the method's streaming RPC (ScanStream, ...),
            which has no 2 GiB message limit and overlaps sending with the
            server's work; the answer is the same. select(partition=True)
            is always unary (the server does not stream it).
        piece_bytes: the array data in each message of a stream (whole
            elements; at least one).
        progress: None, or a callable told the bytes of each piece of array
            data a streamed call sends and put() writes or get() reads, as
            they go (tqdm's ``update`` is one; it may be called from gRPC's
            threads). Unary and shared-memory calls do not report.

    Ctrl-C (or any exception) during a streamed call, put() or get() cancels
    the call on the server before it propagates.

    Every method but health also takes ``out=``: a view into a region from
    shared_memory() that receives the answer's values (a Select with
    output="indices": its indices; a Sort: its keys), returned as a view of
    it; inputs that are views into a region are read there by the server.
    See shared_memory(). ``out=`` also takes a resident buffer's name (or a
    Buffer): the values are stored in that buffer on the server and the
    method returns its Buffer; and every array argument takes a Buffer from
    put(). See put(). Where the answer has several arrays, ``out=`` takes
    a tuple of them in the answer's order, as numpy's ``divmod(x, y,
    out=(q, r))`` does (None for one left inline): run_length_encode
    (values, lengths), reduce_by_key (keys, values), a Select with
    output="both" (values, indices), a Sort (keys, then values and indices
    where asked for).

    Given several servers (``"ipv4:10.0.0.1:50051,10.0.0.2:50051"``) or a
    ``dns:///`` name, calls spread over them, and every call that names a
    buffer (an input, ``out=``, get, free, a pipeline, a Multiplex request)
    goes to the instance holding it, at its Buffer's ``location`` (Arrow
    Flight's model): put creates a buffer on the instance the address picks.
    One call reads buffers of one instance (else ValueError naming both,
    before sending). A buffer whose instance went away is ServerError
    NOT_FOUND saying so.

    >>> import numpy as np, primserve
    >>> with primserve.Client("localhost:50051") as client:
    ...     client.scan(np.array([3, 1, 4, 1, 5], dtype=np.int32))
    array([ 3,  4,  8,  9, 14], dtype=int32)

    A progress bar over a large upload, with tqdm:

    >>> a = np.zeros(1 << 28, dtype=np.int32)
    >>> with tqdm.tqdm(total=a.nbytes, unit="B", unit_scale=True) as bar:
    ...     client.progress = bar.update
    ...     x = client.put(a)
    """

    def __init__(self, address: str, *, tls: _channel.Tls = None, timeout: Optional[float] = None,
                 stream_bytes: int = _streams.DEFAULT_STREAM_BYTES, piece_bytes: int = _streams.DEFAULT_PIECE_BYTES,
                 progress: _streams.Progress = None):
        creds = _channel.credentials(tls)
        if creds is None:
            self._channel = grpc.insecure_channel(address, options=_channel.OPTIONS)
        else:
            self._channel = grpc.secure_channel(address, creds, options=_channel.OPTIONS)
        (self._rpcs, streams, self._register, self._unregister, self._register_cuda,
         self._multiplex, self._health) = _methods.bind(self._channel)
        # A stream answering once is called as a future, so that it can be cancelled.
        self._streams = {rpc: method.future if rpc in _streams.ONE_ANSWER else method
                         for rpc, method in streams.items()}
        self._regions: List[Any] = []  # _shm.Region and _cuda.Region
        self._address, self._credentials = address, creds
        self._buffers = _BufferMethods(self._channel)
        self._stripes: List[Tuple[grpc.Channel, _BufferMethods]] = []  # extra channels, made on first use
        self._routes = _routes.Routes(address, self._connect) if _routes.spreads(address) else None
        self.timeout = timeout
        self.stream_bytes = stream_bytes
        self.piece_bytes = piece_bytes
        self.progress = progress
        _OPEN.add(self)

    def close(self) -> None:
        """Closes the regions still open (unregistered, unlinked) and the
        channel; calls in flight end with CANCELLED."""
        # Registrations end with their client, while the channel can still say so.
        for region in list(self._regions):
            try:
                region.close()
            except ServerError:  # a server gone took its registrations with it
                pass
        self._close_channels()

    def _close_channels(self) -> None:
        _OPEN.discard(self)
        self._channel.close()
        for channel, _ in self._stripes:
            channel.close()
        for instance in self._routes.close() if self._routes is not None else []:
            instance.channel.close()

    def _connect(self, location: str, index: int) -> "_Instance":
        """Connection `index` to the instance at `location` (a buffer's)."""
        options = _channel.stripe_options(index) if index else _channel.OPTIONS
        channel = (grpc.insecure_channel(location, options=options) if self._credentials is None
                   else grpc.secure_channel(location, self._credentials, options=options))
        return _Instance(channel)

    def _listings(self) -> Any:
        """The caller's buffers on the address as given, then on each instance
        known; one that does not answer is passed over."""
        methods = [self._buffers] + [instance.buffers for instance in self._routes.instances()]
        for method in methods:
            try:
                yield method.list(pb.ListBuffersRequest(), timeout=self.timeout)
            except grpc.RpcError:
                continue

    def _find(self, name: str) -> str:
        """The location of buffer `name` (routing only)."""
        location = self._routes.location_of(name) or self._routes.find_in(name, self._listings())
        if location is None:
            raise _routes.not_found(name)
        return location

    def _route(self, call: _calls.Call) -> Optional[_routes.Route]:
        """Where a placed call goes when the address names several servers and
        the call names buffers (None: to the address as given): its inputs'
        instance (ValueError if they are on two), else an output's, else the
        instance the address picks, which then holds the new outputs."""
        if self._routes is None:
            return None
        inputs, outputs = _routes.named(call)
        if not inputs and not outputs:
            return None
        location = first = None
        for name in inputs:
            at = self._find(name)
            if location is None:
                location, first = at, name
            elif at != location:
                raise _routes.different(first, location, name, at)
        if location is None:
            location = next(filter(None, map(self._routes.location_of, outputs)), None)
        if location is None:
            try:
                location = self._buffers.list(pb.ListBuffersRequest(), timeout=self.timeout).location
            except grpc.RpcError as error:
                raise ServerError.from_rpc_error(error) from error
        return _routes.Route(location, (inputs + outputs)[0], outputs)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _invoke(self, call: _calls.Call, out: Any = None) -> Any:
        if _buffers.wants_buffers(call, out):
            call = _buffers.place(call, out)
            out = None
        route = self._route(call)
        rpcs = self._rpcs if route is None else self._routes.instance(route.location).methods.rpcs
        call, placed = _shm.place(call, self._regions, out)
        if _streams.wanted(call, self.stream_bytes):
            return self._stream(call)
        try:
            response = rpcs[call.rpc](call.request, timeout=self.timeout)
        except grpc.RpcError as error:
            failure = ServerError.from_rpc_error(error)
            raise (failure if route is None else route.failed(failure)) from error
        if route is not None:
            self._routes.remember(route.outputs, route.location)
        return call.answer(response, placed=placed)

    def _stream(self, call: _calls.Call) -> Any:
        # gRPC sends the pieces from its own thread while this one reads the answers.
        method = self._streams[call.rpc]
        pieces = _streams.pieces(call, self.piece_bytes, self.progress)
        calls = _Calls()

        def read() -> List[Any]:
            stream = calls.add(method(pieces, timeout=self.timeout))
            try:
                return [stream.result()] if call.rpc in _streams.ONE_ANSWER else list(stream)
            except grpc.RpcError as error:
                raise ServerError.from_rpc_error(error) from error

        try:
            # Ctrl-C cancels the call: left running, gRPC's thread would go on sending the pieces.
            answers = _off_this_thread(read, calls.cancel)
        except ServerError:
            raise
        except BaseException as error:
            calls.forget()
            _let_go(error)
            raise
        calls.forget()
        return _streams.join(call, answers)

    def scan(self, a: np.ndarray, op: str = "sum", exclusive: bool = False,
             segments: _calls.Segments = None, out: Optional[np.ndarray] = None, *,
             reproducible: bool = False, dtype: Any = None) -> np.ndarray:
        """Inclusive or exclusive scan: ``numpy.cumsum`` and its kin.

        Args:
            a: the input.
            op: "sum", "prod", "min" or "max" (integers wrap; min/max
                propagate NaN).
            exclusive: out[i] combines the elements before i, starting from
                the op's identity (0, 1, the dtype's max, its lowest).
            segments: start positions (the first 0, non-decreasing, each
                <= len(a)); the scan restarts at each.
            reproducible: float32/float64 "sum" and "prod" give the same bits
                every time: alone, batched on the server with other requests,
                or streamed in any piece sizes (same GPU model, driver, CUDA
                runtime and server build; not across those, nor between the
                CPU and CUDA backends). Integers and the other ops are exact
                in any order anyway. It costs some speed (docs/API.md "Reproducible
                floats"), and a streamed segmented scan is gathered whole by
                the server (at most its --max_request_elements); False keeps
                the server's default (``--reproducible_floats``, off unless
                set). A non-bool raises TypeError.
            dtype: "sum" and "prod" only: the dtype to accumulate and answer
                in, as numpy's ``cumsum(dtype=)``; as for reduce() (which
                see).

        Returns:
            An array of a's length and dtype (dtype='s where given).

        >>> client.scan(np.array([1, 2, 3, 4], dtype=np.int64), exclusive=True)
        array([0, 1, 3, 6])
        >>> client.scan(np.array([1., 2., 3., 4.]), op="max", segments=[0, 2])
        array([1., 2., 3., 4.])
        >>> client.scan(np.array([0.5, 0.25, 2.0], dtype=np.float32), reproducible=True)
        array([0.5 , 0.75, 2.75], dtype=float32)
        >>> client.scan(np.array([2**31 - 1, 1], dtype=np.int32), dtype=np.int64)
        array([2147483647, 2147483648])
        """
        return self._invoke(_calls.scan(a, op, exclusive, segments, reproducible, dtype), out)

    def reduce(self, a: np.ndarray, op: str = "sum", segments: _calls.Segments = None,
               out: Optional[np.ndarray] = None, *, reproducible: bool = False, dtype: Any = None) -> Any:
        """Reduction: ``a.sum()``, ``a.prod()``, ``a.min()``, ``a.max()``, argmin, argmax.

        Args:
            a: the input.
            op: "sum", "prod", "min", "max", "argmin" or "argmax".
            segments: start positions as for scan; one result per segment,
                the op's identity for an empty one. Without segments, the
                min, max, argmin or argmax of an empty array raises ValueError,
                as numpy's does.
            reproducible: float32/float64 "sum" and "prod" give the same bits
                every time: alone, batched on the server with other requests,
                or streamed in any piece sizes (same GPU model, driver, CUDA
                runtime and server build; not across those, nor between the
                CPU and CUDA backends). Integers and the other ops are exact
                in any order anyway. It costs some speed (docs/API.md "Reproducible
                floats"), and a streamed reduce is gathered whole by the
                server (at most its --max_request_elements); False keeps the
                server's default (``--reproducible_floats``, off unless set).
                A non-bool raises TypeError.
            dtype: "sum" and "prod" only: the dtype to accumulate and answer
                in, as numpy's ``sum(dtype=)``: int64 for int32 input, uint64
                for uint32, float64 for float32 (None or a's dtype: a's, so an
                int32 sum wraps at 2**31 unless asked). The CPU and CUDA
                backends take it; every server refuses a dtype that does not
                widen a's (ServerError INVALID_ARGUMENT).
                Such a call is always unary (ReduceStream does not take it).

        Returns:
            Without segments, a numpy scalar of a's dtype (dtype='s where
            given); with segments, an array of them. For "argmin"/"argmax",
            an ArgExtreme(value, index): the extreme and the first index
            holding it (the first NaN's if there is one; -1 for an empty
            segment).

        >>> client.reduce(np.array([3, 9, 2, 9], dtype=np.int32))
        23
        >>> client.reduce(np.array([3, 9, 2, 9], dtype=np.int32), op="argmax")
        ArgExtreme(value=9, index=1)
        >>> client.reduce(np.array([3, 9, 2, 9], dtype=np.int32), op="min", segments=[0, 1])
        array([3, 2], dtype=int32)
        >>> client.reduce(np.array([2**31 - 1, 1], dtype=np.int32), dtype=np.int64)
        2147483648
        """
        return self._invoke(_calls.reduce(a, op, segments, reproducible, dtype), out)

    def select(self, a: np.ndarray, where: Optional[_calls.Where] = None, *, flags: Optional[np.ndarray] = None,
               output: str = "values", partition: bool = False,
               out: Optional[np.ndarray] = None) -> Union[np.ndarray, Selection, Partition, int]:
        """Stream compaction: ``a[mask]``, ``numpy.flatnonzero(mask)``, ``numpy.count_nonzero(mask)``.

        Give exactly one criterion:

        where: a predicate on each element x, as a tuple: ``("gt", 0.5)``
            keeps x > 0.5; the kinds are "eq", "ne", "lt", "le", "gt", "ge"
            (or "==", "!=", "<", "<=", ">", ">="), ``"nonzero"`` (alone or as
            a 1-tuple) and ``("in_range", lo, hi)`` for lo <= x < hi.
            Comparisons are IEEE's: NaN fails all but "ne" and "nonzero".
            Operands of an integer array must be integers that fit its dtype.
            A float operand is compared exactly as given: on a float32 array
            ``("gt", 0.1)`` compares with the double 0.1, where numpy's
            ``a > 0.1`` rounds 0.1 to float32 first; pass ``np.float32(0.1)``
            for numpy's answer.
        flags: keep a[i] where flags[i] != 0: an integer array of a's length,
            or a bool mask (converted to int32 with one vectorized copy).

        Args:
            output: "values" (the kept elements), "indices" (their int64
                positions), "both" (a Selection(values, indices)) or "count"
                (their number, an int).
            partition: also return the rejected elements, as
                Partition(selected, rejected), each part in the form output
                names, in input order.

        >>> a = np.array([5, 1, 7, 3, 9], dtype=np.int32)
        >>> client.select(a, ("gt", 4))
        array([5, 7, 9], dtype=int32)
        >>> client.select(a, flags=a > 4, output="indices")
        array([0, 2, 4])
        >>> client.select(a, ("in_range", 3, 8), output="count")
        3
        >>> client.select(a, (">", 4), partition=True)
        Partition(selected=array([5, 7, 9], dtype=int32), rejected=array([1, 3], dtype=int32))
        """
        return self._invoke(_calls.select(a, where, flags, output, partition), out)

    def unique(self, a: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Drops consecutive duplicates (bit-pattern equality), keeping order.

        Unlike ``numpy.unique`` it does not sort: on a sorted array the two
        agree.

        >>> client.unique(np.array([1, 1, 2, 2, 1], dtype=np.uint32))
        array([1, 2, 1], dtype=uint32)
        """
        return self._invoke(_calls.unique(a), out)

    def run_length_encode(self, a: np.ndarray, out: Any = None) -> Runs:
        """Runs of consecutive equal elements (bit-pattern equality): Runs(values, lengths).

        >>> client.run_length_encode(np.array([7, 7, 7, 2, 7], dtype=np.int64))
        Runs(values=array([7, 2, 7]), lengths=array([3, 1, 1]))

        out: the values' place, or (values, lengths) (see Client).
        """
        return self._invoke(_calls.run_length_encode(a), out)

    def reduce_by_key(self, keys: np.ndarray, values: np.ndarray, op: str = "sum",
                      out: Any = None, *, reproducible: bool = False) -> KeyedReduction:
        """Reduces the values of each run of consecutive equal keys: KeyedReduction(keys, values).

        Args:
            keys, values: arrays of the same length, of any supported dtypes.
            op: "sum", "prod", "min" or "max".
            reproducible: float32/float64 "sum" and "prod" give the same bits
                every time: alone, batched on the server with other requests,
                or streamed in any piece sizes (same GPU model, driver, CUDA
                runtime and server build; not across those, nor between the
                CPU and CUDA backends). Integers and the other ops are exact
                in any order anyway. It costs some speed (docs/API.md "Reproducible
                floats"), and a streamed call is gathered whole by the server
                (at most its --max_request_elements); False keeps the server's
                default (``--reproducible_floats``, off unless set). A
                non-bool raises TypeError.
            out: the values' place, or (keys, values) (see Client).

        >>> client.reduce_by_key(np.array([4, 4, 1], dtype=np.int32), np.array([0.5, 1.0, 2.0]))
        KeyedReduction(keys=array([4, 1], dtype=int32), values=array([1.5, 2. ]))
        """
        return self._invoke(_calls.reduce_by_key(keys, values, op, reproducible), out)

    def aggregate_by_key(self, keys: np.ndarray, values: np.ndarray, num_keys: int, op: str = "sum",
                         out: Optional[np.ndarray] = None, *, reproducible: bool = False) -> np.ndarray:
        """Group-by over unsorted keys: out[k] = op over values[i] with keys[i] == k.

        Like ``numpy.bincount(keys, weights=values, minlength=num_keys)`` for
        "sum", with the values' dtype kept.

        Args:
            keys: integer array, each in [0, num_keys).
            values: same length, any supported dtype.
            num_keys: the number of groups (>= 1); a key that never occurs
                gets the op's identity.
            op: "sum", "min" or "max".
            reproducible: float32/float64 "sum" gives the same bits every
                time: alone, batched on the server with other requests, or
                streamed in any piece sizes (same GPU model, driver, CUDA
                runtime and server build; not across those, nor between the
                CPU and CUDA backends). Integers and the other ops are exact
                in any order anyway. It costs some speed (docs/API.md "Reproducible
                floats"): on a GPU a float "sum" sorts by key instead of using
                atomics, several times slower, and a streamed call is gathered
                whole by the server (at most its --max_request_elements);
                False keeps the server's default (``--reproducible_floats``,
                off unless set). A non-bool raises TypeError.

        >>> client.aggregate_by_key(np.array([2, 0, 2], dtype=np.int32), np.array([1., 2., 3.]), num_keys=3)
        array([2., 0., 4.])
        """
        return self._invoke(_calls.aggregate_by_key(keys, values, num_keys, op, reproducible), out)

    def gather(self, values: np.ndarray, indices: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        """``values[indices]`` (``numpy.take``): indices int64, each in [0, len(values)).

        >>> client.gather(np.array([10, 20, 30], dtype=np.int32), np.array([2, 0, 2]))
        array([30, 10, 30], dtype=int32)
        """
        return self._invoke(_calls.gather(values, indices), out)

    def pipeline(self) -> _pipeline.Pipeline:
        """Several steps in one call, their intermediates kept on the server.

        >>> n = 1_000_000
        >>> a, k = np.random.rand(n).astype(np.float32), np.random.randint(0, 16, n).astype(np.int32)
        >>> v = np.random.rand(n)
        >>> sums = client.pipeline().select(a, gt=0.5, indices=True).gather(k).gather(v) \\
        ...     .aggregate_by_key(num_keys=16, op="sum").run()
        >>> bool(np.allclose(sums, np.bincount(k[a > 0.5], weights=v[a > 0.5], minlength=16)))
        True

        Every step takes its client method's arguments (arrays, Buffers from
        put(), or ``pipeline.output(step, which)``); see primserve._pipeline.
        With several servers, the pipeline goes to the instance holding the
        buffers it names; buffers of two instances raise ValueError naming
        both, before anything is sent.
        """
        return _pipeline.Pipeline(self._invoke)

    def _stripe_methods(self, count: int) -> List["_BufferMethods"]:
        """Buffer methods on `count` channels with connections of their own."""
        while len(self._stripes) < count - 1:
            options = _channel.stripe_options(len(self._stripes) + 1)
            channel = (grpc.insecure_channel(self._address, options=options) if self._credentials is None
                       else grpc.secure_channel(self._address, self._credentials, options=options))
            self._stripes.append((channel, _BufferMethods(channel)))
        return [self._buffers] + [methods for _, methods in self._stripes[:count - 1]]

    def put(self, a: np.ndarray, name: Optional[str] = None, *, stripes: int = _buffers.DEFAULT_STRIPES) -> _buffers.Buffer:
        """Uploads `a` into a new resident buffer on the server and returns its Buffer.

        The buffer stays on the server (GPU memory on a CUDA server) until
        freed, until idle for the server's --buffer_idle_seconds, or until the
        server stops; pass the Buffer (or a slice of it) wherever a method
        takes an array and nothing travels. ``out="name"`` stores a method's
        values in a buffer. The upload is striped: `stripes` disjoint ranges
        are written at once, each on a connection of its own.

        Args:
            a: the array (as the methods take it).
            name: 1 to 128 characters of [A-Za-z0-9._-]; default a fresh one.
            stripes: connections the upload is spread over (at least 1).

        >>> with client.put(np.arange(5, dtype=np.int32), name="x") as x:
        ...     client.scan(x)
        array([ 0,  1,  3,  6, 10], dtype=int32)
        """
        a = _arrays.check_array(a, "a")
        if isinstance(a, (_buffers.BufferArray, _cuda.DeviceArray)):
            raise TypeError("put takes a numpy array")
        name = _buffers.check_name(name if name is not None else _buffers.fresh_name())
        try:
            info = self._buffers.create(pb.CreateBufferRequest(name=name, dtype=_arrays.DTYPES[a.dtype],
                                                               length=a.size), timeout=self.timeout)
        except grpc.RpcError as error:
            raise ServerError.from_rpc_error(error) from error
        ranges = _buffers.stripes(a.size, stripes)
        if self._routes is not None:
            self._routes.remember([name], info.location)
            methods = [self._routes.instance(info.location, i).buffers for i in range(len(ranges))]
        else:
            methods = self._stripe_methods(len(ranges))
        data = memoryview(a).cast("B")
        progress = self.progress

        def write(i: int, calls: _Calls) -> None:
            begin, end = ranges[i]
            if begin == end and a.size:
                return
            messages = _buffers.write_messages(name, data[begin * a.itemsize:end * a.itemsize], begin, a.itemsize,
                                               progress)
            calls.add(methods[i].write.future(messages, timeout=self.timeout)).result()

        _run_each(len(ranges), write)
        return _buffers.info_of(info, self.free)

    def get(self, buffer: Union[_buffers.Buffer, str], *, stripes: int = _buffers.DEFAULT_STRIPES) -> np.ndarray:
        """The elements of a resident buffer (or of a Buffer's range), read in
        `stripes` disjoint ranges at once, each on a connection of its own."""
        if isinstance(buffer, str):
            buffer = self.buffer(buffer)
        out = np.empty(len(buffer), dtype=buffer.dtype)
        ranges = _buffers.stripes(len(buffer), stripes)
        location = None
        if self._routes is not None:
            location = self._routes.location_of(buffer.name) or buffer.location or self._find(buffer.name)
            methods = [self._routes.instance(location, i).buffers for i in range(len(ranges))]
        else:
            methods = self._stripe_methods(len(ranges))

        progress = self.progress

        def read(i: int, calls: _Calls) -> None:
            begin, end = ranges[i]
            if begin == end and len(buffer):
                return
            pieces = calls.add(methods[i].read(
                _buffers.read_request(buffer.name, buffer.offset + begin, buffer.offset + end), timeout=self.timeout))
            for piece in pieces:
                taken = _buffers.take_piece(piece, out, buffer.offset)
                if progress is not None:
                    progress(taken)

        try:
            _run_each(len(ranges), read)
        except ServerError as error:
            raise (error if location is None else _routes.gone(error, buffer.name, location)) from None
        return out

    def buffer(self, name: str) -> _buffers.Buffer:
        """The Buffer of the caller's resident buffer `name` (ServerError NOT_FOUND if none)."""
        methods, location = self._buffers, None
        if self._routes is not None:
            location = self._find(name)
            methods = self._routes.instance(location).buffers
        try:
            listed = methods.list(pb.ListBuffersRequest(), timeout=self.timeout)
        except grpc.RpcError as error:
            failure = ServerError.from_rpc_error(error)
            raise (failure if location is None else _routes.gone(failure, name, location)) from error
        for info in listed.buffers:
            if info.name == name:
                return _buffers.info_of(info, self.free)
        if self._routes is not None:
            self._routes.forget(name)
        raise ServerError(grpc.StatusCode.NOT_FOUND, f"no buffer named {name}")

    def buffers(self) -> List[_buffers.Buffer]:
        """The caller's resident buffers, by name (with several servers: on
        the one the address picks and on every instance this client used)."""
        if self._routes is not None:
            found = {(info.name, info.location): info for listed in self._listings() for info in listed.buffers}
            return [_buffers.info_of(info, self.free) for info in found.values()]
        try:
            listed = self._buffers.list(pb.ListBuffersRequest(), timeout=self.timeout)
        except grpc.RpcError as error:
            raise ServerError.from_rpc_error(error) from error
        return [_buffers.info_of(info, self.free) for info in listed.buffers]

    def free(self, buffer: Union[_buffers.Buffer, str]) -> None:
        """Frees a resident buffer; requests using it finish with the data they started with."""
        name = buffer.name if isinstance(buffer, _buffers.Buffer) else buffer
        methods, location = self._buffers, None
        if self._routes is not None:
            location = self._find(name)
            methods = self._routes.instance(location).buffers
        try:
            methods.free(pb.FreeBufferRequest(name=name), timeout=self.timeout)
        except grpc.RpcError as error:
            failure = ServerError.from_rpc_error(error)
            if location is not None and failure.code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAVAILABLE):
                self._routes.forget(name)
            raise (failure if location is None else _routes.gone(failure, name, location)) from error
        if location is not None:
            self._routes.forget(name)

    def sort(self, keys: np.ndarray, values: Optional[np.ndarray] = None, descending: bool = False,
             return_indices: bool = False, segment_offsets: _calls.Segments = None,
             out: Optional[np.ndarray] = None) -> Any:
        """Stable sort, as ``numpy.sort(keys, kind="stable")``: every NaN last
        (whatever its sign), -0.0 and +0.0 equal, keys and values returned bit
        for bit.

        Args:
            values: an array of keys' length (any dtype) moved with its keys.
            descending: the distinct keys in reverse order; NaNs still last and
                equal keys still in input order.
            return_indices: also return each output position's int64 input
                position (``numpy.argsort(keys, kind="stable")`` ascending).
            segment_offsets: segment starts (as scan's segments); each
                segment is sorted on its own, indices still count from the
                start of the whole array.
            out: a shared-memory view that receives the sorted keys.

        Returns the sorted keys, or Sorted(keys, values, indices) (None for
        what was not asked) with values or return_indices.

        >>> client.sort(np.array([3., np.nan, -0.0, 1.]))
        array([-0.,  1.,  3., nan])
        >>> client.sort(np.array([2, 1, 2], dtype=np.int32), return_indices=True, descending=True)
        Sorted(keys=array([2, 2, 1], dtype=int32), values=None, indices=array([0, 2, 1]))
        """
        return self._invoke(_calls.sort(keys, values, descending, return_indices, segment_offsets), out)

    def shared_memory(self, size: int, name: Optional[str] = None) -> _shm.Region:
        """A new POSIX shared-memory object of `size` bytes, registered with the
        server (which must run on this host with --shared_memory) as a region.

        Arrays from ``region.array(dtype, count, offset=0)`` are numpy views
        into it: as inputs they are read by the server in place (no bytes
        sent), and as a method's ``out=`` they receive its values (a Select
        with output="indices": its indices) and the method returns a view of
        what was written. Calls using a region are always unary. Closing the
        region (or leaving its ``with`` block) unregisters and unlinks it; a
        region never closed is unregistered and unlinked when it is
        garbage-collected or the interpreter exits.

        Args:
            size: bytes, at least 1.
            name: the region's name on the server; default the object's name.

        >>> with client.shared_memory(8 * 5) as region:
        ...     a = region.array(np.int32, 5)
        ...     a[:] = [3, 1, 4, 1, 5]
        ...     answer = client.scan(a, out=region.array(np.int32, 5, offset=20))
        ...     print(answer)
        [ 3  4  8  9 14]
        """
        def unregister(region: _shm.Region) -> None:
            self._regions.remove(region)
            try:
                self._unregister(pb.UnregisterRequest(name=region.name), timeout=self.timeout)
            except grpc.RpcError as error:
                raise ServerError.from_rpc_error(error) from error

        def forget(region_name: str) -> None:  # at exit or collection, without raising
            self._unregister(pb.UnregisterRequest(name=region_name), timeout=min(self.timeout or 1.0, 1.0))

        region = _shm.Region(name, _shm.check_size(size), unregister, forget)
        try:
            self._register(pb.RegisterSystemRequest(name=region.name, key=region.key, byte_size=region.size),
                           timeout=self.timeout)
        except grpc.RpcError as error:
            region.release()
            raise ServerError.from_rpc_error(error) from error
        self._regions.append(region)
        return region

    def register_cuda(self, name: str, raw_handle: bytes, byte_size: int, device: int = 0) -> None:
        """Registers device memory that another library exported (SharedMemory.RegisterCuda).

        The low-level call under cuda_shared_memory(): `raw_handle` is the 64
        bytes of a ``cudaIpcMemHandle_t`` (``cupy.cuda.runtime.ipcGetMemHandle``),
        `byte_size` the bytes from the allocation's base that the server maps.
        Requests then name ranges of it in ``pb.SharedMemoryRef`` (this client
        builds those refs itself only for CuPy views from a CudaRegion);
        unregister with ``client.unregister(name)``.

        Raises:
            ValueError/TypeError: a bad name, handle length, byte_size or
                device, before anything is sent.
            ServerError: the server's refusal: FAILED_PRECONDITION from a
                server without a GPU (``--backend=cpu``) or a handle it cannot
                open, ALREADY_EXISTS, INVALID_ARGUMENT, UNIMPLEMENTED without
                ``--shared_memory``.
        """
        request = _cuda.check_registration(name, raw_handle, byte_size, device)
        try:
            self._register_cuda(request, timeout=self.timeout)
        except grpc.RpcError as error:
            raise ServerError.from_rpc_error(error) from error

    def unregister(self, name: str) -> None:
        """Unregisters the region `name` (SharedMemory.Unregister; "" for all of them)."""
        if not isinstance(name, str):
            raise TypeError(f"name must be a string, not {type(name).__name__}")
        try:
            self._unregister(pb.UnregisterRequest(name=name), timeout=self.timeout)
        except grpc.RpcError as error:
            raise ServerError.from_rpc_error(error) from error

    def cuda_shared_memory(self, what: Any, name: Optional[str] = None, *,
                           device: Optional[int] = None) -> _cuda.Region:
        """Device memory registered with the server as a CUDA region (CUDA IPC).

        Needs CuPy here and a server on this host's GPUs running
        ``primserve --backend=cuda --shared_memory``.

        `what` is a size in bytes (the region cudaMallocs it on `device`,
        default 0, and frees it when closed) or an existing CuPy array to
        wrap (1-D or not, C-contiguous; the region is its bytes, the array
        stays the caller's). CuPy arrays from ``region.array(dtype, count,
        offset=0)`` (or, wrapping, views of the wrapped array) are read by the
        server's kernels in place when passed as inputs, and as ``out=`` they
        receive the answer, returned as a CuPy view of what was written; no
        bytes go through gRPC or the host. The client synchronizes the
        region's device before each such call, so CuPy's writes are seen.
        A CuPy array that is not in a region of this client raises TypeError.
        Closing (or leaving the ``with`` block) unregisters the region.

        Args:
            what: bytes to allocate (>= 1), or a CuPy array to wrap.
            name: the region's name on the server; default one made from the
                device and the address.
            device: the CUDA device for an allocation (an array's own device
                when wrapping).

        Raises:
            ImportError: CuPy is not installed.
            ServerError: the server's refusal, e.g. FAILED_PRECONDITION from
                a CPU server.

        >>> import cupy as cp  # doctest: +SKIP
        >>> with client.cuda_shared_memory(4 * 2**20) as region:  # doctest: +SKIP
        ...     a = region.array(np.int32, 2**20)
        ...     a[:] = cp.arange(2**20, dtype=cp.int32)
        ...     answer = client.scan(a, out=a)        # in place on the GPU
        ...     int(answer[-1]) == int(cp.arange(2**20).sum())
        True
        >>> x = cp.random.rand(1000)  # doctest: +SKIP
        >>> with client.cuda_shared_memory(x) as region:  # doctest: +SKIP
        ...     total = client.reduce(x)
        """
        _cuda.check_what(what)
        export = _cuda.Export(what, device)
        region = _cuda.Region(name or _cuda.default_name(export), export, self._unregister_region)
        try:
            self.register_cuda(region.name, export.handle, export.byte_size, export.device)
        except BaseException:
            region._release()
            raise
        self._regions.append(region)
        return region

    def _unregister_region(self, region: Any) -> None:
        if region in self._regions:
            self._regions.remove(region)
        self.unregister(region.name)

    def multiplex(self) -> "Multiplex":
        """A Multiplex stream: many calls on one gRPC stream, each answered as it finishes.

        Its methods are this client's (pipeline() too, its run() a Future),
        but send at once and return a ``concurrent.futures.Future`` of the
        answer; a refused call's future raises ServerError, and the stream
        goes on. Leaving the ``with`` block waits for every answer. The
        stream has no deadline (the client's timeout bounds unary calls
        only). With several servers, a call naming buffers goes on a stream
        to the instance holding them, opened on first use: one session may
        use buffers of every instance, each call still answered through its
        own Future.

        >>> with client.multiplex() as stream:
        ...     futures = [stream.reduce(np.arange(n, dtype=np.int64)) for n in (10, 100, 1000)]
        >>> [f.result() for f in futures]
        [45, 4950, 499500]
        """
        return Multiplex(self)

    def health(self, service: str = "") -> str:
        """The standard gRPC health check: "SERVING", or "NOT_SERVING" while draining.

        Args:
            service: "" for the server as a whole, or a service's full name
                ("primserve.v1.Primitives").

        >>> client.health()
        'SERVING'
        """
        try:
            response = self._health(_channel.HEALTH_REQUEST(service=service), timeout=self.timeout)
        except grpc.RpcError as error:
            raise ServerError.from_rpc_error(error) from error
        return _channel.health_status(response)


class _Instance:
    """One connection to a buffer's instance, with the methods called on it."""

    def __init__(self, channel: grpc.Channel):
        self.channel = channel
        self.methods = _methods.bind(channel)
        self.buffers = _BufferMethods(channel)


class _BufferMethods:
    """The Buffers service's methods on one channel."""

    def __init__(self, channel: grpc.Channel):
        paths = _channel.BUFFER_PATHS
        self.create = channel.unary_unary(paths["Create"], request_serializer=pb.CreateBufferRequest.SerializeToString,
                                          response_deserializer=pb.BufferInfo.FromString)
        self.write = channel.stream_unary(paths["Write"])
        self.read = channel.unary_stream(paths["Read"])
        self.free = channel.unary_unary(paths["Free"], request_serializer=pb.FreeBufferRequest.SerializeToString,
                                        response_deserializer=pb.FreeBufferResponse.FromString)
        self.list = channel.unary_unary(paths["List"], request_serializer=pb.ListBuffersRequest.SerializeToString,
                                        response_deserializer=pb.ListBuffersResponse.FromString)


def _let_go(error: BaseException) -> None:
    """Frees the gRPC calls that `error`'s traceback holds (as `self` of
    gRPC's frames). Kept to interpreter exit, a call's __del__ waits for a
    lock that a gRPC thread, frozen at exit, can hold: the process hung until
    a second Ctrl-C."""
    traceback.clear_frames(error.__traceback__)


class _Calls:
    """The gRPC calls of one streamed call, put() or get(), to cancel them all
    at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: List[Any] = []
        self._cancelled = False

    def add(self, call: Any) -> Any:
        with self._lock:
            self._calls.append(call)
            if self._cancelled:
                call.cancel()
        return call

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            for call in self._calls:
                call.cancel()

    def forget(self) -> None:
        """Drops the calls, so that none outlives the put() or get() (see Client._stream)."""
        with self._lock:
            self._calls.clear()


def _off_this_thread(work: Any, cancel: Any) -> Any:
    """work() (which makes its gRPC calls) on a thread of its own, waited for
    here, so that a Ctrl-C lands in this wait and never inside gRPC's code,
    which holds its locks as a call starts, waits and ends: an acquire
    interrupted there can leave a lock held, and the call's cancel() or its
    finalizer then waits for it forever (1 of 144 interrupted calls hung so
    here). The interrupt cancels the work's calls (cancel()), waits for the
    thread and propagates; work()'s own errors propagate as they are."""
    result: Future = Future()

    def run() -> None:
        try:
            result.set_result(work())
        except BaseException as error:  # noqa: re-raised on the waiting thread
            result.set_exception(error)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        return result.result()
    except BaseException:
        if not result.done():
            cancel()
            # Ended before the interrupt goes on (promptly, once cancelled): a
            # thread frozen at exit inside gRPC's locks would hang the exit.
            thread.join(timeout=10)
        raise


def _run_each(count: int, f: Any) -> None:
    """f(i, calls) for i in range(count), each on a thread of its own, joined
    here (a Ctrl-C lands in the join, not inside gRPC's locks: see
    _off_this_thread); the first ServerError (or other error) raised is
    raised here, once every call has ended: the first error cancels the
    others, and so does Ctrl-C on this thread (then raised at once)."""
    errors: List[BaseException] = []
    calls = _Calls()

    def run(i: int) -> None:
        try:
            f(i, calls)
        except grpc.RpcError as error:
            errors.append(ServerError.from_rpc_error(error))
            calls.cancel()
        except Exception as error:  # noqa: re-raised on the calling thread
            errors.append(error)
            calls.cancel()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    except BaseException as error:
        calls.cancel()
        for thread in threads:
            if thread.ident is not None:
                thread.join()  # promptly: their calls are cancelled
        calls.forget()
        _let_go(error)
        raise
    calls.forget()
    if errors:
        raise errors[0]


_END = object()  # ends a Multiplex stream's request queue


def _failed(failure: Exception, route: Optional[_routes.Route]) -> Exception:
    """A call's failure, as seen from a stream to its route's instance."""
    return route.failed(failure) if route is not None and isinstance(failure, ServerError) else failure


class _Stream:
    """One Multiplex gRPC stream: frames written from a queue, and a thread
    matching each answer to its call's Future by id. Once the stream fails,
    every call on it fails with that error, later ones at once."""

    def __init__(self, method: Any, routes: Optional[_routes.Routes]):
        self._requests: "queue.Queue[Any]" = queue.Queue()
        self._pending: Dict[int, Tuple[Future, _calls.Call, Optional[_routes.Route]]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._closed = False
        self._failure: Optional[Exception] = None
        self._routes = routes
        self._answers = method(iter(self._requests.get, _END))
        self._reader = threading.Thread(target=self._read, name="primserve-multiplex", daemon=True)
        self._reader.start()

    def send(self, call: _calls.Call, route: Optional[_routes.Route]) -> Future:
        future: Future = Future()
        with self._lock:  # so that no frame can follow close()'s end of the queue
            if self._closed:
                raise ValueError("this Multiplex stream is closed")
            if self._failure is not None:
                future.set_exception(_failed(self._failure, route))
                return future
            request_id = next(self._ids)
            self._pending[request_id] = (future, call, route)
            self._requests.put(_multiplex.frame(request_id, call))
        return future

    def _read(self) -> None:
        failure: Exception = ServerError(grpc.StatusCode.UNKNOWN, "the Multiplex stream ended before answering")
        try:
            for buffer in self._answers:
                answer = _multiplex.read(buffer)
                with self._lock:
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
            self._answers.cancel()
            failure = error
        with self._lock:
            self._failure = failure
            unanswered, self._pending = list(self._pending.values()), {}
        for future, _, route in unanswered:
            future.set_exception(_failed(failure, route))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._requests.put(_END)
        self._reader.join()


class Multiplex:
    """Calls on Multiplex streams, from Client.multiplex(); each method returns a Future.

    Calls naming no buffer go on one stream to the client's address. With
    several servers, a call naming buffers goes on a stream to the instance
    holding them (one per instance, opened on first use); one naming buffers
    of two instances raises ValueError naming both, and one naming a buffer
    no instance holds gets a Future raising ServerError NOT_FOUND.

    Thread-safe: any thread may make calls. A thread per stream reads its
    answers and completes the futures; an error that ends a stream fails
    every call still waiting on it with its ServerError (NOT_FOUND saying
    so where a buffer's instance went away).
    """

    def __init__(self, client: Client):
        self._client = client
        self._streams: Dict[Optional[str], _Stream] = {}  # by location; None: the client's address
        self._lock = threading.Lock()
        self._closed = False

    def _stream(self, location: Optional[str]) -> _Stream:
        with self._lock:
            if self._closed:
                raise ValueError("this Multiplex stream is closed")
            stream = self._streams.get(location)
            if stream is None:
                method = (self._client._multiplex if location is None
                          else self._client._routes.instance(location).methods.multiplex)
                stream = self._streams[location] = _Stream(method, self._client._routes)
            return stream

    def _invoke(self, call: _calls.Call) -> Future:
        if self._closed:
            raise ValueError("this Multiplex stream is closed")
        call = _buffers.place(call, None)
        try:
            route = self._client._route(call)
        except ServerError as error:  # no instance holds a buffer it names: this call fails alone
            future: Future = Future()
            future.set_exception(error)
            return future
        return self._stream(None if route is None else route.location).send(call, route)

    def close(self) -> None:
        """Sends no more calls and waits for the answers to those sent."""
        with self._lock:
            self._closed = True
            streams = list(self._streams.values())
        for stream in streams:
            stream.close()

    def __enter__(self) -> "Multiplex":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def scan(self, a: np.ndarray, op: str = "sum", exclusive: bool = False,
             segments: _calls.Segments = None, *, reproducible: bool = False,
             dtype: Any = None) -> "Future[np.ndarray]":
        """Client.scan, answered through a Future (reproducible=True: the unary call's bits)."""
        return self._invoke(_calls.scan(a, op, exclusive, segments, reproducible, dtype))

    def reduce(self, a: np.ndarray, op: str = "sum", segments: _calls.Segments = None, *,
               reproducible: bool = False, dtype: Any = None) -> "Future[Any]":
        """Client.reduce, answered through a Future (reproducible=True: the unary call's bits)."""
        return self._invoke(_calls.reduce(a, op, segments, reproducible, dtype))

    def select(self, a: np.ndarray, where: Optional[_calls.Where] = None, *, flags: Optional[np.ndarray] = None,
               output: str = "values", partition: bool = False) -> "Future[Any]":
        """Client.select, answered through a Future."""
        return self._invoke(_calls.select(a, where, flags, output, partition))

    def unique(self, a: np.ndarray) -> "Future[np.ndarray]":
        """Client.unique, answered through a Future."""
        return self._invoke(_calls.unique(a))

    def run_length_encode(self, a: np.ndarray) -> "Future[Runs]":
        """Client.run_length_encode, answered through a Future."""
        return self._invoke(_calls.run_length_encode(a))

    def reduce_by_key(self, keys: np.ndarray, values: np.ndarray, op: str = "sum", *,
                      reproducible: bool = False) -> "Future[KeyedReduction]":
        """Client.reduce_by_key, answered through a Future (reproducible=True: the unary call's bits)."""
        return self._invoke(_calls.reduce_by_key(keys, values, op, reproducible))

    def aggregate_by_key(self, keys: np.ndarray, values: np.ndarray, num_keys: int,
                         op: str = "sum", *, reproducible: bool = False) -> "Future[np.ndarray]":
        """Client.aggregate_by_key, answered through a Future (reproducible=True: the unary call's bits)."""
        return self._invoke(_calls.aggregate_by_key(keys, values, num_keys, op, reproducible))

    def sort(self, keys: np.ndarray, values: Optional[np.ndarray] = None, descending: bool = False,
             return_indices: bool = False, segment_offsets: _calls.Segments = None) -> "Future[Any]":
        """Client.sort, answered through a Future."""
        return self._invoke(_calls.sort(keys, values, descending, return_indices, segment_offsets))

    def gather(self, values: np.ndarray, indices: np.ndarray) -> "Future[np.ndarray]":
        """Client.gather, answered through a Future."""
        return self._invoke(_calls.gather(values, indices))

    def pipeline(self) -> _pipeline.Pipeline:
        """Client.pipeline on this stream: its run() returns a Future of the answer."""
        return _pipeline.Pipeline(self._invoke)
