"""The installed package serves C users: headers and library where get_include() and
get_library_dir() say, `python -m aclnn_cpu --cflags --libs` flags that compile and link with an
rpath (no LD_LIBRARY_PATH needed), and public headers that also compile as C."""
from __future__ import annotations

import subprocess
from pathlib import Path

import aclnn_cpu

from capi_build import PROGRAMS, python_m_aclnn_cpu, run_program

OP_HEADERS = ["aclnn_softmax_backward.h", "aclnn_prelu_backward.h", "aclnn_group_norm_backward.h",
              "aclnn_grid_sampler2d_backward.h"]


def test_include_and_library_dirs():
    include = Path(aclnn_cpu.get_include())
    assert (include / "acl" / "acl.h").is_file()
    assert (include / "aclnn" / "aclnn_base.h").is_file()
    for header in OP_HEADERS:
        assert (include / "aclnnop" / header).is_file(), header
    assert (Path(aclnn_cpu.get_library_dir()) / "libaclnn_cpu.so").is_file()


def test_flags(tmp_path):
    include, libdir = aclnn_cpu.get_include(), aclnn_cpu.get_library_dir()
    cflags = python_m_aclnn_cpu("--cflags", cwd=tmp_path).split()
    libs = python_m_aclnn_cpu("--libs", cwd=tmp_path).split()
    both = python_m_aclnn_cpu("--cflags", "--libs", cwd=tmp_path).split()
    assert f"-I{include}" in cflags and not any(f.startswith("-l") for f in cflags)
    assert f"-L{libdir}" in libs and "-laclnn_cpu" in libs
    assert any(f.startswith("-Wl,-rpath") and libdir in f for f in libs)
    assert both == cflags + libs
    # From the repository root (where the source package shadows the installed one) too.
    from capi_build import REPO
    assert python_m_aclnn_cpu("--cflags", "--libs", cwd=REPO).split() == both


def test_programs_link_with_rpath(programs, tmp_path):
    """A built program records the library directory and finds the library without
    LD_LIBRARY_PATH (run_program removes it)."""
    exe = programs["thread_messages"]
    dynamic = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True).stdout
    assert aclnn_cpu.get_library_dir() in dynamic and ("RUNPATH" in dynamic or "RPATH" in dynamic)
    ldd = run_program(["ldd", exe]).stdout
    line = next(line for line in ldd.splitlines() if "libaclnn_cpu.so" in line)
    assert str(Path(aclnn_cpu.get_library_dir()) / "libaclnn_cpu.so") in line or \
        Path(line.split("=>")[1].split("(")[0].strip()).resolve() == \
        (Path(aclnn_cpu.get_library_dir()) / "libaclnn_cpu.so").resolve()
    assert run_program([exe]).returncode == 0


def test_headers_compile_as_c(c_flags, tmp_path):
    """The public headers are C as well as C++ (C11, warnings are errors)."""
    exe = tmp_path / "c_headers"
    done = subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic",
                           str(PROGRAMS / "c_headers.c"), *c_flags, "-o", str(exe)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    run = run_program([exe])
    assert run.returncode == 0 and "ok" in run.stdout, run.stdout + run.stderr
