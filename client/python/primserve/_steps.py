"""An output of an earlier step of a pipeline, as an array argument of a later step.

Kept apart from _pipeline so that _arrays can recognise it without importing
the call builders.
"""

from typing import Any, Optional

import numpy as np

from primserve.v1 import primitives_pb2 as pb

WHICH = {"values": pb.StepOutput.VALUES, "indices": pb.StepOutput.INDICES,
         "lengths": pb.StepOutput.LENGTHS, "keys": pb.StepOutput.KEYS}


class StepOutput:
    """Output `which` ("values", "indices", "lengths" or "keys") of step `step`
    of a pipeline, of `dtype`: pass it wherever a later step takes an array.
    Its length is known only on the server, once the step has run."""

    def __init__(self, step: int, which: str, dtype: np.dtype):
        if which not in WHICH:
            raise ValueError(f"a step's output is one of {', '.join(map(repr, WHICH))}; got {which!r}")
        self.step = step
        self.which = which
        self.dtype = np.dtype(dtype)

    def __repr__(self) -> str:
        return f"StepOutput(step={self.step}, which={self.which!r}, dtype={self.dtype})"

    def ref(self) -> pb.StepOutput:
        return pb.StepOutput(step=self.step, output=WHICH[self.which])

    def stand_in(self) -> "StepArray":
        """The empty ndarray of its dtype that stands for it among a call's arrays."""
        standin = np.empty(0, dtype=self.dtype).view(StepArray)
        standin.output = self
        return standin


class StepArray(np.ndarray):
    """A StepOutput's stand-in among a call's arrays; it has no elements of its own."""

    output: Optional[StepOutput] = None

    def __array_finalize__(self, obj: Any) -> None:
        self.output = getattr(obj, "output", None)
