"""GCC lowers no vector operation of the kernels lane by lane, at any ISA level.

The kernels use GCC's generic vectors (`__attribute__((vector_size(N)))`). Where a vector is
wider than the level's registers, GCC splits its arithmetic into registers but expands its
comparisons, selects and shuffles element by element, silently: GridSampler's coordinate records
were 8-lane double vectors, one AVX-512 register, and on an AVX2-only Zen 3 their masks went
through scalar compares and `setcc`, 39% of an RGB warp's time (the call took 2.1x its time
after the fix). `-Wvector-operation-performance` names every such expansion; this test compiles
each per-ISA source at every level the build compiles (the declared levels' flags, as setup.py compiles them) and
requires none. (-O1: the lowering pass and the always-inline helpers are the same as at -O3.)
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from aclnn_cpu._vocabulary import ISA_FLAGS, ISA_LEVELS, ISA_MACROS

ROOT = Path(__file__).resolve().parents[1]
CXX = shutil.which("g++")


def is_gcc(cxx: str) -> bool:
    macros = subprocess.run([cxx, "-x", "c++", "-E", "-dM", "-"], input="", capture_output=True, text=True).stdout
    return "__GNUC__" in macros and "__clang__" not in macros


def isa_levels() -> list[tuple[str, int, list[str]]]:
    """(name, ACLNN_ISA_LEVEL, flags) of the levels setup.py compiles here: the declared ones
    (aclnn_cpu._vocabulary), the baseline alone off x86-64."""
    levels = [(name, value, list(ISA_FLAGS[name])) for value, name in enumerate(ISA_LEVELS)]
    return levels if platform.machine().lower() in ("x86_64", "amd64") else levels[:1]


def sources_and_flags() -> list[tuple[Path, list[str]]]:
    levels = isa_levels()
    have = [f"-D{ISA_MACROS[name]}" for name, _, _ in levels if ISA_MACROS[name]]
    jobs = []
    for src in sorted((ROOT / "runtime").glob("*.cpp")) + sorted((ROOT / "runtime" / "generated").glob("*.cpp")):
        jobs.append((src, have))
    per_level = sorted((ROOT / "ops").glob("*.cpp")) + sorted((ROOT / "runtime" / "per_isa").glob("*.cpp"))
    for src in per_level:
        for _, value, flags in levels:
            jobs.append((src, have + flags + ["-ffp-contract=off", f"-DACLNN_ISA_LEVEL={value}"]))
    return jobs


@pytest.mark.skipif(CXX is None or not is_gcc(CXX), reason="needs GCC (-Wvector-operation-performance)")
def test_no_vector_operation_is_expanded_lane_by_lane():
    def compile_one(job):
        src, flags = job
        cmd = [CXX, "-std=c++17", "-O1", "-fopenmp", f"-I{ROOT / 'include'}", "-Wvector-operation-performance",
               *flags, "-c", str(src), "-o", os.devnull]
        result = subprocess.run(cmd, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-3000:]
        return [f"{src.relative_to(ROOT)} {' '.join(flags[-2:])}: {line}"
                for line in result.stderr.splitlines() if "-Wvector-operation-performance" in line]

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        findings = [line for lines in pool.map(compile_one, sources_and_flags()) for line in lines]
    assert not findings, "\n".join(sorted(set(findings))[:40])
