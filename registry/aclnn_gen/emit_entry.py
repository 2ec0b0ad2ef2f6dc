"""runtime/generated/<op>_entry.cpp: validator, executor and the two exported C entry points.

Verification order (MLIR ODS style): the out-pointers, then bool arrays being non-null, then the
declared rules in YAML order with the structural layout checks inserted right after the leading
not_null rules, then the implicit rules (rank <= 8, writable outputs, no overlap). Nothing is
written to any output before all of them pass; kernels receive only validated views.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from . import model, vocabulary
from .analysis import (MAX_DIMS, PHASE2_PARAMS, banner, c_param_type, implicit_rank_tensors,
                       phase1_params, prototype, structure_position)
from .exprs import cpp_string_literal as lit
from .exprs import cpp_identifiers, display_expr, parse_template, template_to_cpp
from .model import (BroadcastsTo, Check, DimEquals, DtypeIn, MaxRank, NotNull, NumelEquals, Op,
                    Param, RankEquals, Rule, SameDtype, SameShape, ShapeEquals, Succeed, ValueIn)
from .text import wrap

# (namespace, guard macro or None) per ISA level, in KernelSet's (aclnn_cpu::Isa's) order.
ISA_LEVELS = tuple((f"isa_{level.name}", level.macro) for level in vocabulary.ISA_LEVELS)


def path_of(op: Op) -> str:
    return f"runtime/generated/{op.snake}_entry.cpp"


def _active(p: Param) -> str:
    """The variable holding a tensor in phase 1 after masking (masked-off outputs are null)."""
    return f"active_{p.name}" if p.mask else p.name


def _validator_param(p: Param) -> str:
    if p.is_tensor:
        return f"const aclTensor* {p.name}"
    return f"{c_param_type(p)} {p.name}"


def _dtype_set_fn(name: str) -> str:
    return f"dtypes_{name}"


class _Checks:
    """Turns rules into C++ `if (...) return reject(...)` statements."""

    def __init__(self, op: Op):
        self.op = op

    def statement(self, cond: str, status: str, message: str, indent: str) -> List[str]:
        ret = f"{indent}  return reject({status}, kOpName, {message});"
        if len(ret) > 100:
            pad = indent + " " * 16
            pieces = _split_concat(message)
            lines = [f"{indent}  return reject({status}, kOpName,"]
            current = pad
            for i, piece in enumerate(pieces):
                piece = piece + (" + " if i + 1 < len(pieces) else ");")
                if len(current) + len(piece.rstrip()) > 100 and current.strip():
                    lines.append(current.rstrip())
                    current = pad
                current += piece
            lines.append(current.rstrip())
            ret = "\n".join(lines)
        return [f"{indent}if ({cond}) {{", ret, f"{indent}}}"]

    def rule(self, index: int, rule: Rule) -> List[str]:
        status = model.STATUS_CONSTANTS[rule.status]
        head = f"Rule {index} ({rule.kind}, {self.op.path}:{rule.line})"
        out = wrap(f"{head}{': ' + rule.doc if rule.doc else ''}", 99, "  // ", "  //   ")
        indent = "  "
        if isinstance(rule, Succeed):
            return out + [f"  if ({rule.when}) {{",
                          "    *run_nothing = true;  // no later rule, and nothing to compute",
                          "    return kSuccess;", "  }"]
        if rule.when:
            out.append(f"  if ({rule.when}) {{")
            indent = "    "
        override = template_to_cpp(parse_template(rule.message)) if rule.message else None
        for guard, setup, cond, message in self._conditions(rule):
            msg = override or message
            if not setup:
                if guard:
                    compound = any(op in cond for op in ("&&", "||", "?"))
                    cond = f"{guard} && " + (f"({cond})" if compound else cond)
                out += self.statement(cond, status, msg, indent)
                continue
            inner = indent + "  "
            out.append(f"{indent}if ({guard}) {{" if guard else f"{indent}{{")
            out += [f"{inner}{s}" for s in setup]
            out += self.statement(cond, status, msg, inner)
            out.append(f"{indent}}}")
        if rule.when:
            out.append("  }")
        return out

    def _guard(self, name: str) -> Optional[str]:
        return f"present({name})" if self.op.param(name).may_be_absent else None

    def _conditions(self, rule: Rule) -> List[Tuple[Optional[str], List[str], str, str]]:
        """(guard, setup statements, failure condition, default message) per generated check."""
        op = self.op
        checks: List[Tuple[Optional[str], List[str], str, str]] = []
        if isinstance(rule, NotNull):
            for name in rule.params:
                p = op.param(name)
                if p.mask:
                    cond = f"mask({p.mask.array}, {p.mask.index}) && !present({name})"
                    msg = lit(f"{name} must not be null when {p.mask.array}[{p.mask.index}] is true")
                else:
                    cond, msg = f"!present({name})", lit(f"{name} must not be null")
                checks.append((None, [], cond, msg))
        elif isinstance(rule, MaxRank):
            for name in rule.params:
                checks.append((self._guard(name), [], f"rank({name}) > {rule.rank}",
                               f'{lit(f"{name} has rank ")} + to_string(rank({name})) + '
                               f'{lit(f", more than the supported {rule.rank}")}'))
        elif isinstance(rule, RankEquals):
            for name in rule.params:
                checks.append((self._guard(name), [], f"rank({name}) != {rule.rank}",
                               f'{lit(f"{name} must have rank {rule.rank}, got ")} + '
                               f'to_string(rank({name}))'))
        elif isinstance(rule, DtypeIn):
            fn = _dtype_set_fn(rule.set)
            for name in rule.params:
                checks.append((self._guard(name), [], f"!{fn}().contains(dtype({name}))",
                               f'{lit(f"{name} has dtype ")} + to_string(dtype({name})) + '
                               f'", not supported on " + to_string(product()) + '
                               f'" (supported: " + {fn}().names() + ")"'))
        elif isinstance(rule, SameDtype):
            ref = rule.params[0]
            for name in rule.params[1:]:
                checks.append((self._guard(name), [], f"dtype({name}) != dtype({ref})",
                               f'{lit(f"{name} has dtype ")} + to_string(dtype({name})) + '
                               f'", expected " + to_string(dtype({ref})) + '
                               f'{lit(f" (the dtype of {ref})")}'))
        elif isinstance(rule, SameShape):
            ref = rule.params[0]
            for name in rule.params[1:]:
                checks.append((self._guard(name), [], f"shape({name}) != shape({ref})",
                               f'{lit(f"{name} has shape ")} + to_string(shape({name})) + '
                               f'", expected " + to_string(shape({ref})) + '
                               f'{lit(f" (the shape of {ref})")}'))
        elif isinstance(rule, ShapeEquals):
            for name in rule.params:
                checks.append((self._guard(name), [f"const Shape expected = {rule.shape};"],
                               f"shape({name}) != expected",
                               f'{lit(f"{name} has shape ")} + to_string(shape({name})) + '
                               f'", expected " + to_string(expected)'))
        elif isinstance(rule, NumelEquals):
            for name in rule.params:
                checks.append((self._guard(name), [f"const int64_t expected = {rule.value};"],
                               f"numel({name}) != expected",
                               f'{lit(f"{name} has ")} + to_string(numel({name})) + '
                               f'" elements, expected " + count_to_string(expected) + '
                               f'{lit(f" ({display_expr(rule.value)})")}'))
        elif isinstance(rule, BroadcastsTo):
            target = rule.target
            for name in rule.params:
                checks.append((self._guard(name), [],
                               f"!broadcasts_to(shape({name}), shape({target}))",
                               f'{lit(f"{name} of shape ")} + to_string(shape({name})) + '
                               f'" does not broadcast to " + to_string(shape({target})) + '
                               f'{lit(f", the shape of {target}")}'))
        elif isinstance(rule, DimEquals):
            ref = rule.dims[0]
            for d in rule.dims[1:]:
                checks.append((None, [], f"dim({d.param}, {d.index}) != dim({ref.param}, {ref.index})",
                               f'{lit(f"dim {d.index} of {d.param} is ")} + '
                               f'to_string(dim({d.param}, {d.index})) + ", expected " + '
                               f'to_string(dim({ref.param}, {ref.index})) + '
                               f'{lit(f" (dim {ref.index} of {ref.param})")}'))
        elif isinstance(rule, ValueIn):
            allowed = ", ".join(str(v) for v in rule.values)
            for name in rule.params:
                cond = " && ".join(f"{name} != {v}" for v in rule.values)
                checks.append((None, [], cond,
                               f'{lit(f"{name} is ")} + to_string({name}) + '
                               f'{lit(f", expected one of {allowed}")}'))
        elif isinstance(rule, Check):
            checks.append((None, [], f"!({rule.check})", lit(f"check failed: {rule.check}")))
        else:  # pragma: no cover - the loader knows every kind
            raise AssertionError(rule.kind)
        return checks


def _succeeds(op: Op) -> bool:
    """Whether a succeed rule may end phase 1 early (the validator then says so)."""
    return any(isinstance(rule, Succeed) for rule in op.rules)


def _split_concat(expr: str) -> List[str]:
    """Splits a C++ `a + b + c` expression at its top-level ` + ` (not inside () or strings)."""
    pieces: List[str] = []
    depth = 0
    in_string = False
    start = 0
    i = 0
    while i < len(expr):
        ch = expr[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and expr.startswith(" + ", i):
            pieces.append(expr[start:i])
            start = i + 3
            i += 3
            continue
        i += 1
    pieces.append(expr[start:])
    return pieces


def _structure_block(op: Op) -> List[str]:
    out = ["  // Structure, before any rule measures a tensor: every present tensor's layout.",
           "  // (The check_* helpers return kSuccess, i.e. 0, or the status they recorded.)"]
    for p in op.tensors:
        out.append(f"  if (const aclnnStatus failed = check_layout(kOpName, {lit(p.name)}, {p.name})) "
                   f"return failed;")
    return out


def _implicit_block(op: Op) -> List[str]:
    out: List[str] = []
    ranked = implicit_rank_tensors(op)
    if ranked:
        out.append(f"  // Implicit: at most {MAX_DIMS} dims (TensorView) where no rule said so.")
        for name in ranked:
            out.append(f"  if (const aclnnStatus failed = check_max_rank(kOpName, {lit(name)}, {name}, "
                       f"{MAX_DIMS})) return failed;")
    out.append("  // Implicit: outputs are writable, write no location twice and share no memory")
    out.append("  // with an input or another output (absent tensors pass).")
    outputs = op.outputs
    for i, o in enumerate(outputs):
        out.append(f"  if (const aclnnStatus failed = check_output_writable(kOpName, {lit(o.name)}, "
                   f"{o.name})) return failed;")
        for other in list(op.inputs) + list(outputs[i + 1:]):
            out.append(f"  if (const aclnnStatus failed = check_no_overlap(kOpName, {lit(o.name)}, {o.name},")
            out.append(f"                                                {lit(other.name)}, {other.name})) return failed;")
    return out


def _validator(op: Op) -> List[str]:
    checks = _Checks(op)
    out = ["// The rules of registry/{0} in order; masked-off outputs arrive as null.".format(
        op.path.split("/")[-1]),
        "// Returns kSuccess or the first failure (its message recorded by reject())."]
    params = [_validator_param(p) for p in op.params]
    if _succeeds(op):
        params.append("bool* run_nothing")
    out.append(prototype("validate", params, 0) + " {")
    def null_check(name: str) -> List[str]:
        return [f"  if ({name} == nullptr) {{",
                f"    return reject(kParamNullptr, kOpName, {lit(f'{name} must not be null')});",
                "  }"]

    def size_check(fn: str, name: str, limit: str) -> List[str]:
        return [f"  if (const aclnnStatus failed = {fn}(kOpName, {lit(name)}, {name}, {limit})) {{",
                "    return failed;  // kSuccess is 0: any other value is the recorded failure",
                "  }"]

    # Bool arrays first: their flags decide which outputs the not_null rules require. Then
    # scalars and integer arrays: non-null unless optional, and integer arrays short enough for
    # the kernels' fixed-size copy (IntArrayArg). (analysis.handle_checks lists these for docs.)
    for p in op.params:
        if p.kind == "bool_array":
            out += null_check(p.name) + size_check("check_bool_array_size", p.name, str(p.size))
    for p in op.params:
        if p.is_handle and not p.optional:
            out += null_check(p.name)
        if p.kind == "int_array":
            out += size_check("check_int_array_size", p.name, "kMaxIntArray")
    position = structure_position(op)
    for i, rule in enumerate(op.rules):
        if i == position:
            out += _structure_block(op)
        out += checks.rule(i + 1, rule)
    if position == len(op.rules):
        out += _structure_block(op)
    out += _implicit_block(op)
    out += ["  return kSuccess;", "}"]
    body = "\n".join(out[3:])
    unused = [p.name for p in op.params if p.name not in cpp_identifiers(body)]
    if unused:
        at = out.index(next(line for line in out if line.endswith(") {")))
        out.insert(at + 1, "  // Read by no rule: " + ", ".join(unused) + ".")
        for name in reversed(unused):
            out.insert(at + 2, f"  static_cast<void>({name});")
    return out


def _dtype_sets(op: Op) -> List[str]:
    used = []
    for rule in op.rules:
        if isinstance(rule, DtypeIn) and rule.set not in used:
            used.append(rule.set)
    out: List[str] = []
    for name in used:
        dset = op.dtype_set(name)
        out.append(f"// dtype set '{name}' ({op.path}:{dset.line}) on the current product line.")
        out.append(f"DTypeList {_dtype_set_fn(name)}() {{")
        for product, dtypes in dset.per_product:
            items = ", ".join(model.DTYPES[d] for d in dtypes)
            if dtypes:
                out.append(f"  static const DType {product}[] = {{{items}}};")
        out.append("  switch (current_product()) {")
        for product, dtypes in dset.per_product:
            value = f"{{{product}, {len(dtypes)}}}" if dtypes else "{}"
            out.append(f"    case {model.PRODUCT_ENUM[product]}: return {value};")
        out.append("    default: return {};  // a product line the document does not list")
        out += ["  }", "}", ""]
    return out


def _kernel_set(op: Op) -> List[str]:
    """The KernelSet of the op: one {workspace, run} pair per ISA level the build compiled."""
    out = [f"// The kernel copies per ISA level (a level the build left out stays empty).",
           f"const KernelSet<{op.args_struct}> kKernels = {{{{"]
    for ns, guard in ISA_LEVELS:
        entry = f"    {{{ns}::{op.kernel}_workspace, {ns}::{op.kernel}}},"
        if guard is None:
            out.append(entry)
        else:
            out += [f"#ifdef {guard}", entry, "#else", "    {},", "#endif"]
    out += ["}};", "", f"using {op.name}Executor = KernelExecutor<{op.args_struct}>;", ""]
    return out


def emit(op: Op) -> Tuple[str, str]:
    exe = f"{op.name}Executor"
    out: List[str] = [f"// {banner(op.path)}"]
    out += wrap(f"{op.c_name}: validator, executor and the exported C entry points. "
                f"{op.summary}", 97, "// ", "// ")
    out += ["#include <algorithm>", "#include <cstdint>", "#include <exception>", "#include <memory>",
            "#include <new>", "#include <string>", "",
            f'#include "aclnnop/aclnn_{op.snake}.h"', '#include "aclnn_cpu/executor.h"',
            '#include "aclnn_cpu/isa.h"', '#include "aclnn_cpu/kernel_executor.h"',
            f'#include "aclnn_cpu/ops/{op.snake}_args.h"',
            '#include "aclnn_cpu/product.h"', '#include "aclnn_cpu/status.h"',
            '#include "aclnn_cpu/tensor.h"', '#include "aclnn_cpu/validate.h"', "",
            "namespace aclnn_cpu {", "",
            f"// The kernels of ops/{op.kernel}.cpp, one copy per compiled ISA level."]
    for ns, guard in ISA_LEVELS:
        if guard:
            out.append(f"#ifdef {guard}")
        out += [f"namespace {ns} {{",
                f"uint64_t {op.kernel}_workspace(const {op.args_struct}& args);",
                f"aclnnStatus {op.kernel}(const {op.args_struct}& args, void* workspace);",
                f"}}  // namespace {ns}"]
        if guard:
            out.append("#endif")
    out += ["", "namespace {", "", f'constexpr const char* kOpName = "{op.c_name}";', ""]
    out += _dtype_sets(op)
    out += _kernel_set(op)
    out += _validator(op)
    out += ["", "}  // namespace", "}  // namespace aclnn_cpu", ""]

    # ---- phase 1 ----
    out.append(prototype(f"{op.c_name}GetWorkspaceSize", phase1_params(op), 0,
                         prefix='extern "C" ACLNN_API aclnnStatus ') + " {")
    out += ["  using namespace aclnn_cpu;", "  try {",
            "    if (workspaceSize == nullptr) {",
            '      return reject(kParamNullptr, kOpName, "workspaceSize must not be null");', "    }",
            "    if (executor == nullptr) {",
            '      return reject(kParamNullptr, kOpName, "executor must not be null");', "    }",
            "    *workspaceSize = 0;", "    *executor = nullptr;"]
    masked = [p for p in op.outputs if p.mask]
    if masked:
        out.append("    // A masked-off output is never touched: from here on it counts as absent.")
        for p in masked:
            out.append(f"    const aclTensor* const {_active(p)} = "
                       f"mask({p.mask.array}, {p.mask.index}) ? {p.name} : nullptr;")
    call = ", ".join(_active(p) for p in op.params)
    if _succeeds(op):
        out.append("    bool run_nothing = false;")
        call += ", &run_nothing"
    out += wrap(f"const aclnnStatus status = validate({call});", 95, "    ", "        ")
    out += ["    if (status != kSuccess) return status;"]
    if _succeeds(op):
        out += ["    if (run_nothing) {  // a succeed rule held: workspace 0, phase 2 computes nothing",
                f"      std::unique_ptr<{exe}> ex(new {exe}(kKernels));",
                "      ex->run_nothing = true;", "      ex->op_name = kOpName;",
                "      aclOpExecutor* const planned = register_executor(ex.get());",
                "      ex.release();  // the runtime's executor registry owns it now",
                "      *executor = planned;", "      return kSuccess;", "    }"]
    # After the document's rules (whose statuses come first): the kernels load whole elements.
    for p in op.params:
        if p.is_tensor:
            out.append(f'    if (const aclnnStatus failed = check_aligned(kOpName, "{p.name}", {_active(p)})) '
                       f'return failed;')
    out += ["",
            f"    std::unique_ptr<{exe}> ex(new {exe}(kKernels));",
            f"    {op.args_struct}& args = ex->args;"]
    for p in op.params:
        if p.is_tensor:
            var = _active(p)
            if p.may_be_absent:
                out.append(f"    args.{p.name} = present({var}) ? make_view({var}) : TensorView();")
            else:
                out.append(f"    args.{p.name} = make_view({var});")
        elif p.kind == "bool_array":
            out.append(f"    for (int64_t i = 0; i < {p.size}; ++i) args.{p.name}[i] = mask({p.name}, i);")
        elif p.kind == "scalar":
            out.append(f"    args.{p.name} = make_scalar_arg({p.name});")
        elif p.kind == "int_array":
            out.append(f"    args.{p.name} = make_int_array_arg({p.name});")
        else:
            out.append(f"    args.{p.name} = {p.name};")
    out += ["    ex->isa = active_isa();", "    ex->op_name = kOpName;",
            "    ex->workspace_size = ex->workspace_bytes();",
            "    aclOpExecutor* const planned = register_executor(ex.get());",
            "    ex.release();  // the runtime's executor registry owns it now",
            "    *workspaceSize = planned->workspace_size;", "    *executor = planned;",
            "    return kSuccess;",
            "  } catch (const std::bad_alloc&) {",
            '    return fail(kInner, "%s: out of memory", kOpName);',
            "  } catch (const std::exception& e) {",
            '    return fail(kInner, "%s: internal error: %s", kOpName, e.what());',
            "  } catch (...) {",
            '    return fail(kInner, "%s: internal error", kOpName);', "  }", "}", ""]
    # ---- phase 2 ----
    out.append(prototype(op.c_name, PHASE2_PARAMS, 0, prefix='extern "C" ACLNN_API aclnnStatus ') + " {")
    out += [f'  return aclnn_cpu::run_executor("{op.c_name}", workspace, workspaceSize, executor, stream);',
            "}", ""]
    return path_of(op), "\n".join(out)
