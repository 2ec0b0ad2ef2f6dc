"""Builds and runs cpp/validate_helpers_test.cpp: the validate.h helpers (layout, overlap, masks,
messages) against hand-made aclTensors, linked with the runtime sources (no package build)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CXX = shutil.which("g++") or shutil.which("c++")


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
def test_validate_helpers(tmp_path):
    exe = tmp_path / "validate_helpers_test"
    sources = [Path(__file__).resolve().parent / "cpp" / "validate_helpers_test.cpp"]
    sources += sorted((ROOT / "runtime").glob("*.cpp"))
    build = subprocess.run([CXX, "-std=c++17", "-O0", "-fopenmp", f"-I{ROOT / 'include'}",
                            '-DACLNN_CPU_VERSION="test"', *map(str, sources), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "all passed" in run.stdout
