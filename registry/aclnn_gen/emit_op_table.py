"""include/aclnn/aclnn_cpu_op_table.h: every op of the build behind one signature, for drivers
that call any op by name (the C API tests' op runner): its parameters in C order with their
kinds, and both phases taking their arguments from an ArgSource. C++ only."""
from __future__ import annotations

from typing import List, Tuple

from . import emit_c_header
from .analysis import banner
from .model import Op

PATH = "include/aclnn/aclnn_cpu_op_table.h"

# param kind -> the ArgSource accessor that yields its C argument
ACCESSOR = {"input": "tensor", "output": "tensor", "int64": "int64", "double": "real",
            "bool": "flag", "scalar": "scalar", "int_array": "int_array", "bool_array": "bool_array"}


def _plan(op: Op) -> List[str]:
    args = [f'a.{ACCESSOR[p.kind]}("{p.name}")' for p in op.params] + ["workspace_size", "executor"]
    lines = [f"inline aclnnStatus {op.name}GetWorkspaceSize(const ArgSource& a, uint64_t* workspace_size,",
             f"{' ' * (36 + len(op.name))}aclOpExecutor** executor) {{",
             f"  return {op.c_name}GetWorkspaceSize("]
    lines += [f"      {arg}," for arg in args[:-1]] + [f"      {args[-1]});", "}", ""]
    return lines


def emit(ops: List[Op]) -> Tuple[str, str]:
    out = [f"// {banner('registry/*.yaml')}",
           "// Every op of this build, for drivers that call any op by name (the C API tests' op",
           "// runner): its C parameters in order with their kinds, and both phases behind one",
           "// signature that takes the arguments from an ArgSource. C++ only.",
           "#ifndef ACLNN_CPU_OP_TABLE_H_", "#define ACLNN_CPU_OP_TABLE_H_", "",
           "#ifdef __cplusplus", "#include <cstdint>", "#include <cstring>", ""]
    out += [f'#include "{emit_c_header.path_of(op)[len("include/"):]}"' for op in ops]
    out += ["", "namespace aclnn_cpu_op_table {", "",
            "// A driver's arguments, by C parameter name.",
            "struct ArgSource {",
            "  virtual ~ArgSource() = default;",
            "  virtual aclTensor* tensor(const char* param) const = 0;",
            "  virtual int64_t int64(const char* param) const = 0;",
            "  virtual double real(const char* param) const = 0;",
            "  virtual bool flag(const char* param) const = 0;",
            "  virtual aclScalar* scalar(const char* param) const = 0;",
            "  virtual aclIntArray* int_array(const char* param) const = 0;",
            "  virtual aclBoolArray* bool_array(const char* param) const = 0;",
            "};", "",
            "struct Param {",
            "  const char* name;  // as in the C prototype",
            "  const char* kind;  // input output int64 double bool scalar int_array bool_array",
            "};", "",
            "struct OpEntry {",
            "  const char* name;  // the aclnn name without \"aclnn\"",
            "  const Param* params;",
            "  int param_count;",
            "  aclnnStatus (*get_workspace_size)(const ArgSource&, uint64_t*, aclOpExecutor**);",
            "  aclnnStatus (*run)(void*, uint64_t, aclOpExecutor*, aclrtStream);",
            "};", ""]
    for op in ops:
        out += _plan(op)
        out += [f"inline constexpr Param k{op.name}Params[] = {{"]
        out += [f'    {{"{p.name}", "{p.kind}"}},' for p in op.params] + ["};", ""]
    out += ["inline constexpr OpEntry kOps[] = {"]
    out += [f'    {{"{op.name}", k{op.name}Params, {len(op.params)}, &{op.name}GetWorkspaceSize, &{op.c_name}}},'
            for op in ops]
    out += ["};", "",
            "// The entry of an op (\"SoftmaxBackward\"), or null.",
            "inline const OpEntry* find_op(const char* name) {",
            "  for (const OpEntry& op : kOps) {",
            "    if (std::strcmp(op.name, name) == 0) return &op;",
            "  }",
            "  return nullptr;",
            "}", "",
            "}  // namespace aclnn_cpu_op_table",
            "#endif  // __cplusplus", "",
            "#endif  // ACLNN_CPU_OP_TABLE_H_", ""]
    return PATH, "\n".join(out)
