"""`python -m aclnn_cpu golden`: ATK case files in, case folders out, checked against PyTorch
float64 recomputed from the written inputs.

tests/atk_cases/ holds small case files in ATK's format (every range_values form, list
arguments, string booleans, both aclnn_name spellings, GroupNorm's derived mean/rstd). The
official case files are read from ACLNN_CPU_ATK_DIR when it is set."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from atk_references import REFERENCES, load_case, verify_case

import aclnn_cpu
from aclnn_cpu import atk, golden
from aclnn_cpu.__main__ import main as cli

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "atk_cases"
OPS = {op["name"]: op for op in aclnn_cpu.OPS}
REQUIRE_SEEDS = os.environ.get("ACLNN_CPU_REQUIRE_SEEDS", "") not in ("", "0")


def run_cli(*args):
    result = subprocess.run([sys.executable, "-m", "aclnn_cpu", *map(str, args)], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout, result.stderr


def case_folders(out):
    return sorted(p.parent for p in Path(out).glob("*/*/case.json"))


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("golden")
    assert cli(["golden", str(CASES), "-o", str(out), "--seed", "11"]) == 0
    return out


def test_every_case_written(written):
    expected = sum(len(json.loads(f.read_text())) for f in CASES.glob("*.json"))
    folders = case_folders(written)
    assert len(folders) == expected
    assert not list(Path(written).glob("*/.*partial*"))


def test_outputs_match_torch_float64(written, torch):
    for folder in case_folders(written):
        manifest, _ = load_case(folder)
        verify_case(torch, folder, OPS[manifest["aclnn_name"]])


def test_manifest(written):
    manifest, load = load_case(Path(written) / "aclnnPreluBackward" / "1")
    assert manifest["aclnn_name"] == "aclnnPreluBackward" and manifest["id"] == 1
    assert [e["name"] for e in manifest["inputs"]] == ["gradOutput", "self", "weight"]  # x, a in the file
    assert [e["name"] for e in manifest["outputs"]] == ["gradInput", "gradWeight"]
    assert manifest["seed"] == 11 and manifest["version"] == aclnn_cpu.__version__
    assert manifest["case_dtype"] == "bfloat16" and manifest["golden_dtype"] == "float32"
    assert all(e["dtype"] == "float32" for e in manifest["outputs"])
    assert all(e["dtype"] == "bfloat16" for e in manifest["same_precision"])
    assert manifest["inputs"][0] == {"name": "gradOutput", "dtype": "bfloat16", "shape": [2, 3, 7],
                                     "file": "input_gradOutput.bin"}
    normal = manifest["generated"]["gradOutput"]
    assert normal["kind"] == "normal" and -100 <= normal["mean"] <= 100 and 1 <= normal["std"] <= 25
    # raw little-endian C-order bytes, no header
    x = load(manifest["inputs"][1], mmap=False)
    assert os.path.getsize(Path(written) / "aclnnPreluBackward" / "1" / "input_self.bin") == x.size * 2
    assert manifest["outputs"][0]["file"] != manifest["same_precision"][0]["file"]
    # Softmax: `Output` maps onto `output`
    manifest, _ = load_case(Path(written) / "aclnnSoftmaxBackward" / "0")
    assert [e["name"] for e in manifest["inputs"]] == ["gradOutput", "output"]
    assert manifest["attrs"] == {"dim": 1} and manifest["standard"] == "single"
    # an fp32 case of an op without float64 inputs: the golden is the float32 result itself
    assert manifest["golden_dtype"] == "float32" and manifest["golden_is_same_precision"]
    assert manifest["outputs"] == manifest["same_precision"]


def test_golden_dtype_follows_the_registry():
    """The next wider dtype every tensor input of the op accepts, for the product in use."""
    def op(*dtypes):
        return {"params": [{"kind": "input", "dtypes": {aclnn_cpu.get_product(): list(dtypes)}},
                           {"kind": "output", "dtypes": {aclnn_cpu.get_product(): ["float64"]}}]}

    assert golden.golden_dtype(op("float16", "float32"), "float16") == "float32"
    assert golden.golden_dtype(op("bfloat16", "float32"), "bfloat16") == "float32"
    assert golden.golden_dtype(op("float32", "float64"), "float32") == "float64"
    assert golden.golden_dtype(op("float32"), "float32") == "float32"
    assert golden.golden_dtype(op("float64"), "float64") == "float64"


def test_range_values_forms(written):
    def inputs(op, case):
        manifest, load = load_case(Path(written) / op / str(case))
        return manifest, {e["name"]: load(e, mmap=False).astype(np.float64) for e in manifest["inputs"]}

    _, x = inputs("aclnnPreluBackward", 0)  # [-10, 10]
    assert x["self"].min() >= -10 and x["self"].max() <= 10 and np.unique(x["self"]).size > 50
    manifest, x = inputs("aclnnPreluBackward", 3)  # ["nan"]
    assert np.isnan(x["gradOutput"]).all()
    assert manifest["nonfinite_outputs"] == {"gradInput": 6, "gradWeight": 1}
    manifest, x = inputs("aclnnPreluBackward", 4)  # ["null"]: empty, first dim 0
    assert x["self"].shape == (0, 3) and manifest["outputs"][0]["shape"] == [0, 3]
    _, x = inputs("aclnnPreluBackward", 5)  # ["-inf"]
    assert (x["self"] == -np.inf).all()
    _, x = inputs("aclnnSoftmaxBackward", 1)  # bare 9: a constant fill
    assert (x["gradOutput"] == 9).all()
    _, x = inputs("aclnnSoftmaxBackward", 3)  # bare "inf" and -8
    assert (x["gradOutput"] == np.inf).all() and (x["output"] == -8).all()
    manifest, x = inputs("aclnnSoftmaxBackward", 4)  # ["-inf", "inf"]: float16's finite range
    assert np.isfinite(x["gradOutput"]).all() and np.abs(x["gradOutput"]).max() > 1000
    assert manifest["generated"]["gradOutput"]["high"] == 65504
    manifest, _ = inputs("aclnnGridSampler2DBackward", 1)  # "false" string, attr_tuple
    assert manifest["attrs"] == {"interpolationMode": 1, "paddingMode": 1, "alignCorners": False,
                                 "outputMask": [True, True]}
    manifest, _ = inputs("aclnnGridSampler2DBackward", 2)  # outputMask [true, false]: no gridGrad
    assert [e["name"] for e in manifest["outputs"]] == ["inputGrad"]
    manifest, _ = inputs("aclnnGridSampler2DBackward", 3)  # JSON true; masked-off inputGrad
    assert manifest["attrs"]["alignCorners"] is True
    assert [e["name"] for e in manifest["outputs"]] == ["gridGrad"]


def test_group_norm_mean_rstd_derived(written):
    """The official executor recomputes mean and rstd from the input (eps 1e-5); the case file's
    placeholder shapes ([7, 3], [1, 1, 2, 3, 4, 5, 6, 7]) do not matter."""
    for case in (0, 1):
        manifest, load = load_case(Path(written) / "aclnnGroupNormBackward" / str(case))
        x = {e["name"]: load(e, mmap=False) for e in manifest["inputs"]}
        n, group = manifest["attrs"]["N"], manifest["attrs"]["group"]
        grouped = x["input"].astype(np.float64).reshape(n, group, -1)
        mean = grouped.mean(axis=2)
        rstd = 1 / np.sqrt(((grouped - mean[..., None]) ** 2).mean(axis=2) + 1e-5)
        assert x["mean"].shape == (n, group) and x["mean"].dtype == np.float32
        assert np.array_equal(x["mean"], mean.astype(np.float32))
        assert np.array_equal(x["rstd"], rstd.astype(np.float32))
        assert manifest["derived"]["mean"]["from"] == "input" and manifest["derived"]["rstd"]["eps"] == 1e-5
        assert manifest["standard"] == "double"
    manifest, _ = load_case(Path(written) / "aclnnGroupNormBackward" / "1")  # outputMask [true, false, true]
    assert [e["name"] for e in manifest["outputs"]] == ["gradInput", "gradBetaOut"]


def test_left_out_arguments(written):
    """`required: false` with range_values null: an optional tensor is absent, an attribute takes
    the registry's default."""
    manifest, _ = load_case(Path(written) / "aclnnGroupNormBackward" / "3")
    assert manifest["absent"] == ["gamma"] and "gamma" not in [e["name"] for e in manifest["inputs"]]
    manifest, _ = load_case(Path(written) / "aclnnGridSampler2DBackward" / "4")
    assert manifest["attrs"]["alignCorners"] is False and manifest["attrs"]["outputMask"] == [True, True]


def test_deterministic_and_sharded(written, tmp_path):
    """The same seed gives the same bytes; shards 0/3, 1/3, 2/3 together are the whole run."""
    for k in range(3):
        assert cli(["golden", str(CASES), "-o", str(tmp_path), "--seed", "11", "--shard", f"{k}/3"]) == 0
    mine, theirs = case_folders(tmp_path), case_folders(written)
    assert [p.relative_to(tmp_path) for p in mine] == [p.relative_to(written) for p in theirs]
    for a, b in zip(mine, theirs):
        for f in sorted(b.iterdir()):
            if f.suffix == ".bin":
                assert (a / f.name).read_bytes() == f.read_bytes(), f
    other = tmp_path / "other"
    assert cli(["golden", str(CASES / "atk_aclnnPreluBackward.json"), "-o", str(other), "--seed", "12",
                "--ids", "0-1"]) == 0
    assert sorted(p.name for p in (other / "aclnnPreluBackward").iterdir()) == ["0", "1"]
    assert ((other / "aclnnPreluBackward" / "0" / "input_self.bin").read_bytes() !=
            (Path(written) / "aclnnPreluBackward" / "0" / "input_self.bin").read_bytes())


def test_case_data_independent_of_selection(written, tmp_path):
    assert cli(["golden", str(CASES / "atk_aclnnGridSampler2DBackward.json"), "-o", str(tmp_path),
                "--seed", "11", "--ids", "2"]) == 0
    one = tmp_path / "aclnnGridSampler2DBackward" / "2"
    for f in one.glob("*.bin"):
        assert f.read_bytes() == (Path(written) / "aclnnGridSampler2DBackward" / "2" / f.name).read_bytes()


def write_cases(path, cases):
    path.write_text(json.dumps(cases))
    return path


def good_case(case_id=0, name="aclnnSoftmaxBackward"):
    tensor = {"type": "tensor", "required": True, "dtype": "fp32", "shape": [2, 3], "range_values": [-1, 1]}
    return {"id": case_id, "aclnn_name": name, "standard": {"acc": "single_bm"},
            "inputs": [dict(tensor, name="g"), dict(tensor, name="y"),
                       {"name": "dim", "type": "attr", "dtype": "int", "shape": None, "range_values": 1}]}


def test_bad_cases_skipped_with_reason(tmp_path):
    cases = [good_case(0), good_case(1, "aclnnNoSuchOp"), good_case(2), {"id": 3, "inputs": []},
             dict(good_case(4), inputs=good_case()["inputs"][:2] + [
                 {"name": "dim", "type": "tensor", "dtype": "fp32", "shape": [1], "range_values": [0, 1]}]),
             dict(good_case(5), inputs=[dict(good_case()["inputs"][0], range_values={"name": "weird"})]),
             dict(good_case(6), inputs=good_case()["inputs"][:2] + [dict(good_case()["inputs"][2], range_values=5)])]
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("golden", write_cases(tmp_path / "c.json", cases), "-o", out)
    assert code == 2 and "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 5, stderr
    assert "case 1: skipped: aclnnNoSuchOp is not in the registry" in lines[0]
    assert "case 3: skipped: case 3: no 'aclnn_name'" in lines[1]
    assert "case 4: skipped: argument 2 (dim)" in lines[2] and "gives tensor" in lines[2]
    assert "case 5: skipped" in lines[3] and "unknown distribution 'weird'" in lines[3]
    assert "case 6: skipped: aclnnSoftmaxBackward rejected" in lines[4] or "161002" in lines[4]
    assert sorted(p.name for p in (out / "aclnnSoftmaxBackward").iterdir()) == ["0", "2"]
    assert "2 case(s) written" in stdout and "5 skipped" in stdout


@pytest.mark.parametrize("content, message", [
    ("[{\"id\": 0,", "not valid JSON"),
    ("{\"cases\": 3}", "case id None"),
    ("7", "a case file holds a JSON array"),
])
def test_malformed_file(tmp_path, content, message):
    (tmp_path / "bad.json").write_text(content)
    out = tmp_path / "out"
    code, _, stderr = run_cli("golden", tmp_path / "bad.json", "-o", out)
    assert code == 2 and message in stderr and "Traceback" not in stderr
    assert not out.exists() or not any(out.rglob("*.bin"))


@pytest.mark.parametrize("args, message", [
    (["--ids", "3-1"], "--ids: '3-1'"), (["--shard", "3/3"], "--shard: '3/3'"),
    (["--max-bytes", "lots"], "--max-bytes"), (["--ids", "x"], "--ids: 'x'"),
    (["--ids", "900-901"], "no case has an id in --ids"),
])
def test_bad_options(tmp_path, args, message):
    code, _, stderr = run_cli("golden", CASES, "-o", tmp_path / "out", *args)
    assert code == 2 and message in stderr and len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_missing_file_is_one_line(tmp_path):
    code, _, stderr = run_cli("golden", tmp_path / "nothing.json", "-o", tmp_path / "out")
    assert code == 2 and "cannot read" in stderr and len(stderr.strip().splitlines()) == 1


def test_memory_budget(tmp_path, capsys):
    code = cli(["golden", str(CASES / "atk_aclnnPreluBackward.json"), "-o", str(tmp_path), "--max-bytes", "600"])
    err = capsys.readouterr().err
    assert code == 2 and "over the budget of" in err
    written = {p.name for p in (tmp_path / "aclnnPreluBackward").iterdir()}
    assert written and written != {"0", "1", "3", "4", "5", "6"}  # the small cases still ran
    for line in err.strip().splitlines():
        case_id = line.split(" case ")[1].split(":")[0]
        assert case_id not in written


def test_memory_budget_counts_outputs(tmp_path, capsys):
    """GridSampler2D's output is N x C x Ho x Wo, here 32 times its inputs' bytes: the budget
    counts it (as the registry's allocation rule shapes it), not only the inputs."""
    tensor = {"type": "tensor", "required": True, "dtype": "fp32", "range_values": [-1, 1]}
    case = {"id": 0, "aclnn_name": "GridSampler2D", "standard": {"acc": "double_bm"},
            "inputs": [dict(tensor, name="input", shape=[1, 64, 2, 2]), dict(tensor, name="grid", shape=[1, 256, 256, 2])]}
    plan = golden.plan_case(atk.parse_case(case, "cases.json"), golden.registry_ops())
    assert golden.output_specs(plan) == [((1, 64, 256, 256), np.dtype(np.float32))]
    # Each array at the case's float32 and at the golden's float64 (the op takes DOUBLE).
    assert golden.golden_dtype(plan.op, "float32") == "float64"
    elements = 64 * 2 * 2 + 256 * 256 * 2 + 64 * 256 * 256
    assert golden.estimate_bytes(plan) == (4 + 8) * elements
    path = write_cases(tmp_path / "cases.json", [case])
    assert cli(["golden", str(path), "-o", str(tmp_path / "small"), "--max-bytes", str(16 << 20)]) == 2
    assert "over the budget of" in capsys.readouterr().err
    assert not (tmp_path / "small" / "aclnnGridSampler2D" / "0").exists()
    assert cli(["golden", str(path), "-o", str(tmp_path / "big"), "--max-bytes", str(64 << 20)]) == 0
    assert (tmp_path / "big" / "aclnnGridSampler2D" / "0" / "case.json").exists()


def test_nothing_partial_after_a_failure(tmp_path, monkeypatch):
    """A case that fails while its folder is being written leaves neither the folder nor its
    temporary; a rerun replaces an older folder of the same case whole."""
    real = golden._write_bin

    def failing(folder, file, array):
        if file.startswith("golden_"):
            raise OSError(28, "No space left on device")
        return real(folder, file, array)

    monkeypatch.setattr(golden, "_write_bin", failing)
    report = golden.generate([str(CASES / "atk_aclnnPreluBackward.json")], str(tmp_path), ids={0})
    assert report.skipped[0].reason.startswith("OSError") and not report.written
    assert list((tmp_path / "aclnnPreluBackward").iterdir()) == []
    monkeypatch.setattr(golden, "_write_bin", real)
    stale = tmp_path / "aclnnPreluBackward" / "0"
    stale.mkdir()
    (stale / "old.bin").write_bytes(b"x")
    report = golden.generate([str(CASES / "atk_aclnnPreluBackward.json")], str(tmp_path), ids={0})
    assert report.written and not (stale / "old.bin").exists() and (stale / "case.json").exists()


def test_progress_bar(tmp_path):
    code, _, stderr = run_cli("golden", CASES / "atk_aclnnPreluBackward.json", "-o", tmp_path, "--progress")
    assert code == 0 and "6/6" in stderr and "[" in stderr
    code, _, stderr = run_cli("golden", CASES / "atk_aclnnPreluBackward.json", "-o", tmp_path)
    assert code == 0 and stderr == ""  # not a terminal: no bar


def test_compare_case_folders(written, capsys):
    """The golden against itself passes under both standards; the same-precision result of a
    16-bit case, as a stand-in device result, is judged by its manifest's standard."""
    folder = Path(written) / "aclnnGridSampler2DBackward" / "1"
    for standard in ("single", "double"):
        assert cli(["compare", str(folder), str(folder), "--standard", standard, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["passed"] and set(report["outputs"]) == {"inputGrad", "gridGrad"}
        assert all(o["mere"] == 0 and o["dtype"] == "float16" for o in report["outputs"].values())


def test_atk_reader_rejects():
    with pytest.raises(atk.CaseError, match="is not a finite interval"):
        atk.parse_distribution([5, -5], np.dtype(np.float32), "x")
    with pytest.raises(atk.CaseError, match="not a boolean"):
        atk.parse_bool("yes", "x")
    assert atk.standard_of({"single_bm": {"type": "high_precision"}}) == "single"
    assert atk.standard_of("double_benchmark") == "double" and atk.standard_of("default") == "single"


# ---- the official case files (ACLNN_CPU_ATK_DIR) ---------------------------------------------

ATK_FILES = ["atk_aclnnPreluBackward.json", "atk_aclnnSoftmaxBackward.json", "atk_aclnnGroupNormBackward.json",
             "atk_aclnnGridSampler2DBackward.json", "atk_aclnnPrelu.json", "atk_aclnnSoftmax.json",
             "atk_aclnnGroupNorm.json", "atk_aclnnGridSampler2D.json"]


def smallest_cases(path, op, per_dtype=1):
    """The ids of the smallest cases of each tensor dtype of a case file that the op accepts."""
    product = aclnn_cpu.get_product()
    accepted = set.intersection(*(set(p["dtypes"][product]) for p in op["params"] if p["kind"] == "input"))
    chosen = {}
    for raw in json.loads(Path(path).read_text()):
        entries = [e for e in raw["inputs"] if isinstance(e, dict) and e.get("type") == "tensor"]
        if raw["aclnn_name"].endswith("GroupNormBackward"):
            entries = [e for e in entries if e["name"] not in ("mean", "rstd")]  # placeholders
        size = sum(int(np.prod(e["shape"])) for e in entries)
        if atk.dtype_name(atk.numpy_dtype(entries[0]["dtype"])) not in accepted:
            continue
        chosen.setdefault(entries[0]["dtype"], []).append((size, raw["id"]))
    return sorted(i for sizes in chosen.values() for _, i in sorted(sizes)[:per_dtype])


@pytest.fixture(scope="module")
def atk_dir():
    folder = os.environ.get("ACLNN_CPU_ATK_DIR")
    if not folder or not os.path.isdir(folder):
        why = "ACLNN_CPU_ATK_DIR does not name the folder of CANN's official ATK case files"
        if REQUIRE_SEEDS:
            pytest.fail(f"ACLNN_CPU_REQUIRE_SEEDS=1 but {why}")
        pytest.skip(why)
    return Path(folder)


@pytest.mark.parametrize("name", ATK_FILES)
def test_official_case_files(atk_dir, name, tmp_path, torch):
    path = atk_dir / name
    if not path.exists():
        pytest.fail(f"{path} is missing")
    op = atk.aclnn_name(json.loads(path.read_text())[0]["aclnn_name"])
    if op not in OPS:
        pytest.skip(f"{op} is not in this build's registry")
    ids = smallest_cases(path, OPS[op])
    code = cli(["golden", str(path), "-o", str(tmp_path), "--ids", ",".join(map(str, ids))])
    folders = case_folders(tmp_path)
    assert code == 0 and len(folders) == len(ids)
    for folder in folders:
        verify_case(torch, folder, OPS[op])


def test_references_cover_registry_ops():
    assert set(OPS) <= set(REFERENCES)


def test_verification_catches_a_wrong_golden(written, torch, tmp_path):
    """The float64 check is not vacuous: one golden element off by 1e-3 of the output's largest
    magnitude fails it (the bound is 512 float32 ulps of it, about 3e-5), and so does a nan where
    the reference is finite."""
    import shutil

    for case, name, index in (("aclnnSoftmaxBackward/2", "out", 17), ("aclnnGroupNormBackward/0", "gradGammaOut", 1)):
        folder = tmp_path / case.replace("/", "_")
        shutil.copytree(Path(written) / case, folder)
        manifest, _ = load_case(folder)
        entry = next(e for e in manifest["outputs"] if e["name"] == name)
        path = folder / entry["file"]
        values = np.fromfile(path, dtype=np.float32)
        for wrong in (values[index] + 1e-3 * np.abs(values).max(), np.nan):
            changed = values.copy()
            changed[index] = wrong
            changed.tofile(path)
            with pytest.raises(AssertionError, match=name):
                verify_case(torch, folder, OPS[manifest["aclnn_name"]])


def test_docs_worked_example(tmp_path, monkeypatch, capsys):
    """docs/golden.md's worked example, run as written from a folder where `gold` was made."""
    import re

    text = (ROOT / "docs" / "golden.md").read_text()
    command = re.search(r"python -m aclnn_cpu golden (\S+) -o gold --seed (\d+)", text)
    monkeypatch.chdir(tmp_path)
    assert cli(["golden", str(ROOT / command.group(1)), "-o", "gold", "--seed", command.group(2)]) == 0
    assert cli(["compare", "gold/aclnnGridSampler2DBackward/1", "gold/aclnnGridSampler2DBackward/1"]) == 0
    assert capsys.readouterr().out.strip().endswith("overall: PASS")
    scope: dict = {}
    exec(re.search(r"```python\n(.*?)```", text, re.S).group(1), scope)
    assert scope["single"].passed and scope["double"].passed
    assert scope["double"].ratios["mere"] == 1 and 0 < scope["single"].mere < 2.0 ** -10


def test_float32_range_overflow(written, torch):
    """GroupNorm on inputs spanning float32's range (["-inf", "inf"]): sum(gradOut * (input -
    mean)) leaves float32, so the float32 golden is nan where float64 is finite. The manifest
    counts it, and the check accepts it only because PyTorch's float32 op is nan there too."""
    folder = Path(written) / "aclnnGroupNormBackward" / "4"
    manifest, _ = load_case(folder)
    assert manifest["nonfinite_outputs"].get("gradInput", 0) > 0
    _, overflow = verify_case(torch, folder, OPS["aclnnGroupNormBackward"])
    assert overflow["gradInput"] == manifest["nonfinite_outputs"]["gradInput"]


def test_compare_device_folder(written, tmp_path, capsys):
    """A device's case folder (its manifest lists its outputs at the case's dtype) against the
    golden folder: here the same-precision result stands in for the device's. Its rounding to
    bfloat16 passes the single benchmark, and as its own third party every ratio is 1."""
    import shutil

    from aclnn_cpu import precision

    golden_folder = Path(written) / "aclnnSoftmaxBackward" / "2"
    device = tmp_path / "device"
    shutil.copytree(golden_folder, device)
    manifest = json.loads((device / "case.json").read_text())
    manifest["outputs"] = manifest["same_precision"]
    (device / "case.json").write_text(json.dumps(manifest))
    for standard in ("single", "double"):
        assert cli(["compare", str(device), str(golden_folder), "--standard", standard, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)["outputs"]
        assert max(o["mere"] for o in report.values()) > 0  # the rounding shows
        for entry, golden_entry in zip(manifest["same_precision"], load_case(golden_folder)[0]["outputs"]):
            _, load = load_case(device)
            expected = precision.compare(load(entry), load(golden_entry), dtype="bfloat16", standard="single")
            got = report[entry["name"]]
            assert got["dtype"] == "bfloat16" and got["mere"] == expected.mere and got["mare"] == expected.mare
            if standard == "double" and got["mere"] > 0:
                assert got["ratios"]["mere"] == 1 and got["ratios"]["mare"] == 1


def test_compare_double_when_golden_is_same_precision(written, tmp_path, capsys):
    """A float32 case of an op without float64: the third party is the golden itself, so the
    double benchmark passes an identical result and fails any other, and says why."""
    import shutil

    folder = Path(written) / "aclnnPreluBackward" / "0"
    device = tmp_path / "device"
    shutil.copytree(folder, device)
    values = np.fromfile(device / "golden_gradInput.bin", np.float32)
    assert cli(["compare", str(device), str(folder), "--standard", "double"]) == 0
    capsys.readouterr()
    values[3] = np.nextafter(values[3], np.float32(np.inf))
    values.tofile(device / "golden_gradInput.bin")
    assert cli(["compare", str(device), str(folder), "--standard", "double"]) == 1
    out = capsys.readouterr().out
    assert "gradInput" in out and "the third party equals the golden, so any difference fails: FAIL" in out


def test_an_op_added_to_the_registry_works_unchanged(tmp_path, monkeypatch):
    """Nothing in the generator names an op: an entry added to the registry (here a stand-in
    aclnnPrelu with its C parameters self, weight, out and a NumPy body) runs a case file that
    calls its arguments `x` and `a`, written as the official aclnnPrelu file is."""
    product = aclnn_cpu.get_product()

    def param(name, kind):
        return {"name": name, "py_name": name, "kind": kind, "optional": False, "has_default": False,
                "default": None, "mask": None, "dtypes": {product: ["float32", "float16", "bfloat16"]}}

    out = dict(param("out", "output"), alloc={"shape": "shape_of(self)", "dtype": "dtype_of(self)", "layout": "self"})
    stand_in = {"name": "aclnnPrelu", "python": "prelu_stand_in", "python_kwargs": [],
                "params": [param("self", "input"), param("weight", "input"), out]}

    def prelu(self, weight):  # fp32 math, one rounding to the input's dtype
        x = self.astype(np.float32)
        w = weight.astype(np.float32).reshape((-1,) + (1,) * max(x.ndim - 2, 0)) if x.ndim >= 2 else weight.astype(np.float32)
        return np.where(x > 0, x, w * x).astype(self.dtype)

    monkeypatch.setattr(golden, "registry_ops", lambda: {**OPS, "aclnnPrelu": stand_in})
    monkeypatch.setattr(aclnn_cpu, "prelu_stand_in", prelu, raising=False)
    nd = {"name": "nd", "mean": [-100, 100], "std": [1, 25]}
    cases = [{"id": i, "name": "torch.nn.functional.prelu", "aclnn_name": "aclnnPrelu", "api_type": "function_perlu",
              "standard": {"acc": "single_bm", "perf": "not_key"},
              "inputs": [{"name": "x", "type": "tensor", "required": True, "dtype": dtype, "shape": shape,
                          "range_values": nd, "backward": True, "align_32B": None},
                         {"name": "a", "type": "tensor", "required": True, "dtype": dtype, "shape": [wshape],
                          "range_values": [-1, 1], "backward": True, "align_32B": None}]}
             for i, (dtype, shape, wshape) in enumerate([("bf16", [], 1), ("fp16", [2, 3, 4], 3), ("fp32", [5, 2], 1)])]
    report = golden.generate([str(write_cases(tmp_path / "atk_aclnnPrelu.json", cases))], str(tmp_path / "out"))
    assert not report.skipped and len(report.written) == 3
    for folder, (dtype, wide) in zip(sorted(map(Path, report.written)),
                                     [("bfloat16", "float32"), ("float16", "float32"), ("float32", "float32")]):
        manifest, load = load_case(folder)
        assert [e["name"] for e in manifest["inputs"]] == ["self", "weight"]
        assert [e["name"] for e in manifest["outputs"]] == ["out"] and manifest["golden_dtype"] == wide
        x, w = (load(e, mmap=False).astype(np.float64) for e in manifest["inputs"])
        w = w.reshape((-1,) + (1,) * max(x.ndim - 2, 0)) if x.ndim >= 2 else w
        expected = np.where(x > 0, x, w * x)
        got = load(manifest["outputs"][0], mmap=False).astype(np.float64)
        assert np.allclose(got, expected, rtol=2.0 ** -23, atol=0)
        assert manifest["same_precision"][0]["dtype"] == dtype
