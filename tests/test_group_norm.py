"""aclnnGroupNorm against a float64 reference written from the formulas and PyTorch.

With D = C / group and each (n, g) group's m = D * HxW elements x:
    mean = sum x / m,  var = sum (x - mean)^2 / m,  rstd = 1 / sqrt(var + float32(eps))
    out  = (x - mean) * rstd * gamma[c] + beta[c]      (gamma ones, beta zeros when None)
The kernel works in fp32: per chunk of 2048 elements a sum in double lanes, then the deviations from
the chunk's mean and their squares, in lanes over blocks of at most 32 steps flushed to double;
chunks merged pairwise (Chan). Its error is bounded (u = 2^-24, A = mean |x| of the group,
S = |gamma| * rstd) by
    mean: u_out*|mean| + tiny + KU * A
    rstd: u_out*rstd   + tiny + KU * rstd
    out:  u_out*|out|  + tiny + KU * (S * (|x - mean| + A) + |beta|)
with KU = 300 u, a generous cover of the fp32 roundings (32 adds per lane in a block, the
deviations themselves, the final fp32 operations); the comparison with torch at the native dtype
is the tight check.
"""
from __future__ import annotations

import ctypes
import glob
import os

import numpy as np
import pytest

import aclnn_cpu as ac
from support import (BFLOAT16, FP32_EPS, UNIT_ROUNDOFF, assert_within, at_line_offset, channels_last, f64,
                     strided_view, to_torch)

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16]
TINY = {np.dtype(np.float32): 2.0 ** -149, np.dtype(np.float16): 2.0 ** -24, BFLOAT16: 2.0 ** -133}
KU = 300 * FP32_EPS


def reference(x, gamma, beta, N, C, HxW, G, eps):
    """float64 out (shape of x), mean, rstd ([N, G]) and the fp32 error part of each bound."""
    D = C // G
    shape = np.shape(x)
    xg = f64(x).reshape(N, G, D * HxW)
    mean = xg.mean(-1)
    var = ((xg - mean[..., None]) ** 2).mean(-1)
    rstd = 1.0 / np.sqrt(var + float(np.float32(eps)))
    gm = np.ones(C) if gamma is None else f64(gamma).reshape(C)
    bt = np.zeros(C) if beta is None else f64(beta).reshape(C)
    centred = (xg - mean[..., None]).reshape(N, C, HxW)
    per_c = lambda a: np.repeat(a, D, axis=1)[..., None]  # (N, G) -> (N, C, 1)
    out = centred * per_c(rstd) * gm[:, None] + bt[:, None]
    avg_abs = np.abs(xg).mean(-1)
    out_err = KU * (np.abs(gm[:, None]) * per_c(rstd) * (np.abs(centred) + per_c(avg_abs)) + np.abs(bt[:, None]))
    return out.reshape(shape), mean, rstd, out_err.reshape(shape), KU * avg_abs, KU * rstd


def bounds(ref, err, dtype):
    dtype = np.dtype(dtype)
    return UNIT_ROUNDOFF[dtype] * np.abs(ref) + TINY[dtype] + err


def check(args, results, dtype=None):
    x = args[0]
    dtype = np.dtype(np.asarray(x).dtype if dtype is None else dtype)
    ro, rm, rr, eo, em, er = reference(*args)
    for got, ref, err, name in zip(results, (ro, rm, rr), (eo, em, er), ("out", "meanOut", "rstdOut")):
        assert_within(f64(got).reshape(np.shape(ref)), ref, bounds(ref, err, dtype), name)


def make(rng, shape, C, G, dtype, gamma=True, beta=True, offset=0.0, scale=1.5):
    """self, gamma, beta, N, C, HxW, G, eps with values representable in dtype."""
    dtype = np.dtype(dtype)
    x = (rng.standard_normal(shape) * scale + offset).astype(dtype)
    gm = rng.standard_normal(C).astype(dtype) if gamma else None
    bt = rng.standard_normal(C).astype(dtype) if beta else None
    return x, gm, bt, shape[0], C, int(np.prod(shape[2:], dtype=np.int64)), G, 1e-5


# --------------------------------------------------------------------------------------------
# The documented example: self [2, 3, 4] = 1..24, gamma = beta = 2, group 1, eps 1e-5.

DOC_ARGS = (np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4), np.full(3, 2.0, np.float32),
            np.full(3, 2.0, np.float32), 2, 3, 4, 1, 1e-5)
DOC_OUT = [-1.186509, -0.607143, -0.027778, 0.551587, 1.130952, 1.710317, 2.289683, 2.869048, 3.448413, 4.027778,
           4.607143, 5.186509]


def test_documented_example():
    out, mean, rstd = ac.group_norm(*DOC_ARGS)
    check(DOC_ARGS, (out, mean, rstd))
    np.testing.assert_allclose(mean, [[6.5], [18.5]], rtol=0, atol=1e-6)
    np.testing.assert_allclose(rstd, [[0.289683], [0.289683]], rtol=0, atol=1e-6)
    np.testing.assert_allclose(out.reshape(2, 12), [DOC_OUT, DOC_OUT], rtol=0, atol=2e-6)


def test_documented_example_two_phase():
    outs = (np.zeros((2, 3, 4), np.float32), np.full((2, 1), 9.0, np.float32), np.full((2, 1), 9.0, np.float32))
    ws, ex = ac.aclnnGroupNormGetWorkspaceSize(*DOC_ARGS, *outs)
    ac.aclnnGroupNorm(np.empty(ws, np.uint8) if ws else None, ws, ex)
    check(DOC_ARGS, outs)
    functional = ac.group_norm(*DOC_ARGS)
    for a, b in zip(outs, functional):
        assert a.tobytes() == b.tobytes()


# --------------------------------------------------------------------------------------------
# Values across schedules: groups done one per task (fused) and split in chunks over tasks (few
# big groups: several 2048-element chunks, a partial last one), tiny groups (HxW 1, one channel
# per group: the official test cases' shapes), planes shorter than a vector, 2-D to 5-D.

CASES = [((2, 6, 5), 6, 3), ((2, 6, 4, 4), 6, 2), ((4, 32, 28, 28), 32, 8), ((3, 8), 8, 4), ((64, 64), 64, 32),
         ((2, 6, 3), 6, 6), ((5, 12, 7), 12, 3), ((2, 8, 1000), 8, 1), ((1, 4, 300, 300), 4, 2),
         ((1, 2, 70000), 2, 1), ((2, 4, 3, 17), 4, 2), ((3, 130, 700), 130, 1), ((1, 1), 1, 1),
         ((1, 47), 47, 47), ((41, 22, 1), 22, 22), ((23, 83, 1, 1), 83, 83), ((2, 6, 2, 3, 4), 6, 3),
         ((1, 3, 2049), 3, 1), ((2, 16, 4099), 16, 2), ((3, 10, 2, 2, 2, 2), 10, 5)]


@pytest.mark.parametrize("shape,C,G", CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("affine", ["both", "gamma", "beta", "none"])
def test_schedules(isa, shape, C, G, dtype, affine):
    rng = np.random.default_rng(int(np.prod(shape)) + G)
    args = make(rng, shape, C, G, dtype, gamma=affine in ("both", "gamma"), beta=affine in ("both", "beta"))
    check(args, ac.group_norm(*args))


# A mean far from zero against a small spread: sum(x^2) - m * mean^2 would lose every digit in
# fp32; the chunked deviations keep the variance to a few units of fp32 rounding.
@pytest.mark.parametrize("offset", [1e3, -3e4, 1e5])
def test_large_mean_keeps_fp32_accuracy(torch, offset):
    rng = np.random.default_rng(3)
    args = make(rng, (2, 8, 64, 64), 8, 2, np.float32, offset=offset, scale=1.0)
    out, mean, rstd = ac.group_norm(*args)
    check(args, (out, mean, rstd))
    ro, rm, rr, *_ = reference(*args)
    assert np.max(np.abs(f64(rstd) / rr - 1)) < 1e-4  # the deviations themselves are inexact in fp32


def test_eps_is_rounded_to_float32():
    # Constant groups: var = 0, so rstd = 1 / sqrt(float32(eps)) in fp32 (eps 0.1 is not a float32).
    x = np.full((2, 4, 3), 3.25, np.float32)
    _, mean, rstd = ac.group_norm(x, None, None, 2, 4, 3, 2, 0.1)
    assert (mean == 3.25).all()
    assert (rstd == np.float32(1) / np.sqrt(np.float32(0.1))).all()


# --------------------------------------------------------------------------------------------
# Layouts: channels-last self and out (rows of C channels per sample: chunks of rows), sliced,
# transposed and reversed views (dense copies), transposed planes (in memory order); self and
# out in different layouts.

LAYOUT_CASES = [((2, 6, 5, 7), 6, 3), ((3, 40, 4, 4), 40, 8), ((1, 33, 3, 2, 5), 33, 11), ((4, 64, 9, 9), 64, 32),
                ((2, 2048, 3, 3), 2048, 2048), ((1, 16, 64, 64), 16, 4), ((2, 24, 8, 16, 16), 24, 6),
                ((5, 12, 7), 12, 3), ((3, 10), 10, 5)]


@pytest.mark.parametrize("shape,C,G", LAYOUT_CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["channels-last", "sliced", "transposed", "negative"])
def test_strided_self_and_out(isa, shape, C, G, dtype, layout):
    rng = np.random.default_rng(C * G + len(shape))
    args = make(rng, shape, C, G, dtype)
    x = strided_view(rng, args[0], layout)
    before = x.copy()
    out = strided_view(rng, np.full(shape, np.nan, dtype), layout)
    result = ac.group_norm(x, *args[1:], out=(out, None, None))
    assert result[0] is out
    check(args, result)
    np.testing.assert_array_equal(x, before)
    # The functional API allocates out in self's memory order when that is dense.
    allocated = ac.group_norm(x, *args[1:])
    if layout == "channels-last" and len(shape) >= 3:
        assert allocated[0].strides == x.strides
    check(args, allocated)


@pytest.mark.parametrize("layout_x,layout_out", [("channels-last", "contiguous"), ("contiguous", "channels-last"),
                                                 ("sliced", "negative")])
def test_self_and_out_in_different_layouts(layout_x, layout_out):
    rng = np.random.default_rng(4)
    args = make(rng, (2, 12, 6, 5), 12, 4, np.float32)
    out = strided_view(rng, np.full((2, 12, 6, 5), np.nan, np.float32), layout_out)
    result = ac.group_norm(strided_view(rng, args[0], layout_x), *args[1:], out=(out, None, None))
    check(args, result)
    # The same bits as the contiguous call: dense copies move values bit for bit.
    if "channels-last" not in (layout_x, layout_out):
        assert np.array_equal(result[0], ac.group_norm(*args)[0])


def test_strided_parameters_and_statistics():
    rng = np.random.default_rng(5)
    x, gm, bt, N, C, HxW, G, eps = make(rng, (3, 6, 4, 5), 6, 2, np.float32)
    gamma_v = np.zeros(3 * C, np.float32)[::3]
    gamma_v[...] = gm
    beta_v = np.ascontiguousarray(bt[::-1])[::-1]
    mean_v = np.full((2, 2 * N * G), 7.0, np.float32)[1, ::-2].reshape(N, G)  # reversed, strided
    rstd_v = np.ascontiguousarray(np.full((G, N), 7.0, np.float32)).T  # transposed
    result = ac.group_norm(x, gamma_v, beta_v, N, C, HxW, G, eps, out=(None, mean_v, rstd_v))
    assert result[1] is mean_v and result[2] is rstd_v
    check((x, gm, bt, N, C, HxW, G, eps), result)


# --------------------------------------------------------------------------------------------
# PyTorch's native_group_norm in float64 as the second oracle, and our error never above
# torch's own at the native dtype.

TORCH_CASES = [((2, 6, 5), 6, 3), ((4, 32, 28, 28), 32, 8), ((16, 32), 32, 8), ((1, 4, 300, 300), 4, 2),
               ((9, 36), 36, 36), ((2, 6, 2, 3, 4), 6, 3)]


def torch_outputs(torch, args, dtype=None):
    x, gm, bt, N, C, HxW, G, eps = args
    t = (lambda a: to_torch(a).double()) if dtype is None else (lambda a: to_torch(a))
    # eps as aclnn uses it, rounded to float32 (torch's float64 call would keep 1e-5 exact).
    return [f64(r) for r in torch.ops.aten.native_group_norm(
        t(x), None if gm is None else t(gm), None if bt is None else t(bt), N, C, HxW, G, float(np.float32(eps)))]


@pytest.mark.parametrize("shape,C,G", TORCH_CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "channels-last", "sliced"])
def test_matches_torch(torch, isa, shape, C, G, dtype, affine, layout):
    rng = np.random.default_rng(6)
    args = make(rng, shape, C, G, dtype, gamma=affine, beta=affine)
    x = strided_view(rng, args[0], layout)
    results = ac.group_norm(x, *args[1:])
    expected = torch_outputs(torch, args)
    _, _, _, eo, em, er = reference(*args)
    for got, exp, err in zip(results, expected, (eo, em, er)):
        exp = exp.reshape(np.shape(got))
        assert_within(got, exp, bounds(exp, err.reshape(np.shape(got)), dtype), "vs torch")
    # torch runs its AVX2/AVX-512 kernels, fused multiply-adds included; the baseline level has no
    # FMA and rounds out's (x - mean) * scale + beta twice (as torch does on such a CPU).
    if isa != "baseline":
        assert_not_less_accurate(results, torch_outputs(torch, args, dtype=dtype), expected, dtype)


def assert_not_less_accurate(results, native, expected, dtype):
    """Against the float64 result, our errors are at most torch's at the native dtype, give or take
    the last rounding of each value (half an ulp of the dtype, which falls either way in both and
    decides the comparison on small tensors): the RMS error and the largest one. Where torch's
    errors are systematic, ours are strictly smaller (test_at_least_as_accurate_as_torch_far_from_zero)."""
    u = UNIT_ROUNDOFF[dtype]
    rms = lambda e: np.sqrt(np.mean(e ** 2))
    for got, nat, exp, name in zip(results, native, expected, ("out", "mean", "rstd")):
        ours = np.abs(f64(got).ravel() - exp.ravel())
        theirs = np.abs(nat.ravel() - exp.ravel())
        assert rms(ours) <= rms(theirs) + u * rms(exp), (name, "rms", rms(ours), rms(theirs))
        assert ours.max() <= theirs.max() + u * np.abs(exp).max(), (name, "max", ours.max(), theirs.max())


@pytest.mark.parametrize("offset", [1e2, 1e4])
def test_at_least_as_accurate_as_torch_far_from_zero(torch, offset):
    rng = np.random.default_rng(7)
    args = make(rng, (2, 16, 32, 32), 16, 4, np.float32, offset=offset, scale=1.0)
    results = ac.group_norm(*args)
    expected = torch_outputs(torch, args)
    native = torch_outputs(torch, args, dtype=np.float32)
    # out and rstd: torch's errors are several times ours here; the means are both within about
    # their final rounding.
    for got, nat, exp, factor in zip(results, native, expected, (0.5, 1.0, 0.5)):
        assert np.max(np.abs(f64(got).ravel() - exp.ravel())) <= factor * np.max(np.abs(nat.ravel() - exp.ravel()))


def test_torch_tensors_in_and_out(torch):
    x = torch.randn(2, 8, 6, 6, dtype=torch.bfloat16)
    gamma, beta = torch.randn(8, dtype=torch.bfloat16), torch.randn(8, dtype=torch.bfloat16)
    outs = (torch.empty_like(x), torch.empty(2, 4, dtype=torch.bfloat16), torch.empty(2, 4, dtype=torch.bfloat16))
    ac.group_norm(x, gamma, beta, 2, 8, 36, 4, 1e-5, out=outs)
    check((x, gamma, beta, 2, 8, 36, 4, 1e-5), outs, dtype=BFLOAT16)


# --------------------------------------------------------------------------------------------
# Round trip: forward, then the library's backward fed the forward's own mean and rstd, against
# torch autograd of F.group_norm (float64 on the same inputs).

@pytest.mark.parametrize("shape,C,G", [((2, 6, 5), 6, 3), ((4, 32, 8, 8), 32, 8), ((3, 12, 2, 3, 4), 12, 4),
                                       ((16, 32), 32, 8)], ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_round_trip_matches_torch_autograd(torch, shape, C, G, affine):
    rng = np.random.default_rng(8)
    x, gm, bt, N, C, HxW, G, eps = make(rng, shape, C, G, np.float32, gamma=affine, beta=affine)
    dy = rng.standard_normal(shape).astype(np.float32)
    out, mean, rstd = ac.group_norm(x, gm, bt, N, C, HxW, G, eps)
    dx, dgamma, dbeta = ac.group_norm_backward(dy, x, mean, rstd, gm, N, C, HxW, G)
    tx = torch.tensor(f64(x), requires_grad=True)
    tg = torch.tensor(f64(gm), requires_grad=True) if affine else None
    tb = torch.tensor(f64(bt), requires_grad=True) if affine else None
    ty = torch.nn.functional.group_norm(tx, G, tg, tb, float(np.float32(eps)))
    ty.backward(torch.tensor(f64(dy)))
    scale = np.abs(f64(dy)).max() * np.abs(rstd).max() * (1 if gm is None else np.abs(gm).max())
    np.testing.assert_allclose(out, ty.detach().numpy(), rtol=0, atol=1e-5 * np.abs(ty.detach().numpy()).max())
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=0, atol=2e-5 * scale * 4)
    if affine:
        np.testing.assert_allclose(dgamma, tg.grad.numpy(), rtol=0, atol=1e-4 * np.abs(tg.grad.numpy()).max())
        np.testing.assert_allclose(dbeta, tb.grad.numpy(), rtol=0, atol=1e-4 * np.abs(tb.grad.numpy()).max())


# --------------------------------------------------------------------------------------------
# Determinism: bitwise identical results for 1, 2 and 3 threads on every schedule, and wherever
# self and out sit in memory.

@pytest.mark.parametrize("shape,C,G,layout", [
    ((8, 32, 28, 28), 32, 8, "contiguous"), ((1, 4, 300, 300), 4, 2, "contiguous"), ((512, 64), 64, 16, "contiguous"),
    ((2, 2, 200, 200), 2, 1, "sliced"), ((4, 6, 30, 30), 6, 3, "transposed"), ((6, 48, 10, 10), 48, 16, "channels-last"),
    ((1, 32, 48, 48), 32, 8, "channels-last"), ((3000, 5), 5, 5, "contiguous")], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bitwise_identical_across_thread_counts(isa, threads, shape, C, G, layout, dtype):
    rng = np.random.default_rng(9)
    x, *rest = make(rng, shape, C, G, dtype)
    x = strided_view(rng, x, layout)
    results = []
    for count in (1, 2, 3):
        threads(count)
        results.append(b"".join(np.asarray(r).tobytes() for r in ac.group_norm(x, *rest)))
    assert results[0] == results[1] == results[2]


@pytest.mark.parametrize("shape,C,G", [((2, 8, 100), 8, 4), ((1, 3, 1000), 3, 1), ((1, 2, 40000), 2, 1),
                                       ((2, 6, 17), 6, 3)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bitwise_identical_at_any_address(isa, shape, C, G, dtype):
    rng = np.random.default_rng(10)
    x, *rest = make(rng, shape, C, G, dtype)
    step = dtype.itemsize
    results = set()
    for x_off, y_off in [(0, 0), (16, 16), (step, 16), (48, 0), (64 - step, step)]:
        xs = at_line_offset(shape, dtype, x_off)
        xs[...] = x
        y = at_line_offset(shape, dtype, y_off)
        outs = ac.group_norm(xs, *rest, out=(y, None, None))
        results.add(b"".join(r.tobytes() for r in outs))
    assert len(results) == 1


def test_large_output_streaming_path(threads):
    # Beyond a 32 MiB last-level cache: out goes out with streaming stores (same values).
    rng = np.random.default_rng(11)
    args = make(rng, (8, 64, 128, 128), 64, 16, np.float32)
    threads(2)
    results = ac.group_norm(*args)
    check(args, results)
    threads(1)
    again = ac.group_norm(*args)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(results, again))


# --------------------------------------------------------------------------------------------
# Empty self: meanOut 0, rstdOut NaN, out untouched, no workspace.

@pytest.mark.parametrize("shape,N,C,HxW,G", [((2, 3, 0), 2, 3, 0, 1), ((0, 4, 5), 0, 4, 5, 2),
                                             ((3, 0, 4), 3, 0, 4, 2), ((2, 4, 0, 3), 2, 4, 0, 4)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_empty_self(shape, N, C, HxW, G, dtype):
    x = np.zeros(shape, dtype)
    outs = (np.zeros(shape, dtype), np.full((N, G), 5.0, dtype), np.full((N, G), 5.0, dtype))
    ws, ex = ac.aclnnGroupNormGetWorkspaceSize(x, None, None, N, C, HxW, G, 1e-5, *outs)
    assert ws == 0
    ac.aclnnGroupNorm(None, 0, ex)
    assert (f64(outs[1]) == 0).all() and np.isnan(f64(outs[2])).all()
    _, mean, rstd = ac.group_norm(x, None, None, N, C, HxW, G, 1e-5)
    assert mean.shape == (N, G) and (f64(mean) == 0).all() and np.isnan(f64(rstd)).all()


# --------------------------------------------------------------------------------------------
# The checks in the library's order, through both APIs; outputs untouched, inputs unmodified.

ERRORS = {
    "null self": 161001, "null out": 161001, "null meanOut": 161001, "null rstdOut": 161001,
    "self float64": 161002, "self int32": 161002, "self bool": 161002, "gamma dtype": 161002,
    "beta dtype": 161002, "out dtype": 161002, "meanOut dtype": 161002, "rstdOut dtype": 161002,
    "group zero": 161002, "group negative": 161002, "C not divisible": 161002, "eps zero": 161002,
    "eps negative": 161002, "eps nan": 161002, "self 1-D": 161002, "self 9-D": 161002, "out shape": 161002,
    "meanOut shape": 161002, "rstdOut shape": 161002, "N differs": 161002, "C differs": 161002,
    "HxW differs": 161002, "HxW of 2-D": 161002, "gamma 2-D": 161002, "beta 2-D": 161002,
    "gamma length": 161002, "beta length": 161002,
}


def error_case(case):
    rng = np.random.default_rng(12)
    x, gm, bt, N, C, HxW, G, eps = make(rng, (2, 6, 5), 6, 3, np.float32)
    outs = [np.full((2, 6, 5), 4.0, np.float32), np.full((2, 3), 4.0, np.float32), np.full((2, 3), 4.0, np.float32)]
    names = ["out", "meanOut", "rstdOut"]
    if case == "null self":
        x = None
    elif case.startswith("null "):
        outs[names.index(case.split()[1])] = None
    elif case.startswith("self ") and case.split()[1] in ("float64", "int32", "bool"):
        t = np.dtype(case.split()[1])
        x, gm, bt = x.astype(t), gm.astype(t), bt.astype(t)
        outs = [o.astype(t) for o in outs]
    elif case.endswith(" dtype"):
        which = case.split()[0]
        if which == "gamma":
            gm = gm.astype(np.float16)
        elif which == "beta":
            bt = bt.astype(BFLOAT16)
        else:
            outs[names.index(which)] = outs[names.index(which)].astype(np.float16)
    elif case == "group zero":
        G = 0
    elif case == "group negative":
        G = -3
    elif case == "C not divisible":
        G = 4
    elif case == "eps zero":
        eps = 0.0
    elif case == "eps negative":
        eps = -1e-5
    elif case == "eps nan":
        eps = float("nan")
    elif case == "self 1-D":
        x, N, C, HxW, G = np.ones(6, np.float32), 6, 1, 1, 1
        outs = [np.full(6, 4.0, np.float32), np.full((6, 1), 4.0, np.float32), np.full((6, 1), 4.0, np.float32)]
        gm = bt = None
    elif case == "self 9-D":
        x = np.ones((2, 6, 5) + (1,) * 6, np.float32)
        outs[0] = np.full(x.shape, 4.0, np.float32)
    elif case == "out shape":
        outs[0] = np.full((2, 30), 4.0, np.float32)
    elif case == "meanOut shape":
        outs[1] = np.full(6, 4.0, np.float32)
    elif case == "rstdOut shape":
        outs[2] = np.full((3, 2), 4.0, np.float32)
    elif case == "N differs":
        x = np.ones((3, 6, 5), np.float32)
        outs[0] = np.full((3, 6, 5), 4.0, np.float32)
    elif case == "C differs":
        C = 3
        G = 3
        outs[1], outs[2] = np.full((2, 3), 4.0, np.float32), np.full((2, 3), 4.0, np.float32)
    elif case == "HxW differs":
        HxW = 4
    elif case == "HxW of 2-D":
        x, HxW = np.ones((2, 6), np.float32), 5
        outs[0] = np.full((2, 6), 4.0, np.float32)
    elif case == "gamma 2-D":
        gm = gm.reshape(6, 1)
    elif case == "beta 2-D":
        bt = bt.reshape(1, 6)
    elif case == "gamma length":
        gm = np.ones(5, np.float32)
    elif case == "beta length":
        bt = np.ones(12, np.float32)
    return x, gm, bt, N, C, HxW, G, eps, outs


@pytest.mark.parametrize("case", list(ERRORS))
def test_documented_errors(case):
    x, gm, bt, N, C, HxW, G, eps, outs = error_case(case)
    inputs = [None if a is None else a.copy() for a in (x, gm, bt)]
    before = [None if o is None else o.copy() for o in outs]
    apis = ("two_phase",) if any(o is None for o in outs) else ("functional", "two_phase")
    for api in apis:
        with pytest.raises(ac.AclnnError) as info:
            if api == "functional":
                ac.group_norm(x, gm, bt, N, C, HxW, G, eps, out=tuple(outs))
            else:
                ac.aclnnGroupNormGetWorkspaceSize(x, gm, bt, N, C, HxW, G, eps, *outs)
        error = info.value
        assert error.status == ERRORS[case], str(error)
        assert "aclnnGroupNorm: " in str(error), str(error)
        assert isinstance(error, ac.ParamNullptrError if ERRORS[case] == 161001 else ac.ParamInvalidError)
    for b, o in zip(before, outs):
        if b is not None:
            np.testing.assert_array_equal(o, b)
    for b, a in zip(inputs, (x, gm, bt)):
        if b is not None:
            np.testing.assert_array_equal(a, b)


def test_each_check_names_its_cause():
    messages = {}
    for case in ("N differs", "C differs", "HxW differs", "eps nan", "gamma 2-D", "self 1-D"):
        x, gm, bt, N, C, HxW, G, eps, outs = error_case(case)
        with pytest.raises(ac.ParamInvalidError) as info:
            ac.aclnnGroupNormGetWorkspaceSize(x, gm, bt, N, C, HxW, G, eps, *outs)
        messages[case] = str(info.value)
    assert "dim 0" in messages["N differs"] and "dim 1" in messages["C differs"]
    assert "HxW" in messages["HxW differs"] and "eps" in messages["eps nan"]
    assert "gamma" in messages["gamma 2-D"] and "2 to 8" in messages["self 1-D"]


@pytest.mark.parametrize("line", ["atlas_training", "atlas_inference"])
def test_bfloat16_only_on_atlas_a2(product, line):
    rng = np.random.default_rng(13)
    args = make(rng, (2, 6, 5), 6, 3, BFLOAT16)
    outs = (np.full((2, 6, 5), 4.0, BFLOAT16), np.full((2, 3), 4.0, BFLOAT16), np.full((2, 3), 4.0, BFLOAT16))
    product(line)
    with pytest.raises(ac.ParamInvalidError) as info:
        ac.group_norm(*args, out=outs)
    assert info.value.status == 161002
    assert all((f64(o) == 4.0).all() for o in outs)
    half = make(rng, (2, 6, 5), 6, 3, np.float16)
    check(half, ac.group_norm(*half))
    product("atlas_a2")
    ac.group_norm(*args, out=outs)
    check(args, outs)


# --------------------------------------------------------------------------------------------
# Storage formats, through the C API (the Python API creates every tensor as ND): self's format
# must equal out's, and NHWC, HWCN, NDHWC and the private formats are refused.

FORMATS = {"NCHW": 0, "NHWC": 1, "ND": 2, "NC1HWC0": 3, "FRACTAL_Z": 4, "HWCN": 16, "NDHWC": 27,
           "FRACTAL_NZ": 29, "NCDHW": 30, "NCL": 47}


@pytest.fixture(scope="module")
def capi():
    lib_dir = os.path.join(os.path.dirname(ac.__file__), "lib")
    lib = ctypes.CDLL(glob.glob(os.path.join(lib_dir, "libaclnn_cpu.so*"))[0])
    lib.aclCreateTensor.restype = ctypes.c_void_p
    lib.aclCreateTensor.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.c_uint64, ctypes.c_int,
                                    ctypes.POINTER(ctypes.c_int64), ctypes.c_int64, ctypes.c_int,
                                    ctypes.POINTER(ctypes.c_int64), ctypes.c_uint64, ctypes.c_void_p]
    lib.aclDestroyTensor.argtypes = [ctypes.c_void_p]
    lib.aclnnGroupNormGetWorkspaceSize.restype = ctypes.c_int
    lib.aclnnGroupNormGetWorkspaceSize.argtypes = (
        [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 4 + [ctypes.c_double] + [ctypes.c_void_p] * 3 +
        [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_void_p)])
    lib.aclnnGroupNorm.restype = ctypes.c_int
    lib.aclnnGroupNorm.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
    return lib


def c_tensor(lib, arr, fmt):
    shape = (ctypes.c_int64 * arr.ndim)(*arr.shape)
    strides = (ctypes.c_int64 * arr.ndim)(*(s // arr.itemsize for s in arr.strides))
    return lib.aclCreateTensor(shape, arr.ndim, 0, strides, 0, FORMATS[fmt], shape, arr.ndim,
                               arr.ctypes.data_as(ctypes.c_void_p))


@pytest.mark.parametrize("self_format,out_format,status", [
    ("ND", "ND", 0), ("NCHW", "NCHW", 0), ("NCL", "NCL", 0), ("NCDHW", "NCDHW", 0), ("NCL", "ND", 161002),
    ("ND", "NCHW", 161002), ("NHWC", "NHWC", 161002), ("HWCN", "HWCN", 161002), ("NDHWC", "NDHWC", 161002),
    ("NC1HWC0", "NC1HWC0", 161002), ("FRACTAL_Z", "FRACTAL_Z", 161002), ("FRACTAL_NZ", "FRACTAL_NZ", 161002)])
def test_storage_formats_through_the_c_api(capi, self_format, out_format, status):
    rng = np.random.default_rng(14)
    args = make(rng, (2, 6, 2, 2), 6, 3, np.float32)
    x, gm, bt = args[:3]
    outs = [np.full((2, 6, 2, 2), 4.0, np.float32), np.full((2, 3), 4.0, np.float32), np.full((2, 3), 4.0, np.float32)]
    tensors = [c_tensor(capi, x, self_format), c_tensor(capi, gm, "ND"), c_tensor(capi, bt, "ND"),
               c_tensor(capi, outs[0], out_format), c_tensor(capi, outs[1], "ND"), c_tensor(capi, outs[2], "ND")]
    ws, ex = ctypes.c_uint64(0), ctypes.c_void_p()
    got = capi.aclnnGroupNormGetWorkspaceSize(*tensors[:3], 2, 6, 4, 3, 1e-5, *tensors[3:], ctypes.byref(ws),
                                              ctypes.byref(ex))
    assert got == status
    if status == 0:
        work = ac.empty_aligned((max(1, ws.value),), np.uint8)
        assert capi.aclnnGroupNorm(work.ctypes.data_as(ctypes.c_void_p), ws.value, ex, None) == 0
        check(args, outs)
    else:
        assert all((o == 4.0).all() for o in outs)
    for t in tensors:
        capi.aclDestroyTensor(t)
