"""The generated C++ and Cython compile (syntax level) against the real headers.

Skipped when g++ / cython are not installed; no build of the package is needed.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from registry.aclnn_gen import load_registry, render

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
CXX = shutil.which("g++") or shutil.which("c++")
CXXFLAGS = ["-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
            "-DACLNN_HAVE_AVX2", "-DACLNN_HAVE_AVX512"]


def compile_cpp(sources, include_dirs):
    cmd = [CXX, *CXXFLAGS, *(f"-I{d}" for d in include_dirs), *map(str, sources)]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
def test_registry_entry_points_compile():
    sources = sorted((ROOT / "runtime" / "generated").glob("*_entry.cpp"))
    assert sources
    result = compile_cpp(sources + [ROOT / "runtime" / "validate.cpp"], [ROOT / "include"])
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
def test_golden_fixture_entry_point_compiles():
    result = compile_cpp(sorted((GOLDEN / "runtime" / "generated").glob("*.cpp")),
                         [GOLDEN / "include", ROOT / "include"])
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
def test_golden_op_table_compiles_and_names_every_param(tmp_path):
    # The fixture op has a param of every kind: each one's accessor is called in its C place.
    use = tmp_path / "use_table.cpp"
    use.write_text('#include "aclnn/aclnn_cpu_op_table.h"\n'
                   'static_assert(sizeof(aclnn_cpu_op_table::kOps) / sizeof(aclnn_cpu_op_table::kOps[0]) == 1);\n'
                   'int main() { return aclnn_cpu_op_table::find_op("ToyBlendBackward") == nullptr; }\n')
    result = compile_cpp([use], [GOLDEN / "include", ROOT / "include"])
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
def test_public_headers_compile_as_c_and_cpp(tmp_path):
    cc = shutil.which("gcc") or shutil.which("cc")
    for header in sorted((ROOT / "include" / "aclnnop").glob("*.h")):
        body = f'#include "aclnnop/{header.name}"\nint main(void) {{ return 0; }}\n'
        cpp = tmp_path / "use.cpp"
        cpp.write_text(body)
        result = compile_cpp([cpp], [ROOT / "include"])
        assert result.returncode == 0, result.stderr
        if cc:
            c = tmp_path / "use.c"
            c.write_text(body)
            result = subprocess.run([cc, "-std=c99", "-fsyntax-only", "-Wall", "-Werror",
                                     f"-I{ROOT / 'include'}", str(c)], capture_output=True, text=True)
            assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("cython") is None, reason="no cython")
def test_ops_pyx_cythonizes(tmp_path):
    pkg = tmp_path / "aclnn_cpu"
    pkg.mkdir()
    for name in ("__init__.py", "_glue.pxd"):
        shutil.copy2(ROOT / "aclnn_cpu" / name, pkg / name)
    files = render(load_registry(ROOT))
    (pkg / "_ops.pyx").write_text(files["aclnn_cpu/_ops.pyx"])
    result = subprocess.run(["cython", "-3", "--cplus", "-I", str(tmp_path), str(pkg / "_ops.pyx"),
                             "-o", str(tmp_path / "ops.cpp")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
