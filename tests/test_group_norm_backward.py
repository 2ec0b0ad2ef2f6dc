"""aclnnGroupNormBackward against PyTorch's native_group_norm_backward formulas.

With D = C / group, s = 1 / (D * HxW), gamma = ones when absent:
    ds[n,c] = sum_hw dY*X, db[n,c] = sum_hw dY;  ds_g, db_g = sums over the group's c of ds*gamma, db*gamma
    c2 = (db_g*mean - ds_g) * rstd^3 * s,  c3 = -c2*mean - db_g*rstd*s
    dX = rstd*gamma[c]*dY + c2*X + c3
    dgamma[c] = sum_n (ds - db*mean) * rstd,  dbeta[c] = sum_n db
The reference evaluates exactly these in float64 on the same (rounded) inputs; PyTorch float64
is a second oracle. The kernel works in fp32 (in the algebraically identical centred form
dsc = ds - mean*db), so the error bounds are the fp32 rounding of each quantity's dependency
chain times the magnitude that feeds it (u = 2^-24):
    dX:     u_out*|dX| + tiny + (HxW + D + 8) * u * (|rstd*gamma*dY| + E2*|X - mean| + E3)
            E2 = sum_g |gamma| sum_hw |dY*(X - mean)| * rstd^3 * s,  E3 = sum_g |gamma| sum_hw |dY| * rstd * s
    dgamma: u_out*|dgamma| + tiny + (HxW + N + 4) * u * sum_n rstd * sum_hw |dY*(X - mean)|
    dbeta:  u_out*|dbeta| + tiny + (HxW + N + 2) * u * sum_n sum_hw |dY|
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import aclnn_cpu as ac
from support import (BFLOAT16, FP32_EPS, LAYOUTS, UNIT_ROUNDOFF, assert_within, at_line_offset, channels_last, f64,
                     strided_view, to_torch)

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16]
TINY = {np.dtype(np.float32): 2.0 ** -150, np.dtype(np.float16): 2.0 ** -25, BFLOAT16: 2.0 ** -134}
ALL = (True, True, True)


def reference(dy, x, mean, rstd, gamma, N, C, HxW, G):
    """float64 dX (shape of x), dgamma, dbeta and the fp32 error part of each bound."""
    D = C // G
    shape = np.shape(x)
    dy = f64(dy).reshape(N, C, HxW)
    x = f64(x).reshape(N, C, HxW)
    mean = f64(mean).reshape(N, G)
    rstd = f64(rstd).reshape(N, G)
    gm = np.ones(C) if gamma is None else f64(gamma).reshape(C)
    per_c = lambda a: np.repeat(a, D, axis=1)  # (N, G) -> (N, C)
    ds, db = (dy * x).sum(-1), dy.sum(-1)
    s = 1.0 / (D * HxW) if D * HxW else 0.0
    ds_g = (ds * gm).reshape(N, G, D).sum(-1)
    db_g = (db * gm).reshape(N, G, D).sum(-1)
    c2 = (db_g * mean - ds_g) * rstd ** 3 * s
    c3 = -c2 * mean - db_g * rstd * s
    dx = (per_c(rstd) * gm)[..., None] * dy + per_c(c2)[..., None] * x + per_c(c3)[..., None]
    dgamma = ((ds - db * per_c(mean)) * per_c(rstd)).sum(0)
    dbeta = db.sum(0)

    centred = np.abs(dy * (x - per_c(mean)[..., None])).sum(-1)  # (N, C)
    absdy = np.abs(dy).sum(-1)
    e2 = (centred * np.abs(gm)).reshape(N, G, D).sum(-1) * np.abs(rstd) ** 3 * s
    e3 = (absdy * np.abs(gm)).reshape(N, G, D).sum(-1) * np.abs(rstd) * s
    dx_scale = (np.abs(per_c(rstd) * gm)[..., None] * np.abs(dy)
                + per_c(e2)[..., None] * np.abs(x - per_c(mean)[..., None]) + per_c(e3)[..., None])
    dx_err = (HxW + D + 8) * FP32_EPS * dx_scale
    dg_err = (HxW + N + 4) * FP32_EPS * (centred * np.abs(per_c(rstd))).sum(0)
    db_err = (HxW + N + 2) * FP32_EPS * absdy.sum(0)
    return dx.reshape(shape), dgamma, dbeta, dx_err.reshape(shape), dg_err, db_err


def bounds(ref, err, dtype):
    dtype = np.dtype(dtype)
    return UNIT_ROUNDOFF[dtype] * np.abs(ref) + TINY[dtype] + err


def check(args, results, mask=ALL, dtype=None):
    dy, x, mean, rstd, gamma, N, C, HxW, G = args
    dtype = np.dtype(np.asarray(x).dtype if dtype is None else dtype)
    rdx, rdg, rdb, edx, edg, edb = reference(*args)
    names = ("gradInput", "gradGammaOut", "gradBetaOut")
    for flag, got, ref, err, name in zip(mask, results, (rdx, rdg, rdb), (edx, edg, edb), names):
        if flag:
            assert_within(f64(got).reshape(np.shape(ref)), ref, bounds(ref, err, dtype), name)
        else:
            assert got is None


def make(rng, shape, N, C, HxW, G, dtype, gamma=True, offset=0.0, grad_shape=None):
    """Inputs with mean/rstd computed from x (as a forward pass would), rounded to dtype."""
    dtype = np.dtype(dtype)
    x = (rng.standard_normal(shape) * 1.5 + offset).astype(dtype)
    dy = rng.standard_normal(shape if grad_shape is None else grad_shape).astype(dtype)
    grouped = f64(x).reshape(N, G, (C // G) * HxW)
    if grouped.size:
        mean = grouped.mean(-1)
        rstd = 1.0 / np.sqrt(grouped.var(-1) + 1e-5)
    else:
        mean, rstd = np.zeros((N, G)), np.ones((N, G))
    gm = rng.standard_normal(C).astype(dtype) if gamma else None
    return dy, x, mean.astype(dtype), rstd.astype(dtype), gm, N, C, HxW, G


# --------------------------------------------------------------------------------------------
# The documented example (document 001): N=2, C=3, HxW=4, group=1, gamma ones.

DOC_X = np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4)
DOC_ARGS = (DOC_X.copy(), DOC_X.copy(), np.array([[6.5], [18.5]], np.float32),
            np.array([[0.2896827], [0.2896827]], np.float32), np.ones(3, np.float32), 2, 3, 4, 1)


def test_documented_example():
    results = ac.group_norm_backward(*DOC_ARGS, (True, True, True))
    check(DOC_ARGS, results)
    # dbeta is exact: sums of small integers
    np.testing.assert_array_equal(results[2], [1 + 2 + 3 + 4 + 13 + 14 + 15 + 16, 5 + 6 + 7 + 8 + 17 + 18 + 19 + 20,
                                               9 + 10 + 11 + 12 + 21 + 22 + 23 + 24])


def test_documented_example_two_phase():
    outs = (np.zeros((2, 3, 4), np.float32), np.zeros(3, np.float32), np.zeros(3, np.float32))
    ws, ex = ac.aclnnGroupNormBackwardGetWorkspaceSize(*DOC_ARGS, [True, True, True], *outs)
    ac.aclnnGroupNormBackward(np.empty(ws, np.uint8) if ws else None, ws, ex)
    check(DOC_ARGS, outs)
    functional = ac.group_norm_backward(*DOC_ARGS, (True, True, True))
    for a, b in zip(outs, functional):
        assert a.tobytes() == b.tobytes()


# --------------------------------------------------------------------------------------------
# Numbers across schedules: fused groups, short planes (HxW < SIMD width, HxW == 1), groups too
# big for one task (chunked, several 16384-element chunks per plane), fused groups whose dX is
# written channel by channel backwards (bigger than half an L2: (4, 6, 250, 250); fp32 groups
# over the L1 in a call within the L3: (2, 8, 1000), (2, 16, 32, 32)), with and without gamma.

CASES = [((2, 6, 5), 2, 6, 5, 3), ((2, 6, 4, 4), 2, 6, 16, 2), ((4, 32, 28, 28), 4, 32, 784, 8),
         ((3, 8), 3, 8, 1, 4), ((64, 64), 64, 64, 1, 32), ((2, 6, 3), 2, 6, 3, 6), ((5, 12, 7), 5, 12, 7, 3),
         ((2, 8, 1000), 2, 8, 1000, 1), ((1, 4, 300, 300), 1, 4, 90000, 2), ((1, 2, 70000), 1, 2, 70000, 1),
         ((2, 4, 3, 17), 2, 4, 51, 2), ((3, 130, 700), 3, 130, 700, 1), ((1, 1), 1, 1, 1, 1),
         ((4, 6, 250, 250), 4, 6, 62500, 2),
         ((4, 40), 4, 40, 1, 2),  # HxW == 1 with groups of a vector and a partial one
         # HxW == 1 with groups narrower than a vector: one row of C channels per sample (one
         # channel per group: coefficients a vector of groups at a time); C past one 256-channel
         # block of dgamma/dbeta
         ((3, 40), 3, 40, 1, 8), ((5, 37, 1), 5, 37, 1, 37), ((3, 300), 3, 300, 1, 60),
         # ... with many samples of few channels: blocks of samples as one span (spans of 2046 and
         # 2044 channels, so blocks end mid-vector and tasks mid-span), over several tasks
         ((1572, 3), 1572, 3, 1, 1), ((1000, 7, 1), 1000, 7, 1, 7), ((700, 12), 700, 12, 1, 4),
         # planes shorter than a vector in groups of up to 48 positions: spans of whole groups
         # across samples (one 3x3 plane per group; 2 planes of 9; 3 channels of 2 positions)
         ((40, 64, 3, 3), 40, 64, 9, 64), ((30, 24, 3, 3), 30, 24, 9, 12), ((716, 6, 2), 716, 6, 2, 2),
         # small groups with HxW >= 16 in batches (crossing samples, cut by the thread shares); one
         # channel per group (coefficients a vector of groups at a time), HxW 16 and 1024 at the edges
         ((3, 300, 20), 3, 300, 20, 300), ((2, 17, 4, 4), 2, 17, 16, 17), ((2, 5, 32, 32), 2, 5, 1024, 5),
         ((9, 24, 20), 9, 24, 20, 8), ((3, 12, 16, 16), 3, 12, 256, 3), ((2, 8, 300), 2, 8, 300, 2),
         ((2, 16, 32, 32), 2, 16, 1024, 2)]


# gradOut, input and gradInput (through out=) channels-last: rows of C channels per sample.
CHANNELS_LAST = [((2, 6, 5, 7), 2, 6, 35, 3), ((3, 40, 4, 4), 3, 40, 16, 8), ((1, 33, 3, 2, 5), 1, 33, 30, 11),
                 ((4, 64, 9, 9), 4, 64, 81, 32),
                 # fewer than 8 samples of 32K+ elements: each sample's rows in chunks with partial
                 # sums (2, 3 uneven, and 4 chunks; 5-D)
                 ((1, 64, 24, 24), 1, 64, 576, 16), ((2, 32, 40, 40), 2, 32, 1600, 8),
                 ((1, 16, 64, 64), 1, 16, 4096, 4), ((1, 24, 8, 16, 16), 1, 24, 2048, 6)]


@pytest.mark.parametrize("shape,N,C,HxW,G", CHANNELS_LAST, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mask", [ALL, (True, False, True), (False, True, True)], ids=str)
def test_channels_last(isa, shape, N, C, HxW, G, dtype, mask):
    rng = np.random.default_rng(N * C + HxW)
    dy, x, mean, rstd, gm, *_ = make(rng, shape, N, C, HxW, G, dtype)
    if not mask[1]:
        gm = None
    args = (dy, x, mean, rstd, gm, N, C, HxW, G)
    gi = channels_last(np.full(shape, np.nan, dtype)) if mask[0] else None
    outs = (gi, np.empty(C, dtype) if mask[1] else None, np.empty(C, dtype) if mask[2] else None)
    results = ac.group_norm_backward(channels_last(dy), channels_last(x), mean, rstd, gm, N, C, HxW, G,
                                     output_mask=mask, out=outs)
    assert results[0] is gi
    check(args, results, mask)


@pytest.mark.parametrize("shape,N,C,HxW,G", [((6, 48, 10, 10), 6, 48, 100, 16),
                                             ((1, 32, 48, 48), 1, 32, 2304, 8)], ids=str)
def test_channels_last_bitwise_across_thread_counts(threads, shape, N, C, HxW, G):
    rng = np.random.default_rng(12)
    dy, x, mean, rstd, gm, *_ = make(rng, shape, N, C, HxW, G, np.float32)
    results = []
    for count in (1, 2, 3):
        threads(count)
        outs = (channels_last(np.empty(shape, np.float32)), np.empty(C, np.float32), np.empty(C, np.float32))
        r = ac.group_norm_backward(channels_last(dy), channels_last(x), mean, rstd, gm, N, C, HxW, G, out=outs)
        results.append(b"".join(a.tobytes() for a in r))
    assert results[0] == results[1] == results[2]


# Channel slices of wider NCHW tensors (torch.chunk along dim 1): each group is still one run
# of unit stride, and the call takes the contiguous kernels, bit for bit the contiguous result,
# in every schedule: fused, batched small groups, short planes, fused with the backward write,
# chunked.
SLICE_CASES = [(2, 64, 8, 8, 8), (8, 64, 8, 8, 64), (2, 32, 2, 3, 8), (4, 8, 128, 160, 2), (1, 4, 200, 200, 2),
               (3, 6, 5, 7, 3)]


@pytest.mark.parametrize("N,C,H,W,G", SLICE_CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_channel_slices_match_contiguous_bits(isa, N, C, H, W, G, dtype):
    rng = np.random.default_rng(C * H + W)
    args = make(rng, (N, C, H, W), N, C, H * W, G, dtype)
    dy, x = args[0], args[1]
    contiguous = ac.group_norm_backward(*args)
    wide = lambda a: np.concatenate([a[:, :1], a, a[:, :2]], axis=1)  # a is wide[:, 1:C + 1]
    dx_wide = np.full((N, C + 3, H, W), 7.0, dtype)
    out = (dx_wide[:, 1:C + 1], np.empty(C, dtype), np.empty(C, dtype))
    sliced = ac.group_norm_backward(wide(dy)[:, 1:C + 1], wide(x)[:, 1:C + 1], *args[2:], out=out)
    for got, want in zip(sliced, contiguous):
        assert np.ascontiguousarray(got).tobytes() == want.tobytes()
    assert (f64(dx_wide[:, :1]) == 7.0).all() and (f64(dx_wide[:, C + 1:]) == 7.0).all()
    check(args, contiguous)


@pytest.mark.parametrize("shape,N,C,HxW,G", CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("with_gamma", [True, False])
def test_schedules(isa, shape, N, C, HxW, G, dtype, with_gamma):
    rng = np.random.default_rng(N * C + HxW)
    args = make(rng, shape, N, C, HxW, G, dtype, with_gamma)
    mask = ALL if with_gamma else (True, False, True)
    check(args, ac.group_norm_backward(*args, mask), mask)


# Any shape with N*C*HxW elements: ranks 0 to 8, and gradOut shaped differently from input.
RANKS = [((), (), 1, 1, 1, 1), ((96,), (96,), 2, 6, 8, 3), ((4, 24), (96,), 2, 6, 8, 3),
         ((2, 6, 8), (2, 48), 2, 6, 8, 3), ((2, 6, 2, 2, 2), (2, 6, 8), 2, 6, 8, 3),
         ((2, 1, 6, 1, 2, 2, 2, 1), (96,), 2, 6, 8, 3), ((1, 2, 6, 2, 2, 2, 1, 1), (2, 6, 2, 2, 2), 2, 6, 8, 3)]


@pytest.mark.parametrize("shape,grad_shape,N,C,HxW,G", RANKS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_any_shape_with_the_right_element_count(isa, shape, grad_shape, N, C, HxW, G, dtype):
    rng = np.random.default_rng(len(shape))
    args = make(rng, shape, N, C, HxW, G, dtype, grad_shape=grad_shape)
    results = ac.group_norm_backward(*args, ALL)
    assert results[0].shape == shape
    check(args, results)


@pytest.mark.parametrize("mask", list(itertools.product([True, False], repeat=3)), ids=str)
@pytest.mark.parametrize("shape,N,C,HxW,G", [((2, 6, 7), 2, 6, 7, 3), ((1, 4, 40000), 1, 4, 40000, 2),
                                             ((8, 16), 8, 16, 1, 4), ((4, 12, 20), 4, 12, 20, 12),
                                             ((4, 12, 20), 4, 12, 20, 3)], ids=str)
def test_output_masks(isa, mask, shape, N, C, HxW, G):
    rng = np.random.default_rng(1)
    args = make(rng, shape, N, C, HxW, G, np.float32)
    results = ac.group_norm_backward(*args, mask)
    check(args, results, mask)
    # masked-off outputs passed anyway are left untouched
    outs = (np.full(shape, 3.0, np.float32), np.full(C, 3.0, np.float32), np.full(C, 3.0, np.float32))
    ac.group_norm_backward(*args, mask, out=outs)
    for flag, out, result in zip(mask, outs, results):
        if flag:
            assert out.tobytes() == result.tobytes()
        else:
            assert (out == 3.0).all()


def test_large_mean_keeps_fp32_accuracy():
    # |mean| >> std: ds and mean*db nearly cancel; the centred form keeps dX within the bound
    # scaled by |X - mean|, not by |X|.
    rng = np.random.default_rng(2)
    for offset in (50.0, -3000.0):
        args = make(rng, (3, 8, 5, 5), 3, 8, 25, 4, np.float32, offset=offset)
        check(args, ac.group_norm_backward(*args, ALL))


@pytest.mark.parametrize("shape,N,C,HxW,G", [((0, 6, 10), 0, 6, 10, 3), ((2, 6, 0), 2, 6, 0, 3),
                                             ((2, 0, 5), 2, 0, 5, 1), ((0,), 0, 4, 3, 2)], ids=str)
def test_empty_gives_zero_parameter_gradients(shape, N, C, HxW, G):
    rng = np.random.default_rng(3)
    args = make(rng, shape, N, C, HxW, G, np.float32)
    outs = (np.empty(shape, np.float32), np.full(C, 9.0, np.float32), np.full(C, 9.0, np.float32))
    ac.group_norm_backward(*args, ALL, out=outs)
    np.testing.assert_array_equal(outs[1], 0.0)
    np.testing.assert_array_equal(outs[2], 0.0)


# --------------------------------------------------------------------------------------------
# Layouts: strided inputs (each with its own layout), any shape and strides for mean, rstd and
# gamma, outputs written through views.

@pytest.mark.parametrize("layout_dy,layout_x", list(itertools.product(LAYOUTS, LAYOUTS)))
@pytest.mark.parametrize("shape,N,C,HxW,G", [((2, 6, 5, 5), 2, 6, 25, 3), ((4, 8, 3), 4, 8, 3, 2),
                                             ((1, 2, 300, 300), 1, 2, 90000, 1)], ids=str)
def test_strided_inputs(isa, layout_dy, layout_x, shape, N, C, HxW, G):
    rng = np.random.default_rng(4)
    dy, x, mean, rstd, gm, *sizes = make(rng, shape, N, C, HxW, G, np.float32)
    args = (strided_view(rng, dy, layout_dy), strided_view(rng, x, layout_x), mean, rstd, gm, *sizes)
    check((dy, x, mean, rstd, gm, *sizes), ac.group_norm_backward(*args, ALL))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_out_views_and_strided_parameters(layout, dtype):
    rng = np.random.default_rng(5)
    dy, x, mean, rstd, gm, N, C, HxW, G = make(rng, (3, 6, 4, 5), 3, 6, 20, 2, dtype)
    mean_v = np.zeros((2, 2 * N * G), dtype)[1, ::-2].reshape(N, G)  # reversed, strided
    mean_v[...] = mean.reshape(N, G)
    rstd_v = np.ascontiguousarray(rstd.reshape(N, G).T).T  # transposed
    gamma_buffer = np.zeros(3 * C, dtype)
    gamma_v = gamma_buffer[::3]
    gamma_v[...] = gm
    outs = (strided_view(rng, np.full(x.shape, np.nan, dtype), layout), np.full(2 * C, 7.0, dtype)[::2],
            np.full(C, 7.0, dtype)[::-1])
    result = ac.group_norm_backward(dy, x, mean_v, rstd_v, gamma_v, N, C, HxW, G, ALL, out=outs)
    assert all(a is b for a, b in zip(result, outs))
    check((dy, x, mean, rstd, gm, N, C, HxW, G), outs)


# --------------------------------------------------------------------------------------------
# PyTorch's native_group_norm_backward in float64 as the second oracle.

@pytest.mark.parametrize("shape,N,C,HxW,G", [((2, 6, 5), 2, 6, 5, 3), ((4, 32, 28, 28), 4, 32, 784, 8),
                                             ((16, 32), 16, 32, 1, 8), ((1, 4, 300, 300), 1, 4, 90000, 2)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("with_gamma", [True, False])
def test_matches_torch(torch, isa, shape, N, C, HxW, G, dtype, with_gamma):
    rng = np.random.default_rng(6)
    args = make(rng, shape, N, C, HxW, G, dtype, with_gamma)
    dy, x, mean, rstd, gm = args[:5]
    mask = ALL if with_gamma else (True, False, True)
    results = ac.group_norm_backward(*args, mask)
    t = lambda a: to_torch(a).double().reshape(N, C, HxW) if a is x or a is dy else to_torch(a).double()
    expected = torch.ops.aten.native_group_norm_backward(
        t(dy), t(x), t(mean).reshape(N, G), t(rstd).reshape(N, G), None if gm is None else t(gm),
        N, C, HxW, G, [True, with_gamma, with_gamma])  # torch needs gamma for its dgamma/dbeta
    _, _, _, edx, edg, edb = reference(*args)
    for flag, got, exp, err in zip(mask, results, expected, (edx, edg, edb)):
        if flag and exp is not None:
            exp = exp.numpy().reshape(np.shape(got))
            assert_within(got, exp, bounds(exp, err.reshape(np.shape(got)), dtype), "vs torch")


def test_torch_tensors_in_and_out(torch):
    x = torch.randn(2, 8, 6, 6, dtype=torch.bfloat16)
    dy = torch.randn(2, 8, 6, 6, dtype=torch.bfloat16)
    grouped = x.double().reshape(2, 4, -1)
    mean = grouped.mean(-1).to(torch.bfloat16)
    rstd = (1 / torch.sqrt(grouped.var(-1, unbiased=False) + 1e-5)).to(torch.bfloat16)
    gamma = torch.randn(8, dtype=torch.bfloat16)
    outs = (torch.empty_like(x), torch.empty_like(gamma), torch.empty_like(gamma))
    ac.group_norm_backward(dy, x, mean, rstd, gamma, 2, 8, 36, 4, ALL, out=outs)
    check((dy, x, mean, rstd, gamma, 2, 8, 36, 4), outs, dtype=BFLOAT16)


# --------------------------------------------------------------------------------------------
# Determinism: bitwise identical results for 1, 2 and 3 threads on every schedule (fused groups
# in fixed shares or handed out one at a time, chunked groups).

@pytest.mark.parametrize("shape,N,C,HxW,G,layout", [
    ((8, 32, 28, 28), 8, 32, 784, 8, "contiguous"), ((1, 4, 300, 300), 1, 4, 90000, 2, "contiguous"),
    ((512, 64), 512, 64, 1, 16, "contiguous"), ((32, 48, 5), 32, 48, 5, 12, "contiguous"),
    ((1572, 3), 1572, 3, 1, 1, "contiguous"), ((3000, 5), 3000, 5, 1, 5, "contiguous"),
    ((40, 64, 3, 3), 40, 64, 9, 64, "contiguous"), ((28, 47, 2), 28, 47, 2, 47, "sliced"),
    ((4, 6, 30, 30), 4, 6, 900, 3, "transposed"), ((2, 2, 200, 200), 2, 2, 40000, 1, "sliced"),
    ((4, 6, 250, 250), 4, 6, 62500, 2, "contiguous"), ((40, 96), 40, 96, 1, 96, "contiguous"),
    ((6, 300, 20), 6, 300, 20, 300, "contiguous"), ((40, 24, 20), 40, 24, 20, 8, "contiguous")], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bitwise_identical_across_thread_counts(isa, threads, shape, N, C, HxW, G, layout, dtype):
    rng = np.random.default_rng(7)
    dy, x, *rest = make(rng, shape, N, C, HxW, G, dtype)
    x = strided_view(rng, x, layout)
    results = []
    for count in (1, 2, 3):
        threads(count)
        results.append(b"".join(r.tobytes() for r in ac.group_norm_backward(dy, x, *rest, ALL)))
    assert results[0] == results[1] == results[2]


def copy_at_line_offset(arr, offset):
    """A copy of arr whose data starts `offset` bytes past a 64-byte line."""
    out = at_line_offset(arr.shape, arr.dtype, offset)
    out[...] = arr
    return out


# Bitwise identical results wherever dY and X sit in memory (each at its own offset from a cache
# line, the same or different): the summation order must be a function of the shape alone, e.g.
# no loads that start from an aligned address and so regroup the lanes. Planes long and short,
# with and without a partial last vector, fused, batched and chunked schedules; gradInput at
# offsets of its own too (fp32 planes of 128+ elements start their dX loop on dY's line:
# (3, 4, 129), (2, 8, 256), (1, 3, 1000)).
@pytest.mark.parametrize("shape,N,C,HxW,G", [((2, 8, 100), 2, 8, 100, 4), ((1, 3, 1000), 1, 3, 1000, 1),
                                             ((2, 4, 64), 2, 4, 64, 2), ((1, 2, 40000), 1, 2, 40000, 1),
                                             ((2, 6, 17), 2, 6, 17, 3), ((3, 4, 127), 3, 4, 127, 2),
                                             ((3, 4, 129), 3, 4, 129, 2), ((2, 8, 256), 2, 8, 256, 4)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bitwise_identical_at_any_address(isa, shape, N, C, HxW, G, dtype):
    rng = np.random.default_rng(HxW)
    dy, x, *rest = make(rng, shape, N, C, HxW, G, dtype)
    step = dtype.itemsize
    results = set()
    for dy_off, x_off, dx_off in [(0, 0, 0), (16, 16, 0), (step, step, 16), (48, 48, 48), (64 - step, 64 - step, step),
                                  (16, 0, 32), (0, 32 + step, 0)]:
        dx = at_line_offset(shape, dtype, dx_off)
        dx[...] = np.nan
        outs = ac.group_norm_backward(copy_at_line_offset(dy, dy_off), copy_at_line_offset(x, x_off), *rest, ALL,
                                      out=(dx, np.empty(C, dtype), np.empty(C, dtype)))
        results.add(b"".join(r.tobytes() for r in outs))
    assert len(results) == 1


# --------------------------------------------------------------------------------------------
# Documented errors (161001 #1-#4, 161002 #1-#11) through both APIs, outputs untouched.

ERRORS = {
    "null gradOut": 161001, "null input": 161001, "null mean": 161001, "null rstd": 161001,
    "null gradInput with mask": 161001, "null gradGammaOut with mask": 161001, "null gradBetaOut with mask": 161001,
    "gradOut float64": 161002, "gradOut int32": 161002, "input dtype": 161002, "mean dtype": 161002,
    "rstd dtype": 161002, "gamma dtype": 161002, "gradInput shape": 161002, "gradGammaOut shape": 161002,
    "gradBetaOut shape": 161002, "group zero": 161002, "group negative": 161002, "C not divisible": 161002,
    "input numel": 161002, "gradOut numel": 161002, "mean numel": 161002, "rstd numel": 161002,
    "gamma numel": 161002, "nine dims": 161002,
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_documented_errors(case):
    rng = np.random.default_rng(8)
    dy, x, mean, rstd, gm, N, C, HxW, G = make(rng, (2, 6, 5), 2, 6, 5, 3, np.float32)
    outs = [np.full((2, 6, 5), 4.0, np.float32), np.full(6, 4.0, np.float32), np.full(6, 4.0, np.float32)]
    if case.startswith("null ") and "with mask" not in case:
        name = case.split()[1]
        dy, x, mean, rstd = (None if n == name else a for n, a in
                             (("gradOut", dy), ("input", x), ("mean", mean), ("rstd", rstd)))
    elif "with mask" in case:
        outs[["gradInput", "gradGammaOut", "gradBetaOut"].index(case.split()[1])] = None
    elif case == "gradOut float64":
        dy, x, mean, rstd, gm = (a.astype(np.float64) for a in (dy, x, mean, rstd, gm))
        outs = [o.astype(np.float64) for o in outs]
    elif case == "gradOut int32":
        dy, x, mean, rstd, gm = (a.astype(np.int32) for a in (dy, x, mean, rstd, gm))
        outs = [o.astype(np.int32) for o in outs]
    elif case.endswith(" dtype"):
        which = case.split()[0]
        x, mean, rstd, gm = (a.astype(np.float16) if n == which else a for n, a in
                             (("input", x), ("mean", mean), ("rstd", rstd), ("gamma", gm)))
    elif case == "gradInput shape":
        outs[0] = np.full((2, 30), 4.0, np.float32)
    elif case == "gradGammaOut shape":
        outs[1] = np.full((6, 1), 4.0, np.float32)
    elif case == "gradBetaOut shape":
        outs[2] = np.full(5, 4.0, np.float32)
    elif case == "group zero":
        G = 0
    elif case == "group negative":
        G = -3
    elif case == "C not divisible":
        G = 4
    elif case == "input numel":
        x = np.ones((2, 6, 4), np.float32)
        outs[0] = np.full((2, 6, 4), 4.0, np.float32)
    elif case == "gradOut numel":
        dy = np.ones((2, 6, 4), np.float32)
    elif case == "mean numel":
        mean = np.ones(5, np.float32)
    elif case == "rstd numel":
        rstd = np.ones((2, 2), np.float32)
    elif case == "gamma numel":
        gm = np.ones(5, np.float32)
    elif case == "nine dims":
        x = np.ones((2, 6, 5) + (1,) * 6, np.float32)
        outs[0] = np.full(x.shape, 4.0, np.float32)
    before = [None if o is None else o.copy() for o in outs]
    apis = ("two_phase",) if any(o is None for o in outs) else ("functional", "two_phase")
    for api in apis:
        with pytest.raises(ac.AclnnError) as info:
            if api == "functional":
                ac.group_norm_backward(dy, x, mean, rstd, gm, N, C, HxW, G, ALL, out=tuple(outs))
            else:
                ac.aclnnGroupNormBackwardGetWorkspaceSize(dy, x, mean, rstd, gm, N, C, HxW, G, list(ALL), *outs)
        error = info.value
        assert error.status == ERRORS[case], str(error)
        assert "aclnnGroupNormBackward: " in str(error), str(error)
        assert isinstance(error, ac.ParamNullptrError if ERRORS[case] == 161001 else ac.ParamInvalidError)
    for b, o in zip(before, outs):
        if b is not None:
            np.testing.assert_array_equal(o, b)


def test_masked_off_null_outputs_are_fine():
    rng = np.random.default_rng(9)
    args = make(rng, (2, 6, 5), 2, 6, 5, 3, np.float32)
    gi = np.zeros((2, 6, 5), np.float32)
    ws, ex = ac.aclnnGroupNormBackwardGetWorkspaceSize(*args, [True, False, False], gi, None, None)
    ac.aclnnGroupNormBackward(np.empty(ws, np.uint8) if ws else None, ws, ex)
    check(args, (gi, None, None), (True, False, False))


def test_bfloat16_only_on_atlas_a2(product):
    rng = np.random.default_rng(10)
    args = make(rng, (2, 6, 5), 2, 6, 5, 3, BFLOAT16)
    outs = (np.full((2, 6, 5), 4.0, BFLOAT16), np.full(6, 4.0, BFLOAT16), np.full(6, 4.0, BFLOAT16))
    product("atlas_training")
    with pytest.raises(ac.ParamInvalidError) as info:
        ac.group_norm_backward(*args, ALL, out=outs)
    assert info.value.status == 161002
    assert all((f64(o) == 4.0).all() for o in outs)
    product("atlas_a2")
    ac.group_norm_backward(*args, ALL, out=outs)
    check(args, outs)


def test_large_output_streaming_path(threads):
    # > 2x a 32 MiB last-level cache: dX goes out with streaming stores (same values).
    rng = np.random.default_rng(11)
    args = make(rng, (8, 64, 180, 180), 8, 64, 32400, 16, np.float32)
    threads(2)
    results = ac.group_norm_backward(*args, ALL)
    check(args, results)
    threads(1)
    again = ac.group_norm_backward(*args, ALL)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(results, again))
