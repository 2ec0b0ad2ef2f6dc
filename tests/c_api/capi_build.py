"""Paths and process helpers of the C API tests (shared by conftest.py and the test modules)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from capi_cases import run_environment

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
REPO = HERE.parents[1]
# CANN's operator documents are not part of this repository: ACLNN_CPU_SEEDS_DIR names a folder
# of them as plain text (one document a file, each starting with the operator's name), and
# ACLNN_CPU_REQUIRE_SEEDS=1 turns a missing folder from a skip into a failure (.ci/run sets both).
SEEDS_ENV = "ACLNN_CPU_SEEDS_DIR"
REQUIRE_SEEDS = os.environ.get("ACLNN_CPU_REQUIRE_SEEDS", "") not in ("", "0")

VALGRIND_ARGS = ["--leak-check=full", "--errors-for-leak-kinds=definite", "--error-exitcode=1",
                 "--show-leak-kinds=definite", "--num-callers=30"]


def python_m_aclnn_cpu(*args: str, cwd: Path) -> str:
    """`python -m aclnn_cpu ...` run from outside the checkout, so the installed package answers."""
    done = subprocess.run([sys.executable, "-m", "aclnn_cpu", *args], cwd=cwd, capture_output=True,
                          text=True, env=run_environment(), timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def run_program(args, *, env_extra=None, timeout=300, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                          env=run_environment(env_extra), cwd=cwd)


def assert_program_passed(done: subprocess.CompletedProcess, what: str) -> None:
    """A harness.h program: exit 0 and its "passed N checks" line, no FAIL line."""
    failures = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert done.returncode == 0 and not failures and "passed" in done.stdout, (
        f"{what} exited {done.returncode}\n" + "\n".join(failures[:50]) +
        f"\n--- stdout tail ---\n{done.stdout[-3000:]}\n--- stderr ---\n{done.stderr[-5000:]}")
