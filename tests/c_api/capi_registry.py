"""C API cases of every op, derived from the registry (aclnn_cpu/_registry.py), so that an op
added by its YAML gets them with no edit here:

- a valid call: the YAML's example, or else the op's smallest benchmark case (bench_cases);
- the rejections every op shares, each breaking one thing of that call (null pointers, dtypes
  outside the op's sets, mixed dtypes, too many dims, unusable and overlapping outputs, null
  handles, bool arrays of the wrong size);
- values: the op's smoke benchmark cases at every dtype its first input takes on the default
  product, contiguous and strided, against its PyTorch peer evaluated in float64.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

import numpy as np

from aclnn_cpu._registry import OPS as REGISTRY
from aclnn_cpu.bench_cases import Call, dtype_name, generate, peer_callable, peer_outputs, smallest_call
from capi_cases import (DTYPE_CODES, NULL, Bool, Case, Double, Int, IntArray, Mask, Scalar, T)
from support import np_dtype

NULLPTR, INVALID = 161001, 161002
PRODUCT = "atlas_a2"  # the runner's default product line
# Dtypes tried, in order, where a case needs one a tensor does not take / does take.
REJECT_CANDIDATES = ("float64", "int32", "uint64", "complex64")
TAKE_CANDIDATES = ("float16", "float32", "bfloat16", "float64", "int32")


def ops_with(key: Optional[str] = None) -> List[dict]:
    return [op for op in REGISTRY if PRODUCT in op["products"] and (key is None or op.get(key))]


def call_params(call: Call, outs: Sequence[Optional[np.ndarray]], layout: str = "contiguous",
                out_layout: str = "contiguous") -> list:
    """The C parameters of a call, in order, as capi_cases specs."""
    pending = list(outs)
    params = []
    for p in call.op["params"]:
        kind, name = p["kind"], p["name"]
        if kind == "input":
            value = call.inputs[p["py_name"]]
            spec = NULL if value is None else T(np.asarray(value), layout=layout if value.ndim else "contiguous")
        elif kind == "output":
            out = pending.pop(0)
            spec = NULL if out is None else T(shape=out.shape, dtype=dtype_name(out.dtype),
                                                layout=out_layout if out.ndim else "contiguous")
        else:
            value = call.attributes[p["py_name"]]
            spec = NULL if value is None else {
                "int64": lambda: Int(int(value)), "bool": lambda: Bool(bool(value)),
                "double": lambda: Double(float(value)), "scalar": lambda: Scalar(value),
                "int_array": lambda: IntArray(tuple(value)), "bool_array": lambda: Mask(tuple(value)),
            }[kind]()
        params.append((name, spec))
    return params


# ---- the valid call and the rejections every op shares ------------------------------------------

def base_params(op: dict) -> list:
    call = smallest_call(op)
    return call_params(call, call.allocate())


def _variant(op, name, status, fragments, changes=None, null_out=None) -> Case:
    changes = changes or {}
    params = [(p, changes.get(p, spec)) for p, spec in base_params(op)]
    return Case(f"err_{name}", op["op"], params, status=status, null_out=null_out,
                fragments=(op["name"],) + tuple(fragments))


def _allowed(op: dict, name: str) -> List[str]:
    param = next(p for p in op["params"] if p["name"] == name)
    return list(param.get("dtypes", {}).get(PRODUCT, ()))


def _retyped(spec: T, dtype: str) -> T:
    if spec.values is not None:
        values = (np.arange(spec.values.size).reshape(spec.shape) % 3).astype(np_dtype(dtype))
        return T(values, dtype=dtype)
    return T(shape=spec.shape, dtype=dtype)


def _same_dtype_group(op: dict, first: str) -> set:
    """Tensors that unconditional same_dtype rules tie to `first` (transitively)."""
    group, changed = {first}, True
    rules = [set(r["params"]) for r in op["rules"] if r["kind"] == "same_dtype" and r["when"] is None]
    while changed:
        changed = False
        for rule in rules:
            if rule & group and not rule <= group:
                group |= rule
                changed = True
    return group


def common_error_cases(op: dict) -> List[Case]:
    """The checks every op shares, generated from its valid call."""
    key = op["op"]
    v = lambda *a, **k: _variant(op, *a, **k)  # noqa: E731
    cases = [v(f"{key}_null_workspace_size", NULLPTR, ["workspaceSize"], null_out="workspaceSize"),
             v(f"{key}_null_executor", NULLPTR, ["executor"], null_out="executor")]
    base = base_params(op)
    by_name = {p["name"]: p for p in op["params"]}
    tensors = [(p, s) for p, s in base if isinstance(s, T)]
    for p, spec in tensors:
        if not by_name[p]["optional"]:
            cases.append(v(f"{key}_null_{p}", NULLPTR, [p], {p: NULL}))
        bad = next(d for d in REJECT_CANDIDATES if d not in _allowed(op, p))
        cases.append(v(f"{key}_{p}_{bad}", INVALID, [p], {p: _retyped(spec, bad)}))
    # One tensor of another dtype than the rest, where a rule ties their dtypes.
    first, first_spec = tensors[0]
    tied = _same_dtype_group(op, first)
    for p, spec in tensors[1:]:
        other = [d for d in TAKE_CANDIDATES if d in _allowed(op, p) and d != spec.dtype]
        if p in tied and other:
            cases.append(v(f"{key}_{p}_mixed_dtype", INVALID, [p], {p: _retyped(spec, other[0])}))
    # 9 dims where no rule fixes the first tensor's rank.
    if not any(r["kind"] == "rank" and first in r["params"] for r in op["rules"]):
        nine = np.zeros((1,) * 8 + (2,), np_dtype(first_spec.dtype))
        cases.append(v(f"{key}_{first}_nine_dims", INVALID, [first], {first: T(nine, dtype=first_spec.dtype)}))
    inputs = [(p, s) for p, s in tensors if s.values is not None]
    for out, spec in tensors:
        if spec.values is not None:
            continue
        ro = T(shape=spec.shape, dtype=spec.dtype, readonly=True)
        cases.append(v(f"{key}_{out}_read_only", INVALID, [out, "read-only"], {out: ro}))
        # A zero stride on a dim of size > 1 writes one location twice.
        if len(spec.shape) and max(spec.shape) > 1:
            strides = [1] * len(spec.shape)
            strides[int(np.argmax(spec.shape))] = 0
            cases.append(v(f"{key}_{out}_self_overlap", INVALID, [out],
                           {out: T(shape=spec.shape, dtype=spec.dtype, strides=strides, offset=0)}))
        # Sharing the storage of the largest input (large enough to hold the output).
        biggest = max(inputs, key=lambda t: t[1].values.size * np_dtype(t[1].dtype).itemsize)
        need = int(np.prod(spec.shape)) * np_dtype(spec.dtype).itemsize
        if biggest[1].values.size * np_dtype(biggest[1].dtype).itemsize >= need:
            shared = T(shape=spec.shape, dtype=spec.dtype, share=biggest[0])
            cases.append(v(f"{key}_{out}_overlaps_input", INVALID, [out, "overlaps"], {out: shared}))
    # A layout whose byte extent leaves int64 (nothing may be dereferenced to find out).
    huge = [2 ** 62 if size > 1 else 1 for size in first_spec.shape]
    if len(first_spec.shape) and max(first_spec.shape) > 1:
        cases.append(v(f"{key}_{first}_extent_overflow", INVALID, [first],
                       {first: T(first_spec.values, strides=huge, offset=0, unplaced=True)}))
    for name, spec in base:
        if isinstance(spec, (Scalar, IntArray)) and not by_name[name]["optional"]:
            cases.append(v(f"{key}_null_{name}", NULLPTR, [name], {name: NULL}))
        if isinstance(spec, Mask):
            cases.append(v(f"{key}_null_{name}", NULLPTR, [name], {name: NULL}))
            cases.append(v(f"{key}_{name}_size", INVALID, [name], {name: Mask(tuple(spec.flags) + (True,))}))
    return cases


def all_common_error_cases() -> List[Case]:
    return [c for op in ops_with() for c in common_error_cases(op)]


def all_bases() -> List[Case]:
    """The unmodified calls: they must succeed (proof that each error case breaks one thing)."""
    return [Case(f"base_{op['op']}", op["op"], base_params(op)) for op in ops_with()]


# ---- values against the PyTorch peer in float64 --------------------------------------------------

def _peer_reference(op: dict, call: Call, outs) -> Dict[str, np.ndarray]:
    """The peer evaluated on the call's inputs in float64 (their values are the dtype's)."""
    import torch

    wide = {k: None if a is None else np.asarray(a).astype(np.float64) for k, a in call.inputs.items()}
    results = peer_outputs(peer_callable(Call(op, wide, call.attributes), torch, "float64")())
    names = [p["name"] for p in op["params"] if p["kind"] == "output"]
    return {n: r.detach().numpy().astype(np.float64) for n, r, o in zip(names, results, outs) if o is not None}


def value_cases(op: dict, rng_seed: int = 20240611) -> List[Case]:
    """The op's smoke cases at every dtype of its first input, contiguous, and at the first dtype
    strided in and negative out, each with its float64 peer reference."""
    first = next(p for p in op["params"] if p["kind"] == "input")
    dtypes = [d for d in first.get("dtypes", {}).get(PRODUCT, ()) if d in DTYPE_CODES]
    cases = []
    for case in (c for c in op["benchmark"]["cases"] if "smoke" in c["suites"]):
        tag = case["label"].replace(" ", "_")
        for i, dtype in enumerate(dtypes):
            layouts = [("contiguous", "contiguous")] + ([("strided", "negative")] if i == 0 else [])
            for layout, out_layout in layouts:
                call = generate(op, dict(case["params"]), dtype, np.random.default_rng(rng_seed))
                outs = call.allocate()
                ref = _peer_reference(op, call, outs)
                name = f"registry_{op['op']}_{tag}_{dtype}_{layout}"
                cases.append(Case(name, op["op"], call_params(call, outs, layout, out_layout),
                                  reference=ref))
    return cases


def all_value_cases() -> List[Case]:
    """Every registry op's peer-checked cases; none without torch (the oracle), unless
    ACLNN_CPU_REQUIRE_TORCH=1 asks for it."""
    try:
        import torch  # noqa: F401
    except ImportError:
        if os.environ.get("ACLNN_CPU_REQUIRE_TORCH", "") not in ("", "0"):
            raise
        return []
    return [c for op in ops_with("benchmark") if op["benchmark"]["peer"] for c in value_cases(op)]


# The bound of the peer comparison: the output dtype's rounding of each element plus the fp32
# computation's error, taken as 2^-12 of the output's largest magnitude (a peer gives values,
# not the magnitude of the terms each element sums). A wrong element, stride or offset is off
# by about the output's own scale.
PEER_SCALE_FRACTION = 2.0 ** -12
ROUNDING_UNIT = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float64": 2.0 ** -53}


def peer_tolerance(reference: np.ndarray, out_dtype: str) -> np.ndarray:
    unit = ROUNDING_UNIT.get(out_dtype, 0.0)  # integer and bool outputs: exact
    scale = float(np.max(np.abs(reference))) if reference.size else 0.0
    exact = out_dtype not in ROUNDING_UNIT
    return unit * np.abs(reference) + (0.0 if exact else PEER_SCALE_FRACTION * scale)
