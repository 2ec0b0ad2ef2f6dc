"""Reader of ATK case files (`atk_aclnn<Op>.json`) and the deterministic data they describe.

An ATK case file is a JSON array of cases. A case names its op (`aclnn_name`, with or without
the `aclnn` prefix), its accuracy standard (`standard.acc`) and an ordered list `inputs`: each
element is a tensor or attribute entry, or a nested list of entries forming one list-valued
argument (`outputMask`). The entries' own `name`s are the executor's keywords, not the op's C
parameter names; arguments map onto the op by position (docs/golden.md).

`range_values` of a tensor entry:
- `[lo, hi]` (two numbers): uniform in [lo, hi];
- `["-inf", "inf"]`: uniform over the dtype's whole finite range;
- `["inf"]`, `["-inf"]`, `["nan"]`: every element that value; `["null"]`: an empty tensor
  (numel 0: the first dim of the shape becomes 0);
- `{"name": "nd", "mean": [a, b], "std": [c, d]}`: normal, with its mean and standard deviation
  drawn uniformly from those intervals;
- a bare number or `"inf"`/`"-inf"`/`"nan"`: every element that value (a constant fill).

An entry with `"required": false` and `range_values` null is left out: an optional tensor
becomes absent (null), an attribute takes the op's default. Of an attribute entry: the value itself; a one-element list is that element; a two-element list
of numbers is a value drawn uniformly from that interval (an integer when both ends are
integers); `"true"`/`"false"` strings are booleans.

Values are drawn from NumPy's PCG64 seeded with (seed, case id, argument position), so a case's
data depend only on the seed and the case, never on which other cases run.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple, Union

import ml_dtypes
import numpy as np

# ATK dtype spellings (and the NumPy names, which TTK's CSVs use) -> NumPy dtypes.
TENSOR_DTYPES = {
    "fp32": np.dtype(np.float32), "float32": np.dtype(np.float32), "float": np.dtype(np.float32),
    "fp16": np.dtype(np.float16), "float16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16), "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "fp64": np.dtype(np.float64), "float64": np.dtype(np.float64), "double": np.dtype(np.float64),
    "int8": np.dtype(np.int8), "uint8": np.dtype(np.uint8), "int16": np.dtype(np.int16),
    "uint16": np.dtype(np.uint16), "int32": np.dtype(np.int32), "uint32": np.dtype(np.uint32),
    "int64": np.dtype(np.int64), "uint64": np.dtype(np.uint64), "bool": np.dtype(np.bool_),
}
TENSOR_TYPES = ("tensor",)
ATTR_TYPES = ("attr", "scalar")
LIST_TYPES = ("attrs", "attr_tuple", "scalars", "scalar_tuple", "tensors", "tensor_tuple")
SPECIAL_VALUES = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
CHUNK = 1 << 22  # elements drawn per step, so a 1 GB tensor needs no 2 GB float64 temporary


class CaseError(ValueError):
    """A case (or a whole case file) that cannot be read; the message says what and where."""


def dtype_name(dtype) -> str:
    dtype = np.dtype(dtype)
    return "bfloat16" if dtype == np.dtype(ml_dtypes.bfloat16) else dtype.name


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype of an ATK or NumPy dtype name; CaseError for an unknown one."""
    try:
        return TENSOR_DTYPES[str(name).lower()]
    except KeyError:
        raise CaseError(f"unknown dtype {name!r}") from None


# ---- value distributions -------------------------------------------------------------------

@dataclass(frozen=True)
class Uniform:
    low: float
    high: float
    whole_range: bool = False  # ["-inf", "inf"]: the dtype's finite range

    def describe(self) -> dict:
        if self.whole_range:
            return {"kind": "uniform", "range": "finite range of the dtype",
                    "low": self.low, "high": self.high}
        return {"kind": "uniform", "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Normal:
    mean_range: Tuple[float, float]
    std_range: Tuple[float, float]

    def describe(self) -> dict:
        return {"kind": "normal", "mean_range": list(self.mean_range), "std_range": list(self.std_range)}


@dataclass(frozen=True)
class Fill:
    value: float

    def describe(self) -> dict:
        return {"kind": "fill", "value": json_number(self.value)}


@dataclass(frozen=True)
class Empty:
    def describe(self) -> dict:
        return {"kind": "empty"}


Distribution = Union[Uniform, Normal, Fill, Empty]


def _number(value, where: str) -> float:
    if isinstance(value, bool):
        raise CaseError(f"{where}: {value!r} is not a number")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in SPECIAL_VALUES:
        return SPECIAL_VALUES[value.strip().lower()]
    raise CaseError(f"{where}: {value!r} is not a number")


def json_number(value: float):
    """inf/nan as the strings the case files use (JSON has no such numbers)."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _interval(value, where: str) -> Tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise CaseError(f"{where}: expected [low, high], got {value!r}")
    low, high = _number(value[0], where), _number(value[1], where)
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise CaseError(f"{where}: [{value[0]}, {value[1]}] is not a finite interval")
    return low, high


def parse_distribution(spec, dtype: np.dtype, where: str) -> Distribution:
    """The distribution a tensor entry's `range_values` describes."""
    if isinstance(spec, dict):
        if str(spec.get("name", "")).lower() != "nd":
            raise CaseError(f"{where}: unknown distribution {spec.get('name')!r} (known: 'nd')")
        mean, std = _interval(spec.get("mean"), where + " mean"), _interval(spec.get("std"), where + " std")
        if std[0] < 0:
            raise CaseError(f"{where}: negative standard deviation {std[0]}")
        return Normal(mean, std)
    if isinstance(spec, list):
        words = [s.strip().lower() if isinstance(s, str) else s for s in spec]
        if words == ["null"]:
            return Empty()
        if len(spec) == 1:
            return Fill(_number(spec[0], where))
        if words == ["-inf", "inf"]:
            if dtype.kind != "f" and dtype != np.dtype(ml_dtypes.bfloat16):
                info = np.iinfo(dtype)
                return Uniform(float(info.min), float(info.max), whole_range=True)
            limit = float(ml_dtypes.finfo(dtype).max)
            return Uniform(-limit, limit, whole_range=True)
        low, high = _interval(spec, where)
        return Uniform(low, high)
    if spec is None or isinstance(spec, bool):
        raise CaseError(f"{where}: range_values {spec!r} describes no tensor values")
    return Fill(_number(spec, where))


def stream(seed: int, case_id: int, position: int) -> np.random.Generator:
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(case_id) & 0xFFFFFFFF, position])


def draw_tensor(dist: Distribution, shape: Sequence[int], dtype: np.dtype,
                rng: np.random.Generator) -> Tuple[np.ndarray, dict]:
    """The tensor's values (C order, rounded to dtype to nearest even) and what was drawn."""
    described = dist.describe()
    out = np.empty(tuple(shape), dtype=dtype)
    flat = out.reshape(-1)
    if isinstance(dist, Empty):
        return out, described
    if isinstance(dist, Fill):
        flat[...] = np.asarray(dist.value, dtype=np.float64).astype(dtype)
        return out, described
    if isinstance(dist, Normal):
        mean = float(rng.uniform(*dist.mean_range))
        std = float(rng.uniform(*dist.std_range))
        described.update(mean=mean, std=std)
    integral = dtype.kind in "iub"
    for start in range(0, flat.size, CHUNK):
        count = min(CHUNK, flat.size - start)
        if isinstance(dist, Normal):
            values = rng.normal(mean, std, count)
        elif integral:
            values = rng.integers(int(dist.low), int(dist.high), count, endpoint=True)
        elif dist.whole_range:
            # scaled, as high - low of float64's whole range would overflow
            values = rng.uniform(-1.0, 1.0, count) * dist.high
        else:
            values = rng.uniform(dist.low, dist.high, count)
        if not integral:
            limit = float(ml_dtypes.finfo(dtype).max)
            np.clip(values, -limit, limit, out=values)  # never round a drawn value up to inf
        flat[start:start + count] = values.astype(dtype)
    return out, described


# ---- cases ---------------------------------------------------------------------------------

@dataclass
class Argument:
    """One element of a case's `inputs`: a tensor, an attribute, or a list of attributes."""
    position: int
    label: str            # the case file's own name (`x`, `Output`, `outputMask`)
    kind: str             # "tensor" | "attr" | "list"
    dtype: Optional[np.dtype] = None      # tensors
    shape: Optional[Tuple[int, ...]] = None
    distribution: Optional[Distribution] = None
    value: Any = None                      # attrs (a list for "list")
    attr_draw: Any = None                  # a two-ended attribute interval to draw from
    required: bool = True


@dataclass
class Case:
    id: int
    aclnn_name: str
    standard: str                  # "single" | "double"
    arguments: List[Argument]
    source: str = ""
    extra: dict = field(default_factory=dict)


def aclnn_name(name: str) -> str:
    """`PreluBackward` and `aclnnPreluBackward` both name aclnnPreluBackward."""
    return name if name.startswith("aclnn") else "aclnn" + name


def standard_of(acc) -> str:
    """`standard.acc` -> "single" or "double" (ATK's rule: a name containing "benchmark" is the
    double benchmark; `single_bm`, `default` and the dict form `{"single_bm": {...}}` single)."""
    name = next(iter(acc), "") if isinstance(acc, dict) else str(acc or "")
    return "double" if "benchmark" in name.lower() else "single"


def parse_bool(value, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise CaseError(f"{where}: {value!r} is not a boolean")


def _attr_value(entry: dict, where: str):
    """(value, interval) of an attribute entry: the literal, or an interval to draw from later."""
    raw = entry.get("range_values")
    dtype = str(entry.get("dtype", "")).lower()
    if isinstance(raw, list):
        if len(raw) == 1:
            raw = raw[0]
        elif len(raw) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw):
            low, high = raw
            if low > high:
                raise CaseError(f"{where}: [{low}, {high}] is not an interval")
            return None, (low, high)
        else:
            raise CaseError(f"{where}: attribute range_values {raw!r} is neither a value nor [low, high]")
    if dtype in ("bool", "attr_bool"):
        return parse_bool(raw, where), None
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true", None
    if isinstance(raw, str) and raw.strip().lower() in SPECIAL_VALUES:
        return SPECIAL_VALUES[raw.strip().lower()], None
    if dtype in ("int", "int64", "int32") and isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    return raw, None


def _shape(entry: dict, where: str) -> Tuple[int, ...]:
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                              for d in shape):
        raise CaseError(f"{where}: shape {shape!r} is not a list of non-negative integers")
    return tuple(shape)


def _argument(position: int, element, where: str) -> Argument:
    if isinstance(element, list):
        if not element or not all(isinstance(e, dict) for e in element):
            raise CaseError(f"{where}: a list argument must hold entry objects")
        items = [_argument(position, e, f"{where}[{i}]") for i, e in enumerate(element)]
        if any(item.kind != "attr" for item in items):
            raise CaseError(f"{where}: list arguments of tensors are not supported")
        label = items[0].label
        if all(not i.required and i.value is None for i in items):
            return Argument(position, label, "list", required=False)  # the op's default applies
        return Argument(position, label, "list", value=[i.value for i in items],
                        attr_draw=[i.attr_draw for i in items] if any(i.attr_draw for i in items) else None)
    if not isinstance(element, dict):
        raise CaseError(f"{where}: expected an entry object, got {type(element).__name__}")
    label = element.get("name")
    kind = element.get("type")
    if not isinstance(label, str) or not isinstance(kind, str):
        raise CaseError(f"{where}: an entry needs a string 'name' and 'type'")
    where = f"{where} ({label})"
    required = element.get("required", True)
    required = parse_bool(required, where) if required is not None else True
    if kind in TENSOR_TYPES:
        if element.get("range_values") is None and not required:
            return Argument(position, label, "tensor", required=False)  # an optional tensor left out
        dtype = numpy_dtype(element.get("dtype"))
        shape = _shape(element, where)
        dist = parse_distribution(element.get("range_values"), dtype, where)
        if isinstance(dist, Empty):
            shape = (0,) + shape[1:] if shape else (0,)
        return Argument(position, label, "tensor", dtype=dtype, shape=shape, distribution=dist, required=required)
    if kind in ATTR_TYPES or kind in LIST_TYPES:
        if element.get("range_values") is None and not required:
            return Argument(position, label, "attr", required=False)  # the op's default applies
        value, draw = _attr_value(element, where)
        return Argument(position, label, "attr", value=value, attr_draw=draw, required=required)
    raise CaseError(f"{where}: unknown entry type {kind!r}")


def parse_case(raw, source: str = "") -> Case:
    """A Case from one JSON object of a case file; CaseError says what is wrong with it."""
    if not isinstance(raw, dict):
        raise CaseError(f"a case must be a JSON object, got {type(raw).__name__}")
    case_id = raw.get("id")
    if not isinstance(case_id, int) or isinstance(case_id, bool) or case_id < 0:
        raise CaseError(f"case id {case_id!r} is not a non-negative integer")
    name = raw.get("aclnn_name")
    if not isinstance(name, str) or not name:
        raise CaseError(f"case {case_id}: no 'aclnn_name'")
    inputs = raw.get("inputs")
    if not isinstance(inputs, list):
        raise CaseError(f"case {case_id}: 'inputs' is not a list")
    standard = raw.get("standard") or {}
    arguments = [_argument(i, element, f"case {case_id} input {i}") for i, element in enumerate(inputs)]
    extra = {k: raw[k] for k in ("name", "api_type") if k in raw}
    return Case(case_id, aclnn_name(name), standard_of(standard.get("acc") if isinstance(standard, dict) else None),
                arguments, source, extra)


def read_case_file(path: str) -> list:
    """The raw case objects of one file; CaseError for unreadable or malformed JSON."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except OSError as e:
        raise CaseError(f"{path}: cannot read ({e.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CaseError(f"{path}: not valid JSON ({e})") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise CaseError(f"{path}: a case file holds a JSON array of cases")
    return data


def case_files(paths: Sequence[str]) -> List[str]:
    """The files named, with a folder standing for its *.json files in name order."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            found = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".json"))
            if not found:
                raise CaseError(f"{path}: a folder without .json case files")
            files += found
        else:
            files.append(path)
    return files


def draw_attributes(case: Case, seed: int) -> None:
    """Replace attribute intervals ([a, b] in a case file) by values drawn from the case's stream."""
    for arg in case.arguments:
        if arg.attr_draw is None:
            continue
        rng = stream(seed, case.id, arg.position)
        draws = arg.attr_draw if arg.kind == "list" else [arg.attr_draw]
        values = arg.value if arg.kind == "list" else [arg.value]
        drawn = []
        for value, interval in zip(values, draws):
            if interval is None:
                drawn.append(value)
            elif all(isinstance(v, int) for v in interval):
                drawn.append(int(rng.integers(interval[0], interval[1], endpoint=True)))
            else:
                drawn.append(float(rng.uniform(*interval)))
        arg.value = drawn if arg.kind == "list" else drawn[0]
        arg.attr_draw = None
