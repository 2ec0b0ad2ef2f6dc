"""The benchmark's cases, inputs and peer calls, all read from the registry.

Each op's YAML may carry a `benchmark` section (registry/README.md, "Benchmark"): its cases, how
each input is made, the PyTorch call it is timed against and its targets. This module turns that
section (as aclnn_cpu/_registry.py holds it) into callables: the op with preallocated or
allocated outputs, its peer, and the bytes it moves. Nothing here names an op.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from aclnn_cpu._vocabulary import numpy_dtype

from aclnn_cpu._registry import OPS as REGISTRY

DTYPES = ("float32", "float16", "bfloat16")


def _bench_ops() -> Tuple[dict, ...]:
    """Registry entries with a benchmark section: those with an `order` first, by order, then
    the others in registry file order."""
    ops = [op for op in REGISTRY if op.get("benchmark")]
    ranked = sorted(enumerate(ops), key=lambda io: (io[1]["benchmark"]["order"] is None,
                                                    io[1]["benchmark"]["order"] or 0, io[0]))
    return tuple(op for _, op in ranked)


BENCH_OPS = _bench_ops()
BY_NAME: Dict[str, dict] = {op["benchmark"]["name"]: op for op in BENCH_OPS}
OPS = tuple(BY_NAME)


def _aliases() -> Dict[str, str]:
    """Every name --ops accepts, lower case: each op's bench name and listed aliases, then its
    Python name, op name and C name where no op lists them."""
    names = {alias: op["benchmark"]["name"] for op in BENCH_OPS for alias in op["benchmark"]["aliases"]}
    for op in BENCH_OPS:
        for automatic in (op["python"], op["op"].lower(), op["name"].lower()):
            names.setdefault(automatic, op["benchmark"]["name"])
    return names


OP_ALIASES = _aliases()
SPEEDUP_TARGET = {name: op["benchmark"]["targets"]["speedup"] for name, op in BY_NAME.items()}
BATCH1_TARGET = {name: op["benchmark"]["targets"]["speedup_batch1"] for name, op in BY_NAME.items()
                 if op["benchmark"]["targets"]["speedup_batch1"] is not None}
# Ops that stream their data once: near the copy bandwidth of the same bytes once the working
# set no longer fits in the last-level cache.
COPY_FRACTION_TARGET = {name: op["benchmark"]["targets"]["copy_fraction"] for name, op in BY_NAME.items()
                        if op["benchmark"]["targets"]["copy_fraction"] is not None}
STREAMING_OPS = tuple(COPY_FRACTION_TARGET)
# Jobs whose torch call can take the process down (the YAML's peer.crash_prone says why): they
# run in a child process, so a crash costs a retry, not the run.
TORCH_CRASH_PRONE = {(name, dtype) for name, op in BY_NAME.items() if op["benchmark"]["peer"]
                     for dtype in op["benchmark"]["peer"]["crash_prone"]}


def np_dtype(name: str) -> np.dtype:
    return numpy_dtype(name)  # ml_dtypes.bfloat16 for bfloat16


def dtype_name(dt) -> str:
    """The registry's name of a NumPy dtype (ml_dtypes' bfloat16 included)."""
    return "bfloat16" if dt == np_dtype("bfloat16") else np.dtype(dt).name


# ----------------------------------------------------------------------------------------------
# Cases

@dataclass(frozen=True)
class Case:
    op: str          # the bench's name of the op
    label: str
    params: Dict
    suites: Sequence[str] = ("full",)

    def describe(self) -> str:
        template = BY_NAME[self.op]["benchmark"]["describe"]
        if template is None:
            return " ".join(f"{k}={v}" for k, v in self.params.items())
        return eval("f" + repr(template), dict(self.params))  # checked by the loader


# Case params as the registry holds them: YAML lists are tuples (a shape stays a tuple).
SUITE: List[Case] = [Case(op["benchmark"]["name"], c["label"], dict(c["params"]), tuple(c["suites"]))
                     for op in BENCH_OPS for c in op["benchmark"]["cases"]]


# ----------------------------------------------------------------------------------------------
# Inputs

def input_helpers(rng: np.random.Generator) -> Dict[str, Any]:
    """The functions an `inputs` expression may call; random ones draw from rng, in float32."""
    def normal(shape, scale=1.0, shift=0.0):
        return rng.standard_normal(size=shape, dtype=np.float32) * np.float32(scale) + np.float32(shift)

    def uniform(shape, low, high):
        return rng.uniform(low, high, size=shape).astype(np.float32)

    def softmax(a, axis):
        e = np.exp(a - a.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    def warp_grid(N, Ho, Wo, align):
        """Identity sampling grid [N, Ho, Wo, 2] ((x, y) order) plus a small displacement, a few
        points off the edge."""
        def axis(n):
            if align:
                return np.linspace(-1.0, 1.0, n, dtype=np.float32) if n > 1 else np.zeros(1, np.float32)
            return ((2.0 * np.arange(n, dtype=np.float32) + 1.0) / n - 1.0).astype(np.float32)
        gy, gx = np.meshgrid(axis(Ho), axis(Wo), indexing="ij")
        base = np.stack([gx, gy], axis=-1)[None]
        return (base + normal((N, Ho, Wo, 2), 0.05)).astype(np.float32)

    return {"np": np, "normal": normal, "uniform": uniform, "softmax": softmax, "warp_grid": warp_grid}


@dataclass
class Call:
    """One call of an op: its inputs and attributes by Python name, in the functional order."""
    op: dict
    inputs: Dict[str, Optional[np.ndarray]]
    attributes: Dict[str, Any]

    def python_args(self) -> Tuple:
        return tuple(self.inputs[p["py_name"]] if p["kind"] == "input" else self.attributes[p["py_name"]]
                     for p in self.op["params"] if p["kind"] != "output")

    def names(self) -> Dict[str, Any]:
        return {**self.attributes, **self.inputs}

    def output_present(self, p: dict) -> bool:
        if p["mask"] is None:
            return True
        array = next(q for q in self.op["params"] if q["name"] == p["mask"][0])
        return bool(self.attributes[array["py_name"]][p["mask"][1]])

    def allocate(self, first_aligned: Optional[Callable] = None) -> List[Optional[np.ndarray]]:
        """The outputs, shaped by the registry's alloc expressions; the first on a 64-byte line
        when first_aligned (aclnn_cpu.empty_aligned) is given, so the kernels may stream to it."""
        names = {"shape_of": lambda a: tuple(np.shape(a)), "dtype_of": lambda a: np.asarray(a).dtype,
                 "prod": math.prod, **{k["name"]: k["default"] for k in self.op["python_kwargs"]},
                 **self.names()}
        outs = []
        for p in self.op["params"]:
            if p["kind"] != "output":
                continue
            if not self.output_present(p):
                outs.append(None)
                continue
            shape = tuple(eval(p["alloc"]["shape"], names))
            dtype = np.dtype(eval(p["alloc"]["dtype"], names))
            make = first_aligned if (first_aligned is not None and not outs) else np.empty
            outs.append(make(shape, dtype))
        return outs

    def c_args(self, outs: Sequence[Optional[np.ndarray]]) -> Tuple:
        """The arguments of the two-phase API, in the C order (outputs included)."""
        pending = list(outs)
        args = []
        for p in self.op["params"]:
            if p["kind"] == "output":
                args.append(pending.pop(0))
            elif p["kind"] == "input":
                args.append(self.inputs[p["py_name"]])
            else:
                args.append(self.attributes[p["py_name"]])
        return tuple(args)


def _attributes(op: dict, given: Dict[str, Any]) -> Dict[str, Any]:
    return {p["py_name"]: given[p["py_name"]] if p["py_name"] in given else p["default"]
            for p in op["params"] if p["kind"] not in ("input", "output")}


def generate(op: dict, params: Dict, dtype: str, rng: np.random.Generator) -> Call:
    """The inputs and attributes of one case at one dtype, as the op's benchmark section says."""
    bench = op["benchmark"]
    attributes = _attributes(op, {k: eval(e, dict(params)) for k, e in bench["attributes"].items()})
    inputs = {p["py_name"] for p in op["params"] if p["kind"] == "input"}
    dt = np_dtype(dtype)
    names = {**params, **attributes, **input_helpers(rng)}
    for name, expr in bench["inputs"].items():
        value = eval(expr, names)
        if name in inputs and value is not None:
            value = np.asarray(value).astype(dt)
        names[name] = value
    return Call(op, {p["py_name"]: names.get(p["py_name"]) for p in op["params"] if p["kind"] == "input"},
                attributes)


def example_call(op: dict) -> Optional[Call]:
    """The documented example of the registry entry (None when it has none)."""
    ex = op["example"]
    if ex is None:
        return None
    dt = np_dtype(ex["dtype"])
    inputs = {p["py_name"]: None for p in op["params"] if p["kind"] == "input"}
    for name, t in ex["inputs"].items():
        inputs[name] = np.array(t["data"], dtype=np.float64).reshape(t["shape"]).astype(dt)
    return Call(op, inputs, _attributes(op, ex["attributes"]))


def smallest_call(op: dict, dtype: str = "float32") -> Call:
    """The example, or else the op's first smoke case (the first case when it has none)."""
    call = example_call(op)
    if call is not None:
        return call
    cases = op["benchmark"]["cases"]
    case = next((c for c in cases if "smoke" in c["suites"]), cases[0])
    return generate(op, dict(case["params"]), dtype, np.random.default_rng(20240611))


# ----------------------------------------------------------------------------------------------
# The peer

def to_torch(torch, arr: Optional[np.ndarray]):
    """A torch tensor with the same values, in memory of its own (so neither side warms the
    other's caches)."""
    if arr is None:
        return None
    src = np.ascontiguousarray(arr)
    if src.dtype == np_dtype("bfloat16"):
        return torch.from_numpy(src.view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(src.copy())


def torch_dtype(torch, name: str):
    if name == "bfloat16":
        return torch.bfloat16
    return torch.from_numpy(np.empty(0, np.dtype(name))).dtype


def peer_callable(call: Call, torch, dtype: str) -> Optional[Callable[[], Any]]:
    """The PyTorch call of the op's benchmark section on torch copies of the call's inputs (None
    without torch or without a peer)."""
    peer = call.op["benchmark"]["peer"] if call.op.get("benchmark") else None
    if torch is None or peer is None:
        return None
    names = {"torch": torch, "torch_dtype": torch_dtype(torch, dtype), **call.attributes,
             **{k: to_torch(torch, v) for k, v in call.inputs.items()}}
    for name, expr in peer["prepare"].items():
        names[name] = eval(expr, names)
    return eval("lambda: (" + peer["call"] + ")", names)


def peer_outputs(result) -> List[Any]:
    """The peer's result as a list of tensors (one tensor or a sequence of them)."""
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


def moved_elements(call: Call, outs: Sequence[Optional[np.ndarray]]) -> int:
    """Elements the op must read + write: the section's `moved`, or every input and output."""
    expr = call.op["benchmark"]["moved"]
    if expr is not None:
        return int(eval(expr, call.names()))
    return (sum(a.size for a in call.inputs.values() if a is not None)
            + sum(o.size for o in outs if o is not None))
