"""Where calls that name a resident buffer go when a client's address names
several servers ("ipv4:a:1,b:2", "dns:///name:port").

A buffer lives on one instance, so every call naming it (inputs, out=,
put's writes, get, free, a pipeline's steps, a Multiplex request) must reach
that one: as in Arrow Flight, each buffer has a location (BufferInfo.location,
the instance's --advertise_address) and the client connects to it there.
Calls naming no buffer keep going to the address as given. Both clients share
this bookkeeping; each makes its own connections (``connect``) and calls.
"""

from __future__ import annotations

import socket
import threading
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple

import grpc

from primserve import _calls
from primserve.errors import ServerError


def spreads(address: str) -> bool:
    """Whether a gRPC target may name several servers: a list, or a DNS name."""
    return "," in address or address.startswith("dns:")


def addresses(address: str) -> List[str]:
    """The servers a target names, each as "host:port": an ipv4:/ipv6: list's
    addresses, a dns: name's addresses now; none for any other target."""
    for scheme in ("ipv4:", "ipv6:"):
        if address.startswith(scheme):
            return [a for a in address[len(scheme):].split(",") if a]
    if not address.startswith("dns:"):
        return []
    name = address[len("dns:"):]
    if name.startswith("//"):
        name = name[2:].split("/", 1)[-1]
    host, _, port = name.rpartition(":")
    try:
        found = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    resolved = [f"[{a[4][0]}]:{port}" if a[0] == socket.AF_INET6 else f"{a[4][0]}:{port}" for a in found]
    return list(dict.fromkeys(resolved))


def named(call: _calls.Call) -> Tuple[List[str], List[str]]:
    """The buffers a placed call names anywhere in it (a pipeline's steps
    too): its inputs' refs and its outputs'."""
    inputs: List[str] = []
    outputs: List[str] = []

    def walk(message: Any) -> None:
        kind = message.DESCRIPTOR.full_name
        if kind == "primserve.v1.Array":
            if message.HasField("buffer"):
                inputs.append(message.buffer.name)
            return
        if kind == "primserve.v1.OutputBuffers":
            outputs.extend(name for _, name in message.ListFields())
            return
        for field, value in message.ListFields():
            if field.message_type is None:
                continue
            for item in (value if field.label == field.LABEL_REPEATED else [value]):
                walk(item)

    walk(call.message)
    return inputs, outputs


def gone(error: ServerError, name: str, location: str) -> ServerError:
    """A call's error after it was sent to `location` for buffer `name`:
    nothing answering there is NOT_FOUND saying the instance went away."""
    if error.code != grpc.StatusCode.UNAVAILABLE:
        return error
    return ServerError(grpc.StatusCode.NOT_FOUND,
                       f"buffer {name} was on the instance at {location}, which does not answer "
                       f"({error.details}): it went away, and its buffers with it")


class Route(NamedTuple):
    """Where a call naming buffers goes: the instance at `location`; `name`
    (a buffer it names) for its errors; `outputs`, the buffers it stores,
    remembered there once it succeeds."""

    location: str
    name: str
    outputs: List[str]

    def failed(self, error: ServerError) -> ServerError:
        return gone(error, self.name, self.location)


def different(first: str, first_at: str, name: str, at: str) -> ValueError:
    return ValueError(f"buffers {first} (at {first_at}) and {name} (at {at}) are on different instances; "
                      "one call (a pipeline's steps together, a Multiplex request) reads buffers of one")


class Routes:
    """Buffer names to locations, and the connections made to each location.

    ``connect(location, index)`` makes what a client calls an instance through
    (its channel and methods); index i > 0 gets a connection of its own, for
    striped transfers. Thread-safe.
    """

    def __init__(self, address: str, connect: Callable[[str, int], Any]):
        self._connect = connect
        self._addresses = addresses(address)
        self._lock = threading.Lock()
        self._locations: Dict[str, str] = {}
        self._instances: Dict[Tuple[str, int], Any] = {}

    def instance(self, location: str, index: int = 0) -> Any:
        with self._lock:
            made = self._instances.get((location, index))
            if made is None:
                made = self._instances[(location, index)] = self._connect(location, index)
            return made

    def instances(self) -> Iterable[Any]:
        """An instance (its first connection) for each server the address
        names and each location seen, for looking buffers up."""
        with self._lock:
            locations = [location for (location, index) in self._instances if index == 0]
        return [self.instance(location) for location in dict.fromkeys(self._addresses + locations)]

    def location_of(self, name: str) -> Optional[str]:
        with self._lock:
            return self._locations.get(name)

    def remember(self, names: Iterable[str], location: str) -> None:
        with self._lock:
            for name in names:
                self._locations[name] = location

    def forget(self, name: str) -> None:
        with self._lock:
            self._locations.pop(name, None)

    def find_in(self, name: str, listed: Iterable[Any]) -> Optional[str]:
        """The location of `name` among ListBuffersResponses (None: in none); remembered."""
        for response in listed:
            for info in response.buffers:
                if info.name == name:
                    self.remember([name], info.location)
                    return info.location
        return None

    def close(self) -> List[Any]:
        """Forgets every instance and returns them, for the client to close."""
        with self._lock:
            made, self._instances = list(self._instances.values()), {}
            return made


def not_found(name: str) -> ServerError:
    return ServerError(grpc.StatusCode.NOT_FOUND,
                       f"no buffer named {name} on the instances this client knows; "
                       "a buffer is lost with the instance that held it")
