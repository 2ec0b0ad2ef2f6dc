"""aclnnGridSampler2D: 2-D grid sampling (bilinear, nearest, bicubic; zeros, border, reflection).

Checked against a float64 NumPy reference written here from the formulas (the coordinate
helpers are the backward test's: unnormalize, clip, reflect, cubic weights) and against
PyTorch's F.grid_sample in float64, both on the same (already rounded) inputs.

Error bounds. The kernel computes coordinates and weights in double, rounds each weight to fp32
once (u = 2^-24), multiplies and sums in fp32 (bilinear: 4 products, 3 sums; bicubic: 4 rows of
4 products and 3 sums, each row times its weight, 3 sums), then rounds to the output dtype (unit
roundoff u_out). With mag = the sum of |weight * value| over the taps of an output:
    |err| <= u_out * |exact| + (taps + 4) * u * mag
float64 is computed in double: the same bound with u = 2^-53.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import aclnn_cpu as ac
from support import BFLOAT16, UNIT_ROUNDOFF, assert_within, channels_last, f64, strided_view, to_torch
from test_grid_sampler2d_backward import cubic, padded, source, unnormalize

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
DTYPES = [F32, np.dtype(np.float16), BFLOAT16, F64]
TINY = {F32: 2.0 ** -149, np.dtype(np.float16): 2.0 ** -24, BFLOAT16: 2.0 ** -133, F64: 0.0}
MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}
COMBOS = list(itertools.product(MODES, PADDINGS, [False, True]))


def combo_id(combo):
    mode, pad, align = combo
    return f"{MODES[mode]}-{PADDINGS[pad]}-{'align' if align else 'noalign'}"


# bicubic has no float64 kernel (the rules refuse it: test_errors).
COMBO_DTYPES = [pytest.param(combo, dtype, id=f"{combo_id(combo)}-{dtype}")
                for combo in COMBOS for dtype in DTYPES if not (combo[0] == 2 and dtype == F64)]
MODE_DTYPES = [pytest.param(mode, dtype, id=f"{MODES[mode]}-{dtype}")
               for mode in MODES for dtype in DTYPES if not (mode == 2 and dtype == F64)]


# --------------------------------------------------------------------------------------------
# float64 reference

def reference(x, grid, mode, pad, align):
    """float64 out and mag (the sum of |weight * value| over each output's taps)."""
    x, grid = f64(x), f64(grid)
    N, C, H, W = x.shape
    Ho, Wo = grid.shape[1:3]
    P = Ho * Wo
    img = x.reshape(N, C, H * W)
    gx, gy = grid[..., 0].reshape(N, 1, P), grid[..., 1].reshape(N, 1, P)

    def tap(ix, iy):
        """Values of pixel (ix, iy) of every channel, 0 outside the input."""
        valid = (ix >= 0) & (ix < W) & (iy >= 0) & (iy < H)
        flat = np.where(valid, iy * W + ix, 0).astype(np.int64)
        vals = np.take_along_axis(img, np.broadcast_to(flat, (N, C, P)), axis=2)
        return np.where(valid, vals, 0.0)

    with np.errstate(invalid="ignore", over="ignore"):
        if mode == 1:
            ix = np.rint(source(gx, W, pad, align)[0])  # round half to even
            iy = np.rint(source(gy, H, pad, align)[0])
            out = tap(ix, iy)
            mag = np.abs(out)
        elif mode == 0:
            xs, ys = source(gx, W, pad, align)[0], source(gy, H, pad, align)[0]
            x0, y0 = np.floor(xs), np.floor(ys)
            w, n = xs - x0, ys - y0
            e, s = 1 - w, 1 - n
            out = np.zeros((N, C, P))
            mag = np.zeros_like(out)
            for cx, cy, weight in ((x0, y0, e * s), (x0 + 1, y0, w * s), (x0, y0 + 1, e * n), (x0 + 1, y0 + 1, w * n)):
                term = tap(cx, cy) * weight
                out += term
                mag += np.abs(term)
        else:
            xs, ys = unnormalize(gx, W, align)[0], unnormalize(gy, H, align)[0]
            x0, y0 = np.floor(xs), np.floor(ys)
            wx, _ = cubic(xs - x0)
            wy, _ = cubic(ys - y0)
            out = np.zeros((N, C, P))
            mag = np.zeros_like(out)
            for i, j in itertools.product(range(4), range(4)):
                term = tap(padded(x0 + i - 1, W, pad, align), padded(y0 + j - 1, H, pad, align)) * wx[i] * wy[j]
                out += term
                mag += np.abs(term)
    return out.reshape(N, C, Ho, Wo), mag.reshape(N, C, Ho, Wo)


def bound(ref, mag, mode, dtype, torch_float64=False, coordinate_error=0.0):
    """The bound of the module docstring; against torch's float64 result, plus torch's own
    float64 error (the same analysis at u = 2^-53). `coordinate_error`: the weights' error from
    the coordinates, which the kernel, torch and the reference each round in double with
    other formulas (see coordinate_error)."""
    taps = {0: 4, 1: 1, 2: 16}[mode]
    u_math = 2.0 ** -53 if np.dtype(dtype) == F64 else 2.0 ** -24
    u_math += 2.0 ** -53 if torch_float64 else 0.0
    return (UNIT_ROUNDOFF[np.dtype(dtype)] * np.abs(ref) + (taps + 4) * u_math * mag + coordinate_error
            + TINY[np.dtype(dtype)])


def coordinate_error(x, mode):
    """A pixel coordinate x of magnitude up to |grid| * size is computed in double with an error
    of a few ulps of x, and moves a weight by that much (bicubic's weights by up to twice) times
    the tap values: 8 ulps of the largest coordinate (grids reach 2 * size here) per unit slope."""
    H, W = x.shape[2:]
    slope = {0: 4, 1: 0, 2: 32}[mode]  # sum over the taps of |d weight / d coordinate|, both axes
    return 8 * 2.0 ** -53 * 2 * (H + W + 2) * slope * np.abs(f64(x)).max(initial=0.0)


def check(out, x, grid, mode, pad, align, what=""):
    ref, mag = reference(x, grid, mode, pad, align)
    assert_within(out, ref, bound(ref, mag, mode, out.dtype, coordinate_error=coordinate_error(x, mode)), what)


def torch_forward(torch, x, grid, mode, pad, align, dtype=None):
    """F.grid_sample on the same values, in float64 (or in `dtype`, torch's own dtype)."""
    tx, tg = to_torch(x), to_torch(grid)
    if dtype is None:
        tx, tg = tx.double(), tg.double()
    out = torch.nn.functional.grid_sample(tx, tg, mode=MODES[mode], padding_mode=PADDINGS[pad], align_corners=align)
    return f64(out)


def make(rng, N, C, H, W, Ho, Wo, dtype, spread=1.3):
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    grid = rng.uniform(-spread, spread, (N, Ho, Wo, 2)).astype(dtype)
    return x, grid


# --------------------------------------------------------------------------------------------
# The documented example: input 1..40 as [1, 1, 5, 8], a 3 x 3 grid of corners, edge centres
# and the centre.

DOC_GRID = [-1, -1, 0, -1, 1, -1, -1, 0, 0, 0, 1, 0, -1, 1, 0, 1, 1, 1]


def test_documented_example():
    x = np.arange(1, 41, dtype=np.float32).reshape(1, 1, 5, 8)
    grid = np.array(DOC_GRID, np.float32).reshape(1, 3, 3, 2)
    out = ac.grid_sampler2d(x, grid, 0, 0, False)
    # Every weight is 0, 1/4 or 1/2: the results are exact.
    np.testing.assert_array_equal(out.ravel(), [0.25, 2.25, 2.0, 8.5, 20.5, 12.0, 8.25, 18.25, 10.0])
    np.testing.assert_array_equal(ac.grid_sampler2d(x, grid, 0, 0, True).ravel(),
                                  [1, 4.5, 8, 17, 20.5, 24, 33, 36.5, 40])
    # The op_api unit test's input, 0..39.
    np.testing.assert_array_equal(ac.grid_sampler2d(x - 1, grid).ravel(),
                                  [0, 1.75, 1.75, 8, 19.5, 11.5, 8, 17.75, 9.75])
    # Two-phase, into a preallocated out.
    out2 = np.full((1, 1, 3, 3), 7.0, np.float32)
    ws, ex = ac.aclnnGridSampler2DGetWorkspaceSize(x, grid, 0, 0, False, out2)
    ac.aclnnGridSampler2D(np.empty(ws, np.uint8) if ws else None, ws, ex)
    np.testing.assert_array_equal(out2, out)


# --------------------------------------------------------------------------------------------
# Values: every mode x padding x alignment x dtype x ISA level, against the formulas and torch.
# Shapes: each block width (1, 4, 8, 16 lanes and partial blocks), a 1x1 input, more samples
# than threads (a unit per thread) and fewer (units shared), grids beyond [-1, 1].

SHAPES = [(2, 5, 7, 9, 6, 11), (1, 21, 8, 6, 9, 7), (3, 1, 1, 1, 4, 5), (1, 3, 2, 13, 1, 17),
          (5, 1, 9, 11, 10, 8), (1, 12, 8, 8, 20, 30), (4, 3, 12, 10, 17, 19), (1, 40, 5, 6, 7, 8)]


@pytest.mark.parametrize("combo,dtype", COMBO_DTYPES)
def test_matches_formulas_and_torch(torch, isa, combo, dtype):
    mode, pad, align = combo
    rng = np.random.default_rng(hash(combo) % 1000)
    for shape in SHAPES:
        x, grid = make(rng, *shape, dtype, spread=1.7)
        out = ac.grid_sampler2d(x, grid, mode, pad, align)
        assert out.dtype == dtype and out.shape == shape[:2] + shape[4:]
        ref, mag = reference(x, grid, mode, pad, align)
        err = coordinate_error(x, mode)
        assert_within(out, ref, bound(ref, mag, mode, dtype, coordinate_error=err), f"formulas {shape}")
        assert_within(out, torch_forward(torch, x, grid, mode, pad, align),
                      bound(ref, mag, mode, dtype, True, err), f"torch {shape}")


@pytest.mark.parametrize("combo,dtype", COMBO_DTYPES)
def test_no_less_accurate_than_torch(torch, combo, dtype):
    """The largest error against the float64 reference is at most torch's at the native dtype."""
    mode, pad, align = combo
    rng = np.random.default_rng(3 + hash(combo) % 1000)
    x, grid = make(rng, 2, 6, 17, 19, 23, 21, dtype, spread=1.2)
    ref, _ = reference(x, grid, mode, pad, align)
    ours = np.abs(f64(ac.grid_sampler2d(x, grid, mode, pad, align)) - ref).max()
    theirs = np.abs(torch_forward(torch, x, grid, mode, pad, align, dtype=dtype) - ref).max()
    assert ours <= theirs, (ours, theirs)


def test_nearest_rounds_half_to_even():
    # W = H = 4, align_corners false: grid -0.5, 0, 0.5 land on pixel coordinates 0.5, 1.5, 2.5;
    # with align_corners true, -2/3 and 0 land on 0.5 and 1.5.
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    grid = np.array([[[[-0.5, -0.5], [0.0, 0.0], [0.5, 0.5], [-0.5, 0.5]]]], np.float32)
    np.testing.assert_array_equal(ac.grid_sampler2d(x, grid, 1, 0, False).ravel(), [0, 10, 10, 8])
    aligned = np.array([[[[-2 / 3, -2 / 3], [0.0, 0.0]]]], np.float64)
    np.testing.assert_array_equal(ac.grid_sampler2d(f64(x), aligned, 1, 0, True).ravel(), [0, 10])


@pytest.mark.parametrize("pad", [0, 1, 2])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nearest_half_pixel_ties_match_torch(torch, isa, pad, align, dtype):
    """Grid values whose pixel coordinates are exactly k + 1/2, on every pixel and beyond
    (sizes whose grid steps are powers of two, so the values are exact in every dtype)."""
    rng = np.random.default_rng(5)
    N, C, Ho, Wo = 2, 5, 9, 13
    H, W = (9, 17) if align else (8, 16)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)

    def grid_value(pixel, size):
        return 2.0 * pixel / (size - 1) - 1.0 if align else (2.0 * pixel + 1.0) / size - 1.0
    grid = np.stack([grid_value(rng.integers(-3, W + 3, (N, Ho, Wo)) + 0.5, W),
                     grid_value(rng.integers(-3, H + 3, (N, Ho, Wo)) + 0.5, H)], -1).astype(dtype)
    for axis, size in ((0, W), (1, H)):
        coordinate = unnormalize(f64(grid)[..., axis], size, align)[0]
        assert (coordinate - np.floor(coordinate) == 0.5).all()
    out = ac.grid_sampler2d(x, grid, 1, pad, align)
    np.testing.assert_array_equal(f64(out), torch_forward(torch, x, grid, 1, pad, align))
    check(out, x, grid, 1, pad, align)


# --------------------------------------------------------------------------------------------
# Grid values far outside [-1, 1], infinite and NaN: as PyTorch's CPU kernel (float64 there).

SPECIAL = [np.nan, np.inf, -np.inf, 1e30, -1e30, 3e9, -7.25, 5.5, 1e3 + 0.375, -3e4, 1.0, -1.0]
# Reflection of |x| ~ 1e30 folds through a rounded product (see the backward's test): exact cases only.
SPECIAL_REFLECTION = [np.nan, np.inf, -np.inf, -7.25, 5.5, 1e3 + 0.375, -3e4, 1.0, -1.0]


@pytest.mark.parametrize("combo,dtype", COMBO_DTYPES)
def test_special_grid_values_match_torch(torch, isa, combo, dtype):
    mode, pad, align = combo
    rng = np.random.default_rng(11 + hash(combo) % 1000)
    x, grid = make(rng, 2, 20, 5, 6, 7, 9, dtype)
    g = f64(grid)
    mask = rng.random(g.shape) < 0.35
    g[mask] = rng.choice(SPECIAL_REFLECTION if pad == 2 else SPECIAL, int(mask.sum()))
    with np.errstate(over="ignore"):
        grid = g.astype(dtype)
    out = ac.grid_sampler2d(x, grid, mode, pad, align)
    expected = torch_forward(torch, x, grid, mode, pad, align)
    finite = np.isfinite(expected)
    assert np.array_equal(np.isnan(f64(out)), np.isnan(expected))
    assert np.array_equal(f64(out)[~finite], expected[~finite], equal_nan=True)
    ref, mag = reference(x, grid, mode, pad, align)
    assert_within(np.where(finite, f64(out), 0), np.where(finite, expected, 0),
                  np.where(finite, bound(ref, np.nan_to_num(mag), mode, dtype, True, coordinate_error(x, mode)), 0), "finite entries")


# --------------------------------------------------------------------------------------------
# Layouts: channels-last and strided inputs, sliced grids, out views: the bits of the contiguous
# call.

@pytest.mark.parametrize("mode,dtype", MODE_DTYPES)
def test_strided_operands_give_the_contiguous_bits(isa, threads, mode, dtype):
    rng = np.random.default_rng(17)
    for shape in [(2, 3, 9, 11, 5, 7), (2, 20, 7, 9, 8, 5), (1, 16, 8, 8, 24, 24), (3, 1, 6, 5, 4, 3)]:
        x, grid = make(rng, *shape, dtype)
        threads(1)
        expected = ac.grid_sampler2d(x, grid, mode, 2, False)
        check(expected, x, grid, mode, 2, False, str(shape))
        for count, layout in itertools.product((1, 2), ["channels-last", "sliced", "negative", "transposed"]):
            threads(count)
            x_v = strided_view(rng, x, layout)
            grid_v = strided_view(rng, grid, "sliced" if layout == "channels-last" else layout)
            out = ac.grid_sampler2d(x_v, grid_v, mode, 2, False)
            assert out.flags.c_contiguous and out.tobytes() == expected.tobytes(), layout
            for out_layout in ["channels-last", "sliced", "negative"]:
                given = strided_view(rng, np.full(expected.shape, 7.0, dtype), out_layout)
                assert ac.grid_sampler2d(x_v, grid_v, mode, 2, False, out=given) is given
                assert np.ascontiguousarray(given).tobytes() == expected.tobytes(), (layout, out_layout)


def test_sliced_out_leaves_the_gaps(threads):
    rng = np.random.default_rng(18)
    x, grid = make(rng, 2, 5, 6, 7, 8, 9, np.float32)
    big = np.full((4, 10, 16, 18), 7.0, np.float32)
    ac.grid_sampler2d(x, grid, 0, 0, False, out=big[::2, ::2, ::2, ::2])
    check(big[::2, ::2, ::2, ::2], x, grid, 0, 0, False)
    untouched = np.ones(big.shape, bool)
    untouched[::2, ::2, ::2, ::2] = False
    assert (big[untouched] == 7.0).all()


def test_zero_strides_in_inputs():
    rng = np.random.default_rng(15)
    x = np.broadcast_to(rng.standard_normal((1, 3, 6, 1)).astype(np.float32), (2, 3, 6, 7))
    grid = np.broadcast_to(rng.uniform(-1, 1, (1, 4, 1, 2)).astype(np.float32), (2, 4, 5, 2))
    check(ac.grid_sampler2d(x, grid, 0, 0, True), x, grid, 0, 0, True)


def test_torch_tensors_in_and_out(torch):
    x = torch.randn(2, 4, 7, 3, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    grid = (torch.rand(2, 5, 6, 2) * 2.4 - 1.2).to(torch.bfloat16)
    out = torch.empty(2, 4, 5, 6, dtype=torch.bfloat16)
    ac.grid_sampler2d(x, grid, 0, 2, False, out=out)
    check(out.float().numpy().astype(BFLOAT16), x, grid, 0, 2, False)  # (bf16 values: exact in float32)


# --------------------------------------------------------------------------------------------
# Work splits: a unit per thread (many samples), units shared by the threads (one sample, or
# block groups of a sample whose buffers exceed one unit's budget: 272 channels of 128 x 128 are
# 17 blocks of 1 MiB on AVX-512, two units), one and many tiles. Bitwise the same at 1, 2 and 3
# threads, with the workspace NaN.

@pytest.mark.parametrize("shape", [(1, 272, 128, 128, 6, 7), (9, 6, 13, 17, 30, 31), (1, 3, 64, 64, 70, 70),
                                   (2, 33, 20, 20, 3, 3), (1, 1, 200, 100, 90, 100)], ids=str)
@pytest.mark.parametrize("mode,dtype", [p for p in MODE_DTYPES if p.values[1] != np.dtype(np.float16)])
def test_bitwise_identical_across_thread_counts(threads, shape, mode, dtype):
    rng = np.random.default_rng(19)
    x, grid = make(rng, *shape, dtype, spread=1.1)
    results = []
    for count in (1, 2, 3):
        threads(count)
        out = np.full(shape[:2] + shape[4:], 7.0, dtype)
        ws, ex = ac.aclnnGridSampler2DGetWorkspaceSize(x, grid, mode, 1, True, out)
        ac.aclnnGridSampler2D(np.full(ws, 0xFF, np.uint8) if ws else None, ws, ex)  # NaN in every float
        results.append(out.tobytes())
    assert results[0] == results[1] == results[2]
    check(out, x, grid, mode, 1, True, str(shape))


# --------------------------------------------------------------------------------------------
# Round trip: forward, then the library's backward, against torch's autograd of the forward.

@pytest.mark.parametrize("combo", COMBOS, ids=combo_id)
@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_round_trip_with_backward_matches_autograd(torch, combo, dtype):
    mode, pad, align = combo
    rng = np.random.default_rng(23 + hash(combo) % 1000)
    x, grid = make(rng, 2, 5, 9, 8, 7, 6, dtype, spread=1.2)
    go = rng.standard_normal((2, 5, 7, 6)).astype(dtype)
    tx = torch.from_numpy(f64(x)).requires_grad_()
    tg = torch.from_numpy(f64(grid)).requires_grad_()
    ty = torch.nn.functional.grid_sample(tx, tg, mode=MODES[mode], padding_mode=PADDINGS[pad], align_corners=align)
    ty.backward(torch.from_numpy(f64(go)))
    if not (mode == 2 and dtype == F64):
        out = ac.grid_sampler2d(x, grid, mode, pad, align)
        ref, mag = reference(x, grid, mode, pad, align)
        assert_within(out, f64(ty), bound(ref, mag, mode, dtype, True, coordinate_error(x, mode)), "forward")
    ig, gg = ac.grid_sampler2d_backward(go, x, grid, mode, pad, align)
    scale = max(np.abs(f64(tx.grad)).max(), np.abs(f64(tg.grad)).max())
    tol = (2.0 ** -53 if dtype == F64 else 2.0 ** -24) * 64 * scale * x.shape[1]
    assert_within(ig, f64(tx.grad), tol, "inputGrad")
    assert_within(gg, f64(tg.grad), tol, "gridGrad")


# --------------------------------------------------------------------------------------------
# Empty outputs: success, workspace 0, nothing written (bicubic included, on every product).

@pytest.mark.parametrize("shape", [(0, 3, 4, 5, 6, 7), (2, 0, 4, 5, 6, 7), (2, 3, 4, 5, 0, 7), (2, 3, 4, 5, 6, 0)],
                         ids=str)
@pytest.mark.parametrize("mode", list(MODES), ids=MODES.get)
@pytest.mark.parametrize("prod", ["atlas_a2", "atlas_training", "atlas_inference"])
def test_empty(product, shape, mode, prod):
    product(prod)
    N, C, H, W, Ho, Wo = shape
    for dtype in (np.float32, np.float64):
        x = np.ones((N, C, H, W), dtype)
        grid = np.zeros((N, Ho, Wo, 2), dtype)
        out = np.empty((N, C, Ho, Wo), dtype)
        ws, ex = ac.aclnnGridSampler2DGetWorkspaceSize(x, grid, mode, 0, False, out)
        assert ws == 0
        ac.aclnnGridSampler2D(None, 0, ex)
        assert ac.grid_sampler2d(x, grid, mode).shape == (N, C, Ho, Wo)


# --------------------------------------------------------------------------------------------
# The rules, in the library's order, with their status codes; out untouched, inputs unmodified.

def error_case(case):
    rng = np.random.default_rng(29)
    x, grid = make(rng, 2, 3, 4, 5, 6, 7, np.float32)
    out = np.full((2, 3, 6, 7), 5.0, np.float32)
    mode, pad = 0, 0
    if case == "null input":
        x = None
    elif case == "null grid":
        grid = None
    elif case == "null out":
        out = None
    elif case == "grid dtype differs":
        grid = grid.astype(np.float16)
    elif case == "out dtype differs":
        out = out.astype(np.float64)
    elif case == "int32":
        x, grid, out = (a.astype(np.int32) for a in (x, grid, out))
    elif case == "interpolationMode 3":
        mode = 3
    elif case == "interpolationMode -1":
        mode = -1
    elif case == "paddingMode 3":
        pad = 3
    elif case == "input 3-D":
        x = x[0]
    elif case == "grid 5-D":
        grid = grid[None]
    elif case == "out 3-D":
        out = out[0]
    elif case == "N of grid differs":
        grid = np.zeros((1, 6, 7, 2), np.float32)
    elif case == "N of out differs":
        out = np.full((1, 3, 6, 7), 5.0, np.float32)
    elif case == "C of out differs":
        out = np.full((2, 2, 6, 7), 5.0, np.float32)
    elif case == "H_out differs":
        out = np.full((2, 3, 5, 7), 5.0, np.float32)
    elif case == "W_out differs":
        out = np.full((2, 3, 6, 8), 5.0, np.float32)
    elif case == "input H is 0":
        x = np.zeros((2, 3, 0, 5), np.float32)
    elif case == "input W is 0":
        x = np.zeros((2, 3, 4, 0), np.float32)
    elif case == "grid last dim 3":
        grid = np.zeros((2, 6, 7, 3), np.float32)
    elif case == "bicubic float64":
        x, grid, out = (a.astype(np.float64) for a in (x, grid, out))
        mode = 2
    return x, grid, mode, pad, out


CASES = {
    "null input": 161001, "null grid": 161001, "null out": 161001, "grid dtype differs": 161002,
    "out dtype differs": 161002, "int32": 161002, "interpolationMode 3": 161002, "interpolationMode -1": 161002,
    "paddingMode 3": 161002, "input 3-D": 161002, "grid 5-D": 161002, "out 3-D": 161002,
    "N of grid differs": 161002, "N of out differs": 161002, "C of out differs": 161002, "H_out differs": 161002,
    "W_out differs": 161002, "input H is 0": 161002, "input W is 0": 161002, "grid last dim 3": 161002,
    "bicubic float64": 161002,
}


def assert_refused(status, x, grid, mode, pad, out, fragment=""):
    # (The plane-limit inputs are zero-stride views of billions of elements: not copied.)
    inputs = [None if a is None or a.size > 1 << 24 else a.copy() for a in (x, grid)]
    before = None if out is None else out.copy()
    apis = ("functional", "two_phase") if out is not None else ("two_phase",)
    for api in apis:
        with pytest.raises(ac.AclnnError) as info:
            if api == "functional":
                ac.grid_sampler2d(x, grid, mode, pad, False, out=out)
            else:
                ac.aclnnGridSampler2DGetWorkspaceSize(x, grid, mode, pad, False, out)
        error = info.value
        assert error.status == status, f"{api}: {error}"
        assert isinstance(error, ac.ParamNullptrError if status == 161001 else ac.ParamInvalidError)
        assert "aclnnGridSampler2D" in str(error) and fragment in str(error), str(error)
    if out is not None:
        np.testing.assert_array_equal(out, before)
    for old, new in zip(inputs, (x, grid)):
        if old is not None:
            assert old.tobytes() == new.tobytes()


@pytest.mark.parametrize("case", list(CASES))
def test_errors(case):
    assert_refused(CASES[case], *error_case(case))


def test_first_failing_rule_decides():
    """grid's dtype is checked before the modes, the modes before the ranks, N before C."""
    rng = np.random.default_rng(30)
    x, grid = make(rng, 2, 3, 4, 5, 6, 7, np.float32)
    assert_refused(161002, x, grid.astype(np.float16), 5, 0, np.full((2, 3, 6, 7), 5.0, np.float32), "dtype")
    assert_refused(161002, x[0], grid, 5, 0, np.full((2, 3, 6, 7), 5.0, np.float32), "interpolationMode")
    assert_refused(161002, x, grid[:1], 0, 0, np.full((2, 2, 6, 7), 5.0, np.float32), "grid")


@pytest.mark.parametrize("prod,dtype,status", [
    ("atlas_a2", BFLOAT16, 0), ("atlas_a2", F64, 0), ("atlas_training", BFLOAT16, 0),
    ("atlas_training", F64, 0), ("atlas_training", np.dtype(np.float16), 0),
    ("atlas_inference", BFLOAT16, 161002), ("atlas_inference", F64, 0), ("atlas_inference", np.dtype(np.float16), 0),
], ids=str)
def test_dtypes_per_product(product, prod, dtype, status):
    product(prod)
    rng = np.random.default_rng(31)
    x, grid = make(rng, 2, 3, 4, 5, 6, 7, dtype)
    out = np.full((2, 3, 6, 7), 5.0, dtype)
    if status:
        assert_refused(status, x, grid, 0, 0, out)
    else:
        ac.grid_sampler2d(x, grid, 1, 0, False, out=out)
        check(out, x, grid, 1, 0, False)


@pytest.mark.parametrize("prod", ["atlas_training", "atlas_inference"])
def test_bicubic_only_on_atlas_a2(product, prod):
    rng = np.random.default_rng(32)
    x, grid = make(rng, 2, 3, 4, 5, 6, 7, np.float32)
    out = np.full((2, 3, 6, 7), 5.0, np.float32)
    product(prod)
    assert_refused(161002, x, grid, 2, 0, out, "bicubic")
    product("atlas_a2")
    check(ac.grid_sampler2d(x, grid, 2, 0, False, out=out), x, grid, 2, 0, False)


# A limit of this implementation (not in the document): H_in * W_in is at most 2^31 - 1. The
# inputs are zero-stride views: no memory.
@pytest.mark.parametrize("H, W, status", [(1, 2 ** 31 - 1, 0), (1, 2 ** 31, 161002), (46341, 46341, 161002)])
def test_plane_size_limit(H, W, status):
    from numpy.lib.stride_tricks import as_strided

    x = as_strided(np.ones(1, np.float16), shape=(1, 1, H, W), strides=(0, 0, 0, 0))
    grid = np.array([[[[0.0, 0.0], [1.5, 1.5]]]], np.float16)
    out = np.full((1, 1, 1, 2), 5.0, np.float16)
    if status == 0:  # phase 1 only: running it would take an 8 GiB workspace
        size, executor = ac.aclnnGridSampler2DGetWorkspaceSize(x, grid, 0, 0, False, out)
        assert size > 0 and executor is not None
        return
    assert_refused(status, x, grid, 0, 0, out, "2147483647")
