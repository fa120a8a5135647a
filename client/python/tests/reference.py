"""numpy formulations of the server's primitives, the tests' oracle, and random inputs for them.

Integers are computed in their own dtype (numpy wraps as the server does);
floats in float64, compared with a tolerance for the order of operations.
"""

import numpy as np

DTYPES = [np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64]
INTEGER_DTYPES = DTYPES[:4]

_UFUNCS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}


def random_array(rng: np.random.Generator, dtype, n: int, for_prod: bool = False) -> np.ndarray:
    """Random values over the whole range of an integer dtype (so sums wrap); for floats,
    normal values of magnitude ~100, or values near 1 where a product must stay finite."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
    if for_prod:
        return rng.uniform(0.9, 1.1, size=n).astype(dtype)
    return (rng.standard_normal(n) * 100).astype(dtype)


def random_segments(rng: np.random.Generator, n: int) -> np.ndarray:
    """Sorted segment starts from 0, with an empty segment in the middle and one at the end."""
    middle = rng.integers(0, n + 1, size=6)
    return np.sort(np.concatenate([[0, n // 2, n // 2, n], middle])).astype(np.int64)


def work(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def identity(op: str, dtype) -> object:
    dtype = np.dtype(dtype)
    if op == "sum":
        return 0
    if op == "prod":
        return 1
    if dtype.kind == "f":
        return np.inf if op == "min" else -np.inf
    info = np.iinfo(dtype)
    return info.max if op == "min" else info.min


def _bounds(n: int, starts) -> list:
    starts = [0] if starts is None else list(starts)
    return list(zip(starts, starts[1:] + [n]))


def scan(a: np.ndarray, op: str, exclusive: bool, starts=None) -> np.ndarray:
    x = work(a)
    out = np.empty_like(x)
    for begin, end in _bounds(len(a), starts):
        inclusive = _UFUNCS[op].accumulate(x[begin:end], dtype=x.dtype)
        if exclusive and end > begin:
            out[begin] = identity(op, a.dtype)
            out[begin + 1:end] = inclusive[:-1]
        else:
            out[begin:end] = inclusive
    return out


def reduce(a: np.ndarray, op: str, starts=None):
    """Per segment: the reduction, or (value, index) for argmin/argmax."""
    x = work(a)
    values, indices = [], []
    for begin, end in _bounds(len(a), starts):
        segment = x[begin:end]
        if op in ("argmin", "argmax"):
            if end == begin:
                values.append(identity(op[3:], a.dtype))
                indices.append(-1)
            else:
                at = int(np.argmin(segment) if op == "argmin" else np.argmax(segment))
                values.append(segment[at])
                indices.append(begin + at)
        elif end == begin:
            values.append(identity(op, a.dtype))
        else:
            values.append(_UFUNCS[op].reduce(segment, dtype=x.dtype))
    values = np.array(values, dtype=x.dtype)
    return (values, np.array(indices, dtype=np.int64)) if op in ("argmin", "argmax") else values


def run_heads(a: np.ndarray) -> np.ndarray:
    """Where each run of equal bit patterns starts."""
    bits = a.view(f"u{a.itemsize}")
    heads = np.ones(len(a), dtype=bool)
    heads[1:] = bits[1:] != bits[:-1]
    return np.flatnonzero(heads)


def run_length_encode(a: np.ndarray):
    starts = run_heads(a)
    return a[starts], np.diff(np.append(starts, len(a))).astype(np.int64)


def reduce_by_key(keys: np.ndarray, values: np.ndarray, op: str):
    starts = run_heads(keys)
    x = work(values)
    if len(keys) == 0:
        return keys, x
    return keys[starts], _UFUNCS[op].reduceat(x, starts, dtype=x.dtype)


def aggregate_by_key(keys: np.ndarray, values: np.ndarray, num_keys: int, op: str) -> np.ndarray:
    x = work(values)
    out = np.full(num_keys, identity(op, values.dtype), dtype=x.dtype)
    _UFUNCS[op].at(out, keys.astype(np.int64), x)
    return out


def assert_matches(actual: np.ndarray, expected: np.ndarray, dtype, terms: int = 1, magnitude: float = 0.0) -> None:
    """Same dtype and length; integers equal, floats equal to within rounding.

    `terms`: how many elements the largest result combines; `magnitude`: the
    sum of their |x|. Together they bound the rounding error of a float sum or
    product whatever its order of operations (the GPU's may differ)."""
    dtype = np.dtype(dtype)
    actual = np.asarray(actual)
    assert actual.dtype == dtype, f"dtype {actual.dtype}, expected {dtype}"
    if dtype.kind in "iu":
        np.testing.assert_array_equal(actual, expected)
    else:
        eps = np.finfo(dtype).eps
        np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=2 * eps * terms,
                                   atol=eps * terms * magnitude, equal_nan=True)
