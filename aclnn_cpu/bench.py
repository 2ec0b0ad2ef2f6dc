"""Benchmark suite: aclnn_cpu against PyTorch CPU and against a parallel copy of the same bytes.

Run it as ``python -m aclnn_cpu bench [options]`` (or ``python benchmarks/run.py``). For every
case (op, shape, dtype, thread count) it times these in alternation, round after round:

* ours: the functional API writing into outputs from ``aclnn_cpu.empty_aligned`` (``out=``),
* ours_npempty: the same call with ``out=`` arrays from plain ``np.empty``, as users make them
  (NumPy puts big arrays 16 bytes past a cache line),
* ours_alloc: the functional call that allocates its outputs,
* torch: the aten op torch_npu maps to the same aclnn call (torch allocates its outputs),
* copy: a parallel copy that reads + writes as many bytes as the op must read + write.

Each sample runs an adaptive number of calls so that it lasts at least ``--min-time``; the report
gives medians over the rounds, the speed-ups torch/ours of each way of calling, the bandwidth
achieved as a fraction of the copy's, and pass/miss against the targets of docs/performance.md.
torch is optional.

The ops, their cases, inputs, PyTorch calls and targets come from the `benchmark` section of
each op's registry entry (registry/README.md, "Benchmark"; aclnn_cpu/bench_cases.py).
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from aclnn_cpu import bench_repeat
from aclnn_cpu.bench_cases import (BATCH1_TARGET, BY_NAME, COPY_FRACTION_TARGET, DTYPES, OP_ALIASES, OPS,
                                   SPEEDUP_TARGET, STREAMING_OPS, SUITE, TORCH_CRASH_PRONE, Case, dtype_name,
                                   generate, moved_elements, np_dtype, peer_callable,
                                   peer_outputs, smallest_call)

SHORT_DTYPE = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
DTYPE_ALIASES = {"float32": "float32", "fp32": "float32", "f32": "float32", "float": "float32",
                 "float16": "float16", "fp16": "float16", "f16": "float16", "half": "float16",
                 "bfloat16": "bfloat16", "bf16": "bfloat16"}

DEFAULT_ROUNDS = 7
DEFAULT_MIN_TIME = 0.020  # seconds per sample
OUTPUT_POLICY = ("ours: out= arrays from aclnn_cpu.empty_aligned (the first on a 64-byte line); "
                 "np.empty: the same call with out= arrays from np.empty, as users make them (in brackets: "
                 "how many bytes past a 64-byte line NumPy put the first); "
                 "alloc: the functional call, which allocates its outputs; "
                 "torch: allocates its outputs each call (its allocator aligns to 64 bytes)")
# The three ways of calling ours, timed side by side in every row, with the names of their
# speed-ups over torch and of their time over the aligned out= call's.
VARIANTS = ("ours", "ours_npempty", "ours_alloc")
SPEEDUP_FIELD = {"ours": "speedup", "ours_npempty": "speedup_npempty", "ours_alloc": "speedup_alloc"}
VS_ALIGNED_FIELD = {"ours_npempty": "npempty_vs_aligned", "ours_alloc": "alloc_vs_aligned"}
VARIANT_LABEL = {"ours": "aligned out=", "ours_npempty": "np.empty", "ours_alloc": "alloc"}
NPEMPTY_LIMIT = 1.1  # np.empty out= arrays: at most this times the aligned call's time


# ----------------------------------------------------------------------------------------------
# One case at one dtype: the op's registry benchmark section made into callables (bench_cases).

@dataclass
class Prepared:
    """One case at one dtype: callables for both sides and the bytes the op must move."""
    ours: Callable[[], object]  # out= arrays from aclnn_cpu.empty_aligned
    ours_npempty: Callable[[], object]  # out= arrays from np.empty, as users make them
    ours_alloc: Callable[[], object]  # allocates its outputs, as torch does
    torch: Optional[Callable[[], object]]
    ours_outputs: Callable[[], List[np.ndarray]]
    npempty_outputs: Callable[[], List[np.ndarray]]
    torch_outputs: Optional[Callable[[], List[object]]]
    bytes_moved: int
    elements: int
    batch: int = 1  # first dim of the first input


def _out_argument(outs: List[Optional[np.ndarray]]):
    return outs[0] if len(outs) == 1 else tuple(outs)


def line_offsets(arrays: Sequence[Optional[np.ndarray]]) -> List[Optional[int]]:
    """Where each array's data starts within its 64-byte cache line (None for an absent one)."""
    return [None if a is None else a.ctypes.data % 64 for a in arrays]


def same_bits(ours: Sequence[Optional[np.ndarray]], theirs: Sequence[Optional[np.ndarray]]) -> bool:
    """Whether two calls' outputs hold the same values bit for bit (NaN payloads included)."""
    return len(ours) == len(theirs) and all(
        (a is None and b is None) or (a is not None and b is not None and a.shape == b.shape
                                      and a.dtype == b.dtype and a.tobytes() == b.tobytes())
        for a, b in zip(ours, theirs))


def prepare(case: Case, dtype: str, ac, torch, rng) -> Prepared:
    """Inputs as the op's benchmark section makes them; ours writes into outputs allocated once,
    by aclnn_cpu.empty_aligned (the first on a 64-byte line) or by np.empty, or allocates its
    outputs; torch allocates its own (as it does)."""
    call = generate(BY_NAME[case.op], case.params, dtype, rng)
    outs, user_outs = call.allocate(ac.empty_aligned), call.allocate()
    fn, args = getattr(ac, call.op["python"]), call.python_args()
    out, user_out = _out_argument(outs), _out_argument(user_outs)
    torch_fn = peer_callable(call, torch, dtype)
    torch_out = None if torch_fn is None else (lambda: peer_outputs(torch_fn()))
    first = next(a for a in call.inputs.values() if a is not None)
    return Prepared(lambda: fn(*args, out=out), lambda: fn(*args, out=user_out), lambda: fn(*args), torch_fn,
                    lambda: list(outs), lambda: list(user_outs), torch_out,
                    moved_elements(call, outs) * np_dtype(dtype).itemsize, first.size,
                    int(first.shape[0]) if first.ndim else 1)


# ----------------------------------------------------------------------------------------------
# Timing

def _calibrate(fn: Callable[[], object], min_time: float) -> int:
    """Calls per sample so that one sample lasts at least min_time (fn already warmed up)."""
    loops = 1
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return loops
        per_call = max(elapsed / loops, 1e-8)
        loops = max(loops * 2, int(math.ceil(1.2 * min_time / per_call)))


def _sample(fn: Callable[[], object], loops: int) -> float:
    start = time.perf_counter()
    for _ in range(loops):
        fn()
    return (time.perf_counter() - start) / loops


def time_interleaved(fns: Dict[str, Callable[[], object]], rounds: int, min_time: float,
                     warmup: int = 2) -> Dict[str, Dict]:
    """Time several callables in alternation (rotating the order every round so none always
    follows the same neighbour) and return per-call medians and samples in seconds."""
    names = list(fns)
    for name in names:
        for _ in range(warmup):
            fns[name]()
    loops = {name: _calibrate(fns[name], min_time) for name in names}
    samples = {name: [] for name in names}
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                samples[name].append(_sample(fns[name], loops[name]))
    finally:
        if gc_was_enabled:
            gc.enable()
    return {name: {"median": statistics.median(samples[name]), "min": min(samples[name]),
                   "loops": loops[name], "samples": samples[name]} for name in names}


class ParallelCopy:
    """Copies nbytes/2 bytes into another buffer, so it reads + writes nbytes in total: the
    same traffic and working set as the op. torch's copy_ (OpenMP, at the thread count set)
    when torch is present, else NumPy copies split across a thread pool."""

    def __init__(self, nbytes: int, threads: int, torch=None):
        count = max(1, nbytes // 8)  # float32 elements per buffer: 2 * 4 * count == nbytes
        self.threads = threads
        self._pool = None
        if torch is not None:
            self.method = "torch.Tensor.copy_"
            self._src = torch.ones(count, dtype=torch.float32)
            self._dst = torch.empty(count, dtype=torch.float32)
            self.run = lambda: self._dst.copy_(self._src)
        else:
            self.method = "numpy.copyto (thread pool)" if threads > 1 else "numpy.copyto"
            self._src = np.ones(count, np.float32)
            self._dst = np.empty(count, np.float32)
            if threads > 1:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=threads)
                bounds = np.linspace(0, count, threads + 1).astype(np.int64)
                chunks = [(self._dst[a:b], self._src[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
                self.run = lambda: list(self._pool.map(lambda c: np.copyto(*c), chunks))
            else:
                self.run = lambda: np.copyto(self._dst, self._src)
        self.run()  # touch the pages before timing

    def close(self):
        if self._pool is not None:
            self._pool.shutdown()


# ----------------------------------------------------------------------------------------------
# Machine description

def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def last_level_cache_bytes() -> int:
    """Size of the largest CPU cache (the last level), from sysfs; 32 MiB if unknown."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    if os.path.isdir(base):
        for entry in os.listdir(base):
            text = _read(os.path.join(base, entry, "size")).strip().upper()
            if not text:
                continue
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1], 1)
            try:
                best = max(best, int(text.rstrip("KMG")) * scale)
            except ValueError:
                pass
    return best or (32 << 20)


def machine_info(ac, torch) -> Dict:
    cpu_model = platform.processor() or platform.machine()
    flags = ""
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name") and cpu_model in ("", platform.machine(), platform.processor()):
            cpu_model = line.split(":", 1)[1].strip()
        if line.startswith("flags") and not flags:
            flags = line.split(":", 1)[1]
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    mem = 0
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal"):
            mem = int(line.split()[1]) * 1024
    simd = [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq",
                        "avx512_bf16", "avx512_fp16") if f in flags.split()]
    try:
        import ml_dtypes

        ml_version = ml_dtypes.__version__
    except ImportError:
        ml_version = None
    cfg = {}
    try:
        cfg = ac.config()
    except Exception as exc:  # a partial build should not stop the report
        cfg = {"error": str(exc)}
    return {
        "cpu": cpu_model,
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable,
        "cpu_simd_flags": simd,
        "last_level_cache_bytes": last_level_cache_bytes(),
        "memory_bytes": mem,
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "ml_dtypes": ml_version,
        "torch": getattr(torch, "__version__", None),
        "aclnn_cpu": getattr(ac, "__version__", None),
        "aclnn_cpu_config": cfg,
        "isa": cfg.get("isa"),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
    }


# ----------------------------------------------------------------------------------------------
# Running the suite

def _agreement(ours: List[np.ndarray], theirs: List[object]) -> List[Optional[float]]:
    """max|ours - torch| / max|torch| per output: a check that both sides computed the same
    thing (informative only; PyTorch's own low-precision results are not a reference)."""
    out = []
    for a, b in zip(ours, theirs):
        if a is None or b is None:
            out.append(None)
            continue
        b = b.detach().float().numpy()
        a = np.asarray(a).astype(np.float32)
        if a.shape != b.shape:
            out.append(None)
            continue
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        diff = float(np.max(np.abs(a - b))) if a.size else 0.0
        out.append(diff / scale if scale > 0 else diff)
    return out


def _median_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> float:
    """Median over rounds of numerator / denominator (samples of the same round paired)."""
    return statistics.median(a / b for a, b in zip(numerators, denominators))


ISOLATION_ATTEMPTS = 3


def child_command(suite: str, case: Case, dtype: str, threads: int, rounds: int, min_time: float,
                  json_path: str) -> List[str]:
    """The command that times one job alone in a fresh process and writes its report as JSON."""
    cmd = [sys.executable, "-m", "aclnn_cpu", "bench", "--suite", suite, "--ops", case.op, "--case", case.label,
           "--dtypes", dtype, "--threads", str(threads), "--rounds", str(rounds), "--min-time",
           repr(min_time), "--no-overhead", "--no-progress", "--isolate", "never", "--json", json_path]
    return cmd


def run_case_isolated(suite: str, case: Case, dtype: str, threads: int, ac, rounds: int, min_time: float,
                      cache_bytes: int) -> Dict:
    """run_case in a child process, retried when the child dies; if every attempt dies, ours and
    the copy are timed here without torch and the row says why torch is missing."""
    failures = []
    for _ in range(ISOLATION_ATTEMPTS):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "job.json")
            cmd = child_command(suite, case, dtype, threads, rounds, min_time, path)
            try:
                proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900)
            except subprocess.TimeoutExpired:
                failures.append("timed out")
                continue
            if proc.returncode == 0 and os.path.exists(path):
                with open(path) as f:
                    rows = json.load(f)["results"]
                if len(rows) == 1:
                    row = rows[0]
                    row["isolated"] = {"attempts": len(failures) + 1, "failures": failures}
                    return row
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            failures.append(f"exit {proc.returncode}" + (f": {lines[-1]}" if lines else ""))
    row = run_case(case, dtype, threads, ac, None, rounds, min_time, cache_bytes)
    row["torch_error"] = f"torch's call crashed its process {len(failures)} times ({'; '.join(failures)})"
    row["isolated"] = {"attempts": len(failures), "failures": failures}
    return row


def run_case(case: Case, dtype: str, threads: int, ac, torch, rounds: int, min_time: float,
             cache_bytes: int) -> Dict:
    """Time one case at one dtype and thread count; returns the result row (errors included)."""
    rng = np.random.default_rng(20240611)
    row = {"op": case.op, "case": case.label, "shape": case.describe(), "params": dict(case.params),
           "dtype": dtype, "threads": threads, "batch": None, "ours_ms": None, "ours_npempty_ms": None,
           "ours_alloc_ms": None, "torch_ms": None, "copy_ms": None, "speedup": None, "speedup_npempty": None,
           "speedup_alloc": None, "npempty_vs_aligned": None, "alloc_vs_aligned": None,
           "copy_fraction": None, "copy_speedup": None}
    prepared = prepare(case, dtype, ac, torch, rng)
    row.update(batch=prepared.batch, bytes_moved=prepared.bytes_moved, elements=prepared.elements,
               working_set_bytes=prepared.bytes_moved,
               larger_than_cache=prepared.bytes_moved > cache_bytes,
               npempty_offset=line_offsets(prepared.npempty_outputs()))
    fns = {}
    results = {}
    for name in VARIANTS:
        try:
            results[name] = getattr(prepared, name)()
            fns[name] = getattr(prepared, name)
        except Exception as exc:
            row[f"{name}_error"] = f"{type(exc).__name__}: {exc}"
    if len(results) > 1:
        # The three ways of calling compute the same bits: the out= calls in their own arrays,
        # the allocating call in the arrays it returns.
        written = {"ours": prepared.ours_outputs(), "ours_npempty": prepared.npempty_outputs(),
                   "ours_alloc": peer_outputs(results.get("ours_alloc"))}
        first, *others = [written[name] for name in results]
        row["outputs_identical"] = all(same_bits(first, other) for other in others)
    if torch is None:
        row["torch_error"] = "torch not installed"
    else:
        try:
            prepared.torch()
            fns["torch"] = prepared.torch
        except Exception as exc:
            row["torch_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    if dtype != "float32" and "ours" in fns:
        # The fp32 twin of the case, timed in the same rounds: the "<= fp32 per element" target
        # compares samples taken side by side rather than two rows timed minutes apart, between
        # which this shared machine's speed drifts by more than the effect being judged.
        fns["ours_fp32"] = prepare(case, "float32", ac, None, np.random.default_rng(20240611)).ours
    copier = ParallelCopy(prepared.bytes_moved, threads, torch)
    fns["copy"] = copier.run
    row["copy_method"] = copier.method
    try:
        timing = time_interleaved(fns, rounds, min_time)
    finally:
        copier.close()
    for name, t in timing.items():
        row[f"{name}_ms"] = t["median"] * 1e3
        row[f"{name}_min_ms"] = t["min"] * 1e3
        row[f"{name}_loops"] = t["loops"]
        row[f"{name}_samples_ms"] = [s * 1e3 for s in t["samples"]]
    # Ratios are taken round by round, then the median: the samples of one round sit next to each
    # other in time, so a slow spell of this shared machine (it comes and goes within a run)
    # slows both sides of a ratio instead of one side of a median.
    samples = {name: t["samples"] for name, t in timing.items()}
    if row["ours_ms"]:
        row["ours_gbps"] = prepared.bytes_moved / (row["ours_ms"] * 1e-3) / 1e9
        row["ours_ns_per_element"] = row["ours_ms"] * 1e6 / max(prepared.elements, 1)
        row["copy_fraction"] = _median_ratio(samples["copy"], samples["ours"])
        for name, field in VS_ALIGNED_FIELD.items():
            if name in samples:
                row[field] = _median_ratio(samples[name], samples["ours"])
        if "ours_fp32" in samples:
            row["per_element_vs_fp32"] = _median_ratio(samples["ours"], samples["ours_fp32"])
    if row["torch_ms"]:
        for name, field in SPEEDUP_FIELD.items():
            if name in samples:
                row[field] = _median_ratio(samples["torch"], samples[name])
        # torch's time over the copy's: the speed-up an op running at copy bandwidth would have.
        # A speed-up target above it asks for more than moving the op's bytes at copy speed.
        row["copy_speedup"] = _median_ratio(samples["torch"], samples["copy"])
    row["copy_gbps"] = prepared.bytes_moved / (row["copy_ms"] * 1e-3) / 1e9
    if "ours" in fns and "torch" in fns:
        try:
            prepared.ours()
            row["max_rel_diff_vs_torch"] = _agreement(prepared.ours_outputs(), prepared.torch_outputs())
        except Exception as exc:
            row["max_rel_diff_vs_torch"] = f"{type(exc).__name__}: {exc}"
    return row


def _two_phase(ac, plan_name: str, run_name: str, *args) -> Callable[[], None]:
    """A call of both phases as a user writes it: the functions bound once (looking them up by
    name on every call had added about 0.2 us to ours), a workspace only when one is needed."""
    plan, run = getattr(ac, plan_name), getattr(ac, run_name)

    def call():
        ws, executor = plan(*args)
        run(np.empty(ws, np.uint8) if ws else None, ws, executor)
    return call


def _overhead_callables(op: str, ac, torch) -> Dict[str, Callable[[], object]]:
    """The calls timed per op, on the registry entry's example (or its smallest benchmark case).
    Both sides call functions and pass arrays bound beforehand, as a loop in user code would: a
    dict lookup or a module attribute per argument costs about as much as the differences
    measured here."""
    call = smallest_call(BY_NAME[op])
    outs = call.allocate()
    fn, args, out = getattr(ac, call.op["python"]), call.python_args(), _out_argument(outs)
    fns: Dict[str, Callable[[], object]] = {"functional out=": lambda: fn(*args, out=out),
                                             "functional alloc": lambda: fn(*args)}
    fns["two-phase"] = _two_phase(ac, call.op["name"] + "GetWorkspaceSize", call.op["name"],
                                  *call.c_args(outs))
    peer = peer_callable(call, torch, _overhead_dtype(call))
    if peer is not None:
        fns["torch"] = peer
    return fns


def _overhead_dtype(call) -> str:
    return dtype_name(next(a for a in call.inputs.values() if a is not None).dtype)


def run_overhead(op: str, ac, torch, rounds: int, min_time: float) -> Dict:
    """Per-call time (microseconds) on the registry example's tensors: the fixed cost of a call."""
    call = smallest_call(BY_NAME[op])
    first = next(a for a in call.inputs.values() if a is not None)
    row = {"op": op, "elements": int(first.size), "dtype": _overhead_dtype(call), "us": {},
           "samples_us": {}, "errors": {}}
    fns = {}
    for name, fn in _overhead_callables(op, ac, torch).items():
        try:
            fn()
            fns[name] = fn
        except Exception as exc:
            row["errors"][name] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    if fns:
        timing = time_interleaved(fns, rounds, min_time)
        for name, t in timing.items():
            row["us"][name] = t["median"] * 1e6
            row["samples_us"][name] = [v * 1e6 for v in t["samples"]]
        if "torch" in timing:
            # ours / torch per round, then the median (as the speed-ups are paired).
            row["vs_torch"] = {name: _median_ratio(timing[name]["samples"], timing["torch"]["samples"])
                               for name in timing if name != "torch"}
    return row


# ----------------------------------------------------------------------------------------------
# Targets

def evaluate_targets(rows: List[Dict]) -> None:
    """Adds row["targets"]: a list of {name, goal, value, pass} for each target that applies."""
    for r in rows:
        targets = []
        if r.get("speedup") is not None:
            goal = SPEEDUP_TARGET[r["op"]]
            if r["op"] in BATCH1_TARGET and r["batch"] == 1:
                goal = BATCH1_TARGET[r["op"]]
            goal = max(goal, 1.0)
            targets.append({"name": "speedup", "goal": goal, "value": r["speedup"],
                            "pass": r["speedup"] >= goal, "text": f">={goal:g}x"})
        if r["op"] in STREAMING_OPS and r.get("larger_than_cache") and r.get("copy_fraction") is not None:
            fraction = COPY_FRACTION_TARGET[r["op"]]
            targets.append({"name": "copy_bandwidth", "goal": fraction,
                            "value": r["copy_fraction"], "pass": r["copy_fraction"] >= fraction,
                            "text": f"bw>={fraction:.0%}"})
        ratio = r.get("per_element_vs_fp32")  # over the fp32 twin, paired round by round
        if ratio is not None:
            # Same element count as the fp32 twin, so the time ratio is the per-element ratio.
            targets.append({"name": "per_element_vs_fp32", "goal": 1.0, "value": ratio,
                            "pass": ratio <= 1.0, "text": f"<=fp32 ({ratio:.2f}x)"})
        for name in ("ours_npempty", "ours_alloc"):
            # The calls users write, never slower than torch (the aligned call's own speed-up
            # target above is at least 1x).
            field, value = SPEEDUP_FIELD[name], r.get(SPEEDUP_FIELD[name])
            if value is not None:
                targets.append({"name": field, "goal": 1.0, "value": value, "pass": value >= 1.0,
                                "text": f">=1x {VARIANT_LABEL[name]} ({value:.2f}x)"})
        ratio = r.get("npempty_vs_aligned")  # np.empty out= over aligned out=, paired by round
        if ratio is not None:
            targets.append({"name": "npempty_vs_aligned", "goal": NPEMPTY_LIMIT, "value": ratio,
                            "pass": ratio <= NPEMPTY_LIMIT, "text": f"np.empty<={NPEMPTY_LIMIT:g}x aligned ({ratio:.2f}x)"})
        r["targets"] = targets


def evaluate_overhead_targets(overhead: List[Dict]) -> None:
    """Adds o["targets"]: each variant's per-call time at most torch's (median of per-round ratios)."""
    for o in overhead:
        o["targets"] = [{"name": "overhead", "variant": name, "goal": 1.0, "value": ratio, "pass": ratio <= 1.0}
                        for name, ratio in o.get("vs_torch", {}).items()]


def missed_overhead(overhead: List[Dict]) -> List[str]:
    return [f"{o['op']} per-call overhead, {t['variant']}: {t['value']:.2f}x torch's > 1"
            for o in overhead for t in o.get("targets", []) if not t["pass"]]


MISS_TEXT = {
    "copy_bandwidth": lambda t: f"{t['value']:.1%} of copy bandwidth < {t['goal']:.0%}",
    "per_element_vs_fp32": lambda t: f"{t['value']:.3f}x the fp32 time per element > 1",
    "speedup_npempty": lambda t: f"speed-up with np.empty out= arrays {t['value']:.2f}x < 1x",
    "speedup_alloc": lambda t: f"speed-up of the allocating call {t['value']:.2f}x < 1x",
    "npempty_vs_aligned": lambda t: f"np.empty out= arrays take {t['value']:.3f}x the aligned time > {t['goal']:g}x",
}


def call_errors(r: Dict) -> List[str]:
    """The failures of ours in a row: each way of calling that raised, and outputs that differ."""
    out = [f"{VARIANT_LABEL[name]} call failed: {r[name + '_error']}" for name in VARIANTS if r.get(name + "_error")]
    if r.get("outputs_identical") is False:
        out.append("the ways of calling wrote different bits")
    return out


def missed_targets(rows: List[Dict]) -> List[str]:
    out = []
    for r in rows:
        where = f"{r['op']} {r['case']} {SHORT_DTYPE[r['dtype']]} t{r['threads']} ({r['shape']})"
        out += [f"{where}: ours: {error}" for error in call_errors(r)]
        for t in r.get("targets", []):
            if not t["pass"]:
                if t["name"] == "speedup":
                    ceiling = r.get("copy_speedup")
                    bound = "" if ceiling is None else f" (a copy of the same bytes: {ceiling:.2f}x)"
                    out.append(f"{where}: speed-up {t['value']:.2f}x < {t['goal']:g}x{bound}")
                else:
                    out.append(f"{where}: {MISS_TEXT[t['name']](t)}")
                if "missed_runs" in t:  # judged on the median over repeated runs
                    out[-1] += f" (median of {t['runs']} runs; missed in {t['missed_runs']})"
    return out


# ----------------------------------------------------------------------------------------------
# Reports

def _fmt_ms(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if v < 1 else (f"{v:.2f}" if v < 100 else f"{v:.1f}")


def _npempty_cell(r: Dict) -> str:
    """np.empty's time, with where NumPy put the first output within its line (every place it
    landed in, over repeated runs)."""
    offsets = r["per_run"].get("npempty_offset", []) if "per_run" in r else [r.get("npempty_offset")]
    places = sorted({o[0] for o in offsets if o and o[0] is not None})
    return _fmt_ms(r.get("ours_npempty_ms")) + (f" ({'/'.join(f'+{p}' for p in places)})" if places else "")


def _target_cells(r: Dict) -> str:
    if "per_run" in r:  # a row of medians over repeated runs
        return "; ".join(filter(None, [bench_repeat.target_cells(r), "ours failed" if call_errors(r) else ""]))
    cells = [f"{t['text']} {'pass' if t['pass'] else 'MISS'}" for t in r.get("targets", [])]
    if call_errors(r):
        cells.append("ours failed")
    elif r.get("torch_error") and r.get("speedup") is None:
        cells.append("no torch")
    return ", ".join(cells)


def table_rows(rows: List[Dict]) -> List[List[str]]:
    out = []
    for r in rows:
        out.append([
            r["op"], r["case"], SHORT_DTYPE[r["dtype"]], str(r["threads"]), r["shape"],
            _fmt_ms(r.get("ours_ms")), _npempty_cell(r), _fmt_ms(r.get("ours_alloc_ms")), _fmt_ms(r.get("torch_ms")),
            "-" if r.get("speedup") is None else f"{r['speedup']:.2f}x",
            "-" if r.get("copy_speedup") is None else f"{r['copy_speedup']:.2f}x",
            "-" if r.get("copy_fraction") is None else f"{r['copy_fraction']:.1%}",
            "-" if r.get("ours_gbps") is None else f"{r['ours_gbps']:.1f}",
            _target_cells(r),
        ])
    return out


TABLE_HEADER = ["op", "case", "dtype", "thr", "shape", "ours ms", "np.empty ms", "alloc ms", "torch ms", "speed-up",
                "copy's speed-up", "of copy bw", "ours GB/s", "targets"]
OVERHEAD_COLUMNS = ["functional out=", "functional alloc", "two-phase", "torch"]


def _overhead_cells(o: Dict) -> List[str]:
    """Microseconds per call; ours with (ratio to torch's, paired per round) when torch ran."""
    cells = []
    for c in OVERHEAD_COLUMNS:
        if c not in o["us"]:
            cells.append("-")
            continue
        ratio = o.get("vs_torch", {}).get(c)
        cells.append(f"{o['us'][c]:.2f}" + ("" if ratio is None else f" ({ratio:.2f}x)"))
    return cells


def _text_table(header: List[str], body: List[List[str]]) -> List[str]:
    """Columns padded to their widest cell, a dashed rule under the header."""
    widths = [max([len(h)] + [len(b[i]) for b in body]) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    return lines + ["  ".join(c.ljust(w) for c, w in zip(b, widths)).rstrip() for b in body]


def format_text(rows: List[Dict], overhead: List[Dict]) -> str:
    lines = _text_table(TABLE_HEADER, table_rows(rows))
    if overhead:
        lines += ["", format_overhead(overhead)]
    return "\n".join(lines)


REPEATED_HEADER = ["op", "case", "dtype", "thr", "shape", "runs", "ours ms", "np.empty ms", "alloc ms",
                   "torch ms", "targets (median [range])"]


def format_repeated(rows: List[Dict]) -> str:
    """The rows of medians over repeated runs: each target's median, per-run range, missed runs."""
    return "\n".join(_text_table(REPEATED_HEADER, [
        [r["op"], r["case"], SHORT_DTYPE[r["dtype"]], str(r["threads"]), r["shape"], str(r["runs"]),
         _fmt_ms(r.get("ours_ms")), _npempty_cell(r), _fmt_ms(r.get("ours_alloc_ms")), _fmt_ms(r.get("torch_ms")),
         _target_cells(r)] for r in rows]))


def format_overhead(overhead: List[Dict]) -> str:
    lines = ["Per-call overhead on each op's registry example (microseconds per call, median; "
             "in brackets ours / torch, the median of per-round ratios):"]
    lines.append(f"{'op':<14}" + "".join(f"{c:>18}" for c in OVERHEAD_COLUMNS))
    for o in overhead:
        lines.append(f"{o['op']:<14}" + "".join(f"{c:>18}" for c in _overhead_cells(o)))
    return "\n".join(lines)


def _background_note(machine: Dict) -> str:
    other = machine.get("background_cpu_fraction")
    return "" if other is None else f" Other processes used {other:.1%} of the CPU capacity during the run."


def format_markdown(rows: List[Dict], overhead: List[Dict], machine: Dict, settings: Dict) -> str:
    # The date stays in the JSON: a results table in the docs describes the code as it is.
    lines = [f"Measured on {machine['cpu']} ({machine['usable_cpus']} usable CPUs, "
             f"last-level cache {machine['last_level_cache_bytes'] >> 20} MiB), ISA in use `{machine.get('isa')}`, "
             f"aclnn_cpu {machine.get('aclnn_cpu')}, torch {machine.get('torch')}, numpy {machine['numpy']}, "
             f"Python {machine['python']}. {settings['rounds']} rounds, samples >= "
             f"{settings['min_time_s'] * 1e3:g} ms, medians"
             + (f" per run, then the median over {settings['repeat']} runs" if settings.get("repeat") else "")
             + f". {settings['output_policy']}."
             + _background_note(machine), ""]
    lines.append("| " + " | ".join(TABLE_HEADER) + " |")
    lines.append("|" + "|".join("---" for _ in TABLE_HEADER) + "|")
    for b in table_rows(rows):
        lines.append("| " + " | ".join(c.replace("|", "/") for c in b) + " |")
    if overhead:
        lines += ["", "Per-call overhead on each op's registry example, microseconds per call (median; in "
                  "brackets ours / torch, the median of per-round ratios; target <= 1):", ""]
        lines.append("| op | " + " | ".join(OVERHEAD_COLUMNS) + " |")
        lines.append("|---|" + "|".join("---:" for _ in OVERHEAD_COLUMNS) + "|")
        for o in overhead:
            lines.append(f"| {o['op']} | " + " | ".join(_overhead_cells(o)) + " |")
    return "\n".join(lines) + "\n"


def write_plot(path: str, rows: List[Dict]) -> Optional[str]:
    """Bar chart of the speed-ups with each row's goal; returns an error text instead of raising
    when matplotlib is absent."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib); no plot written"
    data = [r for r in rows if r.get("speedup") is not None]
    if not data:
        return "no speed-ups to plot (torch absent or every case failed)"
    labels = [f"{r['op']} {r['case']} {SHORT_DTYPE[r['dtype']]} t{r['threads']}" for r in data]
    values = [r["speedup"] for r in data]
    goals = [next((t["goal"] for t in r["targets"] if t["name"] == "speedup"), 1.0) for r in data]
    colors = ["tab:green" if v >= g else "tab:red" for v, g in zip(values, goals)]
    fig, ax = plt.subplots(figsize=(9, 0.28 * len(data) + 1.5))
    y = np.arange(len(data))
    ax.barh(y, values, color=colors)
    ax.scatter(goals, y, marker="|", s=200, color="black", label="target", zorder=3)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(len(data) - 0.5, -0.5)  # first case on top, no empty margins
    ax.set_xscale("log")
    ax.axvline(1.0, color="gray", linewidth=0.8)
    ax.set_xlabel("speed-up over PyTorch CPU (torch time / aclnn_cpu time), log scale")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


class Progress:
    """A one-line text progress bar on stderr (a line per step when stderr is not a terminal)."""

    def __init__(self, total: int, enabled: bool = True, stream=None):
        self.total, self.done, self.enabled = max(total, 1), 0, enabled
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.perf_counter()

    def step(self, label: str) -> None:
        if not self.enabled:
            return
        width = 24
        filled = int(width * self.done / self.total)
        elapsed = time.perf_counter() - self.start
        text = (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                f"{elapsed:5.0f}s  {label}")
        if self.tty:
            self.stream.write("\r\033[K" + text[:150])
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self.done += 1

    def finish(self) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        text = f"[{'#' * 24}] {self.total}/{self.total} {elapsed:5.0f}s  done"
        self.stream.write(("\r\033[K" + text + "\n") if self.tty else text + "\n")
        self.stream.flush()


# ----------------------------------------------------------------------------------------------
# Command line

def _split(text: Optional[str], aliases: Dict[str, str], what: str) -> Optional[List[str]]:
    if not text:
        return None
    out = []
    for item in text.split(","):
        key = item.strip().lower()
        if not key:
            continue
        if key not in aliases:
            raise SystemExit(f"bench: unknown {what} {item!r}; choose from {sorted(set(aliases.values()))}")
        if aliases[key] not in out:
            out.append(aliases[key])
    return out


def select_cases(suite: str, ops: Optional[List[str]], match: Optional[str],
                 label: Optional[str] = None) -> List[Case]:
    return [c for c in SUITE if suite in c.suites and (not ops or c.op in ops)
            and (not match or match.lower() in f"{c.op} {c.label} {c.describe()}".lower())
            and (label is None or c.label == label)]


def targets_text() -> str:
    """The targets of every op, as --help states them."""
    speedups = ", ".join(f"{op} >= {goal:g}x" + (f" (>= {BATCH1_TARGET[op]:g}x at batch 1)" if op in BATCH1_TARGET else "")
                         for op, goal in SPEEDUP_TARGET.items())
    streaming = "; ".join(f"{op} >= {fraction:.0%}" for op, fraction in COPY_FRACTION_TARGET.items())
    return (f"speed-up {speedups}; of the copy bandwidth when the working set exceeds the last-level "
            f"cache: {streaming or 'none'}")


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m aclnn_cpu bench",
        description="Time aclnn_cpu against PyTorch CPU and a parallel copy of the same bytes.",
        epilog=f"Outputs: {OUTPUT_POLICY}. Targets (from each op's registry entry): {targets_text()}; "
               "fp16/bf16 time per element <= fp32's; in every row the np.empty and the allocating call "
               f"each >= 1x torch, and the np.empty call <= {NPEMPTY_LIMIT:g}x the aligned one's time.")
    parser.add_argument("--quick", action="store_true", help="a subset (same as --suite quick)")
    parser.add_argument("--suite", choices=("full", "quick", "smoke", "training"), default=None,
                        help="full (default, ~6.5 min on 2 shared vCPUs), quick (~1.5 min), "
                             "smoke (tiny shapes, for tests), or training (a CPU training step "
                             "in PyTorch with and without aclnn_cpu.torch: bench_training.py)")
    parser.add_argument("--ops", help=f"comma list: {', '.join(OPS)}")
    parser.add_argument("--dtypes", help="comma list: float32, float16, bfloat16 (or fp32, fp16, bf16)")
    parser.add_argument("--threads", default="2", help="comma list of thread counts (default 2)")
    parser.add_argument("--match", help="only cases whose op/label/shape contains this text")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # exactly this label (isolated child jobs)
    parser.add_argument("--isolate", choices=("auto", "never"), default="auto",
                        help="auto (default): jobs whose torch call is known to crash now and then "
                             "(the registry's peer.crash_prone) run in a child process; never: "
                             "everything in this process")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                        help=f"timed rounds after the warm-up (default {DEFAULT_ROUNDS})")
    parser.add_argument("--min-time", type=float, default=DEFAULT_MIN_TIME,
                        help=f"seconds each sample lasts at least (default {DEFAULT_MIN_TIME})")
    parser.add_argument("--no-torch", action="store_true", help="do not import torch (time ours and the copy)")
    parser.add_argument("--no-overhead", action="store_true", help="skip the per-call overhead table")
    parser.add_argument("--json", metavar="FILE", help="write every result and the machine as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="write the tables as Markdown")
    parser.add_argument("--plot", metavar="FILE.png", help="bar chart of the speed-ups (needs matplotlib)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the selection this many times and judge each target on the median "
                             "over the runs, with how many runs missed it (default 1)")
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds to wait between repeated runs (default 0)")
    parser.add_argument("--list", action="store_true", help="list the selected cases and exit")
    args = parser.parse_args(list(argv) if argv is not None else None)
    args.suite = args.suite or ("quick" if args.quick else "full")
    args.ops = _split(args.ops, OP_ALIASES, "op") or list(OPS)
    args.dtypes = _split(args.dtypes, DTYPE_ALIASES, "dtype") or list(DTYPES)
    try:
        args.threads = [int(t) for t in str(args.threads).split(",") if t.strip()]
    except ValueError:
        parser.error(f"--threads takes integers, got {args.threads!r}")
    if not args.threads or min(args.threads) < 1:
        parser.error("--threads must be >= 1")
    if args.rounds < 1 or args.min_time <= 0:
        parser.error("--rounds must be >= 1 and --min-time > 0")
    if args.repeat < 1 or args.pause < 0:
        parser.error("--repeat must be >= 1 and --pause >= 0")
    return args


class BackgroundCpu:
    """CPU time other processes used while the suite ran (machine busy time from /proc/stat
    minus this process's own and its isolated jobs'), as a fraction of the machine's capacity
    over that time. With 2 cores, another busy process stalls every OpenMP barrier: this says
    whether that happened."""

    def __init__(self):
        self.start = self._snapshot()

    @staticmethod
    def _snapshot():
        fields = _read("/proc/stat").split("\n", 1)[0].split()
        if not fields or fields[0] != "cpu":
            return None
        ticks = [int(v) for v in fields[1:]]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
        own = os.times()  # this process and its waited-for children (the isolated jobs)
        return (time.perf_counter(), sum(ticks) - idle,
                own.user + own.system + own.children_user + own.children_system)

    def fraction(self) -> Optional[float]:
        end = self._snapshot()
        if self.start is None or end is None:
            return None
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        wall = end[0] - self.start[0]
        busy = (end[1] - self.start[1]) / hz
        own = end[2] - self.start[2]
        capacity = wall * (os.cpu_count() or 1)
        return max(0.0, (busy - own) / capacity) if capacity > 0 else None


def load_average() -> Optional[List[float]]:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _import_torch(disabled: bool):
    if disabled:
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch


def run(args: argparse.Namespace, ac=None, torch=None) -> Dict:
    """Runs the selected suite and returns the report dict (what --json writes)."""
    if ac is None:
        import aclnn_cpu as ac
    cases = select_cases(args.suite, args.ops, args.match, args.case)
    load_before = load_average()
    background = BackgroundCpu()
    cache_bytes = last_level_cache_bytes()
    # fp32 first within each case, so the fp16/bf16 rows can be compared with it.
    order = [d for d in DTYPES if d in args.dtypes]
    jobs = [(c, d, t) for t in args.threads for c in cases for d in order]
    overhead_ops = [] if args.no_overhead else [op for op in OPS if op in args.ops]
    progress = Progress(len(jobs) + len(overhead_ops), enabled=not args.no_progress)
    previous_threads = ac.get_num_threads()
    previous_torch_threads = torch.get_num_threads() if torch is not None else None
    rows, overhead = [], []
    try:
        for case, dtype, threads in jobs:
            progress.step(f"{case.op} {case.label} {SHORT_DTYPE[dtype]} t{threads}")
            ac.set_num_threads(threads)
            if torch is not None:
                torch.set_num_threads(threads)
            if torch is not None and args.isolate == "auto" and (case.op, dtype) in TORCH_CRASH_PRONE:
                rows.append(run_case_isolated(args.suite, case, dtype, threads, ac, args.rounds, args.min_time,
                                              cache_bytes))
            else:
                rows.append(run_case(case, dtype, threads, ac, torch, args.rounds, args.min_time, cache_bytes))
            gc.collect()
        ac.set_num_threads(args.threads[0])
        if torch is not None:
            torch.set_num_threads(args.threads[0])
        for op in overhead_ops:
            progress.step(f"overhead {op}")
            overhead.append(run_overhead(op, ac, torch, args.rounds, args.min_time))
        progress.finish()
    finally:
        ac.set_num_threads(previous_threads)
        if torch is not None:
            torch.set_num_threads(previous_torch_threads)
    evaluate_targets(rows)
    evaluate_overhead_targets(overhead)
    machine = machine_info(ac, torch)
    # Other processes on the same cores stall OpenMP barriers: the load tells whether the
    # numbers were taken on a quiet machine.
    machine["load_average_before"] = load_before
    machine["load_average_after"] = load_average()
    machine["background_cpu_fraction"] = background.fraction()
    return {
        "schema": 1,
        "machine": machine,
        "settings": {"suite": args.suite, "ops": args.ops, "dtypes": args.dtypes, "threads": args.threads,
                     "match": args.match, "isolate": args.isolate, "rounds": args.rounds,
                     "min_time_s": args.min_time,
                     "torch": torch is not None, "output_policy": OUTPUT_POLICY,
                     "copy": "reads + writes the op's bytes: a buffer of half that size copied into another",
                     "targets": {"speedup": SPEEDUP_TARGET, "speedup_batch1": BATCH1_TARGET,
                                 "copy_fraction": COPY_FRACTION_TARGET, "streaming_ops": list(STREAMING_OPS),
                                 "low_precision_per_element": "<= float32",
                                 "speedup_npempty": 1.0, "speedup_alloc": 1.0,
                                 "npempty_vs_aligned": NPEMPTY_LIMIT}},
        "results": rows,
        "overhead": overhead,
        "missed": missed_targets(rows) + missed_overhead(overhead),
    }


def run_repeated(args: argparse.Namespace, ac=None, torch=None) -> Dict:
    """--repeat: the selection run args.repeat times, args.pause seconds apart, with the per-call
    overhead timed in the first run only. The report's "results" are the per-case medians over
    the runs (bench_repeat.summarize), its "missed" the targets missed on those medians, and
    "runs" holds every run's own report."""
    runs = []
    for index in range(args.repeat):
        if index:
            time.sleep(args.pause)
        once = argparse.Namespace(**vars(args))
        once.no_overhead = args.no_overhead or index > 0
        runs.append(run(once, ac, torch))
        print(bench_repeat.run_status(index + 1, args.repeat, runs[-1]), flush=True)
    summary = bench_repeat.summarize(runs, evaluate_targets)
    report = dict(runs[0])
    report["machine"] = dict(runs[0]["machine"])
    fractions = [r["machine"]["background_cpu_fraction"] for r in runs
                 if r["machine"].get("background_cpu_fraction") is not None]
    report["machine"]["background_cpu_fraction"] = max(fractions) if fractions else None
    report["settings"] = dict(runs[0]["settings"], repeat=args.repeat, pause_s=args.pause,
                              overhead="first run only" if not args.no_overhead else None)
    report.update(results=summary, missed=missed_targets(summary) + missed_overhead(runs[0]["overhead"]),
                  runs=runs)
    return report


def rounded(value, digits: int = 4):
    """Floats to `digits` significant digits, through dicts and lists: the timings vary by
    percents from run to run, and the full suite's JSON (every sample of every row, three ways
    of calling) then stays under 1 MB, the size of the kept baseline."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}") if math.isfinite(value) else value
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v, digits) for v in value]
    return value


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.suite == "training":
        from aclnn_cpu import bench_training
        return bench_training.main(args)
    if args.list:
        cases = select_cases(args.suite, args.ops, args.match, args.case)
        width = max([13] + [len(c.op) for c in cases])
        for c in cases:
            print(f"{c.op:<{width}} {c.label:<22} {c.describe()}")
        return 0
    torch = _import_torch(args.no_torch)
    import aclnn_cpu as ac

    print(f"aclnn_cpu {ac.__version__} (ISA {ac.config().get('isa')}) vs "
          + (f"torch {torch.__version__}" if torch is not None else
             "torch absent: timing ours and the copy only")
          + f"; threads {','.join(map(str, args.threads))}; suite {args.suite}; {OUTPUT_POLICY}.")
    load = load_average()
    if load and load[0] > 0.5:
        print(f"warning: 1-minute load average {load[0]} before the run: other processes share the "
              "cores and the numbers will be noisy", file=sys.stderr)
    if args.repeat > 1:
        report = run_repeated(args, ac, torch)
        print(f"\nMedians over {args.repeat} runs{f', {args.pause:g} s apart' if args.pause else ''}:")
        print(format_repeated(report["results"]))
        if report["overhead"]:
            print("\n" + format_overhead(report["overhead"]))
    else:
        report = run(args, ac, torch)
        print(format_text(report["results"], report["overhead"]))
    other = report["machine"]["background_cpu_fraction"]
    if other is not None and other > 0.05:
        print(f"\nwarning: other processes used {other:.0%} of the CPU capacity during the run; "
              "2-thread timings stall on them (rerun on a quiet machine)")
    if report["missed"]:
        print(f"\nMissed targets ({len(report['missed'])}):")
        for line in report["missed"]:
            print(f"  MISS {line}")
    else:
        print("\nAll targets met.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rounded(report), f, separators=(",", ":"), default=str)
        print(f"wrote {args.json}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(format_markdown(report["results"], report["overhead"], report["machine"], report["settings"]))
        print(f"wrote {args.markdown}")
    if args.plot:
        problem = write_plot(args.plot, report["results"])
        if problem:
            print(f"--plot: {problem}", file=sys.stderr)
        else:
            print(f"wrote {args.plot}")
    failed = any(call_errors(r) for r in report["results"])
    if failed:
        return 1
    return 1 if (args.strict and report["missed"]) else 0


if __name__ == "__main__":
    sys.exit(main())
