"""Helpers for tests: dtypes, rounding, strided layouts, tolerances."""
from __future__ import annotations

import numpy as np

from aclnn_cpu._vocabulary import numpy_dtype

BFLOAT16 = numpy_dtype("bfloat16")  # ml_dtypes.bfloat16

# Unit roundoff (half an ulp at 1.0) of each storage dtype.
UNIT_ROUNDOFF = {
    np.dtype(np.float64): 2.0 ** -53,
    np.dtype(np.float32): 2.0 ** -24,
    np.dtype(np.float16): 2.0 ** -11,
    BFLOAT16: 2.0 ** -8,
}
FP32_EPS = 2.0 ** -24


def np_dtype(name) -> np.dtype:
    if isinstance(name, str) and name in ("bfloat16", "bf16"):
        return BFLOAT16
    return np.dtype(name)


def random_array(rng: np.random.Generator, shape, dtype, low=-2.0, high=2.0) -> np.ndarray:
    """Uniform values already representable in ``dtype`` (so float64 references see the same data)."""
    return rng.uniform(low, high, size=shape).astype(np_dtype(dtype))


def f64(x) -> np.ndarray:
    """Exact float64 copy of an array of any float dtype (numpy, ml_dtypes or torch)."""
    if hasattr(x, "detach"):
        x = x.detach().to(dtype=__import__("torch").float64).numpy()
    return np.asarray(x).astype(np.float64)


def to_torch(x):
    """The same values as a torch tensor of the same dtype (bfloat16 included)."""
    import torch

    arr = np.asarray(x)
    if arr.dtype == BFLOAT16:
        return torch.from_numpy(arr.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(arr))


def strided_view(rng: np.random.Generator, arr: np.ndarray, kind: str) -> np.ndarray:
    """The same values laid out differently: 'contiguous', 'sliced' (every other element of a
    larger buffer), 'transposed' (a permuted copy viewed back), 'negative' (reversed strides) or
    'channels-last' (dim 1 innermost in memory; contiguous below 3 dims)."""
    if kind == "contiguous" or arr.ndim == 0:
        return arr.copy()
    if kind == "sliced":
        big = np.zeros(tuple(2 * s for s in arr.shape), dtype=arr.dtype)
        view = big[tuple(slice(None, None, 2) for _ in arr.shape)]
        view[...] = arr
        return view
    if kind == "transposed":
        perm = list(range(arr.ndim))[::-1]
        inverse = np.argsort(perm)
        return np.ascontiguousarray(arr.transpose(perm)).transpose(inverse)
    if kind == "negative":
        flipped = np.ascontiguousarray(arr[tuple(slice(None, None, -1) for _ in arr.shape)])
        return flipped[tuple(slice(None, None, -1) for _ in arr.shape)]
    if kind == "channels-last":
        return channels_last(arr) if arr.ndim >= 3 else arr.copy()
    raise ValueError(kind)


LAYOUTS = ["contiguous", "sliced", "transposed", "negative"]


def at_line_offset(shape, dtype, offset: int) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts `offset` bytes past a 64-byte line."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(nbytes + 128, np.uint8)
    start = (offset - raw.ctypes.data) % 64
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def assert_within(actual, reference, bound, what=""):
    """|actual - reference| <= bound elementwise (bound broadcastable), NaN where reference is NaN."""
    a = f64(actual)
    r = np.asarray(reference, dtype=np.float64)
    assert a.shape == r.shape, f"{what}: shape {a.shape} != {r.shape}"
    nan = np.isnan(r)
    assert np.array_equal(np.isnan(a), nan), f"{what}: NaN pattern differs"
    err = np.abs(np.where(nan, 0.0, a - r))
    b = np.broadcast_to(np.asarray(bound, dtype=np.float64), err.shape)
    bad = err > b
    if bad.any():
        i = np.unravel_index(np.argmax(np.where(bad, err - b, -np.inf)), err.shape)
        raise AssertionError(f"{what}: {int(bad.sum())} of {err.size} elements off; worst at {i}: "
                             f"actual {a[i]!r} reference {r[i]!r} error {err[i]:.3g} bound {b[i]:.3g}")


def in_memory_order(a, order):
    """The same values as `a` with its dims laid out in memory in `order` (outermost first)."""
    return np.ascontiguousarray(a.transpose(order)).transpose(np.argsort(order))


def channels_last(a):
    """The same values with dim 1 innermost in memory (torch's channels_last for 4-D)."""
    return in_memory_order(a, (0,) + tuple(range(2, a.ndim)) + (1,))


def import_or_skip(module: str, why: str):
    """``module`` imported; without it the calling test (or module, at import time) skips,
    unless ACLNN_CPU_REQUIRE_TORCH=1 (CI), where the oracle's absence is a failure."""
    import importlib
    import os

    import pytest
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if os.environ.get("ACLNN_CPU_REQUIRE_TORCH", "") not in ("", "0"):
            raise ImportError(f"ACLNN_CPU_REQUIRE_TORCH=1 but {module} is missing ({why})") from exc
        pytest.skip(f"{module} not installed ({why})", allow_module_level=True)
