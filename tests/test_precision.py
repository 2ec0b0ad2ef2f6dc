"""aclnn_cpu.precision and `python -m aclnn_cpu compare`: metrics against an independent NumPy
recomputation, and the verdicts of the single and double benchmark around their thresholds."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import np_dtype

from aclnn_cpu import precision
from aclnn_cpu.__main__ import main as cli

ROOT = Path(__file__).resolve().parent.parent
DTYPES = ["float16", "bfloat16", "float32"]
# The standards' numbers, restated here from CANN's documents (not read from the module).
T = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -13}
SMALL = {"float16": (2.0 ** -11, 2.0 ** -16), "bfloat16": (2.0 ** -8, 2.0 ** -16), "float32": (2.0 ** -14, 2.0 ** -30)}


def reference_metrics(actual, golden, dtype):
    """MERE, MARE, RMSE and the small-value error count, straight from the formulas."""
    a = np.asarray(actual, dtype=np.float64).ravel()
    g = np.asarray(golden, dtype=np.float64).ravel()
    keep = np.isfinite(a) & np.isfinite(g)
    a, g = a[keep], g[keep]
    re = np.abs(a - g) / (np.abs(g) + 1e-7)
    threshold, bound = SMALL[dtype]
    return {"mere": re.mean(), "mare": re.max(), "rmse": math.sqrt(np.mean((a - g) ** 2)),
            "small_value_errors": int(np.sum((np.abs(g) < threshold) & (np.abs(a - g) > bound)))}


def golden_of(dtype, rng, n=20000):
    """A golden as `golden` writes it (float32 for 16-bit cases, float64 for float32 ones), with
    some values below the small-value threshold."""
    wide = np.float32 if dtype != "float32" else np.float64
    g = rng.uniform(-5, 5, n)
    g[: n // 10] = rng.uniform(-1, 1, n // 10) * SMALL[dtype][0]
    return g.astype(wide)


def with_relative_noise(g, rng, size):
    return (g.astype(np.float64) * (1 + rng.uniform(-size, size, g.shape))).astype(g.dtype)


def assert_metrics_equal(comparison, actual, golden, dtype):
    expected = reference_metrics(actual, golden, dtype)
    for key in ("mere", "mare", "rmse"):
        assert getattr(comparison, key) == pytest.approx(expected[key], rel=1e-12, abs=0), key
    assert comparison.small_value_errors == expected["small_value_errors"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_single_golden_against_itself_passes(dtype):
    g = golden_of(dtype, np.random.default_rng(1))
    c = precision.compare(g, g, dtype=dtype, standard="single")
    assert c.passed and c.mere == 0 and c.mare == 0 and c.rmse == 0 and c.small_value_errors == 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale, passes", [(0.5, True), (3.0, False)])
def test_single_noise_around_threshold(dtype, scale, passes):
    """Relative noise uniform in +-scale*T: mean |noise| = scale*T/2, max about scale*T."""
    rng = np.random.default_rng(2)
    g = golden_of(dtype, rng)
    a = with_relative_noise(g, rng, scale * T[dtype])
    c = precision.compare(a, g, dtype=dtype, standard="single")
    assert_metrics_equal(c, a, g, dtype)
    assert c.passed is passes
    assert c.checks["mere"] is passes
    assert c.thresholds == {"mere": T[dtype], "mare": 10 * T[dtype]}


@pytest.mark.parametrize("dtype", DTYPES)
def test_single_fails_on_one_large_error(dtype):
    """MERE stays tiny, MARE crosses 10 T: the verdict follows MARE."""
    rng = np.random.default_rng(3)
    g = golden_of(dtype, rng)
    a = g.copy()
    a[-1] = g[-1] * (1 + 20 * T[dtype])
    c = precision.compare(a, g, dtype=dtype)
    assert_metrics_equal(c, a, g, dtype)
    assert c.checks["mere"] and not c.checks["mare"] and not c.passed


@pytest.mark.parametrize("dtype", DTYPES)
def test_double_golden_against_itself_passes(dtype):
    rng = np.random.default_rng(4)
    g = golden_of(dtype, rng)
    third = with_relative_noise(g, rng, T[dtype])
    c = precision.compare(g, g, dtype=dtype, standard="double", third_party=third)
    assert c.passed and c.ratios["mere"] == 0 and c.ratios["mare"] == 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale, passes", [(1.5, True), (3.0, False)])
def test_double_noise_around_ratio_limits(dtype, scale, passes):
    """The result's noise is `scale` times the third party's: MERE and RMSE ratios about scale
    (limit 2 at L0)."""
    rng = np.random.default_rng(5)
    g = golden_of(dtype, rng)
    u = rng.uniform(-1, 1, g.shape) * T[dtype]
    third = (g.astype(np.float64) * (1 + u)).astype(g.dtype)
    a = (g.astype(np.float64) * (1 + scale * u)).astype(g.dtype)
    c = precision.compare(a, g, dtype=dtype, standard="double", third_party=third)
    assert_metrics_equal(c, a, g, dtype)
    expected_third = reference_metrics(third, g, dtype)
    expected_a = reference_metrics(a, g, dtype)
    assert c.ratios["mere"] == pytest.approx(expected_a["mere"] / expected_third["mere"], rel=1e-12)
    assert c.ratios["rmse"] == pytest.approx(expected_a["rmse"] / expected_third["rmse"], rel=1e-12)
    assert c.ratios["mare"] == pytest.approx(expected_a["mare"] / expected_third["mare"], rel=1e-12)
    assert c.passed is passes
    assert c.checks["mere"] is passes


@pytest.mark.parametrize("level, limits", [("L0", (10, 2, 2)), ("L1", (5, 1.5, 1.5)), ("L2", (2, 1.2, 1.2))])
def test_double_levels(level, limits):
    rng = np.random.default_rng(6)
    g = golden_of("float16", rng)
    u = rng.uniform(-1, 1, g.shape) * T["float16"]
    third = (g * (1 + u)).astype(np.float32)
    a = (g * (1 + 1.3 * u)).astype(np.float32)
    c = precision.compare(a, g, dtype="float16", standard="double", third_party=third, level=level)
    assert (c.thresholds["mare"], c.thresholds["mere"], c.thresholds["rmse"]) == limits
    assert c.passed is (level != "L2")  # ratio about 1.3: inside L0 and L1, outside L2's 1.2


def test_double_small_value_errors():
    """Errors only on small values: the count ratio (third party's floored at 1) decides."""
    g = np.full(1000, 2.0 ** -16, np.float64)
    g[500:] = 3.0
    third = g.copy()
    third[:2] += 2.0 ** -28  # 2 small-value errors for float32 (bound 2^-30)
    a = g.copy()
    for errors, passes in ((4, True), (5, False)):
        a[:] = g
        a[:errors] += 2.0 ** -28
        c = precision.compare(a, g, dtype="float32", standard="double", third_party=third)
        assert c.small_value_errors == errors and c.third_party.small_value_errors == 2
        assert c.ratios["small_value_errors"] == errors / 2
        assert c.checks["small_value_errors"] is passes


def test_nonfinite_positions():
    g = np.array([1.0, np.nan, np.inf, -np.inf, 2.0], np.float32)
    same = g.copy()
    assert precision.compare(same, g, dtype="float16").passed
    wrong = g.copy()
    wrong[2] = -np.inf
    c = precision.compare(wrong, g, dtype="float16")
    assert c.nonfinite_mismatches == 1 and not c.passed and c.mere == 0
    # double benchmark: matching the third party where the golden is not finite passes
    third = wrong.copy()
    assert precision.compare(wrong, g, dtype="float16", standard="double", third_party=third).passed
    third[2] = 5.0
    assert not precision.compare(wrong, g, dtype="float16", standard="double", third_party=third).passed


def test_api_errors():
    g = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="shapes differ"):
        precision.compare(np.ones(5, np.float32), g)
    with pytest.raises(ValueError, match="third-party"):
        precision.compare(g, g, standard="double")
    with pytest.raises(ValueError, match="not float64"):
        precision.compare(g, g, dtype="float64")
    with pytest.raises(ValueError, match="'triple'"):
        precision.compare(g, g, standard="triple")


def test_empty_arrays_pass():
    e = np.zeros((0, 3), np.float32)
    c = precision.compare(e, e, dtype="float32")
    assert c.passed and c.metrics.elements == 0


# ---- the command line ----------------------------------------------------------------------

def run_cli(*args):
    """The CLI as a user runs it: a subprocess, so a traceback could not hide."""
    result = subprocess.run([sys.executable, "-m", "aclnn_cpu", *map(str, args)], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    return result.returncode, result.stdout, result.stderr


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(7)
    g = golden_of("float16", rng, 600).reshape(20, 30)
    a = with_relative_noise(g, rng, 0.5 * T["float16"])
    bad = with_relative_noise(g, rng, 3 * T["float16"])
    paths = {"golden": tmp_path / "golden.bin", "actual": tmp_path / "actual.bin", "bad": tmp_path / "bad.npy",
             "golden_npy": tmp_path / "golden.npy"}
    g.tofile(paths["golden"])
    a.tofile(paths["actual"])
    np.save(paths["bad"], bad)
    np.save(paths["golden_npy"], g)
    return paths, g, a, bad


def test_cli_bin_files_pass_and_json_matches_api(files, capsys):
    paths, g, a, _ = files
    code = cli(["compare", str(paths["actual"]), str(paths["golden"]), "--dtype", "float32",
                "--shape", "20,30", "--json"])
    # --dtype float32 picks float32's thresholds: noise of T(float16)/2 fails them
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["passed"] is False
    metrics = report["outputs"]["actual.bin"]
    expected = reference_metrics(a, g, "float32")
    for key in ("mere", "mare", "rmse", "small_value_errors"):
        assert metrics[key] == pytest.approx(expected[key], rel=1e-12)
    code = cli(["compare", str(paths["golden_npy"]), str(paths["golden_npy"]), "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["passed"] is True


def test_cli_thresholds_of_float16(files, capsys):
    """A float16 result (an NPU's output of a float16 case) against the float32 golden: float16's
    thresholds apply."""
    paths, g, a, bad = files
    actual, wrong = paths["golden"].parent / "npu.npy", paths["golden"].parent / "npu_bad.npy"
    np.save(actual, a.astype(np.float16))
    np.save(wrong, bad.astype(np.float16))
    for path, code, verdict in ((actual, 0, "PASS"), (wrong, 1, "FAIL")):
        assert cli(["compare", str(path), str(paths["golden"]), "--golden-dtype", "float32",
                    "--shape", "20,30"]) == code
        out = capsys.readouterr().out
        assert "float16 single" in out and out.strip().endswith(f"overall: {verdict}"), out


def test_cli_double_with_third_party(files, capsys):
    paths, g, a, bad = files
    np.save(paths["actual"].with_suffix(".npy"), a)
    code = cli(["compare", str(paths["actual"].with_suffix(".npy")), str(paths["golden_npy"]),
                "--third-party", str(paths["bad"]), "--standard", "double", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["standard"] == "double"
    out = report["outputs"]["actual.npy"]
    assert out["ratios"]["mere"] < 1 and out["third_party"]["mere"] > out["mere"]


@pytest.mark.parametrize("args, message", [
    (["{actual}", "{golden}", "--dtype", "float32", "--shape", "20,31"], "has 2400 bytes; shape [20, 31] of float32 needs 2480"),
    (["{bad}", "{golden_npy}", "--dtype", "float16"], "holds float32, but the dtype given is float16"),
    (["{actual}", "{golden}"], "a raw .bin file needs --dtype"),
    (["{actual}", "{golden}", "--dtype", "float32", "--standard", "double"], "needs --third-party"),
    (["{actual}", "{golden}", "--dtype", "float64"], "not float64"),
    (["{actual}", "{golden}", "--dtype", "complex7"], "unknown dtype 'complex7'"),
    (["{golden_npy}", "{golden_npy}", "--shape", "30,20"], "has shape [20, 30], but the shape given is [30, 20]"),
    (["{golden_npy}", "{nowhere}"], "no such file"),
])
def test_cli_bad_input_one_line_exit_2(files, args, message):
    paths, *_ = files
    names = {k: str(v) for k, v in paths.items()}
    names["nowhere"] = str(paths["golden"].parent / "missing.npy")
    code, out, err = run_cli("compare", *[a.format(**names) for a in args])
    assert code == 2, (out, err)
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_cli_plot_without_matplotlib(files, capsys, monkeypatch, tmp_path):
    paths, *_ = files
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    code = cli(["compare", str(paths["golden_npy"]), str(paths["golden_npy"]), "--plot", str(tmp_path / "p.png")])
    err = capsys.readouterr().err
    assert code == 2 and "--plot needs matplotlib" in err
    assert not (tmp_path / "p.png").exists()


def test_cli_plot_draws_the_distribution(files, tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="matplotlib is optional (the plot's missing-module error is tested)")
    paths, *_ = files
    target = tmp_path / "errors.png"
    assert cli(["compare", str(paths["bad"]), str(paths["golden_npy"]), "--dtype", "float32",
                "--plot", str(target)]) == 1
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_histogram_counts_every_scored_element():
    rng = np.random.default_rng(8)
    g = golden_of("bfloat16", rng)
    a = with_relative_noise(g, rng, T["bfloat16"])
    m = precision.metrics(a, g, "bfloat16")
    assert m.histogram.sum() == g.size == m.elements
    re = np.abs(a.astype(np.float64) - g) / (np.abs(g.astype(np.float64)) + 1e-7)
    expected, _ = np.histogram(np.clip(np.log10(np.where(re > 0, re, 1e-300)), -12, 3), np.linspace(-12, 3, 151))
    assert np.array_equal(m.histogram, expected)


def test_dtype_spellings():
    g = np.ones(3, np.float32)
    assert precision.compare(g, g, dtype="bf16").dtype == "bfloat16"
    assert precision.compare(g.astype(np_dtype("bfloat16")), g).dtype == "bfloat16"
