"""Cases that must succeed, with their float64 references: the shipped ops' cases against the
formulas of capi_reference.py (every dtype, contiguous and strided/offset/negative/zero-stride
layouts, masks, repeatable executors, empty tensors), and every registry op's benchmark smoke
cases against its PyTorch peer in float64 (capi_registry.py)."""
from __future__ import annotations

from typing import List

import numpy as np

import capi_reference as ref
import capi_registry
from capi_cases import NULL, Bool, Case, Int, Mask, T
from support import np_dtype

DTYPES = ["float32", "float16", "bfloat16"]


def _rand(rng, shape, dtype, low=-2.0, high=2.0):
    """Values representable in dtype (so the float64 reference sees the kernel's inputs)."""
    return rng.uniform(low, high, size=shape).astype(np_dtype(dtype))


def _f64(a):
    return np.asarray(a).astype(np.float64)


# ---- softmax backward ----------------------------------------------------------------------------

def softmax_case(rng, name, shape, dim, dtype, layouts=("contiguous",) * 3, out_dtype=None, runs=1):
    logits = rng.uniform(-3, 3, size=shape)
    axis = dim % max(len(shape), 1)
    if len(shape):
        e = np.exp(logits - logits.max(axis=axis, keepdims=True))
        y = (e / e.sum(axis=axis, keepdims=True)).astype(np_dtype(dtype))
    else:
        y = np.asarray(1.0).astype(np_dtype(dtype))
    g = _rand(rng, shape, dtype)
    out_dtype = out_dtype or dtype
    expected = ref.softmax_backward(_f64(g), _f64(y), axis if len(shape) else 0)
    return Case(name, "SoftmaxBackward", [
        ("gradOutput", T(g, layout=layouts[0])), ("output", T(y, layout=layouts[1])),
        ("dim", Int(dim)), ("out", T(shape=shape, dtype=out_dtype, layout=layouts[2]))],
        runs=runs, reference=expected)


def softmax_cases(rng) -> List[Case]:
    cases = []
    for dtype in DTYPES:
        cases.append(softmax_case(rng, f"softmax_{dtype}_contiguous", (3, 5, 7), -1, dtype))
        cases.append(softmax_case(rng, f"softmax_{dtype}_strided", (4, 6, 5), 1, dtype,
                                  ("strided", "negative", "strided")))
        cases.append(softmax_case(rng, f"softmax_{dtype}_dim0_negative", (9, 4), 0, dtype,
                                  ("negative", "strided", "negative")))
    cases.append(softmax_case(rng, "softmax_float16_to_float64", (5, 6), -2, "float16",
                              out_dtype="float64"))
    cases.append(softmax_case(rng, "softmax_bfloat16_to_float32", (3, 33), 1, "bfloat16",
                              ("strided", "contiguous", "strided"), out_dtype="float32"))
    cases.append(softmax_case(rng, "softmax_scalar", (), 0, "float32"))
    cases.append(softmax_case(rng, "softmax_empty", (0, 4), 1, "float32"))
    cases.append(softmax_case(rng, "softmax_repeatable", (6, 10), 1, "float16",
                              ("strided", "strided", "negative"), runs=4))
    # Explicit strides/offset: a [4, 3] view into a [6, 5] buffer, starting at row 1 column 2.
    g = _rand(rng, (4, 3), "float32")
    y = _rand(rng, (4, 3), "float32", 0.0, 1.0)
    cases.append(Case("softmax_explicit_view", "SoftmaxBackward", [
        ("gradOutput", T(g, strides=[5, 1], offset=7)), ("output", T(y, strides=[1, 4], offset=2)),
        ("dim", Int(1)), ("out", T(shape=(4, 3), dtype="float32", strides=[-5, -1], offset=17))],
        reference=ref.softmax_backward(_f64(g), _f64(y), 1)))
    return cases


# ---- prelu backward ------------------------------------------------------------------------------

def prelu_case(rng, name, shape, weight_shape, dtype, layouts=("contiguous",) * 5,
               grad_shape=None, runs=1, grad_broadcast_axis=None):
    x = _rand(rng, shape, dtype)
    if x.size:
        x.reshape(-1)[:: 5] = 0      # x == 0 takes the "x <= 0" branch
    w = _rand(rng, weight_shape, dtype, 0.05, 0.5)
    g = _rand(rng, grad_shape or shape, dtype)
    if grad_broadcast_axis is not None:  # constant along that axis: passed with stride 0
        g = np.repeat(np.take(g, [0], axis=grad_broadcast_axis), g.shape[grad_broadcast_axis],
                      axis=grad_broadcast_axis)
    expected = ref.prelu_backward(_f64(g), _f64(x), _f64(w))
    gw_shape = tuple(weight_shape) if w.size == 1 else (w.size,)
    if grad_broadcast_axis is None:
        go = T(g, layout=layouts[0])
    else:
        go = T(g, layout="broadcast", axis=grad_broadcast_axis)
    return Case(name, "PreluBackward", [
        ("gradOutput", go), ("self", T(x, layout=layouts[1])), ("weight", T(w, layout=layouts[2])),
        ("gradInput", T(shape=shape, dtype=dtype, layout=layouts[3])),
        ("gradWeight", T(shape=gw_shape, dtype=dtype, layout=layouts[4]))],
        runs=runs, reference=expected)


def prelu_cases(rng) -> List[Case]:
    cases = []
    strided = ("strided", "negative", "negative", "strided", "negative")
    for dtype in DTYPES:
        cases.append(prelu_case(rng, f"prelu_{dtype}_channels", (4, 3, 5), (3,), dtype))
        cases.append(prelu_case(rng, f"prelu_{dtype}_strided", (2, 5, 3, 4), (5,), dtype, strided))
        cases.append(prelu_case(rng, f"prelu_{dtype}_scalar_weight", (6, 4), (1,), dtype))
    cases.append(prelu_case(rng, "prelu_1d", (11,), (1,), "float32"))
    cases.append(prelu_case(rng, "prelu_weight_0d", (3, 4), (), "float32"))
    cases.append(prelu_case(rng, "prelu_grad_broadcast", (4, 3, 5), (3,), "float16",
                            grad_shape=(3, 1)))
    cases.append(prelu_case(rng, "prelu_grad_zero_stride", (4, 3, 5), (3,), "bfloat16",
                            grad_broadcast_axis=0))
    cases.append(prelu_case(rng, "prelu_repeatable", (3, 4, 6), (4,), "float32", strided, runs=3))
    cases.append(prelu_case(rng, "prelu_empty", (0, 3), (3,), "float32"))
    return cases


# ---- group norm backward -------------------------------------------------------------------------

def group_norm_case(rng, name, N, C, HxW, group, dtype, input_shape=None, mask=(True, True, True),
                    with_gamma=True, layouts=("contiguous",) * 8, runs=1, null_masked=True):
    shape = input_shape or (N, C, HxW)
    x = _rand(rng, shape, dtype)
    dy = _rand(rng, shape, dtype)
    xg = _f64(x).reshape(N, group, -1)
    mean = xg.mean(axis=2).reshape(N, group).astype(np_dtype(dtype))
    rstd = (1 / np.sqrt(xg.var(axis=2) + 1e-5)).reshape(N, group).astype(np_dtype(dtype))
    gamma = _rand(rng, (C,), dtype, 0.5, 1.5) if with_gamma else None
    expected = ref.group_norm_backward(_f64(dy), _f64(x), _f64(mean), _f64(rstd),
                                       None if gamma is None else _f64(gamma), N, C, HxW, group)
    outputs = [("gradInput", shape), ("gradGammaOut", (C,)), ("gradBetaOut", (C,))]
    params = [("gradOut", T(dy, layout=layouts[0])), ("input", T(x, layout=layouts[1])),
              ("mean", T(mean, layout=layouts[2])), ("rstd", T(rstd, layout=layouts[3])),
              ("gamma", T(gamma, layout=layouts[4]) if with_gamma else NULL),
              ("N", Int(N)), ("C", Int(C)), ("HxW", Int(HxW)), ("group", Int(group)),
              ("outputMask", Mask(mask))]
    for i, (out_name, out_shape) in enumerate(outputs):
        if mask[i] or not null_masked:
            params.append((out_name, T(shape=out_shape, dtype=dtype, layout=layouts[5 + i])))
        else:
            params.append((out_name, NULL))
    wanted = {out_name for (out_name, _), m in zip(outputs, mask) if m}
    expected = {k: v for k, v in expected.items() if k in wanted}
    return Case(name, "GroupNormBackward", params, runs=runs, reference=expected)


def group_norm_cases(rng) -> List[Case]:
    cases = []
    strided = ("strided", "negative", "strided", "negative", "negative", "strided", "negative",
               "strided")
    for dtype in DTYPES:
        cases.append(group_norm_case(rng, f"group_norm_{dtype}", 2, 6, 5, 3, dtype))
        cases.append(group_norm_case(rng, f"group_norm_{dtype}_strided_4d", 3, 4, 6, 2, dtype,
                                     input_shape=(3, 4, 2, 3), layouts=strided))
    cases.append(group_norm_case(rng, "group_norm_no_gamma", 2, 4, 7, 4, "float32", with_gamma=False))
    cases.append(group_norm_case(rng, "group_norm_mask_input_only", 2, 6, 4, 2, "float32",
                                 mask=(True, False, False)))
    cases.append(group_norm_case(rng, "group_norm_mask_gamma_beta", 2, 6, 4, 2, "float16",
                                 mask=(False, True, True)))
    # A masked-off output that is given anyway must not be touched.
    cases.append(group_norm_case(rng, "group_norm_masked_present", 2, 6, 4, 3, "float32",
                                 mask=(True, False, True), null_masked=False))
    cases.append(group_norm_case(rng, "group_norm_flat_input", 2, 3, 4, 1, "float32",
                                 input_shape=(24,)))
    cases.append(group_norm_case(rng, "group_norm_repeatable", 2, 8, 9, 4, "bfloat16",
                                 layouts=strided, runs=3))
    return cases


# ---- grid sampler 2-D backward -------------------------------------------------------------------

def grid_case(rng, name, N, C, H, W, Ho, Wo, mode, padding, align, dtype,
              layouts=("contiguous",) * 5, mask=(True, True), runs=1):
    go = _rand(rng, (N, C, Ho, Wo), dtype)
    inp = _rand(rng, (N, C, H, W), dtype)
    grid = _rand(rng, (N, Ho, Wo, 2), dtype, -1.2, 1.2)   # some points outside: padding matters
    expected = ref.grid_sampler2d_backward(_f64(go), _f64(inp), _f64(grid), mode, padding, align)
    params = [("gradOutput", T(go, layout=layouts[0])), ("input", T(inp, layout=layouts[1])),
              ("grid", T(grid, layout=layouts[2])), ("interpolationMode", Int(mode)),
              ("paddingMode", Int(padding)), ("alignCorners", Bool(align)),
              ("outputMask", Mask(mask))]
    params.append(("inputGrad", T(shape=inp.shape, dtype=dtype, layout=layouts[3]) if mask[0] else NULL))
    params.append(("gridGrad", T(shape=grid.shape, dtype=dtype, layout=layouts[4]) if mask[1] else NULL))
    expected = {k: v for k, v, m in zip(("inputGrad", "gridGrad"),
                                        (expected["inputGrad"], expected["gridGrad"]), mask) if m}
    return Case(name, "GridSampler2DBackward", params, runs=runs, reference=expected)


def grid_cases(rng) -> List[Case]:
    cases = []
    for mode in (0, 1, 2):
        for padding in (0, 1, 2):
            for align in (False, True):
                cases.append(grid_case(rng, f"grid_m{mode}_p{padding}_a{int(align)}", 2, 3, 4, 5,
                                       3, 4, mode, padding, align, "float32"))
    strided = ("strided", "negative", "strided", "negative", "strided")
    for dtype in ("float16", "bfloat16"):
        for mode in (0, 1, 2):
            cases.append(grid_case(rng, f"grid_{dtype}_m{mode}", 1, 4, 5, 6, 3, 3, mode, 2, False,
                                   dtype, layouts=strided))
    cases.append(grid_case(rng, "grid_strided_float32", 2, 2, 3, 6, 4, 2, 0, 1, True, "float32",
                           layouts=strided))
    cases.append(grid_case(rng, "grid_mask_input_only", 1, 2, 4, 4, 2, 3, 0, 0, False, "float32",
                           mask=(True, False)))
    cases.append(grid_case(rng, "grid_mask_grid_only", 1, 2, 4, 4, 2, 3, 2, 2, True, "float32",
                           mask=(False, True)))
    cases.append(grid_case(rng, "grid_repeatable", 1, 3, 5, 5, 4, 4, 0, 0, False, "float16",
                           runs=3))
    cases.append(grid_case(rng, "grid_empty_output", 1, 2, 3, 3, 0, 4, 0, 0, False, "float32"))
    return cases


def all_value_cases() -> List[Case]:
    """The shipped ops' cases against their formula references, then every registry op's
    smoke cases against its PyTorch peer (capi_registry)."""
    rng = np.random.default_rng(20240611)
    formula = softmax_cases(rng) + prelu_cases(rng) + group_norm_cases(rng) + grid_cases(rng)
    return formula + capi_registry.all_value_cases()
