"""include/aclnnop/aclnn_<op>.h: the public two-phase C API of one op, as the document's prototype."""
from __future__ import annotations

from typing import List, Tuple

from .analysis import (MAX_DIMS, PHASE2_PARAMS, banner, describe_rule, effective_dtypes,
                       handle_checks, kind_label, phase1_params, prototype)
from .model import Op
from .naming import header_guard
from .text import block_comment_safe, wrap


def path_of(op: Op) -> str:
    return f"include/aclnnop/aclnn_{op.snake}.h"


def _param_lines(op: Op) -> List[str]:
    dtypes = effective_dtypes(op)
    lines: List[str] = []
    for p in op.params:
        label = kind_label(p)
        notes = []
        if p.optional:
            notes.append("may be null")
        if p.mask:
            notes.append(f"written when {p.mask.array}[{p.mask.index}] is true, else may be null")
        text = p.doc
        if notes:
            text = (text + " " if text else "") + "(" + "; ".join(notes) + ")"
        if p.name in dtypes and (p.is_tensor or dtypes[p.name]):
            per = dtypes[p.name]
            text += " dtypes: " + "; ".join(f"{prod} {', '.join(per.get(prod, ())) or 'none'}"
                                            for prod in op.products) + "."
        lines += wrap(text, 96, f" *   {p.name} ({label}): ", " *       ")
    return lines


def emit(op: Op) -> Tuple[str, str]:
    path = path_of(op)
    guard = header_guard(path[len("include/"):])
    out: List[str] = [f"// {banner(op.path)}"]
    out += wrap(f"{op.c_name}: {op.summary}", 97, "// ", "// ")
    out += [f"#ifndef {guard}", f"#define {guard}", "", '#include "aclnn/aclnn_base.h"', "",
            "#ifdef __cplusplus", 'extern "C" {', "#endif", ""]
    doc = [" * " + line if line else " *" for line in
           wrap(f"Phase 1 of {op.c_name}: checks the arguments and plans the computation. "
                f"{op.summary}", 96)]
    doc += [" *", " * Parameters:"] + _param_lines(op)
    doc += [" *   workspaceSize: receives the size in bytes of the workspace phase 2 needs.",
            " *   executor: receives the executor to pass to the second phase.",
            " *", " * Returns ACLNN_SUCCESS (0), or the first broken rule, in this order:"]
    doc += [" *   (161001 is ACLNN_ERR_PARAM_NULLPTR, 161002 ACLNN_ERR_PARAM_INVALID)"]
    doc += wrap("161001: workspaceSize or executor is null.", 96, " *   ", " *     ")
    for status, text in handle_checks(op):
        doc += wrap(f"{status}: {text}", 96, " *   ", " *     ")
    for rule in op.rules:
        text = describe_rule(op, rule)
        if rule.doc:
            text += f" [{rule.doc}]"
        doc += wrap(f"{rule.status_code}: {text}", 96, " *   ", " *     ")
    doc += wrap(f"161002: the checks every op shares (layout within int64, at most {MAX_DIMS} dims, "
                "outputs writable and overlapping nothing; see docs/ops.md).", 96,
                " *   ", " *     ")
    doc += wrap("561000 (ACLNN_ERR_INNER): out of memory or an internal error.", 96,
                " *   ", " *     ")
    doc += [" * The message of a failure is available from aclGetRecentErrMsg()."]
    out += ["/*"] + [block_comment_safe(line) for line in doc] + [" */"]
    out.append(prototype(f"{op.c_name}GetWorkspaceSize", phase1_params(op), 0,
                         prefix="ACLNN_API aclnnStatus ") + ";")
    out += ["", "/*"]
    out += wrap(f"Phase 2 of {op.c_name}: runs the executor of phase 1 with a workspace of at "
                f"least workspaceSize bytes (null allowed when workspaceSize is 0). The executor "
                f"is consumed unless aclSetAclOpExecutorRepeatable made it repeatable. Streams "
                f"run synchronously on the CPU.", 96, " * ", " * ")
    out += [" */"]
    out.append(prototype(op.c_name, PHASE2_PARAMS, 0, prefix="ACLNN_API aclnnStatus ") + ";")
    out += ["", "#ifdef __cplusplus", "}  /* extern \"C\" */", "#endif", "",
            f"#endif  /* {guard} */", ""]
    return path, "\n".join(out)
