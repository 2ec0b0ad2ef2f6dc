"""Seeded random calls of every op, with shapes drawn on both sides of the kernels' path
thresholds (register, buffered and long Softmax rows, short and column blocks; fused, batched,
short-plane, chunked and spanned GroupNorm groups; PReLU's weight layouts; GridSampler's
channel blocks, compact, split, row-band, tap-grid, pixel-slot and direct schedules) and random
input layouts (channels-last included), on every ISA variant.
Each result is checked against the float64 reference and derived error bound of the op's own
test module, and must be bitwise the same on 1, 2 and 5 threads. The per-op tests pin each path
with chosen shapes; this draws the combinations nobody chose.

ACLNN_CPU_RANDOM_CALLS (default 6) sets the calls per op, seed and ISA variant: a long campaign
is `ACLNN_CPU_RANDOM_CALLS=500 pytest tests/test_random_calls.py`, and ACLNN_CPU_RANDOM_SEED=k
(default 0) draws it from seeds k..k+2 instead of 0..2. ACLNN_CPU_RANDOM_THREADS (default "2,5")
lists the thread counts compared with one thread, e.g. "3,7,16,64": a many-core machine's
counts, which a 2-core machine runs oversubscribed (the results must not depend on the count).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import aclnn_cpu as ac
import test_grid_sampler2d_backward as gs_test
import test_group_norm_backward as gn_test
import test_prelu_backward as prelu_test
import test_softmax_backward as softmax_test
from support import BFLOAT16, strided_view

CALLS = int(os.environ.get("ACLNN_CPU_RANDOM_CALLS", "6"))
# ACLNN_CPU_RANDOM_SEED shifts the three seeds, so a campaign can draw calls no earlier one did.
SEED0 = int(os.environ.get("ACLNN_CPU_RANDOM_SEED", "0"))
SEEDS = range(SEED0, SEED0 + 3)
THREAD_COUNTS = [int(n) for n in os.environ.get("ACLNN_CPU_RANDOM_THREADS", "2,5").split(",")]
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16]
MAX_ELEMENTS = 1 << 19  # the float64 references stay quick
# Lengths at and around the kernels' thresholds: vector widths (8, 16), Softmax's short (64),
# register (128, 256), buffered (2048) and long (16384) rows, GroupNorm's chunks (16384).
LENGTHS = [1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 20, 22, 31, 32, 33, 47, 63, 64, 65, 100, 127, 128, 129,
           255, 256, 257, 1000, 2047, 2048, 2049, 16385, 20001]


def length(rng, small=0.5):
    return int(rng.integers(1, 9)) if rng.random() < small else int(rng.choice(LENGTHS))


def shrink(shape, limit=MAX_ELEMENTS):
    shape = list(shape)
    while int(np.prod(shape, dtype=np.int64)) > limit:
        k = int(np.argmax(shape))
        shape[k] = max(1, shape[k] // 3)
    return tuple(shape)


def layout(rng, a):
    kinds = ["contiguous", "contiguous", "sliced", "transposed", "negative", "channels-last"]
    return strided_view(rng, a, kinds[rng.integers(len(kinds))])


def on_both_thread_counts(threads, call):
    """call() on 1 thread, then on each of THREAD_COUNTS: the results (copies) of the last, each
    of which must equal the first."""
    threads(1)
    first = [None if r is None else np.array(r, copy=True) for r in call()]
    for count in THREAD_COUNTS:
        threads(count)
        later = [None if r is None else np.array(r, copy=True) for r in call()]
        for a, b in zip(first, later):
            assert (a is None) == (b is None)
            if a is not None:
                assert a.tobytes() == b.tobytes(), f"results differ between 1 and {count} threads"
    return later


@pytest.mark.parametrize("seed", SEEDS)
def test_softmax(isa, threads, seed):
    rng = np.random.default_rng([1, seed])
    for _ in range(CALLS):
        dtype = DTYPES[rng.integers(3)]
        shape = shrink([length(rng) for _ in range(int(rng.integers(1, 4)))])
        dim = int(rng.integers(-len(shape), len(shape)))
        g, y = softmax_test.inputs(rng, shape, dtype)
        gv, yv = layout(rng, g), layout(rng, y)
        (out,) = on_both_thread_counts(threads, lambda: (ac.softmax_backward(gv, yv, dim),))
        softmax_test.check(g, y, dim, out)


@pytest.mark.parametrize("seed", SEEDS)
def test_prelu(isa, threads, seed):
    rng = np.random.default_rng([2, seed])
    for _ in range(CALLS):
        dtype = DTYPES[rng.integers(3)]
        shape = shrink([length(rng, 0.6) for _ in range(int(rng.integers(0, 5)))])
        per_channel = len(shape) >= 2 and rng.random() < 0.7
        go, x, w = prelu_test.make(rng, shape, dtype, None if per_channel else 1)
        gov, xv = layout(rng, go), layout(rng, x)
        gi, gw = on_both_thread_counts(threads, lambda: ac.prelu_backward(gov, xv, w))
        prelu_test.check(go, x, w, gi, gw)


@pytest.mark.parametrize("seed", SEEDS)
def test_group_norm(isa, threads, seed):
    rng = np.random.default_rng([3, seed])
    for _ in range(CALLS):
        dtype = DTYPES[rng.integers(3)]
        G = int(rng.choice([1, 2, 3, 8, 32]))
        D = int(rng.choice([1, 2, 5, 16, 40]))
        N, C = int(rng.integers(1, 5)), G * D
        HxW = shrink([length(rng, 0.3)], MAX_ELEMENTS // (N * C) or 1)[0]
        shape = (N, C, HxW) if rng.random() < 0.6 else (N, C, HxW, 1)
        args = gn_test.make(rng, shape, N, C, HxW, G, dtype, gamma=rng.random() < 0.8)
        dy, x = layout(rng, args[0]), layout(rng, args[1])
        mask = tuple(bool(v) for v in rng.integers(0, 2, 3))
        mask = mask if any(mask) else (True, True, True)
        call = lambda: ac.group_norm_backward(dy, x, *args[2:], output_mask=mask)
        gn_test.check(args, on_both_thread_counts(threads, call), mask)


@pytest.mark.parametrize("seed", SEEDS)
def test_group_norm_spans(isa, threads, seed):
    """Many samples of few channels with HxW 1 or planes shorter than a vector: the spans
    schedule's blocks of whole groups across samples (the draws above keep N <= 4)."""
    rng = np.random.default_rng([5, seed])
    for _ in range(CALLS):
        dtype = DTYPES[rng.integers(3)]
        D, G = int(rng.choice([1, 2, 3, 5, 7, 12, 15])), int(rng.choice([1, 2, 3, 8]))
        C, HxW = D * G, int(rng.choice([1, 1, 2, 3, 5, 9, 15, 16]))
        N = int(rng.integers(1, 400))
        while N * C * HxW > MAX_ELEMENTS // 2:
            N = max(1, N // 2)
        args = gn_test.make(rng, (N, C, HxW), N, C, HxW, G, dtype, gamma=rng.random() < 0.8)
        dy, x = layout(rng, args[0]), layout(rng, args[1])
        mask = tuple(bool(v) for v in rng.integers(0, 2, 3))
        mask = mask if any(mask) else (True, True, True)
        call = lambda: ac.group_norm_backward(dy, x, *args[2:], output_mask=mask)
        gn_test.check(args, on_both_thread_counts(threads, call), mask)


@pytest.mark.parametrize("seed", SEEDS)
def test_grid_sampler(isa, threads, seed):
    rng = np.random.default_rng([4, seed])
    for _ in range(CALLS):
        dtype = DTYPES[rng.integers(3)]
        N = int(rng.integers(1, 6))
        C = int(rng.choice([1, 2, 3, 4, 5, 8, 16, 17, 33]))
        H, W = (int(rng.choice([1, 2, 5, 16, 33, 64])) for _ in range(2))
        Ho, Wo = (int(rng.choice([1, 2, 4, 16, 33, 64])) for _ in range(2))
        while N * C * max(H * W, Ho * Wo) > MAX_ELEMENTS // 4:
            N, C = max(1, N // 2), max(1, C // 2)
        mode, pad, align = int(rng.integers(3)), int(rng.integers(3)), bool(rng.integers(2))
        go, x, grid = gs_test.make(rng, N, C, H, W, Ho, Wo, dtype)
        if rng.random() < 0.5:  # a warp: identity plus jitter, so positions reach nearby pixels
            ys, xs = np.meshgrid((2 * np.arange(Ho) + 1) / Ho - 1, (2 * np.arange(Wo) + 1) / Wo - 1, indexing="ij")
            grid = (np.stack([xs, ys], -1)[None] * rng.choice([0.25, 1.0])
                    + rng.standard_normal((N, Ho, Wo, 2)) * 0.05).astype(dtype)
        gov, xv, gridv = layout(rng, go), layout(rng, x), layout(rng, grid)
        mask = tuple(bool(v) for v in rng.integers(0, 2, 2))
        mask = mask if any(mask) else (True, True)
        call = lambda: ac.grid_sampler2d_backward(gov, xv, gridv, mode, pad, align, mask)
        ig, gg = on_both_thread_counts(threads, call)
        assert (ig is None) != mask[0] and (gg is None) != mask[1]
        gs_test.check(ig, gg, gs_test.reference(go, x, grid, mode, pad, align), dtype,
                      f"N{N} C{C} {H}x{W}->{Ho}x{Wo} mode {mode} padding {pad} align {align}")
