"""Extending the library as a user does: three ops of tests/extension/ (LeakyReluBackward with an
aclScalar and a bool, LogitGrad with a double, Flip with an aclIntArray) are added to a scratch
copy of this checkout, one YAML in registry/ and one kernel in ops/ each and nothing else, which
is then built and installed into a scratch directory. Against that build: the generated files
are current, tests/extension/check_extension.py checks the new ops against float64 references
and PyTorch (both APIs, their error cases), the shipped ops' tests are not needed (their code
did not change), a C++ program uses the new kinds through the generated headers, the CLI
lists and demonstrates the new ops, the bench times them (their YAMLs' benchmark sections) and
the C API tests' op runner runs their shared rejections and peer-checked values, with no file
under tests/ naming them.

One full build (about two minutes on two cores).
"""
from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXTENSION = ROOT / "tests" / "extension"
NEW_OPS = ("leaky_relu_backward", "logit_grad", "flip")
NEW_OP_NAMES = ("LeakyReluBackward", "LogitGrad", "Flip")
NEW_BENCH_NAMES = ("leaky_relu", "logit_grad", "flip")
# What setup.py builds from; the rest of the checkout (tests, benchmarks, build output) stays.
SOURCES = ("setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "registry", "include",
           "runtime", "ops", "aclnn_cpu", "docs")
BUILD_OUTPUT = shutil.ignore_patterns("__pycache__", "*.so", "*.o", "lib", "build", "*.egg-info",
                                      "_ops.cpp", "_glue.cpp")


def run(args, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, (f"{' '.join(map(str, args))} exited {done.returncode}\n"
                                  f"--- stdout ---\n{done.stdout[-6000:]}\n--- stderr ---\n{done.stderr[-6000:]}")
    return done


def _toml_list(text: str, key: str) -> list:
    """The string list `key = [...]` of pyproject.toml (its lists here are plain strings)."""
    start = text.index("[", re.search(rf"^{key} = ", text, re.M).end() - 1)
    return ast.literal_eval(text[start:text.index("]", start) + 1])


def test_the_test_extra_carries_the_build_requirements():
    # The fixture below builds with --no-build-isolation: in a fresh virtualenv, after the
    # README's `pip install ".[test]"`, only the test extra put the build requirements there.
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    build, test = _toml_list(text, "requires"), _toml_list(text, "test")
    assert build and test
    missing = sorted(set(build) - set(test))
    assert not missing, f"the test extra lacks the build requirements {missing}"


@pytest.fixture(scope="module")
def scratch_build(tmp_path_factory, torch):
    """(source tree, installed package dir, environment) of the scratch build."""
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("no C++ compiler")
    base = tmp_path_factory.mktemp("extension")
    src, target = base / "src", base / "site"
    src.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=BUILD_OUTPUT)
        elif path.exists():
            shutil.copy2(path, src / name)
    # The copied package directory may hold an in-place build's headers; the build makes its own.
    shutil.rmtree(src / "aclnn_cpu" / "include", ignore_errors=True)
    for op in NEW_OPS:
        assert not (src / "registry" / f"{op}.yaml").exists(), f"{op} is shipped now: rename the fixture"
        shutil.copy2(EXTENSION / "registry" / f"{op}.yaml", src / "registry" / f"{op}.yaml")
        shutil.copy2(EXTENSION / "ops" / f"{op}.cpp", src / "ops" / f"{op}.cpp")
    env = {k: v for k, v in os.environ.items() if k not in ("ACLNN_CPU_SANITIZE", "ACLNN_CPU_DEBUG",
                                                            "PYTHONPATH")}
    run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "-q",
         "--target", target, src], env=env, timeout=1800)
    env["PYTHONPATH"] = str(target)
    return src, target, env


def test_generated_files_are_current(scratch_build):
    src, _, env = scratch_build
    run([sys.executable, "-m", "registry.aclnn_gen", "--check", "--root", src], cwd=src, env=env)
    for op in NEW_OPS:
        assert (src / "include" / "aclnnop" / f"aclnn_{op}.h").exists()
        assert (src / "runtime" / "generated" / f"{op}_entry.cpp").exists()


def test_new_ops_against_references(scratch_build, tmp_path):
    _, _, env = scratch_build
    # Run outside the checkout, so that `import aclnn_cpu` finds the scratch build only.
    done = run([sys.executable, EXTENSION / "check_extension.py"], cwd=tmp_path, env=env, timeout=600)
    assert "FAIL" not in done.stdout and done.stdout.strip().splitlines()[-1].startswith("ok "), done.stdout


def test_c_program_uses_the_new_kinds(scratch_build, tmp_path):
    _, _, env = scratch_build
    flags = run([sys.executable, "-m", "aclnn_cpu", "--cflags", "--libs"], cwd=tmp_path, env=env).stdout
    exe = tmp_path / "use_new_kinds"
    cxx = shutil.which("g++") or shutil.which("c++")
    run([cxx, "-std=c++17", "-Wall", "-Werror", f"-I{ROOT / 'tests' / 'c_api' / 'programs'}",
         EXTENSION / "use_new_kinds.cpp", *shlex.split(flags), "-o", exe], env=env)
    done = run([exe], env=env)  # harness.h: exit status = failures, "passed N checks"
    assert "FAIL" not in done.stdout and "passed" in done.stdout, done.stdout


def test_cli_lists_and_demonstrates_the_new_ops(scratch_build, tmp_path):
    _, _, env = scratch_build
    listing = run([sys.executable, "-m", "aclnn_cpu", "ops"], cwd=tmp_path, env=env).stdout
    for name in ("aclnnLeakyReluBackward", "aclnnLogitGrad", "aclnnFlip", "aclnnPreluBackward"):
        assert name in listing, listing
    demo = run([sys.executable, "-m", "aclnn_cpu", "demo"], cwd=tmp_path, env=env).stdout
    section = demo[demo.index("== aclnnLeakyReluBackward"):]
    section = section[:section.index("\n== ")] if "\n== " in section else section
    assert "example of its registry entry" in section and "[0.25 0.25 0.25 1.  ]" in section, section
    assert "== aclnnLogitGrad" in demo and "(its registry entry gives no example)" in demo, demo


def test_bench_times_the_new_ops(scratch_build, tmp_path):
    """Rows, peer calls, agreement and per-call overhead from the YAMLs' benchmark sections."""
    _, _, env = scratch_build
    bench = [sys.executable, "-m", "aclnn_cpu", "bench"]
    listing = run([*bench, "--list", "--suite", "smoke"], cwd=tmp_path, env=env).stdout.splitlines()
    ops = [line.split()[0] for line in listing]
    shipped = run([*bench, "--list", "--suite", "smoke"], cwd=tmp_path).stdout.splitlines()
    shipped = [line.split()[0] for line in shipped]
    # The new ops' cases join the shipped ones (which keep their order), each op's cases together.
    assert [op for op in ops if op not in NEW_BENCH_NAMES] == shipped, listing
    assert sorted(op for op in ops if op in NEW_BENCH_NAMES) == ["flip", "leaky_relu", "logit_grad",
                                                                 "logit_grad"], listing
    report = tmp_path / "bench.json"
    run([*bench, "--suite", "smoke", "--ops", ",".join(NEW_BENCH_NAMES), "--dtypes", "fp32,bf16",
         "--rounds", "1", "--min-time", "0.001", "--no-progress", "--json", report], cwd=tmp_path, env=env,
        timeout=600)
    data = json.loads(report.read_text())
    rows = {(r["op"], r["case"], r["dtype"]): r for r in data["results"]}
    assert set(rows) == {(op, case, dtype) for op, case in (("flip", "tiny"), ("leaky_relu", "tiny"),
                                                          ("logit_grad", "tiny"), ("logit_grad", "tiny clamped"))
                         for dtype in ("float32", "bfloat16")}
    for key, row in rows.items():
        assert row["ours_ms"] > 0 and row["torch_ms"] > 0 and row["speedup"] > 0, key
        # Both sides computed the same thing: bitwise for fp32 but for the division of logit's
        # gradient, within bf16 rounding otherwise.
        bound = 1e-6 if row["dtype"] == "float32" else 2.0 ** -7
        assert all(d <= bound for d in row["max_rel_diff_vs_torch"]), (key, row["max_rel_diff_vs_torch"])
    assert rows[("leaky_relu", "tiny", "float32")]["shape"] == "[2, 4, 8, 8] slope=0.25"
    assert rows[("flip", "tiny", "float32")]["bytes_moved"] == 2 * 2 * 3 * 5 * 4
    overhead = {o["op"]: o for o in data["overhead"]}
    assert set(overhead) == set(NEW_BENCH_NAMES)
    for o in overhead.values():
        assert set(o["us"]) == {"functional out=", "functional alloc", "two-phase", "torch"}, o


def test_c_api_runner_covers_the_new_ops(scratch_build, tmp_path):
    """tests/c_api/test_capi_ops.py against the scratch build: the op runner dispatches through
    its generated op table, and the cases come from its registry."""
    _, _, env = scratch_build
    done = run([sys.executable, "-m", "pytest", "-rN", "-p", "no:cacheprovider", "-v",
                ROOT / "tests" / "c_api" / "test_capi_ops.py", "-k",
                f"({' or '.join(NEW_OP_NAMES)}) and not valgrind"], cwd=tmp_path, env=env, timeout=1800)
    passed = [line for line in done.stdout.splitlines() if line.endswith("PASSED") or " PASSED " in line]
    for op in NEW_OP_NAMES:
        for kind in (f"base_{op}", f"err_{op}_null_executor", f"err_{op}_out_overlaps_input",
                     f"registry_{op}_tiny_float32_strided", f"registry_{op}_tiny_bfloat16_contiguous"):
            assert any(kind in line for line in passed), (kind, done.stdout[-3000:])
    for handle in ("err_LeakyReluBackward_null_negativeSlope", "err_Flip_null_dims",
                   "registry_Flip_tiny_int8_contiguous", "registry_LogitGrad_tiny_clamped_float16_contiguous"):
        assert any(handle in line for line in passed), (handle, done.stdout[-3000:])
    assert " failed" not in done.stdout.splitlines()[-1], done.stdout[-3000:]
