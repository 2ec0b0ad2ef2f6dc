"""Workspace sizes stay in proportion to the call: at most WORKSPACE_RATIO times the bytes of the
op's tensors plus WORKSPACE_SLACK (fp16 GroupNorm with HxW 1 and dense copies comes closest,
3.02x). Users allocate the workspace themselves (aclrtMalloc, or the functional API's kept
buffer), so a plan that scales with something else is a memory bug even when its results are
right: GroupNorm's channel-rows schedule used to keep four floats per
(sample, channel), [256, 4096] HxW 1 G1024 in fp16 asking for 26 MiB beside 6 MiB of tensors.

Only phase 1 runs, on arrays that are never touched (np.empty), so big shapes cost nothing.
Layouts: contiguous, reversed dims (transposed), channels-last and a slice of every other
element along the last dim, which make the kernels stage or copy operands into the workspace.
"""
from __future__ import annotations

import numpy as np
import pytest

import aclnn_cpu as ac
from support import BFLOAT16

WORKSPACE_RATIO = 3.25
# Fixed per-thread scratch: GridSampler plans a slot for each of up to 32 threads (tile records,
# channel-last tiles), about 1.4 MiB even for a call of a few KiB.
WORKSPACE_SLACK = 2 << 20
SEEDS = int(__import__("os").environ.get("ACLNN_CPU_WORKSPACE_SEEDS", "4"))
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16]
LAYOUTS = ["contiguous", "transposed", "channels_last", "sliced"]


def untouched(shape, dtype, layout):
    """An np.empty view of `shape` in `layout` (its memory never written)."""
    shape = tuple(shape)
    if layout == "transposed":
        return np.empty(shape[::-1], dtype).transpose(tuple(range(len(shape)))[::-1])
    if layout == "channels_last" and len(shape) == 4:
        n, c, h, w = shape
        return np.empty((n, h, w, c), dtype).transpose(0, 3, 1, 2)
    if layout == "sliced" and len(shape) >= 1:
        return np.empty(shape[:-1] + (2 * shape[-1],), dtype)[..., ::2]
    return np.empty(shape, dtype)


def tensor_bytes(*arrays):
    return sum(a.size * a.itemsize for a in arrays if a is not None)


def check(workspace, arrays, what):
    limit = WORKSPACE_RATIO * tensor_bytes(*arrays) + WORKSPACE_SLACK
    assert workspace <= limit, (f"{what}: workspace {workspace / 2**20:.2f} MiB, over "
                                f"{WORKSPACE_RATIO} x its tensors' {tensor_bytes(*arrays) / 2**20:.2f} MiB + 2 MiB")


GROUP_NORM = [(256, 4096, 1, 1, 1024), (256, 4096, 1, 1, 32), (4096, 64, 1, 1, 32), (8, 320, 64, 64, 32),
              (2, 16384, 4, 4, 1), (64, 256, 7, 7, 256), (1, 64, 512, 512, 32), (16, 512, 2, 2, 512),
              (2, 640, 32, 32, 32), (1, 3, 1, 100000, 1)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("N, C, H, W, G", GROUP_NORM, ids=str)
def test_group_norm(N, C, H, W, G, layout, dtype):
    dy, x, dx = (untouched((N, C, H, W), dtype, layout) for _ in range(3))
    params = [np.empty((N, G), dtype), np.empty((N, G), dtype), np.empty(C, dtype)]
    grads = [np.empty(C, dtype), np.empty(C, dtype)]
    ws, _ = ac.aclnnGroupNormBackwardGetWorkspaceSize(dy, x, *params, N, C, H * W, G, [True, True, True], dx, *grads)
    check(ws, [dy, x, dx, *params, *grads], f"GroupNorm N{N} C{C} {H}x{W} G{G} {layout}")


SOFTMAX = [((64, 4096), -1), ((4096, 64), 0), ((8, 256, 1024), 1), ((2, 1 << 20), -1), ((1, 1 << 22), 0),
           ((512, 3), 0), ((16, 3, 50257), -1), ((8, 64, 56, 56), 1)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape, dim", SOFTMAX, ids=str)
def test_softmax(shape, dim, layout, dtype):
    g, y, out = (untouched(shape, dtype, layout) for _ in range(3))
    ws, _ = ac.aclnnSoftmaxBackwardGetWorkspaceSize(g, y, dim, out)
    check(ws, [g, y, out], f"Softmax {shape} dim {dim} {layout}")


PRELU = [((32, 64, 56, 56), 64), ((256, 1024), 1024), ((1 << 22,), 1), ((8, 1 << 16, 3), 1 << 16),
         ((4, 3, 224, 224), 1), ((1, 1024, 14, 14), 1024)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape, channels", PRELU, ids=str)
def test_prelu(shape, channels, layout, dtype):
    dy, x, dx = (untouched(shape, dtype, layout) for _ in range(3))
    w, dw = np.empty(channels, dtype), np.empty(channels, dtype)
    ws, _ = ac.aclnnPreluBackwardGetWorkspaceSize(dy, x, w, dx, dw)
    check(ws, [dy, x, dx, w, dw], f"PReLU {shape} weight {channels} {layout}")


GRID_SAMPLER = [(4, 3, 224, 224, 224, 224, 0), (1, 256, 64, 64, 128, 128, 0), (32, 32, 64, 64, 64, 64, 2),
                (1, 1, 1024, 1024, 8, 8, 0), (1, 1, 8, 8, 1024, 1024, 1), (64, 1, 16, 16, 16, 16, 0),
                (1, 4096, 4, 4, 4, 4, 0), (8, 64, 56, 56, 7, 7, 0), (2, 17, 33, 65, 40, 50, 2)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("N, C, H, W, Ho, Wo, mode", GRID_SAMPLER, ids=str)
def test_grid_sampler(N, C, H, W, Ho, Wo, mode, layout, dtype):
    go = untouched((N, C, Ho, Wo), dtype, layout)
    x, ig = (untouched((N, C, H, W), dtype, layout) for _ in range(2))
    grid, gg = (untouched((N, Ho, Wo, 2), dtype, layout) for _ in range(2))
    ws, _ = ac.aclnnGridSampler2DBackwardGetWorkspaceSize(go, x, grid, mode, 0, False, [True, True], ig, gg)
    check(ws, [go, x, grid, ig, gg], f"GridSampler N{N} C{C} {H}x{W}->{Ho}x{Wo} mode {mode} {layout}")


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_shapes(seed):
    """Seeded random shapes of every op in every layout and dtype, on both sides of the schedules'
    thresholds (channel rows, chunked groups, long rows, staged copies, GridSampler's compact and
    split plans)."""
    rng = np.random.default_rng([7, seed])
    for _ in range(60):
        dtype = DTYPES[rng.integers(3)]
        layout = LAYOUTS[rng.integers(4)]
        N, C, H, W = (int(v) for v in 2 ** rng.integers(0, [9, 13, 8, 8]))
        while N * C * H * W > 1 << 26:  # virtual memory only, but NumPy refuses what it cannot back
            N, C = max(1, N // 2), max(1, C // 2)
        G = int(C // 2 ** rng.integers(0, min(C.bit_length(), 6)))
        test_group_norm(N, C, H, W, G, layout, dtype)
        shape = [int(v) for v in 2 ** rng.integers(0, 15, rng.integers(1, 5))]
        while np.prod(shape) > 1 << 26:
            shape[int(np.argmax(shape))] //= 2
        shape = tuple(shape)
        test_softmax(shape, int(rng.integers(-len(shape), len(shape))), layout, dtype)
        test_prelu((N, C, H, W), C if rng.random() < 0.7 else 1, layout, dtype)
        Ho, Wo = (int(v) for v in 2 ** rng.integers(0, 9, 2))
        test_grid_sampler(min(N, 16), min(C, 64), H, W, Ho, Wo, int(rng.integers(3)),
                          "sliced" if layout == "channels_last" else layout, dtype)
