"""include/aclnn_cpu/ops/<op>_args.h: the kernel ABI of one op (docs/contract.md "Kernel ABI").

The argument struct holds the validated operands in C parameter order; inside a kernel
translation unit (ACLNN_ISA_NS defined) it also declares that ISA level's two kernel functions.
"""
from __future__ import annotations

from typing import List, Tuple

from .analysis import banner
from .model import Op, Param
from .text import wrap


def path_of(op: Op) -> str:
    return f"include/aclnn_cpu/ops/{op.snake}_args.h"


def field_decl(p: Param) -> str:
    if p.is_tensor:
        return f"TensorView {p.name};"
    if p.kind == "int64":
        return f"int64_t {p.name} = 0;"
    if p.kind == "double":
        return f"double {p.name} = 0.0;"
    if p.kind == "bool":
        return f"bool {p.name} = false;"
    if p.kind == "scalar":
        return f"ScalarArg {p.name};"
    if p.kind == "int_array":
        return f"IntArrayArg {p.name};"
    return f"bool {p.name}[{p.size}] = {{}};"


def _field_note(p: Param) -> str:
    notes = []
    if p.kind == "output":
        notes.append("output")
    if p.optional:
        notes.append("present == false when null")
    if p.mask:
        notes.append(f"present == false when {p.mask.array}[{p.mask.index}] is false")
    return "; ".join(notes)


def emit(op: Op) -> Tuple[str, str]:
    out: List[str] = [f"// {banner(op.path)}"]
    out += wrap(f"Kernel ABI of {op.c_name}: the validated operands the kernels "
                f"{op.kernel} / {op.kernel}_workspace receive (ops/{op.kernel}.cpp).", 97, "// ", "// ")
    out += ["#pragma once", "#include <cstdint>", "",
            '#include "aclnn_cpu/isa.h"  // defines ACLNN_ISA_NS in kernel builds (ACLNN_ISA_LEVEL)',
            '#include "aclnn_cpu/status.h"',
            '#include "aclnn_cpu/tensor_view.h"', "", "namespace aclnn_cpu {", "",
            f"struct {op.args_struct} {{"]
    for p in op.params:
        decl = "  " + field_decl(p)
        note = _field_note(p)
        out.append(decl + (f"  // {note}" if note else ""))
    out += ["};", "", "#ifdef ACLNN_ISA_NS", "namespace ACLNN_ISA_NS {",
            "// Workspace bytes the kernel needs for these operands (independent of the thread count).",
            f"uint64_t {op.kernel}_workspace(const {op.args_struct}& args);",
            "// Computes the outputs; `workspace` holds at least the bytes asked for above.",
            f"aclnnStatus {op.kernel}(const {op.args_struct}& args, void* workspace);",
            "}  // namespace ACLNN_ISA_NS", "#endif", "", "}  // namespace aclnn_cpu", ""]
    return path_of(op), "\n".join(out)
