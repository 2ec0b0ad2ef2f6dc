"""docs/ops.md: the operator reference, generated from the registry like everything else."""
from __future__ import annotations

from typing import List, Tuple

from . import benchmark
from .analysis import (IMPLICIT_RULES, PHASE2_PARAMS, banner, describe_rule, effective_dtypes,
                       handle_checks, kind_label, phase1_params, prototype)
from .emit_cython import py_literal
from .model import Op
from .vocabulary import numpy_names

PATH = "docs/ops.md"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _code_cell(text: str) -> str:
    return f"`{_cell(text)}`" if text else ""


def _python_signature(op: Op) -> str:
    parts = []
    for p in op.params:
        if p.kind == "output":
            continue
        parts.append(p.py_name + (f"={py_literal(p.default)}" if p.has_default else ""))
    parts += ["*", "out=None"] + [f"{k.name}={py_literal(k.default)}" for k in op.python_kwargs]
    outputs = ", ".join(o.py_name for o in op.outputs)
    return f"{outputs} = aclnn_cpu.{op.python}({', '.join(parts)})"


def _op_section(op: Op) -> List[str]:
    out = [f"## {op.c_name}", "", op.summary, ""]
    if op.description:
        out += [op.description, ""]
    document = f"Document: {op.source} · " if op.source else ""
    out += [f"{document}products: {', '.join(op.products)} · "
            f"registry: `{op.path}` · kernel: `ops/{op.kernel}.cpp`", ""]
    out += ["### C API", "", "```c", f'#include "aclnnop/aclnn_{op.snake}.h"', ""]
    out.append(prototype(f"{op.c_name}GetWorkspaceSize", phase1_params(op), 0, width=96) + ";")
    out.append(prototype(op.c_name, PHASE2_PARAMS, 0, width=96) + ";")
    out += ["```", "", "### Python", "", "```python", _python_signature(op)]
    out.append(f"workspace_size, executor = aclnn_cpu.{op.c_name}GetWorkspaceSize("
               f"{', '.join(p.name for p in op.params)})")
    out += [f"aclnn_cpu.{op.c_name}(workspace, workspace_size, executor, stream=None)", "```", ""]
    if op.python_kwargs:
        for k in op.python_kwargs:
            out.append(f"- `{k.name}={py_literal(k.default)}` (functional only): {k.doc}")
        out.append("")
    # parameters
    dtypes = effective_dtypes(op)
    out += ["### Parameters", "",
            "| C name | Python | kind | " + " | ".join(op.products) + " | description |",
            "| --- | --- | --- | " + " | ".join("---" for _ in op.products) + " | --- |"]
    for p in op.params:
        kind = kind_label(p)
        notes = []
        if p.optional:
            notes.append("may be null")
        if p.mask:
            notes.append(f"written when {p.mask.array}[{p.mask.index}]")
        if p.has_default:
            notes.append(f"Python default {py_literal(p.default)}")
        if notes:
            kind += f" ({'; '.join(notes)})"
        cells = []
        for prod in op.products:
            cells.append(", ".join(dtypes[p.name].get(prod, ())) if p.name in dtypes else "")
        out.append(f"| `{p.name}` | `{p.py_name}` | {_cell(kind)} | " + " | ".join(cells)
                   + f" | {_cell(p.doc)} |")
    out.append("")
    # rules
    out += ["### Checks of phase 1, in order", "",
            "Null out-pointers (`workspaceSize`, `executor`) come first (161001); the checks every "
            "op shares (see the top of this page) run after the leading not_null rules "
            "(layout) and after the last rule (rank, writability, overlap).", "",
            "| # | status | requires | document / message |", "| --- | --- | --- | --- |"]
    for status, text in handle_checks(op):
        out.append(f"| – | {status} | {_cell(text)} | (made by every validator) |")
    for i, rule in enumerate(op.rules, 1):
        note = _cell(rule.doc)
        if rule.message:
            note += (" " if note else "") + f"Message: {_code_cell(rule.message)}"
        out.append(f"| {i} | {rule.status_code} | {_code_cell(describe_rule(op, rule))} | {note} |")
    out.append("")
    # example
    if op.example:
        ex = op.example
        py = {p.name: p.py_name for p in op.params}
        heading = "### Example (from the document)" if op.source else "### Example"
        out += [heading, "", "```python", "import numpy as np",
                "import aclnn_cpu", ""]
        module, attribute = numpy_names()[ex.dtype]  # ("ml_dtypes", "bfloat16") for bf16
        np_dtype = f"np.{attribute}" if module == "numpy" else f"{module}.{attribute}"
        if module != "numpy":
            out.insert(out.index("import aclnn_cpu"), f"import {module}")
        for name, tensor in ex.inputs:
            data = ", ".join(_number(v) for v in tensor.data)
            out.append(f"{py[name]} = np.array([{data}], dtype={np_dtype}).reshape"
                       f"({', '.join(str(d) for d in tensor.shape)}{',' if len(tensor.shape) == 1 else ''})")
        args = [py[name] for name, _ in ex.inputs]
        args += [f"{py[name]}={py_literal(value)}" for name, value in ex.attributes]
        outputs = ", ".join(o.py_name for o in op.outputs)
        out.append(f"{outputs} = aclnn_cpu.{op.python}({', '.join(args)})")
        out += ["```", "", "`python -m aclnn_cpu demo` runs it and prints the result.", ""]
    out += benchmark.docs_lines(op)
    return out


def _number(v: float) -> str:
    """The shortest text that reads back as the same value (`:g` kept 6 digits: 0.2896827 came
    out as 0.289683, another computation than the document's), integers without a ".0"."""
    text = repr(float(v))
    return text[:-2] if text.endswith(".0") else text


def emit(ops: List[Op]) -> Tuple[str, str]:
    out = [f"<!-- {banner('registry/*.yaml')} -->", "# Operator reference", "",
           "Generated from `registry/*.yaml` (schema: `registry/README.md`) by "
           "`python -m registry.aclnn_gen`; CI runs it with `--check`. For every op: the C API "
           "(the document's prototypes), the Python API, the parameters with their dtypes per "
           "product line, the checks phase 1 makes in order with their status codes, and the "
           "document's example.", "",
           "Status codes: 161001 `ACLNN_ERR_PARAM_NULLPTR` (`aclnn_cpu.ParamNullptrError`, a "
           "`TypeError`), 161002 `ACLNN_ERR_PARAM_INVALID` (`aclnn_cpu.ParamInvalidError`, a "
           "`ValueError`), 561000 `ACLNN_ERR_INNER` (out of memory, internal error). Every "
           "message starts with the aclnn function name; the C validator's are also returned by "
           "`aclGetRecentErrMsg()`. In Python, integer parameters take integers only (NumPy's "
           "too: a float raises `TypeError` rather than being truncated), and bool parameters "
           "and the entries of a mask take `True`/`False` (NumPy's too) or 0/1 (anything else: "
           "`TypeError`, for a mask 161002). Where an op has them: `double` parameters take any "
           "real number, a NumPy 0-d array too (a bool or a string: `TypeError`); scalar (`aclScalar`) parameters take "
           "a Python `float` (passed as float64; any real number such as a `Fraction` too), "
           "`int` (int64) or `bool`, or a NumPy scalar or 0-d array, which keeps its dtype "
           "(`np.float16(0.5)` arrives as a float16 scalar; a string or a torch tensor: "
           "`TypeError`; a complex value or an array with dims: 161002); integer arrays take a "
           "sequence of integers, in order (a float entry, a string, a set: 161002).", "",
           "| op | Python | products | summary |", "| --- | --- | --- | --- |"]
    for op in ops:
        anchor = op.c_name.lower()
        out.append(f"| [{op.c_name}](#{anchor}) | `{op.python}` | {', '.join(op.products)} | "
                   f"{_cell(op.summary)} |")
    out += ["", "## Checks every op shares", "",
            "Besides its own rules, every op's phase 1 makes these checks; nothing is written to "
            "any output before all checks pass.", "",
            "| stage | status | requires |", "| --- | --- | --- |",
            "| first | 161001 | `workspaceSize` and `executor` are not null |"]
    for stage, status, text in IMPLICIT_RULES:
        out.append(f"| {stage} | {status} | {_cell(text)} |")
    out += ["", "An optional input that is null (GroupNorm `gamma`) or an output whose mask flag is "
            "false is absent: the rules skip it, and a masked-off output is never touched.", ""]
    for op in ops:
        out += _op_section(op)
    while out and out[-1] == "":
        out.pop()
    out.append("")
    return PATH, "\n".join(out)
