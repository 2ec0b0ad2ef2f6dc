"""aclnn_cpu/_registry.py: the registry as plain Python literals, for the CLI, the demo and tests."""
from __future__ import annotations

from typing import Any, List, Tuple

from . import benchmark, model
from .analysis import banner, describe_rule, effective_dtypes
from .model import (BroadcastsTo, Check, DimEquals, DtypeIn, MaxRank, NumelEquals, Op,
                    RankEquals, Rule, ShapeEquals, ValueIn)

PATH = "aclnn_cpu/_registry.py"
WIDTH = 100


def _scalar(value: Any) -> str:
    return repr(value)


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_inline(k)}: {_inline(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(_inline(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return _scalar(value)


def _format(value: Any, indent: int) -> List[str]:
    """Pretty literal: inline when it fits, else one item per line (numbers packed per line)."""
    pad = " " * indent
    text = _inline(value)
    if len(pad) + len(text) <= WIDTH or not isinstance(value, (dict, list, tuple)) or not value:
        return [text]
    inner = " " * (indent + 4)
    if isinstance(value, dict):
        lines = ["{"]
        for k, v in value.items():
            head = f"{inner}{_inline(k)}: "
            body = _format(v, indent + 4)
            lines.append(head + body[0])
            lines += body[1:]
            lines[-1] += ","
        lines.append(pad + "}")
        return lines
    open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        lines = [open_]
        current = inner
        for v in value:
            piece = _scalar(v) + ", "
            if len(current) + len(piece.rstrip()) > WIDTH and current.strip():
                lines.append(current.rstrip())
                current = inner
            current += piece
        lines.append(current.rstrip())
        lines.append(pad + close)
        return lines
    lines = [open_]
    for v in value:
        body = _format(v, indent + 4)
        lines.append(inner + body[0])
        lines += body[1:]
        lines[-1] += ","
    lines.append(pad + close)
    return lines


def _rule_entry(op: Op, index: int, rule: Rule) -> dict:
    entry = {
        "index": index,
        "kind": rule.kind,
        "status": rule.status_code,
        "params": list(rule.tensor_params()) if not isinstance(rule, ValueIn) else list(rule.params),
        "summary": describe_rule(op, rule),
        "doc": rule.doc,
        "message": rule.message,
        "when": rule.when,
        "line": rule.line,
    }
    if isinstance(rule, (MaxRank, RankEquals)):
        entry["rank"] = rule.rank
    if isinstance(rule, DtypeIn):
        entry["set"] = rule.set
    if isinstance(rule, ShapeEquals):
        entry["shape"] = rule.shape
    if isinstance(rule, NumelEquals):
        entry["value"] = rule.value
    if isinstance(rule, BroadcastsTo):
        entry["target"] = rule.target
    if isinstance(rule, DimEquals):
        entry["dims"] = [[d.param, d.index] for d in rule.dims]
    if isinstance(rule, ValueIn):
        entry["values"] = list(rule.values)
    if isinstance(rule, Check):
        entry["check"] = rule.check
    return entry


def op_entry(op: Op) -> dict:
    dtypes = effective_dtypes(op)
    params = []
    for p in op.params:
        entry = {
            "name": p.name,
            "py_name": p.py_name,
            "kind": p.kind,
            "optional": p.optional,
            "mask": [p.mask.array, p.mask.index] if p.mask else None,
            "default": p.default if p.has_default else None,
            "has_default": p.has_default,
            "doc": p.doc,
        }
        if p.kind == "bool_array":
            entry["size"] = p.size
        if p.name in dtypes and (p.is_tensor or dtypes[p.name]):
            entry["dtypes"] = {prod: list(dtypes[p.name].get(prod, ())) for prod in op.products}
        if p.alloc:
            entry["alloc"] = {"shape": p.alloc.shape, "dtype": p.alloc.dtype, "layout": p.alloc.layout}
        params.append(entry)
    example = None
    if op.example:
        py = {p.name: p.py_name for p in op.params}
        example = {
            "dtype": op.example.dtype,
            "inputs": {py[name]: {"shape": list(t.shape), "data": list(t.data)}
                       for name, t in op.example.inputs},
            "attributes": {py[name]: value for name, value in op.example.attributes},
        }
    return {
        "name": op.c_name,
        "op": op.name,
        "python": op.python,
        "kernel": op.kernel,
        "summary": op.summary,
        "description": op.description,
        "source": op.source,
        "yaml": op.path,
        "products": list(op.products),
        "dtype_sets": {s.name: {prod: list(d) for prod, d in s.per_product} for s in op.dtype_sets},
        "params": params,
        "python_kwargs": [{"name": k.name, "default": k.default, "doc": k.doc}
                          for k in op.python_kwargs],
        "rules": [_rule_entry(op, i + 1, r) for i, r in enumerate(op.rules)],
        "example": example,
        "benchmark": benchmark.entry(op),
    }


def emit(ops: List[Op]) -> Tuple[str, str]:
    out = [f"# {banner('registry/*.yaml')}",
           '"""The op registry as plain literals (for `python -m aclnn_cpu ops`, the demo and tests).',
           "",
           "OPS: one dict per op, in registry file order. Keys: name (aclnnXxx), op, python, kernel,",
           "summary, description, source (the CANN document, by name), yaml, products, dtype_sets, params (name,",
           "py_name, kind, optional, mask, default, has_default, doc, dtypes per product for tensors,",
           "size for bool arrays, alloc for outputs), python_kwargs, rules (index, kind, status,",
           "params, summary, doc, message, when, line, kind-specific fields) and example (dtype,",
           'inputs {py_name: {shape, data}}, attributes {py_name: value}) and benchmark (None or',
           "the bench's name, aliases, order, targets, attributes, inputs, moved, describe, peer",
           'and cases: registry/README.md, "Benchmark")."""',
           "",
           f"STATUS_NAMES = {_inline({v: k for k, v in model.STATUS_CODES.items()})}",
           ""]
    body = _format(tuple(op_entry(op) for op in ops), 0)
    body[0] = "OPS = " + body[0]
    out += body
    out.append("")
    return PATH, "\n".join(out)
