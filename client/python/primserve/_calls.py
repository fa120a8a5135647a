"""Each client method as a Call: the RPC, its checked request, and how to read the answer.

The blocking and the asyncio clients and their Multiplex streams share these
and differ only in how they send the request, so every check on the arguments
happens before anything is sent, in all of them.
"""

import math
import numbers
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from primserve import _arrays, _steps, _wire
from primserve.results import ArgExtreme, KeyedReduction, Partition, Runs, Selection, Sorted
from primserve.v1 import primitives_pb2 as pb


class Call(NamedTuple):
    rpc: str  # method of the primserve.v1.Primitives service
    message: Message  # the request with every parameter and each Array's dtype, no data
    arrays: Dict[str, np.ndarray]  # each Array field's checked data, by field name
    response: Descriptor  # the response's message type
    parse: Callable[[Any], Any]  # the response as _wire.parse reads it -> what the method returns
    streams: bool = True  # whether the *Stream form of rpc can answer it
    # A pipeline's serialized request (each step's arrays spliced in), where
    # message + arrays cannot say it; such a call's parse reads the serialized
    # response itself, (buffer, start, end), since it nests one per step.
    body: Optional[bytes] = None

    @property
    def request(self) -> bytes:
        """The unary request, serialized with the arrays' data spliced in (see _wire)."""
        return self.body if self.body is not None else _wire.serialize(self.message, self.arrays)

    def answer(self, buffer: bytes, start: int = 0, end: Optional[int] = None,
               placed: Optional[Dict[str, np.ndarray]] = None) -> Any:
        """What the method returns for its response in buffer[start:end]."""
        if self.body is not None:
            return self.parse(buffer, start, len(buffer) if end is None else end)
        return self.parse(_wire.parse(buffer, self.response, start, end, placed))


def output_fields(call: Call) -> List[str]:
    """The arrays the call answers, in the order its answer holds them, by
    their OutputLocation and OutputBuffers field names (a tuple out= names
    them in this order)."""
    if call.rpc == "Select":
        return {pb.SelectRequest.VALUES: ["values"], pb.SelectRequest.INDICES: ["indices"],
                pb.SelectRequest.VALUES_AND_INDICES: ["values", "indices"],
                pb.SelectRequest.COUNT: []}[call.message.output]
    if call.rpc == "RunLengthEncode":
        return ["values", "lengths"]
    if call.rpc == "ReduceByKey":
        return ["keys", "values"]
    if call.rpc == "Sort":
        return (["keys"] + (["values"] if call.message.HasField("values") else [])
                + (["indices"] if call.message.return_indices else []))
    return ["values"]


def outputs(call: Call, out: Any) -> List[Tuple[str, str, Any]]:
    """Where out= puts the answer: (OutputLocation field, response field,
    array) for each array placed. `out` is one array (the values; a Select's
    indices with output="indices"; a Sort's keys) or, for a call answering
    several arrays, a tuple of them (or None) in the answer's order."""
    fields = output_fields(call)
    if isinstance(out, (tuple, list)):
        if len(out) != len(fields):
            raise ValueError(f"out= has {len(out)} arrays; {call.rpc} answers {len(fields)} "
                             f"({', '.join(fields) or 'none'}), in that order")
        pairs = [(field, a) for field, a in zip(fields, out) if a is not None]
    elif out is None:
        pairs = []
    else:
        # One array: the keys of a Sort, the indices of a Select that
        # answers only those, else the values.
        one = "keys" if call.rpc == "Sort" else "indices" if fields == ["indices"] else "values"
        pairs = [(one, out)]
    # Scan's and Gather's answer is their `output`.
    return [(field, "output" if field == "values" and call.rpc in ("Scan", "Gather") else field, a)
            for field, a in pairs]


_OPS = {"sum": pb.SUM, "prod": pb.PROD, "min": pb.MIN, "max": pb.MAX, "argmin": pb.ARGMIN, "argmax": pb.ARGMAX}
_SCAN_OPS = ("sum", "prod", "min", "max")
_AGGREGATE_OPS = ("sum", "min", "max")

# Predicate kinds by name, and the comparison operators as aliases.
_KINDS = {
    "nonzero": pb.Predicate.NONZERO,
    "eq": pb.Predicate.EQ, "==": pb.Predicate.EQ,
    "ne": pb.Predicate.NE, "!=": pb.Predicate.NE,
    "lt": pb.Predicate.LT, "<": pb.Predicate.LT,
    "le": pb.Predicate.LE, "<=": pb.Predicate.LE,
    "gt": pb.Predicate.GT, ">": pb.Predicate.GT,
    "ge": pb.Predicate.GE, ">=": pb.Predicate.GE,
    "in_range": pb.Predicate.IN_RANGE,
}

_OUTPUTS = {
    "values": pb.SelectRequest.VALUES,
    "indices": pb.SelectRequest.INDICES,
    "both": pb.SelectRequest.VALUES_AND_INDICES,
    "count": pb.SelectRequest.COUNT,
}

Segments = Optional[Union[Sequence[int], np.ndarray]]
Where = Union[str, Tuple[Any, ...]]


def _op(op: str, allowed: Sequence[str], method: str) -> int:
    name = op.lower() if isinstance(op, str) else op
    if name not in allowed:
        raise ValueError(f"{method} takes op {', '.join(map(repr, allowed))}; got {op!r}")
    return _OPS[name]


def _offsets(segments: Segments) -> Optional[np.ndarray]:
    if segments is None:
        return None
    offsets = _arrays.to_offsets(segments)
    if offsets.size == 0:
        raise ValueError("segments is empty; its first start is 0 (segments=None means one segment over all of a)")
    return offsets


def _reproducible(value: Any) -> bool:
    """The reproducible= flag: a bool (numpy's included), anything else TypeError before sending."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"reproducible must be a bool, not {type(value).__name__}")
    return bool(value)


def _first_if(whole: bool, values: np.ndarray) -> Any:
    """values[0] when the call named no segments (one result, a scalar like numpy's), else values."""
    return values[0] if whole else values


def _accumulator(dtype: Any, a: np.ndarray) -> Optional[int]:
    """accumulator_dtype for numpy's dtype= (None where it is a's own)."""
    if dtype is None or np.dtype(dtype) == a.dtype:
        return None
    if np.dtype(dtype) not in _arrays.DTYPES:
        raise TypeError(f"dtype {np.dtype(dtype)} is not one of {_arrays.SUPPORTED}")
    return _arrays.DTYPES[np.dtype(dtype)]


def scan(a: np.ndarray, op: str, exclusive: bool, segments: Segments, reproducible: bool = False,
         dtype: Any = None) -> Call:
    a = _arrays.check_array(a, "a")
    request = pb.ScanRequest(input=_arrays.header(a), op=_op(op, _SCAN_OPS, "scan"), exclusive=bool(exclusive),
                             reproducible=_reproducible(reproducible))
    accumulator = _accumulator(dtype, a)
    if accumulator is not None:
        request.accumulator_dtype = accumulator
    offsets = _offsets(segments)
    if offsets is not None:
        request.segment_offsets.extend(offsets.tolist())
    # ScanStream does not take accumulator_dtype: a widened scan stays unary.
    return Call("Scan", request, {"input": a}, pb.ScanResponse.DESCRIPTOR,
                lambda response: response.output, streams=accumulator is None)


def reduce(a: np.ndarray, op: str, segments: Segments, reproducible: bool = False, dtype: Any = None) -> Call:
    a = _arrays.check_array(a, "a")
    code = _op(op, tuple(_OPS), "reduce")
    request = pb.ReduceRequest(input=_arrays.header(a), op=code, reproducible=_reproducible(reproducible))
    accumulator = _accumulator(dtype, a)
    if accumulator is not None:
        request.accumulator_dtype = accumulator
    offsets = _offsets(segments)
    if offsets is not None:
        request.segment_offsets.extend(offsets.tolist())
    whole = offsets is None
    if whole and a.size == 0 and code not in (pb.SUM, pb.PROD) and not isinstance(a, _steps.StepArray):
        # As numpy: an extreme of nothing is an error, not the identity (the
        # server's answer for an empty segment). A pipeline step's output
        # has its length only on the server.
        raise ValueError(f"zero-size array to reduction operation {op} which has no identity; "
                         f"pass segments=[0] for the server's answer (the op's identity)")

    def parse(response: Any) -> Any:
        values = _first_if(whole, response.values)
        if code in (pb.ARGMIN, pb.ARGMAX):
            return ArgExtreme(values, _first_if(whole, response.indices))
        return values

    # ReduceStream does not take accumulator_dtype: a widened reduce stays unary.
    return Call("Reduce", request, {"input": a}, pb.ReduceResponse.DESCRIPTOR, parse,
                streams=accumulator is None)


def _scalar(value: Any, dtype: np.dtype, field: str) -> pb.Scalar:
    """The operand in the Scalar field that fits the array's dtype.

    Integer arrays take integers (int_value, or uint_value for unsigned
    dtypes), checked against the dtype's range; float arrays take any real
    number as float_value.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{field} must be a number, not {type(value).__name__}")
    if dtype.kind == "f":
        return pb.Scalar(float_value=float(value))
    if not isinstance(value, numbers.Integral):
        raise TypeError(f"{field} {value!r} is not an integer, and the array is {dtype}")
    value = int(value)
    limits = np.iinfo(dtype)
    if not limits.min <= value <= limits.max:
        raise ValueError(f"{field} {value} does not fit {dtype} [{limits.min}, {limits.max}]")
    return pb.Scalar(uint_value=value) if dtype.kind == "u" else pb.Scalar(int_value=value)


def _integer_predicate(kind: int, bounds: Tuple[Any, ...], dtype: np.dtype) -> Optional[pb.Predicate]:
    """The predicate over an integer array that keeps what numpy's comparison
    with real (not integer, or outside the dtype) bounds keeps, in integer
    bounds the server takes; None when every bound is an integer of the dtype
    (sent as given)."""
    limits = np.iinfo(dtype)
    if all(isinstance(b, numbers.Integral) and limits.min <= int(b) <= limits.max for b in bounds):
        return None
    if any(math.isnan(b) for b in bounds):
        # Every comparison with NaN is False, but NE, which is True.
        low, high = (limits.min, None) if kind == pb.Predicate.NE else (0, 0)
    else:
        # An infinite bound acts as one just past the dtype's range.
        bounds = tuple(limits.max + 1 if b == math.inf else limits.min - 1 if b == -math.inf else b
                       for b in bounds)
        v = bounds[0]
        whole = isinstance(v, numbers.Integral) or float(v).is_integer()
        if kind == pb.Predicate.NE:
            if whole and limits.min <= int(v) <= limits.max:
                return pb.Predicate(kind=kind, operand=_scalar(int(v), dtype, "the where operand"))
            low, high = limits.min, None  # x != v for every x
        else:
            low, high = {
                pb.Predicate.GT: (math.floor(v) + 1, None), pb.Predicate.GE: (math.ceil(v), None),
                pb.Predicate.LT: (None, math.ceil(v)), pb.Predicate.LE: (None, math.floor(v) + 1),
                pb.Predicate.EQ: (int(v), int(v) + 1) if whole else (0, 0),
                pb.Predicate.IN_RANGE: (math.ceil(v), math.ceil(bounds[-1])),
            }[kind]
    # low <= x < high within [min, max] (None: unbounded); empty as 0 <= x < 0.
    low = limits.min if low is None else max(int(low), limits.min)
    high = None if high is None else min(int(high), limits.max + 1)
    if low > limits.max or (high is not None and high <= low):
        low, high = 0, 0
    elif high is None or high > limits.max:
        return pb.Predicate(kind=pb.Predicate.GE, operand=_scalar(low, dtype, "the where operand"))
    return pb.Predicate(kind=pb.Predicate.IN_RANGE, operand=_scalar(low, dtype, "the where operand"),
                        upper=_scalar(high, dtype, "the where upper bound"))


def _predicate(where: Where, dtype: np.dtype) -> pb.Predicate:
    if not isinstance(where, (str, tuple, list)):
        raise TypeError(f"where must be a kind name or a tuple like ('gt', 0.5), not {type(where).__name__}")
    parts = (where,) if isinstance(where, str) else tuple(where)
    name = parts[0].lower() if parts and isinstance(parts[0], str) else None
    if name not in _KINDS:
        raise ValueError(f"where must start with one of {', '.join(map(repr, _KINDS))}; got {where!r}")
    kind = _KINDS[name]
    operands = {pb.Predicate.NONZERO: 0, pb.Predicate.IN_RANGE: 2}.get(kind, 1)
    if len(parts) != 1 + operands:
        raise ValueError(f"where=({name!r}, ...) takes {operands} operand(s); got {where!r}")
    for bound in parts[1:]:
        if isinstance(bound, (bool, np.bool_)) or not isinstance(bound, numbers.Real):
            raise TypeError(f"the where operand must be a number, not {type(bound).__name__}")
    if operands >= 1 and dtype.kind in "iu":
        translated = _integer_predicate(kind, parts[1:], dtype)
        if translated is not None:
            return translated
    predicate = pb.Predicate(kind=kind)
    if operands >= 1:
        predicate.operand.CopyFrom(_scalar(parts[1], dtype, "the where operand"))
    if operands == 2:
        predicate.upper.CopyFrom(_scalar(parts[2], dtype, "the where upper bound"))
    return predicate


def select(a: np.ndarray, where: Optional[Where], flags: Optional[np.ndarray], output: str, partition: bool) -> Call:
    a = _arrays.check_array(a, "a")
    if (where is None) == (flags is None):
        raise ValueError("select takes exactly one of where= and flags=")
    if output not in _OUTPUTS:
        raise ValueError(f"output must be one of {', '.join(map(repr, _OUTPUTS))}; got {output!r}")
    if partition and output == "count":
        raise ValueError("partition=True does not apply to output='count'")
    request = pb.SelectRequest(input=_arrays.header(a), output=_OUTPUTS[output], partition=bool(partition))
    arrays = {"input": a}
    if where is not None:
        request.predicate.CopyFrom(_predicate(where, a.dtype))
    else:
        if isinstance(flags, np.ndarray) and flags.dtype == np.bool_:
            # numpy's mask: one vectorized copy to the narrowest dtype the server takes.
            flags = flags.astype(np.int32)
        flags = _arrays.check_integer_array(flags, "flags")
        _arrays.check_same_length(a, "a", flags, "flags")
        request.flags.CopyFrom(_arrays.header(flags))
        arrays["flags"] = flags

    def parse(response: Any) -> Any:
        if output == "count":
            return response.count
        if output == "values":
            answer = response.values
        elif output == "indices":
            answer = response.indices
        else:
            answer = Selection(response.values, response.indices)
        if not partition:
            return answer
        kept = response.count
        if output == "both":
            return Partition(Selection(answer.values[:kept], answer.indices[:kept]),
                             Selection(answer.values[kept:], answer.indices[kept:]))
        return Partition(answer[:kept], answer[kept:])

    # The server refuses to stream a partition.
    return Call("Select", request, arrays, pb.SelectResponse.DESCRIPTOR, parse, streams=not partition)


def unique(a: np.ndarray) -> Call:
    a = _arrays.check_array(a, "a")
    return Call("Unique", pb.UniqueRequest(input=_arrays.header(a)), {"input": a},
                pb.UniqueResponse.DESCRIPTOR, lambda response: response.values)


def run_length_encode(a: np.ndarray) -> Call:
    a = _arrays.check_array(a, "a")
    return Call("RunLengthEncode", pb.RunLengthEncodeRequest(input=_arrays.header(a)), {"input": a},
                pb.RunLengthEncodeResponse.DESCRIPTOR, lambda response: Runs(response.values, response.lengths))


def reduce_by_key(keys: np.ndarray, values: np.ndarray, op: str, reproducible: bool = False) -> Call:
    keys = _arrays.check_array(keys, "keys")
    values = _arrays.check_array(values, "values")
    _arrays.check_same_length(keys, "keys", values, "values")
    request = pb.ReduceByKeyRequest(keys=_arrays.header(keys), values=_arrays.header(values),
                                    op=_op(op, _SCAN_OPS, "reduce_by_key"),
                                    reproducible=_reproducible(reproducible))
    return Call("ReduceByKey", request, {"keys": keys, "values": values},
                pb.ReduceByKeyResponse.DESCRIPTOR, lambda response: KeyedReduction(response.keys, response.values))


def aggregate_by_key(keys: np.ndarray, values: np.ndarray, num_keys: int, op: str,
                     reproducible: bool = False) -> Call:
    keys = _arrays.check_integer_array(keys, "keys")
    values = _arrays.check_array(values, "values")
    _arrays.check_same_length(keys, "keys", values, "values")
    if isinstance(num_keys, (bool, np.bool_)) or not isinstance(num_keys, numbers.Integral) or num_keys < 1:
        raise ValueError(f"num_keys must be an integer >= 1; got {num_keys!r}")
    request = pb.AggregateByKeyRequest(keys=_arrays.header(keys), values=_arrays.header(values),
                                       op=_op(op, _AGGREGATE_OPS, "aggregate_by_key"), num_keys=int(num_keys),
                                       reproducible=_reproducible(reproducible))
    return Call("AggregateByKey", request, {"keys": keys, "values": values},
                pb.AggregateByKeyResponse.DESCRIPTOR, lambda response: response.values)


def sort(keys: np.ndarray, values: Optional[np.ndarray], descending: bool, return_indices: bool,
         segments: Segments) -> Call:
    keys = _arrays.check_array(keys, "keys")
    request = pb.SortRequest(keys=_arrays.header(keys), descending=bool(descending),
                             return_indices=bool(return_indices))
    arrays = {"keys": keys}
    if values is not None:
        values = _arrays.check_array(values, "values")
        _arrays.check_same_length(keys, "keys", values, "values")
        request.values.CopyFrom(_arrays.header(values))
        arrays["values"] = values
    offsets = _offsets(segments)
    if offsets is not None:
        request.segment_offsets.extend(offsets.tolist())
    plain = values is None and not return_indices

    def parse(response: Any) -> Any:
        if plain:
            return response.keys
        return Sorted(response.keys, response.values if values is not None else None,
                      response.indices if return_indices else None)

    # Sort has no *Stream RPC.
    return Call("Sort", request, arrays, pb.SortResponse.DESCRIPTOR, parse, streams=False)


def gather(values: np.ndarray, indices: np.ndarray) -> Call:
    values = _arrays.check_array(values, "values")
    indices = _arrays.check_array(indices, "indices")
    if indices.dtype != np.int64:
        raise TypeError(f"indices has dtype {indices.dtype}; gather takes int64 positions")
    request = pb.GatherRequest(values=_arrays.header(values), indices=_arrays.header(indices))
    # Gather has no *Stream RPC.
    return Call("Gather", request, {"values": values, "indices": indices}, pb.GatherResponse.DESCRIPTOR,
                lambda response: response.output, streams=False)
