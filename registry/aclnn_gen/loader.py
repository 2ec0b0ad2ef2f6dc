"""Strict loader: registry/<op>.yaml -> model.Op, or a RegistryError that names file:line.

PyYAML composes the document into nodes (which carry their line); we walk the nodes ourselves
instead of letting PyYAML build dicts, so that duplicate keys, unknown keys and wrong types are
all caught and located. The checks run in the order a reader would fix them: structure of each
section, then references between sections, then cross-section coverage (every required tensor is
null-checked, every tensor's dtype is constrained, ...).
"""
from __future__ import annotations

import ast
import dataclasses
import math
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from . import benchmark as bench_section
from . import model
from .exprs import (CPP_ALLOWED_NAMES, Placeholder, cpp_calls, cpp_identifiers, parse_template,
                    unbalanced)
from .model import (Alloc, BroadcastsTo, Check, DimEquals, DimRef, DtypeIn, DtypeSet, Example,
                    ExampleTensor, MaskRef, MaxRank, NotNull, NumelEquals, Op, Param,
                    PythonKwarg, RankEquals, Rule, SameDtype, SameShape, ShapeEquals, Succeed,
                    ValueIn)
from .naming import is_c_identifier, is_python_identifier, python_name, snake_case


class RegistryError(Exception):
    """A registry file breaks the schema. str(error) is 'registry/x.yaml:12: what is wrong'."""

    def __init__(self, path: str, line: int, message: str):
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line
        self.detail = message


# Names the generated code itself uses next to the params: the C prototype, locals of the
# generated C++ and Cython, and the validate.h helpers (`dim` excepted: Softmax has a param named
# dim, so an op with that param may not use the dim() helper, see _check_cpp_text).
RESERVED_C_NAMES = frozenset({
    "workspaceSize", "executor", "workspace", "stream", "kOpName", "status", "workspace_size",
    "ex", "args", "expected", "failed", "planned", "i", "validate", "make_view", "reject",
    "fail", "failure_count", "register_executor", "run_executor", "active_isa",
    "make_scalar_arg", "make_int_array_arg", "keep",
} | (set(model.CPP_HELPERS) - {"dim"}))
# `out` is the functional API's keyword: only the single output of an op may be called so.
RESERVED_PY_NAMES = frozenset({"executor", "_", "as_input", "dtype_of", "new_output", "shape_of",
                               "unpack_out", "run_planned", "int64_value", "float_value",
                               "flag_value"})
# Names Python allocation expressions may use besides the op's own Python names.
# (prod is math.prod, imported by the generated _ops.pyx.)
ALLOC_ALLOWED_NAMES = frozenset({"shape_of", "dtype_of", "prod", "len", "tuple", "int", "max",
                                 "min", "all", "any", "None", "True", "False", "enumerate",
                                 "range", "zip", "sorted", "list", "abs"})

TOP_KEYS = {"name": True, "python": True, "kernel": True, "source": False, "summary": True,
            "description": False, "products": True, "dtype_sets": True, "params": True,
            "python_kwargs": False, "rules": True, "example": False,
            "benchmark": False}
PARAM_KEYS = {"name": True, "kind": True, "doc": False, "optional": False, "mask": False,
              "py": False, "default": False, "size": False, "alloc": False}
ALLOC_KEYS = {"shape": True, "dtype": True, "layout": False}
KWARG_KEYS = {"name": True, "default": True, "doc": False}
EXAMPLE_KEYS = {"dtype": True, "inputs": True, "attributes": False}
EXAMPLE_TENSOR_KEYS = {"shape": True, "data": True}
RULE_COMMON_KEYS = {"kind": True, "when": False, "status": False, "message": False, "doc": False}

# kind -> (kind-specific keys {key: required}, model class)
RULE_KINDS: Dict[str, Tuple[Dict[str, bool], type]] = {
    "not_null": ({"params": True}, NotNull),
    "max_rank": ({"params": True, "rank": True}, MaxRank),
    "rank": ({"params": True, "rank": True}, RankEquals),
    "dtype_in": ({"params": True, "set": True}, DtypeIn),
    "same_dtype": ({"params": True}, SameDtype),
    "same_shape": ({"params": True}, SameShape),
    "shape_equals": ({"params": True, "shape": True}, ShapeEquals),
    "numel_equals": ({"params": True, "value": True}, NumelEquals),
    "broadcasts_to": ({"params": True, "target": True}, BroadcastsTo),
    "dim_equals": ({"dims": True}, DimEquals),
    "value_in": ({"params": True, "values": True}, ValueIn),
    "check": ({"check": True}, Check),
    "succeed": ({}, Succeed),
}

_TYPE_NAMES = {str: "a string", int: "an integer", bool: "a boolean", float: "a number",
               list: "a list", dict: "a mapping"}


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_describe(v) for v in value) + "]"
    if isinstance(value, dict):
        return "a mapping"
    return repr(value)


class _File:
    """One YAML file being read: its display path and the error helper."""

    def __init__(self, display_path: str):
        self.path = display_path
        self._constructor = yaml.constructor.SafeConstructor()

    def error(self, where: Any, message: str) -> RegistryError:
        line = where if isinstance(where, int) else where.start_mark.line + 1
        return RegistryError(self.path, line, message)

    # ---- node access ----------------------------------------------------------------------------

    def mapping(self, node: Node, what: str, keys: Dict[str, bool]) -> Dict[str, Tuple[Node, Node]]:
        """Key name -> (key node, value node); rejects non-mappings, duplicates, unknown keys."""
        if not isinstance(node, MappingNode):
            raise self.error(node, f"{what} must be a mapping, got {self.describe_node(node)}")
        found: Dict[str, Tuple[Node, Node]] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode) or not isinstance(self.value(key_node), str):
                raise self.error(key_node, f"keys of {what} must be strings")
            key = key_node.value
            if key in found:
                raise self.error(key_node, f"duplicate key '{key}' in {what} "
                                           f"(first at line {found[key][0].start_mark.line + 1})")
            if key not in keys:
                raise self.error(key_node, f"unknown key '{key}' in {what} "
                                           f"(expected one of: {', '.join(keys)})")
            found[key] = (key_node, value_node)
        for key, required in keys.items():
            if required and key not in found:
                raise self.error(node, f"missing key '{key}' in {what}")
        return found

    def sequence(self, node: Node, what: str) -> List[Node]:
        if not isinstance(node, SequenceNode):
            raise self.error(node, f"{what} must be a list, got {self.describe_node(node)}")
        return list(node.value)

    def value(self, node: Node) -> Any:
        return self._constructor.construct_object(node, deep=True)

    def scalar(self, node: Node, what: str, kind: type) -> Any:
        if not isinstance(node, ScalarNode):
            raise self.error(node, f"{what} must be {_TYPE_NAMES[kind]}, got {self.describe_node(node)}")
        value = self.value(node)
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok:
            raise self.error(node, f"{what} must be {_TYPE_NAMES[kind]}, got {_describe(value)}")
        return value

    def string(self, node: Node, what: str, allow_empty: bool = False) -> str:
        text = self.scalar(node, what, str)
        if not allow_empty and not text.strip():
            raise self.error(node, f"{what} must not be empty")
        return text

    def describe_node(self, node: Node) -> str:
        if isinstance(node, MappingNode):
            return "a mapping"
        if isinstance(node, SequenceNode):
            return "a list"
        return _describe(self.value(node))


# ---- the loader proper ------------------------------------------------------------------------


def load_op(path: Path, display_path: Optional[str] = None) -> Op:
    """Reads and checks one registry file."""
    display = display_path or str(path)
    f = _File(display)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RegistryError(display, 1, f"cannot read: {exc.strerror}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise RegistryError(display, line, f"YAML syntax error: {exc.problem or exc}") from None
    if root is None:
        raise RegistryError(display, 1, "empty file (expected an op mapping)")
    return _OpReader(f, root, path).read()


class _OpReader:
    def __init__(self, f: _File, root: Node, path: Path):
        self.f = f
        self.root = root
        self.path = path
        self.params: List[Param] = []
        self.by_name: Dict[str, Param] = {}

    def err(self, where: Any, message: str) -> RegistryError:
        return self.f.error(where, message)

    def read(self) -> Op:
        f = self.f
        top = f.mapping(self.root, "the op (top level)", TOP_KEYS)
        name_node = top["name"][1]
        name = f.string(name_node, "'name'")
        if not is_c_identifier(name) or not name[0].isupper():
            raise self.err(name_node, f"op name '{name}' must be a CamelCase identifier "
                                      f"(aclnn<name> is the C function)")
        snake = snake_case(name)
        if self.path.suffix == ".yaml" and self.path.stem != snake:
            raise self.err(name_node, f"op '{name}' must live in {snake}.yaml, "
                                      f"not {self.path.name}")
        python = self._identifier(top["python"][1], "'python'", python_style=True)
        kernel = self._identifier(top["kernel"][1], "'kernel'", python_style=False)
        # The CANN document the op follows; an op a user adds may have none.
        source = f.string(top["source"][1], "'source'") if "source" in top else ""
        summary = f.string(top["summary"][1], "'summary'")
        if "\n" in summary.strip():
            raise self.err(top["summary"][1], "'summary' must be one line (use 'description')")
        description = ""
        if "description" in top:
            description = f.string(top["description"][1], "'description'")
        products = self._products(top["products"][1])
        dtype_sets = self._dtype_sets(top["dtype_sets"][1], products)
        self._params(top["params"][1])
        kwargs = self._python_kwargs(top["python_kwargs"][1]) if "python_kwargs" in top else ()
        self._check_python_signature(kwargs)
        self._check_allocs(kwargs)
        rules = self._rules(top["rules"][1], dtype_sets)
        self._check_coverage(rules)
        example = self._example(top["example"][1]) if "example" in top else None
        benchmark = None
        if "benchmark" in top:
            benchmark = bench_section.BenchmarkReader(f, self.params, kwargs).read(top["benchmark"][1], python)
        return Op(name=name, python=python, kernel=kernel, source=source, summary=summary.strip(),
                  description=description.strip(), products=products, dtype_sets=dtype_sets,
                  params=tuple(self.params), python_kwargs=kwargs, rules=rules, example=example,
                  path=self.f.path, snake=snake, benchmark=benchmark,
                  key_lines=tuple((key, top[key][1].start_mark.line + 1)
                                  for key in ("name", "python", "kernel")))

    # ---- top-level pieces -------------------------------------------------------------------

    def _identifier(self, node: Node, what: str, python_style: bool) -> str:
        value = self.f.string(node, what)
        ok = is_python_identifier(value) if python_style else is_c_identifier(value)
        if not ok:
            raise self.err(node, f"{what} must be an identifier, got '{value}'")
        return value

    def _products(self, node: Node) -> Tuple[str, ...]:
        items = self.f.sequence(node, "'products'")
        if not items:
            raise self.err(node, "'products' must list at least one product")
        products: List[str] = []
        for item in items:
            product = self.f.string(item, "a product")
            if product not in model.PRODUCTS:
                raise self.err(item, f"unknown product '{product}' "
                                     f"(expected one of: {', '.join(model.PRODUCTS)})")
            if product in products:
                raise self.err(item, f"product '{product}' is listed twice")
            products.append(product)
        return tuple(products)

    def _dtype_sets(self, node: Node, products: Tuple[str, ...]) -> Tuple[DtypeSet, ...]:
        f = self.f
        if not isinstance(node, MappingNode):
            raise self.err(node, f"'dtype_sets' must be a mapping, got {f.describe_node(node)}")
        keys = {}
        for key_node, _ in node.value:
            keys[str(f.value(key_node))] = False
        entries = f.mapping(node, "'dtype_sets'", keys)
        sets: List[DtypeSet] = []
        for set_name, (key_node, value_node) in entries.items():
            if not is_c_identifier(set_name):
                raise self.err(key_node, f"dtype set name '{set_name}' must be an identifier")
            what = f"dtype set '{set_name}'"
            if not isinstance(value_node, MappingNode):
                raise self.err(value_node, f"{what} must map products to dtype lists, "
                                           f"got {f.describe_node(value_node)}")
            per = f.mapping(value_node, what, {p: False for p in model.PRODUCTS})
            for product, (pnode, _) in per.items():
                if product not in products:
                    raise self.err(pnode, f"{what} names product '{product}', which is not in "
                                          f"'products' ({', '.join(products)})")
            for product in products:
                if product not in per:
                    raise self.err(value_node, f"{what} has no entry for product '{product}'")
            per_product = []
            for product in products:
                dnode = per[product][1]
                dtypes: List[str] = []
                for item in f.sequence(dnode, f"{what} for {product}"):
                    dtype = f.string(item, f"a dtype of {what}")
                    if dtype not in model.DTYPES:
                        raise self.err(item, f"unknown dtype '{dtype}' in {what} "
                                             f"(expected one of: {', '.join(model.DTYPES)})")
                    if dtype in dtypes:
                        raise self.err(item, f"dtype '{dtype}' is listed twice in {what}")
                    dtypes.append(dtype)
                per_product.append((product, tuple(dtypes)))
            sets.append(DtypeSet(set_name, tuple(per_product), key_node.start_mark.line + 1))
        if not sets:
            raise self.err(node, "'dtype_sets' must declare at least one set")
        return tuple(sets)

    # ---- params -----------------------------------------------------------------------------

    def _params(self, node: Node) -> None:
        f = self.f
        items = f.sequence(node, "'params'")
        if not items:
            raise self.err(node, "'params' must list the C parameters")
        raw = []
        py_names: Dict[str, int] = {}
        for index, item in enumerate(items):
            what = f"param {index + 1}"
            if isinstance(item, MappingNode):
                for key_node, value_node in item.value:
                    if (isinstance(key_node, ScalarNode) and key_node.value == "name"
                            and isinstance(value_node, ScalarNode)):
                        what = f"param '{value_node.value}'"
            keys = f.mapping(item, what, PARAM_KEYS)
            name_node = keys["name"][1]
            name = f.string(name_node, f"'name' of {what}")
            if not is_c_identifier(name):
                raise self.err(name_node, f"param name '{name}' must be a C identifier")
            if name in RESERVED_C_NAMES:
                raise self.err(name_node, f"param name '{name}' is reserved by the generated code")
            if name in self.by_name:
                raise self.err(name_node, f"duplicate param '{name}' "
                                          f"(first declared at line {self.by_name[name].line})")
            kind_node = keys["kind"][1]
            kind = f.string(kind_node, f"'kind' of {what}")
            if kind not in model.PARAM_KINDS:
                raise self.err(kind_node, f"unknown param kind '{kind}' in {what} "
                                          f"(expected one of: {', '.join(model.PARAM_KINDS)})")
            doc = f.string(keys["doc"][1], f"'doc' of {what}", allow_empty=True) if "doc" in keys else ""
            py = python_name(name)
            if "py" in keys:
                py = f.string(keys["py"][1], f"'py' of {what}")
                if not is_python_identifier(py):
                    raise self.err(keys["py"][1], f"'py' of {what} must be a Python identifier, "
                                                  f"got '{py}'")
            elif not is_python_identifier(py):
                raise self.err(name_node, f"the Python name '{py}' of {what} is not usable; "
                                          f"give one with 'py:'")
            py_line = (keys["py"][1] if "py" in keys else name_node).start_mark.line + 1
            if py in RESERVED_PY_NAMES or (py == "out" and kind != "output"):
                raise self.err(py_line, f"Python name '{py}' of {what} is reserved "
                                        f"(the functional API uses it)")
            if py in py_names:
                raise self.err(py_line, f"Python name '{py}' of {what} is already used by the "
                                        f"param at line {py_names[py]}")
            py_names[py] = py_line

            def only(key: str, allowed: Sequence[str], hint: str) -> None:
                if key in keys and kind not in allowed:
                    raise self.err(keys[key][0], f"'{key}' is not allowed on {what} of kind "
                                                 f"'{kind}' ({hint})")

            only("optional", list(model.OPTIONAL_KINDS),
                 "only inputs, scalars and integer arrays may be optional")
            only("mask", ["output"], "only outputs have a mask")
            only("alloc", ["output"], "only outputs are allocated")
            only("size", ["bool_array"], "only bool arrays have a size")
            only("default", [k for k in model.PARAM_KINDS if k != "output"],
                 "outputs are passed through out=")
            optional = f.scalar(keys["optional"][1], f"'optional' of {what}", bool) if "optional" in keys else False
            size = 0
            if kind == "bool_array":
                if "size" not in keys:
                    raise self.err(item, f"missing key 'size' in {what} (bool arrays need one)")
                size = f.scalar(keys["size"][1], f"'size' of {what}", int)
                if size < 1:
                    raise self.err(keys["size"][1], f"'size' of {what} must be at least 1")
            alloc = None
            if kind == "output":
                if "alloc" not in keys:
                    raise self.err(item, f"missing key 'alloc' in {what} "
                                         f"(how the functional API allocates it)")
                anode = keys["alloc"][1]
                akeys = f.mapping(anode, f"'alloc' of {what}", ALLOC_KEYS)
                alloc = Alloc(shape=f.string(akeys["shape"][1], f"'alloc.shape' of {what}"),
                              dtype=f.string(akeys["dtype"][1], f"'alloc.dtype' of {what}"),
                              layout=(f.string(akeys["layout"][1], f"'alloc.layout' of {what}")
                                      if "layout" in akeys else None))
            has_default = "default" in keys
            default = self._py_default(keys["default"][1], f"'default' of {what}") if has_default else None
            if has_default:
                self._check_default_type(kind, default, size, keys["default"][1], f"'default' of {what}",
                                         optional)
            raw.append((keys, item))
            param = Param(name=name, kind=kind, py_name=py, line=name_node.start_mark.line + 1,
                          doc=doc.strip(), optional=optional, mask=None, has_default=has_default,
                          default=default, size=size, alloc=alloc)
            self.params.append(param)
            self.by_name[name] = param
        outputs = [p for p in self.params if p.kind == "output"]
        if not outputs:
            raise self.err(node, "'params' must declare at least one output")
        if len(outputs) > 1:
            for p in outputs:
                if p.py_name == "out":
                    raise self.err(p.line, f"Python name 'out' of param '{p.name}' is reserved: "
                                           f"with several outputs, out= takes the tuple of them")
        # Masks refer to bool arrays, which may be declared anywhere in the list.
        for i, (keys, item) in enumerate(raw):
            if "mask" not in keys:
                continue
            param = self.params[i]
            mask = self._mask(keys["mask"][1], f"param '{param.name}'")
            self.params[i] = dataclasses.replace(param, mask=mask)
            self.by_name[param.name] = self.params[i]
        for i, param in enumerate(self.params):
            if param.mask is None:
                continue
            for other in self.params[:i]:
                if other.mask == param.mask:
                    raise self.err(param.line, f"outputs '{other.name}' and '{param.name}' use "
                                               f"the same mask {param.mask.array}[{param.mask.index}]")

    def _mask(self, node: Node, what: str) -> MaskRef:
        f = self.f
        items = f.sequence(node, f"'mask' of {what}")
        if len(items) != 2:
            raise self.err(node, f"'mask' of {what} must be [bool_array_param, index]")
        array = f.string(items[0], f"mask array of {what}")
        index = f.scalar(items[1], f"mask index of {what}", int)
        target = self.by_name.get(array)
        if target is None:
            raise self.err(items[0], f"mask of {what} refers to undeclared param '{array}'")
        if target.kind != "bool_array":
            raise self.err(items[0], f"mask of {what} refers to '{array}' of kind "
                                     f"'{target.kind}', not a bool_array")
        if not 0 <= index < target.size:
            raise self.err(items[1], f"mask index {index} of {what} is out of range for "
                                     f"'{array}' of size {target.size}")
        return MaskRef(array, index)

    def _py_default(self, node: Node, what: str) -> model.PyDefault:
        """A Python default: a YAML scalar/list, or a string holding a Python literal ('None')."""
        value = self.f.value(node)
        if isinstance(value, str):
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                raise self.err(node, f"{what} must be a YAML value or a Python literal, "
                                     f"got '{value}'") from None

        def convert(v: Any) -> model.PyDefault:
            if v is None or isinstance(v, (bool, int, float, str)):
                if isinstance(v, float) and not math.isfinite(v):
                    raise self.err(node, f"{what} must be finite")
                return v
            if isinstance(v, (list, tuple)):
                return tuple(convert(x) for x in v)
            raise self.err(node, f"{what} must be null, a boolean, a number, a string or a list, "
                                 f"got {_describe(v)}")

        return convert(value)

    def _check_default_type(self, kind: str, default: Any, size: int, node: Node, what: str,
                            optional: bool) -> None:
        def integer(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        def number(v: Any) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        # An optional scalar or integer array may default to None (null); a required one may not.
        absent_ok = optional and default is None
        ok = {
            "input": default is None,
            "int64": integer(default),
            "double": number(default),
            "bool": isinstance(default, bool),
            "scalar": absent_ok or number(default) or isinstance(default, bool),
            "int_array": absent_ok or (isinstance(default, tuple) and all(integer(x) for x in default)),
            "bool_array": (isinstance(default, tuple) and len(default) == size
                           and all(isinstance(x, bool) for x in default)),
        }[kind]
        if not ok:
            maybe_null = " or null (it is optional)" if optional else ""
            expect = {"input": "null", "int64": "an integer", "double": "a number",
                      "bool": "a boolean", "scalar": f"a number or a boolean{maybe_null}",
                      "int_array": f"a list of integers{maybe_null}",
                      "bool_array": f"a list of {size} booleans"}[kind]
            raise self.err(node, f"{what} must be {expect}, got {_describe(default)}")

    def _python_kwargs(self, node: Node) -> Tuple[PythonKwarg, ...]:
        f = self.f
        kwargs: List[PythonKwarg] = []
        py_names = {p.py_name for p in self.params}
        for item in f.sequence(node, "'python_kwargs'"):
            keys = f.mapping(item, "a python_kwargs entry", KWARG_KEYS)
            name = f.string(keys["name"][1], "'name' of a python_kwargs entry")
            what = f"python kwarg '{name}'"
            if not is_python_identifier(name):
                raise self.err(keys["name"][1], f"{what} must be a Python identifier")
            if name in py_names or name in RESERVED_PY_NAMES or any(k.name == name for k in kwargs):
                raise self.err(keys["name"][1], f"{what} clashes with another Python name")
            default = self._py_default(keys["default"][1], f"'default' of {what}")
            doc = f.string(keys["doc"][1], f"'doc' of {what}", allow_empty=True) if "doc" in keys else ""
            kwargs.append(PythonKwarg(name, default, doc.strip(), keys["name"][1].start_mark.line + 1))
        return tuple(kwargs)

    def _check_python_signature(self, kwargs: Tuple[PythonKwarg, ...]) -> None:
        seen_default: Optional[Param] = None
        for p in self.params:
            if p.kind == "output":
                continue
            if p.has_default:
                seen_default = p
            elif seen_default is not None:
                raise self.err(p.line, f"param '{p.name}' has no default but follows "
                                       f"'{seen_default.name}', which has one (Python signature)")

    def _check_allocs(self, kwargs: Tuple[PythonKwarg, ...]) -> None:
        allowed = ({p.py_name for p in self.params if p.kind != "output"}
                   | {k.name for k in kwargs} | ALLOC_ALLOWED_NAMES)
        for p in self.outputs():
            assert p.alloc is not None
            for label, expr in (("shape", p.alloc.shape), ("dtype", p.alloc.dtype)):
                try:
                    tree = ast.parse(expr, mode="eval")
                except SyntaxError as exc:
                    raise self.err(p.line, f"'alloc.{label}' of param '{p.name}' is not a Python "
                                           f"expression: {exc.msg}") from None
                # Names a comprehension binds (`i, s` in `for i, s in enumerate(...)`) are its own.
                bound = {t.id for c in ast.walk(tree) if isinstance(c, ast.comprehension)
                         for t in ast.walk(c.target) if isinstance(t, ast.Name)}
                for n in ast.walk(tree):
                    if isinstance(n, ast.Name) and n.id not in allowed and n.id not in bound:
                        raise self.err(p.line, f"'alloc.{label}' of param '{p.name}' uses unknown "
                                               f"name '{n.id}' (Python names: "
                                               f"{', '.join(sorted(allowed - ALLOC_ALLOWED_NAMES))})")
            if p.alloc.layout is not None:
                tensors = [q.py_name for q in self.params if q.kind == "input"]
                if p.alloc.layout not in tensors:
                    raise self.err(p.line, f"'alloc.layout' of param '{p.name}' must be the Python "
                                           f"name of a tensor input ({', '.join(tensors)}), got "
                                           f"'{p.alloc.layout}'")

    def outputs(self) -> List[Param]:
        return [p for p in self.params if p.kind == "output"]

    # ---- rules ------------------------------------------------------------------------------

    def _rules(self, node: Node, dtype_sets: Tuple[DtypeSet, ...]) -> Tuple[Rule, ...]:
        f = self.f
        items = f.sequence(node, "'rules'")
        rules: List[Rule] = []
        set_names = [s.name for s in dtype_sets]
        null_checked: Dict[str, int] = {}   # tensor -> line of its not_null rule
        rank_fixed: Dict[str, int] = {}     # tensor -> rank an unconditional `rank` rule fixed
        for index, item in enumerate(items):
            if not isinstance(item, MappingNode):
                raise self.err(item, f"rule {index + 1} must be a mapping, got {f.describe_node(item)}")
            kind_node = None
            for key_node, value_node in item.value:
                if isinstance(key_node, ScalarNode) and key_node.value == "kind":
                    kind_node = value_node
            if kind_node is None:
                raise self.err(item, f"missing key 'kind' in rule {index + 1}")
            kind = f.string(kind_node, f"'kind' of rule {index + 1}")
            if kind not in RULE_KINDS:
                raise self.err(kind_node, f"unknown rule kind '{kind}' "
                                          f"(expected one of: {', '.join(RULE_KINDS)})")
            what = f"rule {index + 1} ({kind})"
            specific, cls = RULE_KINDS[kind]
            keys = f.mapping(item, what, {**RULE_COMMON_KEYS, **specific})
            line = item.start_mark.line + 1
            common = self._rule_common(keys, kind, what, line)
            fields: Dict[str, Any] = {}
            if "params" in specific:
                fields["params"] = self._rule_params(keys["params"][1], kind, what)
            if kind in ("max_rank", "rank"):
                rank = f.scalar(keys["rank"][1], f"'rank' of {what}", int)
                if not 0 <= rank <= 8:
                    raise self.err(keys["rank"][1], f"'rank' of {what} must be in [0, 8], got {rank}")
                fields["rank"] = rank
            if kind == "dtype_in":
                set_name = f.string(keys["set"][1], f"'set' of {what}")
                if set_name not in set_names:
                    raise self.err(keys["set"][1], f"{what} uses undeclared dtype set '{set_name}' "
                                                   f"(declared: {', '.join(set_names)})")
                fields["set"] = set_name
            if kind == "shape_equals":
                fields["shape"] = self._cpp(keys["shape"][1], f"'shape' of {what}")
            if kind == "numel_equals":
                fields["value"] = self._cpp(keys["value"][1], f"'value' of {what}")
            if kind == "broadcasts_to":
                target_node = keys["target"][1]
                target = f.string(target_node, f"'target' of {what}")
                self._tensor_ref(target, target_node, what, always_present=True)
                fields["target"] = target
            if kind == "dim_equals":
                if "dim" in self.by_name:
                    raise self.err(kind_node, f"{what} needs the helper dim(), which param 'dim' "
                                              f"hides in this op; use a check rule with rank/shape")
                fields["dims"] = self._dims(keys["dims"][1], what, rank_fixed)
            if kind == "value_in":
                values = []
                for v in f.sequence(keys["values"][1], f"'values' of {what}"):
                    value = f.scalar(v, f"a value of {what}", int)
                    if value in values:
                        raise self.err(v, f"value {value} is listed twice in {what}")
                    values.append(value)
                if not values:
                    raise self.err(keys["values"][1], f"'values' of {what} must not be empty")
                fields["values"] = tuple(values)
            if kind == "succeed":
                # It returns success, so it has no status or message; and it must say when.
                for key in ("status", "message"):
                    if key in keys:
                        raise self.err(keys[key][0], f"{what} succeeds; it takes no '{key}'")
                if common["when"] is None:
                    raise self.err(item, f"missing key 'when' in {what} "
                                         f"(the condition under which phase 1 succeeds at once)")
            if kind == "check":
                fields["check"] = self._cpp(keys["check"][1], f"'check' of {what}")
                if common["message"] is None:
                    raise self.err(item, f"missing key 'message' in {what} "
                                         f"(a check needs words for its failure)")
            rule = cls(kind=kind, line=line, **common, **fields)
            self._check_rule_order(rule, keys, what, null_checked)
            self._check_absent_guard(rule, what)
            if isinstance(rule, NotNull):
                for name in rule.params:
                    null_checked.setdefault(name, line)
            if isinstance(rule, RankEquals) and rule.when is None:
                for name in rule.params:
                    rank_fixed.setdefault(name, rule.rank)
            rules.append(rule)
        if not rules:
            raise self.err(node, "'rules' must not be empty (at least the not_null rule)")
        used_sets = {r.set for r in rules if isinstance(r, DtypeIn)}
        for dset in dtype_sets:
            if dset.name not in used_sets:
                raise self.err(dset.line, f"dtype set '{dset.name}' is used by no dtype_in rule")
        return tuple(rules)

    def _rule_common(self, keys: Dict[str, Tuple[Node, Node]], kind: str, what: str,
                     line: int) -> Dict[str, Any]:
        f = self.f
        status = "nullptr" if kind == "not_null" else "invalid"
        if "status" in keys:
            status = f.string(keys["status"][1], f"'status' of {what} (one of: {', '.join(model.STATUS_CODES)})")
            if status not in model.STATUS_CODES:
                raise self.err(keys["status"][1], f"unknown status '{status}' in {what} "
                                                  f"(expected one of: {', '.join(model.STATUS_CODES)})")
        when = self._cpp(keys["when"][1], f"'when' of {what}") if "when" in keys else None
        message = None
        if "message" in keys:
            mnode = keys["message"][1]
            message = f.string(mnode, f"'message' of {what}")
            try:
                placeholders = list(parse_template(message))
            except ValueError as exc:
                raise self.err(mnode, f"'message' of {what}: {exc}") from None
            for part in placeholders:
                if isinstance(part, Placeholder):
                    self._check_cpp_text(str(part), mnode,
                                         f"placeholder '{{{part}}}' in 'message' of {what}")
        doc = f.string(keys["doc"][1], f"'doc' of {what}", allow_empty=True).strip() if "doc" in keys else ""
        return {"status": status, "when": when, "message": message, "doc": doc}

    def _rule_params(self, node: Node, kind: str, what: str) -> Tuple[str, ...]:
        f = self.f
        items = f.sequence(node, f"'params' of {what}")
        if not items:
            raise self.err(node, f"'params' of {what} must not be empty")
        names: List[str] = []
        for item in items:
            name = f.string(item, f"a param of {what}")
            if name in names:
                raise self.err(item, f"param '{name}' is listed twice in {what}")
            param = self.by_name.get(name)
            if param is None:
                raise self.err(item, f"{what} refers to undeclared param '{name}' "
                                     f"(params: {', '.join(self.by_name)})")
            if kind == "value_in":
                if param.kind != "int64":
                    raise self.err(item, f"{what} applies to int64 params; '{name}' is of kind '{param.kind}'")
            elif kind == "dtype_in" and param.kind == "scalar":
                pass  # a scalar keeps the dtype it was created with
            elif not param.is_tensor:
                takes = "tensors and scalars" if kind == "dtype_in" else "tensors"
                raise self.err(item, f"{what} applies to {takes}; '{name}' is of kind '{param.kind}'")
            if kind == "not_null" and param.optional:
                raise self.err(item, f"'{name}' is optional and cannot be in a not_null rule")
            names.append(name)
        if kind in ("same_dtype", "same_shape"):
            if len(names) < 2:
                raise self.err(node, f"{what} needs at least two params")
            first = self.by_name[names[0]]
            if first.may_be_absent:
                raise self.err(items[0], f"the first param of {what} is the reference and must "
                                         f"always be present; '{first.name}' may be null")
        return tuple(names)

    def _tensor_ref(self, name: str, node: Node, what: str, always_present: bool) -> Param:
        param = self.by_name.get(name)
        if param is None:
            raise self.err(node, f"{what} refers to undeclared param '{name}' "
                                 f"(params: {', '.join(self.by_name)})")
        if not param.is_tensor:
            raise self.err(node, f"{what} applies to tensors; '{name}' is of kind '{param.kind}'")
        if always_present and param.may_be_absent:
            raise self.err(node, f"{what} needs '{name}' to always be present, but it may be null")
        return param

    def _dims(self, node: Node, what: str, rank_fixed: Dict[str, int]) -> Tuple[DimRef, ...]:
        f = self.f
        items = f.sequence(node, f"'dims' of {what}")
        if len(items) < 2:
            raise self.err(node, f"'dims' of {what} needs at least two entries like 'input[0]'")
        refs: List[DimRef] = []
        for item in items:
            text = f.string(item, f"an entry of 'dims' of {what}")
            name, _, rest = text.partition("[")
            name = name.strip()
            try:
                if not rest.endswith("]"):
                    raise ValueError
                index = int(rest[:-1])
            except ValueError:
                raise self.err(item, f"'{text}' in {what} must look like 'param[index]'") from None
            self._tensor_ref(name, item, what, always_present=True)
            rank = rank_fixed.get(name)
            if rank is None:
                raise self.err(item, f"{what} reads a dim of '{name}' before a rank rule fixed "
                                     f"its rank (add an unconditional 'rank' rule earlier)")
            if not -rank <= index < rank:
                raise self.err(item, f"dim index {index} of '{name}' is out of range for rank {rank}")
            refs.append(DimRef(name, index))
        return tuple(refs)

    def _cpp(self, node: Node, what: str) -> str:
        text = self.f.string(node, what)
        self._check_cpp_text(text, node, what)
        return text.strip()

    def _check_cpp_text(self, text: str, node: Node, what: str) -> None:
        problem = unbalanced(text)
        if problem:
            raise self.err(node, f"{what}: unbalanced brackets ({problem}) in '{text}'")
        names = set(self.by_name)
        for ident in cpp_identifiers(text):
            if ident in names or ident in model.CPP_HELPERS or ident in CPP_ALLOWED_NAMES:
                continue
            raise self.err(node, f"{what} uses unknown name '{ident}' (params: "
                                 f"{', '.join(self.by_name)}; helpers: {', '.join(model.CPP_HELPERS)})")
        for call in cpp_calls(text):
            if call in names and call in model.CPP_HELPERS:
                raise self.err(node, f"{what} calls helper '{call}()', but param '{call}' hides it "
                                     f"in this op's validator")

    def _check_rule_order(self, rule: Rule, keys: Dict[str, Tuple[Node, Node]], what: str,
                          null_checked: Dict[str, int]) -> None:
        """A required tensor may be inspected only after the not_null rule that covers it."""
        if isinstance(rule, NotNull):
            return
        used: Dict[str, None] = dict.fromkeys(rule.tensor_params())
        if isinstance(rule, BroadcastsTo):
            used[rule.target] = None
        for text in (rule.when, rule.message, getattr(rule, "check", None),
                     getattr(rule, "shape", None), getattr(rule, "value", None)):
            if text:
                for ident in cpp_identifiers(text):
                    used[ident] = None
        for name in used:
            param = self.by_name.get(name)
            if param is None or not param.is_tensor or param.optional:
                continue
            if name not in null_checked:
                raise self.err(rule.line, f"{what} uses '{name}' before any not_null rule "
                                          f"covers it (null-check tensors first)")

    def _check_absent_guard(self, rule: Rule, what: str) -> None:
        """A C++ snippet that reads a param which may be absent (optional, masked off) must say
        `present(name)` in the rule's `when` or in the snippet itself: the accessors of an absent
        param fail at run time (561000) instead of checking anything."""
        texts = [t for t in (rule.message, getattr(rule, "check", None),
                             getattr(rule, "shape", None), getattr(rule, "value", None)) if t]
        guards = " ".join(t for t in texts + [rule.when or ""])
        for name in dict.fromkeys(i for t in texts + [rule.when or ""] for i in cpp_identifiers(t)):
            param = self.by_name.get(name)
            if param is None or not param.may_be_absent:
                continue
            if not re.search(rf"\bpresent\s*\(\s*{re.escape(name)}\s*\)", guards):
                raise self.err(rule.line, f"{what} reads '{name}', which may be absent, without "
                                          f"a present({name}) guard in its 'when' or its "
                                          f"expression")

    # ---- coverage ---------------------------------------------------------------------------

    def _check_coverage(self, rules: Tuple[Rule, ...]) -> None:
        null_checked = {n for r in rules if isinstance(r, NotNull) for n in r.params}
        for p in self.params:
            if p.is_tensor and not p.optional and p.name not in null_checked:
                raise self.err(p.line, f"required tensor '{p.name}' is covered by no not_null rule")
        # Every tensor's dtype must be pinned (dtype_in), directly or through same_dtype with a
        # pinned tensor: kernels are templated on dtype and must never see an unexpected one.
        pinned = {n for r in rules if isinstance(r, DtypeIn) and r.when is None for n in r.params}
        groups = [set(r.params) for r in rules if isinstance(r, SameDtype) and r.when is None]
        changed = True
        while changed:
            changed = False
            for group in groups:
                if group & pinned and not group <= pinned:
                    pinned |= group
                    changed = True
        for p in self.params:
            if p.is_tensor and p.name not in pinned:
                raise self.err(p.line, f"the dtype of tensor '{p.name}' is constrained by no rule "
                                       f"(add it to a dtype_in rule or to a same_dtype rule with "
                                       f"a constrained tensor)")

    # ---- example ----------------------------------------------------------------------------

    def _example(self, node: Node) -> Example:
        f = self.f
        keys = f.mapping(node, "'example'", EXAMPLE_KEYS)
        dtype_node = keys["dtype"][1]
        dtype = f.string(dtype_node, "'dtype' of the example")
        if dtype not in model.DTYPES:
            raise self.err(dtype_node, f"unknown dtype '{dtype}' in the example "
                                       f"(expected one of: {', '.join(model.DTYPES)})")
        inputs_node = keys["inputs"][1]
        if not isinstance(inputs_node, MappingNode):
            raise self.err(inputs_node, "'inputs' of the example must be a mapping")
        names = {str(f.value(k)): False for k, _ in inputs_node.value}
        entries = f.mapping(inputs_node, "'inputs' of the example", names)
        tensors: Dict[str, ExampleTensor] = {}
        for name, (key_node, value_node) in entries.items():
            param = self.by_name.get(name)
            if param is None or param.kind != "input":
                raise self.err(key_node, f"example input '{name}' is not an input param "
                                         f"(inputs: {', '.join(p.name for p in self.params if p.kind == 'input')})")
            tkeys = f.mapping(value_node, f"example input '{name}'", EXAMPLE_TENSOR_KEYS)
            shape = []
            for item in f.sequence(tkeys["shape"][1], f"'shape' of example input '{name}'"):
                dim = f.scalar(item, f"a dim of example input '{name}'", int)
                if dim < 0:
                    raise self.err(item, f"dims of example input '{name}' must be >= 0")
                shape.append(dim)
            data = [float(f.scalar(item, f"a value of example input '{name}'", float))
                    for item in f.sequence(tkeys["data"][1], f"'data' of example input '{name}'")]
            count = math.prod(shape)
            if count != len(data):
                raise self.err(tkeys["data"][1], f"example input '{name}' has shape {shape} "
                                                 f"({count} elements) but {len(data)} values")
            tensors[name] = ExampleTensor(tuple(shape), tuple(data))
        for p in self.params:
            if p.kind == "input" and not p.optional and p.name not in tensors:
                raise self.err(inputs_node, f"the example gives no data for input '{p.name}'")
        attributes: Dict[str, Any] = {}
        if "attributes" in keys:
            anode = keys["attributes"][1]
            if not isinstance(anode, MappingNode):
                raise self.err(anode, "'attributes' of the example must be a mapping")
            names = {str(f.value(k)): False for k, _ in anode.value}
            for name, (key_node, value_node) in f.mapping(anode, "'attributes' of the example",
                                                          names).items():
                param = self.by_name.get(name)
                if param is None or param.is_tensor:
                    raise self.err(key_node, f"example attribute '{name}' is not an attribute "
                                             f"param (attributes: "
                                             f"{', '.join(p.name for p in self.params if not p.is_tensor)})")
                value = self._py_default(value_node, f"example attribute '{name}'")
                self._check_default_type(param.kind, value, param.size, value_node,
                                         f"example attribute '{name}'", param.optional)
                attributes[name] = value
        for p in self.params:
            if not p.is_tensor and not p.has_default and p.name not in attributes:
                raise self.err(node, f"the example gives no value for attribute '{p.name}' "
                                     f"(it has no default)")
        order = [p.name for p in self.params]
        return Example(
            dtype=dtype,
            inputs=tuple(sorted(tensors.items(), key=lambda kv: order.index(kv[0]))),
            attributes=tuple(sorted(attributes.items(), key=lambda kv: order.index(kv[0]))),
            line=node.start_mark.line + 1)


def load_registry(root: Path, registry_dir: str = "registry") -> List[Op]:
    """All registry/*.yaml under root, sorted by file name; op names must be unique."""
    ops: List[Op] = []
    seen: Dict[str, str] = {}
    for path in sorted((root / registry_dir).glob("*.yaml")):
        display = f"{registry_dir}/{path.name}"
        op = load_op(path, display)
        lines = dict(op.key_lines)
        for key, label, value in (("name", "op", op.name), ("python", "python name", op.python),
                                  ("kernel", "kernel", op.kernel)):
            tag = f"{label}:{value}"
            if tag in seen:
                raise RegistryError(display, lines.get(key, 1),
                                    f"{label} '{value}' is already declared in {seen[tag]}")
            seen[tag] = f"{display}:{lines.get(key, 1)}"
        ops.append(op)
    bench_section.check_bench_names(
        ops, lambda op, message: RegistryError(op.path, op.benchmark.line, message))
    return ops
