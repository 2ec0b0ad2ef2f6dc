"""aclnnGridSampler2DBackward: gradients of 2-D grid sampling with respect to input and grid.

Checked against a float64 NumPy reference written here from the formulas (PyTorch's
grid_sampler_2d_backward semantics: unnormalize, clip/reflect with their gradient multipliers,
bilinear / nearest (round half to even) / bicubic (A = -0.75) weights) and against PyTorch's own
CPU op in float64, both on the same (already rounded) inputs.

Error bounds. The kernel computes coordinates in double, rounds the per-position factors to fp32
(relative error u = 2^-24 each) and accumulates in fp32, then rounds to the output dtype
(unit roundoff u_out). With "mag" the sum of the absolute values of the terms of a result:

    inputGrad pixel, m contributions t_k = weight_k * g_k (weight = product of two rounded
    factors, 3u; product and running sum, (m + 1)u; positions split into at most 8 parts summed
    in order, 8u):        |err| <= u_out*|exact| + (m + 12) * u * mag
    gridGrad component, C channels: per channel the bilinear term g*((ne-nw)*s + (se-sw)*n)
    carries <= 5u of its magnitude, bicubic's 4x4 taps <= 12u; lanes and blocks are summed in
    a tree / in order (< C + 4 steps), the multiplier adds u:
                          |err| <= u_out*|exact| + (C + 20) * u * mag
    nearest gridGrad: exactly 0.

Non-finite and far-away grid values follow PyTorch's CPU kernel (compared with it directly).
Where PyTorch's bilinear backward reads out of bounds and crashes (border padding with a NaN
coordinate, reflection padding with a NaN or infinite one), the kernel uses the coordinate
PyTorch's forward pass samples (clipped to 0) with a zero gradient multiplier: exactly what the
grid value -1 gives, which is what those cases are compared against.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import aclnn_cpu as ac
from support import BFLOAT16, FP32_EPS, LAYOUTS, UNIT_ROUNDOFF, assert_within, channels_last, f64, strided_view, to_torch

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16]
TINY = {np.dtype(np.float32): 2.0 ** -149, np.dtype(np.float16): 2.0 ** -24, BFLOAT16: 2.0 ** -133}
MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}
COMBOS = list(itertools.product(MODES, PADDINGS, [False, True]))
A = -0.75


def combo_id(combo):
    mode, pad, align = combo
    return f"{MODES[mode]}-{PADDINGS[pad]}-{'align' if align else 'noalign'}"


# --------------------------------------------------------------------------------------------
# float64 reference

def unnormalize(g, size, align):
    """Pixel coordinate of grid value g and d(coordinate)/d(g)."""
    if align:
        return (g + 1) / 2 * (size - 1), (size - 1) / 2
    return ((g + 1) * size - 1) / 2, size / 2


def clip(x, size):
    """Clamp to [0, size - 1]; derivative 1 strictly inside, 0 on or beyond the borders."""
    inside = (x > 0) & (x < size - 1)
    return np.clip(x, 0, size - 1), inside.astype(np.float64)


def reflect(x, size, align):
    """Fold x into [0, size - 1] (align) or [-0.5, size - 0.5]; derivative +-1."""
    if align and size <= 1:
        return np.zeros_like(x), np.zeros_like(x)
    low, span = (0.0, size - 1.0) if align else (-0.5, float(size))
    d = x - low
    sign = np.where(d < 0, -1.0, 1.0)
    d = np.abs(d)
    flips = np.floor(d / span)
    extra = np.fmod(d, span)
    even = flips % 2 == 0
    return np.where(even, low + extra, low + span - extra), np.where(even, sign, -sign)


def padded(x, size, pad, align):
    """The coordinate padding maps x to (no derivative): identity, clip, or reflect + clip."""
    if pad == 1:
        return clip(x, size)[0]
    if pad == 2:
        return clip(reflect(x, size, align)[0], size)[0]
    return x


def source(g, size, pad, align):
    """Bilinear/nearest source coordinate and its multiplier d(coordinate)/d(grid value)."""
    x, mult = unnormalize(g, size, align)
    mult = np.full_like(x, mult)
    if pad == 1:
        x, dc = clip(x, size)
        mult = mult * dc
    elif pad == 2:
        x, dr = reflect(x, size, align)
        x, dc = clip(x, size)
        mult = mult * dr * dc
    return x, mult


def cubic(t):
    """Cubic convolution weights of taps at offsets -1, 0, 1, 2 for fraction t, and d/dt."""
    def near(d):  # |d| <= 1
        return ((A + 2) * d - (A + 3)) * d * d + 1

    def far(d):  # 1 < |d| < 2
        return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A

    def near_slope(d):
        return 3 * (A + 2) * d * d - 2 * (A + 3) * d

    def far_slope(d):
        return 3 * A * d * d - 10 * A * d + 8 * A

    weights = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    slopes = [far_slope(t + 1), near_slope(t), -near_slope(1 - t), -far_slope(2 - t)]
    return weights, slopes


def reference(go, x, grid, mode, pad, align):
    """float64 (inputGrad, gridGrad) and the error bounds of an fp32 computation (see the module
    docstring), before the output dtype's own rounding."""
    go, x, grid = f64(go), f64(x), f64(grid)
    N, C, H, W = x.shape
    Ho, Wo = grid.shape[1:3]
    P = Ho * Wo
    g = go.reshape(N, C, P)
    img = x.reshape(N, C, H * W)
    gx, gy = grid[..., 0].reshape(N, 1, P), grid[..., 1].reshape(N, 1, P)
    ig = np.zeros((N, C, H * W))
    ig_mag = np.zeros_like(ig)
    ig_count = np.zeros_like(ig)
    n_idx = np.arange(N).reshape(N, 1, 1)
    c_idx = np.arange(C).reshape(1, C, 1)

    def tap(ix, iy, valid):
        """Values of the pixel (ix, iy) of every channel (0 where not valid) and its flat index."""
        flat = np.where(valid, iy * W + ix, 0).astype(np.int64)
        vals = np.take_along_axis(img, np.broadcast_to(flat, (N, C, P)), axis=2) * valid
        return vals, np.broadcast_to(flat, (N, C, P))

    def scatter(flat, valid, weight):
        contrib = np.broadcast_to(weight * g * valid, (N, C, P))
        idx = (np.broadcast_to(n_idx, (N, C, P)), np.broadcast_to(c_idx, (N, C, P)), flat)
        np.add.at(ig, idx, contrib)
        np.add.at(ig_mag, idx, np.abs(contrib))
        np.add.at(ig_count, idx, np.broadcast_to(valid, (N, C, P)).astype(np.float64))

    def inside(ix, iy):
        return (ix >= 0) & (ix < W) & (iy >= 0) & (iy < H)

    if mode == 1:
        xs, _ = source(gx, W, pad, align)
        ys, _ = source(gy, H, pad, align)
        ix, iy = np.rint(xs), np.rint(ys)  # round half to even
        valid = inside(ix, iy)
        _, flat = tap(ix, iy, valid)
        scatter(flat, valid, 1.0)
        gg = np.zeros((N, Ho, Wo, 2))
        gg_mag = np.zeros_like(gg)
    elif mode == 0:
        xs, mx = source(gx, W, pad, align)
        ys, my = source(gy, H, pad, align)
        x0, y0 = np.floor(xs), np.floor(ys)
        w, n = xs - x0, ys - y0
        e, s = 1 - w, 1 - n
        corners = {}
        for name, cx, cy, weight in (("nw", x0, y0, s * e), ("ne", x0 + 1, y0, s * w),
                                     ("sw", x0, y0 + 1, n * e), ("se", x0 + 1, y0 + 1, n * w)):
            valid = inside(cx, cy)
            vals, flat = tap(cx, cy, valid)
            scatter(flat, valid, weight)
            corners[name] = vals
        nw, ne, sw, se = corners["nw"], corners["ne"], corners["sw"], corners["se"]
        dx = g * ((ne - nw) * s + (se - sw) * n)
        dy = g * ((sw - nw) * e + (se - ne) * w)
        dx_mag = np.abs(g) * (np.abs(ne - nw) * np.abs(s) + np.abs(se - sw) * np.abs(n))
        dy_mag = np.abs(g) * (np.abs(sw - nw) * np.abs(e) + np.abs(se - ne) * np.abs(w))
        gg = np.stack([mx[:, 0] * dx.sum(1), my[:, 0] * dy.sum(1)], -1).reshape(N, Ho, Wo, 2)
        gg_mag = np.stack([np.abs(mx[:, 0]) * dx_mag.sum(1), np.abs(my[:, 0]) * dy_mag.sum(1)],
                          -1).reshape(N, Ho, Wo, 2)
    else:
        xs, sx = unnormalize(gx, W, align)
        ys, sy = unnormalize(gy, H, align)
        x0, y0 = np.floor(xs), np.floor(ys)
        wx, dwx = cubic(xs - x0)
        wy, dwy = cubic(ys - y0)
        dx = np.zeros((N, C, P))
        dy = np.zeros_like(dx)
        dx_mag = np.zeros_like(dx)
        dy_mag = np.zeros_like(dx)
        for i, j in itertools.product(range(4), range(4)):
            tx = padded(x0 + i - 1, W, pad, align)
            ty = padded(y0 + j - 1, H, pad, align)
            valid = inside(tx, ty)
            vals, flat = tap(tx, ty, valid)
            scatter(flat, valid, wx[i] * wy[j])
            dx += vals * dwx[i] * wy[j]
            dy += vals * wx[i] * dwy[j]
            dx_mag += np.abs(vals * dwx[i] * wy[j])
            dy_mag += np.abs(vals * wx[i] * dwy[j])
        gg = np.stack([sx * (g * dx).sum(1), sy * (g * dy).sum(1)], -1).reshape(N, Ho, Wo, 2)
        gg_mag = np.stack([abs(sx) * (np.abs(g) * dx_mag).sum(1), abs(sy) * (np.abs(g) * dy_mag).sum(1)],
                          -1).reshape(N, Ho, Wo, 2)
    ig_bound = (ig_count + 12) * FP32_EPS * ig_mag
    gg_bound = (C + 20) * FP32_EPS * gg_mag
    return ig.reshape(x.shape), gg, ig_bound.reshape(x.shape), gg_bound


def check(ig, gg, ref, dtype, what=""):
    ref_ig, ref_gg, ig_bound, gg_bound = ref
    u, tiny = UNIT_ROUNDOFF[np.dtype(dtype)], TINY[np.dtype(dtype)]
    if ig is not None:
        assert_within(ig, ref_ig, u * np.abs(ref_ig) + ig_bound + tiny, f"inputGrad {what}")
    if gg is not None:
        assert_within(gg, ref_gg, u * np.abs(ref_gg) + gg_bound + tiny, f"gridGrad {what}")


def make(rng, N, C, H, W, Ho, Wo, dtype, spread=1.3):
    """gradOutput, input, grid in dtype; the grid reaches `spread` beyond [-1, 1]'s scale."""
    go = rng.standard_normal((N, C, Ho, Wo)).astype(dtype)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    grid = rng.uniform(-spread, spread, (N, Ho, Wo, 2)).astype(dtype)
    return go, x, grid


def torch_reference(torch, go, x, grid, mode, pad, align):
    t = [to_torch(a).double() for a in (go, x, grid)]
    gi, gg = torch.ops.aten.grid_sampler_2d_backward(t[0], t[1], t[2], mode, pad, align, [True, True])
    return gi.numpy(), gg.numpy()


# --------------------------------------------------------------------------------------------
# The documented example (document 004): input 1..40 as [1, 1, 5, 8], a 3x3 grid, ones.

DOC_GRID = [-1, -1, 0, -1, 1, -1, -1, 0, 0, 0, 1, 0, -1, 1, 0, 1, 1, 1]


def test_documented_example():
    go = np.ones((1, 1, 3, 3), np.float32)
    x = np.arange(1, 41, dtype=np.float32).reshape(1, 1, 5, 8)
    grid = np.array(DOC_GRID, np.float32).reshape(1, 3, 3, 2)
    ig, gg = ac.grid_sampler2d_backward(go, x, grid, 0, 0, False)
    ref_ig, ref_gg, _, _ = reference(go, x, grid, 0, 0, False)
    # Corner and edge-centre samples: every weight is 0, 1/4 or 1/2, so the result is exact.
    np.testing.assert_array_equal(ig, ref_ig)
    np.testing.assert_array_equal(gg, ref_gg)
    np.testing.assert_array_equal(ig[0, 0, 0], [0.25, 0, 0, 0.25, 0.25, 0, 0, 0.25])
    np.testing.assert_array_equal(gg[0, 1, 1], [4.0, 20.0])  # the centre: half the steps of 1 and 8
    # The same through the two-phase API into preallocated outputs.
    ig2, gg2 = np.zeros_like(x), np.zeros_like(grid)
    ws, ex = ac.aclnnGridSampler2DBackwardGetWorkspaceSize(go, x, grid, 0, 0, False, (True, True), ig2, gg2)
    ac.aclnnGridSampler2DBackward(np.empty(ws, np.uint8) if ws else None, ws, ex)
    np.testing.assert_array_equal(ig2, ig)
    np.testing.assert_array_equal(gg2, gg)


# --------------------------------------------------------------------------------------------
# Numbers against the float64 formulas: every mode x padding x align x dtype x ISA level, with
# grids beyond [-1, 1], a 1x1 input, and channel counts for each block width (4, 8, 16 lanes,
# partial last blocks). (1, 12, 8, 8, 64, 64) splits its one 16-lane block (12 channels) into
# position parts, whose sums go through the 8- and 4-channel write-back groups.

SHAPES = [(2, 5, 7, 9, 6, 11), (1, 21, 8, 6, 9, 7), (3, 1, 1, 1, 4, 5), (1, 3, 2, 13, 1, 17), (1, 12, 8, 8, 64, 64),
          (2, 5, 40, 36, 3, 5),  # a small grid over a big input: bilinear and nearest on touched pixels only
          # one channel: one-lane blocks (the buffers are planes), fused, split into position
          # parts, and on touched pixels only
          (2, 1, 9, 11, 10, 8), (1, 1, 20, 18, 45, 50), (2, 1, 40, 36, 3, 5),
          # bilinear records per tile with 3 blocks split into position parts, and per chunk
          # of samples (phase 1) with 9 blocks
          (1, 20, 6, 7, 64, 64), (1, 140, 6, 5, 7, 8)]


@pytest.mark.parametrize("combo", COMBOS, ids=combo_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_formulas(isa, combo, dtype):
    mode, pad, align = combo
    rng = np.random.default_rng(hash(combo) % 1000)
    for shape in SHAPES:
        go, x, grid = make(rng, *shape, dtype, spread=1.7)
        ig, gg = ac.grid_sampler2d_backward(go, x, grid, mode, pad, align)
        assert ig.dtype == dtype and gg.dtype == dtype
        check(ig, gg, reference(go, x, grid, mode, pad, align), dtype, str(shape))


@pytest.mark.parametrize("combo", COMBOS, ids=combo_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_torch(torch, combo, dtype):
    mode, pad, align = combo
    rng = np.random.default_rng(7 + hash(combo) % 1000)
    for shape in [(2, 6, 9, 7, 8, 10), (1, 33, 5, 12, 7, 6), (2, 18, 30, 33, 4, 3), (3, 1, 12, 11, 9, 13)]:
        go, x, grid = make(rng, *shape, dtype, spread=2.5)
        ig, gg = ac.grid_sampler2d_backward(go, x, grid, mode, pad, align)
        _, _, ig_bound, gg_bound = reference(go, x, grid, mode, pad, align)
        t_ig, t_gg = torch_reference(torch, go, x, grid, mode, pad, align)
        check(ig, gg, (t_ig, t_gg, ig_bound, gg_bound), dtype, f"vs torch {shape}")


def test_round_half_to_even():
    # W = H = 4, align_corners false: grid -0.5, 0, 0.5 land on pixel coordinates 0.5, 1.5, 2.5.
    x = np.zeros((1, 1, 4, 4), np.float32)
    grid = np.array([[[[-0.5, -0.5], [0.0, 0.0], [0.5, 0.5]]]], np.float32)
    go = np.array([[[[1.0, 2.0, 4.0]]]], np.float32)
    ig, gg = ac.grid_sampler2d_backward(go, x, grid, 1, 0, False)
    expected = np.zeros((4, 4), np.float32)
    expected[0, 0] = 1.0  # 0.5 -> 0
    expected[2, 2] = 2.0 + 4.0  # 1.5 -> 2 and 2.5 -> 2
    np.testing.assert_array_equal(ig[0, 0], expected)
    np.testing.assert_array_equal(gg, 0.0)


# --------------------------------------------------------------------------------------------
# Grid values far outside [-1, 1], infinite and NaN: as PyTorch's CPU kernel.

SPECIAL = [np.nan, np.inf, -np.inf, 1e30, -1e30, 3e9, -7.25, 5.5, 1e3 + 0.375, -3e4, 1.0, -1.0]
# Reflection folds x with x - floor(x / period) * period; for |x| ~ 1e30 the product rounds, and
# whether a compiler fuses it into an FMA changes the fold, so reflection keeps to exact cases.
SPECIAL_REFLECTION = [np.nan, np.inf, -np.inf, -7.25, 5.5, 1e3 + 0.375, -3e4, 1.0, -1.0]


def special_grid(rng, N, Ho, Wo, dtype, pad):
    grid = rng.uniform(-1.2, 1.2, (N, Ho, Wo, 2))
    mask = rng.random(grid.shape) < 0.35
    grid[mask] = rng.choice(SPECIAL_REFLECTION if pad == 2 else SPECIAL, int(mask.sum()))
    with np.errstate(over="ignore"):
        return grid.astype(dtype)


def crashes_torch(mode, pad, grid):
    """Entries PyTorch's bilinear backward indexes with out of bounds (it segfaults on them)."""
    g = f64(grid)
    if mode != 0 or pad == 0:
        return np.zeros(g.shape, bool)
    return np.isnan(g) if pad == 1 else ~np.isfinite(g)


def assert_close_normwise(actual, expected, dtype, what):
    """Same NaN pattern and infinities; finite entries within the output rounding plus 1e-5 of
    the largest finite magnitude (every result here sums a handful of terms of that size)."""
    e = np.asarray(expected, np.float64)
    scale = np.abs(e[np.isfinite(e)]).max(initial=0.0)
    bound = UNIT_ROUNDOFF[np.dtype(dtype)] * np.abs(np.nan_to_num(e, posinf=0, neginf=0))
    assert_within(actual, e, bound + 1e-5 * scale + TINY[np.dtype(dtype)], what)
    a = f64(actual)
    assert np.array_equal(a[np.isinf(e)], e[np.isinf(e)]), f"{what}: infinities differ"


@pytest.mark.parametrize("combo", COMBOS, ids=combo_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_special_grid_values_match_torch(torch, isa, combo, dtype):
    mode, pad, align = combo
    rng = np.random.default_rng(11 + hash(combo) % 1000)
    # 20 channels: blocks of 8, 8 and 4 lanes, so a partial block (whose spare lanes may hold
    # 0 * NaN) precedes a full one in the same scratch slot.
    go, x, _ = make(rng, 2, 20, 5, 6, 7, 9, dtype)
    grid = special_grid(rng, 2, 7, 9, dtype, pad)
    ig, gg = ac.grid_sampler2d_backward(go, x, grid, mode, pad, align)
    safe = f64(grid)
    safe[crashes_torch(mode, pad, grid)] = -1.0  # the documented equivalent of those entries
    t_ig, t_gg = torch_reference(torch, go, x, safe.astype(dtype), mode, pad, align)
    assert_close_normwise(ig, t_ig, dtype, "inputGrad")
    assert_close_normwise(gg, t_gg, dtype, "gridGrad")


@pytest.mark.parametrize("combo", COMBOS, ids=combo_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_special_grad_output_values_match_torch(torch, isa, combo, dtype):
    """Infinite and NaN gradOutput entries give PyTorch's NaNs and infinities. Bicubic's
    gridGrad sums 16 taps of both signs: PyTorch multiplies gradOutput into each tap, so an
    infinite one meets taps of both signs (and zero taps) and gives NaN, where summing the
    taps first and scaling once gave an infinity; positions with such a gradOutput now sum
    per tap."""
    mode, pad, align = combo
    rng = np.random.default_rng(17 + hash(combo) % 1000)
    # 3 and 20 channels: one 4-lane block, and blocks of 8, 8 and 4 lanes.
    for C in (3, 20):
        go, x, grid = make(rng, 2, C, 5, 6, 7, 9, dtype)
        mask = rng.random(go.shape) < 0.05
        go[mask] = rng.choice(np.array([np.inf, -np.inf, np.nan], dtype), int(mask.sum()))
        ig, gg = ac.grid_sampler2d_backward(go, x, grid, mode, pad, align)
        t_ig, t_gg = torch_reference(torch, go, x, grid, mode, pad, align)
        with np.errstate(invalid="ignore"):  # (the bound's check subtracts matching infinities)
            assert_close_normwise(ig, t_ig, dtype, f"inputGrad C{C}")
            assert_close_normwise(gg, t_gg, dtype, f"gridGrad C{C}")


# The framed layout (bilinear, one channel block on whole buffers, at every level: one, 4, 8
# and, on AVX-512, 16 lanes; ops/grid_sampler2d_backward/records.h, Frame): a corner outside the
# image lands on a pad of the frame, zero in the input buffer, discarded in the inputGrad one.
# Coordinates on each edge and just beyond it (-1, -0.5, 0, W - 1, W - 0.5, W and around them,
# on both axes), images one pixel high or wide, a windowed grid (few positions: only the rows
# they reach are framed), grids far outside; the workspace NaN and zero, one and two threads.
FRAMED_SHAPES = [(2, 3, 7, 9, 8, 10), (2, 2, 1, 6, 5, 4), (2, 4, 5, 1, 6, 3), (4, 3, 12, 10, 9, 11),
                 (1, 3, 128, 2, 1, 32), (2, 1, 6, 7, 5, 8), (3, 1, 9, 1, 6, 7), (2, 8, 5, 6, 7, 4),
                 (2, 6, 1, 9, 4, 5), (2, 11, 6, 5, 7, 6), (1, 16, 4, 7, 5, 9)]


def edge_grid(rng, N, H, W, Ho, Wo, align):
    """Grid values (float64) whose pixel coordinates lie on and around the image's edges."""
    def grid_value(pixel, size):  # the grid value whose source coordinate is `pixel`
        if align:
            return 2.0 * pixel / (size - 1) - 1.0 if size > 1 else pixel
        return (2.0 * pixel + 1.0) / size - 1.0
    grid = rng.uniform(-1.3, 1.3, (N, Ho, Wo, 2))
    for axis, size in ((0, W), (1, H)):
        edges = [grid_value(p, size) for p in (-2.0, -1.0, -0.75, -0.5, 0.0, 0.5, size - 1.5, size - 1.0,
                                                size - 0.5, size - 0.25, float(size), size + 1.0)]
        mask = rng.random((N, Ho, Wo)) < 0.7
        grid[..., axis][mask] = rng.choice(edges, int(mask.sum()))
    return grid


@pytest.mark.parametrize("pad", [0, 1, 2])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_framed_layout_edges(isa, threads, pad, align, dtype):
    rng = np.random.default_rng(31 + 2 * pad + align)
    for shape in FRAMED_SHAPES:
        N, C, H, W, Ho, Wo = shape
        go = rng.standard_normal((N, C, Ho, Wo)).astype(dtype)
        x = rng.standard_normal((N, C, H, W)).astype(dtype)
        grid = edge_grid(rng, N, H, W, Ho, Wo, align).astype(dtype)
        ig, gg = run_filled_workspaces(threads, go, x, grid, 0, pad, align)
        check(ig, gg, reference(go, x, grid, 0, pad, align), dtype, f"{shape}")
        # Each output alone (the other masked off, so a buffer or the gather is left out): the same bits.
        only_ig, none = ac.grid_sampler2d_backward(go, x, grid, 0, pad, align, output_mask=(True, False))
        assert none is None and only_ig.tobytes() == ig.tobytes(), f"inputGrad alone {shape}"
        none, only_gg = ac.grid_sampler2d_backward(go, x, grid, 0, pad, align, output_mask=(False, True))
        assert none is None and only_gg.tobytes() == gg.tobytes(), f"gridGrad alone {shape}"


# Framed buffers over 1 MiB (kBilinearNoPrefetchBytes), whose 4- and 8-lane tiles prefetch the
# corner rows ahead, on a warp whose positions also reach the pads: 4 and 8 channels (one block).
@pytest.mark.parametrize("C", [3, 8])
@pytest.mark.parametrize("pad", [0, 2])
def test_framed_layout_big_buffers(isa, threads, C, pad):
    rng = np.random.default_rng(53 + C + pad)
    H, W = (260, 262) if C <= 4 else (190, 186)  # a frame of (H + 3) x (W + 1) pixels, 16 or 32 bytes
    go = rng.standard_normal((1, C, 160, 160)).astype(np.float32)
    x = rng.standard_normal((1, C, H, W)).astype(np.float32)
    grid = rng.uniform(-1.02, 1.02, (1, 160, 160, 2))
    ig, gg = run_filled_workspaces(threads, go, x, grid.astype(np.float32), 0, pad, False)
    check(ig, gg, reference(go, x, grid.astype(np.float32), 0, pad, False), np.float32, f"C{C} {H}x{W}")


@pytest.mark.parametrize("pad", [0, 1, 2])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_framed_layout_special_values_match_torch(torch, isa, threads, pad, dtype):
    rng = np.random.default_rng(41 + pad)
    for shape in FRAMED_SHAPES:
        N, C, H, W, Ho, Wo = shape
        go, x, _ = make(rng, N, C, H, W, Ho, Wo, dtype)
        grid = special_grid(rng, N, Ho, Wo, dtype, pad)
        ig, gg = run_filled_workspaces(threads, go, x, grid, 0, pad, False)
        safe = f64(grid)
        safe[crashes_torch(0, pad, grid)] = -1.0  # the documented equivalent of those entries
        t_ig, t_gg = torch_reference(torch, go, x, safe.astype(dtype), 0, pad, False)
        assert_close_normwise(ig, t_ig, dtype, f"inputGrad {shape}")
        assert_close_normwise(gg, t_gg, dtype, f"gridGrad {shape}")


def test_special_values_exactly():
    x = np.arange(1.0, 13.0, dtype=np.float64).reshape(1, 1, 3, 4).astype(np.float32)
    go = np.ones((1, 1, 1, 2), np.float32)
    nan = np.float32(np.nan)
    grid = np.array([[[[nan, 0.2], [0.1, nan]]]], np.float32)
    # Zeros padding: a NaN coordinate touches no pixel; its own gradient is 0, the other
    # coordinate's gradient is NaN (0 * NaN weights), as in PyTorch.
    ig, gg = ac.grid_sampler2d_backward(go, x, grid, 0, 0, False)
    np.testing.assert_array_equal(ig, 0.0)
    np.testing.assert_array_equal(np.isnan(gg.ravel()), [False, True, True, False])
    assert gg[0, 0, 0, 0] == 0 and gg[0, 0, 1, 1] == 0
    # Border padding: the NaN coordinate is clipped to 0 with a zero gradient.
    ig, gg = ac.grid_sampler2d_backward(go, x, grid, 0, 1, False)
    ig_ref, gg_ref = ac.grid_sampler2d_backward(go, x, np.array([[[[-1.0, 0.2], [0.1, -1.0]]]], np.float32), 0, 1, False)
    np.testing.assert_array_equal(ig, ig_ref)
    np.testing.assert_array_equal(gg, gg_ref)
    assert gg[0, 0, 0, 0] == 0 and gg[0, 0, 1, 1] == 0
    # Nearest, border: NaN samples pixel 0 of its axis (PyTorch's clamp order).
    ig, gg = ac.grid_sampler2d_backward(go, x, grid, 1, 1, False)
    expected = np.zeros((3, 4), np.float32)
    expected[1, 0] = 1.0  # (NaN -> 0, 0.2 -> row 1)
    expected[0, 2] = 1.0  # (0.1 -> column 2, NaN -> 0)
    np.testing.assert_array_equal(ig[0, 0], expected)
    np.testing.assert_array_equal(gg, 0.0)


# --------------------------------------------------------------------------------------------
# Kernel schedules: one sample with many channels (blocks in parallel), few blocks with many
# positions (positions split into parts), many samples (records in chunks).

@pytest.mark.parametrize("shape", [(1, 300, 12, 10, 17, 19), (1, 2, 6, 5, 90, 80), (12, 2, 6, 7, 128, 128)],
                         ids=str)
@pytest.mark.parametrize("mode", list(MODES), ids=MODES.get)
def test_schedules(shape, mode):
    rng = np.random.default_rng(12)
    go, x, grid = make(rng, *shape, np.float32, spread=1.1)
    ig, gg = ac.grid_sampler2d_backward(go, x, grid, mode, 2, True)
    check(ig, gg, reference(go, x, grid, mode, 2, True), np.float32, str(shape))


# Nearest with several channel blocks and at least 4 samples a thread runs whole samples as
# tasks, each computing its own records before its blocks (Runner::records_per_sample_task);
# with fewer samples a thread, phase 1 computes them all first. N9 C40 (3 blocks of 16, 5 of 8
# or 10 of 4 by level) takes the sample tasks at 1 and 2 threads and phase 1 at 5: the same
# bits either way, with the workspace NaN-filled or zero; every padding and alignment, a grid
# reaching beyond the image (against the formulas) and one with NaNs, infinities and huge
# values among its entries (against PyTorch).
@pytest.mark.parametrize("pad", [0, 1, 2])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nearest_records_per_sample_task(torch, isa, threads, pad, align, dtype):
    rng = np.random.default_rng(71 + 2 * pad + align)
    go, x, grid = make(rng, 9, 40, 19, 21, 20, 18, dtype, spread=1.2)
    for kind, g in (("spread", grid), ("special", special_grid(rng, 9, 20, 18, dtype, pad))):
        what = f"{kind} pad {pad} align {align}"
        ig, gg = run_filled_workspaces(threads, go, x, g, 1, pad, align)
        threads(5)
        again = ac.grid_sampler2d_backward(go, x, g, 1, pad, align)
        assert again[0].tobytes() == ig.tobytes() and again[1].tobytes() == gg.tobytes(), what
        if kind == "spread":
            check(ig, gg, reference(go, x, g, 1, pad, align), dtype, what)
        t_ig, t_gg = torch_reference(torch, go, x, g, 1, pad, align)
        assert_close_normwise(ig, t_ig, dtype, "inputGrad " + what)
        assert_close_normwise(gg, t_gg, dtype, "gridGrad " + what)


# Positions split into parts zero and sum only the input rows each part can reach. A workspace
# full of NaN bytes shows any row read without being zeroed. The "alternating" grid sends parts
# 0 and 2 to the top rows and parts 1 and 3 to the bottom ones, so the parts reaching a row are
# not consecutive until the windows are closed over runs.

def _band_grid(rng, rows, cols, bands):
    """A near-identity x and, per band of rows, y drawn from that band's [low, high]."""
    ax = (2.0 * np.arange(cols) + 1.0) / cols - 1.0
    grid = np.empty((1, rows, cols, 2))
    grid[..., 0] = ax[None, None, :] + rng.normal(0, 0.02, (1, rows, cols))
    per = rows // len(bands)
    for i, (low, high) in enumerate(bands):
        grid[0, i * per:(i + 1) * per, :, 1] = rng.uniform(low, high, (per, cols))
    return grid


@pytest.mark.parametrize("grid_kind", ["warp", "alternating", "reversed", "beyond"])
@pytest.mark.parametrize("mode,pad,align", [(0, 0, False), (1, 1, True), (2, 0, False), (0, 1, False)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_split_parts_touch_only_their_rows(grid_kind, mode, pad, align, dtype):
    rng = np.random.default_rng(23)
    N, C, H, W, Ho, Wo = 1, 3, 16, 16, 64, 64  # 4 parts of 16 grid rows each
    go = rng.standard_normal((N, C, Ho, Wo)).astype(dtype)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    if grid_kind == "warp":
        grid = _band_grid(rng, Ho, Wo, [(-1.0, -0.5), (-0.5, 0.0), (0.0, 0.5), (0.5, 1.0)])
    elif grid_kind == "alternating":
        grid = _band_grid(rng, Ho, Wo, [(-1.0, -0.6), (0.6, 1.0), (-1.0, -0.6), (0.6, 1.0)])
    elif grid_kind == "reversed":
        grid = _band_grid(rng, Ho, Wo, [(0.5, 1.0), (0.0, 0.5), (-0.5, 0.0), (-1.0, -0.5)])
    else:  # parts above and below the image, one of them entirely
        grid = _band_grid(rng, Ho, Wo, [(-3.0, -1.5), (-1.2, -0.2), (0.2, 1.2), (1.5, 3.0)])
    grid = grid.astype(dtype)
    ig, gg = np.full(x.shape, 7.0, dtype), np.full(grid.shape, 7.0, dtype)
    ws, ex = ac.aclnnGridSampler2DBackwardGetWorkspaceSize(go, x, grid, mode, pad, align, (True, True), ig, gg)
    ac.aclnnGridSampler2DBackward(np.full(ws, 0xFF, np.uint8), ws, ex)  # NaN in every float
    check(ig, gg, reference(go, x, grid, mode, pad, align), dtype, grid_kind)
    ig2, gg2 = ac.grid_sampler2d_backward(go, x, grid, mode, pad, align)
    assert ig2.tobytes() == ig.tobytes() and gg2.tobytes() == gg.tobytes()


# Grids of few positions against the input's pixels (P * 8 <= H * W) load, zero and write back
# only the input rows they can reach (in 64 bands of rows); the rest of inputGrad is
# zero-filled. The workspace is NaN in every float, then zero: a read outside the loaded rows
# would make the two differ. (A NaN coordinate reaches every row; its results are checked
# against torch elsewhere.)
@pytest.mark.parametrize("grid_kind", ["patch", "top-edge", "above", "beyond", "nan", "spread"])
@pytest.mark.parametrize("mode,pad,align", [(0, 0, False), (1, 1, True), (2, 0, True), (2, 1, False), (0, 2, False),
                                            (0, 1, False)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_small_grids_touch_only_the_rows_they_reach(threads, grid_kind, mode, pad, align, dtype):
    rng = np.random.default_rng(24)
    # Bands of 1 and 3 rows; the last two have too many positions for the compact path
    # (bilinear and nearest take it from 12 pixels a tap), so every mode runs on the bands.
    for shape in [(2, 5, 40, 36, 2, 3), (1, 3, 150, 20, 2, 2), (2, 4, 64, 2, 1, 16), (1, 3, 128, 2, 1, 32)]:
        _check_small_grid(rng, threads, shape, grid_kind, mode, pad, align, dtype)


def run_filled_workspaces(threads, go, x, grid, mode, pad, align):
    """(inputGrad, gridGrad) of the two-phase call, which must be the same bits at 1 and 2
    threads with the workspace all NaN (0xFF bytes) and all zero."""
    results = []
    for count, fill in itertools.product((1, 2), (0xFF, 0)):
        threads(count)
        ig, gg = np.full(x.shape, 7.0, x.dtype), np.full(grid.shape, 7.0, grid.dtype)
        ws, ex = ac.aclnnGridSampler2DBackwardGetWorkspaceSize(go, x, grid, mode, pad, align, (True, True), ig, gg)
        ac.aclnnGridSampler2DBackward(np.full(ws, fill, np.uint8), ws, ex)
        results.append(ig.tobytes() + gg.tobytes())
        if len(results) == 1:
            first = (ig, gg)
    assert all(r == results[0] for r in results)
    return first


def assert_strided_layouts_give(ig, gg, rng, go, x, grid, mode, pad, align):
    """Sliced, reversed and channels-last operands and outputs give the bits ig, gg."""
    for layout in ["sliced", "negative", "channels-last"]:
        views = [strided_view(rng, a, layout) for a in (go, x, grid)]
        ig_view = strided_view(rng, np.full(x.shape, 7.0, x.dtype), layout)
        gg_view = strided_view(rng, np.full(grid.shape, 7.0, grid.dtype), layout)
        ac.grid_sampler2d_backward(*views, mode, pad, align, out=(ig_view, gg_view))
        assert np.ascontiguousarray(ig_view).tobytes() == ig.tobytes(), layout
        assert np.ascontiguousarray(gg_view).tobytes() == gg.tobytes(), layout


def _check_small_grid(rng, threads, shape, grid_kind, mode, pad, align, dtype):
    N, C, H, W, Ho, Wo = shape
    go = rng.standard_normal((N, C, Ho, Wo)).astype(dtype)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    grid = rng.uniform(-0.1, 0.1, (N, Ho, Wo, 2)) + rng.uniform(-0.7, 0.7, (N, 1, 1, 2))
    if grid_kind == "top-edge":
        grid[..., 1] = rng.uniform(-1.1, -0.9, (N, Ho, Wo))
    elif grid_kind == "above":  # every position above the image: border padding clips them to row 0
        grid[..., 1] = rng.uniform(-1.5, -1.1, (N, Ho, Wo))
    elif grid_kind == "beyond":  # every position below the image
        grid[..., 1] += 2.5
    elif grid_kind == "nan":
        grid[-1, 0, -1, 1] = np.nan
    elif grid_kind == "spread":  # over the whole image: bands apart
        grid = rng.uniform(-1.0, 1.0, (N, Ho, Wo, 2))
    grid = grid.astype(dtype)
    ig, gg = run_filled_workspaces(threads, go, x, grid, mode, pad, align)
    if grid_kind != "nan":
        check(ig, gg, reference(go, x, grid, mode, pad, align), dtype, grid_kind)


# Bicubic grids of few positions (16 taps each, 12 times fewer than the input's pixels) run on a
# "tap grid": the rows and the columns their taps reach, as a small image whose pixels are
# written over a zeroed inputGrad; where that image would be big, on a slot per pixel reached.
# Every padding (reflection's taps fold back into the image), grids in a patch, spread, on a
# diagonal (rows x columns too many for a tap grid), beyond the image and with a NaN; an image
# one row high (no room for the tap grid's maps). The workspace is NaN
# in every float, then zero; one and two threads; each output alone, and strided operands,
# must give the same bits.
@pytest.mark.parametrize("grid_kind", ["patch", "spread", "diagonal", "beyond", "nan"])
@pytest.mark.parametrize("pad", [0, 1, 2])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bicubic_tap_grids(torch, threads, grid_kind, pad, align, dtype):
    rng = np.random.default_rng(25)
    for N, C, H, W, Ho, Wo in [(2, 5, 40, 48, 2, 3), (3, 18, 33, 70, 1, 2), (1, 2, 1, 400, 1, 2), (1, 3, 45, 40, 3, 3)]:
        go = rng.standard_normal((N, C, Ho, Wo)).astype(dtype)
        x = rng.standard_normal((N, C, H, W)).astype(dtype)
        grid = rng.uniform(-0.1, 0.1, (N, Ho, Wo, 2)) + rng.uniform(-0.7, 0.7, (N, 1, 1, 2))
        if grid_kind == "spread":
            grid = rng.uniform(-1.1, 1.1, (N, Ho, Wo, 2))
        elif grid_kind == "diagonal":
            grid[..., 0] = grid[..., 1] = np.linspace(-0.95, 0.95, Ho * Wo).reshape(Ho, Wo)
        elif grid_kind == "beyond":
            grid[..., 1] += 2.5
        elif grid_kind == "nan":
            grid[-1, 0, -1, 1] = np.nan
        grid = grid.astype(dtype)
        ig, gg = run_filled_workspaces(threads, go, x, grid, 2, pad, align)
        ig_only, _ = ac.grid_sampler2d_backward(go, x, grid, 2, pad, align, output_mask=(True, False))
        _, gg_only = ac.grid_sampler2d_backward(go, x, grid, 2, pad, align, output_mask=(False, True))
        assert ig_only.tobytes() == ig.tobytes() and gg_only.tobytes() == gg.tobytes()
        assert_strided_layouts_give(ig, gg, rng, go, x, grid, 2, pad, align)
        if grid_kind == "nan":  # torch's NaN semantics are checked elsewhere
            continue
        ref = reference(go, x, grid, 2, pad, align)
        what = f"{grid_kind} {(N, C, H, W, Ho, Wo)}"
        check(ig, gg, ref, dtype, what)
        check(ig, gg, (*torch_reference(torch, go, x, grid, 2, pad, align), *ref[2:]), dtype, what + " torch")


def assert_same_results(actual, expected, bitwise=True):
    """The same bits, or (not bitwise) the same values with NaNs in the same places."""
    if bitwise:
        assert actual.tobytes() == expected.tobytes()
    else:
        np.testing.assert_array_equal(f64(actual), f64(expected))


# Up to 4 channels whose taps reach at most a 6th of the input's pixels run on the planes
# themselves (no channel-last buffers): out-of-range corners skip inputGrad and read zeros; fp32
# inputGrad on a flat plane is summed in place, other outputs in fp32 planes of the workspace;
# input planes that are not flat are read from flat copies; planes over 512 KiB prefetch.
# Every mode, padding and alignment; grids spread over the image, in a patch, beyond it, and
# with NaNs and infinities (then in the input too: where NaNs meet, the bits, NaN signs
# included, must not depend on the layout); channels-last, sliced and reversed operands. The
# workspace is NaN in every float, then zero; one and two threads; each output alone.
@pytest.mark.parametrize("grid_kind", ["spread", "patch", "beyond", "nonfinite"])
@pytest.mark.parametrize("mode", list(MODES), ids=MODES.get)
@pytest.mark.parametrize("pad", [0, 1, 2])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_direct_planes(torch, threads, grid_kind, mode, pad, align, dtype):
    rng = np.random.default_rng(26)
    # Bicubic takes the direct path on all but the first two (16 taps a position).
    shapes = [(2, 1, 40, 36, 5, 7), (3, 2, 33, 70, 6, 9), (2, 1, 40, 36, 3, 5), (3, 2, 33, 70, 4, 6),
              (1, 3, 150, 20, 5, 6), (2, 4, 64, 2, 1, 1), (1, 4, 1, 400, 1, 4), (1, 2, 200, 300, 10, 20)]
    for N, C, H, W, Ho, Wo in shapes:
        go = rng.standard_normal((N, C, Ho, Wo)).astype(dtype)
        x = rng.standard_normal((N, C, H, W))
        grid = rng.uniform(-1.1, 1.1, (N, Ho, Wo, 2))
        if grid_kind == "patch":
            grid = rng.uniform(-0.1, 0.1, (N, Ho, Wo, 2)) + rng.uniform(-0.7, 0.7, (N, 1, 1, 2))
        elif grid_kind == "beyond":
            grid[..., 1] += 2.5
        elif grid_kind == "nonfinite":
            at = rng.choice(grid.size, max(2, grid.size // 8), replace=False)
            grid.flat[at] = np.resize([np.nan, np.inf], at.size)
            x.flat[rng.choice(x.size, x.size // 10, replace=False)] = np.nan
        x = x.astype(dtype)
        grid = grid.astype(dtype)
        inputs = (go, x.copy(), grid.copy())
        ig, gg = run_filled_workspaces(threads, go, x, grid, mode, pad, align)
        assert x.tobytes() == inputs[1].tobytes() and grid.tobytes() == inputs[2].tobytes()
        # Each output alone: the same bits; with NaNs, NaNs where they were (the portable level's
        # code without one output may pass on the other of two NaNs that meet).
        ig_only, _ = ac.grid_sampler2d_backward(go, x, grid, mode, pad, align, output_mask=(True, False))
        assert_same_results(ig_only, ig, bitwise=grid_kind != "nonfinite")
        if mode != 1:
            _, gg_only = ac.grid_sampler2d_backward(go, x, grid, mode, pad, align, output_mask=(False, True))
            assert_same_results(gg_only, gg, bitwise=grid_kind != "nonfinite")
        assert_strided_layouts_give(ig, gg, rng, go, x, grid, mode, pad, align)
        what = f"{grid_kind} {(N, C, H, W, Ho, Wo)}"
        if grid_kind == "nonfinite":  # torch's NaNs and infinities (on its crash-free equivalent)
            safe = f64(grid)
            safe[crashes_torch(mode, pad, grid)] = -1.0
            t_ig, t_gg = torch_reference(torch, go, x, safe.astype(dtype), mode, pad, align)
            assert_close_normwise(ig, t_ig, dtype, what + " inputGrad")
            assert_close_normwise(gg, t_gg, dtype, what + " gridGrad")
            continue
        ref = reference(go, x, grid, mode, pad, align)
        check(ig, gg, ref, dtype, what)
        check(ig, gg, (*torch_reference(torch, go, x, grid, mode, pad, align), *ref[2:]), dtype, what + " torch")


# Fewer (sample, block) tasks than threads, on grids that reach few pixels of big planes
# (direct tiles, compact buffers, bicubic tap grids): all threads zero-fill inputGrad before
# the tasks run, rather than each task its own planes. Zeros only, so the same bits at 1, 2 and
# 3 threads (with 3, two samples are fewer tasks than threads too), every element written over
# the output's 7.0s, strided outputs included; and the formulas' and torch's values.
@pytest.mark.parametrize("shape,mode", [
    ((1, 1, 512, 512, 20, 20), 1),   # direct, in place for fp32 (16-bit: compact)
    ((2, 1, 512, 512, 20, 20), 1),   # two samples
    ((1, 16, 96, 174, 6, 3), 0),     # compact
    ((1, 8, 256, 256, 3, 3), 2),     # bicubic tap grid
    ((1, 1, 1024, 600, 40, 40), 0),  # beyond one core's cache (fp32), taps at a 96th of the pixels
], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_zero_fill_before_few_tasks(torch, threads, shape, mode, dtype):
    rng = np.random.default_rng(27)
    N, C, H, W, Ho, Wo = shape
    go = rng.standard_normal((N, C, Ho, Wo)).astype(dtype)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    grid = rng.uniform(-1.0, 1.0, (N, Ho, Wo, 2)).astype(dtype)
    results = []
    for count in (1, 2, 3):
        threads(count)
        ig, gg = np.full(x.shape, 7.0, dtype), np.full(grid.shape, 7.0, dtype)
        ac.grid_sampler2d_backward(go, x, grid, mode, 0, False, out=(ig, gg))
        results.append((ig, gg))
        assert ig.tobytes() == results[0][0].tobytes() and gg.tobytes() == results[0][1].tobytes(), count
    ig, gg = results[0]
    assert np.count_nonzero(f64(ig)) <= N * C * Ho * Wo * 16  # only the taps' pixels are not zero
    assert_strided_layouts_give(ig, gg, rng, go, x, grid, mode, 0, False)
    ref = reference(go, x, grid, mode, 0, False)
    check(ig, gg, ref, dtype, str(shape))
    check(ig, gg, (*torch_reference(torch, go, x, grid, mode, 0, False), *ref[2:]), dtype, f"{shape} torch")


# Grids that reach few pixels run on slots of those pixels (compact buffers for bilinear and
# nearest, pixel slots for bicubic), gathered from the input planes and scattered into
# inputGrad's. On planes of a power-of-two size every channel's copy of a pixel falls in one
# cache set, so the slots move a chunk at a time, a channel at a time; elsewhere a slot at a
# time. Both orders must give the same bits (the strided layouts have other plane strides),
# with partial channel blocks (9 of 16 lanes, 20 = 8 + 8 + 4) and the sink of out-of-range
# taps (the grid reaches past the edges), and the formulas' and torch's values. Calls of at most
# 2 (sample, block) pairs take the slots from a sixth of the pixels on planes of any size.
@pytest.mark.parametrize("shape,mode,pad", [
    ((1, 16, 64, 64, 6, 6), 2, 0),     # bicubic pixel slots, a whole block
    ((1, 9, 128, 128, 12, 12), 2, 1),  # bicubic, a partial block, border
    ((2, 20, 64, 64, 5, 5), 0, 0),     # compact bilinear, blocks of 8 and a partial one
    ((1, 32, 32, 32, 3, 3), 1, 0),     # compact nearest, 4 KiB planes
    ((1, 12, 269, 80, 13, 11), 2, 0),  # planes that do not share cache sets: a slot at a time
    ((1, 12, 269, 80, 56, 11), 0, 0),  # compact on planes beyond L2: one (sample, block) pair
    ((1, 16, 256, 256, 40, 40), 0, 1),  # the same on power-of-two planes, border
], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_slots_on_power_of_two_planes(torch, isa, shape, mode, pad, dtype):
    rng = np.random.default_rng(28)
    N, C, H, W, Ho, Wo = shape
    go = rng.standard_normal((N, C, Ho, Wo)).astype(dtype)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    grid = rng.uniform(-1.2, 1.2, (N, Ho, Wo, 2)).astype(dtype)
    ig, gg = np.full(x.shape, 7.0, dtype), np.full(grid.shape, 7.0, dtype)
    ac.grid_sampler2d_backward(go, x, grid, mode, pad, False, out=(ig, gg))
    assert np.count_nonzero(f64(ig)) <= N * C * Ho * Wo * 16  # only the taps' pixels are not zero
    assert_strided_layouts_give(ig, gg, rng, go, x, grid, mode, pad, False)
    ref = reference(go, x, grid, mode, pad, False)
    check(ig, gg, ref, dtype, str(shape))
    check(ig, gg, (*torch_reference(torch, go, x, grid, mode, pad, False), *ref[2:]), dtype, f"{shape} torch")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_large_channel_count_matches_torch(torch, dtype):
    rng = np.random.default_rng(13)
    go, x, grid = make(rng, 1, 256, 16, 16, 24, 24, dtype, spread=1.05)
    ig, gg = ac.grid_sampler2d_backward(go, x, grid, 0, 0, False)
    _, _, ig_bound, gg_bound = reference(go, x, grid, 0, 0, False)
    check(ig, gg, (*torch_reference(torch, go, x, grid, 0, 0, False), ig_bound, gg_bound), dtype)


# --------------------------------------------------------------------------------------------
# Layouts: strided inputs (sliced, transposed, reversed), outputs through out= views.

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mode", list(MODES), ids=MODES.get)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_strided_inputs(isa, layout, mode, dtype):
    rng = np.random.default_rng(14)
    for shape in [(2, 6, 7, 8, 9, 5), (2, 6, 30, 32, 3, 4),  # the second on touched pixels only
                  (2, 1, 7, 8, 9, 5), (1, 1, 20, 18, 45, 50)]:  # one channel: fused, position parts
        go, x, grid = make(rng, *shape, dtype)
        views = [strided_view(rng, a, layout) for a in (go, x, grid)]
        ig, gg = ac.grid_sampler2d_backward(*views, mode, 1, False)
        check(ig, gg, reference(go, x, grid, mode, 1, False), dtype, f"{layout} {shape}")


# Channels-last operands (torch's channels_last; NumPy's a.transpose(0, 2, 3, 1) viewed back):
# each position's channels are side by side, copied to and from the channel-last lanes as
# whole pixels. Shapes: a partial block of 4 lanes, a block of 16 and a partial one, one sample
# whose positions split into parts (their inputGrad sums), a grid over touched pixels only.
@pytest.mark.parametrize("mode", list(MODES), ids=MODES.get)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_channels_last_operands_give_the_contiguous_bits(isa, threads, mode, dtype):
    rng = np.random.default_rng(17)
    for shape in [(2, 3, 9, 11, 5, 7), (2, 20, 7, 9, 8, 5), (1, 16, 8, 8, 48, 48), (2, 6, 30, 32, 3, 4)]:
        go, x, grid = make(rng, *shape, dtype)
        threads(1)
        contiguous = ac.grid_sampler2d_backward(go, x, grid, mode, 0, True)
        for count, (go_v, x_v) in itertools.product(
                (1, 2), [(channels_last(go), channels_last(x)), (go, channels_last(x)), (channels_last(go), x)]):
            threads(count)
            ig = channels_last(np.full(x.shape, 7.0, dtype))
            gg = np.full(grid.shape, 7.0, dtype)
            ac.grid_sampler2d_backward(go_v, x_v, grid, mode, 0, True, out=(ig, gg))
            assert np.array_equal(f64(ig), f64(contiguous[0])), shape
            assert np.array_equal(f64(gg), f64(contiguous[1])), shape
        check(ig, gg, reference(go, x, grid, mode, 0, True), dtype, f"channels-last {shape}")


def test_zero_strides_in_inputs():
    rng = np.random.default_rng(15)
    go = np.broadcast_to(rng.standard_normal((1, 1, 1, 1)).astype(np.float32), (2, 3, 4, 5))
    x = np.broadcast_to(rng.standard_normal((1, 3, 6, 1)).astype(np.float32), (2, 3, 6, 7))
    grid = np.broadcast_to(rng.uniform(-1, 1, (1, 4, 1, 2)).astype(np.float32), (2, 4, 5, 2))
    ig, gg = ac.grid_sampler2d_backward(go, x, grid, 0, 0, True)
    check(ig, gg, reference(go, x, grid, 0, 0, True), np.float32)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mode,shape", [(2, (2, 5, 6, 7, 8, 9)), (0, (2, 5, 30, 31, 3, 4)),
                                        (1, (2, 3, 9, 8, 40, 30))], ids=str)
def test_out_views(layout, dtype, mode, shape):
    rng = np.random.default_rng(16)
    go, x, grid = make(rng, *shape, dtype)
    ig_buffer = np.full(tuple(2 * d for d in x.shape), 7.0, dtype)
    ig = ig_buffer[::2, ::2, ::2, ::2] if layout == "sliced" else strided_view(rng, np.full(x.shape, 7.0, dtype), layout)
    gg = strided_view(rng, np.full(grid.shape, 7.0, dtype), layout)
    result = ac.grid_sampler2d_backward(go, x, grid, mode, 0, False, out=(ig, gg))
    assert result[0] is ig and result[1] is gg
    check(ig, gg, reference(go, x, grid, mode, 0, False), dtype, layout)
    if layout == "sliced":
        untouched = np.ones(ig_buffer.shape, bool)
        untouched[::2, ::2, ::2, ::2] = False
        assert (f64(ig_buffer)[untouched] == 7.0).all()


def test_torch_tensors_in_and_out(torch):
    go = torch.randn(2, 4, 5, 6, dtype=torch.bfloat16)
    x = torch.randn(2, 4, 7, 3, dtype=torch.bfloat16)
    grid = (torch.rand(2, 5, 6, 2) * 2.4 - 1.2).to(torch.bfloat16)
    ig, gg = torch.empty_like(x), torch.empty_like(grid)
    ac.grid_sampler2d_backward(go, x, grid, 0, 2, False, out=(ig, gg))
    check(ig, gg, reference(go, x, grid, 0, 2, False), BFLOAT16)


# --------------------------------------------------------------------------------------------
# outputMask: a masked output is not computed and not touched (and may be None).

@pytest.mark.parametrize("mask", [(True, False), (False, True), (False, False)], ids=str)
@pytest.mark.parametrize("mode", list(MODES), ids=MODES.get)
def test_output_mask(mask, mode):
    rng = np.random.default_rng(17)
    go, x, grid = make(rng, 2, 19, 6, 7, 30, 40, np.float32)
    ref = reference(go, x, grid, mode, 0, False)
    ig, gg = ac.grid_sampler2d_backward(go, x, grid, mode, 0, False, output_mask=mask)
    assert (ig is None) != mask[0] and (gg is None) != mask[1]
    check(ig, gg, ref, np.float32, str(mask))
    given = (np.full(x.shape, 3.0, np.float32), np.full(grid.shape, 3.0, np.float32))
    ac.grid_sampler2d_backward(go, x, grid, mode, 0, False, output_mask=mask, out=given)
    for flag, array in zip(mask, given):
        if not flag:
            np.testing.assert_array_equal(array, 3.0)
    check(given[0] if mask[0] else None, given[1] if mask[1] else None, ref, np.float32, f"out {mask}")
    # Two-phase with a null masked output.
    outs = [np.full(x.shape, 3.0, np.float32) if mask[0] else None, np.full(grid.shape, 3.0, np.float32) if mask[1] else None]
    ws, ex = ac.aclnnGridSampler2DBackwardGetWorkspaceSize(go, x, grid, mode, 0, False, mask, *outs)
    ac.aclnnGridSampler2DBackward(np.empty(ws, np.uint8) if ws else None, ws, ex)
    check(outs[0], outs[1], ref, np.float32, f"two-phase {mask}")


# --------------------------------------------------------------------------------------------
# Empty tensors: validation passes, inputGrad is zero, gridGrad is zero (a sum over no channels).

@pytest.mark.parametrize("shape", [(0, 3, 4, 5, 6, 7), (2, 0, 4, 5, 6, 7), (2, 3, 4, 5, 0, 7), (2, 3, 4, 5, 6, 0)],
                         ids=str)
@pytest.mark.parametrize("mode", list(MODES), ids=MODES.get)
def test_empty(shape, mode):
    N, C, H, W, Ho, Wo = shape
    go = np.ones((N, C, Ho, Wo), np.float32)
    x = np.ones((N, C, H, W), np.float32)
    grid = np.zeros((N, Ho, Wo, 2), np.float32)
    ig, gg = np.full(x.shape, 5.0, np.float32), np.full(grid.shape, 5.0, np.float32)
    ac.grid_sampler2d_backward(go, x, grid, mode, 0, False, out=(ig, gg))
    np.testing.assert_array_equal(ig, 0.0)
    np.testing.assert_array_equal(gg, 0.0)


# --------------------------------------------------------------------------------------------
# Determinism: bitwise identical results for 1, 2 and 3 threads on every schedule.

@pytest.mark.parametrize("shape", [(1, 70, 9, 11, 40, 50), (1, 3, 8, 8, 120, 110), (12, 5, 10, 9, 96, 100),
                                   (4, 21, 13, 7, 33, 35), (1, 12, 8, 8, 64, 64), (8, 40, 64, 64, 5, 6),
                                   (1, 1, 24, 24, 60, 64), (5, 1, 16, 16, 40, 40), (1, 20, 6, 7, 64, 64),
                                   (2, 140, 6, 5, 7, 8)], ids=str)
@pytest.mark.parametrize("mode", list(MODES), ids=MODES.get)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bitwise_identical_across_thread_counts(isa, threads, shape, mode, dtype):
    rng = np.random.default_rng(18)
    go, x, grid = make(rng, *shape, dtype, spread=1.2)
    results = []
    for count in (1, 2, 3):
        threads(count)
        ig, gg = ac.grid_sampler2d_backward(go, x, grid, mode, 2, False)
        results.append(ig.tobytes() + gg.tobytes())
    assert results[0] == results[1] == results[2]


# --------------------------------------------------------------------------------------------
# Documented errors through both APIs, outputs untouched.

CASES = {
    "null gradOutput": 161001, "null input": 161001, "null grid": 161001, "null inputGrad": 161001,
    "null gridGrad": 161001, "int64": 161002, "int32": 161002, "dtypes differ": 161002,
    "gradOutput 3-D": 161002, "input 5-D": 161002, "grid 3-D": 161002, "interpolationMode 3": 161002,
    "interpolationMode -1": 161002, "paddingMode 3": 161002, "batch differs": 161002,
    "channels differ": 161002, "grid H differs": 161002, "grid W differs": 161002,
    "input H is 0": 161002, "input W is 0": 161002, "grid last dim 3": 161002,
    "inputGrad shape": 161002, "gridGrad shape": 161002,
}


def error_case(case):
    rng = np.random.default_rng(19)
    go, x, grid = make(rng, 2, 3, 4, 5, 6, 7, np.float32)
    ig, gg = np.full(x.shape, 5.0, np.float32), np.full(grid.shape, 5.0, np.float32)
    mode, pad = 0, 0
    if case == "null gradOutput":
        go = None
    elif case == "null input":
        x = None
    elif case == "null grid":
        grid = None
    elif case == "null inputGrad":
        ig = None
    elif case == "null gridGrad":
        gg = None
    elif case == "int64":
        go, x, grid, ig, gg = (a.astype(np.int64) for a in (go, x, grid, ig, gg))
    elif case == "int32":
        go, x, grid, ig, gg = (a.astype(np.int32) for a in (go, x, grid, ig, gg))
    elif case == "dtypes differ":
        grid = grid.astype(np.float16)
    elif case == "gradOutput 3-D":
        go = go[0]
    elif case == "input 5-D":
        x = x[None]
    elif case == "grid 3-D":
        grid = grid[0]
    elif case == "interpolationMode 3":
        mode = 3
    elif case == "interpolationMode -1":
        mode = -1
    elif case == "paddingMode 3":
        pad = 3
    elif case == "batch differs":
        grid = np.zeros((1, 6, 7, 2), np.float32)
    elif case == "channels differ":
        go = np.zeros((2, 4, 6, 7), np.float32)
    elif case == "grid H differs":
        grid = np.zeros((2, 5, 7, 2), np.float32)
    elif case == "grid W differs":
        grid = np.zeros((2, 6, 8, 2), np.float32)
    elif case == "input H is 0":
        x = np.zeros((2, 3, 0, 5), np.float32)
        ig = np.full(x.shape, 5.0, np.float32)
    elif case == "input W is 0":
        x = np.zeros((2, 3, 4, 0), np.float32)
        ig = np.full(x.shape, 5.0, np.float32)
    elif case == "grid last dim 3":
        grid = np.zeros((2, 6, 7, 3), np.float32)
        gg = np.full(grid.shape, 5.0, np.float32)
    elif case == "inputGrad shape":
        ig = np.full((2, 3, 4, 6), 5.0, np.float32)
    elif case == "gridGrad shape":
        gg = np.full((2, 6, 7, 3), 5.0, np.float32)
    return go, x, grid, mode, pad, ig, gg


@pytest.mark.parametrize("case", list(CASES))
def test_documented_errors(case):
    go, x, grid, mode, pad, ig, gg = error_case(case)
    before = [a.copy() if a is not None else None for a in (ig, gg)]
    apis = ("functional", "two_phase") if ig is not None and gg is not None else ("two_phase",)
    for api in apis:
        with pytest.raises(ac.AclnnError) as info:
            if api == "functional":
                ac.grid_sampler2d_backward(go, x, grid, mode, pad, False, out=(ig, gg))
            else:
                ac.aclnnGridSampler2DBackwardGetWorkspaceSize(go, x, grid, mode, pad, False, (True, True), ig, gg)
        error = info.value
        assert error.status == CASES[case], f"{api}: {error}"
        assert "aclnnGridSampler2DBackward" in str(error), str(error)
        assert isinstance(error, ac.ParamNullptrError if CASES[case] == 161001 else ac.ParamInvalidError)
    for old, new in zip(before, (ig, gg)):
        if old is not None:
            np.testing.assert_array_equal(new, old)


# A limit of this implementation (not in the document): the kernel indexes a plane's pixels with
# 32-bit integers, so H_in * W_in is at most 2^31 - 1. Bigger planes are refused in phase 1
# (a 46341 x 46341 input used to crash the kernel). The inputs are zero-stride views: no memory.
@pytest.mark.parametrize("H, W, status", [(1, 2 ** 31 - 1, 0), (2 ** 31 - 1, 1, 0), (1, 2 ** 31, 161002),
                                          (2, 2 ** 30, 161002), (46341, 46341, 161002)])
def test_plane_size_limit(H, W, status):
    from numpy.lib.stride_tricks import as_strided

    x = as_strided(np.ones(1, np.float16), shape=(1, 1, H, W), strides=(0, 0, 0, 0))
    go = np.ones((1, 1, 2, 2), np.float16)
    grid = np.array([[[[0.0, 0.0], [1.5, 1.5]], [[-0.5, 0.25], [2.0, -3.0]]]], np.float16)
    gg = np.full(grid.shape, 5.0, np.float16)
    if status == 0:  # phase 1 only: running it would take an 8 GiB workspace
        size, executor = ac.aclnnGridSampler2DBackwardGetWorkspaceSize(go, x, grid, 0, 0, False, (False, True),
                                                                       None, gg)
        assert size > 0 and executor is not None
        return
    for api in ("functional", "two_phase"):
        with pytest.raises(ac.ParamInvalidError) as info:
            if api == "functional":
                ac.grid_sampler2d_backward(go, x, grid, 0, 0, False, (False, True), out=(None, gg))
            else:
                ac.aclnnGridSampler2DBackwardGetWorkspaceSize(go, x, grid, 0, 0, False, (False, True), None, gg)
        assert info.value.status == status
        assert "2147483647" in str(info.value), str(info.value)
    np.testing.assert_array_equal(gg, np.float16(5.0))


def test_bfloat16_only_on_atlas_a2(product):
    rng = np.random.default_rng(20)
    go, x, grid = make(rng, 1, 2, 3, 4, 5, 6, BFLOAT16)
    ig, gg = np.full(x.shape, 5.0, BFLOAT16), np.full(grid.shape, 5.0, BFLOAT16)
    product("atlas_training")
    with pytest.raises(ac.ParamInvalidError):
        ac.grid_sampler2d_backward(go, x, grid, out=(ig, gg))
    np.testing.assert_array_equal(f64(ig), 5.0)
    np.testing.assert_array_equal(f64(gg), 5.0)
    product("atlas_a2")
    ac.grid_sampler2d_backward(go, x, grid, out=(ig, gg))
    check(ig, gg, reference(go, x, grid, 0, 0, False), BFLOAT16)


# --------------------------------------------------------------------------------------------
# float64 (atlas_a2 only): double math, against PyTorch's float64 kernel on every mode, padding
# and alignment, with grids beyond [-1, 1], special grid values, strided operands and outputs.

F64_BOUND = 2.0 ** -53


@pytest.mark.parametrize("combo", COMBOS, ids=combo_id)
def test_float64_matches_torch(torch, threads, combo):
    mode, pad, align = combo
    rng = np.random.default_rng(37 + hash(combo) % 1000)
    for shape in [(2, 6, 9, 7, 8, 10), (1, 3, 5, 12, 7, 6), (3, 1, 1, 1, 4, 5), (1, 2, 30, 33, 4, 3)]:
        go, x, grid = make(rng, *shape, np.float64, spread=1.7)
        ig, gg = run_filled_workspaces(threads, go, x, grid, mode, pad, align)
        ref = reference(go, x, grid, mode, pad, align)
        t_ig, t_gg = torch_reference(torch, go, x, grid, mode, pad, align)
        # The fp32 bounds' terms at double's roundoff, plus the coordinates' own error: the
        # kernel, torch and the reference each round a pixel coordinate of magnitude up to
        # 2 * size in double with other formulas (a few ulps of it), which moves each weight by
        # as much, in every one of a pixel's (at most 16 * P) contributions and, times the
        # weights' slopes (at most 4 a tap) and the values, in every channel's gridGrad term.
        N, C, H, W = x.shape
        coordinate = 8 * F64_BOUND * 2 * (H + W + 2) * np.abs(go).max()
        ig_bound = (ref[2] / FP32_EPS) * F64_BOUND + coordinate * 16 * go.shape[2] * go.shape[3]
        gg_bound = (ref[3] / FP32_EPS) * F64_BOUND + coordinate * 4 * 16 * C * np.abs(x).max() * (H + W)
        for what, expected in (("formulas", ref[:2]), ("torch", (t_ig, t_gg))):
            assert_within(ig, expected[0], ig_bound + F64_BOUND * np.abs(expected[0]), f"inputGrad {what} {shape}")
            assert_within(gg, expected[1], gg_bound + F64_BOUND * np.abs(expected[1]), f"gridGrad {what} {shape}")
        assert_strided_layouts_give(ig, gg, rng, go, x, grid, mode, pad, align)
        ig_only, none = ac.grid_sampler2d_backward(go, x, grid, mode, pad, align, output_mask=(True, False))
        assert none is None and ig_only.tobytes() == ig.tobytes()


@pytest.mark.parametrize("combo", COMBOS, ids=combo_id)
def test_float64_special_grid_values_match_torch(torch, combo):
    mode, pad, align = combo
    rng = np.random.default_rng(43 + hash(combo) % 1000)
    go, x, _ = make(rng, 2, 5, 5, 6, 7, 9, np.float64)
    grid = special_grid(rng, 2, 7, 9, np.float64, pad)
    ig, gg = ac.grid_sampler2d_backward(go, x, grid, mode, pad, align)
    safe = grid.copy()
    safe[crashes_torch(mode, pad, grid)] = -1.0  # the documented equivalent of those entries
    t_ig, t_gg = torch_reference(torch, go, x, safe, mode, pad, align)
    for actual, expected in ((ig, t_ig), (gg, t_gg)):
        assert np.array_equal(np.isnan(actual), np.isnan(expected))
        assert np.array_equal(actual[np.isinf(expected)], expected[np.isinf(expected)])
        finite = np.isfinite(expected)
        scale = np.abs(expected[finite]).max(initial=0.0)
        np.testing.assert_allclose(actual[finite], expected[finite], rtol=0, atol=1e-13 * max(scale, 1.0))


def test_float64_only_on_atlas_a2(torch, product):
    rng = np.random.default_rng(47)
    go, x, grid = make(rng, 1, 2, 3, 4, 5, 6, np.float64)
    ig, gg = np.full(x.shape, 5.0), np.full(grid.shape, 5.0)
    product("atlas_training")
    with pytest.raises(ac.ParamInvalidError) as info:
        ac.grid_sampler2d_backward(go, x, grid, out=(ig, gg))
    assert info.value.status == 161002
    np.testing.assert_array_equal(ig, 5.0)
    np.testing.assert_array_equal(gg, 5.0)
    product("atlas_a2")
    ac.grid_sampler2d_backward(go, x, grid, out=(ig, gg))
    t_ig, t_gg = torch_reference(torch, go, x, grid, 0, 0, False)
    np.testing.assert_allclose(ig, t_ig, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(gg, t_gg, rtol=1e-13, atol=1e-14)
