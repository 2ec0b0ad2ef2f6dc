"""Outputs the functional API allocates take the memory order of an input (registry `alloc.layout`).

A channels-last or transposed call then has its inputs and outputs in one layout, which is what
the kernels' layout fast paths need (without it they ran the general strided path: PReLU on a
channels-last [8, 64, 56, 56] took 6.8 ms instead of 0.3 ms). Inputs that are not a dense
permutation of C order (slices, broadcasts) leave the output C-contiguous.
"""
from __future__ import annotations

import numpy as np
import pytest

import aclnn_cpu as ac
from aclnn_cpu._glue import dense_axis_order
from support import BFLOAT16, channels_last, f64, in_memory_order

DTYPES = [np.float32, np.float16, BFLOAT16]


def element_strides(a):
    return tuple(s // a.itemsize for s in a.strides)


def same_layout(a, b):
    """Same shape and the same strides wherever a dim has more than one element."""
    return a.shape == b.shape and all(
        n == 1 or sa == sb for n, sa, sb in zip(a.shape, element_strides(a), element_strides(b)))


# ---- the order itself ----------------------------------------------------------------------

def test_order_of_dense_permutations():
    x = np.zeros((2, 3, 4, 5), np.float32)
    assert dense_axis_order(x, x.shape) is None                      # C order: nothing to copy
    assert dense_axis_order(channels_last(x), x.shape) == [0, 2, 3, 1]
    assert dense_axis_order(in_memory_order(x, (3, 1, 0, 2)), x.shape) == [3, 1, 0, 2]
    assert dense_axis_order(np.asfortranarray(x), x.shape) == [3, 2, 1, 0]
    assert dense_axis_order(channels_last(x)[:, :, ::-1, ::-1], x.shape) == [0, 2, 3, 1]  # |stride|


def test_axes_of_one_element_go_outermost():
    x = channels_last(np.zeros((1, 3, 4, 1), np.float32))
    order = dense_axis_order(x, x.shape)
    assert order == [0, 3, 2, 1]
    out = ac.prelu_backward(np.ones(x.shape, np.float32), x, np.ones(3, np.float32))[0]
    assert same_layout(out, x)


@pytest.mark.parametrize("make", [
    lambda x: x[:, :, ::2],                                           # gaps
    lambda x: np.broadcast_to(x[:, :1], x.shape),                     # zero strides
    lambda x: channels_last(np.zeros((2, 3, 8, 5), np.float32))[:, :, :4],  # channels-last slice
], ids=["sliced", "broadcast", "channels-last-slice"])
def test_no_order_for_non_dense_inputs(make):
    x = make(np.zeros((2, 3, 8, 5), np.float32))
    assert dense_axis_order(x, x.shape) is None
    out = ac.softmax_backward(np.ascontiguousarray(x) if x.strides[1] == 0 else x, x, 1)
    assert out.flags.c_contiguous


def test_no_order_when_shapes_differ_or_rank_is_below_two():
    x = channels_last(np.zeros((2, 3, 4, 5), np.float32))
    assert dense_axis_order(x, (2, 3, 20)) is None
    assert dense_axis_order(np.zeros(7, np.float32)[::-1], (7,)) is None


# ---- each op -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("order", [(0, 2, 3, 1), (3, 2, 1, 0), (1, 0, 2, 3)], ids=str)
def test_prelu_grad_input_takes_self_layout(dtype, order):
    rng = np.random.default_rng(1)
    shape = (3, 5, 16, 17)  # past 4 KiB: allocated on a line
    x = in_memory_order(rng.standard_normal(shape).astype(dtype), order)
    go = in_memory_order(rng.standard_normal(shape).astype(dtype), order)
    w = rng.standard_normal(5).astype(dtype)
    gi, gw = ac.prelu_backward(go, x, w)
    assert same_layout(gi, x) and gi.ctypes.data % 64 == 0
    wc = f64(w).reshape(1, 5, 1, 1)
    expected = np.where(f64(x) > 0, f64(go), wc * f64(go))
    assert np.array_equal(f64(gi), f64(expected.astype(dtype)))  # one rounding from fp32 math
    gi_out = np.empty_like(x)  # NumPy's empty_like keeps the order too: the same kernel path
    gw_out = np.empty_like(w)
    ac.prelu_backward(go, x, w, out=(gi_out, gw_out))
    assert gi.tobytes() == gi_out.tobytes() and gw.tobytes() == gw_out.tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("order,dim", [((0, 2, 3, 1), 1), ((1, 0), -1), ((2, 0, 1), 0)], ids=str)
def test_softmax_out_takes_grad_output_layout(dtype, order, dim):
    rng = np.random.default_rng(2)
    shape = {4: (2, 6, 5, 4), 2: (33, 40), 3: (7, 9, 11)}[len(order)]
    go = in_memory_order(rng.standard_normal(shape).astype(dtype), order)
    y = in_memory_order(rng.random(shape).astype(dtype), order)
    out = ac.softmax_backward(go, y, dim)
    assert same_layout(out, go)
    ref = f64(y) * (f64(go) - (f64(go) * f64(y)).sum(axis=dim, keepdims=True))
    tol = 1e-5 if dtype == np.float32 else 1e-2
    np.testing.assert_allclose(f64(out), ref, rtol=tol, atol=tol)
    explicit = np.empty_like(go)
    ac.softmax_backward(go, y, dim, out=explicit)
    assert out.tobytes() == explicit.tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_group_norm_grad_input_takes_input_layout(dtype):
    rng = np.random.default_rng(3)
    N, C, H, W, G = 2, 8, 5, 6, 4
    x = channels_last(rng.standard_normal((N, C, H, W)).astype(dtype))
    dy = channels_last(rng.standard_normal((N, C, H, W)).astype(dtype))
    mean = rng.standard_normal(N * G).astype(dtype)
    rstd = (rng.random(N * G) + 0.5).astype(dtype)
    gamma = rng.standard_normal(C).astype(dtype)
    gi, gg, gb = ac.group_norm_backward(dy, x, mean, rstd, gamma, N, C, H * W, G)
    assert same_layout(gi, x) and gg.shape == gb.shape == (C,)
    outs = (np.empty_like(x), np.empty(C, dtype), np.empty(C, dtype))
    ac.group_norm_backward(dy, x, mean, rstd, gamma, N, C, H * W, G, out=outs)
    assert all(a.tobytes() == b.tobytes() for a, b in zip((gi, gg, gb), outs))
    # and the values are those of the contiguous call (same sums in the same order per group)
    plain = ac.group_norm_backward(np.ascontiguousarray(dy), np.ascontiguousarray(x), mean, rstd, gamma,
                                   N, C, H * W, G)
    tol = 1e-5 if dtype == np.float32 else 1e-2
    for a, b in zip((gi, gg, gb), plain):
        np.testing.assert_allclose(f64(a), f64(b), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_grid_sampler_outputs_take_input_and_grid_layouts(dtype):
    rng = np.random.default_rng(4)
    x = channels_last(rng.standard_normal((2, 3, 6, 7)).astype(dtype))
    grid = in_memory_order(rng.uniform(-1.1, 1.1, (2, 4, 5, 2)).astype(dtype), (3, 0, 1, 2))
    go = rng.standard_normal((2, 3, 4, 5)).astype(dtype)
    ig, gg = ac.grid_sampler2d_backward(go, x, grid)
    assert same_layout(ig, x) and same_layout(gg, grid)
    outs = (np.empty_like(x), np.empty_like(grid))
    ac.grid_sampler2d_backward(go, x, grid, out=outs)
    assert ig.tobytes() == outs[0].tobytes() and gg.tobytes() == outs[1].tobytes()


def test_torch_channels_last_tensors(torch):
    rng = np.random.default_rng(5)
    x = torch.from_numpy(rng.standard_normal((2, 6, 4, 5)).astype(np.float32))
    x = x.contiguous(memory_format=torch.channels_last)
    go = torch.ones_like(x)  # keeps channels_last
    w = torch.full((6,), 0.25)
    gi, _ = ac.prelu_backward(go, x, w)
    assert isinstance(gi, torch.Tensor)  # outputs follow inputs (tests/test_torch_outputs.py)
    assert tuple(gi.stride()) == tuple(x.stride())
    expected = torch.where(x > 0, go, 0.25 * go)
    assert torch.equal(gi, expected)
