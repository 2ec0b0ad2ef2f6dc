"""The files generated from vocabulary.py: the C++ vocabulary header, the public aclDataType
enum, and the Python module the package, the bench and the tests read."""
from __future__ import annotations

from typing import Dict, List, Tuple

from . import vocabulary as v
from .analysis import banner

CPP_PATH = "include/aclnn_cpu/vocabulary.h"
ACL_PATH = "include/acl/acl_data_type.h"
PY_PATH = "aclnn_cpu/_vocabulary.py"


def _c_strings(names) -> str:
    return ", ".join(f'"{n}"' for n in names)


def _compiled_isa_flags() -> List[str]:
    out = [f"constexpr bool kIsaCompiled[kIsaCount] = {{"]
    for lvl in v.ISA_LEVELS:
        if lvl.macro is None:
            out.append(f"    true,   // {lvl.name}: always")
        else:
            out += [f"#ifdef {lvl.macro}", "    true,", "#else", "    false,", "#endif"]
    return out + ["};"]


def _dtype_size() -> List[str]:
    by_size: Dict[int, List[str]] = {}
    for d in v.DTYPES:
        by_size.setdefault(d.size, []).append(f"case DType::{d.enum}:")
    out = ["// Bytes per element; 0 for Undefined and any value outside the enum. Forced inline: kernel",
           "// objects are compiled once per ISA level, and an out-of-line copy of a header's inline",
           "// function is a weak symbol the linker may take from an AVX-512 object for baseline code.",
           "inline __attribute__((always_inline)) std::size_t dtype_size(DType t) {",
           "  switch (t) {"]
    for size in sorted(by_size):
        out.append(f"    {' '.join(by_size[size])} return {size};")
    return out + ["    default: return 0;", "  }", "}"]


def _isa_namespaces() -> List[str]:
    out = ["// A kernel translation unit (compiled with -DACLNN_ISA_LEVEL=<n>, see setup.py) puts its",
           "// kernels in ACLNN_ISA_NS and half.h's scalar conversions in ACLNN_HALF_NS, so the copies",
           "// of every level link side by side.",
           "#ifdef ACLNN_ISA_LEVEL"]
    for i, lvl in enumerate(v.ISA_LEVELS):
        out += [f"#{'if' if i == 0 else 'elif'} ACLNN_ISA_LEVEL == {i}",
                f"#define ACLNN_ISA_NS isa_{lvl.name}",
                f"#define ACLNN_HALF_NS half_{lvl.name}"]
    out += ["#else", '#error "unknown ACLNN_ISA_LEVEL"', "#endif", "#endif", ""]
    out += ["// X(name, Enumerator) for each level this build compiled, lowest first: declares or",
            "// dispatches to every level's copy of a function (isa_##name::f, case Isa::Enumerator)."]
    out.append("#define ACLNN_FOR_EACH_COMPILED_ISA(X) \\")
    out.append("  " + " ".join(f"ACLNN_ISA_COMPILED_{lvl.name}(X)" for lvl in v.ISA_LEVELS))
    for lvl in v.ISA_LEVELS:
        entry = f"#define ACLNN_ISA_COMPILED_{lvl.name}(X) X({lvl.name}, {lvl.enum})"
        if lvl.macro is None:
            out.append(entry)
        else:
            out += [f"#ifdef {lvl.macro}", entry, "#else",
                    f"#define ACLNN_ISA_COMPILED_{lvl.name}(X)", "#endif"]
    return out


def emit_cpp() -> Tuple[str, str]:
    isa_enum = ", ".join(f"{lvl.enum} = {i}" for i, lvl in enumerate(v.ISA_LEVELS))
    product_enum = ", ".join(f"{p.enum} = {i}" for i, p in enumerate(v.PRODUCTS))
    default = v.product(v.DEFAULT_PRODUCT)
    dtypes = sorted(v.DTYPES, key=lambda d: d.code)
    out = [f"// {banner(v.SOURCE)}",
           "// The vocabularies the runtime, the kernels and the generated entry points share: limits,",
           "// ISA levels, dtypes and product lines. Constants, enums and one always-inline function:",
           "// kernel objects compiled once per ISA level define no shared symbol from here.",
           "#pragma once", "#include <cstddef>", "#include <cstdint>", "",
           "namespace aclnn_cpu {", "",
           "// ---- limits",
           "// Most dims of a tensor operand: TensorView's fixed arrays hold this many, and the",
           "// validators refuse more (161002) where no declared rule limits the rank.",
           f"constexpr int kMaxDims = {v.MAX_DIMS};",
           "// Most integers of an aclIntArray operand: IntArrayArg, its kernel-facing copy, is a fixed",
           "// array, plain data like TensorView; the validators refuse longer arrays (161002).",
           f"constexpr int kMaxIntArray = {v.MAX_INT_ARRAY};", "",
           "// ---- ISA levels, lowest first; a level's value is its ACLNN_ISA_LEVEL",
           f"enum class Isa : int {{ {isa_enum} }};",
           f"constexpr int kIsaCount = {len(v.ISA_LEVELS)};",
           f"constexpr Isa kIsaLevels[kIsaCount] = {{"
           f"{', '.join(f'Isa::{lvl.enum}' for lvl in v.ISA_LEVELS)}}};",
           f"constexpr const char* kIsaNames[kIsaCount] = {{{_c_strings(lvl.name for lvl in v.ISA_LEVELS)}}};",
           "// Whether this build compiled each level's kernels (setup.py defines the macros of the",
           "// levels its compiler accepts)."]
    out += _compiled_isa_flags()
    out += ["", "// ---- dtypes; values are those of the public aclDataType enum (acl/acl.h)",
            "enum class DType : int32_t {", "  Undefined = -1,"]
    out += [f"  {d.enum} = {d.code}," for d in dtypes]
    out += ["};",
            f"constexpr int kDTypeCount = {len(v.DTYPES)};",
            f"constexpr DType kDTypes[kDTypeCount] = {{{', '.join(f'DType::{d.enum}' for d in v.DTYPES)}}};",
            f"constexpr const char* kDTypeNames[kDTypeCount] = {{{_c_strings(d.name for d in v.DTYPES)}}};",
            ""]
    out += _dtype_size()
    out += ["", "// ---- product lines whose dtype rules are emulated; process-wide, see product.h",
            f"enum class Product : int {{ {product_enum} }};",
            f"constexpr int kProductCount = {len(v.PRODUCTS)};",
            f"constexpr Product kProducts[kProductCount] = {{"
            f"{', '.join(f'Product::{p.enum}' for p in v.PRODUCTS)}}};",
            f"constexpr const char* kProductNames[kProductCount] = {{{_c_strings(p.name for p in v.PRODUCTS)}}};",
            "// What aclrtGetSocName() reports for each line: a real SoC of it.",
            f"constexpr const char* kSocNames[kProductCount] = {{{_c_strings(p.soc for p in v.PRODUCTS)}}};",
            f"constexpr Product kDefaultProduct = Product::{default.enum};", "",
            "}  // namespace aclnn_cpu", ""]
    out += _isa_namespaces()
    out.append("")
    return CPP_PATH, "\n".join(_wrap_long(out))


def _wrap_long(lines: List[str]) -> List[str]:
    """Breaks `constexpr T name[N] = {a, b, ...};` lines longer than 100 columns after a comma."""
    out: List[str] = []
    for line in lines:
        if len(line) <= 100 or "= {" not in line:
            out.append(line)
            continue
        head, items = line.split("= {", 1)
        current = head + "= {"
        for item in items.split(", "):
            piece = item if current.endswith("{") else ", " + item
            if len(current) + len(piece) > 99:
                out.append(current + ",")
                current = "    " + item
            else:
                current += piece
        out.append(current)
    return out


def emit_acl() -> Tuple[str, str]:
    entries = v.acl_data_types()
    out = [f"/* {banner(v.SOURCE)} */",
           "/*",
           " * acl/acl_data_type.h: aclDataType, with the names and values of CANN's acl_base.h. acl/acl.h",
           " * includes it; tensors and scalars of the dtypes aclnn-cpu does not compute with are refused",
           " * by the operators that do not list them.",
           " */",
           "#ifndef ACLNN_CPU_ACL_ACL_DATA_TYPE_H_", "#define ACLNN_CPU_ACL_ACL_DATA_TYPE_H_", "",
           "typedef enum {"]
    out += [f"  {name} = {code}{',' if i + 1 < len(entries) else ''}"
            for i, (name, code) in enumerate(entries)]
    out += ["} aclDataType;", "", "#endif /* ACLNN_CPU_ACL_ACL_DATA_TYPE_H_ */", ""]
    return ACL_PATH, "\n".join(out)


def emit_py() -> Tuple[str, str]:
    def table(name: str, comment: str, items: List[str]) -> List[str]:
        return ["", f"# {comment}", f"{name} = {{"] + [f"    {item}," for item in items] + ["}"]

    out = [f"# {banner(v.SOURCE)}",
           '"""The library\'s vocabularies as plain literals: dtypes (aclDataType codes, NumPy and DLPack',
           "mappings), ISA levels, product lines and limits, for the Python glue, the bench and the tests.",
           '"""', "import importlib", "", "import numpy", "",
           f"MAX_DIMS = {v.MAX_DIMS}  # most dims of a tensor operand",
           f"MAX_INT_ARRAY = {v.MAX_INT_ARRAY}  # most integers of an aclIntArray",
           f"MAX_BOOL_ARRAY = {v.MAX_BOOL_ARRAY}  # most flags of an aclBoolArray the Python API passes",
           "",
           "# ISA levels, lowest first (ACLNN_CPU_ISA values; a level's index is its ACLNN_ISA_LEVEL).",
           "ISA_LEVELS = (" + ", ".join(repr(lvl.name) for lvl in v.ISA_LEVELS) + ")"]
    out += table("ISA_FLAGS", "level -> compiler flags of its kernel copies",
                 [f"{lvl.name!r}: {lvl.flags!r}" for lvl in v.ISA_LEVELS])
    out += table("ISA_MACROS", "level -> the macro a build that compiled it defines (None: always built)",
                 [f"{lvl.name!r}: {lvl.macro!r}" for lvl in v.ISA_LEVELS])
    out += ["", "# Product lines, in aclnn_cpu::Product order, and the default one.",
            "PRODUCTS = (" + ", ".join(repr(p.name) for p in v.PRODUCTS) + ")",
            f"DEFAULT_PRODUCT = {v.DEFAULT_PRODUCT!r}"]
    out += table("DTYPE_CODES", "dtype name -> aclDataType code (acl/acl.h)",
                 [f"{d.name!r}: {d.code}" for d in v.DTYPES])
    out += table("ACL_DATA_TYPES", "every aclDataType enumerator -> its code",
                 [f"{name!r}: {code}" for name, code in v.acl_data_types()])
    out += table("NUMPY_DTYPES", "dtype name -> (module, attribute) of its NumPy dtype",
                 [f"{name!r}: {where!r}" for name, where in v.numpy_names().items()])
    out += table("DLPACK_DTYPES", "dtype name -> DLPack (type code, bits)",
                 [f"{d.name!r}: {d.dlpack!r}" for d in v.DTYPES])
    out += ["",
            "",
            "def numpy_dtype(name):",
            '    """The NumPy dtype of a dtype name (ml_dtypes.bfloat16 for "bfloat16")."""',
            "    module, attribute = NUMPY_DTYPES[name]",
            "    return numpy.dtype(getattr(importlib.import_module(module), attribute))",
            ""]
    return PY_PATH, "\n".join(out)


EMITTERS = (emit_cpp, emit_acl, emit_py)
