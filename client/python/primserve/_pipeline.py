"""A pipeline built step by step, sent as one Pipeline call.

Each step is a client method's call (the same arguments and checks); an array
argument may be a StepOutput of an earlier step, which never leaves the server.
Left out, a step's input is the output of the step before it (its values; a
Sort's keys), a gather's indices are the latest step's indices, and the two
arrays of aggregate_by_key and reduce_by_key are the outputs of the two steps
before it (keys, then values): so

    client.pipeline().select(a, gt=t, indices=True).gather(k).gather(v) \\
        .aggregate_by_key(num_keys=1024, op="sum").run()

is ``SELECT SUM(v) GROUP BY k WHERE a > t`` in one call, its intermediates kept
on the server (on the GPU with the CUDA backend).

A pipeline is sent as a Call (``call()``) by whatever made it: the blocking
client, the asyncio client or either's Multiplex stream, so it goes where
their other calls go (to the instance holding the buffers it names) and
comes back as theirs do (an answer, an awaitable, a Future).
"""

from typing import Any, Callable, Dict, List, Optional

import numpy as np

from primserve import _buffers, _calls, _steps, _wire
from primserve.v1 import primitives_pb2 as pb

# PipelineStep.op's field for each RPC; PipelineResult.response numbers the
# same kind one further.
_STEP_FIELDS = {field.message_type.name[: -len("Request")]: field
                for field in pb.PipelineStep.DESCRIPTOR.oneofs_by_name["op"].fields}
_RETURNED = pb.PipelineStep.DESCRIPTOR.fields_by_name["returned"].number
_STEPS = pb.PipelineRequest.DESCRIPTOR.fields_by_name["steps"].number
_RESULTS = pb.PipelineResponse.DESCRIPTOR.fields_by_name["results"].number
_RESULT_STEP = pb.PipelineResult.DESCRIPTOR.fields_by_name["step"].number
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


def _place_steps(call: _calls.Call) -> _calls.Call:
    """The call with its StepOutput inputs as Array.step refs."""
    inputs = {name: a.output for name, a in call.arrays.items() if isinstance(a, _steps.StepArray)}
    if not inputs:
        return call
    message = type(call.message)()
    message.CopyFrom(call.message)
    for name, output in inputs.items():
        array = getattr(message, name)
        array.ClearField("dtype")  # the step's output has its own
        array.step.CopyFrom(output.ref())
    arrays = {name: a for name, a in call.arrays.items() if name not in inputs}
    return call._replace(message=message, arrays=arrays, streams=False)


class Pipeline:
    """Steps to run on the server in one call; see the module's docstring.

    Every method adds a step and returns the pipeline. ``returned=True``
    makes that step's answer come back; ``out=`` a buffer name stores it in
    a resident buffer (as the client's methods do). If no step is returned,
    the last one is. ``run()`` sends the pipeline: the returned step's answer,
    as its client method would give it, or a list of them (in step order)
    when several are returned. ``output(step, which)`` names an output of any
    earlier step for a later one.
    """

    def __init__(self, send: Callable[[_calls.Call], Any]):
        self._send = send
        self._calls: List[_calls.Call] = []
        self._returned: List[bool] = []
        self._outputs: List[Dict[str, np.dtype]] = []  # each step's outputs' dtypes

    def __len__(self) -> int:
        return len(self._calls)

    def output(self, step: int, which: str = "values") -> _steps.StepOutput:
        """Output `which` ("values", "indices", "lengths", "keys") of step `step` (negative: from the end)."""
        index = step + len(self._calls) if step < 0 else step
        if not 0 <= index < len(self._calls):
            raise IndexError(f"step {step} is not a step of this pipeline ({len(self._calls)} so far)")
        dtype = self._outputs[index].get(which)
        if dtype is None:
            raise ValueError(f"step {index} ({self._calls[index].rpc}) makes no {which}; it makes "
                             f"{', '.join(self._outputs[index])}")
        return _steps.StepOutput(index, which, dtype)

    def _main(self, back: int = 1) -> _steps.StepOutput:
        """The main output (values; a Sort's keys) of the step `back` steps before the next."""
        if len(self._calls) < back:
            raise ValueError(f"this step reads the output of a step before it, and the pipeline has "
                             f"{len(self._calls)}: pass the array")
        index = len(self._calls) - back
        outputs = self._outputs[index]
        return self.output(index, "values" if "values" in outputs else next(iter(outputs)))

    def _latest(self, which: str) -> _steps.StepOutput:
        for index in range(len(self._calls) - 1, -1, -1):
            if which in self._outputs[index]:
                return self.output(index, which)
        raise ValueError(f"no earlier step makes {which}: pass the array")

    def _add(self, call: _calls.Call, outputs: Dict[str, np.dtype], returned: bool, out: Any) -> "Pipeline":
        if out is not None:
            returned = True
        if _buffers.wants_buffers(call, out):
            call = _buffers.place(call, out)
        self._calls.append(_place_steps(call))
        self._returned.append(bool(returned))
        self._outputs.append(outputs)
        return self

    @staticmethod
    def _dtype(a: Any) -> np.dtype:
        return np.dtype(a.dtype) if hasattr(a, "dtype") else np.asarray(a).dtype

    def scan(self, a: Any = None, op: str = "sum", exclusive: bool = False, segments: _calls.Segments = None, *,
             reproducible: bool = False, returned: bool = False, out: Any = None) -> "Pipeline":
        a = self._main() if a is None else a
        call = _calls.scan(a, op, exclusive, segments, reproducible)
        return self._add(call, {"values": call.arrays["input"].dtype}, returned, out)

    def reduce(self, a: Any = None, op: str = "sum", segments: _calls.Segments = None, *,
               reproducible: bool = False, returned: bool = False, out: Any = None) -> "Pipeline":
        """As Client.reduce; an extreme of a step's output that turns out
        empty is the op's identity (index -1), as for an empty segment."""
        a = self._main() if a is None else a
        call = _calls.reduce(a, op, segments, reproducible)
        outputs = {"values": call.arrays["input"].dtype}
        if op in ("argmin", "argmax"):
            outputs["indices"] = np.dtype(np.int64)
        return self._add(call, outputs, returned, out)

    def select(self, a: Any = None, where: Optional[_calls.Where] = None, *, flags: Any = None,
               output: str = "values", partition: bool = False, indices: bool = False,
               returned: bool = False, out: Any = None, **comparison: Any) -> "Pipeline":
        """As Client.select; also ``gt=t`` (any of eq, ne, lt, le, gt, ge) for ``where=("gt", t)``, and
        ``indices=True`` for ``output="indices"``."""
        a = self._main() if a is None else a
        for kind, operand in comparison.items():
            if kind not in _COMPARISONS:
                raise TypeError(f"select() got an unexpected keyword argument {kind!r}")
            if where is not None:
                raise ValueError("select takes one predicate: where= or one comparison keyword")
            where = (kind, operand)
        if indices:
            output = "indices"
        call = _calls.select(a, where, flags, output, partition)
        made: Dict[str, np.dtype] = {}
        if output in ("values", "both"):
            made["values"] = call.arrays["input"].dtype
        if output in ("indices", "both"):
            made["indices"] = np.dtype(np.int64)
        return self._add(call, made, returned, out)

    def unique(self, a: Any = None, *, returned: bool = False, out: Any = None) -> "Pipeline":
        a = self._main() if a is None else a
        call = _calls.unique(a)
        return self._add(call, {"values": call.arrays["input"].dtype}, returned, out)

    def run_length_encode(self, a: Any = None, *, returned: bool = False) -> "Pipeline":
        a = self._main() if a is None else a
        call = _calls.run_length_encode(a)
        return self._add(call, {"values": call.arrays["input"].dtype, "lengths": np.dtype(np.int64)},
                         returned, None)

    def reduce_by_key(self, keys: Any = None, values: Any = None, op: str = "sum", *,
                      reproducible: bool = False, returned: bool = False) -> "Pipeline":
        keys = self._main(2) if keys is None else keys
        values = self._main(1) if values is None else values
        call = _calls.reduce_by_key(keys, values, op, reproducible)
        return self._add(call, {"keys": call.arrays["keys"].dtype, "values": call.arrays["values"].dtype},
                         returned, None)

    def aggregate_by_key(self, keys: Any = None, values: Any = None, num_keys: int = 0, op: str = "sum", *,
                         reproducible: bool = False, returned: bool = False, out: Any = None) -> "Pipeline":
        keys = self._main(2) if keys is None else keys
        values = self._main(1) if values is None else values
        call = _calls.aggregate_by_key(keys, values, num_keys, op, reproducible)
        return self._add(call, {"values": call.arrays["values"].dtype}, returned, out)

    def gather(self, values: Any, indices: Any = None, *, returned: bool = False, out: Any = None) -> "Pipeline":
        indices = self._latest("indices") if indices is None else indices
        call = _calls.gather(values, indices)
        return self._add(call, {"values": call.arrays["values"].dtype}, returned, out)

    def sort(self, keys: Any = None, values: Any = None, descending: bool = False, return_indices: bool = False,
             segments: _calls.Segments = None, *, returned: bool = False) -> "Pipeline":
        keys = self._main() if keys is None else keys
        call = _calls.sort(keys, values, descending, return_indices, segments)
        outputs = {"keys": call.arrays["keys"].dtype}
        if values is not None:
            outputs["values"] = call.arrays["values"].dtype
        if return_indices:
            outputs["indices"] = np.dtype(np.int64)
        return self._add(call, outputs, returned, None)

    def _returned_steps(self) -> List[bool]:
        return self._returned if any(self._returned) else self._returned[:-1] + [True]

    def request(self) -> bytes:
        """The serialized PipelineRequest, each step's arrays spliced in without protobuf's copies."""
        if not self._calls:
            raise ValueError("the pipeline has no step")
        parts: List[object] = []
        for call, back in zip(self._calls, self._returned_steps()):
            step = [_wire.key(_STEP_FIELDS[call.rpc].number, _wire.LEN)]
            body = call.request
            step += [_wire.varint(len(body)), body]
            if back:
                step += [_wire.key(_RETURNED, _wire.VARINT), _wire.varint(1)]
            step_bytes = b"".join(step)
            parts += [_wire.key(_STEPS, _wire.LEN), _wire.varint(len(step_bytes)), step_bytes]
        return b"".join(parts)

    def call(self) -> _calls.Call:
        """The pipeline as one Call: its message holds the steps without their
        arrays' data (what routing reads: the buffers it names), its body the
        request sent."""
        body = self.request()
        message = pb.PipelineRequest()
        for call, back in zip(self._calls, self._returned_steps()):
            step = message.steps.add(returned=back)
            getattr(step, _STEP_FIELDS[call.rpc].name).CopyFrom(call.message)
        return _calls.Call("Pipeline", message, {}, pb.PipelineResponse.DESCRIPTOR, self.parse, streams=False,
                           body=body)

    def parse(self, answer: bytes, start: int = 0, end: Optional[int] = None) -> Any:
        """The returned steps' answers from a serialized PipelineResponse in answer[start:end]."""
        results: List[Any] = []
        for number, wire_type, span in _wire.fields(answer, start, len(answer) if end is None else end):
            if number != _RESULTS or wire_type != _wire.LEN:
                continue
            step, response = 0, None  # proto3 leaves step 0 out
            for inner_number, inner_type, value in _wire.fields(answer, *span):
                if inner_number == _RESULT_STEP and inner_type == _wire.VARINT:
                    step = value
                elif inner_type == _wire.LEN:
                    response = (inner_number, value)
            if response is None or step >= len(self._calls):
                raise ValueError("the server's Pipeline answer has a result without a response of one of its steps")
            call = self._calls[step]
            expected = _STEP_FIELDS[call.rpc].number + 1
            if response[0] != expected:
                raise ValueError(f"the server answered step {step} with a response of another kind")
            results.append(call.answer(answer, *response[1]))
        return results[0] if len(results) == 1 else results

    def run(self) -> Any:
        """Sends the pipeline: the returned step's answer, as its client method
        would give it, or a list of them (in step order) when several are
        returned; from primserve.aio an awaitable of that, from a Multiplex
        stream a Future (blocking client) or an awaitable (asyncio) of it."""
        return self._send(self.call())
