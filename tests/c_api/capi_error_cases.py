"""Cases that phase 1 must reject, each with its status and the words its message must contain:
the checks every op shares, derived from the registry (capi_registry.py: null pointers,
unsupported and mixed dtypes, too many dims, unusable layouts, read-only, self-overlapping and
overlapping outputs), and here the shipped ops' own shape and attribute rules. Every case starts
from a valid call of the op and breaks one thing."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import numpy as np

import capi_registry
from capi_cases import NULL, Bool, Case, Int, Mask, T

NULLPTR, INVALID = 161001, 161002
OP_NAMES = {"SoftmaxBackward": "aclnnSoftmaxBackward", "PreluBackward": "aclnnPreluBackward",
            "GroupNormBackward": "aclnnGroupNormBackward",
            "GridSampler2DBackward": "aclnnGridSampler2DBackward"}


def _in(shape, dtype="float32"):
    """An input tensor of small values of the given dtype."""
    values = (np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) % 7 - 3) / 4
    if dtype in ("int32", "int64"):
        return T(values.astype(dtype))
    from support import np_dtype
    return T(values.astype(np_dtype(dtype)), dtype=dtype)


def _out(shape, dtype="float32", **kw):
    return T(shape=tuple(shape), dtype=dtype, **kw)


# ---- valid calls, one per op ---------------------------------------------------------------------

def softmax_base():
    return [("gradOutput", _in((2, 3))), ("output", _in((2, 3))), ("dim", Int(1)),
            ("out", _out((2, 3)))]


def prelu_base():
    return [("gradOutput", _in((2, 3, 4))), ("self", _in((2, 3, 4))), ("weight", _in((3,))),
            ("gradInput", _out((2, 3, 4))), ("gradWeight", _out((3,)))]


def group_norm_base():
    return [("gradOut", _in((2, 4, 3))), ("input", _in((2, 4, 3))), ("mean", _in((2, 2))),
            ("rstd", _in((2, 2))), ("gamma", _in((4,))), ("N", Int(2)), ("C", Int(4)),
            ("HxW", Int(3)), ("group", Int(2)), ("outputMask", Mask((True, True, True))),
            ("gradInput", _out((2, 4, 3))), ("gradGammaOut", _out((4,))),
            ("gradBetaOut", _out((4,)))]


def grid_base():
    return [("gradOutput", _in((1, 2, 2, 3))), ("input", _in((1, 2, 4, 5))),
            ("grid", _in((1, 2, 3, 2))), ("interpolationMode", Int(0)), ("paddingMode", Int(0)),
            ("alignCorners", Bool(False)), ("outputMask", Mask((True, True))),
            ("inputGrad", _out((1, 2, 4, 5))), ("gridGrad", _out((1, 2, 3, 2)))]


BASES: Dict[str, Callable[[], list]] = {"SoftmaxBackward": softmax_base, "PreluBackward": prelu_base,
                                        "GroupNormBackward": group_norm_base,
                                        "GridSampler2DBackward": grid_base}
def _variant(op, name, status, fragments, changes: Optional[dict] = None, null_out=None) -> Case:
    params = BASES[op]()
    changes = changes or {}
    params = [(p, changes.get(p, spec)) for p, spec in params]
    return Case(f"err_{name}", op, params, status=status, null_out=null_out,
                fragments=(OP_NAMES[op],) + tuple(fragments))


def _specific() -> List[Case]:
    S, P, G, R = "SoftmaxBackward", "PreluBackward", "GroupNormBackward", "GridSampler2DBackward"
    v = _variant
    return [
        # softmax: dim within [-n, n), shapes equal
        v(S, "softmax_dim_2", INVALID, ["dim"], {"dim": Int(2)}),
        v(S, "softmax_dim_minus_3", INVALID, ["dim"], {"dim": Int(-3)}),
        v(S, "softmax_output_shape", INVALID, ["output"], {"output": _in((3, 2))}),
        v(S, "softmax_out_shape", INVALID, ["out"], {"out": _out((2, 4))}),
        # prelu: weight count, broadcast of gradOutput, output shapes
        v(P, "prelu_weight_count", INVALID, ["weight"], {"weight": _in((2,))}),
        v(P, "prelu_grad_output_not_broadcastable", INVALID, ["gradOutput"],
          {"gradOutput": _in((2, 2, 4))}),
        v(P, "prelu_grad_output_larger", INVALID, ["gradOutput"], {"gradOutput": _in((3, 2, 3, 4))}),
        v(P, "prelu_grad_input_shape", INVALID, ["gradInput"], {"gradInput": _out((2, 3, 5))}),
        v(P, "prelu_grad_weight_2d", INVALID, ["gradWeight"], {"gradWeight": _out((3, 1))}),
        v(P, "prelu_grad_weight_count", INVALID, ["gradWeight"], {"gradWeight": _out((4,))}),
        v(P, "prelu_scalar_weight_grad_shape", INVALID, ["gradWeight"],
          {"weight": _in((1, 1)), "gradWeight": _out((1,))}),
        # group norm: masks, group, counts, shapes
        v(G, "group_norm_group_0", INVALID, ["group"], {"group": Int(0)}),
        v(G, "group_norm_group_negative", INVALID, ["group"], {"group": Int(-2)}),
        v(G, "group_norm_c_not_divisible", INVALID, ["group"], {"group": Int(3)}),
        v(G, "group_norm_n_negative", INVALID, ["N"], {"N": Int(-2)}),
        v(G, "group_norm_input_count", INVALID, ["input"], {"N": Int(3)}),
        v(G, "group_norm_mean_count", INVALID, ["mean"], {"mean": _in((2, 3))}),
        v(G, "group_norm_rstd_count", INVALID, ["rstd"], {"rstd": _in((3,))}),
        v(G, "group_norm_gamma_count", INVALID, ["gamma"],
          {"gamma": _in((5,)), "gradGammaOut": _out((5,)), "gradBetaOut": _out((5,))}),
        v(G, "group_norm_grad_input_shape", INVALID, ["gradInput"], {"gradInput": _out((2, 12))}),
        v(G, "group_norm_grad_gamma_shape", INVALID, ["gradGammaOut"], {"gradGammaOut": _out((5,))}),
        v(G, "group_norm_grad_beta_shape", INVALID, ["gradBetaOut"], {"gradBetaOut": _out((4, 1))}),
        v(G, "group_norm_grad_out_int32", INVALID, ["gradOut"], {"gradOut": _in((2, 4, 3), "int32")}),
        v(G, "group_norm_masked_off_null_outputs_beta_shape", INVALID, ["gradBetaOut"],
          {"outputMask": Mask((False, False, True)), "gradInput": NULL, "gradGammaOut": NULL,
           "gradBetaOut": _out((3,))}),
        # grid sampler: ranks, modes, dims that must agree, output shapes, masks
        v(R, "grid_grad_output_rank", INVALID, ["gradOutput"], {"gradOutput": _in((2, 2, 3))}),
        v(R, "grid_input_rank", INVALID, ["input"], {"input": _in((1, 1, 2, 4, 5))}),
        v(R, "grid_grid_rank", INVALID, ["grid"], {"grid": _in((2, 3, 2))}),
        v(R, "grid_interpolation_3", INVALID, ["interpolationMode"], {"interpolationMode": Int(3)}),
        v(R, "grid_interpolation_negative", INVALID, ["interpolationMode"],
          {"interpolationMode": Int(-1)}),
        v(R, "grid_padding_3", INVALID, ["paddingMode"], {"paddingMode": Int(3)}),
        v(R, "grid_batch_mismatch", INVALID, ["grid"], {"grid": _in((2, 2, 3, 2))}),
        v(R, "grid_channel_mismatch", INVALID, ["gradOutput"], {"gradOutput": _in((1, 3, 2, 3))}),
        v(R, "grid_height_mismatch", INVALID, ["grid"], {"grid": _in((1, 3, 3, 2))}),
        v(R, "grid_width_mismatch", INVALID, ["grid"], {"grid": _in((1, 2, 4, 2))}),
        v(R, "grid_input_height_0", INVALID, ["input"],
          {"input": _in((1, 2, 0, 5)), "inputGrad": _out((1, 2, 0, 5))}),
        v(R, "grid_last_dim_3", INVALID, ["grid"],
          {"grid": _in((1, 2, 3, 3)), "gridGrad": _out((1, 2, 3, 3))}),
        v(R, "grid_input_grad_shape", INVALID, ["inputGrad"], {"inputGrad": _out((1, 2, 5, 4))}),
        v(R, "grid_grid_grad_shape", INVALID, ["gridGrad"], {"gridGrad": _out((1, 3, 2, 2))}),
    ]


def all_error_cases() -> List[Case]:
    """The checks every registry op shares (capi_registry), then the shipped ops' own rules."""
    return capi_registry.all_common_error_cases() + _specific()


def all_valid_bases() -> List[Case]:
    """The unmodified calls: they must succeed (proof that each error case breaks one thing)."""
    return capi_registry.all_bases() + [Case(f"base_specific_{op}", op, BASES[op]()) for op in BASES]
