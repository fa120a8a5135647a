"""The answers of the calls that return more than one array.

Every array in them is a read-only view of the response's bytes; ``.copy()``
one to modify it.
"""

from typing import NamedTuple, Optional, Union

import numpy as np


class ArgExtreme(NamedTuple):
    """``reduce(a, op="argmin" | "argmax")``: the extreme and the first index holding it.

    Without segments, numpy scalars (like ``a.min()``, ``a.argmin()``); with
    segments, one entry per segment: arrays of a's dtype and of int64, whose
    index is into the whole array, and -1 for an empty segment.
    """

    value: Union[np.generic, np.ndarray]
    index: Union[np.int64, np.ndarray]


class Selection(NamedTuple):
    """``select(..., output="both")``: the kept values and their int64 positions."""

    values: np.ndarray
    indices: np.ndarray


class Partition(NamedTuple):
    """``select(..., partition=True)``: the kept elements and the rejected ones.

    Each part has the form the same call without partition returns (an array,
    or a Selection for ``output="both"``), in input order.
    """

    selected: Union[np.ndarray, Selection]
    rejected: Union[np.ndarray, Selection]


class Runs(NamedTuple):
    """``run_length_encode(a)``: each run's value and its int64 length."""

    values: np.ndarray
    lengths: np.ndarray


class KeyedReduction(NamedTuple):
    """``reduce_by_key(keys, values)``: each run's key and the reduction of its values."""

    keys: np.ndarray
    values: np.ndarray


class Sorted(NamedTuple):
    """``sort(keys, values=..., return_indices=...)``: the sorted keys, the
    values in their keys' order (None without values), and the int64 input
    position of each (None without return_indices)."""

    keys: np.ndarray
    values: Optional[np.ndarray]
    indices: Optional[np.ndarray]
