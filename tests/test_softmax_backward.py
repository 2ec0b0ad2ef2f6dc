"""aclnnSoftmaxBackward: out = output * (gradOutput - sum_dim(gradOutput * output)).

Checked against a float64 NumPy formula and PyTorch's _softmax_backward_data in float64 on the
same (already rounded) inputs. The error bound is derived, not tuned: the kernel computes in
fp32, so

    |out - exact| <= u_out*|exact| + tiny_out                      final rounding to out's dtype
                     + |y| * (n + 2) * u32 * (sum|g*y| + |g|) * 2    fp32 sum of n products,
                                                                    then g - s and y * (...)

with u the unit roundoff of a dtype and tiny_out half its smallest subnormal.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import aclnn_cpu as ac
from support import (BFLOAT16, FP32_EPS, LAYOUTS, UNIT_ROUNDOFF, assert_within, f64, in_memory_order, np_dtype,
                     strided_view, to_torch)

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BFLOAT16]
OUT_DTYPES = DTYPES + [np.dtype(np.float64)]
# Half the smallest subnormal: the absolute part of rounding a tiny result.
TINY = {np.dtype(np.float64): 2.0 ** -1075, np.dtype(np.float32): 2.0 ** -150,
        np.dtype(np.float16): 2.0 ** -25, BFLOAT16: 2.0 ** -134}


def reference(g, y, dim):
    """float64 result, and the per-element error bound of an fp32 computation (module docstring)."""
    g, y = f64(g), f64(y)
    if g.ndim == 0:
        g, y = g.reshape(1), y.reshape(1)
        out, bound_part = reference(g, y, 0)
        return out.reshape(()), bound_part.reshape(())
    s = (g * y).sum(axis=dim, keepdims=True)
    magnitude = np.abs(g * y).sum(axis=dim, keepdims=True)
    n = g.shape[dim]
    out = y * (g - s)
    fp32_error = np.abs(y) * (n + 2) * FP32_EPS * (magnitude + np.abs(g)) * 2
    return out, fp32_error


def bound(ref, fp32_error, out_dtype):
    out_dtype = np.dtype(out_dtype)
    return UNIT_ROUNDOFF[out_dtype] * np.abs(ref) + TINY[out_dtype] + fp32_error


def inputs(rng, shape, dtype):
    g = rng.standard_normal(shape).astype(dtype)
    y = rng.random(shape).astype(dtype)  # softmax outputs are in [0, 1)
    return g, y


def check(g, y, dim, out):
    ref, err = reference(g, y, dim % max(np.ndim(g), 1))
    assert_within(out, ref, bound(ref, err, out.dtype), f"softmax_backward dim={dim}")


# --------------------------------------------------------------------------------------------
# The documented example (document 002): [4, 2] float32 along dim 0.

def test_documented_example():
    go = np.arange(8, dtype=np.float32).reshape(4, 2)
    y = np.array([1, 1, 1, 2, 2, 2, 3, 3], dtype=np.float32).reshape(4, 2)
    out = ac.softmax_backward(go, y, 0)
    # column sums of g*y: 28 and 38; out = y * (g - sum)
    expected = np.array([[-28, -37], [-26, -70], [-48, -66], [-66, -93]], dtype=np.float64)
    np.testing.assert_array_equal(f64(out), expected)
    np.testing.assert_array_equal(f64(out), reference(go, y, 0)[0])


def test_documented_example_two_phase():
    go = np.arange(8, dtype=np.float32).reshape(4, 2)
    y = np.array([1, 1, 1, 2, 2, 2, 3, 3], dtype=np.float32).reshape(4, 2)
    out = np.zeros((4, 2), np.float32)
    ws, ex = ac.aclnnSoftmaxBackwardGetWorkspaceSize(go, y, 0, out)
    ac.aclnnSoftmaxBackward(np.empty(ws, np.uint8) if ws else None, ws, ex)
    np.testing.assert_array_equal(f64(out), reference(go, y, 0)[0])


# --------------------------------------------------------------------------------------------
# Numbers: every rank 0-8, every dim (negative too), every dtype, every ISA level.

SHAPES = [(), (1,), (7,), (4, 2), (3, 5, 17), (2, 3, 4, 5), (2, 1, 3, 1, 4), (2, 2, 1, 3, 2, 2),
          (1, 2, 2, 2, 1, 2, 3), (2, 1, 2, 1, 2, 1, 2, 3)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_rank_and_dim(isa, shape, dtype):
    rng = np.random.default_rng(len(shape))
    g, y = inputs(rng, shape, dtype)
    n = max(len(shape), 1)
    for dim in range(-n, n):
        check(g, y, dim, ac.softmax_backward(g, y, dim))


# Shapes that take each kernel path: short rows (< 32), ordinary rows, rows longer than one
# 16384-element partial (workspace; few rows: chunk tasks, many: a task per row), the column
# path (dim not last) with narrow and wide inner sizes, and sizes that leave SIMD tails on every
# level.
PATH_CASES = [((1000, 3), -1), ((257, 31), 1), ((64, 33), -1), ((5, 1000), -1), ((3, 40000), -1), ((9, 20001), -1),
              ((1, 70001), 0), ((6, 37, 9), 1), ((3, 500, 2), 1), ((2, 7, 5000), 1), ((40000, 3), 0),
              ((4, 5, 6, 7), 0), ((2, 3, 33, 65), 2)]


@pytest.mark.parametrize("shape,dim", PATH_CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_kernel_paths(isa, shape, dim, dtype):
    rng = np.random.default_rng(sum(shape))
    g, y = inputs(rng, shape, dtype)
    check(g, y, dim, ac.softmax_backward(g, y, dim))


# Rows of 32 to 128 elements run in registers with AVX-512 (one load and conversion per element,
# the dot product in dot_row's order), rows of up to 256 keep their first 128 there; every
# length to 260, so that each count of two-pair blocks, single vectors and partial tails is met
# on both sides of each boundary. A row whose inputs are views with unit stride in the
# row (a slice of wider rows) takes the strided path, which keeps dot_row + write_row: the two
# must agree bit for bit, for every out dtype (float64 out keeps the register path for fp32,
# a float32 out of 16-bit inputs does not).
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_register_rows_every_length(isa, dtype):
    rng = np.random.default_rng(13)
    for n in range(32, 261):
        g, y = inputs(rng, (5, n), dtype)
        wide_g, wide_y = np.zeros((5, n + 3), dtype), np.zeros((5, n + 3), dtype)
        wide_g[:, 1:n + 1], wide_y[:, 1:n + 1] = g, y
        g_view, y_view = wide_g[:, 1:n + 1], wide_y[:, 1:n + 1]
        assert not g_view.flags.c_contiguous
        for out_dtype in OUT_DTYPES:
            out = ac.softmax_backward(g, y, -1, out_dtype=out_dtype)
            check(g, y, -1, out)
            from_strided = ac.softmax_backward(g_view, y_view, -1, out_dtype=out_dtype)
            assert from_strided.tobytes() == out.tobytes(), (n, out_dtype)


# With AVX-512, rows shorter than 32 elements run as register rows too from 16 elements (fp32),
# 20 (fp16) or 22 (bf16), when out has the input's dtype: bit for bit the strided path's dot_row +
# write_row. Shorter rows, and other levels, sum flat blocks of rows (checked for accuracy).
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_short_register_rows_match_the_plain_path(isa, dtype):
    rng = np.random.default_rng(16)
    first = {np.dtype(np.float32): 16, np.dtype(np.float16): 20}.get(np.dtype(dtype), 22)
    for n in range(2, 32):
        g, y = inputs(rng, (7, n), dtype)
        wide_g, wide_y = np.zeros((7, n + 3), dtype), np.zeros((7, n + 3), dtype)
        wide_g[:, 2:n + 2], wide_y[:, 2:n + 2] = g, y
        out = ac.softmax_backward(g, y, -1)
        check(g, y, -1, out)
        if isa == "avx512" and n >= first:
            from_strided = ac.softmax_backward(wide_g[:, 2:n + 2], wide_y[:, 2:n + 2], -1)
            assert from_strided.tobytes() == out.tobytes(), n


# fp16 rows of 257 to 2048 elements keep the dot product's converted pairs in a stack buffer
# for the write (buffered_rows): lengths around each count of pair blocks, single vectors and
# tails, and past the buffer's end, against the strided path's dot_row + write_row, bit for bit.
def test_buffered_fp16_rows_match_the_plain_path(isa):
    rng = np.random.default_rng(15)
    lengths = [257, 261, 287, 288, 289, 300, 319, 320, 321, 335, 336, 1000, 1023, 1024, 1025,
               1999, 2016, 2032, 2047, 2048, 2049, 2100]
    for n in lengths:
        g, y = inputs(rng, (3, n), np.dtype(np.float16))
        wide_g, wide_y = np.zeros((3, n + 2), np.float16), np.zeros((3, n + 2), np.float16)
        wide_g[:, 1:n + 1], wide_y[:, 1:n + 1] = g, y
        for out_dtype in OUT_DTYPES:
            out = ac.softmax_backward(g, y, -1, out_dtype=out_dtype)
            check(g, y, -1, out)
            from_strided = ac.softmax_backward(wide_g[:, 1:n + 1], wide_y[:, 1:n + 1], -1, out_dtype=out_dtype)
            assert from_strided.tobytes() == out.tobytes(), (n, out_dtype)


# Rows over more than the 32 MiB last-level cache, out on a line: streaming stores, from
# registers (rows of 128) or from buffered_rows (fp16 rows of 1024, whole lines). The same rows
# computed alone (a small call, plain stores) must give the same bits, and 1 and 2 threads too.
@pytest.mark.parametrize("dtype, n, rows", [(np.dtype(np.float32), 128, 70000), (BFLOAT16, 128, 60000),
                                            (np.dtype(np.float16), 1024, 14000)], ids=str)
def test_row_kernels_streaming(threads, dtype, n, rows):
    rng = np.random.default_rng(14)
    g, y = inputs(rng, (rows, n), dtype)
    out = ac.empty_aligned((rows, n), dtype)
    threads(2)
    ac.softmax_backward(g, y, -1, out=out)
    picked = [0, 1, 777, rows // 2, rows - 1]
    check(g[picked], y[picked], -1, out[picked])
    assert ac.softmax_backward(g[picked], y[picked], -1).tobytes() == out[picked].tobytes()
    threads(1)
    assert ac.softmax_backward(g, y, -1).tobytes() == out.tobytes()


@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0), (2, 0, 4), (0, 0)], ids=str)
def test_empty(shape):
    g, y = inputs(np.random.default_rng(0), shape, np.float32)
    for dim in range(-len(shape), len(shape)):
        out = ac.softmax_backward(g, y, dim)
        assert out.shape == shape and out.dtype == np.float32


# --------------------------------------------------------------------------------------------
# Layouts: strided, transposed and negative-stride inputs; results written through out= views.

@pytest.mark.parametrize("layout_g,layout_y", list(itertools.product(LAYOUTS, LAYOUTS)))
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_strided_inputs(isa, layout_g, layout_y, dim):
    rng = np.random.default_rng(3)
    g, y = inputs(rng, (6, 37, 9), np.float32)
    gv, yv = strided_view(rng, g, layout_g), strided_view(rng, y, layout_y)
    check(g, y, dim, ac.softmax_backward(gv, yv, dim))


# A row whose elements are not adjacent (a sliced view, a broadcast input) or whose rows are
# not adjacent runs the strided path, which sums it in the order of a contiguous row of its
# length: bit for bit the contiguous result, for every row kernel's length (flat, register,
# head, buffered, plain, chunked).
STRIDED_ROW_LENGTHS = [1, 5, 17, 20, 22, 31, 32, 33, 100, 129, 300, 2049, 16384, 16385, 40000]


@pytest.mark.parametrize("n", STRIDED_ROW_LENGTHS)
@pytest.mark.parametrize("dtype,out_dtype", [(np.float32, np.float32), (np.float16, np.float16),
                                             (BFLOAT16, BFLOAT16), (np.float16, np.float32),
                                             (BFLOAT16, np.float64)], ids=str)
def test_strided_rows_match_contiguous_rows(isa, n, dtype, out_dtype):
    rng = np.random.default_rng(n)
    rows = 3
    g, y = inputs(rng, (rows, n), dtype)
    expected = ac.softmax_backward(g, y, -1, out=np.empty((rows, n), out_dtype))
    sliced = lambda a: np.repeat(a, 2, axis=1)[:, ::2]           # element stride 2
    gapped = lambda a: np.concatenate([a, a[:, :3]], axis=1)[:, :n]  # unit stride, rows apart
    for name, gv, yv in (("sliced", sliced(g), sliced(y)), ("gapped rows", gapped(g), gapped(y)),
                         ("broadcast", np.broadcast_to(g[:1], g.shape), np.broadcast_to(y[:1], y.shape))):
        want = expected if name != "broadcast" else np.broadcast_to(expected[:1], expected.shape)
        got = ac.softmax_backward(gv, yv, -1, out=np.empty((rows, n), out_dtype))
        assert got.tobytes() == np.ascontiguousarray(want).tobytes(), f"{name}: not the contiguous row's bits"
    check(g, y, -1, expected)


# All three tensors in one permuted dense layout (transposed, channels-last): the kernel takes
# their dims in memory order and runs the contiguous paths.
PERMUTED = [((50, 70), (1, 0), -1), ((50, 70), (1, 0), 0), ((2, 40, 5, 6), (0, 2, 3, 1), 1),
            ((2, 40, 5, 6), (0, 2, 3, 1), -1), ((4, 3000, 5), (2, 0, 1), 1), ((3, 4, 20000), (2, 0, 1), 2)]


@pytest.mark.parametrize("shape,order,dim", PERMUTED, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_permuted_layouts(isa, shape, order, dim, dtype):
    rng = np.random.default_rng(len(shape) + dim)
    g, y = inputs(rng, shape, dtype)
    out = in_memory_order(np.full(shape, np.nan, dtype), order)
    result = ac.softmax_backward(in_memory_order(g, order), in_memory_order(y, order), dim, out=out)
    assert result is out
    check(g, y, dim, out)


@pytest.mark.parametrize("shape,order,dim", PERMUTED[2:], ids=str)
def test_permuted_layouts_bitwise_across_thread_counts(threads, shape, order, dim):
    rng = np.random.default_rng(11)
    g, y = (in_memory_order(a, order) for a in inputs(rng, shape, np.float32))
    results = []
    for count in (1, 2, 3):
        threads(count)
        out = in_memory_order(np.empty(shape, np.float32), order)
        results.append(ac.softmax_backward(g, y, dim, out=out).tobytes())
    assert results[0] == results[1] == results[2]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_out_views(layout, dtype):
    rng = np.random.default_rng(4)
    g, y = inputs(rng, (5, 40, 3), dtype)
    for dim in (1, 2):
        out = strided_view(rng, np.full(g.shape, np.nan, dtype), layout)
        result = ac.softmax_backward(g, y, dim, out=out)
        assert result is out
        check(g, y, dim, out)


def test_out_view_inside_a_larger_buffer_leaves_the_rest_alone():
    rng = np.random.default_rng(5)
    g, y = inputs(rng, (8, 10), np.float32)
    buffer = np.full((10, 24), 7.0, np.float32)
    out = buffer[1:9, 2:22:2]
    ac.softmax_backward(g, y, -1, out=out)
    check(g, y, -1, out)
    mask = np.ones(buffer.shape, bool)
    mask[1:9, 2:22:2] = False
    assert (buffer[mask] == 7.0).all()


def test_broadcast_and_transposed_views():
    rng = np.random.default_rng(6)
    g, y = inputs(rng, (1, 50), np.float32)
    gb = np.broadcast_to(g, (40, 50))  # zero strides
    yt = np.ascontiguousarray(np.broadcast_to(y, (40, 50)).T).T
    for dim in (0, 1):
        check(gb, yt, dim, ac.softmax_backward(gb, yt, dim))


# --------------------------------------------------------------------------------------------
# out in another dtype: computed in fp32, cast on write (float64 gets the fp32 result widened).

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("out_dtype", OUT_DTYPES, ids=str)
def test_out_dtype(isa, dtype, out_dtype):
    rng = np.random.default_rng(7)
    g, y = inputs(rng, (6, 37, 9), dtype)
    for dim in (1, -1):
        out = ac.softmax_backward(g, y, dim, out_dtype=out_dtype)
        assert out.dtype == out_dtype
        check(g, y, dim, out)
        out2 = np.zeros(g.shape, out_dtype)
        ws, ex = ac.aclnnSoftmaxBackwardGetWorkspaceSize(g, y, dim, out2)
        ac.aclnnSoftmaxBackward(np.empty(ws, np.uint8) if ws else None, ws, ex)
        assert out2.tobytes() == out.tobytes()


def test_float64_out_is_the_fp32_result_widened():
    rng = np.random.default_rng(8)
    g, y = inputs(rng, (9, 123), np.float32)
    out64 = ac.softmax_backward(g, y, 1, out_dtype=np.float64)
    out32 = ac.softmax_backward(g, y, 1)
    np.testing.assert_array_equal(out64, out32.astype(np.float64))


# --------------------------------------------------------------------------------------------
# PyTorch as an independent oracle, in float64 on the same rounded inputs.

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", [((4, 2), 0), ((6, 37, 9), 1), ((3, 40000), -1), ((1000, 3), 1),
                                       ((2, 3, 4, 5), -3)], ids=str)
def test_matches_torch(torch, isa, dtype, shape, dim):
    rng = np.random.default_rng(9)
    g, y = inputs(rng, shape, dtype)
    out = ac.softmax_backward(g, y, dim)
    tg, ty = to_torch(g).double(), to_torch(y).double()
    expected = torch.ops.aten._softmax_backward_data(tg, ty, dim, torch.float64).numpy()
    _, err = reference(g, y, dim % len(shape))
    assert_within(out, expected, bound(expected, err, dtype), "softmax vs torch")


def test_torch_tensors_in_and_out(torch):
    g = torch.randn(5, 33, dtype=torch.bfloat16)
    y = torch.rand(5, 33, dtype=torch.bfloat16)
    out = torch.empty(5, 33, dtype=torch.float32)
    ac.softmax_backward(g, y, 1, out=out)
    expected = torch.ops.aten._softmax_backward_data(g.double(), y.double(), 1, torch.float64)
    ref, err = reference(g, y, 1)
    assert_within(out, expected.numpy(), bound(ref, err, np.float32), "torch in/out")


# --------------------------------------------------------------------------------------------
# Determinism: bitwise identical for 1 and 2 threads on every path.

@pytest.mark.parametrize("shape,dim,layout", [((1000, 3), -1, "contiguous"), ((64, 300), -1, "contiguous"),
                                              ((3, 70000), -1, "contiguous"), ((8, 300, 40), 1, "contiguous"),
                                              ((2, 5, 20000), 1, "contiguous"), ((50, 60, 7), 1, "transposed"),
                                              ((200, 300), -1, "sliced")], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bitwise_identical_across_thread_counts(isa, threads, shape, dim, layout, dtype):
    rng = np.random.default_rng(10)
    g, y = inputs(rng, shape, dtype)
    g, y = strided_view(rng, g, layout), strided_view(rng, y, layout)
    results = []
    for count in (1, 2, 3):
        threads(count)
        results.append(ac.softmax_backward(g, y, dim).tobytes())
    assert results[0] == results[1] == results[2]


# --------------------------------------------------------------------------------------------
# Documented errors (161001 null pointers; 161002 dim, dtypes, shapes) through both APIs, with
# the output untouched.

def call_both(g, y, dim, out):
    """Runs the failing call through the functional and the two-phase API; returns the errors."""
    errors = []
    for api in ("functional", "two_phase"):
        with pytest.raises(ac.AclnnError) as info:
            if api == "functional":
                ac.softmax_backward(g, y, dim, out=out)
            else:
                ac.aclnnSoftmaxBackwardGetWorkspaceSize(g, y, dim, out)
        errors.append(info.value)
    return errors


GOOD = np.random.default_rng(11).standard_normal((4, 5)).astype(np.float32)


@pytest.mark.parametrize("case,status", [
    ("null gradOutput", 161001), ("null output", 161001), ("null out", 161001),
    ("dim too large", 161002), ("dim too small", 161002), ("gradOutput float64", 161002),
    ("gradOutput int32", 161002), ("output dtype differs", 161002), ("output shape differs", 161002),
    ("out shape differs", 161002), ("out int32", 161002), ("nine dims", 161002),
    ("dim 1 of a 0-d tensor", 161002),
])
def test_documented_errors(case, status):
    g, y = GOOD.copy(), GOOD.copy()
    out = np.full((4, 5), 5.0, np.float32)
    dim = 1
    if case == "null gradOutput":
        g = None
    elif case == "null output":
        y = None
    elif case == "null out":
        with pytest.raises(ac.ParamNullptrError) as info:
            ac.aclnnSoftmaxBackwardGetWorkspaceSize(g, y, dim, None)
        assert info.value.status == status and "aclnnSoftmaxBackward" in str(info.value)
        return
    elif case == "dim too large":
        dim = 2
    elif case == "dim too small":
        dim = -3
    elif case == "gradOutput float64":
        g, y = g.astype(np.float64), y.astype(np.float64)
    elif case == "gradOutput int32":
        g, y = g.astype(np.int32), y.astype(np.int32)
    elif case == "output dtype differs":
        y = y.astype(np.float16)
    elif case == "output shape differs":
        y = np.zeros((5, 4), np.float32)
    elif case == "out shape differs":
        out = np.full((4, 6), 5.0, np.float32)
    elif case == "out int32":
        out = np.full((4, 5), 5, np.int32)
    elif case == "nine dims":
        g = y = np.zeros((1,) * 9, np.float32)
        out = np.full((1,) * 9, 5.0, np.float32)
    elif case == "dim 1 of a 0-d tensor":
        g = y = np.float32(1.0).reshape(())
        out = np.full((), 5.0, np.float32)
    before = out.copy()
    for error in call_both(g, y, dim, out):
        assert error.status == status, str(error)
        assert "aclnnSoftmaxBackward: " in str(error), str(error)
        assert isinstance(error, ac.ParamNullptrError if status == 161001 else ac.ParamInvalidError)
    np.testing.assert_array_equal(out, before)


def test_bfloat16_only_on_atlas_a2(product):
    g = GOOD.astype(BFLOAT16)
    product("atlas_training")
    out = np.full((4, 5), 5.0, np.float32)
    for error in call_both(g, g, 1, out):
        assert error.status == 161002
    np.testing.assert_array_equal(out, 5.0)
    product("atlas_a2")
    check(g, g, 1, ac.softmax_backward(g, g, 1, out=out))


def test_dim_error_message_names_the_range():
    with pytest.raises(ac.ParamInvalidError) as info:
        ac.softmax_backward(GOOD, GOOD, 2)
    assert "dim 2" in str(info.value)


def test_special_values_propagate():
    g = np.array([[1.0, np.nan, 2.0], [np.inf, 1.0, 0.0], [1.0, 2.0, 3.0]], np.float32)
    y = np.array([[0.2, 0.3, 0.5], [0.1, 0.0, 0.9], [0.0, 0.0, 1.0]], np.float32)
    out = ac.softmax_backward(g, y, 1)
    with np.errstate(invalid="ignore"):
        ref = reference(g, y, 1)[0]
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    finite = np.isfinite(ref)
    np.testing.assert_allclose(out[finite], ref[finite], rtol=1e-6)
    assert np_dtype("float32") == out.dtype


def test_large_output_streaming_path(threads):
    # > 2x a 32 MiB last-level cache: outputs go out with streaming stores (same values).
    rng = np.random.default_rng(12)
    g = rng.standard_normal((2600, 4100), dtype=np.float32)
    y = rng.random((2600, 4100), dtype=np.float32)
    threads(2)
    out = ac.softmax_backward(g, y, -1)
    rows = [0, 1, 1299, 2599]
    ref, err = reference(g[rows], y[rows], 1)
    assert_within(out[rows], ref, bound(ref, err, np.float32), "large softmax rows")
    threads(1)
    assert ac.softmax_backward(g, y, -1).tobytes() == out.tobytes()
    cols = ac.softmax_backward(g[:1300], y[:1300], 0)
    ref, err = reference(g[:1300, :3], y[:1300, :3], 0)
    assert_within(cols[:, :3], ref, bound(ref, err, np.float32), "large softmax columns")
