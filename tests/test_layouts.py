"""Softmax, GroupNorm and PReLU give the bits of their contiguous call whatever the layouts of
their operands: slices along the last dim, transposed planes, batch and channel slices,
broadcast inputs, and outputs written through strided views (which leave the rest of their
buffers alone). Layouts that no fast path takes run from dense copies in the workspace
(include/aclnn_cpu/dense_copy.h); the others run fast paths that sum in the contiguous order.
(Exceptions by design: a Softmax whose three operands share one permuted dense layout, and a
GroupNorm or PReLU whose operands' planes do, sum in memory order, tested against the float64
bound in their own test files.)"""
from __future__ import annotations

import numpy as np
import pytest

import aclnn_cpu as ac
import test_group_norm_backward as gn_test
from support import BFLOAT16, channels_last

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16]
SENTINEL = 7.0


def view(a, kind):
    """The values of a (4-D) in another layout."""
    if kind == "contiguous":
        return a.copy()
    if kind == "last-slice":  # every other element along the last dim
        return np.repeat(a, 2, axis=-1)[..., ::2]
    if kind == "transposed-planes":
        return np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)
    if kind == "batch-slice":
        return np.concatenate([a, a], axis=0)[::2]
    if kind == "channel-slice":
        return np.concatenate([a, a[:, :1]], axis=1)[:, :a.shape[1]]
    if kind == "reversed":  # the last dim reversed in memory (a negative stride, as a[..., ::-1])
        return np.ascontiguousarray(a[..., ::-1])[..., ::-1]
    if kind == "reversed-rows":  # dim -2 reversed in memory
        return np.ascontiguousarray(a[..., ::-1, :])[..., ::-1, :]
    if kind == "broadcast":  # one sample's values for every sample (stride 0)
        return np.broadcast_to(a[:1], a.shape)
    raise ValueError(kind)


KINDS = ["last-slice", "transposed-planes", "batch-slice", "channel-slice", "reversed", "reversed-rows", "broadcast"]


def out_view(shape, dtype, kind):
    """An output view of `shape` inside a sentinel-filled buffer, and that buffer."""
    if kind == "contiguous":
        buf = np.full(shape, SENTINEL, dtype)
        return buf, buf
    if kind == "last-slice":
        buf = np.full(shape[:-1] + (2 * shape[-1],), SENTINEL, dtype)
        return buf[..., 1::2], buf
    if kind == "reversed":  # the whole buffer is the output, written backwards along the last dim
        buf = np.full(shape, SENTINEL, dtype)
        return buf[..., ::-1], buf
    buf = np.full(shape[:-2] + (shape[-1], shape[-2]), SENTINEL, dtype)  # transposed planes
    return buf.swapaxes(-1, -2), buf


def assert_same_bits(got, want, buf=None, what=""):
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes(), what
    if buf is not None:  # the view's elements are the result, every other element the sentinel
        assert np.count_nonzero(buf.astype(np.float64) != SENTINEL) <= np.asarray(got).size


def inputs_for(kind, *arrays):
    """The arrays in layout `kind`; with 'broadcast', the contiguous reference takes the same
    (broadcast) values."""
    views = [view(a, kind) for a in arrays]
    refs = [np.ascontiguousarray(v) for v in views]
    return views, refs


# (Not transposed planes in and out: one permuted dense layout for all three operands, which
# the kernel takes in memory order, summing the dim in the order of the path that order gives,
# by design: ops/softmax_backward.cpp, in_memory_order.)
SOFTMAX_LAYOUTS = [(k, o) for k in KINDS for o in ["contiguous", "last-slice", "transposed-planes", "reversed"]
                   if not k == o == "transposed-planes"]


@pytest.mark.parametrize("kind,out_kind", SOFTMAX_LAYOUTS, ids=str)
@pytest.mark.parametrize("dim", [1, 3, -2])
@pytest.mark.parametrize("shape", [(3, 5, 6, 37), (2, 3, 21, 35)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax(isa, kind, out_kind, dim, shape, dtype):
    rng = np.random.default_rng(1)
    g, y = rng.standard_normal(shape).astype(dtype), rng.random(shape).astype(dtype)
    (gv, yv), (gr, yr) = inputs_for(kind, g, y)
    want = ac.softmax_backward(gr, yr, dim)
    out, buf = out_view(shape, dtype, out_kind)
    got = ac.softmax_backward(gv, yv, dim, out=out)
    assert_same_bits(got, want, buf, f"{kind} -> {out_kind}")


@pytest.mark.parametrize("kind", ["reversed-dim0", "reversed", "transposed", "last-slice"])
@pytest.mark.parametrize("shape", [(4, 1), (4, 3), (3, 5, 2), (2, 7, 9), (6, 40), (3, 2, 300)], ids=str)
def test_softmax_rows_of_negative_zeros(isa, kind, shape):
    """A gradOutput of -0.0 (products of -0.0): every path starts its sums from +0.0, so zeros'
    signs do not depend on the path a layout takes. Short rows had summed from their first
    product, so a row of -0.0 gave +0.0 outputs as rows and -0.0 as columns (the same call on
    transposed or reversed operands)."""
    g, y = np.full(shape, -0.0, np.float32), np.full(shape, 0.5, np.float32)
    views = {"reversed-dim0": lambda a: np.ascontiguousarray(a[::-1])[::-1],  # (view() keeps dim 0)
             "transposed": lambda a: np.ascontiguousarray(a.swapaxes(0, -1)).swapaxes(0, -1)}
    lay = views.get(kind, lambda a: view(a, kind))
    for dim in range(len(shape)):
        want = ac.softmax_backward(g, y, dim)
        assert not want.any() and np.signbit(want).all()  # y * (-0.0 - (+0.0)) = -0.0
        got = ac.softmax_backward(lay(g), lay(y), dim)
        assert_same_bits(got, want, None, f"dim {dim}")


# (Not transposed planes in and out: planes that share one permuted dense layout run in memory
# order, tested below against the float64 reference.)
GROUP_NORM_LAYOUTS = SOFTMAX_LAYOUTS


@pytest.mark.parametrize("kind,out_kind", GROUP_NORM_LAYOUTS, ids=str)
@pytest.mark.parametrize("N,C,H,W,G", [(2, 8, 6, 20, 4), (2, 6, 3, 3, 3), (1, 4, 130, 130, 2)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_group_norm(isa, kind, out_kind, N, C, H, W, G, dtype):
    rng = np.random.default_rng(2)
    shape = (N, C, H, W)
    x, dy = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    mean = rng.standard_normal((N, G)).astype(dtype)
    rstd = (rng.random((N, G)) + 0.5).astype(dtype)
    gamma = rng.standard_normal(C).astype(dtype)
    (dyv, xv), (dyr, xr) = inputs_for(kind, dy, x)
    want = ac.group_norm_backward(dyr, xr, mean, rstd, gamma, N, C, H * W, G)
    out, buf = out_view(shape, dtype, out_kind)
    got = ac.group_norm_backward(dyv, xv, mean, rstd, gamma, N, C, H * W, G,
                                 out=(out, np.empty(C, dtype), np.empty(C, dtype)))
    assert_same_bits(got[0], want[0], buf, f"gradInput {kind} -> {out_kind}")
    assert_same_bits(got[1], want[1], None, "gradGammaOut")
    assert_same_bits(got[2], want[2], None, "gradBetaOut")


def _zero_rstd_signs(dy, x, mean, gamma, G):
    """Sign bits of gradInput for rstd = 0, from the kernel's formula dX = c1 dY + (c2 (X - mean)
    + c3), c1 = rstd gamma, c2 = -dsc rstd^3 s, c3 = -db rstd s: every term is an exact signed
    zero, so only IEEE sign rules decide (NumPy float32 arithmetic, no rounding involved). The
    sums' signs come from float64 sums (the test data keeps them away from zero)."""
    N, C = x.shape[:2]
    D = C // G
    z = np.float32(0.0)
    xf, dyf = x.reshape(N, C, -1).astype(np.float64), dy.reshape(N, C, -1).astype(np.float64)
    centred = ((xf - mean.astype(np.float64).repeat(D, axis=1)[:, :, None]) * dyf).sum(-1)
    dsc = (centred * gamma).reshape(N, G, D).sum(-1)
    db = (dyf.sum(-1) * gamma).reshape(N, G, D).sum(-1)
    # Far enough from zero that the kernel's float32 sums have the same signs.
    assert (np.abs(dsc) > 1e-5 * np.abs(centred * gamma).reshape(N, G, D).sum(-1)).all()
    assert (np.abs(db) > 1e-5 * np.abs(dyf.sum(-1) * gamma).reshape(N, G, D).sum(-1)).all()
    c2 = (-np.sign(dsc).astype(np.float32) * z * z * z).repeat(D, axis=1)[:, :, None]
    c3 = (-np.sign(db).astype(np.float32) * z).repeat(D, axis=1)[:, :, None]
    c1 = (z * gamma.astype(np.float32))[None, :, None]
    xm = x.reshape(N, C, -1).astype(np.float32) - mean.astype(np.float32).repeat(D, axis=1)[:, :, None]
    out = c1 * dy.reshape(N, C, -1).astype(np.float32) + (c2 * xm + c3)
    assert not out.any()
    return np.signbit(out).reshape(x.shape)


@pytest.mark.parametrize("kind", ["reversed-dim0", "reversed", "channel-slice", "batch-slice", "transposed-planes"])
@pytest.mark.parametrize("N,C,H,W,G", [(3, 5, 1, 1, 1), (4, 6, 1, 1, 2), (2, 8, 3, 3, 2), (2, 6, 6, 20, 3),
                                       (16, 4, 1, 1, 4)], ids=str)
def test_group_norm_zero_rstd_signs(isa, threads, kind, N, C, H, W, G):
    """rstd = 0 makes every term of gradInput a signed zero. Their signs follow the formula on
    every path: the vector paths had broadcast their coefficients as (+0.0) + c, which turned a
    -0.0 coefficient into +0.0, so N3 C5 HxW 1 gave -0.0 where the contiguous call ran as
    channel rows and +0.0 for the same call on a reversed operand (the group path)."""
    rng = np.random.default_rng(11)
    shape = (N, C, H, W)
    x, dy = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
    mean = rng.standard_normal((N, G)).astype(np.float32)
    rstd = np.zeros((N, G), np.float32)
    gamma = rng.standard_normal(C).astype(np.float32)
    lay = {"reversed-dim0": lambda a: np.ascontiguousarray(a[::-1])[::-1]}.get(kind, lambda a: view(a, kind))
    mask = (True, False, False)
    for which in ("dy", "x", "out"):
        dyv = lay(dy) if which == "dy" else dy
        xv = lay(x) if which == "x" else x
        dyr, xr = np.ascontiguousarray(dyv), np.ascontiguousarray(xv)  # (a batch slice repeats samples)
        contiguous = ac.group_norm_backward(dyr, xr, mean, rstd, gamma, N, C, H * W, G, mask)[0]
        assert (np.signbit(contiguous) == _zero_rstd_signs(dyr, xr, mean, gamma, G)).all()
        out = lay(np.full(shape, SENTINEL, np.float32)) if which == "out" else np.empty(shape, np.float32)
        got = ac.group_norm_backward(dyv, xv, mean, rstd, gamma, N, C, H * W, G, mask, out=(out, None, None))[0]
        assert_same_bits(got, contiguous, None, f"{which} {kind}")


# Channels-last operands beside a planar one are copied through transposes of a channel and a
# position dim; where the destination's rows lie a multiple of 1-4 KiB apart, those go in tiles
# through a stack buffer (strided_move.h, rows_crowd_sets). Here: planes of 512 positions
# gathered from channels-last inputs (74 channels: a partial tile at the end), and a planar
# gradInput scattered to channels-last with 256 channels (35 positions: partial tiles).
@pytest.mark.parametrize("direction", ["gather", "scatter"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_group_norm_transposes_in_tiles(isa, threads, direction, dtype):
    rng = np.random.default_rng(5)
    N, C, H, W, G = (2, 74, 16, 32, 2) if direction == "gather" else (2, 256, 5, 7, 8)
    shape = (N, C, H, W)
    x, dy = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    mean = rng.standard_normal((N, G)).astype(dtype)
    rstd = (rng.random((N, G)) + 0.5).astype(dtype)
    gamma = rng.standard_normal(C).astype(dtype)
    want = ac.group_norm_backward(dy, x, mean, rstd, gamma, N, C, H * W, G)
    channels_last = lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)  # noqa: E731
    if direction == "gather":
        dyv, xv, out = channels_last(dy), channels_last(x), np.full(shape, SENTINEL, dtype)
    else:
        dyv, xv, out = dy, x, channels_last(np.full(shape, SENTINEL, dtype))
    got = ac.group_norm_backward(dyv, xv, mean, rstd, gamma, N, C, H * W, G,
                                 out=(out, np.empty(C, dtype), np.empty(C, dtype)))
    for a, b, name in zip(got, want, ["gradInput", "gradGammaOut", "gradBetaOut"]):
        assert_same_bits(a, b, None, f"{direction}: {name}")


# Groups of more than 1024 elements with planes of a vector or more run staged: each task
# copies its group of the operands no fast path takes into its thread's slot and scatters dX
# back (ops/group_norm_backward.cpp, stages_groups). Here each operand in a layout of its own,
# the masks included.
STAGED_LAYOUTS = [("last-slice", "transposed-planes", "contiguous"), ("transposed-planes", "contiguous", "last-slice"),
                  ("contiguous", "channel-slice", "transposed-planes"), ("reversed", "last-slice", "reversed"),
                  ("contiguous", "contiguous", "last-slice")]


@pytest.mark.parametrize("dy_kind,x_kind,out_kind", STAGED_LAYOUTS, ids=str)
@pytest.mark.parametrize("mask", [(True, True, True), (True, False, False), (False, True, False), (False, False, True)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_group_norm_staged(isa, threads, dy_kind, x_kind, out_kind, mask, dtype):
    rng = np.random.default_rng(6)
    N, C, H, W, G = 2, 12, 24, 40, 3
    shape = (N, C, H, W)
    x, dy = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    mean = rng.standard_normal((N, G)).astype(dtype)
    rstd = (rng.random((N, G)) + 0.5).astype(dtype)
    gamma = rng.standard_normal(C).astype(dtype)
    want = ac.group_norm_backward(dy, x, mean, rstd, gamma, N, C, H * W, G, output_mask=mask)
    out, buf = out_view(shape, dtype, out_kind)
    outs = (out if mask[0] else None, np.empty(C, dtype) if mask[1] else None, np.empty(C, dtype) if mask[2] else None)
    got = ac.group_norm_backward(view(dy, dy_kind), view(x, x_kind), mean, rstd, gamma, N, C, H * W, G,
                                 output_mask=mask, out=outs)
    for k, name in enumerate(["gradInput", "gradGammaOut", "gradBetaOut"]):
        if mask[k]:
            assert_same_bits(got[k], want[k], buf if k == 0 else None, f"{name}: {dy_kind}, {x_kind} -> {out_kind}")
    if not mask[0]:
        assert np.all(buf.astype(np.float64) == SENTINEL)


# (Not transposed planes in and out: those run in memory order, tested against the float64
# reference in test_prelu_backward.py. Rows reversed in memory run as runs of W, each element in
# the lane of its position: the contiguous call's bits.)
PRELU_LAYOUTS = SOFTMAX_LAYOUTS


@pytest.mark.parametrize("kind,out_kind", PRELU_LAYOUTS, ids=str)
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_prelu(isa, kind, out_kind, per_channel, dtype):
    rng = np.random.default_rng(3)
    shape = (3, 4, 9, 40)
    x, go = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(4 if per_channel else 1).astype(dtype)
    (gov, xv), (gor, xr) = inputs_for(kind, go, x)
    want = ac.prelu_backward(gor, xr, w)
    out, buf = out_view(shape, dtype, out_kind)
    got = ac.prelu_backward(gov, xv, w, out=(out, np.empty(w.shape, dtype)))
    assert_same_bits(got[0], want[0], buf, f"gradInput {kind} -> {out_kind}")
    assert_same_bits(got[1], want[1], None, "gradWeight")


@pytest.mark.parametrize("shape,go_shape", [((3, 4, 9, 40), (9, 1)), ((3, 4, 9, 40), (40,)), ((3, 4, 9, 40), (1, 4, 1, 40)),
                                            ((2, 33), (33,)), ((2, 33), (2, 1)), ((3, 4, 300), (4, 1))], ids=str)
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_prelu_grad_output_broadcast_within_rows(isa, shape, go_shape, per_channel, dtype):
    """A gradOutput broadcast to self's shape (stride 0 inside the rows too) gives the bits of
    its broadcast values passed as a contiguous array."""
    rng = np.random.default_rng(len(go_shape))
    x, go = rng.standard_normal(shape).astype(dtype), rng.standard_normal(go_shape).astype(dtype)
    w = rng.standard_normal(shape[1] if per_channel else 1).astype(dtype)
    want = ac.prelu_backward(np.ascontiguousarray(np.broadcast_to(go, shape)), x, w)
    got = ac.prelu_backward(go, x, w)
    assert_same_bits(got[0], want[0], None, "gradInput")
    assert_same_bits(got[1], want[1], None, "gradWeight")


@pytest.mark.parametrize("kind", ["batch-slice", "channel-slice", "broadcast", "reversed", "last-slice"])
@pytest.mark.parametrize("shape", [(17, 35, 27), (4096, 3), (64, 100), (300, 4, 4), (40, 8, 5, 3)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_prelu_narrow_rows(isa, threads, kind, shape, dtype):
    """Rows narrower than a column block, several to a task: the contiguous call sums them in
    folded copies (a tree over the rows), and every other layout of the same shape in the same
    order, so gradWeight has the contiguous call's bits (it had summed strided rows in order)."""
    rng = np.random.default_rng(len(shape) * 1000 + shape[0])
    x = rng.standard_normal(shape).astype(dtype)
    go = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(shape[1]).astype(dtype)
    for gov, xv in [(view(go, kind), x), (go, view(x, kind)), (view(go, kind), view(x, kind))]:
        want = ac.prelu_backward(np.ascontiguousarray(gov), np.ascontiguousarray(xv), w)
        for count in (1, 2):
            threads(count)
            got = ac.prelu_backward(gov, xv, w)
            assert_same_bits(got[0], want[0], None, f"gradInput {kind} {shape}")
            assert_same_bits(got[1], want[1], None, f"gradWeight {kind} {shape}, {count} threads")


@pytest.mark.parametrize("N,C,H,W,G", [(2, 8, 6, 20, 4), (2, 6, 3, 3, 3), (1, 4, 130, 130, 2), (2, 64, 16, 16, 32)],
                         ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_group_norm_planes_sharing_a_permuted_layout(isa, threads, N, C, H, W, G, dtype):
    """Transposed planes in gradOut, input and gradInput alike run in memory order: within the
    float64 reference's bound, the same bits on 1 and 2 threads, the buffer's layout kept."""
    rng = np.random.default_rng(5)
    args = gn_test.make(rng, (N, C, H, W), N, C, H * W, G, dtype)
    dy, x = view(args[0], "transposed-planes"), view(args[1], "transposed-planes")
    results = []
    for count in (1, 2):
        threads(count)
        out, buf = out_view((N, C, H, W), dtype, "transposed-planes")
        got = ac.group_norm_backward(dy, x, *args[2:], out=(out, np.empty(C, dtype), np.empty(C, dtype)))
        results.append(b"".join(np.ascontiguousarray(a).tobytes() for a in got))
    assert results[0] == results[1]
    gn_test.check(args, got)


def random_layout(rng, a):
    """a's values in a random layout: its dims in a random memory order (a third of the time
    the last two swapped, a third dim 1 innermost as channels-last), each dim reversed or not,
    each dim at a step of 1 or 2 in a larger buffer (a third of the time all steps 1, no flips)."""
    n = a.ndim
    kind = rng.integers(3)
    order = [rng.permutation(n), list(range(n - 2)) + [n - 1, n - 2], [0] + list(range(2, n)) + [1]][kind]
    plain = rng.integers(3) == 0
    steps = np.ones(n, int) if plain else rng.integers(1, 3, n)
    flips = np.zeros(n, bool) if plain else rng.integers(0, 2, n).astype(bool)
    big_shape = tuple(int(a.shape[d] * steps[d]) for d in order)
    big = np.zeros(big_shape, a.dtype)
    inner = big[tuple(slice(None, None, int(steps[d])) for d in order)]  # dims in memory order
    view = inner.transpose(np.argsort(order))  # back to a's dim order
    view = view[tuple(slice(None, None, -1) if f else slice(None) for f in flips)]
    view[...] = a
    return view


@pytest.mark.parametrize("seed", range(60))
def test_random_layouts_give_the_contiguous_bits(isa, seed):
    """Inputs in random layouts (any memory order of the dims, reversed dims, steps of 2) with a
    contiguous output, so that the operands never share one permuted layout: Softmax over an
    inner dim and GroupNorm run from dense copies (transposed pairs in blocks, steps of 2 and -1
    in vectors, the rest element by element) and give the contiguous call's bits."""
    rng = np.random.default_rng(seed)
    dtype = DTYPES[seed % 3]
    shape = tuple(int(s) for s in rng.integers(1, 25, 4))
    g, y = rng.standard_normal(shape).astype(dtype), rng.random(shape).astype(dtype)
    dim = int(rng.integers(0, 3))  # not the last dim: rows along it stay on the strided path
    want = ac.softmax_backward(g, y, dim)
    got = ac.softmax_backward(random_layout(rng, g), random_layout(rng, y), dim, out=np.empty(shape, dtype))
    assert_same_bits(got, want, None, f"softmax {shape} dim {dim}")

    N, C, H, W = shape
    G = int(rng.choice([d for d in range(1, C + 1) if C % d == 0]))
    dy, x = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    mean = rng.standard_normal((N, G)).astype(dtype)
    rstd = (rng.random((N, G)) + 0.5).astype(dtype)
    gamma = rng.standard_normal(C).astype(dtype)
    want = ac.group_norm_backward(dy, x, mean, rstd, gamma, N, C, H * W, G)
    got = ac.group_norm_backward(random_layout(rng, dy), random_layout(rng, x), mean, rstd, gamma, N, C, H * W, G,
                                 out=(np.empty(shape, dtype), np.empty(C, dtype), np.empty(C, dtype)))
    for name, a, b in zip(("gradInput", "gradGammaOut", "gradBetaOut"), got, want):
        assert_same_bits(a, b, None, f"group_norm {shape} G {G}: {name}")


def slab_view(a, kind):
    """a's values with each a[n] (the slab of a softmax over dim 1) contiguous, the slabs apart."""
    if kind in ("channel-slice", "batch-slice"):
        return view(a, kind)
    if kind == "batch-reversed":
        return np.ascontiguousarray(a[::-1])[::-1]
    if kind == "batch-broadcast":
        return np.broadcast_to(a[:1], a.shape)
    raise ValueError(kind)


def slab_out(shape, dtype, kind):
    if kind == "contiguous":
        buf = np.full(shape, SENTINEL, dtype)
        return buf, buf
    if kind == "channel-slice":
        buf = np.full((shape[0], shape[1] + 1) + shape[2:], SENTINEL, dtype)
        return buf[:, :shape[1]], buf
    buf = np.full(shape, SENTINEL, dtype)  # batch-reversed
    return buf[::-1], buf


@pytest.mark.parametrize("kind", ["channel-slice", "batch-slice", "batch-reversed", "batch-broadcast"])
@pytest.mark.parametrize("out_kind", ["contiguous", "channel-slice", "batch-reversed"])
@pytest.mark.parametrize("shape", [(4, 6, 5, 7), (3, 40, 1, 130), (2, 3, 1000)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax_on_slabs_in_place(isa, threads, kind, out_kind, shape, dtype):
    """A softmax over dim 1 whose per-sample slabs are each contiguous (channel and batch
    slices, reversed or broadcast batches) runs the column kernels on the slabs in place: the
    contiguous call's bits, on 1 and 2 threads."""
    rng = np.random.default_rng(4)
    g, y = rng.standard_normal(shape).astype(dtype), rng.random(shape).astype(dtype)
    gv, yv = slab_view(g, kind), slab_view(y, kind)
    want = ac.softmax_backward(np.ascontiguousarray(gv), np.ascontiguousarray(yv), 1)
    for count in (1, 2):
        threads(count)
        out, buf = slab_out(shape, dtype, out_kind)
        got = ac.softmax_backward(gv, yv, 1, out=out)
        assert_same_bits(got, want, buf, f"{kind} -> {out_kind}, {count} threads")


def _layout(a, kind):
    """a's values in layout `kind` (4-D): contiguous, transposed planes or channels-last."""
    if kind == "channels-last":
        return channels_last(a)
    return view(a, kind)


def _out_layout(shape, dtype, kind):
    """out_view, and channels-last: an output view of `shape` and its sentinel-filled buffer."""
    if kind == "channels-last":
        buf = np.full(shape[:1] + shape[2:] + shape[1:2], SENTINEL, dtype)
        return buf.transpose(0, 3, 1, 2), buf
    return out_view(shape, dtype, kind)


# (inputs' layout, out's layout, dim, shape): whole planes per task, strips of 16 rows of a
# channels-last pair whose planes do not fit a task (80 x 1200 floats), slabs of a softmax over
# an inner dim, a transposed pair in out only; then layouts that keep the dense copies (rows
# shorter than 32, slabs over 256 KiB, one plane that would be a single task).
STAGED = [("transposed-planes", "contiguous", 3, (3, 5, 40, 36)),
          ("channels-last", "contiguous", 3, (2, 80, 30, 40)),
          ("contiguous", "channels-last", 3, (2, 80, 30, 40)),
          ("transposed-planes", "contiguous", -2, (3, 7, 33, 20)),
          ("channels-last", "transposed-planes", 2, (2, 9, 17, 35)),
          ("contiguous", "transposed-planes", 3, (2, 3, 50, 70)),
          ("transposed-planes", "contiguous", 3, (4, 6, 20, 20)),
          ("transposed-planes", "contiguous", 1, (2, 70, 40, 40)),
          ("transposed-planes", "contiguous", 3, (1, 1, 200, 200))]


@pytest.mark.parametrize("kind,out_kind,dim,shape", STAGED, ids=str)
@pytest.mark.parametrize("dtype,out_dtype", [(np.float32, np.float32), (np.float16, np.float16),
                                             (BFLOAT16, BFLOAT16), (np.float32, np.float64),
                                             (np.float32, np.float16)], ids=str)
def test_softmax_staged(isa, threads, kind, out_kind, dim, shape, dtype, out_dtype):
    """Layouts that no fast path takes run task by task through a slot per thread (whole rows,
    slabs or planes per task, the transposed pairs in tiles), or from whole dense copies where
    a task's rows would not fit: either way the contiguous call's bits, for any thread count,
    with nothing written outside out's view."""
    rng = np.random.default_rng(sum(shape) + dim)
    g = rng.standard_normal(shape).astype(dtype)
    y = rng.random(shape).astype(dtype)
    want = ac.softmax_backward(g, y, dim, out=np.empty(shape, out_dtype))
    gv, yv = _layout(g, kind), _layout(y, kind)
    for count in (1, 2):
        threads(count)
        out, buf = _out_layout(shape, out_dtype, out_kind)
        got = ac.softmax_backward(gv, yv, dim, out=out)
        assert got is out
        assert_same_bits(got, want, buf, f"{kind} -> {out_kind}, {count} threads")
        assert np.array_equal(np.ascontiguousarray(gv), g) and np.array_equal(np.ascontiguousarray(yv), y)


# (gradOutput's, self's and gradInput's layouts, shape): planes of two chunks each, channels-last
# strips (planes of 40 x 1920 values do not fit a task), a broadcast gradOutput, each operand
# alone in another layout, and one plane that would be a single task (dense copies instead).
PRELU_STAGED = [("transposed-planes", "transposed-planes", "contiguous", (2, 3, 130, 130)),
                ("channels-last", "channels-last", "contiguous", (2, 40, 48, 40)),
                ("contiguous", "contiguous", "channels-last", (2, 40, 48, 40)),
                ("broadcast", "transposed-planes", "contiguous", (3, 4, 20, 30)),
                ("channels-last", "contiguous", "contiguous", (2, 8, 17, 31)),
                ("contiguous", "transposed-planes", "contiguous", (2, 8, 17, 31)),
                ("contiguous", "contiguous", "transposed-planes", (2, 8, 17, 31)),
                ("transposed-planes", "transposed-planes", "contiguous", (1, 1, 200, 200))]


@pytest.mark.parametrize("go_kind,x_kind,out_kind,shape", PRELU_STAGED, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_prelu_staged(isa, threads, go_kind, x_kind, out_kind, shape, dtype):
    """Layouts that no fast path takes, on the channel-run schedule, run task by task through a
    slot per thread (whole planes per task, transposed pairs in tiles): the contiguous call's
    bits for gradInput and gradWeight, any thread count, nothing written outside the view."""
    rng = np.random.default_rng(sum(shape))
    go = rng.standard_normal(shape).astype(dtype)
    if go_kind == "broadcast":
        go = np.broadcast_to(go[:1], shape)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(shape[1]).astype(dtype)
    want = ac.prelu_backward(np.ascontiguousarray(go), x, w)
    gov = go if go_kind == "broadcast" else _layout(go, go_kind)
    xv = _layout(x, x_kind)
    for count in (1, 2):
        threads(count)
        out, buf = _out_layout(shape, dtype, out_kind)
        got = ac.prelu_backward(gov, xv, w, out=(out, np.empty(w.shape, dtype)))
        assert_same_bits(got[0], want[0], buf, f"gradInput {go_kind}, {x_kind} -> {out_kind}, {count} threads")
        assert_same_bits(got[1], want[1], None, f"gradWeight, {count} threads")


# Fortran order (np.asfortranarray, a.T of a row-major array): every dim reversed in memory, the
# batch dim innermost. Whole copies transpose the unit-stride dim with the innermost one, the
# dims between as outer loops (dense_copy.h, spread_pair); GroupNorm and PReLU copy such
# operands whole instead of staging them. Batches of 8-19 take the tiles, one of 3 the element
# copies; outputs go back through Fortran-ordered views.
@pytest.mark.parametrize("op", ["softmax", "group_norm", "prelu"])
@pytest.mark.parametrize("shape", [(8, 6, 5, 9), (19, 4, 12, 33), (3, 8, 16, 16)], ids=str)
@pytest.mark.parametrize("out_fortran", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fortran_order(isa, threads, op, shape, out_fortran, dtype):
    rng = np.random.default_rng(6)
    N, C, H, W = shape
    a, b = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    af, bf = np.asfortranarray(a), np.asfortranarray(b)
    assert af.strides[0] == af.itemsize  # the batch dim innermost
    for count in (1, 2):
        threads(count)
        out = np.asfortranarray(np.full(shape, SENTINEL, dtype)) if out_fortran else np.full(shape, SENTINEL, dtype)
        if op == "softmax":
            y = rng.random(shape).astype(dtype)
            want = (ac.softmax_backward(a, y, 1),)
            got = (ac.softmax_backward(af, np.asfortranarray(y), 1, out=out),)
        elif op == "group_norm":
            G = 2
            mean = rng.standard_normal((N, G)).astype(dtype)
            rstd = (rng.random((N, G)) + 0.5).astype(dtype)
            gamma = rng.standard_normal(C).astype(dtype)
            want = ac.group_norm_backward(a, b, mean, rstd, gamma, N, C, H * W, G)
            got = ac.group_norm_backward(af, bf, mean, rstd, gamma, N, C, H * W, G,
                                         out=(out, np.empty(C, dtype), np.empty(C, dtype)))
        else:
            w = rng.standard_normal(C).astype(dtype)
            want = ac.prelu_backward(a, b, w)
            got = ac.prelu_backward(af, bf, w, out=(out, np.empty(C, dtype)))
        for g, w_ in zip(got, want):
            assert_same_bits(g, w_, None, f"{op} {shape} out_fortran={out_fortran} threads={count}")
        assert got[0] is out
