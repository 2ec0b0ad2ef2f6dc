"""CANN's precision standards: the metrics and the single- and double-benchmark verdicts.

Metrics of a result `a` against a golden `g` (eps = 1e-7), over the positions where both are
finite: relative error |a - g| / (|g| + eps); MERE its mean, MARE its max; RMSE
sqrt(mean((a - g)^2)); the small-value error count, elements with |g| < threshold and
|a - g| > error bound (per dtype). Non-finite positions are not scored: there `a` must equal the
golden (same-sign inf, nan for nan), or, under the double benchmark, the third party.

- single benchmark (ATK `single_bm`): passes when MERE < T and MARE < 10 T, T per dtype.
- double benchmark (ATK `double_benchmark`): the result and a third-party result are both
  scored against the golden; passes when the ratios result/third party are within the level's
  limits (MARE, MERE, RMSE) and small-value errors / max(third party's, 1) <= 2. A ratio
  whose denominator is 0 is 0 when the numerator is 0 too, else infinite.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Optional

import numpy as np

from aclnn_cpu.atk import CHUNK, dtype_name

EPS = 1e-7
# Single benchmark: MERE < T, MARE < MARE_RATIO * T.
SINGLE_THRESHOLDS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -13}
MARE_RATIO = 10
# Double benchmark: (small-value threshold, error bound) per dtype, and the ratio limits per level.
SMALL_VALUES = {"float16": (2.0 ** -11, 2.0 ** -16), "bfloat16": (2.0 ** -8, 2.0 ** -16),
                "float32": (2.0 ** -14, 2.0 ** -30)}
LEVELS = {"L0": {"mare": 10.0, "mere": 2.0, "rmse": 2.0},
          "L1": {"mare": 5.0, "mere": 1.5, "rmse": 1.5},
          "L2": {"mare": 2.0, "mere": 1.2, "rmse": 1.2}}
SMALL_VALUE_RATIO = 2.0
STANDARDS = ("single", "double")
# Relative-error histogram kept for plots: log10 bins from 1e-12 to 1e3 (below: the first bin).
HISTOGRAM_EDGES = np.linspace(-12.0, 3.0, 151)


def _threshold_dtype(dtype) -> str:
    name = dtype if isinstance(dtype, str) else dtype_name(dtype)
    name = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}.get(name, name)
    if name not in SINGLE_THRESHOLDS:
        raise ValueError(f"the precision standards set thresholds for float16, bfloat16 and float32, not {name}")
    return name


@dataclass
class Metrics:
    """A result scored against a golden."""
    mere: float = 0.0
    mare: float = 0.0
    rmse: float = 0.0
    small_value_errors: int = 0
    elements: int = 0          # finite positions scored
    nonfinite: int = 0         # positions where the result or the golden is inf or nan
    histogram: np.ndarray = field(default_factory=lambda: np.zeros(len(HISTOGRAM_EDGES) - 1, np.int64))

    def as_dict(self) -> dict:
        return {"mere": self.mere, "mare": self.mare, "rmse": self.rmse,
                "small_value_errors": self.small_value_errors, "elements": self.elements,
                "nonfinite": self.nonfinite}


def _flat64(x) -> np.ndarray:
    return np.asarray(x).reshape(-1)


def metrics(actual, golden, dtype) -> Metrics:
    """MERE, MARE, RMSE and the small-value error count of `actual` against `golden`; `dtype`
    picks the small-value thresholds. Computed in float64, chunk by chunk."""
    small_threshold, small_error = SMALL_VALUES[_threshold_dtype(dtype)]
    a, g = _flat64(actual), _flat64(golden)
    if a.shape != g.shape:
        raise ValueError(f"{a.size} elements against a golden of {g.size}")
    m = Metrics()
    total_relative = total_square = 0.0
    for start in range(0, a.size, CHUNK):
        ac = a[start:start + CHUNK].astype(np.float64)
        gc = g[start:start + CHUNK].astype(np.float64)
        finite = np.isfinite(ac) & np.isfinite(gc)
        m.nonfinite += int(finite.size - np.count_nonzero(finite))
        ac, gc = ac[finite], gc[finite]
        error = np.abs(ac - gc)
        relative = error / (np.abs(gc) + EPS)
        m.elements += int(ac.size)
        total_relative += float(relative.sum())
        total_square += float(np.square(error).sum())
        if relative.size:
            m.mare = max(m.mare, float(relative.max()))
        m.small_value_errors += int(np.count_nonzero((np.abs(gc) < small_threshold) & (error > small_error)))
        with np.errstate(divide="ignore"):
            logs = np.log10(relative)
        m.histogram += np.histogram(np.clip(logs, HISTOGRAM_EDGES[0], HISTOGRAM_EDGES[-1]), HISTOGRAM_EDGES)[0]
    if m.elements:
        m.mere = total_relative / m.elements
        m.rmse = math.sqrt(total_square / m.elements)
    return m


def _same_nonfinite(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise: equal, or both nan."""
    return (x == y) | (np.isnan(x) & np.isnan(y))


def nonfinite_mismatches(actual, golden, third_party=None) -> int:
    """Positions where the result or the golden is not finite and the result matches neither the
    golden nor (double benchmark) the third party."""
    a, g = _flat64(actual), _flat64(golden)
    t = _flat64(third_party) if third_party is not None else None
    count = 0
    for start in range(0, a.size, CHUNK):
        ac = a[start:start + CHUNK].astype(np.float64)
        gc = g[start:start + CHUNK].astype(np.float64)
        special = ~(np.isfinite(ac) & np.isfinite(gc))
        if not special.any():
            continue
        ok = _same_nonfinite(ac[special], gc[special])
        if t is not None:
            ok |= _same_nonfinite(ac[special], t[start:start + CHUNK].astype(np.float64)[special])
        count += int(np.count_nonzero(~ok))
    return count


def ratio(numerator: float, denominator: float) -> float:
    if denominator == 0:
        return 0.0 if numerator == 0 else math.inf
    return numerator / denominator


@dataclass
class Comparison:
    """The verdict of one output under one standard."""
    standard: str
    dtype: str
    metrics: Metrics
    thresholds: Dict[str, float]
    checks: Dict[str, bool]
    nonfinite_mismatches: int
    third_party: Optional[Metrics] = None
    ratios: Optional[Dict[str, float]] = None
    level: Optional[str] = None

    @property
    def passed(self) -> bool:
        return all(self.checks.values())

    mere = property(lambda self: self.metrics.mere)
    mare = property(lambda self: self.metrics.mare)
    rmse = property(lambda self: self.metrics.rmse)
    small_value_errors = property(lambda self: self.metrics.small_value_errors)

    def as_dict(self) -> dict:
        out = {**self.metrics.as_dict(), "passed": self.passed, "standard": self.standard,
               "dtype": self.dtype, "thresholds": self.thresholds, "checks": self.checks,
               "nonfinite_mismatches": self.nonfinite_mismatches}
        if self.third_party is not None:
            out.update(level=self.level, ratios=self.ratios, third_party=self.third_party.as_dict())
        return out


def compare(actual, golden, dtype=None, standard: str = "single", third_party=None,
            level: str = "L0") -> Comparison:
    """Score `actual` against `golden` under the single or double benchmark standard.

    dtype: the dtype whose thresholds apply (default: actual's). third_party: the other result the
    double benchmark needs (the same call at the case's own dtype, for example). level: L0, L1
    or L2, the double benchmark's ratio limits.
    """
    if standard not in STANDARDS:
        raise ValueError(f"standard {standard!r}: use 'single' or 'double'")
    actual, golden = np.asarray(actual), np.asarray(golden)
    if actual.shape != golden.shape:
        raise ValueError(f"shapes differ: actual {list(actual.shape)}, golden {list(golden.shape)}")
    name = _threshold_dtype(dtype if dtype is not None else dtype_name(actual.dtype))
    scored = metrics(actual, golden, name)
    if standard == "single":
        limit = SINGLE_THRESHOLDS[name]
        thresholds = {"mere": limit, "mare": MARE_RATIO * limit}
        mismatches = nonfinite_mismatches(actual, golden)
        checks = {"mere": scored.mere < thresholds["mere"], "mare": scored.mare < thresholds["mare"],
                  "nonfinite": mismatches == 0}
        return Comparison(standard, name, scored, thresholds, checks, mismatches)
    if third_party is None:
        raise ValueError("the double benchmark needs a third-party result")
    if level not in LEVELS:
        raise ValueError(f"level {level!r}: use L0, L1 or L2")
    third_party = np.asarray(third_party)
    if third_party.shape != golden.shape:
        raise ValueError(f"shapes differ: third party {list(third_party.shape)}, golden {list(golden.shape)}")
    other = metrics(third_party, golden, name)
    limits = LEVELS[level]
    ratios = {key: ratio(getattr(scored, key), getattr(other, key)) for key in ("mare", "mere", "rmse")}
    ratios["small_value_errors"] = scored.small_value_errors / max(other.small_value_errors, 1)
    thresholds = {**limits, "small_value_errors": SMALL_VALUE_RATIO}
    mismatches = nonfinite_mismatches(actual, golden, third_party)
    checks = {key: ratios[key] <= thresholds[key] for key in thresholds}
    checks["nonfinite"] = mismatches == 0
    return Comparison(standard, name, scored, thresholds, checks, mismatches, other, ratios, level)


# ---- `python -m aclnn_cpu compare` -----------------------------------------------------------

class CompareError(Exception):
    """Bad input to the compare command; printed as one line, exit status 2."""


def _parse_shape(text: Optional[str]):
    if text is None:
        return None
    cleaned = text.strip().strip("[]()").replace("x", ",").replace(" ", "")
    try:
        shape = tuple(int(d) for d in cleaned.split(",") if d != "")
    except ValueError:
        raise CompareError(f"--shape {text!r}: expected dims such as 2,3,4") from None
    if any(d < 0 for d in shape):
        raise CompareError(f"--shape {text!r}: negative dim")
    return shape


def _named_dtype(name: str) -> np.dtype:
    from aclnn_cpu import atk

    try:
        return atk.numpy_dtype(name)
    except atk.CaseError:
        raise CompareError(f"unknown dtype {name!r} (float16, bfloat16, float32, float64)") from None


def load_array(path: str, dtype: Optional[str], shape) -> np.ndarray:
    """A .npy file (its dtype must agree with `dtype` when given) or a raw little-endian .bin
    (needs `dtype`; its size must fit `shape`, default 1-D)."""
    import os

    if not os.path.isfile(path):
        raise CompareError(f"{path}: no such file")
    if path.endswith(".npy"):
        try:
            array = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as e:
            raise CompareError(f"{path}: not a readable .npy file ({e})") from None
        if array.dtype.kind == "V" and array.dtype.itemsize == 2 and dtype:
            array = array.view(_named_dtype(dtype))  # bfloat16 saved by NumPy without ml_dtypes
        if dtype is not None and array.dtype != _named_dtype(dtype):
            raise CompareError(f"{path} holds {dtype_name(array.dtype)}, but the dtype given is {dtype}")
        if shape is not None and tuple(array.shape) != tuple(shape):
            raise CompareError(f"{path} has shape {list(array.shape)}, but the shape given is {list(shape)}")
        return array
    if dtype is None:
        raise CompareError(f"{path}: a raw .bin file needs --dtype (and --shape)")
    np_dtype = _named_dtype(dtype)
    size = os.path.getsize(path)
    if shape is None:
        if size % np_dtype.itemsize:
            raise CompareError(f"{path} has {size} bytes, not a whole number of {dtype} elements")
        shape = (size // np_dtype.itemsize,)
    need = int(np.prod(shape)) * np_dtype.itemsize
    if size != need:
        raise CompareError(f"{path} has {size} bytes; shape {list(shape)} of {dtype} needs {need}")
    array = np.fromfile(path, dtype=np_dtype.newbyteorder("<") if np_dtype.itemsize > 1 and
                        np_dtype.kind != "V" and dtype_name(np_dtype) != "bfloat16" else np_dtype)
    return array.reshape(shape)


def _manifest(folder: str) -> dict:
    import json
    import os

    path = os.path.join(folder, "case.json")
    try:
        with open(path) as f:
            manifest = json.load(f)
    except OSError:
        raise CompareError(f"{folder}: not a case folder (no case.json)") from None
    except json.JSONDecodeError as e:
        raise CompareError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("outputs"), list):
        raise CompareError(f"{path}: a manifest needs an 'outputs' list")
    return manifest


def _entries(folder: str, manifest: dict, key: str) -> Dict[str, dict]:
    import os

    entries = {}
    for entry in manifest.get(key) or []:
        try:
            entries[entry["name"]] = dict(entry, path=os.path.join(folder, entry["file"]))
        except (KeyError, TypeError):
            raise CompareError(f"{folder}/case.json: an '{key}' entry needs name, dtype, shape and file") from None
    return entries


def _load_entry(entry: dict) -> np.ndarray:
    return load_array(entry["path"], entry.get("dtype"), tuple(entry.get("shape") or ()))


def _pairs(args):
    """[(output name, actual, golden, third party or None, threshold dtype)] and the standard."""
    import os

    if os.path.isdir(args.actual) or os.path.isdir(args.golden):
        if not (os.path.isdir(args.actual) and os.path.isdir(args.golden)):
            raise CompareError("compare two case folders, or two files")
        golden_manifest = _manifest(args.golden)
        actual = _entries(args.actual, _manifest(args.actual), "outputs")
        golden = _entries(args.golden, golden_manifest, "outputs")
        if args.third_party:
            if not os.path.isdir(args.third_party):
                raise CompareError("with case folders, --third-party is a case folder too")
            third = _entries(args.third_party, _manifest(args.third_party), "outputs")
        else:
            third = _entries(args.golden, golden_manifest, "same_precision")
        standard = args.standard or golden_manifest.get("standard") or "single"
        missing = sorted(set(golden) - set(actual))
        if missing:
            raise CompareError(f"{args.actual} has no output {', '.join(missing)} of the golden")
        pairs = []
        for name, entry in golden.items():
            dtype = args.dtype or (third[name]["dtype"] if name in third else actual[name]["dtype"])
            third_array = _load_entry(third[name]) if standard == "double" and name in third else None
            pairs.append((name, _load_entry(actual[name]), _load_entry(entry), third_array, dtype))
        return pairs, standard
    shape = _parse_shape(args.shape)
    actual = load_array(args.actual, args.dtype, shape)
    dtype = args.dtype or dtype_name(actual.dtype)
    golden = load_array(args.golden, args.golden_dtype or args.dtype, shape)
    standard = args.standard or "single"
    third = load_array(args.third_party, args.dtype, shape) if args.third_party else None
    if standard == "double" and third is None:
        raise CompareError("--standard double needs --third-party (or case folders, whose "
                           "same_precision outputs are the third party)")
    return [(os.path.basename(args.actual), actual, golden, third, dtype)], standard


def _format(name: str, c: Comparison) -> str:
    verdict = "PASS" if c.passed else "FAIL"
    m = c.metrics
    line = (f"{name}: {c.dtype} {c.standard}: MERE {m.mere:.3e} MARE {m.mare:.3e} RMSE {m.rmse:.3e} "
            f"small-value errors {m.small_value_errors}")
    if c.standard == "single":
        line += f" (MERE < {c.thresholds['mere']:.3e}, MARE < {c.thresholds['mare']:.3e})"
    else:
        r = c.ratios
        line += (f"; ratios to the third party ({c.level}): MARE {r['mare']:.3g} (<= {c.thresholds['mare']:g}), "
                 f"MERE {r['mere']:.3g} (<= {c.thresholds['mere']:g}), RMSE {r['rmse']:.3g} "
                 f"(<= {c.thresholds['rmse']:g}), small-value errors {r['small_value_errors']:.3g} "
                 f"(<= {c.thresholds['small_value_errors']:g})")
    if c.standard == "double" and c.third_party.mare == 0 and c.third_party.elements:
        line += "; the third party equals the golden, so any difference fails"
    if c.nonfinite_mismatches:
        line += f"; {c.nonfinite_mismatches} inf/nan positions differ"
    return f"{line}: {verdict}"


def plot(results: Dict[str, Comparison], path: str) -> None:
    """The relative-error distribution of each output against its thresholds, as an image."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CompareError("--plot needs matplotlib, which is not installed (pip install matplotlib)") from None
    fig, axes = plt.subplots(len(results), 1, figsize=(8, 3 * len(results)), squeeze=False)
    centers = (HISTOGRAM_EDGES[:-1] + HISTOGRAM_EDGES[1:]) / 2
    for axis, (name, c) in zip(axes[:, 0], results.items()):
        axis.bar(centers, c.metrics.histogram, width=HISTOGRAM_EDGES[1] - HISTOGRAM_EDGES[0], color="tab:blue")
        if c.standard == "single":
            marks = {"MERE limit": c.thresholds["mere"], "MARE limit": c.thresholds["mare"]}
        else:
            marks = {"third-party MERE x limit": c.third_party.mere * c.thresholds["mere"],
                     "third-party MARE x limit": c.third_party.mare * c.thresholds["mare"]}
        marks.update({"MERE": c.metrics.mere, "MARE": c.metrics.mare})
        for (label, value), style in zip(marks.items(), ("r-", "r--", "k-", "k--")):
            if value > 0:
                axis.axvline(math.log10(value), color=style[0], linestyle=style[1:], label=f"{label} {value:.2e}")
        axis.set_title(f"{name} ({c.dtype}, {c.standard} benchmark): {'PASS' if c.passed else 'FAIL'}")
        axis.set_xlabel("log10 relative error |a - g| / (|g| + 1e-7)")
        axis.set_ylabel("elements")
        axis.legend(fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as e:
        raise CompareError(f"--plot {path}: cannot write ({e.strerror})") from None
    finally:
        plt.close(fig)


def main(args) -> int:
    """The CLI subcommand: 0 when every output passes, 1 when any fails, 2 on bad input."""
    import json
    import sys

    try:
        if args.standard not in (None, *STANDARDS):
            raise CompareError(f"--standard {args.standard!r}: use single or double")
        pairs, standard = _pairs(args)
        results = {}
        for name, actual, golden, third, dtype in pairs:
            try:
                results[name] = compare(actual, golden, dtype=dtype, standard=standard,
                                        third_party=third, level=args.level)
            except ValueError as e:
                raise CompareError(f"{name}: {e}") from None
        if args.plot:
            plot(results, args.plot)
    except CompareError as e:
        print(f"compare: error: {e}", file=sys.stderr)
        return 2
    passed = all(c.passed for c in results.values())
    if args.json:
        print(json.dumps({"standard": standard, "passed": passed,
                          "outputs": {name: c.as_dict() for name, c in results.items()}}, indent=1))
    else:
        for name, c in results.items():
            print(_format(name, c))
        print(f"overall: {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1
