"""Plumbing of the benchmark suite (not its speed): one tiny case, JSON fields, filters, no torch."""
from __future__ import annotations

import json
import re
import statistics
import sys

import pytest

from aclnn_cpu import bench, bench_repeat
from aclnn_cpu.__main__ import main as cli_main

TINY = ["--suite", "smoke", "--rounds", "2", "--min-time", "0.001"]
# The JSON keeps 4 significant digits (bench.rounded): a ratio recomputed there from rounded
# samples agrees with the rounded ratio to the three roundings, 5e-4 each.
JSON_REL = 1.5e-3


def _run(tmp_path, capsys, *extra):
    path = tmp_path / "bench.json"
    code = bench.main([*TINY, "--json", str(path), *extra])
    captured = capsys.readouterr()
    return code, json.loads(path.read_text()), captured


def test_json_floats_keep_four_significant_digits(tmp_path, capsys):
    _, report, _ = _run(tmp_path, capsys, "--ops", "softmax", "--dtypes", "fp32")
    (row,) = report["results"]
    for value in [row["ours_ms"], row["copy_fraction"], *row["ours_samples_ms"]]:
        assert value == float(f"{value:.4g}")
    assert bench.rounded({"a": [1.234567, float("inf")], "b": (2.0e-9 / 3,), "c": 7}) == \
        {"a": [1.235, float("inf")], "b": [6.667e-10], "c": 7}


def test_one_tiny_case_writes_every_field(tmp_path, capsys):
    markdown = tmp_path / "bench.md"
    code, report, captured = _run(tmp_path, capsys, "--ops", "softmax", "--dtypes", "fp32",
                                  "--markdown", str(markdown))
    assert code == 0, captured.out + captured.err
    machine = report["machine"]
    for key in ("cpu", "usable_cpus", "last_level_cache_bytes", "isa", "aclnn_cpu", "numpy", "python",
                "torch", "aclnn_cpu_config", "date_utc"):
        assert key in machine, key
    assert machine["isa"] == machine["aclnn_cpu_config"]["isa"]
    assert report["settings"]["threads"] == [2] and report["settings"]["rounds"] == 2

    (row,) = report["results"]
    assert (row["op"], row["dtype"], row["threads"], row["case"]) == ("softmax", "float32", 2, "tiny")
    assert row["ours_ms"] > 0 and row["copy_ms"] > 0 and row["copy_fraction"] > 0
    assert row["bytes_moved"] == 3 * 4 * 32 * 4  # grad, output read + result written, fp32
    assert len(row["ours_samples_ms"]) == 2 and row["ours_loops"] >= 1
    if machine["torch"] is None:
        assert row["torch_ms"] is None and row["speedup"] is None and row["torch_error"]
        assert row["copy_speedup"] is None
    else:
        # The ratio is the median of per-round ratios (samples of a round taken side by side).
        per_round = [t / o for t, o in zip(row["torch_samples_ms"], row["ours_samples_ms"])]
        assert row["torch_ms"] > 0 and row["speedup"] == pytest.approx(statistics.median(per_round), rel=JSON_REL)
        copy_per_round = [c / o for c, o in zip(row["copy_samples_ms"], row["ours_samples_ms"])]
        assert row["copy_fraction"] == pytest.approx(statistics.median(copy_per_round), rel=JSON_REL)
        # What an op running at copy speed would reach against torch, paired the same way.
        ceiling = [t / c for t, c in zip(row["torch_samples_ms"], row["copy_samples_ms"])]
        assert row["copy_speedup"] == pytest.approx(statistics.median(ceiling), rel=JSON_REL)
        assert row["max_rel_diff_vs_torch"][0] < 1e-5  # both computed the same softmax gradient
        # The np.empty and allocating calls against torch, paired the same way.
        for variant, field in (("ours_npempty", "speedup_npempty"), ("ours_alloc", "speedup_alloc")):
            paired = [t / o for t, o in zip(row["torch_samples_ms"], row[f"{variant}_samples_ms"])]
            assert row[field] == pytest.approx(statistics.median(paired), rel=JSON_REL)
        # tiny: in cache, no fp16 row
        assert [t["name"] for t in row["targets"]] == ["speedup", "speedup_npempty", "speedup_alloc",
                                                       "npempty_vs_aligned"]
    # The three ways of calling ours, timed in the same rounds; np.empty over aligned paired by round.
    for variant in ("ours_npempty", "ours_alloc"):
        assert row[f"{variant}_ms"] > 0 and len(row[f"{variant}_samples_ms"]) == 2
    for field, variant in (("npempty_vs_aligned", "ours_npempty"), ("alloc_vs_aligned", "ours_alloc")):
        paired = [v / o for v, o in zip(row[f"{variant}_samples_ms"], row["ours_samples_ms"])]
        assert row[field] == pytest.approx(statistics.median(paired), rel=JSON_REL)
    (offset,) = row["npempty_offset"]  # one output; NumPy aligns its data to 16 bytes at least
    assert offset in (0, 16, 32, 48)
    assert row["outputs_identical"] is True
    (npempty,) = [t for t in row["targets"] if t["name"] == "npempty_vs_aligned"]
    assert npempty["value"] == row["npempty_vs_aligned"] and npempty["pass"] == (npempty["value"] <= 1.1)
    assert isinstance(report["missed"], list)

    (overhead,) = report["overhead"]
    assert overhead["op"] == "softmax"
    for variant in ("functional out=", "functional alloc", "two-phase"):
        assert overhead["us"][variant] > 0, overhead
        if machine["torch"] is not None:
            paired = [o / t for o, t in zip(overhead["samples_us"][variant], overhead["samples_us"]["torch"])]
            assert overhead["vs_torch"][variant] == pytest.approx(statistics.median(paired), rel=JSON_REL)
    if machine["torch"] is not None:
        assert [t["variant"] for t in overhead["targets"]] == ["functional out=", "functional alloc", "two-phase"]

    assert "softmax" in captured.out and "Per-call overhead" in captured.out  # the tables
    assert "1/2" in captured.err  # the progress bar goes to stderr
    assert markdown.read_text().count("| softmax |") == 2
    assert "| ours ms | np.empty ms | alloc ms | torch ms |" in markdown.read_text()
    assert "np.empty ms" in captured.out and "alloc ms" in captured.out


def test_without_torch_times_ours_and_the_copy(tmp_path, capsys):
    code, report, captured = _run(tmp_path, capsys, "--no-torch", "--no-overhead",
                                  "--ops", "prelu", "--dtypes", "bf16,fp32")
    assert code == 0, captured.out + captured.err
    assert "torch absent" in captured.out
    assert "np.empty" in report["settings"]["output_policy"]
    assert report["machine"]["torch"] is None and report["overhead"] == []
    assert [r["dtype"] for r in report["results"]] == ["float32", "bfloat16"]  # fp32 first
    for row in report["results"]:
        assert row["ours_ms"] > 0 and row["torch_ms"] is None and row["copy_method"].startswith("numpy")
        assert row["ours_npempty_ms"] > 0 and row["ours_alloc_ms"] > 0 and row["speedup_alloc"] is None
        assert row["outputs_identical"] is True and len(row["npempty_offset"]) == 2  # prelu: 2 outputs
    bf16 = report["results"][1]
    assert [t["name"] for t in bf16["targets"]] == ["per_element_vs_fp32", "npempty_vs_aligned"]
    # judged against the fp32 twin timed in the same rounds, not against the fp32 row
    assert bf16["ours_fp32_ms"] > 0 and len(bf16["ours_fp32_samples_ms"]) == len(bf16["ours_samples_ms"])
    assert bf16["targets"][0]["value"] == bf16["per_element_vs_fp32"] > 0
    assert "per_element_vs_fp32" not in report["results"][0]


def test_cli_passes_options_to_the_suite(capsys):
    # `python -m aclnn_cpu bench --quick ...`: options after `bench` belong to the suite.
    assert cli_main(["bench", "--list", "--quick", "--ops", "softmax"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == ["softmax"] * 2


def test_help_states_the_targets(capsys):
    # argparse does not %-format an epilog: a "%%" there is printed as is.
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    # The targets come from the registry's benchmark sections.
    assert "group_norm >= 1.5x" in text and "grid_sampler >= 3x (>= 5x at batch 1)" in text
    assert "of the copy bandwidth when the working set exceeds the last-level cache: prelu >= 60%" in text
    assert "%%" not in text


def test_filters_and_listing(capsys):
    assert bench.main(["--list", "--ops", "grid,gn", "--quick"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed and all(line.split()[0] in ("grid_sampler", "group_norm") for line in listed)
    with pytest.raises(SystemExit):
        bench.main(["--ops", "conv2d"])


def test_plot_without_matplotlib_says_so(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    rows = [{"op": "prelu", "case": "x", "dtype": "float32", "threads": 2, "speedup": 2.0, "targets": []}]
    message = bench.write_plot(str(tmp_path / "p.png"), rows)
    assert "matplotlib" in message and not (tmp_path / "p.png").exists()


def test_a_missed_speedup_names_what_a_copy_reaches():
    row = {"op": "group_norm", "case": "x", "dtype": "bfloat16", "threads": 2, "shape": "s", "batch": 8,
           "speedup": 1.2, "copy_speedup": 1.7, "copy_fraction": 0.7}
    bench.evaluate_targets([row])
    (missed,) = bench.missed_targets([row])
    assert "speed-up 1.20x < 1.5x" in missed and "(a copy of the same bytes: 1.70x)" in missed
    row.update(copy_speedup=None)
    (missed,) = bench.missed_targets([row])
    assert missed.endswith("< 1.5x")
    cells = bench.table_rows([dict(row, copy_speedup=1.7, ours_ms=1.0, torch_ms=1.2, ours_gbps=10.0)])[0]
    assert cells[bench.TABLE_HEADER.index("copy's speed-up")] == "1.70x"


def test_the_new_targets_are_judged_and_listed():
    row = {"op": "softmax", "case": "x", "dtype": "float32", "threads": 2, "shape": "s", "batch": 8,
           "speedup": 1.3, "speedup_npempty": 0.9, "speedup_alloc": 1.0, "npempty_vs_aligned": 1.2}
    bench.evaluate_targets([row])
    verdicts = {t["name"]: t["pass"] for t in row["targets"]}
    assert verdicts == {"speedup": True, "speedup_npempty": False, "speedup_alloc": True,
                        "npempty_vs_aligned": False}
    where = "softmax x fp32 t2 (s): "
    assert bench.missed_targets([row]) == [where + "speed-up with np.empty out= arrays 0.90x < 1x",
                                           where + "np.empty out= arrays take 1.200x the aligned time > 1.1x"]
    cells = bench.table_rows([dict(row, ours_ms=1.0, ours_npempty_ms=1.2, ours_alloc_ms=1.1)])[0]
    assert cells[bench.TABLE_HEADER.index("np.empty ms")] == "1.20"
    assert cells[bench.TABLE_HEADER.index("alloc ms")] == "1.10"
    assert "np.empty<=1.1x aligned (1.20x) MISS" in cells[-1] and ">=1x alloc (1.00x) pass" in cells[-1]
    # With where NumPy put the first output, and over repeated runs every place it landed.
    cells = bench.table_rows([dict(row, ours_npempty_ms=1.2, npempty_offset=[16, 0])])[0]
    assert cells[bench.TABLE_HEADER.index("np.empty ms")] == "1.20 (+16)"
    repeated = dict(row, ours_npempty_ms=1.2, per_run={"npempty_offset": [[16, 0], [0, 0], [16, 32]]},
                    runs=3, targets=[])
    assert " 1.20 (+0/+16) " in bench.format_repeated([repeated]).splitlines()[-1]
    # Calls that wrote different bits, or that failed, are listed and fail the run.
    row.update(npempty_vs_aligned=1.0, speedup_npempty=1.1, outputs_identical=False)
    bench.evaluate_targets([row])
    assert bench.missed_targets([row]) == [where + "ours: the ways of calling wrote different bits"]
    row.update(outputs_identical=True, ours_alloc_error="ValueError: x")
    assert bench.missed_targets([row]) == [where + "ours: alloc call failed: ValueError: x"]
    assert bench.table_rows([row])[0][-1].endswith("ours failed")


def test_strict_fails_on_a_missed_np_empty_target(tmp_path, capsys, monkeypatch):
    args = ["--no-overhead", "--no-torch", "--ops", "softmax", "--dtypes", "fp32"]
    monkeypatch.setattr(bench, "NPEMPTY_LIMIT", 0.0)  # no call can meet this
    code, report, captured = _run(tmp_path, capsys, *args, "--strict")
    assert code == 1 and "np.empty out= arrays take" in captured.out, captured.out
    (row,) = report["results"]
    assert [t["pass"] for t in row["targets"]] == [False]
    assert _run(tmp_path, capsys, *args)[0] == 0  # without --strict a miss does not fail the run


@pytest.mark.parametrize("op, params, dtype", [
    ("softmax", {"shape": (64, 300), "dim": -1}, "float32"),  # rows not a multiple of a line
    ("softmax", {"shape": (48, 200), "dim": -1}, "bfloat16"),
    ("prelu", {"shape": (4, 16, 24, 24), "weight": "channel"}, "float16"),  # two outputs
    ("group_norm", {"N": 2, "C": 32, "H": 12, "W": 12, "G": 8}, "float32"),  # three outputs
    ("grid_sampler", dict(N=2, C=8, H=16, W=16, Ho=12, Wo=10, mode=0, padding=0, align=False), "float32"),
])
def test_the_ways_of_calling_write_the_same_bits_into_the_arrays_they_claim(op, params, dtype):
    import aclnn_cpu as ac
    import numpy as np

    case = bench.Case(op, "t", params, ("smoke",))
    prepared = bench.prepare(case, dtype, ac, None, np.random.default_rng(7))
    aligned, user = prepared.ours_outputs(), prepared.npempty_outputs()
    # The np.empty outputs are plain np.empty arrays, as users make them (owning their data); the
    # first aligned output is on a line.
    for a in user:
        assert a is None or (a.base is None and a.flags.owndata and a.flags.c_contiguous)
    assert aligned[0].nbytes >= 4096 and aligned[0].ctypes.data % 64 == 0
    assert bench.line_offsets(user) == [None if a is None else a.ctypes.data % 64 for a in user]
    assert not any(a is not None and b is not None and np.shares_memory(a, b) for a in aligned for b in user)
    for a in aligned + user:
        if a is not None:
            a[...] = np.nan  # so outputs not written by a call cannot match by chance
    prepared.ours()
    prepared.ours_npempty()
    allocated = bench.peer_outputs(prepared.ours_alloc())
    assert len(allocated) == len(aligned) == len(user)
    for a, u, f in zip(aligned, user, allocated):
        assert (a is None) == (u is None) == (f is None)
        if a is not None:
            assert not np.isnan(a.astype(np.float32)).any()
            assert a.tobytes() == u.tobytes() == np.ascontiguousarray(f).tobytes()
    assert bench.same_bits(aligned, user) and bench.same_bits(aligned, allocated)
    # same_bits sees a single flipped bit.
    flipped = [None if a is None else a.copy() for a in user]
    first = next(a for a in flipped if a is not None)
    first.view(np.uint8).reshape(-1)[-1] ^= 1
    assert not bench.same_bits(aligned, flipped)


def test_grid_sampler_bytes_count_the_input_only_where_the_mode_reads_it():
    # The copy beside a row moves the op's bytes: gradOutput and the grid read, inputGrad and
    # gridGrad written, and the input read by bilinear and bicubic; nearest has no grid gradient
    # and never reads it.
    import aclnn_cpu as ac
    import numpy as np

    N, C, H, W, Ho, Wo = 2, 3, 5, 7, 4, 6
    go, x, grid = N * C * Ho * Wo, N * C * H * W, N * Ho * Wo * 2
    for mode, inputs in ((0, 2), (1, 1), (2, 2)):
        params = dict(N=N, C=C, H=H, W=W, Ho=Ho, Wo=Wo, mode=mode, padding=0, align=False)
        case = bench.Case("grid_sampler", "t", params, ("smoke",))
        prepared = bench.prepare(case, "float16", ac, None, np.random.default_rng(0))
        assert prepared.bytes_moved == 2 * (go + inputs * x + 2 * grid), mode


def test_a_missed_overhead_target_is_listed():
    overhead = [{"op": "grid_sampler", "us": {"functional out=": 4.0, "two-phase": 6.0, "torch": 5.0},
                 "vs_torch": {"functional out=": 0.8, "two-phase": 1.2}}]
    bench.evaluate_overhead_targets(overhead)
    assert [t["pass"] for t in overhead[0]["targets"]] == [True, False]
    assert bench.missed_overhead(overhead) == ["grid_sampler per-call overhead, two-phase: 1.20x torch's > 1"]
    assert bench._overhead_cells(overhead[0]) == ["4.00 (0.80x)", "-", "6.00 (1.20x)", "5.00"]


# --------------------------------------------------------------------------------------------
# --repeat: each target judged on the median over whole runs of the selection, with the runs
# that missed it counted.

def _grid_row(speedup, per_element=None, dtype="float32"):
    row = {"op": "grid_sampler", "case": "b32", "dtype": dtype, "threads": 2, "shape": "s", "batch": 32,
           "speedup": speedup, "ours_ms": 1.0, "torch_ms": speedup, "copy_speedup": 9.0}
    if per_element is not None:
        row["per_element_vs_fp32"] = per_element
    return row


def test_repeated_runs_are_judged_on_their_medians():
    runs = []
    for speedup, per_element in ((2.9, 1.02), (3.4, 0.95), (3.2, 0.97), (2.95, 0.99), (3.6, 0.9)):
        rows = [_grid_row(speedup), _grid_row(speedup + 1, per_element, "float16")]
        bench.evaluate_targets(rows)
        runs.append({"results": rows, "missed": bench.missed_targets(rows)})
    fp32, fp16 = bench_repeat.summarize(runs, bench.evaluate_targets)
    assert (fp32["dtype"], fp16["dtype"]) == ("float32", "float16") and fp32["runs"] == 5
    assert fp32["per_run"]["speedup"] == [2.9, 3.4, 3.2, 2.95, 3.6]
    assert fp32["speedup"] == 3.2 and fp32["torch_ms"] == 3.2 and fp32["ours_ms"] == 1.0
    (target,) = fp32["targets"]
    assert (target["pass"], target["missed_runs"], target["runs"], target["range"]) == (True, 2, 5, [2.9, 3.6])
    speedup, per_element = fp16["targets"]
    assert per_element["value"] == 0.97 and per_element["pass"] and per_element["missed_runs"] == 1
    assert speedup["missed_runs"] == 0
    cells = bench_repeat.target_cells(fp32)
    assert cells == ">=3x 3.20x [2.90-3.60x] pass, missed in 2/5 runs"

    # A median under the goal misses, however many single runs passed.
    runs[2]["results"][0]["speedup"] = 2.97
    fp32 = bench_repeat.summarize(runs, bench.evaluate_targets)[0]
    assert fp32["speedup"] == 2.97 and not fp32["targets"][0]["pass"]
    assert fp32["targets"][0]["missed_runs"] == 2  # the per-run verdicts are the runs' own
    (missed,) = bench.missed_targets([fp32])
    assert missed.endswith("speed-up 2.97x < 3x (a copy of the same bytes: 9.00x) (median of 5 runs; missed in 2)")


def test_repeat_runs_the_selection_again_and_writes_every_run(tmp_path, capsys):
    markdown = tmp_path / "repeat.md"
    code, report, captured = _run(tmp_path, capsys, "--ops", "softmax", "--dtypes", "fp32,fp16",
                                  "--repeat", "3", "--pause", "0.01", "--markdown", str(markdown))
    assert code == 0, captured.out + captured.err
    assert report["settings"]["repeat"] == 3 and report["settings"]["pause_s"] == 0.01
    assert len(report["runs"]) == 3
    assert [len(r["overhead"]) for r in report["runs"]] == [1, 0, 0]  # overhead timed once
    assert report["overhead"] == report["runs"][0]["overhead"]
    fp32, fp16 = report["results"]
    for i, row in enumerate((fp32, fp16)):
        per_run = [run["results"][i]["ours_ms"] for run in report["runs"]]
        assert row["per_run"]["ours_ms"] == per_run and row["ours_ms"] == statistics.median(per_run)
        assert row["runs"] == 3
        for field in ("ours_npempty_ms", "ours_alloc_ms", "npempty_vs_aligned", "alloc_vs_aligned",
                      "npempty_offset", "outputs_identical"):
            assert row["per_run"][field] == [run["results"][i][field] for run in report["runs"]], field
        assert row["npempty_vs_aligned"] == statistics.median(row["per_run"]["npempty_vs_aligned"])
        assert row["outputs_identical"] is True
    assert "per_element_vs_fp32" in fp16["per_run"]
    assert [t["name"] for t in fp16["targets"]][-1] == "npempty_vs_aligned"
    assert "per_element_vs_fp32" in [t["name"] for t in fp16["targets"]]
    assert captured.out.count("run 1/3:") == 1 and "run 3/3:" in captured.out
    assert "Medians over 3 runs, 0.01 s apart" in captured.out and "missed in" in captured.out
    text = markdown.read_text()
    assert "then the median over 3 runs" in text
    # One cell per target, each with its count of missing runs: "np.empty <= 1.1x aligned" on both
    # rows, fp16's "<= fp32", and with torch each row's three speed-ups (aligned, np.empty, alloc).
    expected = 9 if report["machine"]["torch"] is not None else 3
    assert len(re.findall(r"missed in [0-3]/3 runs", text)) == expected


def test_repeat_and_pause_are_checked(capsys):
    for bad in (["--repeat", "0"], ["--pause", "-1"]):
        with pytest.raises(SystemExit) as exit_:
            bench.main([*TINY, *bad])
        assert exit_.value.code == 2
        assert "--repeat must be >= 1 and --pause >= 0" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# Jobs whose torch call can crash its process (GridSampler fp16/bf16 in torch 2.13) run in a
# child process; a child that dies is retried, and after the last attempt the row is timed
# here without torch and says why. Isolation applies only with torch present: the `torch`
# fixture skips these without it, or fails them under ACLNN_CPU_REQUIRE_TORCH=1.

def test_crash_prone_jobs_run_in_a_child_process(tmp_path, capsys, torch):
    code, report, captured = _run(tmp_path, capsys, "--no-overhead", "--ops", "grid_sampler",
                                  "--dtypes", "fp32,bf16")
    assert code == 0, captured.out + captured.err
    fp32, bf16 = report["results"]
    assert "isolated" not in fp32  # only the crash-prone dtype leaves the process
    assert bf16["isolated"] == {"attempts": 1, "failures": []}
    assert bf16["dtype"] == "bfloat16" and bf16["case"] == "tiny" and bf16["threads"] == 2
    assert bf16["ours_ms"] > 0 and bf16["torch_ms"] > 0 and bf16["speedup"] > 0
    assert bf16["per_element_vs_fp32"] > 0 and len(bf16["torch_samples_ms"]) == 2
    assert report["settings"]["isolate"] == "auto"


def test_a_child_that_keeps_crashing_leaves_a_row_without_torch(tmp_path, capsys, monkeypatch, torch):
    commands = []

    def crashing_child(*args):
        commands.append(args)
        return [sys.executable, "-c", "import os, sys; print('boom', file=sys.stderr); os.abort()"]

    monkeypatch.setattr(bench, "child_command", crashing_child)
    code, report, captured = _run(tmp_path, capsys, "--no-overhead", "--ops", "grid_sampler",
                                  "--dtypes", "fp16")
    assert code == 0, captured.out + captured.err
    (row,) = report["results"]
    assert len(commands) == bench.ISOLATION_ATTEMPTS
    assert row["isolated"]["attempts"] == bench.ISOLATION_ATTEMPTS
    assert row["isolated"]["failures"] == ["exit -6: boom"] * bench.ISOLATION_ATTEMPTS
    assert row["torch_ms"] is None and row["speedup"] is None
    assert row["torch_error"].startswith("torch's call crashed its process 3 times (exit -6: boom")
    assert row["ours_ms"] > 0 and row["copy_ms"] > 0


def test_isolation_can_be_turned_off(tmp_path, capsys, monkeypatch, torch):
    monkeypatch.setattr(bench, "child_command", lambda *a: pytest.fail("no child expected"))
    code, report, captured = _run(tmp_path, capsys, "--no-overhead", "--ops", "grid_sampler",
                                  "--dtypes", "fp16", "--isolate", "never")
    assert code == 0, captured.out + captured.err
    (row,) = report["results"]
    assert "isolated" not in row and row["torch_ms"] > 0
