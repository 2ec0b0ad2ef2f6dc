"""Repeated runs of the benchmark suite (``bench --repeat K``), summarized by their medians.

One run of the suite pairs each of ours' samples with torch's taken beside it, which cancels a
slow spell that hits both; what it cannot cancel is the state the whole run falls in: on a shared
2-vCPU guest torch's own time for one case moves 2x between runs minutes apart while ours moves
little, and a run-wide slow spell slows the two sides by different factors. So a ratio near its
target passes or misses by run. Repeating the run, spread over time (``--pause``), and taking
the median of each row's per-run values measures the code rather than the minute; the summary
keeps every run's values and says in how many runs each target missed.
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional

# Fields that identify a row across runs, and those copied from the first run unchanged.
ROW_KEY = ("op", "case", "dtype", "threads")
FIXED_FIELDS = ("shape", "params", "batch", "bytes_moved", "elements", "working_set_bytes",
                "larger_than_cache", "copy_method")
# Per-run values whose median the summary row carries under the same name.
MEDIAN_FIELDS = ("ours_ms", "ours_npempty_ms", "ours_alloc_ms", "torch_ms", "copy_ms", "speedup",
                 "speedup_npempty", "speedup_alloc", "npempty_vs_aligned", "alloc_vs_aligned", "copy_fraction",
                 "copy_speedup", "per_element_vs_fp32", "ours_gbps", "ours_ns_per_element", "copy_gbps")
# Per-run values the summary keeps under "per_run" only: where NumPy put each run's np.empty
# outputs within a cache line, and whether the ways of calling wrote the same bits.
PER_RUN_FIELDS = ("npempty_offset", "outputs_identical")


def _key(row: Dict) -> tuple:
    return tuple(row[k] for k in ROW_KEY)


def _median(values: List[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize(runs: List[Dict], evaluate_targets) -> List[Dict]:
    """One row per case over the runs' "results": the median of each timed value, every run's
    values under "per_run", targets judged on the medians, and per target how many runs missed
    it ("missed_runs" of "runs"). A row whose call failed in any run carries that run's error."""
    order: List[tuple] = []
    by_key: Dict[tuple, List[Dict]] = {}
    for report in runs:
        for row in report["results"]:
            key = _key(row)
            if key not in by_key:
                order.append(key)
                by_key[key] = []
            by_key[key].append(row)
    summary = []
    for key in order:
        rows = by_key[key]
        out = dict(zip(ROW_KEY, key))
        out.update({f: rows[0][f] for f in FIXED_FIELDS if f in rows[0]})
        out["runs"] = len(rows)
        out["per_run"] = {f: [r.get(f) for r in rows] for f in MEDIAN_FIELDS + PER_RUN_FIELDS}
        for f in MEDIAN_FIELDS:
            out[f] = _median(out["per_run"][f])
        identical = [v for v in out["per_run"]["outputs_identical"] if v is not None]
        if identical:
            out["outputs_identical"] = all(identical)  # False when any run's ways of calling differed
        for err in sorted({k for r in rows for k in r if k.endswith("_error")}):  # ours' calls', torch's
            first = next((r[err] for r in rows if r.get(err)), None)
            if first:
                out[err] = first
        summary.append(out)
    evaluate_targets(summary)
    for out in summary:
        rows = by_key[_key(out)]
        for target in out["targets"]:
            # The same target as each run judged it.
            per_run = [t for r in rows for t in r.get("targets", []) if t["name"] == target["name"]]
            target["runs"] = len(rows)
            target["missed_runs"] = sum(1 for t in per_run if not t["pass"])
            values = [t["value"] for t in per_run]
            target["range"] = [min(values), max(values)] if values else None
    return summary


def _range_text(target: Dict, percent: bool) -> str:
    lo, hi = target["range"] or (None, None)
    if lo is None:
        return ""
    return f" [{lo:.1%}-{hi:.1%}]" if percent else f" [{lo:.2f}-{hi:.2f}x]"


def target_cells(row: Dict) -> str:
    """Each target on the medians, with the per-run range and how many runs missed it."""
    cells = []
    for t in row.get("targets", []):
        percent = t["name"] == "copy_bandwidth"
        value = f"{t['value']:.1%}" if percent else f"{t['value']:.2f}x"
        cells.append(f"{t['text'].split(' (')[0]} {value}{_range_text(t, percent)} "
                     f"{'pass' if t['pass'] else 'MISS'}, missed in {t['missed_runs']}/{t['runs']} runs")
    return "; ".join(cells)


def run_status(index: int, total: int, report: Dict) -> str:
    """A line per run: its misses, or that it met every target."""
    missed = report["missed"]
    head = f"run {index}/{total}:"
    if not missed:
        return f"{head} all targets met"
    return f"{head} {len(missed)} missed: " + "; ".join(missed)
