"""`python -m aclnn_cpu golden`: ATK case files in, golden data out (docs/golden.md).

Each case runs twice through the library: once at a wider dtype on the exact upcast inputs (the
golden) and once at the case's own dtype (the same-precision result the double-benchmark
standard scores a third party by). Everything about an op comes from the registry
(`aclnn_cpu._registry.OPS`): the case's arguments map by position onto the op's C parameters.
The one exception is DERIVED_INPUTS below, the inputs an official ATK executor computes instead of
drawing them.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from aclnn_cpu import atk
from aclnn_cpu._errors import AclnnError

# Inputs an official ATK executor derives from other inputs instead of drawing them, by op. This
# table is the only op-specific knowledge of the golden generator. GroupNormBackward's executor
# recomputes mean and rstd with aten.native_group_norm(input, ..., eps=1e-5); the case file's
# mean/rstd entries are placeholders (their shapes do not fit). Here they are the statistics of
# `input` viewed as [N, group, C/group * HxW], computed in float64 and rounded to the entries'
# dtypes: mean, and rstd = 1 / sqrt(biased variance + eps).
DERIVED_INPUTS = {
    "aclnnGroupNormBackward": {
        "rule": "group_statistics", "source": "input", "into": ("mean", "rstd"),
        "batch": "N", "groups": "group", "eps": 1e-5,
    },
}


def _group_statistics(x: np.ndarray, batch: int, groups: int, eps: float):
    """(mean, rstd) of x viewed as [batch, groups, -1], both [batch, groups], in float64."""
    if batch * groups == 0:
        return np.zeros((batch, groups)), np.zeros((batch, groups))
    if x.size == 0:
        return np.zeros((batch, groups)), np.full((batch, groups), 1.0 / np.sqrt(eps))
    grouped = x.reshape(batch, groups, -1)
    mean = np.empty((batch, groups))
    var = np.empty((batch, groups))
    for n in range(batch):  # one sample at a time: a float64 copy of all of x can be gigabytes
        sample = grouped[n].astype(np.float64)
        mean[n] = sample.mean(axis=1)
        var[n] = np.square(sample - mean[n][:, None]).mean(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        return mean, 1.0 / np.sqrt(var + eps)


DERIVATION_RULES = {"group_statistics": _group_statistics}

# Widening order of the golden: 16-bit -> float32 -> float64 (where the op accepts float64).
_WIDER = {"float16": "float32", "bfloat16": "float32", "float32": "float64"}
_FLOAT_ORDER = ("float16", "bfloat16", "float32", "float64")


class GoldenError(Exception):
    """Stops the whole run (bad options, unreadable files); the CLI prints it as one line."""


@dataclass
class Skipped:
    source: str
    case_id: object
    reason: str


@dataclass
class Report:
    written: List[str] = field(default_factory=list)
    skipped: List[Skipped] = field(default_factory=list)
    seconds: float = 0.0


# ---- registry ------------------------------------------------------------------------------

def registry_ops() -> Dict[str, dict]:
    from aclnn_cpu._registry import OPS

    return {op["name"]: op for op in OPS}


def _arguments(op: dict) -> List[dict]:
    return [p for p in op["params"] if p["kind"] != "output"]


def _outputs(op: dict) -> List[dict]:
    return [p for p in op["params"] if p["kind"] == "output"]


def _accepts(op: dict, dtype_name: str) -> bool:
    import aclnn_cpu

    product = aclnn_cpu.get_product()
    tensors = [p for p in op["params"] if p["kind"] == "input"]
    return all(dtype_name in p.get("dtypes", {}).get(product, ()) for p in tensors)


def golden_dtype(op: dict, case_dtype: str) -> str:
    """The dtype the golden is computed in: the next wider float the op accepts, else the case's."""
    wider = _WIDER.get(case_dtype)
    if wider == "float32":
        return wider
    if wider and _accepts(op, wider):
        return wider
    return case_dtype


# ---- mapping a case onto the op --------------------------------------------------------------

def _convert_attr(param: dict, value, where: str):
    kind = param["kind"]
    try:
        if kind == "int64":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
                raise ValueError
            return int(value)
        if kind == "bool":
            return atk.parse_bool(value, where)
        if kind in ("double", "scalar"):
            if isinstance(value, bool) and kind == "double":
                raise ValueError
            return value if isinstance(value, bool) else float(value)
        if kind == "bool_array":
            return tuple(atk.parse_bool(v, where) for v in (value if isinstance(value, list) else [value]))
        if kind == "int_array":
            values = value if isinstance(value, list) else [value]
            if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
                raise ValueError
            return tuple(values)
    except (ValueError, TypeError, atk.CaseError):
        pass
    raise atk.CaseError(f"{where}: {value!r} does not fit parameter {param['name']} ({kind})")


_ARG_KINDS = {"tensor": ("input",), "attr": ("int64", "bool", "double", "scalar"),
              "list": ("bool_array", "int_array")}


@dataclass
class Plan:
    """A case mapped onto its op: tensors and attributes by C parameter name."""
    op: dict
    case: atk.Case
    tensors: Dict[str, atk.Argument]      # C name -> argument (shape, dtype, distribution)
    attrs: Dict[str, object]               # C name -> value (defaults filled in)
    absent: List[str]                      # optional tensors the case leaves out
    derived: Optional[dict]


def plan_case(case: atk.Case, ops: Dict[str, dict]) -> Plan:
    op = ops.get(case.aclnn_name)
    if op is None:
        raise atk.CaseError(f"{case.aclnn_name} is not in the registry (it has {', '.join(sorted(ops))})")
    params = _arguments(op)
    if len(case.arguments) > len(params):
        raise atk.CaseError(f"{len(case.arguments)} arguments, but {op['name']} takes {len(params)}"
                            f" ({', '.join(p['name'] for p in params)})")
    tensors, attrs, absent = {}, {}, []
    for index, param in enumerate(params):
        where = f"argument {index} ({param['name']})"
        if index >= len(case.arguments):
            if param["kind"] == "input" and param["optional"]:
                absent.append(param["name"])
            elif param.get("has_default"):
                attrs[param["name"]] = param["default"]
            else:
                raise atk.CaseError(f"no value for {param['name']}, which has no default")
            continue
        arg = case.arguments[index]
        left_out = not arg.required and (arg.distribution is None if arg.kind == "tensor" else arg.value is None)
        if left_out and param["kind"] == "input" and param["optional"]:
            absent.append(param["name"])
            continue
        if left_out and param.get("has_default"):
            attrs[param["name"]] = param["default"]
            continue
        if left_out:
            raise atk.CaseError(f"{where}: the case leaves out '{arg.label}', which {op['name']} needs")
        if param["kind"] not in _ARG_KINDS[arg.kind]:
            raise atk.CaseError(f"{where}: the case gives {arg.kind} '{arg.label}' where {op['name']} "
                                f"takes {param['kind']}")
        if arg.kind == "tensor":
            tensors[param["name"]] = arg
        else:
            attrs[param["name"]] = _convert_attr(param, arg.value, where + f" '{arg.label}'")
    derived = DERIVED_INPUTS.get(op["name"])
    if derived:
        for name in (derived["source"], *derived["into"]):
            if name not in tensors:
                raise atk.CaseError(f"{name} must be given as a tensor (it is derived from {derived['source']})")
        batch, groups = attrs.get(derived["batch"]), attrs.get(derived["groups"])
        if not isinstance(batch, int) or not isinstance(groups, int) or batch < 0 or groups <= 0:
            raise atk.CaseError(f"{derived['batch']}={batch}, {derived['groups']}={groups} cannot group "
                                f"{derived['source']}")
        source_size = int(np.prod(tensors[derived["source"]].shape))
        if source_size % max(batch * groups, 1):
            raise atk.CaseError(f"{derived['source']} of {source_size} elements does not split into "
                                f"{batch} x {groups} groups")
        for name in derived["into"]:  # the placeholders' shapes give way to the derived ones
            placeholder = tensors[name]
            tensors[name] = atk.Argument(placeholder.position, placeholder.label, "tensor",
                                         dtype=placeholder.dtype, shape=(batch, groups),
                                         distribution=None, required=placeholder.required)
    return Plan(op, case, tensors, attrs, absent, derived)


def _float_dtype_of(plan: Plan) -> str:
    names = [atk.dtype_name(a.dtype) for a in plan.tensors.values()]
    floats = [n for n in names if n in _FLOAT_ORDER]
    return max(floats, key=_FLOAT_ORDER.index) if floats else (names[0] if names else "float32")


class _Shaped:
    """Shape and dtype of a tensor not drawn yet (for the registry's allocation expressions)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


def output_specs(plan: Plan) -> List[Tuple[Tuple[int, ...], np.dtype]]:
    """Shape and dtype of each output the op allocates for the case, from the registry's
    allocation expressions (the functional form's own rule), with the inputs not yet drawn."""
    op = plan.op
    names = {"shape_of": lambda a: tuple(np.shape(a) if not isinstance(a, _Shaped) else a.shape),
             "dtype_of": lambda a: a.dtype, "prod": math.prod,
             **{k["name"]: k["default"] for k in op["python_kwargs"]}}
    for p in op["params"]:
        if p["kind"] == "input":
            arg = plan.tensors.get(p["name"])
            names[p["py_name"]] = None if arg is None else _Shaped(arg.shape, arg.dtype)
        elif p["kind"] != "output":
            names[p["py_name"]] = plan.attrs.get(p["name"], p.get("default"))
    specs = []
    for p in op["params"]:
        if p["kind"] == "output":
            shape = tuple(int(d) for d in eval(p["alloc"]["shape"], dict(names)))
            specs.append((shape, np.dtype(atk.numpy_dtype(atk.dtype_name(eval(p["alloc"]["dtype"], dict(names)))))))
    return specs


def estimate_bytes(plan: Plan) -> int:
    """Memory a case needs: its inputs and outputs (shaped by the registry's allocation rules),
    each at the case's dtype and at the golden's (the two calls)."""
    wide = np.dtype(atk.numpy_dtype(golden_dtype(plan.op, _float_dtype_of(plan)))).itemsize
    arrays = [(arg.shape, arg.dtype) for arg in plan.tensors.values()] + output_specs(plan)
    total = 0
    for shape, dtype in arrays:
        numel = math.prod(int(d) for d in shape)
        total += numel * dtype.itemsize
        if (dtype.kind == "f" or atk.dtype_name(dtype) == "bfloat16") and wide != dtype.itemsize:
            total += numel * wide
    return total


# ---- running a case ------------------------------------------------------------------------

def _draw(plan: Plan, seed: int) -> Tuple[Dict[str, np.ndarray], dict, dict]:
    """(inputs by C name, generation record, derivation record)."""
    case = plan.case
    derived_names = set(plan.derived["into"]) if plan.derived else set()
    arrays, generated, derived_record = {}, {}, {}
    for name, arg in plan.tensors.items():
        if name in derived_names:
            continue
        array, described = atk.draw_tensor(arg.distribution, arg.shape, arg.dtype,
                                           atk.stream(seed, case.id, arg.position))
        arrays[name] = array
        generated[name] = described
    if plan.derived:
        rule = plan.derived
        stats = DERIVATION_RULES[rule["rule"]](arrays[rule["source"]], plan.attrs[rule["batch"]],
                                               plan.attrs[rule["groups"]], rule["eps"])
        for name, values in zip(rule["into"], stats):
            arrays[name] = values.astype(plan.tensors[name].dtype)
            derived_record[name] = {"rule": rule["rule"], "from": rule["source"], "eps": rule["eps"],
                                    rule["batch"]: plan.attrs[rule["batch"]],
                                    rule["groups"]: plan.attrs[rule["groups"]],
                                    "computed_in": "float64"}
    return arrays, generated, derived_record


def _call(op: dict, inputs: Dict[str, Optional[np.ndarray]], attrs: Dict[str, object]):
    import aclnn_cpu

    function = getattr(aclnn_cpu, op["python"])
    kwargs = {}
    for param in _arguments(op):
        value = inputs.get(param["name"]) if param["kind"] == "input" else attrs[param["name"]]
        kwargs[param["py_name"]] = value
    result = function(**kwargs)
    outputs = _outputs(op)
    results = result if isinstance(result, tuple) else (result,)
    return {p["name"]: r for p, r in zip(outputs, results) if r is not None}


def _widen(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if array.dtype == dtype or not (array.dtype.kind == "f" or atk.dtype_name(array.dtype) == "bfloat16"):
        return array
    return array.astype(dtype)  # exact: every 16-bit and float32 value is representable wider


def _write_bin(folder: str, file: str, array: np.ndarray) -> dict:
    array = np.ascontiguousarray(array)
    if sys.byteorder != "little":
        array = array.byteswap()
    array.tofile(os.path.join(folder, file))
    return {"dtype": atk.dtype_name(array.dtype), "shape": list(array.shape), "file": file}


def _nonfinite(array: np.ndarray) -> int:
    flat = array.reshape(-1)
    return sum(int(flat[i:i + atk.CHUNK].size - np.count_nonzero(np.isfinite(flat[i:i + atk.CHUNK])))
               for i in range(0, flat.size, atk.CHUNK))


def _json_value(value):
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, float):
        return atk.json_number(value)
    return value


def run_case(plan: Plan, seed: int, out_dir: str) -> str:
    """Writes the case's folder (through a temporary name) and returns its path."""
    import aclnn_cpu

    op, case = plan.op, plan.case
    inputs, generated, derived = _draw(plan, seed)
    same = _call(op, inputs, plan.attrs)
    case_dtype = _float_dtype_of(plan)
    wide_name = golden_dtype(op, case_dtype)
    if wide_name == case_dtype:
        golden = same
    else:
        wide = atk.numpy_dtype(wide_name)
        golden = _call(op, {k: _widen(v, wide) for k, v in inputs.items()}, plan.attrs)

    parent = os.path.join(out_dir, op["name"])
    os.makedirs(parent, exist_ok=True)
    final = os.path.join(parent, str(case.id))
    temporary = os.path.join(parent, f".{case.id}.partial-{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    os.makedirs(temporary)
    try:
        manifest = {
            "aclnn_name": op["name"], "id": case.id,
            "attrs": {name: _json_value(value) for name, value in plan.attrs.items()},
            "inputs": [], "outputs": [], "same_precision": [],
            "golden_dtype": wide_name, "case_dtype": case_dtype,
            "golden_is_same_precision": wide_name == case_dtype,
            "standard": case.standard, "seed": seed, "version": aclnn_cpu.__version__,
            "source": os.path.basename(case.source), "case_name": case.extra.get("name"),
            "generated": generated, "derived": derived, "absent": plan.absent,
        }
        for param in _arguments(op):
            if param["name"] in inputs:
                entry = _write_bin(temporary, f"input_{param['name']}.bin", inputs[param["name"]])
                manifest["inputs"].append({"name": param["name"], **entry})
        for param in _outputs(op):
            name = param["name"]
            if name not in same:
                continue
            entry = _write_bin(temporary, f"golden_{name}.bin", golden[name])
            manifest["outputs"].append({"name": name, **entry})
            if golden is same:
                manifest["same_precision"].append({"name": name, **entry})
            else:
                manifest["same_precision"].append(
                    {"name": name, **_write_bin(temporary, f"same_{name}.bin", same[name])})
        manifest["nonfinite_outputs"] = {
            name: count for name, count in ((n, _nonfinite(golden[n])) for n in same) if count}
        with open(os.path.join(temporary, "case.json"), "w") as f:
            json.dump(manifest, f, indent=1)
        if os.path.exists(final):
            shutil.rmtree(final)
        os.rename(temporary, final)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return final


# ---- selecting cases -----------------------------------------------------------------------

def parse_ids(text: Optional[str]):
    """"0-9,12" -> a set of ids; None -> None (every id)."""
    if text is None:
        return None
    ids = set()
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        try:
            if dash:
                first, last = int(low), int(high)
                if first > last:
                    raise ValueError
                ids.update(range(first, last + 1))
            else:
                ids.add(int(part))
        except ValueError:
            raise GoldenError(f"--ids: {part!r} is not an id or a range a-b") from None
    return ids


def parse_shard(text: Optional[str]) -> Tuple[int, int]:
    if text is None:
        return 0, 1
    k, slash, n = text.partition("/")
    try:
        k, n = int(k), int(n)
    except ValueError:
        raise GoldenError(f"--shard: {text!r} is not K/N") from None
    if not slash or n < 1 or not 0 <= k < n:
        raise GoldenError(f"--shard: {text!r} needs N >= 1 and 0 <= K < N")
    return k, n


def parse_bytes(text: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    text = str(text).strip().upper().rstrip("B")
    number, unit = (text[:-1], text[-1]) if text[-1:] in units and text[-1:] else (text, "")
    try:
        value = int(float(number) * units[unit])
    except (ValueError, KeyError):
        raise GoldenError(f"--max-bytes: {text!r} is not a size (e.g. 4G, 500M, 1000000)") from None
    if value <= 0:
        raise GoldenError("--max-bytes must be positive")
    return value


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def default_budget() -> int:
    """A quarter of the machine's RAM."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4


def select_cases(paths: Sequence[str], ids=None, shard=(0, 1)):
    """[(file, raw case)] in file order, filtered by id, every N-th from the K-th."""
    selected = []
    for path in atk.case_files(paths):
        for raw in atk.read_case_file(path):
            case_id = raw.get("id") if isinstance(raw, dict) else None
            if ids is not None and case_id not in ids:
                continue
            selected.append((path, raw))
    if ids is not None and not selected:
        raise atk.CaseError(f"no case has an id in --ids ({len(ids)} ids asked for)")
    k, n = shard
    return selected[k::n]  # an empty shard is no error: N may exceed the number of cases


class Progress:
    """A one-line bar on stderr, redrawn in place."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self.done = total, enabled and total > 0, 0

    def step(self, label: str) -> None:
        self.done += 1
        if self.enabled:
            width = 30
            filled = width * self.done // self.total
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {label[:40]:<40}")
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def generate(paths: Sequence[str], out_dir: str, ids=None, seed: int = 0, shard=(0, 1),
             max_bytes: Optional[int] = None, progress: bool = False, on_skip=None) -> Report:
    """Run every selected case; the skipped ones are reported, never fatal."""
    start = time.perf_counter()
    budget = default_budget() if max_bytes is None else max_bytes
    try:
        selected = select_cases(paths, ids, shard)
    except atk.CaseError as e:
        raise GoldenError(str(e)) from None
    ops = registry_ops()
    report = Report()
    bar = Progress(len(selected), progress)
    for path, raw in selected:
        case_id = raw.get("id") if isinstance(raw, dict) else None
        try:
            case = atk.parse_case(raw, path)
            atk.draw_attributes(case, seed)
            plan = plan_case(case, ops)
            need = estimate_bytes(plan)
            if need > budget:
                raise atk.CaseError(f"needs about {_size(need)}, over the budget of {_size(budget)} (--max-bytes)")
            report.written.append(run_case(plan, seed, out_dir))
        except Exception as e:  # one bad case never stops the others
            if isinstance(e, atk.CaseError):
                reason = str(e)
            elif isinstance(e, AclnnError):
                reason = f"{case.aclnn_name} rejected the case: {e}"
            elif isinstance(e, MemoryError):
                reason = "out of memory"
            else:
                reason = f"{type(e).__name__}: {e}"
            skipped = Skipped(os.path.basename(path), case_id, reason.replace("\n", " "))
            report.skipped.append(skipped)
            if on_skip:
                on_skip(skipped)
        bar.step(f"{os.path.basename(path)} #{case_id}")
    report.seconds = time.perf_counter() - start
    return report


def main(args) -> int:
    """The CLI subcommand: 0 when every selected case was written, 2 when any was skipped."""
    def tell(s: Skipped):
        print(f"golden: {s.source} case {s.case_id}: skipped: {s.reason}", file=sys.stderr)

    try:
        ids = parse_ids(args.ids)
        shard = parse_shard(args.shard)
        budget = parse_bytes(args.max_bytes) if args.max_bytes is not None else None
        report = generate(args.cases, args.output, ids=ids, seed=args.seed, shard=shard, max_bytes=budget,
                          progress=args.progress or sys.stderr.isatty(), on_skip=tell)
    except GoldenError as e:
        print(f"golden: error: {e}", file=sys.stderr)
        return 2
    print(f"golden: {len(report.written)} case(s) written to {args.output}, {len(report.skipped)} skipped "
          f"({report.seconds:.1f} s)")
    return 2 if report.skipped else 0
