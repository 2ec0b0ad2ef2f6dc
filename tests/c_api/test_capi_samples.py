"""The sample program of each operator document compiles unchanged with
`g++ sample.cpp $(python -m aclnn_cpu --cflags --libs)`, runs without LD_LIBRARY_PATH, prints
values that match a float64 reference computed here from the inputs the sample itself declares,
and is clean under valgrind memcheck.

The program text is taken from the document at test time (from its first `#include` line to its
last line of code; the line after it is the document's footer), never copied into the repository.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import capi_reference as ref
from capi_build import run_program
from capi_cases import run_environment

# The operator whose document's sample is run -> the header it includes and the names it prints.
SAMPLES = {
    "aclnnPreluBackward": ("aclnn_prelu_backward", ["gradInput", "gradWeight"]),
    "aclnnGroupNormBackward": ("aclnn_group_norm_backward",
                               ["gradInputResultData", "gradGammaOutResultData", "gradBetaOutResultData"]),
    "aclnnSoftmaxBackward": ("aclnn_softmax_backward", ["result"]),
    "aclnnGridSampler2DBackward": ("aclnn_grid_sampler2d_backward", ["inputGradResultData", "gridGradResultData"]),
}
# printf("%f") rounds to 6 decimals.
PRINT_ROUNDING = 5.0e-7 * (1 + 1e-9)

# The GroupNormBackward document's program creates outputMask with aclCreateBoolArray and never destroys it: that
# one leak is the sample's own, so it is suppressed (by its exact allocation stack) and nothing
# else is.
SAMPLE_001_SUPPRESSION = """{
   group_norm_backward_sample_never_destroys_outputMask
   Memcheck:Leak
   match-leak-kinds: definite
   fun:_Znwm
   ...
   fun:aclCreateBoolArray
   fun:main
}
"""


def extract_program(document: Path) -> str:
    lines = document.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("#include"))
    end = max(i for i, line in enumerate(lines) if line.strip() == "}")
    return "\n".join(lines[start:end + 1]) + "\n"


def declared_data(program: str) -> dict:
    """The inputs the sample declares: `std::vector<float> xHostData = {...}`,
    `std::vector<int64_t> xShape = {...}`, `int64_t x = n;`, `bool x = true|false;`."""
    def numbers(text):
        return [float(v) for v in text.replace("\n", " ").split(",") if v.strip()]

    data = {}
    for name, values in re.findall(r"std::vector<float>\s+(\w+)HostData\s*=\s*\{([^}]*)\}", program):
        data[name] = np.array(numbers(values), dtype=np.float32).astype(np.float64)
    shapes = {name: tuple(int(v) for v in numbers(values)) for name, values in
              re.findall(r"std::vector<int64_t>\s+(\w+)Shape\s*=\s*\{([^}]*)\}", program)}
    for name, arr in list(data.items()):
        if name in shapes:
            data[name] = arr.reshape(shapes[name])
    for name, value in re.findall(r"\bint64_t\s+(\w+)\s*=\s*(-?\d+)\s*;", program):
        data[name] = int(value)
    for name, value in re.findall(r"\bbool\s+(\w+)\s*=\s*(true|false)\s*;", program):
        data[name] = value == "true"
    return data


def printed_values(stdout: str) -> dict:
    values = {}
    for name, index, value in re.findall(r"^(\w+)\[(\d+)\] is: (\S+)$", stdout, re.M):
        values.setdefault(name, {})[int(index)] = float(value)
    return {name: np.array([v[i] for i in range(len(v))]) for name, v in values.items()}


def reference(op: str, d: dict) -> dict:
    """{printed name: (reference, magnitude)} from the sample's own inputs."""
    if op == "aclnnPreluBackward":
        r = ref.prelu_backward(d["gradOutput"], d["self"], d["weight"])
        return {"gradInput": r["gradInput"], "gradWeight": r["gradWeight"]}
    if op == "aclnnGroupNormBackward":
        r = ref.group_norm_backward(d["gradOut"], d["input"], d["mean"], d["rstd"], d["gamma"],
                                    d["N"], d["C"], d["HxW"], d["group"])
        return {"gradInputResultData": r["gradInput"], "gradGammaOutResultData": r["gradGammaOut"],
                "gradBetaOutResultData": r["gradBetaOut"]}
    if op == "aclnnSoftmaxBackward":
        return {"result": ref.softmax_backward(d["gradOutput"], d["output"], d["dim"])["out"]}
    if op == "aclnnGridSampler2DBackward":
        r = ref.grid_sampler2d_backward(d["gradOutput"], d["input"], d["grid"], d["interpolationMode"],
                                        d["paddingMode"], d["alignCorners"])
        return {"inputGradResultData": r["inputGrad"], "gridGradResultData": r["gridGrad"]}
    raise KeyError(op)


def _document(seeds_dir: Path, op: str) -> Path:
    """The document of `op` (its first word) that holds a sample program including its header."""
    header = f'#include "aclnnop/{SAMPLES[op][0]}.h"'
    matches = []
    for path in sorted(p for p in seeds_dir.iterdir() if p.is_file()):
        text = path.read_text(encoding="utf-8", errors="replace")
        if text.split(maxsplit=1)[:1] == [op] and header in text:
            matches.append(path)
    assert len(matches) == 1, f"{len(matches)} documents of {op} with a sample program in {seeds_dir}"
    return matches[0]


@pytest.fixture(scope="module")
def built_samples(seeds_dir, tmp_path_factory, c_flags):
    """Each sample compiled exactly as documented: `g++ sample.cpp $(python -m aclnn_cpu --cflags
    --libs) -o sample`, with `python` being this interpreter."""
    work = tmp_path_factory.mktemp("samples")
    bindir = work / "bin"
    bindir.mkdir()
    # A script, not a symlink: a venv's interpreter linked from elsewhere no longer finds the
    # venv's pyvenv.cfg (it looks beside the path it was started by) and runs without the venv's
    # packages, aclnn_cpu among them.
    shim = bindir / "python"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = run_environment({"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"})
    built, procs = {}, []
    for op in SAMPLES:
        folder = work / op
        folder.mkdir()
        program = extract_program(_document(seeds_dir, op))
        (folder / "sample.cpp").write_text(program, encoding="utf-8")
        cmd = "g++ sample.cpp $(python -m aclnn_cpu --cflags --libs) -o sample"
        procs.append((op, folder, program, subprocess.Popen(
            ["bash", "-c", cmd], cwd=folder, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)))
    for op, folder, program, proc in procs:
        out, _ = proc.communicate(timeout=300)
        built[op] = (folder, program, proc.returncode, out)
    return built


@pytest.mark.parametrize("op", sorted(SAMPLES))
def test_sample_compiles_unchanged(op, built_samples):
    folder, program, returncode, out = built_samples[op]
    header = SAMPLES[op][0]
    assert f'#include "aclnnop/{header}.h"' in program
    assert returncode == 0, f"{op}'s sample does not compile:\n{out}"


@pytest.mark.parametrize("op", sorted(SAMPLES))
def test_sample_prints_right_values(op, built_samples):
    folder, program, returncode, _ = built_samples[op]
    assert returncode == 0
    done = run_program([folder / "sample"], cwd=folder)   # no LD_LIBRARY_PATH: the rpath finds it
    assert done.returncode == 0, f"sample {op} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    printed = printed_values(done.stdout)
    expected = reference(op, declared_data(program))
    assert sorted(printed) == sorted(SAMPLES[op][1]) == sorted(expected)
    for name, (want, magnitude) in expected.items():
        want = np.asarray(want).reshape(-1)
        got = printed[name]
        assert got.shape == want.shape, f"{name}: printed {got.size} values, expected {want.size}"
        bound = PRINT_ROUNDING + ref.tolerance(want, np.asarray(magnitude).reshape(-1), "float32")
        bad = ~(np.abs(got - want) <= bound)
        assert not bad.any(), f"sample {op} {name}: printed {got[bad]}, expected {want[bad]}"


@pytest.mark.parametrize("op", sorted(SAMPLES))
def test_sample_under_valgrind(op, built_samples, valgrind, tmp_path):
    folder, _, returncode, _ = built_samples[op]
    assert returncode == 0
    suppressions = None
    if op == "aclnnGroupNormBackward":
        suppressions = tmp_path / "group_norm_backward_sample.supp"
        suppressions.write_text(SAMPLE_001_SUPPRESSION)
    done = valgrind([folder / "sample"], suppressions=suppressions, cwd=folder)
    assert "is: " in done.stdout
