"""Golden campaign: every case of ATK case files through the golden generator, each written
case checked against PyTorch float64 recomputed from its written inputs.

    python benchmarks/golden_campaign.py [FILES or folders] [--seed S] [--max-bytes B]
        [--keep DIR] [--markdown OUT.md] [--json OUT.json]

Default files: every atk_*.json in $ACLNN_CPU_ATK_DIR. One case at a time (as
`python -m aclnn_cpu golden FILE --ids ID` writes it, through the same function): generate,
verify, delete the folder unless --keep names a folder to keep them in, so the disk holds one
case at most. Prints one JSON line per file (cases, written, skipped and why, seconds to
generate, seconds to verify, the worst error / bound ratio of a golden, cases whose fp32
arithmetic leaves the dtype's range) and a Markdown table (docs/golden.md, "Campaign").
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's package; the tests' float64 references


def campaign_file(path: Path, args, ops, torch, verify) -> dict:
    from aclnn_cpu import golden

    out = Path(args.keep) / path.stem if args.keep else Path(tempfile.mkdtemp(prefix="golden-campaign-"))
    budget = golden.parse_bytes(args.max_bytes) if args.max_bytes else None
    ids = [raw.get("id") for raw in json.loads(path.read_text())]
    reasons = collections.Counter()
    written, worst, failures, overflow_cases = 0, 0.0, [], 0
    generate_seconds = verify_seconds = 0.0
    for case_id in ids:
        report = golden.generate([str(path)], str(out), ids={case_id}, seed=args.seed, max_bytes=budget)
        generate_seconds += report.seconds
        for skipped in report.skipped:
            reason = skipped.reason
            reasons["over the memory budget" if "over the budget" in reason else reason[:90]] += 1
        start = time.perf_counter()
        for folder in map(Path, report.written):
            written += 1
            try:
                manifest = json.loads((folder / "case.json").read_text())
                ratios, overflow = verify(torch, folder, ops[manifest["aclnn_name"]])
                worst = max([worst, *ratios.values()])
                overflow_cases += bool(overflow)
            except AssertionError as e:
                failures.append(f"{case_id}: {str(e).splitlines()[0][:200]}")
            if not args.keep:
                shutil.rmtree(folder)
        verify_seconds += time.perf_counter() - start
        print(f"{path.name} case {case_id}: {len(report.written)} written, {len(report.skipped)} skipped, "
              f"{generate_seconds:.0f} s + {verify_seconds:.0f} s so far", file=sys.stderr, flush=True)
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return {"file": path.name, "cases": len(ids), "written": written, "skipped": dict(reasons),
            "generate_s": round(generate_seconds, 1), "verify_s": round(verify_seconds, 1),
            "worst_ratio": worst, "overflow_cases": overflow_cases, "mismatches": failures}


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
