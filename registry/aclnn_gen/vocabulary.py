"""The project's vocabularies, each declared once: ISA levels, dtypes, product lines and limits.

Everything else reads them from here or from files generated from here:

| reader | what it takes | how |
| --- | --- | --- |
| `include/aclnn_cpu/vocabulary.h` | every vocabulary, for the runtime, kernels and entry points | generated (emit_vocabulary.py) |
| `include/acl/acl_data_type.h` | the public `aclDataType` enum that `acl/acl.h` includes | generated |
| `aclnn_cpu/_vocabulary.py` | dtype codes, NumPy and DLPack mappings, names, limits | generated |
| the op loader and emitters | dtype and product names, the limits | `model.py`, `analysis.py` import them |
| `setup.py` | the ISA levels and their compiler flags | imports this module (it compiles before the package exists) |

A new entry here reaches all of them with `python -m registry.aclnn_gen`; `check()` (run by the
generator) refuses a declaration that contradicts itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

# ---- limits -------------------------------------------------------------------------------------

# Most dims of a tensor operand: TensorView holds shape and strides in fixed arrays of this size,
# and the generated validators refuse more (161002) where no declared rule limits the rank.
MAX_DIMS = 8
# Most integers of an aclIntArray operand: its kernel-facing copy (IntArrayArg) is a fixed array,
# plain data like TensorView; the validators refuse longer arrays (161002).
MAX_INT_ARRAY = 64
# Most flags the Python API passes in one aclBoolArray (the C validators then require exactly
# the declared size of each bool array).
MAX_BOOL_ARRAY = 64

# ---- ISA levels ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class IsaLevel:
    """One ISA level: every ops/*.cpp and runtime/per_isa/*.cpp is compiled once per level, with
    the level's flags and -DACLNN_ISA_LEVEL=<index>, its kernels in namespace isa_<name>."""
    name: str                       # ACLNN_CPU_ISA / set_isa() value, object directory, namespace suffix
    enum: str                       # aclnn_cpu::Isa enumerator
    flags: Tuple[str, ...]          # compiler flags of the level's copies (none: the portable baseline)
    macro: Optional[str]            # defined by setup.py when the build compiled the level (None: always)
    # Flags of the AVX512-BF16 conversions the level adds when the compiler has them (simd.h
    # switches them on at run time where the CPU has them; setup.py then defines
    # ACLNN_HAVE_AVX512BF16).
    bf16_flags: Tuple[str, ...] = ()


# Lowest first; a level's index is its ACLNN_ISA_LEVEL and its aclnn_cpu::Isa value. Every level
# but the first is x86-64 only and built when the compiler accepts its flags.
ISA_LEVELS: Tuple[IsaLevel, ...] = (
    IsaLevel("baseline", "Baseline", (), None),
    IsaLevel("avx2", "Avx2", ("-mavx2", "-mfma", "-mf16c"), "ACLNN_HAVE_AVX2"),
    IsaLevel("avx512", "Avx512",
             ("-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma", "-mf16c"),
             "ACLNN_HAVE_AVX512", bf16_flags=("-mavx512bf16",)),
)

# ---- dtypes -------------------------------------------------------------------------------------

# DLPack type codes (dlpack.h, DLDataTypeCode).
DLPACK_INT, DLPACK_UINT, DLPACK_FLOAT, DLPACK_BFLOAT, DLPACK_COMPLEX, DLPACK_BOOL = 0, 1, 2, 4, 5, 6


@dataclass(frozen=True)
class Dtype:
    """An element type the library knows: registry YAMLs name it, tensors and scalars carry it."""
    name: str                       # registry, Python and message name
    acl: str                        # aclDataType enumerator of CANN's acl_base.h
    code: int                       # its value there
    enum: str                       # aclnn_cpu::DType enumerator
    size: int                       # bytes per element
    numpy: str                      # "<module>.<attribute>" of the NumPy dtype Python arrays use
    dlpack: Tuple[int, int]         # DLPack (type code, bits)


# In the order the loader lists them in its messages.
DTYPES: Tuple[Dtype, ...] = (
    Dtype("float32", "ACL_FLOAT", 0, "Float32", 4, "numpy.float32", (DLPACK_FLOAT, 32)),
    Dtype("float16", "ACL_FLOAT16", 1, "Float16", 2, "numpy.float16", (DLPACK_FLOAT, 16)),
    Dtype("bfloat16", "ACL_BF16", 27, "BFloat16", 2, "ml_dtypes.bfloat16", (DLPACK_BFLOAT, 16)),
    Dtype("float64", "ACL_DOUBLE", 11, "Float64", 8, "numpy.float64", (DLPACK_FLOAT, 64)),
    Dtype("int8", "ACL_INT8", 2, "Int8", 1, "numpy.int8", (DLPACK_INT, 8)),
    Dtype("int16", "ACL_INT16", 6, "Int16", 2, "numpy.int16", (DLPACK_INT, 16)),
    Dtype("int32", "ACL_INT32", 3, "Int32", 4, "numpy.int32", (DLPACK_INT, 32)),
    Dtype("int64", "ACL_INT64", 9, "Int64", 8, "numpy.int64", (DLPACK_INT, 64)),
    Dtype("uint8", "ACL_UINT8", 4, "UInt8", 1, "numpy.uint8", (DLPACK_UINT, 8)),
    Dtype("uint16", "ACL_UINT16", 7, "UInt16", 2, "numpy.uint16", (DLPACK_UINT, 16)),
    Dtype("uint32", "ACL_UINT32", 8, "UInt32", 4, "numpy.uint32", (DLPACK_UINT, 32)),
    Dtype("uint64", "ACL_UINT64", 10, "UInt64", 8, "numpy.uint64", (DLPACK_UINT, 64)),
    Dtype("bool", "ACL_BOOL", 12, "Bool", 1, "numpy.bool_", (DLPACK_BOOL, 8)),
    Dtype("complex64", "ACL_COMPLEX64", 16, "Complex64", 8, "numpy.complex64", (DLPACK_COMPLEX, 64)),
    Dtype("complex128", "ACL_COMPLEX128", 17, "Complex128", 16, "numpy.complex128",
          (DLPACK_COMPLEX, 128)),
)

# aclDataType enumerators of CANN that the library only names (tensors of these are refused):
# (enumerator, value). ACL_DT_UNDEFINED is also aclnn_cpu::DType::Undefined.
ACL_ONLY_DATA_TYPES: Tuple[Tuple[str, int], ...] = (
    ("ACL_DT_UNDEFINED", -1),
    ("ACL_STRING", 13),
    ("ACL_INT4", 29),
    ("ACL_UINT1", 30),
    ("ACL_COMPLEX32", 33),
)

# ---- product lines ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProductLine:
    """A product (SoC) line whose dtype rules the library emulates (the documents' rules differ
    per line: the Atlas training and inference series have no bfloat16)."""
    name: str                       # registry, aclInit, set_product() name
    enum: str                       # aclnn_cpu::Product enumerator
    soc: str                        # what aclrtGetSocName() reports: a real SoC of the line


# Real SoC names, one representative per line: Ascend910A (Atlas 800 training server, Atlas
# 300T), Ascend910B1 (Atlas A2 training series), Ascend310P3 (Atlas 300I Pro / 300V Pro cards).
PRODUCTS: Tuple[ProductLine, ...] = (
    ProductLine("atlas_training", "AtlasTraining", "Ascend910A"),
    ProductLine("atlas_a2", "AtlasA2", "Ascend910B1"),
    ProductLine("atlas_inference", "AtlasInference", "Ascend310P3"),
)
DEFAULT_PRODUCT = "atlas_a2"

SOURCE = "registry/aclnn_gen/vocabulary.py"


# ---- lookups and the self-check -----------------------------------------------------------------


def dtype(name: str) -> Dtype:
    for d in DTYPES:
        if d.name == name:
            return d
    raise KeyError(name)


def product(name: str) -> ProductLine:
    for p in PRODUCTS:
        if p.name == name:
            return p
    raise KeyError(name)


def acl_data_types() -> List[Tuple[str, int]]:
    """Every aclDataType enumerator (library dtypes and the others) by value."""
    return sorted([(d.acl, d.code) for d in DTYPES] + list(ACL_ONLY_DATA_TYPES),
                  key=lambda item: item[1])


def _duplicates(values) -> List:
    seen, twice = set(), []
    for v in values:
        if v in seen and v not in twice:
            twice.append(v)
        seen.add(v)
    return twice


class VocabularyError(ValueError):
    """The declarations above contradict themselves; str(error) names each contradiction."""


def check() -> None:
    """Raises VocabularyError naming each contradiction in the declarations above."""
    problems: List[str] = []

    def unique(what: str, values) -> None:
        for v in _duplicates(values):
            problems.append(f"{what} {v!r} is declared twice")

    unique("ISA level name", [lvl.name for lvl in ISA_LEVELS])
    unique("ISA level enumerator", [lvl.enum for lvl in ISA_LEVELS])
    if not ISA_LEVELS or ISA_LEVELS[0].flags or ISA_LEVELS[0].macro:
        problems.append("the first ISA level is the portable baseline: no flags, no macro")
    for lvl in ISA_LEVELS[1:]:
        if not lvl.flags or not lvl.macro:
            problems.append(f"ISA level {lvl.name!r} needs compiler flags and a macro")
    unique("dtype name", [d.name for d in DTYPES])
    unique("DType enumerator", [d.enum for d in DTYPES])
    unique("aclDataType enumerator", [name for name, _ in acl_data_types()])
    unique("aclDataType value", [code for _, code in acl_data_types()])
    unique("DLPack (code, bits)", [d.dlpack for d in DTYPES])
    for d in DTYPES:
        if d.dlpack[1] != 8 * d.size:
            problems.append(f"dtype {d.name!r}: DLPack bits {d.dlpack[1]} != 8 * size {d.size}")
        if d.numpy.count(".") != 1:
            problems.append(f"dtype {d.name!r}: numpy {d.numpy!r} is not '<module>.<attribute>'")
    unique("product name", [p.name for p in PRODUCTS])
    unique("Product enumerator", [p.enum for p in PRODUCTS])
    if DEFAULT_PRODUCT not in [p.name for p in PRODUCTS]:
        problems.append(f"the default product {DEFAULT_PRODUCT!r} is not declared")
    if problems:
        raise VocabularyError(f"{SOURCE}: " + "; ".join(problems))


def numpy_names() -> Dict[str, Tuple[str, str]]:
    """dtype name -> (module, attribute) of its NumPy dtype."""
    return {d.name: tuple(d.numpy.split(".")) for d in DTYPES}
