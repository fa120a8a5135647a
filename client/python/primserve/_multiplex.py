"""Calls on a Multiplex stream: each Call framed with an id, each answer matched to its call.

The blocking and asyncio clients' Multiplex classes share these and differ in
how they write frames and wait for answers. A frame wraps the Call's already
serialized request (the arrays' bytes spliced in, see _wire) as the
MultiplexRequest field of its RPC; an answer's response is read in place.
"""

from typing import Any, Dict, NamedTuple

import grpc

from primserve import _calls, _wire
from primserve.errors import ServerError
from primserve.v1 import primitives_pb2 as pb

PATH = "/primserve.v1.Primitives/Multiplex"

_METHODS = pb.DESCRIPTOR.services_by_name["Primitives"].methods_by_name
_REQUEST_ID = pb.MultiplexRequest.DESCRIPTOR.fields_by_name["id"].number
# MultiplexRequest's field for each RPC's request, found by the request's type.
_REQUEST_FIELD: Dict[str, int] = {
    name: next(field.number for field in pb.MultiplexRequest.DESCRIPTOR.fields
               if field.message_type is not None and field.message_type.full_name == method.input_type.full_name)
    for name, method in _METHODS.items() if name != "Multiplex"
}
_RESPONSE = pb.MultiplexResponse.DESCRIPTOR
_RESPONSE_ID = _RESPONSE.fields_by_name["id"].number
_RESPONSE_CODE = _RESPONSE.fields_by_name["code"].number
_RESPONSE_MESSAGE = _RESPONSE.fields_by_name["message"].number
_RESPONSE_TYPE = {field.number: field.message_type.full_name for field in _RESPONSE.oneofs_by_name["response"].fields}
_STATUS_CODES = {code.value[0]: code for code in grpc.StatusCode}


def frame(request_id: int, call: _calls.Call) -> bytes:
    """The MultiplexRequest carrying `call` under `request_id`."""
    return b"".join([_wire.key(_REQUEST_ID, _wire.VARINT), _wire.varint(request_id),
                     _wire.key(_REQUEST_FIELD[call.rpc], _wire.LEN), _wire.varint(len(call.request)), call.request])


class Answer(NamedTuple):
    id: int
    code: int  # a gRPC status code, 0 for OK
    message: str
    response: Any  # (field number, start, end) of the response in the frame; None unless code is 0


def read(buffer: bytes) -> Answer:
    request_id, code, message, response = 0, 0, "", None
    for number, wire_type, value in _wire.fields(buffer, 0, len(buffer)):
        if number == _RESPONSE_ID and wire_type == _wire.VARINT:
            request_id = value
        elif number == _RESPONSE_CODE and wire_type == _wire.VARINT:
            code = value
        elif number == _RESPONSE_MESSAGE and wire_type == _wire.LEN:
            message = bytes(buffer[value[0]:value[1]]).decode("utf-8", "replace")
        elif number in _RESPONSE_TYPE and wire_type == _wire.LEN:
            response = (number, *value)
    return Answer(request_id, code, message, response)


def result(call: _calls.Call, buffer: bytes, answer: Answer) -> Any:
    """What the call's method returns for this answer; raises ServerError for a refusal."""
    if answer.code != 0:
        raise ServerError(_STATUS_CODES.get(answer.code, grpc.StatusCode.UNKNOWN), answer.message)
    if answer.response is None or _RESPONSE_TYPE[answer.response[0]] != call.response.full_name:
        raise ValueError(f"the server's Multiplex answer {answer.id} is not a {call.response.name}")
    _, start, end = answer.response
    return call.answer(buffer, start, end)
