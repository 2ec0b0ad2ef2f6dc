"""Golden campaign: every case of ATK case files through `python -m aclnn_cpu golden`, each
written case checked against PyTorch float64 recomputed from its written inputs.

    python benchmarks/golden_campaign.py [FILES or folders] [--seed S] [--max-bytes B]
        [--keep DIR] [--markdown OUT.md]

Default files: every atk_*.json in $ACLNN_CPU_ATK_DIR. One file at a time: the golden command
runs in a subprocess (as a user runs it), then each case folder is verified and, unless --keep
names a folder to keep them in, deleted, so the disk holds one file's output at most. Prints one
line per file (cases, written, skipped and why, seconds to generate, seconds to verify, the worst
error / bound ratio of a golden) and a Markdown table (docs/golden.md, "Campaign").
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the float64 references the tests use


def campaign_file(path: Path, args, ops, torch, verify) -> dict:
    out = Path(args.keep) / path.stem if args.keep else Path(tempfile.mkdtemp(prefix="golden-campaign-"))
    command = [sys.executable, "-m", "aclnn_cpu", "golden", str(path), "-o", str(out), "--seed", str(args.seed)]
    if args.max_bytes:
        command += ["--max-bytes", args.max_bytes]
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    generate_seconds = time.perf_counter() - start
    reasons = collections.Counter()
    for line in result.stderr.splitlines():
        if ": skipped: " in line:
            reason = line.split(": skipped: ", 1)[1]
            reasons["over the memory budget" if "over the budget" in reason else reason[:90]] += 1
        elif line.strip():
            reasons[f"error: {line[:120]}"] += 1
    cases = len(json.loads(path.read_text()))
    folders = sorted(p.parent for p in out.glob("*/*/case.json"))
    worst, failures, overflow_cases, start = 0.0, [], 0, time.perf_counter()
    for folder in folders:
        try:
            manifest = json.loads((folder / "case.json").read_text())
            ratios, overflow = verify(torch, folder, ops[manifest["aclnn_name"]])
            worst = max([worst, *ratios.values()])
            overflow_cases += bool(overflow)
        except AssertionError as e:
            failures.append(f"{folder.name}: {str(e).splitlines()[0][:200]}")
        if not args.keep:
            shutil.rmtree(folder)
    verify_seconds = time.perf_counter() - start
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return {"file": path.name, "cases": cases, "written": len(folders), "skipped": dict(reasons),
            "generate_s": round(generate_seconds, 1), "verify_s": round(verify_seconds, 1),
            "worst_ratio": worst, "overflow_cases": overflow_cases, "mismatches": failures,
            "exit": result.returncode}


def markdown(rows) -> str:
    lines = ["| file | cases | written | skipped (why) | golden s | verify s | worst error/bound | "
             "past the dtype's range | mismatches |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        why = "; ".join(f"{n} {k}" for k, n in r["skipped"].items()) or "0"
        lines.append(f"| {r['file']} | {r['cases']} | {r['written']} | {why} | {r['generate_s']} | "
                     f"{r['verify_s']} | {r['worst_ratio']:.3g} | {r['overflow_cases']} | {len(r['mismatches'])} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="case files or folders (default: $ACLNN_CPU_ATK_DIR)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-bytes", help="passed to golden (default: its own, a quarter of RAM)")
    parser.add_argument("--keep", help="keep the case folders under this folder")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--json", help="also write the rows as JSON to this file")
    args = parser.parse_args(argv)
    sources = args.files or [os.environ.get("ACLNN_CPU_ATK_DIR", "")]
    files = []
    for source in map(Path, sources):
        files += sorted(source.glob("atk_*.json")) if source.is_dir() else [source]
    if not files or not all(f.is_file() for f in files):
        parser.error("name case files, or set ACLNN_CPU_ATK_DIR to their folder")
    import torch

    import aclnn_cpu
    from atk_references import verify_case

    ops = {op["name"]: op for op in aclnn_cpu.OPS}
    rows = []
    for path in files:
        row = campaign_file(path, args, ops, torch, verify_case)
        rows.append(row)
        print(json.dumps(row), flush=True)
    table = markdown(rows)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 1 if any(r["mismatches"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
