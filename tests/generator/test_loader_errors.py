"""The strict loader: one test per kind of mistake, each asserting the exact message and file:line.

Every case edits one spot of a small valid op (BASE) and loads it as registry/mini_backward.yaml.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from registry.aclnn_gen import RegistryError, load_op, load_registry

BASE = """\
name: MiniBackward
python: mini_backward
kernel: mini_backward
source: mini.txt
summary: Minimal op for the loader tests.
products: [atlas_training, atlas_a2]
dtype_sets:
  float:
    atlas_training: [float32, float16]
    atlas_a2: [float32, bfloat16]
params:
  - name: gradOutput
    kind: input
  - name: self
    kind: input
  - name: flags
    kind: bool_array
    size: 2
  - name: gradInput
    kind: output
    mask: [flags, 0]
    alloc: {shape: "shape_of(self)", dtype: "dtype_of(self)"}
rules:
  - kind: not_null
    params: [gradOutput, self, gradInput]
  - kind: dtype_in
    params: [gradOutput, self, gradInput]
    set: float
"""

FILE = "registry/mini_backward.yaml"
PARAM_KEYS = "name, kind, doc, optional, mask, py, default, size, alloc"
TOP_KEYS = ("name, python, kernel, source, summary, description, products, dtype_sets, params, "
            "python_kwargs, rules, example, benchmark")
RULE_KINDS = ("not_null, max_rank, rank, dtype_in, same_dtype, same_shape, shape_equals, "
              "numel_equals, broadcasts_to, dim_equals, value_in, check, succeed")
DTYPES = ("float32, float16, bfloat16, float64, int8, int16, int32, int64, uint8, uint16, uint32, "
          "uint64, bool, complex64, complex128")
PARAMS = "gradOutput, self, flags, gradInput"
HELPERS = ("rank, numel, dim, dtype, shape, present, mask, product, to_string, checked_mul, "
           "broadcasts_to, scalar_value, int_values, dims_in_range, dims_unique, trailing_numel, "
           "format_name, is_private_format")


def edit(old: str, new: str, text: str = BASE) -> str:
    assert text.count(old) >= 1, f"fixture text not found: {old!r}"
    return text.replace(old, new, 1)


def load_error(tmp_path: Path, text: str, file_name: str = "mini_backward.yaml") -> str:
    registry = tmp_path / "registry"
    registry.mkdir(exist_ok=True)
    (registry / file_name).write_text(text, encoding="utf-8")
    with pytest.raises(RegistryError) as info:
        load_registry(tmp_path)
    return str(info.value)


def test_base_fixture_is_valid(tmp_path):
    (tmp_path / "registry").mkdir()
    (tmp_path / "registry" / "mini_backward.yaml").write_text(BASE)
    [op] = load_registry(tmp_path)
    assert op.c_name == "aclnnMiniBackward"
    assert [p.py_name for p in op.params] == ["grad_output", "self", "flags", "grad_input"]


def test_source_is_optional(tmp_path):
    """An op of a user's own follows no CANN document: without `source` it loads, and its
    reference section names none."""
    from registry.aclnn_gen import render
    (tmp_path / "registry").mkdir()
    (tmp_path / "registry" / "mini_backward.yaml").write_text(edit("source: mini.txt\n", ""))
    [op] = load_registry(tmp_path)
    assert op.source == ""
    docs = render([op])["docs/ops.md"]
    assert "Document:" not in docs and "products: atlas_training, atlas_a2 · registry:" in docs


def test_unknown_param_key(tmp_path):
    text = edit("    kind: input\n", "    kind: input\n    dtyp: float32\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:14: unknown key 'dtyp' in param 'gradOutput' (expected one of: {PARAM_KEYS})")


def test_unknown_top_level_key(tmp_path):
    assert load_error(tmp_path, BASE + "extra: 1\n") == (
        f"{FILE}:29: unknown key 'extra' in the op (top level) (expected one of: {TOP_KEYS})")


def test_duplicate_key(tmp_path):
    text = edit("    kind: input\n", "    kind: input\n    kind: output\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:14: duplicate key 'kind' in param 'gradOutput' (first at line 13)")


def test_missing_required_key(tmp_path):
    text = edit("    set: float\n", "")
    assert load_error(tmp_path, text) == f"{FILE}:26: missing key 'set' in rule 2 (dtype_in)"


def test_missing_param_kind(tmp_path):
    text = edit("  - name: self\n    kind: input\n", "  - name: self\n")
    assert load_error(tmp_path, text) == f"{FILE}:14: missing key 'kind' in param 'self'"


def test_wrong_value_type(tmp_path):
    text = edit("    size: 2\n", "    size: two\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:18: 'size' of param 'flags' must be an integer, got 'two'")


def test_bool_given_for_integer(tmp_path):
    text = edit("    size: 2\n", "    size: true\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:18: 'size' of param 'flags' must be an integer, got true")


def test_unknown_dtype(tmp_path):
    text = edit("[float32, bfloat16]", "[float32, bf16]")
    assert load_error(tmp_path, text) == (
        f"{FILE}:10: unknown dtype 'bf16' in dtype set 'float' (expected one of: {DTYPES})")


def test_unknown_product(tmp_path):
    text = edit("products: [atlas_training, atlas_a2]", "products: [atlas_training, atlas_a3]")
    assert load_error(tmp_path, text) == (
        f"{FILE}:6: unknown product 'atlas_a3' "
        f"(expected one of: atlas_training, atlas_a2, atlas_inference)")


def test_dtype_set_names_unlisted_product(tmp_path):
    text = edit("    atlas_a2: [float32, bfloat16]\n",
                "    atlas_a2: [float32, bfloat16]\n    atlas_inference: [float32]\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:11: dtype set 'float' names product 'atlas_inference', which is not in "
        f"'products' (atlas_training, atlas_a2)")


def test_dtype_set_misses_a_product(tmp_path):
    text = edit("    atlas_a2: [float32, bfloat16]\n", "")
    assert load_error(tmp_path, text) == f"{FILE}:9: dtype set 'float' has no entry for product 'atlas_a2'"


def test_unused_dtype_set(tmp_path):
    text = edit("dtype_sets:\n", "dtype_sets:\n  spare:\n    atlas_training: []\n    atlas_a2: []\n")
    assert load_error(tmp_path, text) == f"{FILE}:8: dtype set 'spare' is used by no dtype_in rule"


def test_undeclared_param_in_rule(tmp_path):
    text = edit("    params: [gradOutput, self, gradInput]\n    set: float",
                "    params: [gradOutput, selff, gradInput]\n    set: float")
    assert load_error(tmp_path, text) == (
        f"{FILE}:27: rule 2 (dtype_in) refers to undeclared param 'selff' (params: {PARAMS})")


def test_unknown_rule_kind(tmp_path):
    text = edit("  - kind: dtype_in\n", "  - kind: dtype_is\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:26: unknown rule kind 'dtype_is' (expected one of: {RULE_KINDS})")


def test_unknown_rule_key(tmp_path):
    text = edit("    set: float\n", "    set: float\n    rank: 3\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:29: unknown key 'rank' in rule 2 (dtype_in) "
        f"(expected one of: kind, when, status, message, doc, params, set)")


def test_unknown_param_kind(tmp_path):
    text = edit("    kind: bool_array\n", "    kind: bools\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:17: unknown param kind 'bools' in param 'flags' "
        f"(expected one of: input, output, int64, double, bool, scalar, int_array, bool_array)")


def test_duplicate_param(tmp_path):
    text = edit("  - name: self\n", "  - name: gradOutput\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:14: duplicate param 'gradOutput' (first declared at line 12)")


def test_duplicate_python_name(tmp_path):
    text = edit("  - name: self\n    kind: input\n", "  - name: self\n    kind: input\n    py: grad_output\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:16: Python name 'grad_output' of param 'self' is already used by the param at line 12")


def test_mask_index_out_of_range(tmp_path):
    text = edit("mask: [flags, 0]", "mask: [flags, 2]")
    assert load_error(tmp_path, text) == (
        f"{FILE}:21: mask index 2 of param 'gradInput' is out of range for 'flags' of size 2")


def test_mask_on_a_tensor(tmp_path):
    text = edit("mask: [flags, 0]", "mask: [self, 0]")
    assert load_error(tmp_path, text) == (
        f"{FILE}:21: mask of param 'gradInput' refers to 'self' of kind 'input', not a bool_array")


def test_mask_on_an_input(tmp_path):
    text = edit("  - name: self\n    kind: input\n", "  - name: self\n    kind: input\n    mask: [flags, 1]\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:16: 'mask' is not allowed on param 'self' of kind 'input' (only outputs have a mask)")


def test_optional_output(tmp_path):
    text = edit("    mask: [flags, 0]\n", "    mask: [flags, 0]\n    optional: true\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:22: 'optional' is not allowed on param 'gradInput' of kind 'output' "
        f"(only inputs, scalars and integer arrays may be optional)")


def test_required_tensor_without_not_null(tmp_path):
    text = edit("    params: [gradOutput, self, gradInput]\n  - kind: dtype_in\n"
                "    params: [gradOutput, self, gradInput]\n",
                "    params: [gradOutput, self]\n  - kind: dtype_in\n    params: [gradOutput, self]\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:19: required tensor 'gradInput' is covered by no not_null rule")


def test_rule_uses_tensor_before_its_not_null(tmp_path):
    text = edit("    params: [gradOutput, self, gradInput]\n  - kind: dtype_in",
                "    params: [gradOutput, self]\n  - kind: dtype_in")
    assert load_error(tmp_path, text) == (
        f"{FILE}:26: rule 2 (dtype_in) uses 'gradInput' before any not_null rule covers it "
        f"(null-check tensors first)")


def test_tensor_without_dtype_rule(tmp_path):
    text = edit("    params: [gradOutput, self, gradInput]\n    set: float",
                "    params: [gradOutput, self]\n    set: float")
    assert load_error(tmp_path, text) == (
        f"{FILE}:19: the dtype of tensor 'gradInput' is constrained by no rule (add it to a "
        f"dtype_in rule or to a same_dtype rule with a constrained tensor)")


def test_optional_tensor_in_not_null(tmp_path):
    text = edit("  - name: self\n    kind: input\n", "  - name: self\n    kind: input\n    optional: true\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:26: 'self' is optional and cannot be in a not_null rule")


def test_unknown_name_in_check(tmp_path):
    text = BASE + '  - kind: check\n    check: "rank(gradOutpt) > 0"\n    message: "empty"\n'
    assert load_error(tmp_path, text) == (
        f"{FILE}:30: 'check' of rule 3 (check) uses unknown name 'gradOutpt' "
        f"(params: {PARAMS}; helpers: {HELPERS})")


def test_unknown_name_in_message_placeholder(tmp_path):
    text = BASE + '  - kind: check\n    check: "rank(self) > 0"\n    message: "rank {rnk(self)}"\n'
    assert load_error(tmp_path, text) == (
        f"{FILE}:31: placeholder '{{rnk(self)}}' in 'message' of rule 3 (check) uses unknown "
        f"name 'rnk' (params: {PARAMS}; helpers: {HELPERS})")


def test_unterminated_placeholder(tmp_path):
    text = BASE + '  - kind: check\n    check: "rank(self) > 0"\n    message: "rank {rank(self)"\n'
    assert load_error(tmp_path, text) == (
        f"{FILE}:31: 'message' of rule 3 (check): unterminated placeholder starting at "
        f"'{{rank(self)'")


def test_unbalanced_check(tmp_path):
    text = BASE + '  - kind: check\n    check: "rank(self > 0"\n    message: "x"\n'
    assert load_error(tmp_path, text) == (
        f"{FILE}:30: 'check' of rule 3 (check): unbalanced brackets (unclosed '(') in 'rank(self > 0'")


def test_check_without_message(tmp_path):
    text = BASE + '  - kind: check\n    check: "rank(self) > 0"\n'
    assert load_error(tmp_path, text) == (
        f"{FILE}:29: missing key 'message' in rule 3 (check) (a check needs words for its failure)")


def test_succeed_without_when(tmp_path):
    text = BASE + "  - kind: succeed\n    doc: nothing to do\n"
    assert load_error(tmp_path, text) == (
        f"{FILE}:29: missing key 'when' in rule 3 (succeed) "
        f"(the condition under which phase 1 succeeds at once)")


@pytest.mark.parametrize("key,value", [("status", "invalid"), ("message", "empty")])
def test_succeed_takes_no_status_or_message(tmp_path, key, value):
    text = BASE + f'  - kind: succeed\n    when: "numel(self) == 0"\n    {key}: {value}\n'
    assert load_error(tmp_path, text) == (
        f"{FILE}:31: rule 3 (succeed) succeeds; it takes no '{key}'")


def test_succeed_uses_tensor_before_its_not_null(tmp_path):
    text = edit("rules:\n", 'rules:\n  - kind: succeed\n    when: "numel(self) == 0"\n')
    assert load_error(tmp_path, text) == (
        f"{FILE}:24: rule 1 (succeed) uses 'self' before any not_null rule covers it "
        f"(null-check tensors first)")


def test_unknown_status(tmp_path):
    text = edit("    set: float\n", "    set: float\n    status: wrong\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:29: unknown status 'wrong' in rule 2 (dtype_in) (expected one of: nullptr, invalid)")


def test_dim_equals_before_rank_rule(tmp_path):
    text = BASE + '  - kind: dim_equals\n    dims: ["self[0]", "gradOutput[0]"]\n'
    assert load_error(tmp_path, text) == (
        f"{FILE}:30: rule 3 (dim_equals) reads a dim of 'self' before a rank rule fixed its rank "
        f"(add an unconditional 'rank' rule earlier)")


def test_dim_equals_index_out_of_range(tmp_path):
    text = BASE + ("  - kind: rank\n    params: [self, gradOutput]\n    rank: 2\n"
                   '  - kind: dim_equals\n    dims: ["self[0]", "gradOutput[2]"]\n')
    assert load_error(tmp_path, text) == (
        f"{FILE}:33: dim index 2 of 'gradOutput' is out of range for rank 2")


def test_helper_hidden_by_param(tmp_path):
    text = edit("  - name: flags\n", "  - name: dim\n    kind: int64\n  - name: flags\n")
    text = text + '  - kind: check\n    check: "dim(self, 0) > 0"\n    message: "x"\n'
    assert load_error(tmp_path, text) == (
        f"{FILE}:32: 'check' of rule 3 (check) calls helper 'dim()', but param 'dim' hides it in "
        f"this op's validator")


def test_reserved_param_name(tmp_path):
    text = edit("  - name: flags\n", "  - name: shape\n    kind: int64\n  - name: flags\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:16: param name 'shape' is reserved by the generated code")


def test_unknown_name_in_alloc(tmp_path):
    text = edit('dtype: "dtype_of(self)"', 'dtype: "dtype_of(selff)"')
    assert load_error(tmp_path, text) == (
        f"{FILE}:19: 'alloc.dtype' of param 'gradInput' uses unknown name 'selff' "
        f"(Python names: flags, grad_output, self)")


def test_alloc_layout_not_a_tensor_input(tmp_path):
    text = edit('dtype: "dtype_of(self)"}', 'dtype: "dtype_of(self)", layout: flags}')
    assert load_error(tmp_path, text) == (
        f"{FILE}:19: 'alloc.layout' of param 'gradInput' must be the Python name of a tensor "
        f"input (grad_output, self), got 'flags'")


def test_unknown_key_in_alloc(tmp_path):
    text = edit('dtype: "dtype_of(self)"}', 'dtype: "dtype_of(self)", order: self}')
    assert load_error(tmp_path, text) == (
        f"{FILE}:22: unknown key 'order' in 'alloc' of param 'gradInput' (expected one of: "
        f"shape, dtype, layout)")


def test_output_without_alloc(tmp_path):
    text = edit('    alloc: {shape: "shape_of(self)", dtype: "dtype_of(self)"}\n', "")
    assert load_error(tmp_path, text) == (
        f"{FILE}:19: missing key 'alloc' in param 'gradInput' (how the functional API allocates it)")


def test_default_of_wrong_type(tmp_path):
    text = edit("    size: 2\n", "    size: 2\n    default: [true]\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:19: 'default' of param 'flags' must be a list of 2 booleans, got [true]")


def test_param_without_default_after_default(tmp_path):
    text = edit("  - name: flags\n", "  - name: axis\n    kind: int64\n    default: 0\n"
                                      "  - name: mode\n    kind: int64\n  - name: flags\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:19: param 'mode' has no default but follows 'axis', which has one (Python signature)")


def test_example_data_count(tmp_path):
    text = BASE + ("example:\n  dtype: float32\n  inputs:\n"
                   "    gradOutput: {shape: [2, 2], data: [1, 2, 3]}\n    self: {shape: [1], data: [1]}\n"
                   "  attributes: {flags: [true, true]}\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:32: example input 'gradOutput' has shape [2, 2] (4 elements) but 3 values")


def test_example_misses_an_attribute(tmp_path):
    text = BASE + ("example:\n  dtype: float32\n  inputs:\n"
                   "    gradOutput: {shape: [1], data: [1]}\n    self: {shape: [1], data: [1]}\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:30: the example gives no value for attribute 'flags' (it has no default)")


def test_example_attribute_of_wrong_type(tmp_path):
    text = BASE + ("example:\n  dtype: float32\n  inputs:\n"
                   "    gradOutput: {shape: [1], data: [1]}\n    self: {shape: [1], data: [1]}\n"
                   "  attributes: {flags: [true, 0.5]}\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:34: example attribute 'flags' must be a list of 2 booleans, got [true, 0.5]")


def test_status_of_wrong_type(tmp_path):
    text = edit("    set: float\n", "    set: float\n    status: 161002\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:29: 'status' of rule 2 (dtype_in) (one of: nullptr, invalid) must be a string, "
        f"got 161002")


def test_yaml_syntax_error(tmp_path):
    text = edit("summary: Minimal op for the loader tests.", "summary: a: b")
    assert load_error(tmp_path, text) == (
        f"{FILE}:5: YAML syntax error: mapping values are not allowed here")


def test_file_name_must_match_op(tmp_path):
    assert load_error(tmp_path, BASE, file_name="other.yaml") == (
        "registry/other.yaml:1: op 'MiniBackward' must live in mini_backward.yaml, not other.yaml")


def test_not_a_mapping(tmp_path):
    text = edit("  - name: self\n    kind: input\n", "  - self\n")
    assert load_error(tmp_path, text) == f"{FILE}:14: param 2 must be a mapping, got 'self'"


def test_several_outputs_cannot_be_called_out(tmp_path):
    text = BASE.replace(
        '    alloc: {shape: "shape_of(self)", dtype: "dtype_of(self)"}\n',
        '    alloc: {shape: "shape_of(self)", dtype: "dtype_of(self)"}\n'
        '  - name: out\n    kind: output\n    mask: [flags, 1]\n'
        '    alloc: {shape: "shape_of(self)", dtype: "dtype_of(self)"}\n')
    assert load_error(tmp_path, text) == (
        f"{FILE}:23: Python name 'out' of param 'out' is reserved: with several outputs, out= "
        f"takes the tuple of them")


def test_load_op_reads_one_file(tmp_path):
    path = tmp_path / "mini_backward.yaml"
    path.write_text(BASE)
    op = load_op(path, "registry/mini_backward.yaml")
    assert op.path == "registry/mini_backward.yaml"
    assert [r.kind for r in op.rules] == ["not_null", "dtype_in"]


# ---- scalars, doubles and integer arrays ----------------------------------------------------------

HANDLES = "  - name: flags\n"


def with_param(lines: str) -> str:
    """BASE with the given param lines inserted before `flags` (line 16 onwards)."""
    return edit(HANDLES, lines + HANDLES)


def test_scalar_double_int_array_load(tmp_path):
    text = with_param("  - {name: alpha, kind: scalar, doc: a weight}\n"
                      "  - {name: beta, kind: scalar, optional: true}\n"
                      "  - {name: eps, kind: double}\n"
                      "  - {name: dims, kind: int_array, optional: true}\n")
    text += ('  - kind: dtype_in\n    params: [alpha, beta]\n    set: float\n'
             '  - kind: check\n    check: "scalar_value(alpha) > eps && int_values(dims).size() < 3"\n'
             '    when: "present(dims)"\n    message: "alpha {scalar_value(alpha)}, dims {int_values(dims)}"\n')
    path = tmp_path / "registry"
    path.mkdir()
    (path / "mini_backward.yaml").write_text(text)
    op = load_registry(tmp_path)[0]
    kinds = {p.name: (p.kind, p.optional, p.is_handle) for p in op.attributes}
    assert kinds == {"alpha": ("scalar", False, True), "beta": ("scalar", True, True),
                     "eps": ("double", False, False), "dims": ("int_array", True, True),
                     "flags": ("bool_array", False, False)}


def test_optional_double(tmp_path):
    text = with_param("  - {name: eps, kind: double, optional: true}\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:16: 'optional' is not allowed on param 'eps' of kind 'double' "
        f"(only inputs, scalars and integer arrays may be optional)")


@pytest.mark.parametrize("param, expect", [
    ("{name: eps, kind: double, default: true}", "'default' of param 'eps' must be a number, got true"),
    ("{name: eps, kind: double, default: 'x'}", "'default' of param 'eps' must be a YAML value or a "
                                                "Python literal, got 'x'"),
    ("{name: alpha, kind: scalar, default: null}",
     "'default' of param 'alpha' must be a number or a boolean, got null"),
    ("{name: alpha, kind: scalar, optional: true, default: [1]}",
     "'default' of param 'alpha' must be a number or a boolean or null (it is optional), got [1]"),
    ("{name: dims, kind: int_array, default: [1, 2.5]}",
     "'default' of param 'dims' must be a list of integers, got [1, 2.5]"),
    ("{name: dims, kind: int_array, default: null}",
     "'default' of param 'dims' must be a list of integers, got null"),
])
def test_default_of_new_kinds(tmp_path, param, expect):
    text = with_param(f"  - {param}\n")
    assert load_error(tmp_path, text) == f"{FILE}:16: {expect}"


def test_dtype_in_takes_scalars_not_int_arrays(tmp_path):
    text = with_param("  - {name: dims, kind: int_array}\n")
    text += "  - kind: dtype_in\n    params: [dims]\n    set: float\n"
    assert load_error(tmp_path, text) == (
        f"{FILE}:{text.count(chr(10)) - 1}: rule 3 (dtype_in) applies to tensors and scalars; "
        f"'dims' is of kind 'int_array'")


def test_not_null_does_not_take_scalars(tmp_path):
    text = with_param("  - {name: alpha, kind: scalar}\n")
    text = edit("    params: [gradOutput, self, gradInput]\n",
                "    params: [gradOutput, self, gradInput, alpha]\n", text)
    assert load_error(tmp_path, text) == (
        f"{FILE}:26: rule 1 (not_null) applies to tensors; 'alpha' is of kind 'scalar'")


def test_value_in_does_not_take_doubles(tmp_path):
    text = with_param("  - {name: eps, kind: double}\n")
    text += "  - kind: value_in\n    params: [eps]\n    values: [0, 1]\n"
    assert load_error(tmp_path, text) == (
        f"{FILE}:{text.count(chr(10)) - 1}: rule 3 (value_in) applies to int64 params; "
        f"'eps' is of kind 'double'")


def test_example_scalar_attribute_type(tmp_path):
    text = with_param("  - {name: alpha, kind: scalar}\n")
    text += ("example:\n  dtype: float32\n  inputs:\n"
             "    gradOutput: {shape: [1], data: [1]}\n    self: {shape: [1], data: [1]}\n"
             "  attributes: {alpha: 'abc', flags: [true, true]}\n")
    assert load_error(tmp_path, text) == (
        f"{FILE}:{text.count(chr(10))}: example attribute 'alpha' must be a YAML value or a Python "
        f"literal, got 'abc'")


# ---- clashes between files -----------------------------------------------------------------------

@pytest.mark.parametrize("key, label, value, line", [
    ("python", "python name", "mini_backward", 2),
    ("kernel", "kernel", "mini_backward", 3),
])
def test_clash_with_another_op_names_both_lines(tmp_path, key, label, value, line):
    registry = tmp_path / "registry"
    registry.mkdir()
    (registry / "mini_backward.yaml").write_text(BASE)
    other = BASE.replace("name: MiniBackward", "name: OtherBackward")
    other = other.replace("python: mini_backward", "python: other_backward")
    other = other.replace("kernel: mini_backward", "kernel: other_backward")
    other = other.replace(f"{key}: other_backward", f"{key}: {value}")
    (registry / "other_backward.yaml").write_text(other)
    with pytest.raises(RegistryError) as info:
        load_registry(tmp_path)
    assert str(info.value) == (f"registry/other_backward.yaml:{line}: {label} '{value}' is already "
                               f"declared in {FILE}:{line}")


def test_snippet_reading_an_optional_param_needs_a_present_guard(tmp_path):
    text = with_param("  - {name: beta, kind: scalar, optional: true}\n")
    rule = '  - kind: check\n    check: "scalar_value(beta) > 0"\n    message: "beta {scalar_value(beta)}"\n'
    assert load_error(tmp_path, text + rule) == (
        f"{FILE}:{(text + rule).count(chr(10)) - 2}: rule 3 (check) reads 'beta', which may be "
        f"absent, without a present(beta) guard in its 'when' or its expression")
    # Either guard is enough; so is the built-in rules' own skipping of absent params.
    for guarded in (rule.replace('    check:', '    when: "present(beta)"\n    check:'),
                    rule.replace('"scalar_value(beta) > 0"', '"!present(beta) || scalar_value(beta) > 0"')):
        registry = tmp_path / "registry"
        (registry / "mini_backward.yaml").write_text(text + guarded)
        assert load_registry(tmp_path)[0].rules[-1].kind == "check"
