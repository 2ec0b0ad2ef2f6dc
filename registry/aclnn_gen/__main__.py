"""python -m registry.aclnn_gen [--check] [--root DIR]"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import generate
from .loader import RegistryError
from .vocabulary import VocabularyError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m registry.aclnn_gen",
        description="Generate C headers, entry points, Cython stubs, metadata and docs from "
                    "registry/*.yaml.")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 listing generated files that are stale or missing")
    parser.add_argument("--root", default=".", help="repository root (default: current directory)")
    args = parser.parse_args(argv)
    root = Path(args.root)
    if not (root / "registry").is_dir():
        print(f"aclnn_gen: no registry/ directory under {root.resolve()}", file=sys.stderr)
        return 2
    try:
        outcome = generate(root, check=args.check)
    except (RegistryError, VocabularyError) as exc:
        print(f"aclnn_gen: error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if outcome.stale:
            print("aclnn_gen: generated files are out of date "
                  "(run `python -m registry.aclnn_gen`):", file=sys.stderr)
            for rel in outcome.written:
                state = "missing" if not (root / rel).exists() else "stale"
                print(f"  {state}: {rel}", file=sys.stderr)
            for rel in outcome.removed:
                print(f"  orphaned: {rel}", file=sys.stderr)
            return 1
        print(f"aclnn_gen: {len(outcome.unchanged)} generated files are up to date")
        return 0
    for rel in outcome.written:
        print(f"aclnn_gen: wrote {rel}")
    for rel in outcome.removed:
        print(f"aclnn_gen: removed {rel} (no registry op generates it)")
    if not outcome.written and not outcome.removed:
        print(f"aclnn_gen: {len(outcome.unchanged)} generated files are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
