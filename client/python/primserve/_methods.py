"""The method handles both clients call on their channel, bound once per channel.

grpc.Channel and grpc.aio.Channel make handles with the same calls, so the
blocking and the asyncio client share this table.
"""

from typing import Any, Dict, NamedTuple

from primserve import _channel, _multiplex, _streams
from primserve.v1 import primitives_pb2 as pb


class Methods(NamedTuple):
    rpcs: Dict[str, Any]  # unary Primitives methods by name
    streams: Dict[str, Any]  # *Stream methods by the unary RPC's name
    register: Any  # SharedMemory.RegisterSystem
    unregister: Any  # SharedMemory.Unregister
    register_cuda: Any  # SharedMemory.RegisterCuda
    multiplex: Any
    health: Any


def bind(channel: Any) -> Methods:
    return Methods(
        rpcs={name: channel.unary_unary(path) for name, path in _channel.RPC_PATHS.items()},
        streams={rpc: (channel.stream_unary(path) if rpc in _streams.ONE_ANSWER else channel.stream_stream(path))
                 for rpc, path in _streams.PATHS.items()},
        register=channel.unary_unary(_channel.SHM_PATHS["RegisterSystem"],
                                     request_serializer=pb.RegisterSystemRequest.SerializeToString),
        unregister=channel.unary_unary(_channel.SHM_PATHS["Unregister"],
                                       request_serializer=pb.UnregisterRequest.SerializeToString),
        register_cuda=channel.unary_unary(_channel.SHM_PATHS["RegisterCuda"],
                                          request_serializer=pb.RegisterCudaRequest.SerializeToString),
        multiplex=channel.stream_stream(_multiplex.PATH),
        health=channel.unary_unary(_channel.HEALTH_CHECK,
                                   request_serializer=_channel.HEALTH_REQUEST.SerializeToString,
                                   response_deserializer=_channel.HEALTH_RESPONSE.FromString),
    )
