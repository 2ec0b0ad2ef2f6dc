"""Streaming stores change where bytes go, never which bytes.

Every streaming op (PReLU, GroupNorm, Softmax; GridSampler2D for its inputGrad) streams its
output when its traffic exceeds the last-level cache. `_config.set_llc_bytes(1)` makes every
call count as "too big", so the streaming code runs on small data, on every ISA level, for
every kernel path, with outputs starting on a 64-byte line and one element past it (the
head-peeling case; 16-bit data there is 2 bytes off, which the streaming cursor cannot join),
and for PReLU and Softmax eight elements past it (joined into lines by the cursor). The
streamed result must be bitwise equal to the plain one, which the per-op tests check against
float64 references; PReLU's column blocks streamed with gradInput at every element offset within
a line must also equal the call with gradInput on a line.
"""
from __future__ import annotations

import numpy as np
import pytest

import aclnn_cpu as ac
from aclnn_cpu import _config
from support import BFLOAT16, at_line_offset

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16]


@pytest.fixture
def llc():
    """A setter for the cache size the kernels plan with; restores the detected size after."""
    yield _config.set_llc_bytes
    _config.set_llc_bytes(0)


def output_buffer(shape, dtype, misalign):
    """A NaN-filled array whose data starts on a 64-byte line, or `misalign` elements past it."""
    out = at_line_offset(shape, dtype, misalign * np.dtype(dtype).itemsize)
    out[...] = np.nan
    return out


def plain_and_streamed(llc, call):
    """call() computed with the detected cache size and with every output streamed."""
    assert _config.llc_bytes() > 1
    plain = call()
    llc(1)
    assert _config.llc_bytes() == 1
    streamed = call()
    llc(0)
    return plain, streamed


def assert_same_bits(plain, streamed):
    for a, b in zip(plain, streamed):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()


# PReLU: channel runs, column blocks in pairs with and without a tail, several blocks, folded
# short rows, one weight over everything, a long flat run; column blocks of whole lines in rows
# of whole lines (ResNet's 14x14 and 7x7 planes), whose grid starts on a line for rows off one.
PRELU_SHAPES = [(2, 3, 1000), (1, 2, 40000), (3, 100, 5, 5), (9, 130, 3, 7), (8, 64, 14, 14),
                (7, 3000), (64, 5000), (5, 3, 3, 3), (3000, 7), (1, 1, 7001), (5, 64, 14, 14), (6, 128, 7, 7)]


@pytest.mark.parametrize("shape", PRELU_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("misalign", [0, 1, 8])
def test_prelu_streamed_equals_plain(isa, llc, shape, dtype, misalign):
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(dtype)
    go = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(shape[1] if len(shape) > 1 else 1).astype(dtype)

    def call():
        gi = output_buffer(shape, dtype, misalign)
        gw = np.full(w.shape, np.nan, dtype)
        return ac.prelu_backward(go, x, w, out=(gi, gw))

    assert_same_bits(*plain_and_streamed(llc, call))


# gradInput starting off a line at every distance an element allows. Column blocks: the first
# block of a row ends where a channel starts on a line (when one does) and the blocks after it
# stream as on a line, several blocks and rows per task, odd planes, a short last block, the
# blocks of two threads. Channel runs (the last two): fp32 planes computed from their first
# line on, with the accumulator turned, planes of whole lines and of odd lengths. gradInput and
# gradWeight must keep the bits of the call with gradInput on a line.
PRELU_OFFSET_SHAPES = [(5, 64, 14, 14), (6, 128, 7, 7), (4, 100, 14, 14), (5, 72, 9, 9), (7, 50, 6, 6),
                       (2, 8, 20, 20), (3, 5, 16, 17)]


@pytest.mark.parametrize("shape", PRELU_OFFSET_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_prelu_streamed_off_a_line_equals_on_a_line(isa, llc, threads, shape, dtype):
    rng = np.random.default_rng(sum(shape) + 1)
    x = rng.standard_normal(shape).astype(dtype)
    x[..., ::13] = 0.0
    go = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(shape[1]).astype(dtype)
    size = np.dtype(dtype).itemsize
    llc(1)
    for count in (1, 2):
        threads(count)
        want = ac.prelu_backward(go, x, w, out=(output_buffer(shape, dtype, 0), np.full(w.shape, np.nan, dtype)))
        for offset in range(size, 64, size):
            got = ac.prelu_backward(go, x, w, out=(output_buffer(shape, dtype, offset // size),
                                                   np.full(w.shape, np.nan, dtype)))
            for a, b in zip(want, got):
                assert a.tobytes() == b.tobytes(), f"{count} threads, gradInput {offset} bytes past a line"


@pytest.mark.parametrize("shape", [(2, 3, 40, 50), (2, 8, 17, 31)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("misalign", [0, 1])
def test_prelu_staged_streamed_equals_plain(isa, llc, shape, dtype, misalign):
    """Transposed inputs with gradInput in place: staged tasks whose gradInput streams."""
    rng = np.random.default_rng(sum(shape))
    x = np.ascontiguousarray(rng.standard_normal(shape).astype(dtype).swapaxes(-1, -2)).swapaxes(-1, -2)
    go = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(shape[1]).astype(dtype)

    def call():
        gi = output_buffer(shape, dtype, misalign)
        gw = np.full(w.shape, np.nan, dtype)
        return ac.prelu_backward(go, x, w, out=(gi, gw))

    plain, streamed = plain_and_streamed(llc, call)
    assert_same_bits(plain, streamed)
    want = ac.prelu_backward(go, np.ascontiguousarray(x), w)
    assert_same_bits(want, plain)


# GroupNorm: (shape, N, C, HxW, G) with planes of a few lines, planes that are not whole lines,
# and HxW = 1.
GN_CASES = [((2, 6, 40, 40), 2, 6, 1600, 3), ((2, 64, 17, 17), 2, 64, 289, 8), ((3, 32, 100), 3, 32, 100, 32),
            ((4, 16, 1), 4, 16, 1, 4), ((1, 8, 4099), 1, 8, 4099, 2)]


@pytest.mark.parametrize("case", GN_CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("misalign", [0, 1])
def test_group_norm_streamed_equals_plain(isa, llc, case, dtype, misalign):
    shape, N, C, HxW, G = case
    rng = np.random.default_rng(N * C + HxW)
    x = (rng.standard_normal(shape) * 1.5).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    grouped = x.astype(np.float64).reshape(N, G, -1)
    mean = grouped.mean(-1).astype(dtype)
    rstd = (1.0 / np.sqrt(grouped.var(-1) + 1e-5)).astype(dtype)
    gamma = rng.standard_normal(C).astype(dtype)

    def call():
        outs = (output_buffer(shape, dtype, misalign), np.full(C, np.nan, dtype), np.full(C, np.nan, dtype))
        return ac.group_norm_backward(dy, x, mean, rstd, gamma, N, C, HxW, G, output_mask=(True, True, True),
                                      out=outs)

    assert_same_bits(*plain_and_streamed(llc, call))


# Softmax: rows of every length class (short flat blocks, register rows and head register rows
# of the backward, whole rows, rows in chunks with workspace partials) and the column kernels
# for dims that are not last. Outputs on a line, one element past it, and 8 past it (for 16-bit
# data NumPy's 16 bytes, where the streaming cursor joins rows into lines), forward and backward.
SOFTMAX_CASES = [((50, 20), -1), ((16, 1000), -1), ((2, 40000), -1), ((6, 129), -1), ((8, 64, 300), 1),
                 ((3, 40, 17), 1), ((700, 33), 0), ((6, 256), -1), ((9, 200), -1), ((7, 100), -1)]


@pytest.mark.parametrize("case", SOFTMAX_CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("misalign", [0, 1, 8])
def test_softmax_streamed_equals_plain(isa, llc, case, dtype, misalign):
    shape, dim = case
    rng = np.random.default_rng(sum(shape))
    g = rng.standard_normal(shape).astype(dtype)
    y = rng.random(shape).astype(dtype)

    def call():
        return (ac.softmax_backward(g, y, dim, out=output_buffer(shape, dtype, misalign)),
                ac.softmax(g, dim, out=output_buffer(shape, dtype, misalign)))

    assert_same_bits(*plain_and_streamed(llc, call))


# GridSampler2D: fp32 inputGrad streams, 16-bit in groups of 8 channels outside the framed layout
# (its groups of 4 and one-channel planes stay plain, so those rows check that nothing changes):
# fused channel blocks of 16, 8 and 4 lanes with partial last blocks, positions split into parts
# (one block, many positions), planes that are not whole lines, and every mode.
GS_SHAPES = [(2, 20, 9, 11, 7, 6), (1, 12, 8, 8, 64, 64), (3, 3, 5, 13, 4, 9), (2, 40, 16, 16, 16, 16),
             (3, 1, 30, 29, 20, 20), (1, 1, 40, 40, 64, 64)]  # one channel: planes, fused and in parts


@pytest.mark.parametrize("shape", GS_SHAPES, ids=str)
@pytest.mark.parametrize("mode", [0, 1, 2], ids=["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("misalign", [0, 1])
def test_grid_sampler_streamed_equals_plain(isa, llc, shape, mode, dtype, misalign):
    N, C, H, W, Ho, Wo = shape
    rng = np.random.default_rng(N * C + H * W + mode)
    go = rng.standard_normal((N, C, Ho, Wo)).astype(dtype)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    grid = rng.uniform(-1.1, 1.1, (N, Ho, Wo, 2)).astype(dtype)

    def call():
        outs = (output_buffer((N, C, H, W), dtype, misalign), np.full(grid.shape, np.nan, dtype))
        return ac.grid_sampler2d_backward(go, x, grid, mode, 0, False, output_mask=(True, True), out=outs)

    assert_same_bits(*plain_and_streamed(llc, call))
