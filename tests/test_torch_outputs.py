"""Outputs follow inputs: torch tensors in, torch tensors out (same dtype, bf16 included, the
library's buffer); NumPy in, NumPy out; anything else (a mix, the buffer protocol) as NumPy."""
import array

import ml_dtypes
import numpy as np
import pytest

import aclnn_cpu as ac
from support import import_or_skip

torch = import_or_skip("torch", "torch tensors are the subject")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def to_numpy(t):
    """A NumPy copy of a torch tensor, bfloat16 as ml_dtypes.bfloat16, bit for bit."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    return t.numpy().copy()


def bits(x):
    """The raw bits of a torch tensor or NumPy array, for bitwise comparison."""
    arr = to_numpy(x) if isinstance(x, torch.Tensor) else np.ascontiguousarray(x)
    return arr.view(np.uint8 if arr.itemsize == 1 else f"u{arr.itemsize}")


def grid_case(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, 5, 6, generator=g).to(dtype)
    grid = (torch.rand(2, 4, 3, 2, generator=g) * 2.2 - 1.1).to(dtype)
    go = torch.randn(2, 3, 4, 3, generator=g).to(dtype)
    return go, x, grid


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_torch_in_torch_out_two_outputs(dtype):
    go, x, grid = grid_case(dtype)
    dx, dgrid = ac.grid_sampler2d_backward(go, x, grid, 0, 0, False)
    assert isinstance(dx, torch.Tensor) and isinstance(dgrid, torch.Tensor)
    assert dx.dtype == dtype and dgrid.dtype == dtype
    assert dx.shape == x.shape and dgrid.shape == grid.shape
    ndx, ndgrid = ac.grid_sampler2d_backward(to_numpy(go), to_numpy(x), to_numpy(grid), 0, 0, False)
    assert type(ndx) is np.ndarray and ndx.dtype == to_numpy(x).dtype
    np.testing.assert_array_equal(bits(dx), bits(ndx))
    np.testing.assert_array_equal(bits(dgrid), bits(ndgrid))
    # what a researcher's next line does with them
    assert torch.allclose(dx.float(), torch.from_numpy(ndx.astype(np.float32)))
    assert dx.to(torch.float64).dtype == torch.float64


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_torch_in_torch_out_single_output(dtype):
    g = torch.Generator().manual_seed(1)
    y = torch.softmax(torch.randn(4, 7, generator=g), -1).to(dtype)
    go = torch.randn(4, 7, generator=g).to(dtype)
    dx = ac.softmax_backward(go, y, -1)
    assert isinstance(dx, torch.Tensor) and dx.dtype == dtype
    np.testing.assert_array_equal(bits(dx), bits(ac.softmax_backward(to_numpy(go), to_numpy(y), -1)))
    wide = ac.softmax_backward(go, y, -1, out_dtype=torch.float32)
    assert isinstance(wide, torch.Tensor) and wide.dtype == torch.float32


def test_outputs_are_the_library_buffer_in_the_input_layout():
    """No copy: a channels-last input gets a channels-last tensor (the library allocates in the
    input's order; torch.from_numpy of a contiguous copy would be C order), its data on the
    library's 64-byte line, and writable in place."""
    go, x, grid = grid_case(torch.float32)
    x = x.contiguous(memory_format=torch.channels_last)
    big = torch.randn(64, 64, 8, 8).contiguous(memory_format=torch.channels_last)
    dx, _ = ac.grid_sampler2d_backward(go, x, grid, 0, 0, False)
    assert dx.is_contiguous(memory_format=torch.channels_last) and not dx.is_contiguous()
    y = torch.softmax(big, 1)
    out = ac.softmax_backward(big, y, 1)
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert out.data_ptr() % 64 == 0
    out.zero_()  # an ordinary writable tensor
    assert not out.any()


def test_bf16_round_trips_bit_for_bit():
    """bfloat16 crosses as its bit pattern: every finite bf16 value and the specials survive."""
    patterns = np.arange(0, 1 << 16, dtype=np.uint16)
    values = patterns.view(ml_dtypes.bfloat16)
    finite = patterns[np.isfinite(values.astype(np.float32))]
    weight = torch.ones(1, dtype=torch.bfloat16)
    grad = torch.from_numpy(finite.view(np.int16).copy()).view(torch.bfloat16)
    self_ = torch.ones_like(grad)  # self > 0: gradInput = gradOutput exactly
    dx, dw = ac.prelu_backward(grad, self_, weight)
    assert dx.dtype == torch.bfloat16 and dw.dtype == torch.bfloat16
    assert torch.equal(dx.view(torch.int16), grad.view(torch.int16))


def test_masked_off_and_optional_inputs():
    """None where an output is masked off; an absent optional input does not make a mix."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 4, 3, generator=g)
    xr = x.reshape(2, 2, 6).double()
    mean = xr.mean(-1).float()
    rstd = (1 / torch.sqrt(xr.var(-1, unbiased=False) + 1e-5)).float()
    go = torch.randn(2, 4, 3, generator=g)
    dx, dgamma, dbeta = ac.group_norm_backward(go, x, mean, rstd, None, 2, 4, 3, 2, (True, False, True))
    assert isinstance(dx, torch.Tensor) and dgamma is None and isinstance(dbeta, torch.Tensor)
    ndx, _, ndbeta = ac.group_norm_backward(to_numpy(go), to_numpy(x), to_numpy(mean), to_numpy(rstd),
                                            None, 2, 4, 3, 2, (True, False, True))
    np.testing.assert_array_equal(bits(dx), bits(ndx))
    np.testing.assert_array_equal(bits(dbeta), bits(ndbeta))


def test_numpy_in_numpy_out():
    go, x, grid = (to_numpy(t) for t in grid_case(torch.bfloat16))
    dx, dgrid = ac.grid_sampler2d_backward(go, x, grid, 0, 0, False)
    assert type(dx) is np.ndarray and dx.dtype == ml_dtypes.bfloat16
    assert type(dgrid) is np.ndarray and dgrid.dtype == ml_dtypes.bfloat16


def test_a_mix_of_kinds_gives_numpy():
    go, x, grid = grid_case(torch.float32)
    dx, dgrid = ac.grid_sampler2d_backward(go, to_numpy(x), grid, 0, 0, False)
    assert type(dx) is np.ndarray and type(dgrid) is np.ndarray
    ref = ac.grid_sampler2d_backward(go, x, grid, 0, 0, False)
    np.testing.assert_array_equal(bits(dx), bits(ref[0]))


def test_buffer_protocol_inputs_give_numpy():
    go = array.array("f", [0.5, -1.0, 2.0, 0.25])
    y = array.array("f", [0.1, 0.2, 0.3, 0.4])
    dx = ac.softmax_backward(go, y, 0)
    assert type(dx) is np.ndarray and dx.dtype == np.float32
    expect = np.float64(y) * (np.float64(go) - np.dot(np.float64(go), np.float64(y)))
    np.testing.assert_allclose(dx, expect, rtol=1e-6, atol=1e-7)


def test_out_arrays_are_returned_as_given():
    go, x, grid = grid_case(torch.float32)
    given = np.empty(tuple(x.shape), np.float32)
    dx, dgrid = ac.grid_sampler2d_backward(go, x, grid, 0, 0, False, out=(given, None))
    assert dx is given and isinstance(dgrid, torch.Tensor)
    given_t = torch.empty_like(grid)
    _, dgrid2 = ac.grid_sampler2d_backward(go, x, grid, 0, 0, False, out=(None, given_t))
    assert dgrid2 is given_t
    assert torch.equal(dgrid2, dgrid)
