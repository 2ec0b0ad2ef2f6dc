"""The `benchmark` section (registry/README.md, "Benchmark"): a valid one loads into the typed
model and _registry.py; every mistake stops the load with its exact message and file:line."""
from __future__ import annotations

import pytest

from registry.aclnn_gen import RegistryError, load_registry, render
from test_loader_errors import BASE, FILE, edit, load_error

BENCH = """\
benchmark:
  name: mini
  aliases: [tiny_op]
  targets: {speedup: 2.0, speedup_batch1: 3.0, copy_fraction: 0.5}
  params: {scale: 1.0}
  attributes: {flags: "(True, True)"}
  inputs:
    logits: "normal(shape, scale)"
    self: "softmax(logits, -1)"
    grad_output: "uniform(shape, -1.0, 1.0)"
  moved: "3 * self.size"
  describe: "{list(shape)} x{scale}"
  peer:
    prepare: {mask: "list(flags)"}
    call: "torch.ops.aten.mini(grad_output, self, mask)"
    crash_prone: [bfloat16]
  cases:
    - {label: big, params: {shape: [64, 64]}, suites: [full, quick]}
    - {label: tiny, params: {shape: [2, 3], scale: 0.5}, suites: [smoke]}
"""
TEXT = BASE + BENCH


def line_of(text: str, fragment: str) -> int:
    return next(i + 1 for i, line in enumerate(text.splitlines()) if fragment in line)


def error(tmp_path, old: str, new: str) -> tuple:
    """(message, the text) after replacing old by new in the valid op."""
    text = edit(old, new, TEXT)
    return load_error(tmp_path, text), text


def test_a_valid_section_loads_and_is_emitted(tmp_path):
    (tmp_path / "registry").mkdir()
    (tmp_path / "registry" / "mini_backward.yaml").write_text(TEXT)
    [op] = load_registry(tmp_path)
    b = op.benchmark
    assert (b.name, b.aliases, b.targets.speedup, b.targets.speedup_batch1, b.targets.copy_fraction) == (
        "mini", ("tiny_op",), 2.0, 3.0, 0.5)
    assert [k for k, _ in b.inputs] == ["logits", "self", "grad_output"]  # drawing order kept
    assert [dict(c.params) for c in b.cases] == [{"shape": (64, 64), "scale": 1.0},
                                                 {"shape": (2, 3), "scale": 0.5}]
    assert b.cases[0].suites == ("full", "quick") and b.peer.crash_prone == ("bfloat16",)
    namespace = {}
    exec(render([op])["aclnn_cpu/_registry.py"], namespace)
    entry = namespace["OPS"][0]["benchmark"]
    assert entry["aliases"] == ["mini", "tiny_op"]
    assert entry["cases"][1] == {"label": "tiny", "params": {"shape": (2, 3), "scale": 0.5}, "suites": ["smoke"]}
    assert entry["peer"]["prepare"] == {"mask": "list(flags)"}


def test_unknown_key(tmp_path):
    message, text = error(tmp_path, "  moved:", "  repeat: 3\n  moved:")
    assert message == (f"{FILE}:{line_of(text, 'repeat:')}: unknown key 'repeat' in 'benchmark' (expected one "
                       f"of: name, aliases, order, targets, params, attributes, inputs, moved, describe, peer, cases)")


def test_missing_cases(tmp_path):
    text = TEXT[:TEXT.index("  cases:")]
    assert load_error(tmp_path, text) == f"{FILE}:{line_of(text, 'benchmark:') + 1}: missing key 'cases' in 'benchmark'"


def test_name_must_be_an_identifier(tmp_path):
    message, text = error(tmp_path, "  name: mini", "  name: mini op")
    assert message == f"{FILE}:{line_of(text, 'mini op')}: 'name' of the benchmark must be an identifier, got 'mini op'"


def test_alias_listed_twice(tmp_path):
    message, text = error(tmp_path, "[tiny_op]", "[tiny_op, Tiny_Op]")
    assert message == f"{FILE}:{line_of(text, 'aliases')}: alias 'tiny_op' is listed twice"


def test_clashing_names_across_ops(tmp_path):
    registry = tmp_path / "registry"
    registry.mkdir()
    (registry / "mini_backward.yaml").write_text(TEXT)
    other = TEXT.replace("MiniBackward", "OtherBackward").replace("mini_backward", "other_backward")
    other = other.replace("name: mini\n", "name: other\n")
    (registry / "other_backward.yaml").write_text(other)
    with pytest.raises(RegistryError) as info:
        load_registry(tmp_path)
    assert str(info.value) == (f"registry/other_backward.yaml:{line_of(other, 'benchmark:') + 1}: benchmark "
                               f"name or alias 'tiny_op' is already taken by MiniBackward")


@pytest.mark.parametrize("value, problem", [("0", "must be a positive number, got 0"),
                                            ("fast", "must be a number, got 'fast'")])
def test_target_must_be_a_positive_number(tmp_path, value, problem):
    message, text = error(tmp_path, "speedup: 2.0", f"speedup: {value}")
    assert message == f"{FILE}:{line_of(text, 'targets:')}: target 'speedup' {problem}"


def test_copy_fraction_is_at_most_one(tmp_path):
    message, text = error(tmp_path, "copy_fraction: 0.5", "copy_fraction: 60")
    assert message == (f"{FILE}:{line_of(text, 'targets:')}: target 'copy_fraction' is a fraction of the "
                       f"copy's bandwidth, at most 1, got 60")


def test_unknown_suite(tmp_path):
    message, text = error(tmp_path, "suites: [smoke]", "suites: [nightly]")
    assert message == (f"{FILE}:{line_of(text, 'nightly')}: unknown suite 'nightly' in case 'tiny' "
                       f"(expected one of: full, quick, smoke)")


def test_duplicate_case_label(tmp_path):
    message, text = error(tmp_path, "label: tiny", "label: big")
    assert message == (f"{FILE}:{line_of(text, 'shape: [2, 3]')}: case 'big' is declared twice "
                       f"(first at line {line_of(text, 'shape: [64, 64]')})")


def test_cases_share_their_params(tmp_path):
    message, text = error(tmp_path, "params: {shape: [2, 3], scale: 0.5}", "params: {shape: [2, 3], dim: 0}")
    assert message == (f"{FILE}:{line_of(text, 'dim: 0')}: case 'tiny' has params dim, scale, shape; every "
                       f"case has the params of the first: scale, shape")


def test_case_param_value_type(tmp_path):
    message, text = error(tmp_path, "shape: [2, 3]", "shape: {rows: 2}")
    assert message == (f"{FILE}:{line_of(text, 'rows: 2')}: param 'shape' of case 'tiny' must be a number, "
                       f"a boolean, a string or a list of them, got a mapping")


def test_no_cases(tmp_path):
    text = TEXT[:TEXT.index("  cases:")] + "  cases: []\n"
    assert load_error(tmp_path, text) == f"{FILE}:{line_of(text, 'cases: []')}: 'cases' of the benchmark must list at least one case"


def test_attribute_that_is_no_attribute(tmp_path):
    message, text = error(tmp_path, 'attributes: {flags: "(True, True)"}', 'attributes: {flags: "(True, True)", self: "1"}')
    assert message == (f"{FILE}:{line_of(text, 'attributes:')}: benchmark attribute 'self' is not the Python "
                       f"name of an attribute param (attributes: flags)")


def test_attribute_without_default_must_be_given(tmp_path):
    message, text = error(tmp_path, 'attributes: {flags: "(True, True)"}', "attributes: {}")
    assert message == (f"{FILE}:{line_of(text, 'attributes:')}: the benchmark gives no value for attribute "
                       f"'flags' (it has no default)")


def test_input_expression_syntax(tmp_path):
    message, text = error(tmp_path, '"uniform(shape, -1.0, 1.0)"', '"uniform(shape, -1.0,"')
    assert message.startswith(f"{FILE}:{line_of(text, 'grad_output:')}: benchmark input 'grad_output' is not "
                              f"a Python expression: ")


def test_input_expression_unknown_name(tmp_path):
    message, text = error(tmp_path, '"softmax(logits, -1)"', '"softmax(logit, -1)"')
    assert message == (f"{FILE}:{line_of(text, 'softmax(logit,')}: benchmark input 'self' uses unknown name "
                       f"'logit' (names: shape, scale, flags, np, normal, uniform, softmax, warp_grid, logits)")


def test_input_can_only_use_earlier_inputs(tmp_path):
    message, text = error(tmp_path, '"normal(shape, scale)"', '"normal(shape, scale) + self"')
    assert "benchmark input 'logits' uses unknown name 'self'" in message


def test_every_input_is_made(tmp_path):
    message, text = error(tmp_path, '    grad_output: "uniform(shape, -1.0, 1.0)"\n', "")
    assert message == (f"{FILE}:{line_of(text, 'logits:')}: the benchmark's inputs do not make input "
                       f"'grad_output' (inputs: grad_output, self)")


def test_input_name_is_an_identifier(tmp_path):
    message, text = error(tmp_path, "    logits:", "    log its:")
    assert message == f"{FILE}:{line_of(text, 'log its')}: benchmark input 'log its' must be an identifier"


def test_describe_is_an_f_string_body(tmp_path):
    message, text = error(tmp_path, 'describe: "{list(shape)} x{scale}"', 'describe: "{list(shape} x"')
    assert message.startswith(f"{FILE}:{line_of(text, 'describe:')}: 'describe' of the benchmark is not a "
                              f"Python f-string body: ")


def test_describe_sees_case_params_only(tmp_path):
    message, text = error(tmp_path, "x{scale}", "x{self}")
    assert message == (f"{FILE}:{line_of(text, 'describe:')}: 'describe' of the benchmark uses unknown name "
                       f"'self' (names: shape, scale)")


def test_moved_sees_the_python_names(tmp_path):
    message, text = error(tmp_path, '"3 * self.size"', '"3 * logits.size"')
    assert message == (f"{FILE}:{line_of(text, 'moved:')}: 'moved' of the benchmark uses unknown name "
                       f"'logits' (names: grad_output, self, flags)")


def test_peer_call_unknown_name(tmp_path):
    message, text = error(tmp_path, "self, mask)", "self, flag)")
    assert message == (f"{FILE}:{line_of(text, 'call:')}: 'call' of the peer uses unknown name 'flag' "
                       f"(names: torch, torch_dtype, grad_output, self, flags, mask)")


def test_peer_lambda_binds_its_arguments(tmp_path):
    text = edit('prepare: {mask: "list(flags)"}', 'prepare: {mask: "list(flags)", first: "lambda r: r[0]"}', TEXT)
    (tmp_path / "registry").mkdir()
    (tmp_path / "registry" / "mini_backward.yaml").write_text(text)
    assert dict(load_registry(tmp_path)[0].benchmark.peer.prepare)["first"] == "lambda r: r[0]"


def test_peer_preparation_name(tmp_path):
    message, text = error(tmp_path, "prepare: {mask:", "prepare: {the mask:")
    assert message == f"{FILE}:{line_of(text, 'the mask')}: peer preparation 'the mask' must be an identifier"


def test_crash_prone_dtype(tmp_path):
    message, text = error(tmp_path, "crash_prone: [bfloat16]", "crash_prone: [bf16]")
    assert message.startswith(f"{FILE}:{line_of(text, 'crash_prone')}: unknown dtype 'bf16' in 'crash_prone' "
                              f"(expected one of: float32, ")


def test_peer_needs_its_call(tmp_path):
    message, text = error(tmp_path, '    call: "torch.ops.aten.mini(grad_output, self, mask)"\n', "")
    assert message == f"{FILE}:{line_of(text, 'prepare:')}: missing key 'call' in 'peer' of the benchmark"
