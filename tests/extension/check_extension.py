"""Run by tests/test_extension_build.py against a scratch build of the library that holds the
ops of tests/extension/ besides the shipped ones: checks each new op through the functional and
the two-phase Python API against a float64 NumPy reference written from its formula and against
PyTorch, its error cases with their status codes (nothing written on refusal), and its parameters
of the kinds those ops add (aclScalar, double, aclIntArray) arriving as given.

Prints one line per failed expectation and exits 1 if there was any; `ok N checks` otherwise.
"""
from __future__ import annotations

import sys
import traceback

import ml_dtypes
import numpy as np

import aclnn_cpu as ac

try:
    import torch
except ImportError:  # the driver requires torch under ACLNN_CPU_REQUIRE_TORCH=1
    torch = None

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16]
# Half a unit in the last place of each output dtype, relative: the final rounding of an fp32
# result to the output dtype.
HALF_ULP = {np.dtype(np.float32): 2.0 ** -24, np.dtype(np.float16): 2.0 ** -11, BF16: 2.0 ** -8}

failures: list[str] = []
checks = 0


def expect(ok: bool, what: str) -> None:
    global checks
    checks += 1
    if not ok:
        failures.append(what)


def close(actual, reference, dtype, what: str, fp32_roundings: int = 1) -> None:
    """actual within the honest error of its computation: `fp32_roundings` fp32 operations
    (2^-24 relative each) and the final rounding to dtype, of the float64 reference."""
    a = np.asarray(actual).astype(np.float64)
    r = np.asarray(reference, dtype=np.float64)
    nan = np.isnan(r)
    ok = a.shape == r.shape and np.array_equal(np.isnan(a), nan)
    bound = (HALF_ULP[np.dtype(dtype)] + fp32_roundings * 2.0 ** -24) * np.abs(r) + 1e-30
    with np.errstate(invalid="ignore"):  # inf - inf where both are the same infinity
        within = (a == r) | (np.abs(a - r) <= bound)
    ok = ok and bool(np.all(within[~nan]))
    if not ok:
        with np.errstate(invalid="ignore"):
            worst = np.nanmax(np.abs(a - r)) if a.shape == r.shape else f"shape {a.shape}"
        what += f": max error {worst}"
    expect(ok, what)


def refused(status: int, fn, *args, **kwargs) -> None:
    """fn(*args) raises the AclnnError of `status` (or TypeError when status is None)."""
    what = f"{getattr(fn, '__name__', fn)} {status}"
    try:
        fn(*args, **kwargs)
    except ac.AclnnError as exc:
        expect(status is not None and exc.status == status, f"{what}: got status {exc.status}: {exc}")
        expect(str(exc).split("] ", 1)[-1].startswith("aclnn"), f"{what}: message {exc}")
        return
    except TypeError as exc:
        expect(status is None, f"{what}: TypeError {exc}")
        return
    expect(False, f"{what}: not refused")


def sample(rng, shape, dtype, low=-3.0, high=3.0):
    return rng.uniform(low, high, size=shape).astype(dtype)


def views(rng, arr):
    """The same values as a contiguous array, every other element of a bigger buffer, and a
    reversed view."""
    big = np.zeros(tuple(2 * s for s in arr.shape), dtype=arr.dtype)
    sliced = big[tuple(slice(None, None, 2) for _ in arr.shape)]
    sliced[...] = arr
    flipped = np.ascontiguousarray(arr[tuple(slice(None, None, -1) for _ in arr.shape)])
    backwards = flipped[tuple(slice(None, None, -1) for _ in arr.shape)]
    return [arr.copy(), sliced, backwards]


def torch_of(x):
    return torch.from_numpy(np.asarray(x).astype(np.float64))


# ---- LeakyReluBackward: an aclScalar and a bool --------------------------------------------------

def check_leaky_relu(rng):
    for dtype in DTYPES:
        g = sample(rng, (3, 5, 7), dtype)
        x = sample(rng, (3, 5, 7), dtype)
        x[0, 0, :3] = 0  # self == 0 takes the slope
        for slope in (0.01, 3, True, np.float32(0.3), np.float16(-1.5), -0.2):
            s = float(slope)
            ref = np.where(x.astype(np.float64) > 0, g.astype(np.float64),
                           g.astype(np.float64) * np.float64(np.float32(s)))
            for gv, xv in zip(views(rng, g), views(rng, x)):
                out = ac.leaky_relu_backward(gv, xv, slope)
                expect(out.dtype == dtype, f"leaky out dtype {out.dtype}")
                close(out, ref, dtype, f"leaky {dtype} slope {slope!r}")
            if torch is not None:
                t = torch.ops.aten.leaky_relu_backward(torch_of(g), torch_of(x), float(np.float32(s)), False)
                close(ac.leaky_relu_backward(g, x, slope), t.numpy(), dtype, f"leaky vs torch {dtype}")
        # two-phase, the aclnn names and argument order
        out = np.full_like(x, 7)
        ws, ex = ac.aclnnLeakyReluBackwardGetWorkspaceSize(g, x, 0.5, False, out)
        ac.aclnnLeakyReluBackward(None, ws, ex)
        ref = np.where(x.astype(np.float64) > 0, g.astype(np.float64), 0.5 * g.astype(np.float64))
        close(out, ref, dtype, f"leaky two-phase {dtype}")
    g = sample(rng, (4, 4), np.float32)
    x = sample(rng, (4, 4), np.float32)
    out = np.full_like(x, 7)
    # selfIsResult forbids a negative slope (161002); a null slope is 161001.
    refused(161002, ac.leaky_relu_backward, g, x, -0.5, True, out=out)
    refused(161001, ac.leaky_relu_backward, g, x, None, out=out)
    refused(161001, ac.aclnnLeakyReluBackwardGetWorkspaceSize, g, x, None, False, out)
    # scalar dtypes outside the op's set (uint16), ones a scalar cannot hold, non-numbers
    refused(161002, ac.leaky_relu_backward, g, x, np.uint16(1), out=out)
    refused(161002, ac.leaky_relu_backward, g, x, np.complex64(1), out=out)
    refused(161002, ac.leaky_relu_backward, g, x, np.ones(2), out=out)
    refused(161002, ac.leaky_relu_backward, g, x, 1 << 70, out=out)
    refused(161002, ac.leaky_relu_backward, g, x, 1 + 2j, out=out)
    refused(None, ac.leaky_relu_backward, g, x, "0.1", out=out)
    refused(None, ac.leaky_relu_backward, g, x, 0.1, "yes", out=out)
    refused(161002, ac.leaky_relu_backward, g, x[:2], 0.1, out=out)
    expect(bool(np.all(out == 7)), "leaky: a refused call wrote its output")
    # any real number is a DOUBLE scalar; a 0-d array keeps its dtype
    from fractions import Fraction
    ref = np.where(x > 0, g, 0.25 * g.astype(np.float64))
    close(ac.leaky_relu_backward(g, x, Fraction(1, 4)), ref, np.float32, "leaky Fraction slope")
    close(ac.leaky_relu_backward(g, x, np.array(0.25, np.float16)), ref, np.float32, "leaky 0-d slope")
    # a bfloat16 slope is an Atlas A2 dtype of the set
    ac.set_product("atlas_training")
    try:
        refused(161002, ac.leaky_relu_backward, g, x, ml_dtypes.bfloat16(0.5), out=out)
        close(ac.leaky_relu_backward(g, x, np.float16(0.5)),
              np.where(x > 0, g, 0.5 * g.astype(np.float64)), np.float32, "leaky fp16 slope")
    finally:
        ac.set_product("atlas_a2")
    close(ac.leaky_relu_backward(g, x, ml_dtypes.bfloat16(0.5)),
          np.where(x > 0, g, 0.5 * g.astype(np.float64)), np.float32, "leaky bf16 slope")


# ---- LogitGrad: a double ---------------------------------------------------------------------

def logit_reference(x, dy, eps):
    x = x.astype(np.float64)
    dy = dy.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        inside = dy / (x * (1 - x))
    if eps < 0:
        return np.where((x < 0) | (x > 1), np.nan, inside)
    lo = np.float64(np.float32(eps))
    hi = np.float64(np.float32(1) - np.float32(eps))
    return np.where((x < lo) | (x > hi), 0.0, inside)


def check_logit_grad(rng):
    for dtype in DTYPES:
        x = sample(rng, (6, 33), dtype, -0.2, 1.2)
        # The bounds themselves (of eps 0.25 and of eps < 0) are inside: dy / (x (1 - x)).
        x[0, :4] = [0.25, 0.75, 0.0, 1.0]
        dy = sample(rng, (6, 33), dtype)
        for eps in (-1.0, 0.0, 0.1, 0, 0.25):
            ref = logit_reference(x, dy, eps)
            for xv, dv in zip(views(rng, x), views(rng, dy)):
                close(ac.logit_grad(xv, dv, eps), ref, dtype, f"logit {dtype} eps {eps}", 3)
            if torch is not None:
                t = torch.ops.aten.logit_backward(torch_of(dy), torch_of(x),
                                                   None if eps < 0 else float(np.float32(eps)))
                close(ac.logit_grad(x, dy, eps), t.numpy(), dtype, f"logit vs torch {dtype} eps {eps}", 3)
        close(ac.logit_grad(x, dy), logit_reference(x, dy, -1.0), dtype, f"logit default eps {dtype}", 3)
        # eps as a NumPy scalar or 0-d array, and through the two-phase API
        for eps in (np.float32(0.25), np.array(0.25), np.int64(0)):
            close(ac.logit_grad(x, dy, eps), logit_reference(x, dy, float(eps)), dtype,
                  f"logit eps {eps!r}", 3)
        out = np.full_like(x, 7)
        ws, ex = ac.aclnnLogitGradGetWorkspaceSize(x, dy, 0.25, out)
        ac.aclnnLogitGrad(None, ws, ex)
        close(out, logit_reference(x, dy, 0.25), dtype, f"logit two-phase {dtype}", 3)
    x = sample(rng, (5,), np.float32, 0, 1)
    out = np.full_like(x, 7)
    refused(None, ac.logit_grad, x, x, "0.1", out=out)
    refused(None, ac.logit_grad, x, x, True, out=out)
    refused(None, ac.aclnnLogitGradGetWorkspaceSize, x, x, None, out)
    refused(161002, ac.logit_grad, x, x.astype(np.float16), 0.1, out=out)
    ac.set_product("atlas_training")  # the document lists Atlas A2 only
    try:
        refused(161002, ac.logit_grad, x, x, 0.1, out=out)
    finally:
        ac.set_product("atlas_a2")
    expect(bool(np.all(out == 7)), "logit: a refused call wrote its output")


# ---- Flip: an aclIntArray ----------------------------------------------------------------------

def check_flip(rng):
    base = rng.uniform(-5, 5, size=(2, 3, 4, 5))
    for dtype in DTYPES + [np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.int8),
                           np.dtype(np.bool_), np.dtype(np.int16)]:
        x = base.astype(dtype)
        for dims in ([0], [3], [-1, 1], (0, 1, 2, 3), [], np.array([2, -4])):
            want = np.flip(x, axis=tuple(int(d) for d in dims)) if len(dims) else x
            for xv in views(rng, x):
                got = ac.flip(xv, dims)
                expect(got.dtype == x.dtype and np.array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8)),
                       f"flip {dtype} dims {list(dims)}")
            if torch is not None and dtype in (np.float32, np.float64, np.int64):
                t = torch.flip(torch.from_numpy(x), [int(d) for d in dims]).numpy()
                expect(np.array_equal(ac.flip(x, dims), t), f"flip vs torch {dtype} {list(dims)}")
    scalar = np.array(2.5, dtype=np.float32)
    expect(float(ac.flip(scalar, [0])) == 2.5 and float(ac.flip(scalar, [-1])) == 2.5, "flip 0-d")
    empty = np.zeros((0, 3), np.float32)
    expect(ac.flip(empty, [0, 1]).shape == (0, 3), "flip empty")
    x = base.astype(np.float32)
    out = np.full_like(x, 7)
    refused(161002, ac.flip, x, [4], out=out)
    refused(161002, ac.flip, x, [-5], out=out)
    refused(161002, ac.flip, x, [1, -3], out=out)
    refused(161002, ac.flip, x, [0.5], out=out)
    refused(161002, ac.flip, x, "01", out=out)
    refused(161002, ac.flip, x, {0, 1}, out=out)  # a set has no order
    refused(161002, ac.flip, x, [0] * 65, out=out)
    refused(161001, ac.flip, x, None, out=out)
    refused(161001, ac.aclnnFlipGetWorkspaceSize, x, None, out)
    refused(161002, ac.flip, scalar, [1])
    expect(bool(np.all(out == 7)), "flip: a refused call wrote its output")
    # two-phase, and the array's values are copied when planning: changing the list later
    # changes nothing
    dims = [1]
    ws, ex = ac.aclnnFlipGetWorkspaceSize(x, dims, out)
    dims.append(2)
    ac.aclnnFlip(None, ws, ex)
    expect(np.array_equal(out, np.flip(x, axis=1)), "flip two-phase")


def check_registry():
    from aclnn_cpu._registry import OPS

    names = {op["op"] for op in OPS}
    expect({"LeakyReluBackward", "LogitGrad", "Flip", "PreluBackward", "GroupNormBackward",
            "SoftmaxBackward", "GridSampler2DBackward"} <= names, f"registry ops: {sorted(names)}")
    kinds = {(op["op"], p["name"]): p["kind"] for op in OPS for p in op["params"]}
    expect(kinds[("LeakyReluBackward", "negativeSlope")] == "scalar", "kind of negativeSlope")
    expect(kinds[("LogitGrad", "eps")] == "double", "kind of eps")
    expect(kinds[("Flip", "dims")] == "int_array", "kind of dims")


def main() -> int:
    rng = np.random.default_rng(20261123)
    for check in (check_registry, check_leaky_relu, check_logit_grad, check_flip):
        try:
            check(rng) if check is not check_registry else check()
        except Exception:  # an unexpected exception is a failure with its traceback
            failures.append(f"{check.__name__} raised:\n{traceback.format_exc()}")
    for line in failures:
        print("FAIL", line)
    print(f"ok {checks} checks" if not failures else f"FAILED {len(failures)} of {checks} checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
