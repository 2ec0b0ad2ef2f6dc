"""docs/ops.md's examples are the registry's: each code block, run as a user would paste it,
computes bit for bit what `python -m aclnn_cpu demo` computes from the registry entry. (The
generator once printed the inputs with 6 significant digits: GroupNorm's rstd 0.2896827 became
0.289683, and the page's example gave another gradGamma than the document's.)"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from aclnn_cpu._registry import OPS
from aclnn_cpu.demo import run_example

OPS_MD = Path(__file__).resolve().parents[1] / "docs" / "ops.md"
EXAMPLE_OPS = [op for op in OPS if op.get("example")]


def example_block(op: dict) -> str:
    """The code block under the op's "### Example" heading in docs/ops.md."""
    text = OPS_MD.read_text(encoding="utf-8")
    section = text.split(f"\n## {op['name']}\n", 1)
    assert len(section) == 2, f"{op['name']} has no section in docs/ops.md"
    body = section[1].split("\n## ", 1)[0]
    found = re.search(r"### Example[^\n]*\n\n```python\n(.*?)```", body, re.S)
    assert found, f"{op['name']}: no example block"
    return found.group(1)


def test_every_op_with_an_example_is_covered():
    assert {op["name"] for op in EXAMPLE_OPS} >= {
        "aclnnPreluBackward", "aclnnGroupNormBackward", "aclnnSoftmaxBackward", "aclnnGridSampler2DBackward"}


@pytest.mark.parametrize("op", EXAMPLE_OPS, ids=lambda op: op["name"])
def test_example_block_computes_the_demo_result(op):
    scope: dict = {}
    exec(compile(example_block(op), f"docs/ops.md:{op['name']}", "exec"), scope)
    _, _, expected = run_example(op)
    for name, want in expected.items():
        got = scope[name]
        if want is None:
            assert got is None, name
            continue
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert got.tobytes() == want.tobytes(), f"{op['name']} {name}: {got} != {want}"
