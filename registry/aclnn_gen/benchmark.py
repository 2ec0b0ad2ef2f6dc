"""The optional `benchmark` section of an op's YAML: its model and its strict reader.

It says how `python -m aclnn_cpu bench` times the op (the cases, how each input is made, the
PyTorch peer call, the targets) and gives the C API tests a peer to check against in float64.
Every expression is Python, checked here for syntax and for the names it may use, so that a
mistake stops the build with `registry/<op>.yaml:<line>` instead of failing inside the bench.

Expression names (besides BUILTINS):
- case `params` (the case's own, then the section's defaults): `attributes`, `inputs`, `describe`;
- attribute Python names (from `attributes` or the param's default): `inputs`;
- earlier `inputs` entries: later `inputs` entries (entries naming an op input are cast to the
  case's dtype first);
- INPUT_HELPERS: `inputs`;
- the functional form's Python names (inputs as arrays, attributes as values): `moved`, `peer`;
- `torch`, `torch_dtype` and earlier `prepare` entries: `peer`.
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from yaml.nodes import MappingNode, Node

from . import model

SUITES = ("full", "quick", "smoke")
BENCHMARK_KEYS = {"name": False, "aliases": False, "order": False, "targets": False,
                  "params": False, "attributes": False, "inputs": True, "moved": False,
                  "describe": False, "peer": False, "cases": True}
TARGET_KEYS = {"speedup": False, "speedup_batch1": False, "copy_fraction": False}
PEER_KEYS = {"prepare": False, "call": True, "crash_prone": False}
CASE_KEYS = {"label": True, "params": True, "suites": False}
# Functions the bench puts beside the names of an `inputs` expression (aclnn_cpu/bench.py,
# INPUT_HELPERS): random data drawn from the case's generator, and derived data.
INPUT_HELPERS = ("np", "normal", "uniform", "softmax", "warp_grid")
BUILTINS = frozenset({"len", "list", "tuple", "int", "float", "bool", "range", "min", "max", "abs",
                      "sum", "enumerate", "zip", "all", "any", "sorted", "dict", "round"})
PEER_NAMES = ("torch", "torch_dtype")

CaseValue = Any  # a YAML scalar, or a tuple of them


@dataclass(frozen=True)
class Targets:
    """What the bench requires: speedup (torch time / ours) >= speedup everywhere (and >=
    speedup_batch1 when the first input's first dim is 1); copy_fraction: the op streams its
    data, so once the working set outgrows the last-level cache it must reach that fraction of
    the bandwidth of a copy of the same bytes."""
    speedup: float = 1.0
    speedup_batch1: Optional[float] = None
    copy_fraction: Optional[float] = None


@dataclass(frozen=True)
class Peer:
    prepare: Tuple[Tuple[str, str], ...]   # (name, expression), evaluated once, in order
    call: str                              # the timed expression; a tensor or a sequence of them
    crash_prone: Tuple[str, ...]           # dtypes whose call may take the process down
    line: int


@dataclass(frozen=True)
class BenchCase:
    label: str
    params: Tuple[Tuple[str, CaseValue], ...]  # the case's own params, then the defaults
    suites: Tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Benchmark:
    name: str                                  # the bench's name of the op (prelu)
    aliases: Tuple[str, ...]                   # further names --ops accepts
    order: Optional[int]                       # position among the ops of the suite
    targets: Targets
    attributes: Tuple[Tuple[str, str], ...]    # (attribute Python name, expression)
    inputs: Tuple[Tuple[str, str], ...]        # (name, expression), in drawing order
    moved: Optional[str]                       # elements read + written (default: all tensors)
    describe: Optional[str]                    # f-string body over the case params
    peer: Optional[Peer]
    cases: Tuple[BenchCase, ...]
    line: int


def names_in(tree: ast.AST) -> Set[str]:
    """Free names of a Python expression: names bound by comprehensions and lambdas excluded."""
    bound: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.comprehension):
            bound |= {t.id for t in ast.walk(node.target) if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Lambda):
            args = node.args
            bound |= {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - bound


class BenchmarkReader:
    """Reads the `benchmark` mapping of one op; `f` is the loader's file helper, `params` the
    op's params and `kwargs` its python_kwargs (already checked)."""

    def __init__(self, f, params: Sequence[model.Param], kwargs: Sequence[model.PythonKwarg]):
        self.f = f
        self.params = params
        self.kwargs = kwargs
        self.input_names = [p.py_name for p in params if p.kind == "input"]
        self.attribute_names = [p.py_name for p in params if not p.is_tensor]
        self.python_names = [p.py_name for p in params if p.kind != "output"]

    def err(self, where: Any, message: str):
        return self.f.error(where, message)

    def expression(self, node: Node, what: str, allowed: Iterable[str], text: Optional[str] = None,
                   template: bool = False) -> str:
        f = self.f
        text = f.string(node, what) if text is None else text
        source = "f" + repr(text) if template else text
        try:
            tree = ast.parse(source.strip(), mode="eval")
        except SyntaxError as exc:
            raise self.err(node, f"{what} is not a Python {'f-string body' if template else 'expression'}: "
                                 f"{exc.msg}") from None
        allowed = list(dict.fromkeys(allowed))
        for name in sorted(names_in(tree)):
            if name not in allowed and name not in BUILTINS:
                raise self.err(node, f"{what} uses unknown name '{name}' (names: {', '.join(allowed)})")
        return text.strip()

    def number(self, node: Node, what: str) -> float:
        value = float(self.f.scalar(node, what, float))
        if not math.isfinite(value) or value <= 0:
            raise self.err(node, f"{what} must be a positive number, got {value:g}")
        return value

    def case_value(self, node: Node, what: str) -> CaseValue:
        value = self.f.value(node)

        def convert(v: Any) -> CaseValue:
            if isinstance(v, (bool, int, float, str)):
                return v
            if isinstance(v, list):
                return tuple(convert(x) for x in v)
            raise self.err(node, f"{what} must be a number, a boolean, a string or a list of them, "
                                 f"got {self.f.describe_node(node)}")
        return convert(value)

    def named_mapping(self, node: Node, what: str) -> List[Tuple[str, Node, Node]]:
        """A mapping whose keys the caller checks: [(key, key node, value node)] in file order."""
        f = self.f
        if not isinstance(node, MappingNode):
            raise self.err(node, f"{what} must be a mapping, got {f.describe_node(node)}")
        keys = {str(f.value(k)): False for k, _ in node.value}
        return [(k, kn, vn) for k, (kn, vn) in f.mapping(node, what, keys).items()]

    # ---- the section ----------------------------------------------------------------------------

    def read(self, node: Node, python: str) -> Benchmark:
        f = self.f
        keys = f.mapping(node, "'benchmark'", BENCHMARK_KEYS)
        name = python
        if "name" in keys:
            name = f.string(keys["name"][1], "'name' of the benchmark")
            if not name.isidentifier():
                raise self.err(keys["name"][1], f"'name' of the benchmark must be an identifier, got '{name}'")
        aliases: List[str] = []
        if "aliases" in keys:
            for item in f.sequence(keys["aliases"][1], "'aliases' of the benchmark"):
                alias = f.string(item, "an alias of the benchmark").lower()
                if alias in aliases or alias == name:
                    raise self.err(item, f"alias '{alias}' is listed twice")
                aliases.append(alias)
        order = f.scalar(keys["order"][1], "'order' of the benchmark", int) if "order" in keys else None
        targets = self.targets(keys["targets"][1]) if "targets" in keys else Targets()
        defaults = []
        if "params" in keys:
            defaults = [(k, self.case_value(vn, f"default of case param '{k}'"))
                        for k, _, vn in self.named_mapping(keys["params"][1], "'params' of the benchmark")]
        cases = self.cases(keys["cases"][1], dict(defaults))
        case_params = [k for k, _ in cases[0].params]
        attributes = self.attributes(keys["attributes"][1], case_params) if "attributes" in keys else ()
        inputs = self.inputs(keys["inputs"][1], case_params)
        moved = None
        if "moved" in keys:
            moved = self.expression(keys["moved"][1], "'moved' of the benchmark", self.python_names)
        describe = None
        if "describe" in keys:
            describe = self.expression(keys["describe"][1], "'describe' of the benchmark", case_params,
                                       template=True)
        peer = self.peer(keys["peer"][1]) if "peer" in keys else None
        return Benchmark(name=name, aliases=tuple(aliases), order=order, targets=targets,
                         attributes=attributes, inputs=inputs, moved=moved, describe=describe,
                         peer=peer, cases=cases, line=node.start_mark.line + 1)

    def targets(self, node: Node) -> Targets:
        keys = self.f.mapping(node, "'targets' of the benchmark", TARGET_KEYS)
        values = {k: self.number(vn, f"target '{k}'") for k, (_, vn) in keys.items()}
        if values.get("copy_fraction", 0) > 1:
            raise self.err(keys["copy_fraction"][1], "target 'copy_fraction' is a fraction of the "
                                                     f"copy's bandwidth, at most 1, got {values['copy_fraction']:g}")
        return Targets(**values)

    def cases(self, node: Node, defaults: Dict[str, CaseValue]) -> Tuple[BenchCase, ...]:
        f = self.f
        items = f.sequence(node, "'cases' of the benchmark")
        if not items:
            raise self.err(node, "'cases' of the benchmark must list at least one case")
        cases: List[BenchCase] = []
        for i, item in enumerate(items):
            keys = f.mapping(item, f"case {i + 1} of the benchmark", CASE_KEYS)
            label = f.string(keys["label"][1], f"'label' of case {i + 1}")
            what = f"case '{label}'"
            for other in cases:
                if other.label == label:
                    raise self.err(keys["label"][1], f"{what} is declared twice (first at line {other.line})")
            own = [(k, self.case_value(vn, f"param '{k}' of {what}"))
                   for k, _, vn in self.named_mapping(keys["params"][1], f"'params' of {what}")]
            for k, _ in own:
                if not k.isidentifier():
                    raise self.err(keys["params"][1], f"param '{k}' of {what} must be an identifier")
            params = own + [(k, v) for k, v in defaults.items() if k not in dict(own)]
            suites = ("full",)
            if "suites" in keys:
                suites = []
                for s in f.sequence(keys["suites"][1], f"'suites' of {what}"):
                    suite = f.string(s, f"a suite of {what}")
                    if suite not in SUITES:
                        raise self.err(s, f"unknown suite '{suite}' in {what} (expected one of: {', '.join(SUITES)})")
                    suites.append(suite)
                suites = tuple(suites)
            if cases and set(dict(params)) != set(dict(cases[0].params)):
                first = sorted(dict(cases[0].params))
                raise self.err(keys["params"][1], f"{what} has params {', '.join(sorted(dict(params)))}; "
                                                  f"every case has the params of the first: {', '.join(first)}")
            cases.append(BenchCase(label, tuple(params), suites, item.start_mark.line + 1))
        return tuple(cases)

    def attributes(self, node: Node, case_params: Sequence[str]) -> Tuple[Tuple[str, str], ...]:
        out = []
        for key, key_node, value_node in self.named_mapping(node, "'attributes' of the benchmark"):
            if key not in self.attribute_names:
                raise self.err(key_node, f"benchmark attribute '{key}' is not the Python name of an "
                                         f"attribute param (attributes: {', '.join(self.attribute_names)})")
            value = self.f.value(value_node)  # a number or boolean stands for itself
            text = repr(value) if isinstance(value, (bool, int, float)) else None
            out.append((key, self.expression(value_node, f"benchmark attribute '{key}'", case_params, text)))
        given = dict(out)
        for p in self.params:
            if not p.is_tensor and not p.has_default and p.py_name not in given:
                raise self.err(node, f"the benchmark gives no value for attribute '{p.py_name}' "
                                     f"(it has no default)")
        return tuple(out)

    def inputs(self, node: Node, case_params: Sequence[str]) -> Tuple[Tuple[str, str], ...]:
        out: List[Tuple[str, str]] = []
        known = list(case_params) + self.attribute_names + list(INPUT_HELPERS)
        for key, key_node, value_node in self.named_mapping(node, "'inputs' of the benchmark"):
            if not key.isidentifier():
                raise self.err(key_node, f"benchmark input '{key}' must be an identifier")
            out.append((key, self.expression(value_node, f"benchmark input '{key}'",
                                             known + [k for k, _ in out])))
        made = dict(out)
        for p in self.params:
            if p.kind == "input" and not p.optional and p.py_name not in made:
                raise self.err(node, f"the benchmark's inputs do not make input '{p.py_name}' "
                                     f"(inputs: {', '.join(self.input_names)})")
        return tuple(out)

    def peer(self, node: Node) -> Peer:
        f = self.f
        keys = f.mapping(node, "'peer' of the benchmark", PEER_KEYS)
        known = list(PEER_NAMES) + self.python_names
        prepare: List[Tuple[str, str]] = []
        if "prepare" in keys:
            for key, key_node, value_node in self.named_mapping(keys["prepare"][1], "'prepare' of the peer"):
                if not key.isidentifier():
                    raise self.err(key_node, f"peer preparation '{key}' must be an identifier")
                prepare.append((key, self.expression(value_node, f"peer preparation '{key}'",
                                                     known + [k for k, _ in prepare])))
        call = self.expression(keys["call"][1], "'call' of the peer", known + [k for k, _ in prepare])
        crash_prone: List[str] = []
        if "crash_prone" in keys:
            for item in f.sequence(keys["crash_prone"][1], "'crash_prone' of the peer"):
                dtype = f.string(item, "a dtype of 'crash_prone'")
                if dtype not in model.DTYPES:
                    raise self.err(item, f"unknown dtype '{dtype}' in 'crash_prone' "
                                         f"(expected one of: {', '.join(model.DTYPES)})")
                crash_prone.append(dtype)
        return Peer(tuple(prepare), call, tuple(crash_prone), node.start_mark.line + 1)


def check_bench_names(ops: Sequence[Any], error) -> None:
    """The bench names and aliases are unique across ops (error(op, message) raises). They win
    over another op's automatic names (its Python name, op name and C name), which the bench
    then drops: `--ops prelu` stays PreluBackward's when a forward op's Python name is prelu."""
    seen: Dict[str, str] = {}
    for op in ops:
        if op.benchmark is None:
            continue
        for alias in explicit_names(op):
            if alias in seen and seen[alias] != op.name:
                raise error(op, f"benchmark name or alias '{alias}' is already taken by {seen[alias]}")
            seen[alias] = op.name


def explicit_names(op: Any) -> Tuple[str, ...]:
    """The bench name and the aliases the YAML lists, lower case."""
    return tuple(dict.fromkeys(n.lower() for n in (op.benchmark.name, *op.benchmark.aliases)))


def entry(op: Any) -> Optional[dict]:
    """The section as plain literals for aclnn_cpu/_registry.py."""
    b = op.benchmark
    if b is None:
        return None
    t = b.targets
    return {
        "name": b.name,
        "aliases": list(explicit_names(op)),
        "order": b.order,
        "targets": {"speedup": t.speedup, "speedup_batch1": t.speedup_batch1,
                    "copy_fraction": t.copy_fraction},
        "attributes": dict(b.attributes),
        "inputs": dict(b.inputs),
        "moved": b.moved,
        "describe": b.describe,
        "peer": None if b.peer is None else {"prepare": dict(b.peer.prepare), "call": b.peer.call,
                                             "crash_prone": list(b.peer.crash_prone)},
        "cases": [{"label": c.label, "params": dict(c.params), "suites": list(c.suites)}
                  for c in b.cases],
    }


def docs_lines(op: Any) -> List[str]:
    """The op's benchmark in docs/ops.md: its targets, its peer and its cases."""
    b = op.benchmark
    if b is None:
        return []
    t = b.targets
    goals = [f"speed-up over PyTorch >= {t.speedup:g}x"]
    if t.speedup_batch1 is not None:
        goals.append(f">= {t.speedup_batch1:g}x at batch 1")
    if t.copy_fraction is not None:
        goals.append(f">= {t.copy_fraction:.0%} of a copy's bandwidth once the data outgrows the "
                     f"last-level cache")
    peer = "no PyTorch peer"
    if b.peer:
        where = "; ".join(f"`{k}` = `{v}`" for k, v in b.peer.prepare)
        peer = f"`{b.peer.call}`" + (f" (where {where})" if where else "")
    out = ["### Benchmark", "",
           f"`python -m aclnn_cpu bench --ops {b.name}` times it against {peer}; targets: "
           f"{', '.join(goals)}.", "",
           "| case | shape | suites |", "| --- | --- | --- |"]
    for case in b.cases:
        params = dict(case.params)
        shape = (eval("f" + repr(b.describe), {"__builtins__": __builtins__}, params) if b.describe
                 else " ".join(f"{k}={v}" for k, v in params.items()))
        out.append(f"| {case.label} | {shape.replace('|', '/')} | {', '.join(case.suites)} |")
    return out + [""]
