"""Every op through the C API (programs/op_runner.cpp): values against float64 references for
every dtype and layout (strides and offset in elements, negative and zero strides), masks,
repeatable executors run several times, and every phase-1 rejection with its status and message,
with nothing written to any output when a call fails. The runner runs natively once per ISA
level and once under valgrind memcheck."""
from __future__ import annotations

import numpy as np
import pytest

import capi_reference as ref
from capi_cases import changed_bytes, parse_results, read_output, write_all
from capi_error_cases import all_error_cases, all_valid_bases
from capi_value_cases import all_value_cases
from capi_build import run_program
from capi_registry import peer_tolerance

VALUE_CASES = all_value_cases()
ERROR_CASES = all_error_cases()
BASE_CASES = all_valid_bases()
ALL_CASES = VALUE_CASES + ERROR_CASES + BASE_CASES


def _isa_levels():
    from aclnn_cpu import _config
    return list(_config.available_isas())


@pytest.fixture(scope="module")
def case_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("op_cases")
    write_all(ALL_CASES, directory)
    return directory


@pytest.fixture(scope="module")
def native_runs(programs, case_dir):
    """isa -> (results by case, its own copy of the output files' directory)."""
    runs = {}
    for isa in _isa_levels():
        done = run_program([programs["op_runner"], case_dir], env_extra={"ACLNN_CPU_ISA": isa})
        assert done.returncode == 0, f"op_runner ({isa}) exited {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        runs[isa] = (parse_results(done.stdout), _snapshot(case_dir, isa))
    return runs


def _snapshot(case_dir, isa):
    """Moves this run's *.out files aside (the next run overwrites them)."""
    target = case_dir / f"out_{isa}"
    target.mkdir(exist_ok=True)
    for f in case_dir.glob("*.out"):
        f.replace(target / f.name)
    for f in case_dir.glob("*.bin"):
        link = target / f.name
        if not link.exists():
            link.symlink_to(f)
    return target


def _check_values(case, results, directory):
    result = results[case.name]
    assert (result.status, result.run_status) == (0, 0), f"{case.name}: {result}"
    for name, expected in case.reference.items():
        dtype = case.placed[name][2]
        got = read_output(case, directory, name).astype(np.float64)
        if isinstance(expected, tuple):  # a formula reference with the magnitude of its terms
            expected, magnitude = expected
            bound = ref.tolerance(expected, magnitude, dtype)
        else:  # the op's PyTorch peer in float64
            bound = peer_tolerance(expected, dtype)
        assert got.shape == expected.shape
        err = np.abs(got - expected)
        bad = ~(err <= bound)        # NaN counts as bad
        assert not bad.any(), (
            f"{case.name}.{name} ({dtype}): {int(bad.sum())} of {bad.size} elements off; worst at "
            f"{np.unravel_index(np.argmax(np.where(bad, err, -1)), bad.shape)}: got "
            f"{got[bad][:5]}, expected {expected[bad][:5]}, bound {np.broadcast_to(bound, bad.shape)[bad][:5]}")
    # Outside the outputs' elements nothing changed: storage gaps, inputs, masked-off outputs.
    assert changed_bytes(case, directory, exclude=list(case.reference)) == []


@pytest.mark.parametrize("isa", _isa_levels())
@pytest.mark.parametrize("case", VALUE_CASES, ids=[c.name for c in VALUE_CASES])
def test_values(case, isa, native_runs):
    results, directory = native_runs[isa]
    _check_values(case, results, directory)


def _check_error(case, results, directory):
    result = results[case.name]
    assert result.status == case.status, f"{case.name}: expected {case.status}, got {result}"
    assert result.run_status == -1
    for fragment in case.fragments:
        assert fragment in result.message, f"{case.name}: message {result.message!r} lacks {fragment!r}"
    assert changed_bytes(case, directory) == [], f"{case.name}: a failed call wrote memory"


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c.name for c in ERROR_CASES])
def test_rejected(case, native_runs):
    results, directory = native_runs[_isa_levels()[-1]]
    _check_error(case, results, directory)


@pytest.mark.parametrize("case", BASE_CASES, ids=[c.name for c in BASE_CASES])
def test_valid_bases_succeed(case, native_runs):
    results, _ = native_runs[_isa_levels()[-1]]
    assert (results[case.name].status, results[case.name].run_status) == (0, 0), results[case.name]


def test_rejections_same_at_every_isa_level(native_runs):
    """Messages do not depend on the ISA level."""
    levels = _isa_levels()
    first = native_runs[levels[0]][0]
    for isa in levels[1:]:
        for case in ERROR_CASES:
            assert native_runs[isa][0][case.name] == first[case.name]


def test_thread_count_does_not_change_results(programs, case_dir, native_runs, tmp_path):
    """One thread (set through aclInit's configuration file) writes the same bytes as the
    default thread count at the same ISA level."""
    import filecmp
    import shutil
    best = _isa_levels()[-1]
    one = tmp_path / "cases"
    shutil.copytree(case_dir, one, ignore=shutil.ignore_patterns("out_*", "*.out"))
    config = tmp_path / "one_thread.json"
    config.write_text('{"aclnn_cpu": {"num_threads": 1}}')
    done = run_program([programs["op_runner"], one, config], env_extra={"ACLNN_CPU_ISA": best})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    _, reference_dir = native_runs[best]
    differ = [f.name for f in sorted(one.glob("*.out"))
              if not filecmp.cmp(f, reference_dir / f.name, shallow=False)]
    assert differ == []


def test_under_valgrind(programs, case_dir, valgrind, tmp_path):
    """All cases once under valgrind memcheck: no invalid access, no definite leak, and the same
    values and statuses as the native runs (valgrind reports an AVX2 CPU, so the AVX2 or baseline
    kernels run)."""
    import shutil
    vdir = tmp_path / "cases"
    shutil.copytree(case_dir, vdir, ignore=shutil.ignore_patterns("out_*", "*.out"))
    done = valgrind([programs["op_runner"], vdir])
    results = parse_results(done.stdout)
    assert "runner failures\t0" in done.stdout
    for case in VALUE_CASES:
        _check_values(case, results, vdir)
    for case in ERROR_CASES:
        _check_error(case, results, vdir)
