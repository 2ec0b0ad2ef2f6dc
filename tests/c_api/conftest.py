"""Fixtures of the C API tests: the installed package's compiler flags, the test programs compiled
once per session (in parallel), the documents' sample programs, and valgrind."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # capi_*.py helpers

from capi_build import PROGRAMS, REQUIRE_SEEDS, SEEDS_ENV, VALGRIND_ARGS, python_m_aclnn_cpu, run_program  # noqa: E402

# Programs that need more than the common flags: nested_parallel is a user's own OpenMP loop.
EXTRA_FLAGS = {"nested_parallel": ["-fopenmp"]}


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("c_api_build")


@pytest.fixture(scope="session")
def c_flags(build_dir) -> list:
    """The words of `python -m aclnn_cpu --cflags --libs`."""
    return shlex.split(python_m_aclnn_cpu("--cflags", "--libs", cwd=build_dir))


@pytest.fixture(scope="session")
def programs(build_dir, c_flags) -> dict:
    """Every tests/c_api/programs/*.cpp compiled once (two compilers at a time): name -> path.

    -O1 -g keeps valgrind's reports readable; -Wall -Wextra -Werror holds the test programs and
    the public headers they include to a warning-free build."""
    sources = sorted(PROGRAMS.glob("*.cpp"))
    pending = []
    built = {}
    for src in sources:
        exe = build_dir / src.stem
        cmd = ["g++", "-std=c++17", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread",
               *EXTRA_FLAGS.get(src.stem, ()), f"-I{PROGRAMS}", str(src), *c_flags, "-o", str(exe)]
        pending.append((src.stem, exe, cmd))
    running = []
    errors = []
    while pending or running:
        while pending and len(running) < 2:
            name, exe, cmd = pending.pop(0)
            running.append((name, exe, cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                             stderr=subprocess.STDOUT, text=True)))
        name, exe, cmd, proc = running.pop(0)
        out, _ = proc.communicate(timeout=300)
        if proc.returncode != 0:
            errors.append(f"{name}: {' '.join(cmd)}\n{out}")
        else:
            built[name] = exe
    assert not errors, "compiling the C API test programs failed:\n" + "\n".join(errors)
    return built


@pytest.fixture(scope="session")
def valgrind():
    """Runs a command under valgrind memcheck; fails the test on any invalid access or definite
    leak. Skips when valgrind is not installed."""
    exe = shutil.which("valgrind")
    if exe is None:
        pytest.skip("valgrind is not installed")

    def run(args, *, suppressions=None, env_extra=None, timeout=600, cwd=None, options=()):
        cmd = [exe, *VALGRIND_ARGS, *options]
        if suppressions is not None:
            cmd.append(f"--suppressions={suppressions}")
        # Passive OpenMP waiting: spinning workers only slow valgrind's serialised threads down.
        env = {"OMP_WAIT_POLICY": "PASSIVE", **(env_extra or {})}
        done = run_program([*cmd, *args], env_extra=env, timeout=timeout, cwd=cwd)
        summary = [line for line in done.stderr.splitlines() if "ERROR SUMMARY" in line]
        assert done.returncode == 0 and summary and " 0 errors" in summary[-1], (
            f"valgrind reported errors (exit {done.returncode}) for {args}\n"
            f"--- valgrind ---\n{done.stderr[-12000:]}\n--- stdout tail ---\n{done.stdout[-2000:]}")
        return done

    return run


@pytest.fixture(scope="session")
def seeds_dir() -> Path:
    """The folder of CANN's operator documents (ACLNN_CPU_SEEDS_DIR): skip without it, fail
    without it under ACLNN_CPU_REQUIRE_SEEDS=1."""
    folder = os.environ.get(SEEDS_ENV, "")
    if folder and Path(folder).is_dir():
        return Path(folder)
    why = (f"CANN's operator documents are not in this repository: set {SEEDS_ENV} to a folder of "
           f"them" + (f" ({folder!r} is not a folder)" if folder else ""))
    if REQUIRE_SEEDS:
        pytest.fail(f"ACLNN_CPU_REQUIRE_SEEDS=1 but {why}")
    pytest.skip(why)
