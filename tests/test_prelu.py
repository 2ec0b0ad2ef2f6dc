"""aclnnPrelu: out = self > 0 ? self : weight[c] * self, c the channel (dim 1 when self has >= 2
dims), weight read flattened; self, weight and out each in their own dtype.

Checked against a float64 NumPy formula and PyTorch's F.prelu in float64 on the same (already
rounded) inputs; PyTorch refuses mixed dtypes and weights of more than 1 dim, so those are
checked against the formula alone. Error bound, from an fp32 computation rounded on the write:

    out: (u_out + 2 * u32) * |exact| + tiny_out + 2^-149
         (the product, exact or rounded once in fp32, then one rounding to out's dtype)
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import aclnn_cpu as ac
from support import (BFLOAT16, FP32_EPS, LAYOUTS, UNIT_ROUNDOFF, assert_within, channels_last, f64, in_memory_order,
                     strided_view, to_torch)

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16]
TINY = {np.dtype(np.float32): 2.0 ** -150, np.dtype(np.float16): 2.0 ** -25, BFLOAT16: 2.0 ** -134}


def channels(shape):
    return shape[1] if len(shape) >= 2 else 1


def promoted(a, b):
    """The dtype the functional form allocates: equal dtypes keep theirs, otherwise float32."""
    return np.dtype(a) if np.dtype(a) == np.dtype(b) else np.dtype(np.float32)


def reference(x, w):
    """float64 out from the formula: the weight flattened and broadcast along dim 1."""
    x, w = f64(x), f64(w).reshape(-1)
    if x.ndim >= 2 and w.size != 1:
        shape = [1] * x.ndim
        shape[1] = -1
        wb = w.reshape(shape)
    else:
        wb = w[0]
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(x > 0, x, wb * x)


def bound(ref, out_dtype):
    out_dtype = np.dtype(out_dtype)
    return (UNIT_ROUNDOFF[out_dtype] + 2 * FP32_EPS) * np.abs(ref) + TINY[out_dtype] + 2.0 ** -149


def check(x, w, out, what="out"):
    ref = reference(x, w)
    assert_within(out, ref, bound(ref, np.asarray(out).dtype if not hasattr(out, "detach") else BFLOAT16), what)


def make(rng, shape, dtype, weight_shape=None, wdtype=None):
    x = rng.standard_normal(shape).astype(dtype)
    count = channels(shape)
    w = rng.standard_normal(count if weight_shape is None else weight_shape).astype(dtype if wdtype is None else wdtype)
    return x, w


# --------------------------------------------------------------------------------------------
# The documented example: self [2, 4], weight [3].

def test_documented_example():
    x = np.array([[-2, 1, 2, -3], [-4.7, 5.3, -6.9, 7]], np.float32)
    w = np.array([3], np.float32)
    out = ac.prelu(x, w)
    assert out.dtype == np.float32 and out.shape == (2, 4)
    # Each weight branch value is the product rounded once to float32 (as NumPy's float32 product).
    np.testing.assert_array_equal(out, np.where(x > 0, x, np.float32(3) * x))
    np.testing.assert_allclose(out, [[-6, 1, 2, -9], [-14.1, 5.3, -20.7, 7]], rtol=1e-6)
    out2 = np.full((2, 4), 9.0, np.float32)
    ws, ex = ac.aclnnPreluGetWorkspaceSize(x, w, out2)
    ac.aclnnPrelu(np.empty(ws, np.uint8) if ws else None, ws, ex)
    assert out2.tobytes() == out.tobytes()


# --------------------------------------------------------------------------------------------
# Numbers: ranks 0-8, per-channel and single weights, every dtype and ISA level.

SHAPES = [(), (1,), (5,), (4, 2), (3, 5, 17), (2, 3, 4, 5), (2, 3, 1, 4, 1), (2, 2, 3, 1, 2, 2),
          (1, 2, 2, 2, 1, 2, 3), (2, 3, 2, 1, 2, 1, 2, 3)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("single_weight", [False, True])
def test_every_rank(isa, shape, dtype, single_weight):
    rng = np.random.default_rng(len(shape))
    x, w = make(rng, shape, dtype, 1 if single_weight else None)
    out = ac.prelu(x, w)
    assert out.shape == x.shape and out.dtype == dtype
    check(x, w, out)


# Shapes for each form of the walk: planes with a broadcast weight (one chunk, several chunks of
# 4096 positions, SIMD tails), short planes joined with the channel dim ([N, C, 7, 7]), rows of
# channels in place (C >= 256) and short rows joined with the rows around them ([N, 3]), and a
# single weight over everything.
PATH_SHAPES = [(2, 3, 1000), (1, 2, 40000), (3, 4, 33, 17), (7, 3000), (64, 5000), (100000, 4), (3000, 7),
               (2, 700, 1), (5, 3, 3, 3), (1, 1, 70001), (33, 17, 2), (9, 130, 3, 7), (3, 100, 5, 5),
               (2, 7, 255), (2, 7, 256), (4096, 3), (1001, 5), (3, 300), (2, 5000), (8, 64, 7, 7), (1, 9000),
               # joined runs in several chunks of whole stretches, the last one shorter
               (5, 300, 7, 7), (3, 90, 100), (30001, 3),
               # planes of one vector and more whose vectors straddle two planes' weights
               (2, 40, 14, 14), (3, 20, 4, 4), (3, 20, 17), (2, 50, 8), (1, 33, 33)]


@pytest.mark.parametrize("shape", PATH_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("single_weight", [False, True])
def test_kernel_paths(isa, shape, dtype, single_weight):
    rng = np.random.default_rng(sum(shape))
    x, w = make(rng, shape, dtype, 1 if single_weight else None)
    check(x, w, ac.prelu(x, w))


# --------------------------------------------------------------------------------------------
# Mixed dtypes (each of self, weight and out on its own) and weights of any rank: against the
# formula (PyTorch refuses both).

@pytest.mark.parametrize("xdtype,wdtype,odtype", list(itertools.product(DTYPES, DTYPES, DTYPES)), ids=str)
@pytest.mark.parametrize("shape", [(3, 5, 17), (40, 6), (2, 4, 300)], ids=str)
def test_mixed_dtypes(isa, xdtype, wdtype, odtype, shape):
    rng = np.random.default_rng(10)
    x, w = make(rng, shape, xdtype, wdtype=wdtype)
    out = ac.prelu(x, w, out=np.full(shape, np.nan, odtype))
    assert out.dtype == odtype
    check(x, w, out)
    if xdtype != np.float32 and wdtype != np.float32:
        # Both 16-bit: the product is exact in fp32, so out is the exact value rounded once.
        ref = reference(x, w).astype(np.float32).astype(odtype)
        assert out.tobytes() == ref.tobytes()


@pytest.mark.parametrize("xdtype,wdtype", list(itertools.product(DTYPES, DTYPES)), ids=str)
def test_allocated_out_has_the_promoted_dtype(xdtype, wdtype):
    rng = np.random.default_rng(11)
    x, w = make(rng, (4, 3, 5), xdtype, wdtype=wdtype)
    out = ac.prelu(x, w)
    assert out.dtype == promoted(xdtype, wdtype)
    want = {(np.dtype(np.float16), BFLOAT16), (BFLOAT16, np.dtype(np.float16))}
    if (np.dtype(xdtype), np.dtype(wdtype)) in want:
        assert out.dtype == np.float32  # float16 with bfloat16 promotes to float32
    check(x, w, out)


@pytest.mark.parametrize("shape,weight_shape", [((2, 6), (2, 3)), ((4, 6, 5), (3, 2)), ((4, 6, 5), (1, 6, 1)),
                                                ((3, 4, 5, 6), (1, 1)), ((3, 4, 5, 6), (1, 1, 1, 1, 1, 1, 1, 1)),
                                                ((5,), (1, 1)), ((), (1,)), ((2, 1, 3), (1,)),
                                                ((2, 8, 3), (2, 2, 2))], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_weight_of_any_rank_is_flattened(isa, shape, weight_shape, dtype):
    rng = np.random.default_rng(12)
    x, w = make(rng, shape, dtype, weight_shape)
    out = ac.prelu(x, w)
    check(x, w, out)
    # The same as the flattened weight.
    assert ac.prelu(x, w.reshape(-1)).tobytes() == out.tobytes()


def test_strided_weight_is_read_in_row_major_order():
    rng = np.random.default_rng(13)
    x, w = make(rng, (4, 6, 5), np.float32, (2, 3))
    wt = np.ascontiguousarray(w.T).T  # the same values, Fortran order
    wr = np.zeros((4, 6), np.float32)[::-2, ::-2]
    wr[...] = w
    want = ac.prelu(x, w)
    check(x, w, want)
    for view in (wt, wr, w.reshape(-1)):
        assert ac.prelu(x, view).tobytes() == want.tobytes()


# --------------------------------------------------------------------------------------------
# PyTorch's F.prelu in float64 as the oracle; at the native dtype never less accurate than
# PyTorch (our value is the exact result rounded once, so elementwise at least as close).

TORCH_CASES = [((4, 2), False), ((3, 5, 17), False), ((2, 3, 1000), False), ((64, 300), False), ((7,), True),
               ((2, 3, 4, 5), True), ((), True), ((8, 16, 7, 7), False), ((300, 3), False)]


@pytest.mark.parametrize("shape,single_weight", TORCH_CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_torch(torch, isa, shape, single_weight, dtype):
    rng = np.random.default_rng(14)
    x, w = make(rng, shape, dtype, 1 if single_weight else None)
    out = ac.prelu(x, w)
    # (torch gives a 0-d self's result the shape (1,); out has self's shape, as aclnn checks.)
    expected = torch.nn.functional.prelu(to_torch(x).double(), to_torch(w).double()).numpy().reshape(shape)
    assert_within(out, expected, bound(expected, dtype), "out vs torch float64")
    native = f64(torch.nn.functional.prelu(to_torch(x), to_torch(w))).reshape(shape)
    ours_error, torch_error = np.abs(f64(out) - expected), np.abs(native - expected)
    assert (ours_error <= torch_error).all(), "less accurate than torch at the native dtype"


def test_torch_tensors_in_and_out(torch):
    x = torch.randn(4, 3, 50, dtype=torch.bfloat16)
    w = torch.rand(3, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    assert ac.prelu(x, w, out=out) is out
    expected = torch.nn.functional.prelu(x.double(), w.double()).numpy()
    assert_within(f64(out), expected, bound(expected, BFLOAT16), "torch tensors")


# --------------------------------------------------------------------------------------------
# Special values: NaN takes the weight branch and stays NaN, -0.0 gives weight * -0.0, infinities
# follow the formula; the bits as PyTorch's F.prelu gives them at each dtype.

SPECIAL = [np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0, -1.0, 3.0e-39, -3.0e-39, 1e-45, -2.5]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_special_values_match_torch(torch, isa, dtype):
    weights = [0.5, -2.0, 0.0, -0.0, np.inf, np.nan]
    values = np.tile(np.array(SPECIAL, np.float64).reshape(-1, 1), (1, len(weights)))  # every value, every weight
    x = values.astype(np.float32).astype(dtype)
    w = np.array(weights, np.float32).astype(dtype)
    out = ac.prelu(x, w)
    expected = torch.nn.functional.prelu(to_torch(x), to_torch(w))
    ref = f64(expected)
    assert np.array_equal(np.isnan(f64(out)), np.isnan(ref))
    same = ~np.isnan(ref)
    # Zeros with their signs, infinities and subnormals: the same bits.
    assert f64(out)[same].tobytes() == ref[same].tobytes()
    # A NaN self gives itself, sign included. (Where self and weight are both NaN, torch passes
    # on either one depending on its code path, so those are left out; torch writes every
    # bfloat16 NaN as +0x7fc0, so bfloat16 NaN signs are checked against self's.)
    both_nan = np.isnan(f64(x)) & np.isnan(f64(w)).reshape(1, -1)
    nan_self = np.isnan(f64(x))
    assert np.array_equal(np.signbit(f64(out))[nan_self], np.signbit(f64(x))[nan_self])
    if dtype != BFLOAT16:
        assert np.array_equal(np.signbit(f64(out))[~both_nan], np.signbit(ref)[~both_nan])


def test_nan_and_negative_zero():
    x = np.array([[np.nan, -0.0, 0.0, -1.0]] * 2, np.float32).T.copy()  # channel 0, channel 1
    w = np.array([0.5, -0.5], np.float32)
    out = ac.prelu(x, w).T
    assert np.isnan(out[:, 0]).all()
    assert np.signbit(out[0, 1]) and out[0, 1] == 0  # 0.5 * -0.0 = -0.0
    assert not np.signbit(out[1, 1]) and out[1, 1] == 0  # -0.5 * -0.0 = +0.0
    assert not np.signbit(out[0, 2]) and np.signbit(out[1, 2])  # +0.0 takes the weight branch too
    assert out[0, 3] == -0.5 and out[1, 3] == 0.5


# --------------------------------------------------------------------------------------------
# Layouts: any strides of self and out, in place, with the contiguous call's bits.

@pytest.mark.parametrize("layout_x,layout_out", list(itertools.product(LAYOUTS + ["channels-last"], repeat=2)))
@pytest.mark.parametrize("shape", [(6, 5, 40), (40, 50), (3, 4, 700), (4, 6, 5, 7), (2, 300, 3, 3)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_strided_layouts(isa, layout_x, layout_out, shape, dtype):
    rng = np.random.default_rng(15)
    x, w = make(rng, shape, dtype)
    want = ac.prelu(x, w)
    check(x, w, want)
    out = strided_view(rng, np.full(shape, np.nan, dtype), layout_out)
    got = ac.prelu(strided_view(rng, x, layout_x), w, out=out)
    assert got is out
    assert np.ascontiguousarray(out).tobytes() == want.tobytes()


@pytest.mark.parametrize("shape,order", [((4, 6, 5, 7), (0, 2, 3, 1)), ((4, 6, 5, 7), (3, 2, 1, 0)),
                                         ((4, 6, 5, 7), (1, 0, 3, 2)), ((2, 300, 6), (2, 0, 1)),
                                         ((3, 4, 9, 2, 5), (0, 2, 4, 3, 1)), ((500, 3), (1, 0))], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_permuted_layouts_and_allocation(isa, shape, order, dtype):
    # The functional form allocates out in self's memory order; the bits are the contiguous call's.
    rng = np.random.default_rng(16)
    x, w = make(rng, shape, dtype)
    want = ac.prelu(x, w)
    xp = in_memory_order(x, order)
    out = ac.prelu(xp, w)
    assert out.strides == xp.strides
    assert np.ascontiguousarray(out).tobytes() == want.tobytes()


def test_broadcast_self_and_reversed_out():
    rng = np.random.default_rng(17)
    row = rng.standard_normal(7).astype(np.float32)
    x = np.broadcast_to(row, (5, 3, 7))  # zero strides
    w = rng.standard_normal(3).astype(np.float32)
    out = np.full((5, 3, 7), np.nan, np.float32)[::-1, :, ::-1]
    ac.prelu(x, w, out=out)
    check(np.ascontiguousarray(x), w, out)


def test_out_inside_a_larger_buffer_leaves_the_rest_alone():
    rng = np.random.default_rng(18)
    x, w = make(rng, (6, 4, 9), np.float16)
    buffer = np.full((6, 8, 20), 7.0, np.float16)
    out = buffer[:, ::2, 1:10]
    ac.prelu(x, w, out=out)
    check(x, w, out)
    untouched = np.ones(buffer.shape, bool)
    untouched[:, ::2, 1:10] = False
    assert (buffer[untouched] == 7.0).all()


@pytest.mark.parametrize("xdtype,odtype", [(np.float32, BFLOAT16), (BFLOAT16, np.float16), (np.float16, np.float32)],
                         ids=str)
def test_mixed_dtypes_strided(isa, xdtype, odtype):
    rng = np.random.default_rng(19)
    x, w = make(rng, (4, 6, 30), xdtype, wdtype=np.float16)
    want = ac.prelu(x, w, out=np.empty(x.shape, odtype))
    check(x, w, want)
    for layout_x, layout_out in [("sliced", "contiguous"), ("transposed", "negative"), ("channels-last", "sliced")]:
        out = strided_view(rng, np.full(x.shape, np.nan, odtype), layout_out)
        ac.prelu(strided_view(rng, x, layout_x), w, out=out)
        assert np.ascontiguousarray(out).tobytes() == want.tobytes(), (layout_x, layout_out)


# --------------------------------------------------------------------------------------------
# Determinism: bitwise identical results for 1, 2 and 3 threads on every form of the walk.

@pytest.mark.parametrize("shape,single_weight,layout", [
    ((3, 4, 40000), False, "contiguous"), ((1, 1, 100000), True, "contiguous"), ((50000, 6), False, "contiguous"),
    ((16, 9000), False, "contiguous"), ((300, 20, 9), False, "transposed"), ((200, 300), True, "sliced"),
    ((9, 130, 3, 7), False, "contiguous"), ((8, 24, 30, 30), False, "channels-last"),
    ((40000, 3), False, "negative"), ((6, 300, 7, 7), False, "contiguous"), ((50001, 3), False, "contiguous")],
    ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bitwise_identical_across_thread_counts(isa, threads, shape, single_weight, layout, dtype):
    rng = np.random.default_rng(20)
    x, w = make(rng, shape, dtype, 1 if single_weight else None)
    xv = strided_view(rng, x, layout)
    results = []
    for count in (1, 2, 3):
        threads(count)
        results.append(np.ascontiguousarray(ac.prelu(xv, w)).tobytes())
    assert results[0] == results[1] == results[2]
    check(x, w, np.frombuffer(results[0], dtype).reshape(shape))


@pytest.mark.parametrize("shape", [(8, 64, 128, 128), (24, 1024, 14, 14)], ids=str)
def test_large_output_streaming_path(threads, shape):
    # Past a 32 MiB last-level cache: out goes out with streaming stores (the same values), and
    # joined runs ([N, C, 14, 14]) take their tasks in memory order, filling weights per task.
    rng = np.random.default_rng(21)
    x = rng.standard_normal(shape, dtype=np.float32)
    w = rng.standard_normal(shape[1], dtype=np.float32)
    threads(2)
    out = ac.prelu(x, w)
    # Each product rounded once to float32, as NumPy's float32 product.
    np.testing.assert_array_equal(out, np.where(x > 0, x, w.reshape(1, -1, 1, 1) * x))
    threads(1)
    assert ac.prelu(x, w).tobytes() == out.tobytes()


# --------------------------------------------------------------------------------------------
# Round trip: ac.prelu, then ac.prelu_backward fed the forward's own output as gradOutput, equals
# PyTorch autograd of F.prelu in float64 on the same rounded inputs.

@pytest.mark.parametrize("shape,single_weight", [((4, 3, 5), False), ((2, 16, 7, 7), False), ((300, 6), False),
                                                 ((3, 5, 200), True), ((9,), True)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_with_backward(torch, isa, shape, single_weight, dtype):
    rng = np.random.default_rng(22)
    x, w = make(rng, shape, dtype, 1 if single_weight else None)
    y = ac.prelu(x, w)
    gi, gw = ac.prelu_backward(y, x, w)  # gradOutput = y: the gradient of sum(y**2) / 2
    tx, tw = to_torch(x).double().requires_grad_(), to_torch(w).double().requires_grad_()
    ty = torch.nn.functional.prelu(tx, tw)
    ty.backward(to_torch(y).double())
    expected_y = ty.detach().numpy().reshape(shape)
    assert_within(y, expected_y, bound(expected_y, dtype), "forward vs torch")
    u = UNIT_ROUNDOFF[dtype]
    expected_gi, expected_gw = tx.grad.numpy(), tw.grad.numpy().reshape(-1)
    assert_within(gi, expected_gi, u * np.abs(expected_gi) + TINY[dtype], "gradInput vs torch autograd")
    # gradWeight: an fp32 sum of n products of self and gradOutput, rounded once to dtype.
    terms = np.abs(f64(x) * f64(y)).reshape(x.shape[0] if x.ndim >= 2 and not single_weight else 1, -1)
    if x.ndim >= 2 and not single_weight:
        terms = np.abs(f64(x) * f64(y)).swapaxes(0, 1).reshape(x.shape[1], -1)
    sum_error = (terms.shape[1] + 2) * FP32_EPS * terms.sum(axis=1)
    assert_within(f64(gw).reshape(-1), expected_gw, u * np.abs(expected_gw) + TINY[dtype] + sum_error,
                  "gradWeight vs torch autograd")


# --------------------------------------------------------------------------------------------
# Errors through both APIs (161001 null pointers, 161002 dtypes, ranks, shapes, weight count):
# out untouched, inputs unmodified.

def call_both(x, w, out):
    """The failing call through the functional API (when out is given) and the two-phase one."""
    errors = []
    for api in ("functional", "two_phase") if out is not None else ("two_phase",):
        with pytest.raises(ac.AclnnError) as info:
            if api == "functional":
                ac.prelu(x, w, out=out)
            else:
                ac.aclnnPreluGetWorkspaceSize(x, w, out)
        errors.append(info.value)
    return errors


CASES = {
    "null self": 161001, "null weight": 161001, "null out": 161001,
    "self float64": 161002, "weight float64": 161002, "out float64": 161002, "self int32": 161002,
    "weight int32": 161002, "out int32": 161002, "self nine dims": 161002, "weight nine dims": 161002,
    "out nine dims": 161002, "out shape": 161002, "out transposed shape": 161002, "weight count": 161002,
    "weight count of 1-D self": 161002, "weight [2, 2] for self [4]": 161002, "0-d self, 2 weights": 161002,
    "null out before a bad dtype": 161001, "dtype before rank": 161002,
}


@pytest.mark.parametrize("case", list(CASES))
def test_documented_errors(case):
    rng = np.random.default_rng(23)
    x, w = make(rng, (4, 3, 5), np.float32)
    out = np.full((4, 3, 5), 5.0, np.float32)
    expect_in_message = None
    if case == "null self":
        x = None
    elif case == "null weight":
        w = None
    elif case == "null out":
        out = None
    elif case.endswith("float64") or case.endswith("int32"):
        name, dt = case.split()
        expect_in_message = name
        if name == "self":
            x = x.astype(dt)
        elif name == "weight":
            w = w.astype(dt)
        else:
            out = out.astype(dt)
    elif case.endswith("nine dims"):
        name = case.split()[0]
        expect_in_message = name
        nine = (1, 3) + (1,) * 7
        if name == "self":
            x, out = np.ones(nine, np.float32), np.full(nine, 5.0, np.float32)
        elif name == "weight":
            w = np.ones((1, 3) + (1,) * 7, np.float32)
        else:
            out = np.full((4, 3, 5) + (1,) * 6, 5.0, np.float32)
    elif case == "out shape":
        out = np.full((4, 3, 6), 5.0, np.float32)
    elif case == "out transposed shape":
        out = np.full((5, 3, 4), 5.0, np.float32)
    elif case == "weight count":
        w = np.ones(2, np.float32)
    elif case == "weight count of 1-D self":
        x, out = np.ones(3, np.float32), np.full(3, 5.0, np.float32)
    elif case == "weight [2, 2] for self [4]":
        x, w, out = np.ones(4, np.float32), np.ones((2, 2), np.float32), np.full(4, 5.0, np.float32)
    elif case == "0-d self, 2 weights":
        x, w, out = np.float32(1).reshape(()), np.ones(2, np.float32), np.full((), 5.0, np.float32)
    elif case == "null out before a bad dtype":
        x, out = x.astype(np.float64), None
    elif case == "dtype before rank":
        x, out = np.ones((1, 3) + (1,) * 7, np.float64), np.full((1, 3) + (1,) * 7, 5.0, np.float32)
        expect_in_message = "self"
    inputs = [a.copy() if a is not None else None for a in (x, w)]
    before = out.copy() if out is not None else None
    for error in call_both(x, w, out):
        assert error.status == CASES[case], str(error)
        assert "aclnnPrelu: " in str(error), str(error)
        assert isinstance(error, ac.ParamNullptrError if CASES[case] == 161001 else ac.ParamInvalidError)
        if expect_in_message:
            assert expect_in_message in str(error), str(error)
        if case == "dtype before rank":
            assert "dtype" in str(error) or "float64" in str(error), str(error)
    if out is not None:
        np.testing.assert_array_equal(out, before)
    for given, copy in zip((x, w), inputs):
        if given is not None:
            assert given.tobytes() == copy.tobytes()


def test_functional_null_inputs():
    rng = np.random.default_rng(24)
    x, w = make(rng, (4, 3), np.float32)
    for args in ((None, w), (x, None)):
        with pytest.raises(ac.ParamNullptrError) as info:
            ac.prelu(*args)
        assert info.value.status == 161001


@pytest.mark.parametrize("product_name", ["atlas_training", "atlas_inference"])
@pytest.mark.parametrize("which", ["self", "weight", "out"])
def test_bfloat16_only_on_atlas_a2(product, product_name, which):
    rng = np.random.default_rng(25)
    dtypes = {k: (BFLOAT16 if k == which else np.dtype(np.float32)) for k in ("self", "weight", "out")}
    x, w = make(rng, (4, 3, 5), dtypes["self"], wdtype=dtypes["weight"])
    out = np.full(x.shape, 5.0, dtypes["out"])
    product(product_name)
    for error in call_both(x, w, out):
        assert error.status == 161002 and which in str(error), str(error)
    np.testing.assert_array_equal(f64(out), 5.0)
    # float16 is on every product's list.
    ac.prelu(x.astype(np.float16), w.astype(np.float16), out=out.astype(np.float16))
    product("atlas_a2")
    ac.prelu(x, w, out=out)
    check(x, w, out)


@pytest.mark.parametrize("shape,weight_shape", [((1, 16, 0, 4), (16,)), ((0,), (1,)), ((0, 3), (3,)), ((2, 0, 3), (0,)),
                                                ((2, 0), (1,)), ((0, 4, 5), (1, 1))], ids=str)
def test_empty_succeeds_with_no_workspace(shape, weight_shape):
    x = np.ones(shape, np.float32)
    w = np.ones(weight_shape, np.float16)
    out = np.full(shape, 5.0, np.float32)
    ws, ex = ac.aclnnPreluGetWorkspaceSize(x, w, out)
    assert ws == 0
    ac.aclnnPrelu(None, 0, ex)
    assert ac.prelu(x, w).shape == shape


def test_empty_runs_the_other_checks_first():
    x = np.ones((2, 0, 3), np.float32)
    with pytest.raises(ac.ParamInvalidError):
        ac.prelu(x, np.ones(2, np.float32))  # 2 weights for 0 channels
    with pytest.raises(ac.ParamInvalidError):
        ac.prelu(x, np.ones(0, np.float32), out=np.empty((2, 0, 4), np.float32))  # out's shape
    with pytest.raises(ac.ParamInvalidError):
        ac.prelu(x, np.ones(0, np.float64))  # weight's dtype


@pytest.mark.parametrize("layout_x,layout_out", [("contiguous", "contiguous"), ("transposed", "contiguous"),
                                                  ("contiguous", "channels-last"), ("transposed", "negative")])
def test_two_phase_workspace_is_used(layout_x, layout_out):
    # The weight in fp32, and dense copies of self and out where the walk would take them element
    # by element (a transposed self beside a contiguous out): the contiguous call's bits.
    rng = np.random.default_rng(26)
    x, w = make(rng, (3, 40, 9, 11), np.float16)
    want = ac.prelu(x, w)
    xv = strided_view(rng, x, layout_x)
    out = strided_view(rng, np.full(x.shape, np.nan, np.float16), layout_out)
    ws, ex = ac.aclnnPreluGetWorkspaceSize(xv, w, out)
    copies = (layout_x != "contiguous") + (layout_out != "contiguous")
    assert ws == 192 + copies * (x.nbytes + 63) // 64 * 64  # each on a 64-byte line
    ac.aclnnPrelu(ac.empty_aligned(ws, np.uint8), ws, ex)
    assert np.ascontiguousarray(out).tobytes() == want.tobytes()
