"""The hand-written C API programs (tests/c_api/programs/*.cpp, built on harness.h): executor
lifecycle and phase 2, the acl runtime subset, product lines chosen by aclInit's configuration
file, thread-local error messages, calls from a user's own OpenMP loop (nested regions), and
out-of-memory at every allocation of the entry points.
Each runs natively and once under valgrind memcheck."""
from __future__ import annotations

import pytest

from capi_build import assert_program_passed, run_program

# program -> whether it takes a scratch directory argument
PROGRAMS = {"executors": False, "acl_runtime": True, "product_config": True,
            "thread_messages": False, "out_of_memory": True, "nested_parallel": False}
# out_of_memory replaces operator new in the executable; valgrind must leave that one alone
# (it still tracks the malloc underneath).
VALGRIND_OPTIONS = {"out_of_memory": ["--soname-synonyms=somalloc=nouserintercepts"]}


def _args(programs, name, tmp_path):
    return [programs[name]] + ([tmp_path] if PROGRAMS[name] else [])


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program(name, programs, tmp_path):
    done = run_program(_args(programs, name, tmp_path))
    assert_program_passed(done, name)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_under_valgrind(name, programs, valgrind, tmp_path):
    done = valgrind(_args(programs, name, tmp_path), options=VALGRIND_OPTIONS.get(name, ()))
    assert_program_passed(done, f"{name} under valgrind")
