"""aclnn_cpu/_registry.py (generated) agrees with the YAMLs and with what the docs promise."""
from __future__ import annotations

import ast
import math
import runpy
from pathlib import Path

from registry.aclnn_gen import load_registry
from registry.aclnn_gen.naming import python_name, snake_case

ROOT = Path(__file__).resolve().parents[2]


def registry_module() -> dict:
    return runpy.run_path(str(ROOT / "aclnn_cpu" / "_registry.py"))


def test_ops_match_yaml_files():
    ops = registry_module()["OPS"]
    yaml_names = sorted(p.stem for p in (ROOT / "registry").glob("*.yaml"))
    assert sorted(snake_case(op["op"]) for op in ops) == yaml_names
    # The shipped ops are there; an op a user adds is welcome too.
    assert {"aclnnSoftmaxBackward", "aclnnPreluBackward", "aclnnGroupNormBackward",
            "aclnnGridSampler2DBackward"} <= {op["name"] for op in ops}


def test_file_is_plain_literals():
    tree = ast.parse((ROOT / "aclnn_cpu" / "_registry.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign):
            ast.literal_eval(node.value)  # raises on anything but literals


def test_examples_are_complete_and_consistent():
    for op in registry_module()["OPS"]:
        example = op["example"]
        params = {p["py_name"]: p for p in op["params"]}
        for name, tensor in example["inputs"].items():
            assert params[name]["kind"] == "input"
            assert math.prod(tensor["shape"]) == len(tensor["data"])
        for p in op["params"]:
            if p["kind"] == "input" and not p["optional"]:
                assert p["py_name"] in example["inputs"], (op["name"], p["py_name"])
            if p["kind"] not in ("input", "output") and not p["has_default"]:
                assert p["py_name"] in example["attributes"], (op["name"], p["py_name"])


def test_documented_python_signatures():
    ops = {op.python: op for op in load_registry(ROOT)}
    def sig(name):
        op = ops[name]
        return [p.py_name for p in op.params if p.kind != "output"]
    assert sig("softmax_backward") == ["grad_output", "output", "dim"]
    assert sig("prelu_backward") == ["grad_output", "self", "weight"]
    assert sig("group_norm_backward") == ["grad_out", "input", "mean", "rstd", "gamma", "N", "C",
                                          "HxW", "group", "output_mask"]
    assert sig("grid_sampler2d_backward") == ["grad_output", "input", "grid", "interpolation_mode",
                                              "padding_mode", "align_corners", "output_mask"]
    assert ops["group_norm_backward"].param("outputMask").default == (True, True, True)
    assert ops["grid_sampler2d_backward"].param("outputMask").default == (True, True)
    assert [k.name for k in ops["softmax_backward"].python_kwargs] == ["out_dtype"]


def test_dtypes_per_product_follow_the_documents():
    by_name = {op["name"]: op for op in registry_module()["OPS"]}
    softmax = {p["name"]: p for p in by_name["aclnnSoftmaxBackward"]["params"]}
    assert softmax["gradOutput"]["dtypes"] == {
        "atlas_training": ["float32", "float16"], "atlas_a2": ["float32", "float16", "bfloat16"],
        "atlas_inference": ["float32", "float16"]}
    assert "float64" in softmax["out"]["dtypes"]["atlas_a2"]
    for name in ("aclnnPreluBackward", "aclnnGroupNormBackward", "aclnnGridSampler2DBackward"):
        op = by_name[name]
        assert op["products"] == ["atlas_training", "atlas_a2"]
        a2 = ["float32", "float16", "bfloat16"] + (["float64"] if name == "aclnnGridSampler2DBackward" else [])
        for p in op["params"]:
            if p["kind"] in ("input", "output"):
                assert p["dtypes"] == {"atlas_training": ["float32", "float16"], "atlas_a2": a2}, (name, p["name"])
    # GridSampler2D: the dtypes the library's checks accept (bfloat16 on training, not on 310P).
    for p in by_name["aclnnGridSampler2D"]["params"]:
        if p["kind"] in ("input", "output"):
            assert p["dtypes"] == {"atlas_training": ["float32", "float16", "bfloat16", "float64"],
                                   "atlas_a2": ["float32", "float16", "bfloat16", "float64"],
                                   "atlas_inference": ["float32", "float16", "float64"]}, p["name"]


def test_naming():
    assert snake_case("SoftmaxBackward") == "softmax_backward"
    assert snake_case("GridSampler2DBackward") == "grid_sampler2d_backward"
    assert snake_case("GroupNormBackward") == "group_norm_backward"
    assert python_name("gradOutput") == "grad_output"
    assert python_name("interpolationMode") == "interpolation_mode"
    assert python_name("self") == "self"
    assert python_name("HxW") == "HxW" and python_name("N") == "N"
