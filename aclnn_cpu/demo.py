"""`python -m aclnn_cpu demo`: runs each registry op on its documented example and prints it."""
from __future__ import annotations

import numpy as np

from aclnn_cpu._glue import new_output


def example_inputs(op: dict) -> tuple[dict, dict]:
    """The op's documented example as (arrays by Python name, attributes by Python name)."""
    example = op["example"]
    dtype = new_output((0,), example.get("dtype", "float32")).dtype
    arrays = {}
    for name, spec in example["inputs"].items():
        data = np.asarray(spec["data"], dtype=np.float64).reshape(spec["shape"])
        arrays[name] = data.astype(dtype)
    return arrays, dict(example.get("attributes", {}))


def output_names(op: dict) -> list[str]:
    return [p["py_name"] for p in op["params"] if p["kind"] == "output"]


def run_example(op: dict):
    import aclnn_cpu

    arrays, attributes = example_inputs(op)
    fn = getattr(aclnn_cpu, op["python"])
    result = fn(**arrays, **attributes)
    names = output_names(op)
    if len(names) == 1:
        result = (result,)
    return arrays, attributes, dict(zip(names, result))


def _show(name: str, value) -> str:
    if value is None:
        return f"  {name}: None (masked off)"
    arr = np.asarray(value)
    shown = arr.astype(np.float64) if arr.dtype.name == "bfloat16" else arr
    text = np.array2string(shown, precision=6, suppress_small=True, max_line_width=96)
    return f"  {name} {list(arr.shape)} {arr.dtype}:\n    " + text.replace("\n", "\n    ")


def main() -> int:
    from aclnn_cpu._registry import OPS

    for op in OPS:
        print(f"== {op['name']}  ({op['python']})  — {op['summary']}")
        if op["example"] is None:  # the registry's `example` is optional
            print("   (its registry entry gives no example)")
            print()
            continue
        origin = f"documented example ({op['source']})" if op["source"] else "example of its registry entry"
        print(f"   {origin}")
        arrays, attributes, outputs = run_example(op)
        print(" inputs:")
        for name, value in arrays.items():
            print(_show(name, value))
        for name, value in attributes.items():
            print(f"  {name}: {value}")
        print(" outputs:")
        for name, value in outputs.items():
            print(_show(name, value))
        print()
    return 0
