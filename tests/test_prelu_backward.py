"""aclnnPreluBackward: gradInput = self > 0 ? gradOutput : weight[c] * gradOutput and
gradWeight[c] = sum over channel c of (self > 0 ? 0 : self * gradOutput).

Checked against a float64 NumPy formula and PyTorch autograd of F.prelu in float64 on the same
(already rounded) inputs. Error bounds, derived from an fp32 computation:

    gradInput:  u_out*|exact| + tiny      one product (exact or rounded once in fp32), one cast
    gradWeight: u_out*|exact| + tiny + (n + 2) * u32 * sum|self*gradOutput|   fp32 sum of n terms
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import aclnn_cpu as ac
from support import (BFLOAT16, FP32_EPS, LAYOUTS, UNIT_ROUNDOFF, assert_within, channels_last, f64, strided_view,
                     to_torch)

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16]
TINY = {np.dtype(np.float32): 2.0 ** -150, np.dtype(np.float16): 2.0 ** -25, BFLOAT16: 2.0 ** -134}


def channels(shape):
    return shape[1] if len(shape) >= 2 else 1


def reference(go, x, w):
    """float64 gradInput, gradWeight (flat, per weight element) and gradWeight's error bound part."""
    go, x, w = f64(go), f64(x), f64(w).reshape(-1)
    go = np.broadcast_to(go, x.shape)
    per_channel = x.ndim >= 2 and w.size != 1
    if per_channel:
        shape = [1] * x.ndim
        shape[1] = -1
        wb = w.reshape(shape)
        axes = tuple(i for i in range(x.ndim) if i != 1)
        count = x.size // max(x.shape[1], 1)
    else:
        wb = w[0] if w.size else 0.0
        axes = tuple(range(x.ndim))
        count = x.size
    with np.errstate(invalid="ignore"):
        gi = np.where(x > 0, go, wb * go)
        contrib = np.where(x > 0, 0.0, x * go)
    gw = contrib.sum(axis=axes) if axes else contrib
    magnitude = np.abs(contrib).sum(axis=axes) if axes else np.abs(contrib)
    gw, magnitude = np.asarray(gw).reshape(-1), np.asarray(magnitude).reshape(-1)
    return gi, gw, (count + 2) * FP32_EPS * magnitude


def check(go, x, w, gi, gw, dtype=None):
    dtype = np.dtype(gi.dtype) if dtype is None else np.dtype(dtype)
    ref_gi, ref_gw, sum_error = reference(go, x, w)
    assert_within(gi, ref_gi, UNIT_ROUNDOFF[dtype] * np.abs(ref_gi) + TINY[dtype], "gradInput")
    assert_within(f64(gw).reshape(-1), ref_gw,
                  UNIT_ROUNDOFF[dtype] * np.abs(ref_gw) + TINY[dtype] + sum_error, "gradWeight")


def make(rng, shape, dtype, weight_count=None, grad_shape=None):
    x = rng.standard_normal(shape).astype(dtype)
    go = rng.standard_normal(shape if grad_shape is None else grad_shape).astype(dtype)
    count = channels(shape) if weight_count is None else weight_count
    w = rng.standard_normal(count).astype(dtype)
    return go, x, w


# --------------------------------------------------------------------------------------------
# The documented example (documents 000 and 003).

def test_documented_example():
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    w = np.array([0.5, 0.5], np.float32)
    go = np.ones((4, 2), np.float32)
    gi, gw = ac.prelu_backward(go, x, w)
    np.testing.assert_array_equal(gi, [[0.5, 1], [1, 1], [1, 1], [1, 1]])  # self[0, 0] = 0 is not > 0
    np.testing.assert_array_equal(gw, [0, 0])  # the only self <= 0 is 0, contributing 0 * 1
    gi2, gw2 = np.zeros((4, 2), np.float32), np.zeros(2, np.float32)
    ws, ex = ac.aclnnPreluBackwardGetWorkspaceSize(go, x, w, gi2, gw2)
    ac.aclnnPreluBackward(np.empty(ws, np.uint8) if ws else None, ws, ex)
    np.testing.assert_array_equal(gi2, gi)
    np.testing.assert_array_equal(gw2, gw)


def test_negative_inputs_feed_the_weight_gradient():
    x = np.array([[-1.0, 2.0], [-3.0, -4.0]], np.float32)
    go = np.array([[2.0, 5.0], [1.0, 0.5]], np.float32)
    w = np.array([0.25, -2.0], np.float32)
    gi, gw = ac.prelu_backward(go, x, w)
    np.testing.assert_array_equal(gi, [[0.5, 5.0], [0.25, -1.0]])
    np.testing.assert_array_equal(gw, [-2.0 - 3.0, -2.0])


# --------------------------------------------------------------------------------------------
# Numbers: ranks 0-8, per-channel and single weights, every dtype and ISA level.

SHAPES = [(), (1,), (5,), (4, 2), (3, 5, 17), (2, 3, 4, 5), (2, 3, 1, 4, 1), (2, 2, 3, 1, 2, 2),
          (1, 2, 2, 2, 1, 2, 3), (2, 3, 2, 1, 2, 1, 2, 3)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("single_weight", [False, True])
def test_every_rank(isa, shape, dtype, single_weight):
    rng = np.random.default_rng(len(shape))
    go, x, w = make(rng, shape, dtype, 1 if single_weight else None)
    gi, gw = ac.prelu_backward(go, x, w)
    assert gi.shape == x.shape and gw.shape == (w.shape if w.size == 1 else (w.size,))
    check(go, x, w, gi, gw)


# Shapes for each kernel schedule: channel runs (HxW >= 256, or >= 64 per row of N) with one and
# several 16384-element chunks per plane, column blocks (small HxW) with wide rows split into
# blocks, short rows folded together, a single weight over everything, and SIMD tails.
PATH_SHAPES = [(2, 3, 1000), (1, 2, 40000), (3, 4, 33, 17), (7, 3000), (64, 5000), (100000, 4),
               (3000, 7), (2, 700, 1), (5, 3, 3, 3), (1, 1, 70001), (33, 17, 2),
               (9, 130, 3, 7), (3, 100, 5, 5),  # column blocks in pairs: odd row count, pair tails
               (1, 5, 10, 10), (2, 7, 200), (3, 7, 10, 10), (3, 5, 4),  # either side of 64 per row
               (64, 400), (20, 1000),  # folded rows in chunks of 16 rows (the last one partial)
               # narrow rows: chunks of >= 4096 elements, folds of 682 and 409 rows (odd halvings)
               (4096, 3), (1001, 5)]


@pytest.mark.parametrize("shape", PATH_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("single_weight", [False, True])
def test_kernel_paths(isa, shape, dtype, single_weight):
    rng = np.random.default_rng(sum(shape))
    go, x, w = make(rng, shape, dtype, 1 if single_weight else None)
    gi, gw = ac.prelu_backward(go, x, w)
    check(go, x, w, gi, gw)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0), (2, 3, 0), (0, 4, 5)], ids=str)
@pytest.mark.parametrize("single_weight", [False, True])
def test_empty_gives_zero_weight_gradient(shape, single_weight):
    rng = np.random.default_rng(0)
    go, x, w = make(rng, shape, np.float32, 1 if single_weight else None)
    gw = np.full((w.size,), 9.0, np.float32)
    gi, _ = ac.prelu_backward(go, x, w, out=(np.empty(shape, np.float32), gw))
    assert gi.shape == shape
    np.testing.assert_array_equal(gw, 0.0)


# --------------------------------------------------------------------------------------------
# gradOutput broadcast to self's shape (document 003).

BROADCASTS = [((4, 3, 5), (3, 5)), ((4, 3, 5), (1, 3, 1)), ((4, 3, 5), ()), ((4, 3, 5), (5,)),
              ((6, 2000), (2000,)), ((6, 2000), (6, 1)), ((2, 8, 700), (8, 1)), ((3, 4, 600), (1, 1, 600))]


@pytest.mark.parametrize("shape,grad_shape", BROADCASTS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("single_weight", [False, True])
def test_broadcast_gradient(isa, shape, grad_shape, dtype, single_weight):
    rng = np.random.default_rng(len(grad_shape))
    go, x, w = make(rng, shape, dtype, 1 if single_weight else None, grad_shape)
    gi, gw = ac.prelu_backward(go, x, w)
    assert gi.shape == x.shape
    check(go, x, w, gi, gw)


# --------------------------------------------------------------------------------------------
# Layouts: any input strides, outputs through out= views, strided weight and gradWeight.

@pytest.mark.parametrize("layout_go,layout_x", list(itertools.product(LAYOUTS, LAYOUTS)))
@pytest.mark.parametrize("shape", [(6, 5, 40), (40, 50), (3, 4, 700)], ids=str)
def test_strided_inputs(isa, layout_go, layout_x, shape):
    rng = np.random.default_rng(2)
    go, x, w = make(rng, shape, np.float32)
    gv, xv = strided_view(rng, go, layout_go), strided_view(rng, x, layout_x)
    gi, gw = ac.prelu_backward(gv, xv, w)
    check(go, x, w, gi, gw)


@pytest.mark.parametrize("shape", [(4, 6, 5, 7), (2, 40, 3, 3, 3), (3, 17, 33)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_channels_last(isa, shape, dtype):
    # self, gradOutput and gradInput (through out=) all channels-last: the row schedule.
    rng = np.random.default_rng(sum(shape))
    go, x, w = make(rng, shape, dtype)
    gi = channels_last(np.full(x.shape, np.nan, dtype))
    result = ac.prelu_backward(channels_last(go), channels_last(x), w, out=(gi, np.empty(w.shape, dtype)))
    assert result[0] is gi
    check(go, x, w, gi, result[1])


def split_planes(a, kind):
    """a's values in planes of several unit-stride runs: a crop of a larger plane, rows reversed
    in memory, or dim 0 reversed in memory (a scalar weight's one plane in runs of a sample)."""
    if kind == "crop":
        big = np.zeros(a.shape[:-2] + (a.shape[-2] + 2, a.shape[-1] + 3), a.dtype)
        view = big[..., 1:-1, 2:-1]
        view[...] = a
        return view
    if kind == "reversed-dim0":
        return np.ascontiguousarray(a[::-1])[::-1]
    return np.ascontiguousarray(a[..., ::-1, :])[..., ::-1, :]


SPLIT_KINDS = ["crop", "reversed-rows", "reversed-dim0"]
# Which operands take the split layout (gradOutput, self, gradInput); the others are contiguous.
SPLIT_OPERANDS = [(True, True, False), (True, True, True), (False, False, True), (False, True, False)]


# (Crops and reversed rows need planes of 2 dims; [2, 33] is there for dim 0.)
SPLIT_CASES = [(shape, kind) for shape in [(4, 6, 5, 7), (2, 3, 4, 9, 40), (2, 16, 48, 40), (3, 2, 700, 3)]
               for kind in SPLIT_KINDS] + [((2, 33), "reversed-dim0"), ((5, 37), "reversed-dim0")]


@pytest.mark.parametrize("shape,kind", SPLIT_CASES, ids=str)
@pytest.mark.parametrize("single_weight", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_planes_in_several_runs(isa, threads, shape, kind, single_weight, dtype):
    # The kernel takes such planes run by run, in place, each element in the vector lane of its
    # position in the plane: the contiguous call's bits, gradWeight included, on 1 and 2 threads,
    # with any of the operands split (it had summed each run from lane 0, so a scalar weight's
    # gradWeight changed with a gradInput written into a view with dim 0 reversed).
    rng = np.random.default_rng(sum(shape))
    go, x, w = make(rng, shape, dtype, 1 if single_weight else None)
    want = ac.prelu_backward(go, x, w)
    check(go, x, w, want[0], want[1])
    for split_go, split_x, split_gi in SPLIT_OPERANDS:
        gov = split_planes(go, kind) if split_go else go
        xv = split_planes(x, kind) if split_x else x
        for count in (1, 2):
            threads(count)
            gi = np.full(x.shape, np.nan, dtype)
            gi = split_planes(gi, kind) if split_gi else gi
            got = ac.prelu_backward(gov, xv, w, out=(gi, np.empty(w.shape, dtype)))
            what = f"{kind} go/x/gi split {split_go, split_x, split_gi}, {count} threads"
            assert np.ascontiguousarray(gi).tobytes() == want[0].tobytes(), f"gradInput, {what}"
            assert np.asarray(got[1]).tobytes() == np.asarray(want[1]).tobytes(), f"gradWeight, {what}"


def transposed_planes(a):
    """a's values with the last two dims swapped in memory (strides of a transposed plane)."""
    return np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)


@pytest.mark.parametrize("shape", [(4, 6, 5, 7), (2, 3, 4, 9, 11), (1, 40, 33, 2), (2, 16, 48, 40)], ids=str)
@pytest.mark.parametrize("single_weight", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_planes_sharing_a_permuted_layout(isa, threads, shape, single_weight, dtype):
    # self, gradOutput and gradInput with the same transposed planes run with each plane in
    # memory order: within the float64 bound, the same bits on 1 and 2 threads, and gradInput
    # written through its own strides.
    rng = np.random.default_rng(sum(shape))
    go, x, w = make(rng, shape, dtype, 1 if single_weight else None)
    results = []
    for count in (1, 2):
        threads(count)
        gi = transposed_planes(np.full(x.shape, np.nan, dtype))
        result = ac.prelu_backward(transposed_planes(go), transposed_planes(x), w, out=(gi, np.empty(w.shape, dtype)))
        assert result[0] is gi
        results.append(gi.tobytes(order="A") + np.asarray(result[1]).tobytes())
    assert results[0] == results[1]
    check(go, x, w, gi, result[1])


# (5, 6, 70) runs in column blocks, (40, 6) as one-position channels (vector sums across
# channels), (2, 6, 300) in channel runs; each with a strided weight and gradWeight.
@pytest.mark.parametrize("shape", [(5, 6, 70), (40, 6), (2, 6, 300)], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_out_views_and_strided_weight(layout, dtype, shape):
    rng = np.random.default_rng(3)
    go, x, w = make(rng, shape, dtype)
    w_view = np.zeros(12, dtype)[::-2]
    w_view[...] = w
    gi = strided_view(rng, np.full(x.shape, np.nan, dtype), layout)
    gw_buffer = np.full(18, 7.0, dtype)
    gw = gw_buffer[::3]
    result = ac.prelu_backward(go, x, w_view, out=(gi, gw))
    assert result[0] is gi and result[1] is gw
    check(go, x, w, gi, gw)
    untouched = np.ones(18, bool)
    untouched[::3] = False
    assert (f64(gw_buffer)[untouched] == 7.0).all()


def test_single_weight_keeps_its_shape():
    rng = np.random.default_rng(4)
    go, x, _ = make(rng, (3, 4, 5), np.float32)
    w = np.array([[0.3]], np.float32)
    gi, gw = ac.prelu_backward(go, x, w)
    assert gw.shape == (1, 1)
    check(go, x, w, gi, gw)


# --------------------------------------------------------------------------------------------
# NaN in self takes the weight branch (self > 0 is false) and poisons that channel's gradient,
# as PyTorch does; inf behaves as the formula says.

def test_special_values():
    x = np.array([[np.nan, 1.0, -np.inf], [2.0, -1.0, 0.0]], np.float32).reshape(2, 3, 1)
    go = np.array([[3.0, 2.0, 1.0], [4.0, 5.0, np.inf]], np.float32).reshape(2, 3, 1)
    w = np.array([0.5, 2.0, -1.0], np.float32)
    gi, gw = ac.prelu_backward(go, x, w)
    np.testing.assert_array_equal(gi.reshape(2, 3), [[1.5, 2.0, -1.0], [4.0, 10.0, -np.inf]])
    assert np.isnan(gw[0])  # NaN * 3
    assert gw[1] == -5.0
    assert np.isnan(gw[2])  # -inf * 1 + 0 * inf


# --------------------------------------------------------------------------------------------
# PyTorch autograd of F.prelu in float64 as the oracle.

@pytest.mark.parametrize("shape,single_weight", [((4, 2), False), ((3, 5, 17), False), ((2, 3, 1000), False),
                                                 ((64, 300), False), ((7,), True), ((2, 3, 4, 5), True),
                                                 ((), True)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_torch(torch, isa, shape, single_weight, dtype):
    rng = np.random.default_rng(5)
    go, x, w = make(rng, shape, dtype, 1 if single_weight else None)
    gi, gw = ac.prelu_backward(go, x, w)
    tx = to_torch(x).double().requires_grad_()
    tw = to_torch(w).double().requires_grad_()
    torch.nn.functional.prelu(tx, tw).backward(to_torch(go).double())
    _, _, sum_error = reference(go, x, w)
    expected_gi, expected_gw = tx.grad.numpy().reshape(x.shape), tw.grad.numpy().reshape(-1)
    assert_within(gi, expected_gi, UNIT_ROUNDOFF[dtype] * np.abs(expected_gi) + TINY[dtype], "gradInput vs torch")
    assert_within(f64(gw).reshape(-1), expected_gw,
                  UNIT_ROUNDOFF[dtype] * np.abs(expected_gw) + TINY[dtype] + sum_error, "gradWeight vs torch")


def test_torch_tensors_in_and_out(torch):
    x = torch.randn(4, 3, 50, dtype=torch.bfloat16)
    go = torch.randn(4, 3, 50, dtype=torch.bfloat16)
    w = torch.rand(3, dtype=torch.bfloat16)
    gi, gw = torch.empty_like(x), torch.empty_like(w)
    ac.prelu_backward(go, x, w, out=(gi, gw))
    check(go, x, w, gi, gw, BFLOAT16)


# --------------------------------------------------------------------------------------------
# Determinism: bitwise identical results for 1, 2 and 3 threads on every schedule.

@pytest.mark.parametrize("shape,grad_shape,single_weight,layout", [
    ((3, 4, 40000), None, False, "contiguous"), ((1, 1, 100000), None, True, "contiguous"),
    ((50000, 6), None, False, "contiguous"), ((16, 9000), None, False, "contiguous"),
    ((300, 20, 9), None, False, "transposed"), ((8, 6, 3000), (6, 3000), False, "contiguous"),
    ((200, 300), None, True, "sliced"), ((9, 130, 3, 7), None, False, "contiguous"),
    ((2, 40, 14, 14), None, False, "contiguous"), ((64, 400), None, False, "contiguous"),
    ((8, 24, 30, 30), None, False, "channels-last"), ((40000, 3), None, False, "contiguous")], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bitwise_identical_across_thread_counts(isa, threads, shape, grad_shape, single_weight, layout, dtype):
    rng = np.random.default_rng(6)
    go, x, w = make(rng, shape, dtype, 1 if single_weight else None, grad_shape)
    out = None
    if layout == "channels-last":  # all three channels-last: the row schedule
        go, x = channels_last(go), channels_last(x)
        out = (channels_last(np.empty(x.shape, dtype)), np.empty(w.shape, dtype))
    else:
        x = strided_view(rng, x, layout)
    results = []
    for count in (1, 2, 3):
        threads(count)
        gi, gw = ac.prelu_backward(go, x, w, out=out)
        results.append(gi.tobytes() + gw.tobytes())
    assert results[0] == results[1] == results[2]


# --------------------------------------------------------------------------------------------
# Documented errors through both APIs, outputs untouched.

def call_both(go, x, w, gi, gw):
    """The failing call through both APIs (the functional one allocates a None output, so a null
    output is only expressible in the two-phase API)."""
    errors = []
    for api in ("functional", "two_phase") if gi is not None and gw is not None else ("two_phase",):
        with pytest.raises(ac.AclnnError) as info:
            if api == "functional":
                ac.prelu_backward(go, x, w, out=(gi, gw))
            else:
                ac.aclnnPreluBackwardGetWorkspaceSize(go, x, w, gi, gw)
        errors.append(info.value)
    return errors


CASES = {
    "null gradOutput": 161001, "null self": 161001, "null weight": 161001, "null gradInput": 161001,
    "null gradWeight": 161001, "float64": 161002, "int32": 161002, "dtypes differ": 161002,
    "gradWeight dtype differs": 161002, "nine dims": 161002, "weight count": 161002,
    "gradWeight shape": 161002, "single gradWeight shape": 161002, "gradOutput larger": 161002,
    "gradOutput not broadcastable": 161002, "gradInput shape": 161002, "weight count of 1-D self": 161002,
}


@pytest.mark.parametrize("case", list(CASES))
def test_documented_errors(case):
    rng = np.random.default_rng(7)
    go, x, w = make(rng, (4, 3, 5), np.float32)
    gi, gw = np.full((4, 3, 5), 5.0, np.float32), np.full(3, 5.0, np.float32)
    if case == "null gradOutput":
        go = None
    elif case == "null self":
        x = None
    elif case == "null weight":
        w = None
    elif case == "null gradInput":
        gi = None
    elif case == "null gradWeight":
        gw = None
    elif case == "float64":
        go, x, w, gi, gw = (a.astype(np.float64) for a in (go, x, w, gi, gw))
    elif case == "int32":
        go, x, w, gi, gw = (a.astype(np.int32) for a in (go, x, w, gi, gw))
    elif case == "dtypes differ":
        go = go.astype(np.float16)
    elif case == "gradWeight dtype differs":
        gw = gw.astype(np.float16)
    elif case == "nine dims":
        go = x = np.ones((1, 3) + (1,) * 7, np.float32)
        gi = np.full(x.shape, 5.0, np.float32)
    elif case == "weight count":
        w = np.ones(2, np.float32)
        gw = np.full(2, 5.0, np.float32)
    elif case == "gradWeight shape":
        gw = np.full((3, 1), 5.0, np.float32)
    elif case == "single gradWeight shape":
        w = np.ones((1, 1), np.float32)
        gw = np.full((1,), 5.0, np.float32)
    elif case == "gradOutput larger":
        go = np.ones((2, 4, 3, 5), np.float32)
    elif case == "gradOutput not broadcastable":
        go = np.ones((4, 2, 5), np.float32)
    elif case == "gradInput shape":
        gi = np.full((4, 3, 6), 5.0, np.float32)
    elif case == "weight count of 1-D self":
        go, x = np.ones(3, np.float32), np.ones(3, np.float32)
        gi = np.full(3, 5.0, np.float32)
    outputs = [a.copy() if a is not None else None for a in (gi, gw)]
    for error in call_both(go, x, w, gi, gw):
        assert error.status == CASES[case], str(error)
        assert "aclnnPreluBackward: " in str(error), str(error)
        assert isinstance(error, ac.ParamNullptrError if CASES[case] == 161001 else ac.ParamInvalidError)
    for before, after in zip(outputs, (gi, gw)):
        if before is not None:
            np.testing.assert_array_equal(after, before)


def test_bfloat16_only_on_atlas_a2(product):
    rng = np.random.default_rng(8)
    go, x, w = make(rng, (4, 3, 5), BFLOAT16)
    gi, gw = np.full(x.shape, 5.0, BFLOAT16), np.full(3, 5.0, BFLOAT16)
    product("atlas_training")
    for error in call_both(go, x, w, gi, gw):
        assert error.status == 161002
    np.testing.assert_array_equal(f64(gi), 5.0)
    product("atlas_a2")
    ac.prelu_backward(go, x, w, out=(gi, gw))
    check(go, x, w, gi, gw)


def test_large_output_streaming_path(threads):
    # > 2x a 32 MiB last-level cache: gradInput goes out with streaming stores (same values).
    rng = np.random.default_rng(9)
    shape = (16, 64, 128, 128)
    x = rng.standard_normal(shape, dtype=np.float32)
    go = rng.standard_normal(shape, dtype=np.float32)
    w = rng.standard_normal(64, dtype=np.float32)
    threads(2)
    gi, gw = ac.prelu_backward(go, x, w)
    # gradInput is one correctly rounded product: NumPy's float32 gives the same bits
    np.testing.assert_array_equal(gi, np.where(x > 0, go, w.reshape(1, -1, 1, 1) * go))
    threads(1)
    gi1, gw1 = ac.prelu_backward(go, x, w)
    assert gi1.tobytes() == gi.tobytes() and gw1.tobytes() == gw.tobytes()
    _, ref_gw, sum_error = reference(go, x, w)
    assert_within(gw, ref_gw, UNIT_ROUNDOFF[np.dtype(np.float32)] * np.abs(ref_gw) + sum_error, "large gradWeight")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_grad_weight_is_one_nan(isa, threads, dtype):
    """A channel whose sum meets NaNs of both signs (a NaN self beside products of +inf and -inf,
    whose sum is the x86 default NaN, negative) writes the quiet NaN +0x7fc00000
    (in the output dtype): the same bits for any thread count and layout. Which NaN an add passes
    on depends on the compiled form of the add, which had differed between the one-thread and the
    parallel copies of the kernel (baseline level) and between the contiguous and staged code."""
    rng = np.random.default_rng(7)
    shape = (1, 2, 108)
    x = rng.uniform(-2, -1, shape).astype(dtype)
    g = (rng.choice([-1, 1], shape) * np.inf).astype(dtype)  # products of both infinite signs
    x[0, 1, 87] = x[0, 1, 100] = np.nan
    w = np.array([0.25, 0.5], dtype)
    layouts = {"contiguous": lambda a: a, "reversed": lambda a: np.ascontiguousarray(a[..., ::-1])[..., ::-1]}
    want_nan = np.array([np.nan], np.float32).astype(dtype).view(np.uint16 if dtype != np.float32 else np.uint32)
    results = set()
    for count in (1, 2, 3):
        threads(count)
        for name, lay in layouts.items():
            gw = ac.prelu_backward(lay(g), lay(x), w)[1]
            bits = np.asarray(gw).view(want_nan.dtype)
            assert np.isnan(np.asarray(gw, np.float64)).all(), name  # channel 0: inf - inf only
            assert (bits == want_nan[0]).all(), f"{name}, {count} threads: {[hex(int(b)) for b in bits]}"
            results.add(bits.tobytes())
    assert len(results) == 1
