"""Property tests (hypothesis) over every op: random shapes (0-8 dims, size-0/1 dims), layouts
(negative, zero and overlapping strides for inputs; strided views for outputs), dtypes,
attributes and masks. Valid calls match a float64 reference; invalid ones raise the rule's
status; inputs stay bit-for-bit unchanged; outputs of rejected calls (and bytes around output
views) are untouched."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

import aclnn_cpu as ac
from support import BFLOAT16, UNIT_ROUNDOFF, assert_within, f64

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16]
U32 = 2.0 ** -24
TINY = {np.dtype(np.float32): 2.0 ** -140, np.dtype(np.float16): 2.0 ** -24, BFLOAT16: 2.0 ** -120,
        np.dtype(np.float64): 0.0}
SETTINGS = settings(max_examples=250, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])
NULLPTR, INVALID = 161001, 161002


def bound(ref, magnitude, n_terms, dtype):
    """Rounding to the output dtype plus fp32 accumulation of n_terms terms of size magnitude."""
    u = UNIT_ROUNDOFF[np.dtype(dtype)]
    return u * np.abs(ref) + (n_terms + 4) * U32 * (1 + u) * magnitude + TINY[np.dtype(dtype)]


# ---- layouts ------------------------------------------------------------------------------
INPUT_LAYOUTS = ["contiguous", "negative", "sliced", "transposed", "broadcast", "overlapping"]
OUTPUT_LAYOUTS = ["contiguous", "negative", "sliced", "transposed"]


def input_view(values, layout, rng):
    """A view with the values of ``values`` (broadcast/overlapping change the values: the view
    is what the call and the reference both see)."""
    a = values
    if a.ndim == 0 or a.size == 0 or layout == "contiguous":
        return a.copy()
    if layout == "negative":
        return np.ascontiguousarray(a[(slice(None, None, -1),) * a.ndim])[(slice(None, None, -1),) * a.ndim]
    if layout == "sliced":
        big = np.zeros(tuple(2 * s for s in a.shape), a.dtype)
        big[(slice(None, None, 2),) * a.ndim] = a
        return big[(slice(None, None, 2),) * a.ndim]
    if layout == "transposed":
        return np.ascontiguousarray(a.T).T
    if layout == "broadcast":  # stride 0 on one dim
        axis = int(rng.integers(a.ndim))
        return np.broadcast_to(np.take(a, [0], axis=axis).copy(), a.shape)
    # overlapping: every dim steps one element, so element idx is base[sum(idx)]
    base = a.reshape(-1)[: sum(s - 1 for s in a.shape) + 1].copy()
    return as_strided(base, shape=a.shape, strides=(a.itemsize,) * a.ndim, writeable=False)


class OutputView:
    """A writable view into a sentinel-filled buffer (twice as large for strided layouts), to
    catch writes outside the view as well as writes by rejected calls."""

    def __init__(self, shape, dtype, layout):
        shape = tuple(shape)
        every_other = (slice(None, None, 2),) * len(shape)
        if not shape or layout == "contiguous":
            self.buffer = np.full(shape, 7, dtype)
            self.view = self.buffer
        elif layout == "transposed":
            self.buffer = np.full(shape[::-1], 7, dtype)
            self.view = self.buffer.T
        else:
            self.buffer = np.full(tuple(2 * s for s in shape), 7, dtype)
            self.view = self.buffer[every_other]
            if layout == "negative":
                self.view = self.view[(slice(None, None, -1),) * len(shape)]
        # which buffer elements the view addresses: the same view over element numbers
        numbers = np.arange(self.buffer.size, dtype=np.int64).reshape(self.buffer.shape)
        item = self.buffer.itemsize
        offset = (self.view.ctypes.data - self.buffer.ctypes.data) // item if self.buffer.size else 0
        inside = np.ndarray(self.view.shape, np.int64, numbers, offset * 8,
                            tuple(st_ // item * 8 for st_ in self.view.strides)) if self.view.size else []
        self.outside = np.ones(self.buffer.size, bool)
        self.outside[np.asarray(inside, dtype=np.int64).reshape(-1)] = False
        self.snapshot = self.buffer.copy()

    def untouched_outside(self):
        flat, before = self.buffer.reshape(-1), self.snapshot.reshape(-1)
        return flat[self.outside].tobytes() == before[self.outside].tobytes()

    def untouched(self):
        return self.buffer.tobytes() == self.snapshot.tobytes()


def snapshot_inputs(*arrays):
    return [(a, a.copy()) for a in arrays if a is not None]


def assert_inputs_unchanged(snaps):
    for a, before in snaps:
        assert a.tobytes() == before.tobytes(), "an input was modified"


shapes = st.lists(st.integers(0, 4), min_size=0, max_size=8).filter(lambda s: int(np.prod(s)) <= 4096)


def draw_values(data, shape, dtype, low=-2.0, high=2.0):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    return rng.uniform(low, high, size=shape).astype(dtype), rng


# ---- SoftmaxBackward ----------------------------------------------------------------------
def softmax_ref(g, y, dim):
    g, y = f64(g), f64(y)
    if g.ndim == 0:
        return y * (g - g * y), np.abs(y) * (np.abs(g) + np.abs(g * y)), 1
    s = np.sum(g * y, axis=dim, keepdims=True)
    m = np.abs(y) * (np.abs(g) + np.sum(np.abs(g * y), axis=dim, keepdims=True))
    return y * (g - s), m, g.shape[dim]


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES),
       layouts=st.tuples(st.sampled_from(INPUT_LAYOUTS), st.sampled_from(INPUT_LAYOUTS)),
       out_layout=st.sampled_from(OUTPUT_LAYOUTS), out_dtype=st.sampled_from(DTYPES + [np.dtype(np.float64)]))
def test_softmax_backward_matches_reference(data, shape, dtype, layouts, out_layout, out_dtype):
    rank = max(len(shape), 1)
    dim = data.draw(st.integers(-rank, rank - 1), label="dim")
    gv, rng = draw_values(data, shape, dtype)
    yv, _ = draw_values(data, shape, dtype, 0.0, 1.0)
    g, y = input_view(gv, layouts[0], rng), input_view(yv, layouts[1], rng)
    snaps = snapshot_inputs(g, y)
    out = OutputView(tuple(shape), out_dtype, out_layout)
    ac.softmax_backward(g, y, dim, out=out.view)
    ref, mag, n = softmax_ref(g, y, dim % rank if len(shape) else 0)
    assert_within(out.view, ref, bound(ref, mag, n, out_dtype), "softmax out")
    assert out.untouched_outside(), "wrote outside the output view"
    assert_inputs_unchanged(snaps)


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES),
       fault=st.sampled_from(["dim", "dtype_mismatch", "bad_dtype", "shape", "null", "rank9", "out_dtype"]))
def test_softmax_backward_rejections(data, shape, dtype, fault):
    rank = max(len(shape), 1)
    dim = data.draw(st.integers(-rank, rank - 1), label="dim")
    g, _ = draw_values(data, shape, dtype)
    y, _ = draw_values(data, shape, dtype, 0.0, 1.0)
    out_shape, out_dtype, expect = tuple(shape), dtype, INVALID
    if fault == "dim":
        dim = data.draw(st.sampled_from([rank, rank + 3, -rank - 1, 2**62, -(2**63)]))
    elif fault == "dtype_mismatch":
        y = y.astype(np.float32 if dtype != np.float32 else np.float16)
    elif fault == "bad_dtype":
        g = g.astype(data.draw(st.sampled_from([np.float64, np.int32, np.int8])))
    elif fault == "shape":
        y = np.zeros(tuple(shape) + (2,), dtype)
    elif fault == "null":
        g, expect = None, NULLPTR
    elif fault == "rank9":
        g = y = np.zeros((1,) * 9, dtype)
        out_shape = (1,) * 9
    elif fault == "out_dtype":
        out_dtype = np.dtype(np.int32)
    snaps = snapshot_inputs(g, y)
    out = OutputView(out_shape, out_dtype, "contiguous")
    with pytest.raises(ac.AclnnError) as info:
        ws, ex = ac.aclnnSoftmaxBackwardGetWorkspaceSize(g, y, dim, out.view)
        ac.aclnnSoftmaxBackward(None if ws == 0 else np.empty(ws, np.uint8), ws, ex)
    assert info.value.status == expect, str(info.value)
    assert out.untouched()
    assert_inputs_unchanged(snaps)


# ---- PreluBackward ------------------------------------------------------------------------
def prelu_ref(g, x, w):
    g, x, w = np.broadcast_to(f64(g), x.shape), f64(x), f64(w).reshape(-1)
    if w.size == 1 or x.ndim < 2:
        wb = np.full(x.shape, w[0]) if w.size else np.zeros(x.shape)
        chan = np.zeros(x.shape, int)
    else:
        cshape = [1] * x.ndim
        cshape[1] = -1
        wb = np.broadcast_to(w.reshape(cshape), x.shape)
        chan = np.broadcast_to(np.arange(w.size).reshape(cshape), x.shape)
    neg = ~(x > 0)
    gi = np.where(neg, wb * g, g)
    terms = np.where(neg, x * g, 0.0)
    gw = np.bincount(chan.reshape(-1), terms.reshape(-1), minlength=w.size)[: w.size]
    gw_mag = np.bincount(chan.reshape(-1), np.abs(terms).reshape(-1), minlength=w.size)[: w.size]
    counts = np.bincount(chan.reshape(-1), minlength=w.size)[: w.size]
    return gi, gw, gw_mag, int(counts.max()) if counts.size else 0


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES), per_channel=st.booleans(),
       layouts=st.tuples(st.sampled_from(INPUT_LAYOUTS), st.sampled_from(INPUT_LAYOUTS)),
       out_layout=st.sampled_from(OUTPUT_LAYOUTS), broadcast_grad=st.booleans())
def test_prelu_backward_matches_reference(data, shape, dtype, per_channel, layouts, out_layout, broadcast_grad):
    shape = tuple(shape)
    channels = shape[1] if per_channel and len(shape) >= 2 else 1
    xv, rng = draw_values(data, shape, dtype)
    wv, _ = draw_values(data, (channels,), dtype, -1.0, 1.0)
    gshape = shape
    if broadcast_grad and shape:  # gradOutput with fewer dims / size-1 dims broadcasting to self
        k = data.draw(st.integers(0, len(shape)), label="drop")
        gshape = tuple(1 if data.draw(st.booleans()) else s for s in shape[k:])
    gv, _ = draw_values(data, gshape, dtype)
    g, x = input_view(gv, layouts[0], rng), input_view(xv, layouts[1], rng)
    snaps = snapshot_inputs(g, x, wv)
    gi = OutputView(shape, dtype, out_layout)
    gw = OutputView(wv.shape, dtype, "contiguous")
    ac.prelu_backward(g, x, wv, out=(gi.view, gw.view))
    ref_gi, ref_gw, gw_mag, n = prelu_ref(g, x, wv)
    assert_within(gi.view, ref_gi, bound(ref_gi, np.abs(ref_gi), 1, dtype), "gradInput")
    assert_within(gw.view, ref_gw, bound(ref_gw, gw_mag, n, dtype), "gradWeight")
    assert gi.untouched_outside() and gw.untouched_outside()
    assert_inputs_unchanged(snaps)


@SETTINGS
@given(data=st.data(), shape=st.lists(st.integers(1, 4), min_size=2, max_size=8), dtype=st.sampled_from(DTYPES),
       fault=st.sampled_from(["weight_count", "grad_shape", "dtype_mismatch", "null", "gi_shape", "gw_shape"]))
def test_prelu_backward_rejections(data, shape, dtype, fault):
    shape = tuple(shape)
    x, _ = draw_values(data, shape, dtype)
    g, _ = draw_values(data, shape, dtype)
    w = np.ones(shape[1], dtype)
    gi_shape, gw_shape, expect = shape, w.shape, INVALID
    if fault == "weight_count":
        w = np.ones(shape[1] + 1, dtype)
        gw_shape = w.shape
    elif fault == "grad_shape":
        g = np.ones(shape[:-1] + (shape[-1] + 1,), dtype)
    elif fault == "dtype_mismatch":
        w = w.astype(np.float32 if dtype != np.float32 else np.float16)
    elif fault == "null":
        x, expect = None, NULLPTR
    elif fault == "gi_shape":
        gi_shape = shape + (1,)
    elif fault == "gw_shape":
        gw_shape = (shape[1] + 1,)
    snaps = snapshot_inputs(g, x, w)
    gi, gw = OutputView(gi_shape, dtype, "contiguous"), OutputView(gw_shape, dtype, "contiguous")
    with pytest.raises(ac.AclnnError) as info:
        ac.prelu_backward(g, x, w, out=(gi.view, gw.view))
    assert info.value.status == expect, str(info.value)
    assert gi.untouched() and gw.untouched()
    assert_inputs_unchanged(snaps)


# ---- GroupNormBackward --------------------------------------------------------------------
def group_norm_ref(dy, x, mean, rstd, gamma, N, C, HxW, G):
    D = (C // G) * HxW
    dy3 = f64(dy).reshape(N, G, D)
    x3 = f64(x).reshape(N, G, D)
    m = f64(mean).reshape(N, G, 1)
    r = f64(rstd).reshape(N, G, 1)
    gam = np.ones(C) if gamma is None else f64(gamma).reshape(C)
    g3 = np.broadcast_to(np.repeat(gam.reshape(G, C // G), HxW, axis=1).reshape(1, G, D), (N, G, D))
    ds, db = np.sum(dy3 * g3 * x3, 2, keepdims=True), np.sum(dy3 * g3, 2, keepdims=True)
    ds_m, db_m = np.sum(np.abs(dy3 * g3 * x3), 2, keepdims=True), np.sum(np.abs(dy3 * g3), 2, keepdims=True)
    c2 = (db * m - ds) * r ** 3 / max(D, 1)
    c3 = -c2 * m - db * r / max(D, 1)
    dx = g3 * r * dy3 + c2 * x3 + c3
    c2m = (db_m * np.abs(m) + ds_m) * np.abs(r) ** 3 / max(D, 1)
    dx_mag = np.abs(g3 * r * dy3) + c2m * np.abs(x3) + c2m * np.abs(m) + db_m * np.abs(r) / max(D, 1)
    per_c = lambda t: t.reshape(N, C, HxW).sum(axis=(0, 2))  # noqa: E731
    xhat_dy = dy3 * (x3 - m) * r
    return (dx.reshape(x.shape), dx_mag.reshape(x.shape), per_c(xhat_dy), per_c(np.abs(xhat_dy)),
            per_c(dy3), per_c(np.abs(dy3)), max(D, N * HxW))


@SETTINGS
@given(data=st.data(), N=st.integers(0, 3), groups=st.integers(1, 3), per_group=st.integers(1, 3),
       spatial=st.lists(st.integers(0, 3), min_size=0, max_size=6), dtype=st.sampled_from(DTYPES),
       with_gamma=st.booleans(), mask=st.tuples(st.booleans(), st.booleans(), st.booleans()),
       layouts=st.tuples(st.sampled_from(INPUT_LAYOUTS), st.sampled_from(INPUT_LAYOUTS)),
       out_layout=st.sampled_from(OUTPUT_LAYOUTS))
def test_group_norm_backward_matches_reference(data, N, groups, per_group, spatial, dtype, with_gamma,
                                               mask, layouts, out_layout):
    C = groups * per_group
    HxW = int(np.prod(spatial)) if spatial else 1
    shape = (N, C) + tuple(spatial)
    xv, rng = draw_values(data, shape, dtype)
    dyv, _ = draw_values(data, shape, dtype)
    mean, _ = draw_values(data, (N, groups), dtype, -0.5, 0.5)
    rstd, _ = draw_values(data, (N, groups), dtype, 0.5, 2.0)
    gamma = draw_values(data, (C,), dtype)[0] if with_gamma else None
    dy, x = input_view(dyv, layouts[0], rng), input_view(xv, layouts[1], rng)
    snaps = snapshot_inputs(dy, x, mean, rstd, gamma)
    outs = [OutputView(s, dtype, out_layout) if on else None
            for s, on in zip((shape, (C,), (C,)), mask)]
    res = ac.group_norm_backward(dy, x, mean, rstd, gamma, N, C, HxW, groups, mask,
                                 out=tuple(o.view if o else None for o in outs))
    dx, dx_m, dg, dg_m, dbeta, dbeta_m, n = group_norm_ref(dy, x, mean, rstd, gamma, N, C, HxW, groups)
    for o, r, ref, mag, what in zip(outs, res, (dx, dg, dbeta), (dx_m, dg_m, dbeta_m), ("dx", "dgamma", "dbeta")):
        if o is None:
            assert r is None
            continue
        assert_within(o.view, ref, bound(ref, mag, n, dtype), what)
        assert o.untouched_outside()
    assert_inputs_unchanged(snaps)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES),
       fault=st.sampled_from(["group0", "C_not_multiple", "negative", "numel", "mean_numel", "gamma_numel",
                              "null", "dtype_mismatch", "dx_shape"]))
def test_group_norm_backward_rejections(data, dtype, fault):
    N, C, HxW, G = 2, 4, 3, 2
    x, _ = draw_values(data, (N, C, HxW), dtype)
    dy, _ = draw_values(data, (N, C, HxW), dtype)
    mean, rstd, gamma = np.zeros((N, G), dtype), np.ones((N, G), dtype), np.ones(C, dtype)
    dx_shape, expect = x.shape, INVALID
    if fault == "group0":
        G = data.draw(st.sampled_from([0, -1]))
    elif fault == "C_not_multiple":
        G = 3
    elif fault == "negative":
        N = -1
    elif fault == "numel":
        HxW = 4
    elif fault == "mean_numel":
        mean = np.zeros((N, G + 1), dtype)
    elif fault == "gamma_numel":
        gamma = np.ones(C + 1, dtype)
    elif fault == "null":
        rstd, expect = None, NULLPTR
    elif fault == "dtype_mismatch":
        gamma = gamma.astype(np.float32 if dtype != np.float32 else np.float16)
    elif fault == "dx_shape":
        dx_shape = (N, C, HxW + 1)
    snaps = snapshot_inputs(dy, x, mean, rstd, gamma)
    outs = [OutputView(dx_shape, dtype, "contiguous"), OutputView((4,), dtype, "contiguous"),
            OutputView((4,), dtype, "contiguous")]
    with pytest.raises(ac.AclnnError) as info:
        ac.group_norm_backward(dy, x, mean, rstd, gamma, N, C, HxW, G, (True, True, True),
                               out=tuple(o.view for o in outs))
    assert info.value.status == expect, str(info.value)
    assert all(o.untouched() for o in outs)
    assert_inputs_unchanged(snaps)


# ---- GridSampler2DBackward (oracle: PyTorch autograd in float64) ---------------------------
@SETTINGS
@given(data=st.data(), N=st.integers(0, 2), C=st.integers(0, 3), H=st.integers(1, 5), W=st.integers(1, 5),
       Ho=st.integers(0, 4), Wo=st.integers(0, 4), dtype=st.sampled_from(DTYPES),
       mode=st.integers(0, 2), padding=st.integers(0, 2), align=st.booleans(),
       mask=st.tuples(st.booleans(), st.booleans()),
       layouts=st.tuples(*[st.sampled_from(INPUT_LAYOUTS)] * 3), out_layout=st.sampled_from(OUTPUT_LAYOUTS))
def test_grid_sampler2d_backward_matches_torch_float64(torch, data, N, C, H, W, Ho, Wo, dtype, mode, padding,
                                                        align, mask, layouts, out_layout):
    import torch.nn.functional as F

    inpv, rng = draw_values(data, (N, C, H, W), dtype)
    gov, _ = draw_values(data, (N, C, Ho, Wo), dtype)
    gridv, _ = draw_values(data, (N, Ho, Wo, 2), dtype, -1.3, 1.3)
    go, inp, grid = (input_view(v, lay, rng) for v, lay in zip((gov, inpv, gridv), layouts))
    snaps = snapshot_inputs(go, inp, grid)
    outs = [OutputView(s, dtype, out_layout) if on else None for s, on in zip((inp.shape, grid.shape), mask)]
    ac.grid_sampler2d_backward(go, inp, grid, mode, padding, align, mask,
                               out=tuple(o.view if o else None for o in outs))
    ti = torch.tensor(f64(inp), requires_grad=True)
    tg = torch.tensor(f64(grid), requires_grad=True)
    y = F.grid_sample(ti, tg, ["bilinear", "nearest", "bicubic"][mode], ["zeros", "border", "reflection"][padding],
                      align_corners=align)
    y.backward(torch.tensor(f64(go)))
    # magnitudes: every output/input pair contributes |gradOutput| * |input| * (<= 16 taps,
    # weights and their slopes scaled by at most max(H, W)).
    scale = float(np.abs(f64(go)).max(initial=0)) * max(1.0, float(np.abs(f64(inp)).max(initial=0)))
    taps = 16 * max(1, C) * max(1, Ho * Wo)
    for o, ref, what in zip(outs, (ti.grad, tg.grad), ("inputGrad", "gridGrad")):
        if o is None:
            continue
        ref = ref.numpy() if ref is not None else np.zeros(o.view.shape)
        mag = scale * max(H, W) * 4
        assert_within(o.view, ref, bound(ref, mag, taps, dtype), what)
        assert o.untouched_outside()
    assert_inputs_unchanged(snaps)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES),
       fault=st.sampled_from(["mode", "padding", "rank", "batch", "channels", "grid_last", "empty_input",
                              "null", "dtype_mismatch", "out_shape"]))
def test_grid_sampler2d_backward_rejections(data, dtype, fault):
    inp, _ = draw_values(data, (2, 3, 4, 5), dtype)
    go, _ = draw_values(data, (2, 3, 2, 2), dtype)
    grid, _ = draw_values(data, (2, 2, 2, 2), dtype, -1, 1)
    mode, padding, expect, ig_shape = 0, 0, INVALID, inp.shape
    if fault == "mode":
        mode = data.draw(st.sampled_from([3, -1, 2**40]))
    elif fault == "padding":
        padding = data.draw(st.sampled_from([3, -1]))
    elif fault == "rank":
        inp = inp.reshape(2, 3, 20)
    elif fault == "batch":
        grid = np.zeros((1, 2, 2, 2), dtype)
    elif fault == "channels":
        go = np.zeros((2, 4, 2, 2), dtype)
    elif fault == "grid_last":
        grid = np.zeros((2, 2, 2, 3), dtype)
    elif fault == "empty_input":
        inp = np.zeros((2, 3, 0, 5), dtype)
    elif fault == "null":
        grid, expect = None, NULLPTR
    elif fault == "dtype_mismatch":
        go = go.astype(np.float32 if dtype != np.float32 else np.float16)
    elif fault == "out_shape":
        ig_shape = (2, 3, 4, 6)
    snaps = snapshot_inputs(go, inp, grid)
    outs = [OutputView(tuple(ig_shape), dtype, "contiguous"), OutputView((2, 2, 2, 2), dtype, "contiguous")]
    with pytest.raises(ac.AclnnError) as info:
        ac.grid_sampler2d_backward(go, inp, grid, mode, padding, False, (True, True),
                                   out=tuple(o.view for o in outs))
    assert info.value.status == expect, str(info.value)
    assert all(o.untouched() for o in outs)
    assert_inputs_unchanged(snaps)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from([np.dtype(np.float32), np.dtype(np.float16), BFLOAT16]))
def test_bfloat16_rejected_on_atlas_training(product, data, dtype):
    product("atlas_training")
    x, _ = draw_values(data, (2, 3), dtype)
    out = OutputView((2, 3), dtype, "contiguous")
    if dtype == BFLOAT16:
        with pytest.raises(ac.AclnnError) as info:
            ac.softmax_backward(x, x, 1, out=out.view)
        assert info.value.status == INVALID and out.untouched()
    else:
        ac.softmax_backward(x, x, 1, out=out.view)
