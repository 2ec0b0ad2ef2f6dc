"""Typed data model of one registry op, built by loader.py and read by the emitters.

Everything here is plain, frozen data with the source line it came from, so an emitter never
re-parses YAML and every later complaint can still point at `registry/<op>.yaml:<line>`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Tuple, Union

if TYPE_CHECKING:  # the benchmark section's model lives beside its reader
    from .benchmark import Benchmark

from . import vocabulary

# ---- vocabularies -------------------------------------------------------------------------------

# Product lines and dtype names the YAMLs may use (declared in vocabulary.py), with their C++
# enumerators: aclnn_cpu::Product and aclnn_cpu::DType (include/aclnn_cpu/vocabulary.h).
PRODUCTS = tuple(p.name for p in vocabulary.PRODUCTS)
PRODUCT_ENUM = {p.name: f"Product::{p.enum}" for p in vocabulary.PRODUCTS}
DTYPES = {d.name: f"DType::{d.enum}" for d in vocabulary.DTYPES}

PARAM_KINDS = ("input", "output", "int64", "double", "bool", "scalar", "int_array", "bool_array")
TENSOR_KINDS = ("input", "output")
# Kinds passed by pointer besides tensors: null-checked by the generated validator (161001)
# unless the param is optional.
HANDLE_KINDS = ("scalar", "int_array")
# Kinds that may be optional (null / None).
OPTIONAL_KINDS = ("input",) + HANDLE_KINDS

STATUS_CODES = {"nullptr": 161001, "invalid": 161002}
STATUS_CONSTANTS = {"nullptr": "kParamNullptr", "invalid": "kParamInvalid"}

# Helpers of include/aclnn_cpu/validate.h that C++ rule expressions may call.
CPP_HELPERS = (
    "rank", "numel", "dim", "dtype", "shape", "present", "mask", "product", "to_string",
    "checked_mul", "broadcasts_to", "scalar_value", "int_values", "dims_in_range", "dims_unique",
    "trailing_numel", "format_name", "is_private_format",
)

# ---- params -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MaskRef:
    """An output's switch: element `index` of the bool_array param `array`."""
    array: str
    index: int


@dataclass(frozen=True)
class Alloc:
    """How the functional Python API allocates an output: Python expressions over Python names,
    and optionally the Python name of a tensor input whose memory order (channels-last, a
    transpose) the output takes when that input is dense and has the output's shape."""
    shape: str
    dtype: str
    layout: Optional[str] = None


PyDefault = Union[None, bool, int, float, str, Tuple["PyDefault", ...]]


@dataclass(frozen=True)
class Param:
    name: str                      # C name, exactly as in the document's prototype
    kind: str                      # one of PARAM_KINDS
    py_name: str                   # Python name (snake_case of name unless `py:` overrides)
    line: int
    doc: str = ""
    optional: bool = False         # input, scalar or int_array may be null / None (GroupNorm gamma)
    mask: Optional[MaskRef] = None  # outputs only
    has_default: bool = False
    default: PyDefault = None      # Python default of the functional API
    size: int = 0                  # bool_array: required number of flags
    alloc: Optional[Alloc] = None  # outputs only

    @property
    def is_tensor(self) -> bool:
        return self.kind in TENSOR_KINDS

    @property
    def is_handle(self) -> bool:
        """A scalar or integer array: passed by pointer, null-checked unless optional."""
        return self.kind in HANDLE_KINDS

    @property
    def may_be_absent(self) -> bool:
        """True when the validator can see this tensor as null after the null checks."""
        return self.optional or self.mask is not None


@dataclass(frozen=True)
class PythonKwarg:
    """A keyword-only argument of the functional API that is not a C parameter (out_dtype)."""
    name: str
    default: PyDefault
    doc: str
    line: int


@dataclass(frozen=True)
class DtypeSet:
    name: str
    per_product: Tuple[Tuple[str, Tuple[str, ...]], ...]  # ((product, (dtype, ...)), ...)
    line: int

    def for_product(self, product: str) -> Tuple[str, ...]:
        return dict(self.per_product).get(product, ())


# ---- rules --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """Common part of every rule; `kind` selects the subclass."""
    kind: str
    line: int
    status: str                    # "nullptr" | "invalid"
    when: Optional[str]            # C++ bool expression guarding the rule
    message: Optional[str]         # template overriding the kind's message; {expr} placeholders
    doc: str

    @property
    def status_code(self) -> int:
        return STATUS_CODES[self.status]

    def tensor_params(self) -> Tuple[str, ...]:
        return ()


@dataclass(frozen=True)
class TensorListRule(Rule):
    params: Tuple[str, ...] = ()

    def tensor_params(self) -> Tuple[str, ...]:
        return self.params


@dataclass(frozen=True)
class NotNull(TensorListRule):
    pass


@dataclass(frozen=True)
class MaxRank(TensorListRule):
    rank: int = vocabulary.MAX_DIMS


@dataclass(frozen=True)
class RankEquals(TensorListRule):
    rank: int = 0


@dataclass(frozen=True)
class DtypeIn(TensorListRule):
    set: str = ""


@dataclass(frozen=True)
class SameDtype(TensorListRule):
    pass


@dataclass(frozen=True)
class SameShape(TensorListRule):
    pass


@dataclass(frozen=True)
class ShapeEquals(TensorListRule):
    shape: str = ""                # C++ expression of type Shape


@dataclass(frozen=True)
class NumelEquals(TensorListRule):
    value: str = ""                # C++ int64 expression


@dataclass(frozen=True)
class BroadcastsTo(TensorListRule):
    target: str = ""               # tensor param whose shape the params must broadcast to


@dataclass(frozen=True)
class DimRef:
    param: str
    index: int

    def __str__(self) -> str:
        return f"{self.param}[{self.index}]"


@dataclass(frozen=True)
class DimEquals(Rule):
    dims: Tuple[DimRef, ...] = ()

    def tensor_params(self) -> Tuple[str, ...]:
        return tuple(dict.fromkeys(d.param for d in self.dims))


@dataclass(frozen=True)
class ValueIn(Rule):
    params: Tuple[str, ...] = ()   # int64 params
    values: Tuple[int, ...] = ()


@dataclass(frozen=True)
class Check(Rule):
    check: str = ""                # C++ bool expression that must hold


@dataclass(frozen=True)
class Succeed(Rule):
    """When `when` holds, phase 1 succeeds at once: workspace 0, no later rule (declared or
    implicit) is checked and phase 2 computes nothing (Softmax's empty self)."""

    @property
    def status_code(self) -> int:
        return 0


# ---- example and op -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ExampleTensor:
    shape: Tuple[int, ...]
    data: Tuple[float, ...]


@dataclass(frozen=True)
class Example:
    dtype: str
    inputs: Tuple[Tuple[str, ExampleTensor], ...]        # (C name, tensor), in param order
    attributes: Tuple[Tuple[str, PyDefault], ...]        # (C name, value), in param order
    line: int


@dataclass(frozen=True)
class Op:
    name: str                      # SoftmaxBackward
    python: str                    # softmax_backward
    kernel: str                    # softmax_backward
    source: str                    # the CANN document the op follows, by name
    summary: str
    description: str
    products: Tuple[str, ...]
    dtype_sets: Tuple[DtypeSet, ...]
    params: Tuple[Param, ...]
    python_kwargs: Tuple[PythonKwarg, ...]
    rules: Tuple[Rule, ...]
    example: Optional[Example]
    path: str                      # "registry/softmax_backward.yaml" (relative to the root)
    snake: str = field(default="")  # softmax_backward (file names)
    # Lines of the name, python and kernel values, for the clashes only load_registry sees.
    key_lines: Tuple[Tuple[str, int], ...] = ()
    benchmark: Optional["Benchmark"] = None  # the optional `benchmark` section (benchmark.py)

    @property
    def c_name(self) -> str:
        return "aclnn" + self.name

    @property
    def args_struct(self) -> str:
        return self.name + "Args"

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def dtype_set(self, name: str) -> DtypeSet:
        for s in self.dtype_sets:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def tensors(self) -> Tuple[Param, ...]:
        return tuple(p for p in self.params if p.is_tensor)

    @property
    def inputs(self) -> Tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind == "input")

    @property
    def outputs(self) -> Tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind == "output")

    @property
    def attributes(self) -> Tuple[Param, ...]:
        return tuple(p for p in self.params if not p.is_tensor)
