"""Regenerates tests/generator/golden/ from tests/generator/fixtures/registry/*.yaml.

    python tests/generator/refresh_golden.py

Run it after an intended change to an emitter, then review `git diff tests/generator/golden`.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIXTURES = HERE / "fixtures"
GOLDEN = HERE / "golden"


def render_fixtures() -> dict:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from registry.aclnn_gen import load_registry, render

    return render(load_registry(FIXTURES))


def main() -> int:
    files = render_fixtures()
    if GOLDEN.exists():
        shutil.rmtree(GOLDEN)
    for rel, text in files.items():
        path = GOLDEN / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} golden files under {GOLDEN.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
