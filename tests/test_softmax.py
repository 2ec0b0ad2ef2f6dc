"""aclnnSoftmax: out = exp(x - max) / sum(exp(x - max)) along dim.

Checked against a float64 NumPy formula and torch.softmax in float64 on the same (already
rounded) inputs. The error bound is derived, not tuned. The kernel computes in fp32 (fp64 for a
float64 self) with unit roundoff u, so for an element x of a slice of n values with maximum m:

    x - m             relative error u, so exp's argument is off by |x - m| u
    exp               within 1 ulp (2u) of the exact value (tests/test_simd_exp.py)
    the sum of n      (n + 1) u relative (a sum of positive terms)
    the quotient      u
    => |out - exact| <= (|x - m| + n + 6) u |exact|

then one rounding to self's dtype (a 16-bit self) and one to out's, each u_dtype |value| plus
half the smallest subnormal.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import aclnn_cpu as ac
from support import (BFLOAT16, FP32_EPS, LAYOUTS, UNIT_ROUNDOFF, assert_within, f64, in_memory_order, np_dtype,
                     strided_view, to_torch)

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16, np.dtype(np.float64)]
TINY = {np.dtype(np.float64): 2.0 ** -1075, np.dtype(np.float32): 2.0 ** -150,
        np.dtype(np.float16): 2.0 ** -25, BFLOAT16: 2.0 ** -134}


# The reference's own precision: extended (x86's 64-bit mantissa) where NumPy has it, so that
# it stays well ahead of a float64 computation; float64 elsewhere.
WIDE = np.longdouble if np.finfo(np.longdouble).nmant > 52 else np.float64


def reference(x, dim):
    """Softmax in WIDE precision (returned as float64) and the per-element relative error of the
    kernel's arithmetic (before the roundings to self's and out's dtypes)."""
    x64 = f64(x)
    if x64.ndim == 0:
        out, rel = reference(x64.reshape(1), 0)
        return out.reshape(()), rel.reshape(())
    with np.errstate(invalid="ignore", over="ignore"):
        xw = x64.astype(WIDE)
        m = xw.max(axis=dim, keepdims=True)
        e = np.exp(xw - m)
        out = (e / e.sum(axis=dim, keepdims=True)).astype(np.float64)
        math_u = 2.0 ** -53 if np.dtype(x.dtype) == np.float64 else FP32_EPS
        n = x64.shape[dim]
        rel = (np.abs(x64 - m.astype(np.float64)) + n + 6) * math_u
    return out, np.where(np.isfinite(rel), rel, 0.0)


def bound(ref, rel, self_dtype, out_dtype):
    self_dtype, out_dtype = np.dtype(self_dtype), np.dtype(out_dtype)
    b = rel * np.abs(ref)
    for d in (self_dtype, out_dtype):
        b = b + UNIT_ROUNDOFF[d] * np.abs(ref) + TINY[d]
    return b


def check(x, dim, out, what=""):
    ref, rel = reference(x, dim % max(np.ndim(x), 1))
    assert_within(out, ref, bound(ref, rel, x.dtype, out.dtype), f"softmax dim={dim} {what}")


def inputs(rng, shape, dtype, scale=3.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


# --------------------------------------------------------------------------------------------
# The documented example: [4, 2] float32 = 0..7 along dim 0.

def test_documented_example():
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    out = ac.softmax(x, 0)
    column = np.exp(np.arange(4.0) * 2 - 6) / np.exp(np.arange(4.0) * 2 - 6).sum()
    assert_within(out, np.repeat(column[:, None], 2, axis=1), 2 * FP32_EPS, "example")
    np.testing.assert_allclose(out[:, 0], [0.002144, 0.015842, 0.117059, 0.864955], atol=1e-6)


def test_documented_example_two_phase():
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    out = np.zeros((4, 2), np.float32)
    ws, ex = ac.aclnnSoftmaxGetWorkspaceSize(x, 0, out)
    ac.aclnnSoftmax(np.empty(ws, np.uint8) if ws else None, ws, ex)
    assert out.tobytes() == ac.softmax(x, 0).tobytes()
    check(x, 0, out)


# --------------------------------------------------------------------------------------------
# Numbers: every rank 0-8, every dim, every dtype, every ISA level.

SHAPES = [(), (1,), (7,), (4, 2), (3, 5, 17), (2, 3, 4, 5), (2, 1, 3, 1, 4), (2, 2, 1, 3, 2, 2),
          (1, 2, 2, 2, 1, 2, 3), (2, 1, 2, 1, 2, 1, 2, 3)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_rank_and_dim(isa, shape, dtype):
    rng = np.random.default_rng(len(shape))
    x = inputs(rng, shape, dtype)
    n = max(len(shape), 1)
    for dim in range(-n, n):
        out = ac.softmax(x, dim)
        assert out.dtype == dtype and out.shape == x.shape
        check(x, dim, out)


def test_zero_dim_gives_one():
    for dtype in DTYPES:
        for dim in (0, -1):
            out = ac.softmax(np.array(-3.5, dtype), dim)
            assert out.shape == () and f64(out) == 1.0


# Shapes that take each kernel path: short flat rows (below 2 vectors), ordinary rows, rows
# longer than one 8192-element chunk (workspace partials; few rows: chunk tasks, many: a task
# per row), columns (dim not last) narrow and wide, and sizes leaving SIMD tails on every level.
PATH_CASES = [((1000, 3), -1), ((257, 31), 1), ((64, 33), -1), ((5, 1000), -1), ((3, 20000), -1),
              ((9, 8193), -1), ((1, 30001), 0), ((6, 37, 9), 1), ((3, 500, 2), 1), ((2, 7, 5000), 1),
              ((20000, 3), 0), ((4, 5, 6, 7), 0), ((2, 3, 33, 65), 2), ((3, 2000, 1100), 1)]


@pytest.mark.parametrize("shape,dim", PATH_CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_kernel_paths(isa, shape, dim, dtype):
    rng = np.random.default_rng(sum(shape))
    x = inputs(rng, shape, dtype)
    check(x, dim, ac.softmax(x, dim))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_row_length(isa, dtype):
    rng = np.random.default_rng(21)
    for n in list(range(1, 80)) + [127, 128, 129, 255, 256, 257, 8191, 8192, 8193, 16385]:
        x = inputs(rng, (3, n), dtype)
        check(x, -1, ac.softmax(x, -1), f"n={n}")
        check(x, 0, ac.softmax(x, 0), f"columns n={n}")


# --------------------------------------------------------------------------------------------
# Special values, as torch gives them: -inf beside finite values gives 0; a slice all -inf, or
# holding +inf or NaN, gives NaN throughout; large values do not overflow.

def special_rows(dtype):
    big = float(np.finfo(dtype).max) if dtype != BFLOAT16 else 3.0e38
    rows = [
        [0.0, -np.inf, 1.0, -np.inf, 2.0],
        [-np.inf] * 5,
        [np.inf, 0.0, 1.0, 2.0, 3.0],
        [np.nan, 0.0, 1.0, 2.0, 3.0],
        [big, big, -big, 0.0, big],
        [-big, -big, -big, -big, -big],
        [1000.0, 999.0, 998.0, -1000.0, 0.0],
        [60000.0, 59990.0, 59980.0, 1.0, 0.0],
    ]
    return np.array(rows, np.float64).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_special_values_match_torch(torch, isa, dtype):
    x = special_rows(dtype)
    tx = to_torch(x).double()
    for dim in (1, 0):
        data = x if dim == 1 else np.ascontiguousarray(x.T)
        t = tx if dim == 1 else tx.T.contiguous()
        out = ac.softmax(data, dim)
        expected = torch.softmax(t, dim).numpy()
        ref, rel = reference(data, dim)
        np.testing.assert_array_equal(np.isnan(f64(out)), np.isnan(expected))
        assert_within(out, expected, bound(expected, rel, dtype, dtype), f"special dim={dim}")
        # every length class: flat rows, vector rows, columns
        wide = np.repeat(data, 9, axis=dim)
        check(wide, dim, ac.softmax(wide, dim), "special, wide")


# --------------------------------------------------------------------------------------------
# Layouts: strided, transposed, negative and channels-last self; out written through views.

@pytest.mark.parametrize("layout", LAYOUTS + ["channels-last"])
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), BFLOAT16, np.dtype(np.float64)], ids=str)
def test_strided_inputs(isa, layout, dim, dtype):
    rng = np.random.default_rng(3)
    x = inputs(rng, (6, 37, 9, 5), dtype)
    xv = strided_view(rng, x, layout)
    out = ac.softmax(xv, dim)
    check(x, dim, out, layout)
    if layout in ("contiguous", "sliced", "negative"):
        # copied to dense buffers: the contiguous call's bits (a dense permutation instead runs
        # the path of its memory order, which may sum in another fixed order)
        assert out.tobytes() == ac.softmax(x, dim).tobytes()


@pytest.mark.parametrize("layout", LAYOUTS + ["channels-last"])
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16)], ids=str)
def test_out_views(layout, dtype):
    rng = np.random.default_rng(4)
    x = inputs(rng, (5, 40, 3, 4), dtype)
    for dim in (1, 3):
        out = strided_view(rng, np.full(x.shape, np.nan, dtype), layout)
        result = ac.softmax(x, dim, out=out)
        assert result is out
        check(x, dim, out, layout)


def test_out_view_inside_a_larger_buffer_leaves_the_rest_alone():
    rng = np.random.default_rng(5)
    x = inputs(rng, (8, 10), np.float32)
    buffer = np.full((10, 24), 7.0, np.float32)
    out = buffer[1:9, 2:22:2]
    ac.softmax(x, -1, out=out)
    check(x, -1, out)
    mask = np.ones(buffer.shape, bool)
    mask[1:9, 2:22:2] = False
    assert (buffer[mask] == 7.0).all()


# self and out in one permuted dense layout (transposed, channels-last): the contiguous paths
# run on the dims in memory order, bit for bit the result on contiguous copies.
PERMUTED = [((50, 70), (1, 0), -1), ((50, 70), (1, 0), 0), ((2, 40, 5, 6), (0, 2, 3, 1), 1),
            ((2, 40, 5, 6), (0, 2, 3, 1), -1), ((4, 3000, 5), (2, 0, 1), 1), ((3, 4, 9000), (2, 0, 1), 2)]


@pytest.mark.parametrize("shape,order,dim", PERMUTED, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_permuted_layouts(isa, shape, order, dim, dtype):
    rng = np.random.default_rng(len(shape) + dim)
    x = inputs(rng, shape, dtype)
    out = in_memory_order(np.full(shape, np.nan, dtype), order)
    result = ac.softmax(in_memory_order(x, order), dim, out=out)
    assert result is out
    check(x, dim, out)
    allocated = ac.softmax(in_memory_order(x, order), dim)  # takes self's memory order
    assert allocated.strides == out.strides
    np.testing.assert_array_equal(f64(allocated), f64(out))


def test_broadcast_self():
    rng = np.random.default_rng(6)
    x = np.broadcast_to(inputs(rng, (1, 50), np.float32), (40, 50))
    for dim in (0, 1):
        check(x, dim, ac.softmax(x, dim))


# --------------------------------------------------------------------------------------------
# Computed in self's dtype, then cast to out's: a 16-bit self's result is rounded to self's
# dtype first (so a float32 out holds float16 values), a float32 self's fp32 result is cast
# once, a float64 self's fp64 result is rounded once to out's dtype.

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("out_dtype", DTYPES, ids=str)
def test_out_dtype(isa, dtype, out_dtype):
    rng = np.random.default_rng(7)
    x = inputs(rng, (6, 37, 9), dtype)
    for dim in (1, -1, 0):
        out = ac.softmax(x, dim, out_dtype=out_dtype)
        assert out.dtype == out_dtype
        check(x, dim, out)
        if dtype.itemsize == 2 and out_dtype.itemsize > 2:
            # the values are self's dtype's: converting to it and back changes nothing
            np.testing.assert_array_equal(f64(out).astype(dtype).astype(np.float64), f64(out))
        if dtype != out_dtype:
            # the same as computing in self's dtype and converting the result
            same = ac.softmax(x, dim)
            if dtype == np.float64:
                converted = f64(same).astype(out_dtype)  # one rounding of the float64 result
            else:
                converted = same.astype(np.float32).astype(out_dtype)
            np.testing.assert_array_equal(f64(out), f64(converted))
        out2 = np.zeros(x.shape, out_dtype)
        ws, ex = ac.aclnnSoftmaxGetWorkspaceSize(x, dim, out2)
        ac.aclnnSoftmax(np.empty(ws, np.uint8) if ws else None, ws, ex)
        assert out2.tobytes() == out.tobytes()


def test_float16_self_with_float32_out_differs_from_torch_dtype_argument(torch):
    # torch.softmax(x, dtype=float32) casts first and keeps fp32 precision; aclnn does not.
    rng = np.random.default_rng(8)
    x = inputs(rng, (4, 100), np.float16)
    out = ac.softmax(x, 1, out_dtype=np.float32)
    casting_first = torch.softmax(to_torch(x), 1, dtype=torch.float32).numpy()
    assert not np.array_equal(out, casting_first)
    np.testing.assert_array_equal(out, out.astype(np.float16).astype(np.float32))


# --------------------------------------------------------------------------------------------
# PyTorch as an independent oracle, in float64 on the same rounded inputs; and no less accurate
# than torch at the native dtype.

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", [((4, 2), 0), ((6, 37, 9), 1), ((3, 20000), -1), ((1000, 3), 1),
                                       ((2, 3, 4, 5), -3), ((16, 12, 64, 64), -1)], ids=str)
def test_matches_torch(torch, isa, dtype, shape, dim):
    rng = np.random.default_rng(9)
    x = inputs(rng, shape, dtype)
    out = ac.softmax(x, dim)
    expected = torch.softmax(to_torch(x).double(), dim).numpy()
    _, rel = reference(x, dim % len(shape))
    assert_within(out, expected, bound(expected, rel, dtype, dtype), "softmax vs torch")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", [((64, 1000), -1), ((8, 300, 40), 1), ((4000, 7), -1),
                                       ((2, 50000), -1)], ids=str)
def test_no_less_accurate_than_torch(torch, isa, dtype, shape, dim):
    rng = np.random.default_rng(10)
    x = inputs(rng, shape, dtype, scale=5.0)
    ref, _ = reference(x, dim)
    ours = np.abs(f64(ac.softmax(x, dim)) - ref) / np.maximum(ref, np.finfo(np.float64).tiny)
    theirs = np.abs(f64(torch.softmax(to_torch(x), dim)) - ref) / np.maximum(ref, np.finfo(np.float64).tiny)
    assert ours.max() <= theirs.max(), (ours.max(), theirs.max())
    assert ours.mean() <= theirs.mean(), (ours.mean(), theirs.mean())


def test_torch_tensors_in_and_out(torch):
    x = torch.randn(5, 33, dtype=torch.bfloat16)
    out = torch.empty(5, 33, dtype=torch.float32)
    ac.softmax(x, 1, out=out)
    expected = torch.softmax(x.double(), 1).numpy()
    _, rel = reference(x.float().numpy().astype(BFLOAT16), 1)
    assert_within(out, expected, bound(expected, rel, BFLOAT16, np.float32), "torch in/out")


# --------------------------------------------------------------------------------------------
# Round trip: softmax, then the library's softmax backward fed softmax's own output, equals
# PyTorch autograd of softmax (float64). The bound adds the backward's fp32 error to the
# forward's error carried through it.

@pytest.mark.parametrize("shape,dim", [((6, 37, 9), 1), ((64, 300), -1), ((5, 20000), -1), ((40, 3), 0)], ids=str)
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16], ids=str)
def test_round_trip_with_softmax_backward(torch, isa, shape, dim, dtype):
    rng = np.random.default_rng(12)
    x = inputs(rng, shape, dtype)
    g = rng.standard_normal(shape).astype(dtype)
    y = ac.softmax(x, dim)
    dx = ac.softmax_backward(g, y, dim)
    tx = to_torch(x).double().requires_grad_(True)
    ty = torch.softmax(tx, dim)
    ty.backward(to_torch(g).double())
    expected = tx.grad.numpy()
    ref_y, rel = reference(x, dim)
    n = shape[dim]
    g64 = f64(g)
    # y's error (forward bound, rounding to dtype included), through dx = y (g - sum(g y))
    dy = bound(ref_y, rel, dtype, dtype)
    s = (g64 * ref_y).sum(axis=dim, keepdims=True)
    carried = dy * np.abs(g64 - s) + ref_y * (np.abs(g64) * dy).sum(axis=dim, keepdims=True)
    backward = ref_y * (n + 2) * FP32_EPS * ((np.abs(g64 * ref_y)).sum(axis=dim, keepdims=True) + np.abs(g64)) * 2
    b = carried * 1.01 + backward + UNIT_ROUNDOFF[dtype] * np.abs(expected) + TINY[dtype]
    assert_within(dx, expected, b, "round trip")


# --------------------------------------------------------------------------------------------
# Determinism: bitwise identical for 1, 2 and 3 threads on every path.

@pytest.mark.parametrize("shape,dim,layout", [((1000, 3), -1, "contiguous"), ((64, 300), -1, "contiguous"),
                                              ((3, 40000), -1, "contiguous"), ((8, 300, 40), 1, "contiguous"),
                                              ((2, 5, 20000), 1, "contiguous"), ((50, 60, 7), 1, "transposed"),
                                              ((200, 300), -1, "sliced"), ((40, 17000), -1, "contiguous")], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bitwise_identical_across_thread_counts(isa, threads, shape, dim, layout, dtype):
    rng = np.random.default_rng(10)
    x = strided_view(rng, inputs(rng, shape, dtype), layout)
    results = []
    for count in (1, 2, 3):
        threads(count)
        results.append(ac.softmax(x, dim).tobytes())
    assert results[0] == results[1] == results[2]


def test_large_output(threads):
    # More than the last-level cache: the same values as the rows computed alone.
    rng = np.random.default_rng(12)
    x = inputs(rng, (2600, 4100), np.float32)
    threads(2)
    out = ac.softmax(x, -1)
    rows = [0, 1, 1299, 2599]
    check(x[rows], -1, out[rows])
    assert ac.softmax(x[rows], -1).tobytes() == out[rows].tobytes()
    threads(1)
    assert ac.softmax(x, -1).tobytes() == out.tobytes()
    cols = ac.softmax(x[:1300], 0)
    check(x[:1300, :3], 0, cols[:, :3])


def test_input_not_modified():
    rng = np.random.default_rng(13)
    for dtype in DTYPES:
        x = inputs(rng, (7, 300), dtype)
        before = x.copy()
        ac.softmax(x, 1)
        ac.softmax(x[:, ::2], 0)
        assert x.tobytes() == before.tobytes()


# --------------------------------------------------------------------------------------------
# Empty self: success at once, before every other check; out untouched, workspace 0.

@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0), (2, 0, 4), (0, 0)], ids=str)
def test_empty(shape):
    x = np.zeros(shape, np.float32)
    for dim in range(-len(shape), len(shape)):
        out = ac.softmax(x, dim)
        assert out.shape == shape and out.dtype == np.float32


@pytest.mark.parametrize("case", ["out of another shape", "dim out of range", "int32 self", "int32 out",
                                  "nine dims", "bfloat16 on atlas_training", "read-only out"])
def test_empty_self_skips_every_check(product, case):
    x = np.zeros((2, 0), np.float32)
    out = np.full((2, 3), 5.0, np.float32)
    dim = 1
    if case == "out of another shape":
        pass
    elif case == "dim out of range":
        dim = 7
    elif case == "int32 self":
        x = np.zeros((2, 0), np.int32)
    elif case == "int32 out":
        out = np.full((2, 3), 5, np.int32)
    elif case == "nine dims":
        x = np.zeros((1,) * 8 + (0,), np.float32)
        out = np.full((1,) * 9, 5.0, np.float32)
    elif case == "bfloat16 on atlas_training":
        product("atlas_training")
        x = np.zeros((2, 0), BFLOAT16)
    elif case == "read-only out":
        out.flags.writeable = False
    before = out.copy()
    ws, ex = ac.aclnnSoftmaxGetWorkspaceSize(x, dim, out)
    assert ws == 0
    ac.aclnnSoftmax(None, 0, ex)
    if case != "read-only out":
        assert ac.softmax(x, dim, out=out) is out
    np.testing.assert_array_equal(out, before)


# --------------------------------------------------------------------------------------------
# Documented errors (161001 null pointers; 161002 dtypes, dim, rank, out's shape) through both
# APIs, in the library's order, with out untouched.

def call_both(x, dim, out):
    errors = []
    for api in ("functional", "two_phase"):
        with pytest.raises(ac.AclnnError) as info:
            if api == "functional":
                ac.softmax(x, dim, out=out)
            else:
                ac.aclnnSoftmaxGetWorkspaceSize(x, dim, out)
        errors.append(info.value)
    return errors


GOOD = np.random.default_rng(11).standard_normal((4, 5)).astype(np.float32)


@pytest.mark.parametrize("case,status,words", [
    ("null self", 161001, "self must not be null"), ("null out", 161001, "out must not be null"),
    ("self int32", 161002, "self has dtype"), ("self bool", 161002, "self has dtype"),
    ("out int64", 161002, "out has dtype"), ("dim too large", 161002, "dim 2"),
    ("dim too small", 161002, "dim -3"), ("dim 1 of a 0-d self", 161002, "dim 1"),
    ("nine dims", 161002, "rank 9"), ("out shape differs", 161002, "out has shape"),
    ("out shape [3, 3] vs [2, 3]", 161002, "out has shape"),
    ("dtype before dim", 161002, "self has dtype"), ("dim before rank", 161002, "dim 9"),
    ("rank before shape", 161002, "rank 9"),
])
def test_documented_errors(case, status, words):
    x = GOOD.copy()
    out = np.full((4, 5), 5.0, np.float32)
    dim = 1
    if case == "null self":
        x = None
    elif case == "null out":
        with pytest.raises(ac.ParamNullptrError) as info:
            ac.aclnnSoftmaxGetWorkspaceSize(x, dim, None)
        assert info.value.status == status and words in str(info.value)
        return
    elif case == "self int32":
        x = x.astype(np.int32)
    elif case == "self bool":
        x = x > 0
    elif case == "out int64":
        out = np.full((4, 5), 5, np.int64)
    elif case == "dim too large":
        dim = 2
    elif case == "dim too small":
        dim = -3
    elif case == "dim 1 of a 0-d self":
        x = np.float32(1.0).reshape(())
        out = np.full((), 5.0, np.float32)
    elif case == "nine dims":
        x = np.zeros((1,) * 9, np.float32)
        out = np.full((1,) * 9, 5.0, np.float32)
    elif case == "out shape differs":
        out = np.full((4, 6), 5.0, np.float32)
    elif case == "out shape [3, 3] vs [2, 3]":
        x = np.zeros((2, 3), np.float32)
        out = np.full((3, 3), 5.0, np.float32)
    elif case == "dtype before dim":
        x, dim = x.astype(np.int32), 5
    elif case == "dim before rank":
        x = np.zeros((1,) * 9, np.float32)
        out = np.full((1,) * 9, 5.0, np.float32)
        dim = 9
    elif case == "rank before shape":
        x = np.zeros((1,) * 9, np.float32)
        out = np.full((1,) * 8, 5.0, np.float32)
    before = out.copy()
    x_before = None if x is None else np.array(x, copy=True)
    for error in call_both(x, dim, out):
        assert error.status == status, str(error)
        assert "aclnnSoftmax: " in str(error) and words in str(error), str(error)
        assert isinstance(error, ac.ParamNullptrError if status == 161001 else ac.ParamInvalidError)
    np.testing.assert_array_equal(out, before)
    if x is not None:
        assert np.array(x).tobytes() == x_before.tobytes()


def test_eight_dims_and_dim_seven_succeed():
    x = inputs(np.random.default_rng(14), (2, 1, 2, 1, 2, 1, 2, 3), np.float32)
    check(x, 7, ac.softmax(x, 7))


@pytest.mark.parametrize("name", ["atlas_training", "atlas_inference", "atlas_a2"])
def test_dtypes_per_product(product, name):
    product(name)
    for dtype in DTYPES:
        x = GOOD.astype(dtype)
        out = np.full((4, 5), 5.0, np.float32)
        if dtype == BFLOAT16 and name != "atlas_a2":
            for error in call_both(x, 1, out):
                assert error.status == 161002
            np.testing.assert_array_equal(out, 5.0)
            for error in call_both(GOOD, 1, np.full((4, 5), 5.0, BFLOAT16)):
                assert error.status == 161002 and "out has dtype" in str(error)
        else:
            check(x, 1, ac.softmax(x, 1, out=out))
