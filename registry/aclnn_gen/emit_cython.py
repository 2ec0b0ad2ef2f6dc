"""aclnn_cpu/_ops.pyx and _ops.pyi: the Python API of every op.

Per op: the two-phase functions with the C names and argument order (aclnnXxxGetWorkspaceSize,
aclnnXxx), calling the C entry points without the GIL, and the functional function that
allocates the outputs it is not given. The hand-written glue (aclnn_cpu/_glue.pxd) does the
array <-> aclTensor work.
"""
from __future__ import annotations

import ast
from typing import List, Tuple

from .analysis import banner
from .model import Op, Param, PyDefault
from .text import wrap

PYX_PATH = "aclnn_cpu/_ops.pyx"
PYI_PATH = "aclnn_cpu/_ops.pyi"


def py_literal(value: PyDefault) -> str:
    if isinstance(value, tuple):
        inner = ", ".join(py_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def _extern_param(p: Param) -> str:
    return {
        "input": f"const aclTensor* {p.name}",
        "output": f"aclTensor* {p.name}",
        "int64": f"int64_t {p.name}",
        "double": f"double {p.name}",
        "bool": f"bint {p.name}",
        "scalar": f"const aclScalar* {p.name}",
        "int_array": f"const aclIntArray* {p.name}",
        "bool_array": f"const aclBoolArray* {p.name}",
    }[p.kind]


def _scalar_checks(op: Op, params: List[Param], names: List[str], indent: str, typed: bool) -> List[str]:
    """Lines converting the plain C parameters strictly (glue's int64_value / float_value /
    flag_value: a float for an integer or a string for a bool is an error, not a truncation or a
    truth value): in place as Python values (the functional form), or into typed locals c_<name>
    (phase 1)."""
    out: List[str] = []
    for p, name in zip(params, names):
        fn = {"int64": "int64_value", "double": "float_value", "bool": "flag_value"}.get(p.kind)
        if fn is None:
            continue
        call = f'{fn}({name}, "{op.c_name}: {name}")'
        if typed:
            ctype = {"int64": "int64_t", "double": "double", "bool": "bint"}[p.kind]
            out.append(f"{indent}cdef {ctype} c_{name} = {call}")
        else:
            out.append(f"{indent}{name} = {call}")
    return out


# Parameters passed as handles the glue builds from Python values: (class, builder).
_HANDLE_ARGS = {
    "scalar": ("ScalarArg", "scalar_arg"),
    "int_array": ("IntArrayArg", "int_array_arg"),
    "bool_array": ("BoolArrayArg", "bool_array_arg"),
}


def _join_wrapped(head: str, items: List[str], tail: str, indent: str, width: int = 100) -> List[str]:
    """`head item, item, ...tail` wrapped with continuation lines aligned after head."""
    lines: List[str] = []
    current = indent + head
    pad = " " * len(current)
    for i, item in enumerate(items):
        piece = item + (", " if i + 1 < len(items) else tail)
        if len(current) + len(piece.rstrip()) > width and current.strip() != head.strip():
            lines.append(current.rstrip())
            current = pad
        current += piece
    if not items:
        current += tail
    lines.append(current.rstrip())
    return lines


def _doc_lines(text: str, indent: str) -> List[str]:
    out: List[str] = []
    for paragraph in text.split("\n\n"):
        out += wrap(paragraph, 96, indent, indent) if paragraph.strip() else [""]
        out.append("")
    return out[:-1]


def _alloc_guard(op: Op, p: Param) -> str:
    """The condition under which the functional API allocates output p."""
    parts = [f"{p.py_name} is None"]
    if p.mask:
        array = op.param(p.mask.array)
        parts.append(f"_mask_on({array.py_name}, {p.mask.index}, {array.size})")
    by_py = {q.py_name: q for q in op.params}
    used: List[str] = []
    for expr in (p.alloc.shape, p.alloc.dtype):
        for node in ast.walk(ast.parse(expr, mode="eval")):
            if isinstance(node, ast.Name) and node.id in by_py and node.id not in used:
                used.append(node.id)
    for name in used:
        q = by_py[name]
        if (q.is_tensor or q.is_handle) and not q.optional:  # None: the validator says 161001
            parts.append(f"{name} is not None")
    return " and ".join(parts)


def _layout_note(p: Param) -> str:
    """The docstring's word on an allocated output's memory order."""
    if not p.alloc.layout:
        return ""
    return (f" Allocated in the memory order of {p.alloc.layout} when that is dense "
            f"(channels-last, transposed), else C-contiguous.")


def _functional(op: Op) -> List[str]:
    positional = [p for p in op.params if p.kind != "output"]
    sig = [(p.py_name + (f"={py_literal(p.default)}" if p.has_default else "")) for p in positional]
    sig += ["*", "out=None"] + [f"{k.name}={py_literal(k.default)}" for k in op.python_kwargs]
    out = _join_wrapped(f"def {op.python}(", sig, "):", "")
    outputs = op.outputs
    doc = [f'    """{op.summary}', ""]
    doc += [f"    Functional form of {op.c_name}: allocates the outputs not given in ``out``.",
            "    Outputs follow inputs: when the tensor inputs are all torch tensors, the allocated",
            "    outputs are torch tensors of the same dtype (bfloat16 included); otherwise NumPy",
            "    arrays (bfloat16 as ml_dtypes.bfloat16). ``out`` arrays are returned as given.", "",
            "    Args:"]
    for p in positional:
        extra = " May be None." if p.optional else ""
        doc += wrap(f"{p.py_name}: {p.doc}{extra}", 92, "        ", "            ")
    if len(outputs) == 1:
        doc += wrap(f"out: where to write {outputs[0].py_name} (any writable strided array); "
                    f"allocated when None.", 92, "        ", "            ")
    else:
        names = ", ".join(o.py_name for o in outputs)
        doc += wrap(f"out: a tuple ({names}) of writable arrays or None; None entries that are "
                    f"wanted are allocated.", 92, "        ", "            ")
    for k in op.python_kwargs:
        doc += wrap(f"{k.name}: {k.doc}", 92, "        ", "            ")
    doc += ["", "    Returns:"]
    if len(outputs) == 1:
        doc += wrap(f"{outputs[0].py_name}: {outputs[0].doc}{_layout_note(outputs[0])}", 92,
                    "        ", "            ")
    else:
        doc += wrap(f"A tuple ({', '.join(o.py_name for o in outputs)}); masked-off outputs are "
                    f"None.", 92, "        ", "            ")
        for o in outputs:
            doc += wrap(f"{o.py_name}: {o.doc}{_layout_note(o)}", 92, "        ", "            ")
    doc += ['    """']
    out += doc
    out += _scalar_checks(op, positional, [p.py_name for p in positional], "    ", False)
    for p in op.inputs:
        out.append(f"    {p.py_name} = as_input({p.py_name})")
    # Outputs follow inputs: all-torch tensor inputs get torch tensors allocated (glue's torch_inputs).
    names = [p.py_name for p in op.inputs]
    out += _join_wrapped("torch_out = torch_inputs((", names, ",))" if len(names) == 1 else "))", "    ")
    for p in op.params:
        if p.kind == "bool_array":
            out += [f"    if {p.py_name} is not None:",
                    f"        {p.py_name} = tuple({p.py_name})"]
    if len(outputs) == 1:
        if outputs[0].py_name != "out":
            out.append(f"    {outputs[0].py_name} = out")
    else:
        out.append(f"    {', '.join(o.py_name for o in outputs)} = "
                   f"unpack_out(out, {len(outputs)}, \"{op.c_name}: out\")")
    for o in outputs:
        out.append(f"    if {_alloc_guard(op, o)}:")
        like = o.alloc.layout or "None"
        out.append(f"        {o.py_name} = _new_output({o.alloc.shape}, {o.alloc.dtype}, {like}, torch_out)")
    call = [p.py_name for p in op.params]
    out += _join_wrapped(f"_plan_and_run_{op.c_name}(", call, ")", "    ")
    if len(outputs) == 1:
        out.append(f"    return {outputs[0].py_name}")
    else:
        results = []
        for o in outputs:
            if o.mask:
                array = op.param(o.mask.array)
                results.append(f"{o.py_name} if _mask_on({array.py_name}, {o.mask.index}, "
                               f"{array.size}) else None")
            else:
                results.append(o.py_name)
        out += _join_wrapped("return (", results, ")", "    ")
    return out


def _phase1(op: Op) -> Tuple[List[str], List[str]]:
    """The body of phase 1 up to a planned `executor` and `workspace_size` (status raised), and
    the names of the argument objects that must outlive the executor's run."""
    out: List[str] = []
    args: List[str] = []
    keep: List[str] = []
    out += _scalar_checks(op, op.params, [p.name for p in op.params], "    ", True)
    for p in op.params:
        # Names in messages carry the op's name, as the C validator's messages do.
        if p.is_tensor:
            is_out = "True" if p.kind == "output" else "False"
            out.append(f'    cdef TensorArg a_{p.name} = tensor_arg({p.name}, "{op.c_name}: {p.name}", {is_out})')
            args.append(f"a_{p.name}.ptr")
            keep.append(f"a_{p.name}")
        elif p.kind in _HANDLE_ARGS:
            cls, fn = _HANDLE_ARGS[p.kind]
            out.append(f'    cdef {cls} a_{p.name} = {fn}({p.name}, "{op.c_name}: {p.name}")')
            args.append(f"a_{p.name}.ptr")
            keep.append(f"a_{p.name}")
        else:
            args.append(f"c_{p.name}")
    # Phase 1 keeps the GIL: it reads metadata only (microseconds), and releasing and taking
    # the GIL back cost a tenth of a tiny functional call.
    out += ["    cdef uint64_t workspace_size = 0", "    cdef aclOpExecutor* executor = NULL",
            "    cdef aclnnStatus status"]
    out += _join_wrapped(f"status = c_{op.c_name}GetWorkspaceSize(",
                         args + ["&workspace_size", "&executor"], ")", "    ")
    out.append("    raise_for_status(status)")
    return out, keep


def _two_phase(op: Op) -> List[str]:
    out = [f'cdef extern from "aclnnop/aclnn_{op.snake}.h" nogil:']
    out.append(f'    aclnnStatus c_{op.c_name}GetWorkspaceSize "{op.c_name}GetWorkspaceSize"(')
    out += _join_wrapped("", [_extern_param(p) for p in op.params]
                         + ["uint64_t* workspaceSize", "aclOpExecutor** executor"], ")", " " * 8)
    out.append(f'    aclnnStatus c_{op.c_name} "{op.c_name}"(')
    out += _join_wrapped("", ["void* workspace", "uint64_t workspaceSize", "aclOpExecutor* executor",
                              "aclrtStream stream"], ")", " " * 8)
    out += ["", ""]
    sig = [p.name for p in op.params]
    out += _join_wrapped(f"def {op.c_name}GetWorkspaceSize(", sig, "):", "")
    out += _doc_lines(f'"""Phase 1 of {op.c_name}: validates and plans. {op.summary} '
                      f'Returns (workspace_size, executor); raises an AclnnError subclass carrying '
                      f'the status on a broken rule."""', "    ")
    lines, keep = _phase1(op)
    out += lines
    # The executor keeps the argument objects alive (a local tuple, so its lines wrap too).
    out += _join_wrapped("keep = (", keep, ",)" if len(keep) == 1 else ")", "    ")
    out += _join_wrapped("return workspace_size, new_executor(",
                         ["executor", "workspace_size", f'"{op.c_name}"', f"c_{op.c_name}",
                          "keep"], ")", "    ")
    out += ["", ""]
    # The functional form's both phases in one C-level call: no Python call of the function
    # above, no Executor object, no tuples (a tiny Softmax call spent a fifth of its time there).
    # The argument objects stay alive in its locals until the run returns.
    out += _join_wrapped(f"cdef object _plan_and_run_{op.c_name}(", sig, "):", "")
    out += _doc_lines(f'"""{op.c_name}GetWorkspaceSize, then {op.c_name} with this thread\'s '
                      f'workspace."""', "    ")
    out += lines[:]
    out.append(f"    run_planned(executor, workspace_size, c_{op.c_name})")
    out += ["", ""]
    out.append(f"def {op.c_name}(workspace, uint64_t workspaceSize, Executor executor, stream=None):")
    out += _doc_lines(f'"""Phase 2 of {op.c_name}: runs the executor of phase 1 with a writable '
                      f'workspace of at least workspaceSize bytes (None when it is 0)."""', "    ")
    out.append(f'    return run_two_phase(workspace, workspaceSize, executor, stream, "{op.c_name}")')
    return out


def _exported_names(ops: List[Op]) -> List[str]:
    names: List[str] = []
    for op in ops:
        names += [op.python, f"{op.c_name}GetWorkspaceSize", op.c_name]
    return names


def emit_pyx(ops: List[Op]) -> Tuple[str, str]:
    out = [f"# {banner('registry/*.yaml')}", "# cython: language_level=3",
           '"""Per-op bindings: for each registry op the two-phase aclnn functions (the C names and',
           "argument order, called without the GIL) and the functional form that allocates outputs.",
           '"""',
           "from math import prod", "",
           "from libc.stdint cimport int64_t, uint64_t", "",
           "from aclnn_cpu._glue cimport (",
           "    BoolArrayArg, Executor, IntArrayArg, ScalarArg, TensorArg, aclBoolArray, aclIntArray,",
           "    aclnnStatus, aclOpExecutor, aclrtStream, aclScalar, aclTensor, as_input, bool_array_arg,",
           "    dtype_of, flag_value, float_value, int64_value, int_array_arg, new_executor, new_output,",
           "    raise_for_status, run_planned, run_two_phase, scalar_arg, shape_of, tensor_arg,",
           "    torch_inputs, unpack_out)", ""]
    out += _join_wrapped("__all__ = [", [repr(n) for n in _exported_names(ops)], "]", "")
    out += ["", "",
            "cdef inline bint _mask_on(object flags, Py_ssize_t index, Py_ssize_t size):",
            '    """Whether a well-formed mask (`size` flags) switches output `index` on; a malformed',
            '    one allocates nothing and the C validator reports it."""',
            "    return flags is not None and len(flags) == size and bool(flags[index])",
            "", "",
            "cdef object _new_output(object shape, object dtype, object like, bint as_torch):",
            '    """new_output(), or an empty stand-in when NumPy refuses the shape (a negative size or',
            '    one past int64), so that the C validator, not NumPy, names the argument behind it.',
            '    A valid shape too large for memory raises MemoryError as any allocation would."""',
            "    try:",
            "        return new_output(shape, dtype, like, as_torch)",
            "    except (ValueError, OverflowError):",
            "        return new_output((0,), dtype)"]
    for op in ops:
        out += ["", "", f"# ---- {op.c_name} ({op.path}) " + "-" * max(0, 80 - len(op.c_name) - len(op.path)),
                ""]
        out += _two_phase(op)
        out += ["", ""]
        out += _functional(op)
    out.append("")
    return PYX_PATH, "\n".join(out)


# ---- stubs --------------------------------------------------------------------------------------

def _stub_type(p: Param, functional: bool) -> str:
    if p.is_tensor:
        return "Optional[Array]" if (p.optional or p.mask or not functional) else "Array"
    text = {"int64": "int", "double": "float", "bool": "bool", "scalar": "Scalar",
            "int_array": "Sequence[int]", "bool_array": "Sequence[bool]"}[p.kind]
    return f"Optional[{text}]" if p.optional else text


def emit_pyi(ops: List[Op]) -> Tuple[str, str]:
    out = [f"# {banner('registry/*.yaml')}", '"""Type stubs of aclnn_cpu._ops (see docs/ops.md)."""',
           "from typing import Any, Optional, Sequence, Tuple, Union", "",
           "from aclnn_cpu._glue import Executor", "",
           "# A NumPy array (ml_dtypes.bfloat16 for bf16), a torch CPU tensor, or anything exporting the",
           "# buffer protocol, __array_interface__ or __dlpack__.",
           "Array = Any",
           "# An aclScalar: a Python float (float64), int (int64) or bool, or a NumPy scalar (its dtype).",
           "Scalar = Union[float, int, bool, Any]", ""]
    out += _join_wrapped("__all__ = [", [repr(n) for n in _exported_names(ops)], "]", "")
    for op in ops:
        outputs = op.outputs
        positional = [p for p in op.params if p.kind != "output"]
        sig = []
        for p in positional:
            text = f"{p.py_name}: {_stub_type(p, True)}"
            if p.has_default:
                text += f" = {py_literal(p.default)}"
            sig.append(text)
        if len(outputs) == 1:
            out_type, ret = "Optional[Array]", "Array"
        else:
            out_type = "Optional[Tuple[" + ", ".join("Optional[Array]" for _ in outputs) + "]]"
            ret = "Tuple[" + ", ".join("Optional[Array]" if o.mask else "Array" for o in outputs) + "]"
        sig += ["*", f"out: {out_type} = None"]
        sig += [f"{k.name}: Any = {py_literal(k.default)}" for k in op.python_kwargs]
        out += ["", ""]
        out += _join_wrapped(f"def {op.python}(", sig, f") -> {ret}:", "")
        out.append(f'    """{op.summary}"""')
        out += ["", ""]
        sig2 = [f"{p.name}: {_stub_type(p, False)}" for p in op.params]
        out += _join_wrapped(f"def {op.c_name}GetWorkspaceSize(", sig2, ") -> Tuple[int, Executor]:", "")
        out.append(f'    """Phase 1 of {op.c_name}: returns (workspace_size, executor)."""')
        out += ["", ""]
        out += _join_wrapped(f"def {op.c_name}(", ["workspace: Any", "workspaceSize: int",
                                                   "executor: Optional[Executor]",
                                                   "stream: Any = None"], ") -> None:", "")
        out.append(f'    """Phase 2 of {op.c_name}: runs the executor."""')
    out.append("")
    return PYI_PATH, "\n".join(out)
