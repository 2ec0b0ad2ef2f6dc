"""Benchmark suite: aclnn_cpu against PyTorch CPU and against a parallel copy of the same bytes.

Run it as ``python -m aclnn_cpu bench [options]`` (or ``python benchmarks/run.py``). For every
case (op, shape, dtype, thread count) it times three things in alternation, round after round:

* ours: the functional API with preallocated outputs (``out=``),
* torch: the aten op torch_npu maps to the same aclnn call (torch allocates its outputs),
* copy: a parallel copy that reads + writes as many bytes as the op must read + write.

Each sample runs an adaptive number of calls so that it lasts at least ``--min-time``; the report
gives medians over the rounds, the speed-up torch/ours, the bandwidth achieved as a fraction of
the copy's, and pass/miss against the targets of docs/performance.md. torch is optional.
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
from aclnn_cpu._vocabulary import numpy_dtype

DTYPES = ("float32", "float16", "bfloat16")
SHORT_DTYPE = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
OPS = ("prelu", "group_norm", "softmax", "grid_sampler")
OP_ALIASES = {
    "prelu": "prelu", "prelu_backward": "prelu", "aclnnprelubackward": "prelu",
    "group_norm": "group_norm", "groupnorm": "group_norm", "gn": "group_norm",
    "group_norm_backward": "group_norm", "aclnngroupnormbackward": "group_norm",
    "softmax": "softmax", "softmax_backward": "softmax", "aclnnsoftmaxbackward": "softmax",
    "grid_sampler": "grid_sampler", "grid_sampler2d": "grid_sampler", "gridsampler": "grid_sampler",
    "grid": "grid_sampler", "grid_sampler2d_backward": "grid_sampler",
    "aclnngridsampler2dbackward": "grid_sampler",
}
DTYPE_ALIASES = {"float32": "float32", "fp32": "float32", "f32": "float32", "float": "float32",
                 "float16": "float16", "fp16": "float16", "f16": "float16", "half": "float16",
                 "bfloat16": "bfloat16", "bf16": "bfloat16"}

# Speed-up (torch time / ours) each op must reach; every case must at least not be slower.
SPEEDUP_TARGET = {"prelu": 3.0, "group_norm": 1.5, "softmax": 1.0, "grid_sampler": 3.0}
GRID_BATCH1_TARGET = 5.0
# Ops that stream their data once: they should run near the copy bandwidth of the same bytes
# once the working set no longer fits in the last-level cache.
STREAMING_OPS = ("prelu", "group_norm", "softmax")
COPY_FRACTION_TARGET = 0.60

DEFAULT_ROUNDS = 7
DEFAULT_MIN_TIME = 0.020  # seconds per sample
OUTPUT_POLICY = ("ours: outputs preallocated on a 64-byte line (aclnn_cpu.empty_aligned), passed with out=; "
                 "torch: allocates its outputs each call (its allocator aligns to 64 bytes)")
ALLOC_POLICY = "ours and torch both allocate their outputs on every call"


def output_policy(allocate: bool) -> str:
    return ALLOC_POLICY if allocate else OUTPUT_POLICY
MODE_NAMES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
PAD_NAMES = {0: "zeros", 1: "border", 2: "reflection"}


# ----------------------------------------------------------------------------------------------
# The suite: realistic shapes per op. `suites` says which named suites a case belongs to.

@dataclass(frozen=True)
class Case:
    op: str
    label: str
    params: Dict
    suites: Sequence[str] = ("full",)

    @property
    def batch(self) -> int:
        p = self.params
        return int(p["N"]) if "N" in p else int(p["shape"][0])

    def describe(self) -> str:
        p = self.params
        if self.op == "prelu":
            return f"{list(p['shape'])} w={p['weight']}"
        if self.op == "group_norm":
            return f"N{p['N']} C{p['C']} {p['H']}x{p['W']} G{p['G']}"
        if self.op == "softmax":
            return f"{list(p['shape'])} dim={p['dim']}"
        return (f"N{p['N']} C{p['C']} {p['H']}x{p['W']}->{p['Ho']}x{p['Wo']} "
                f"{MODE_NAMES[p['mode']]}/{PAD_NAMES[p['padding']]}")


def _grid(N, C, H, W, Ho, Wo, mode=0, padding=0, align=False):
    return dict(N=N, C=C, H=H, W=W, Ho=Ho, Wo=Wo, mode=mode, padding=padding, align=align)


SUITE: List[Case] = [
    # PReLU: the classic per-channel shape, its scalar-weight twin, ResNet/UNet activations, and
    # [batch, features] after a linear layer.
    Case("prelu", "per-channel b32", dict(shape=(32, 64, 56, 56), weight="channel"), ("full", "quick")),
    Case("prelu", "scalar weight b32", dict(shape=(32, 64, 56, 56), weight="scalar")),
    Case("prelu", "ResNet stem b1", dict(shape=(1, 64, 112, 112), weight="channel")),
    Case("prelu", "ResNet layer3 b1", dict(shape=(1, 1024, 14, 14), weight="channel")),
    Case("prelu", "ResNet layer3 b32", dict(shape=(32, 1024, 14, 14), weight="channel")),
    Case("prelu", "UNet decoder b1", dict(shape=(1, 64, 256, 256), weight="channel")),
    Case("prelu", "UNet mid b32", dict(shape=(32, 128, 64, 64), weight="channel")),
    Case("prelu", "MLP features b256", dict(shape=(256, 1024), weight="channel")),
    Case("prelu", "tiny", dict(shape=(2, 4, 8, 8), weight="channel"), ("smoke",)),
    # GroupNorm: Stable-Diffusion-like UNet and VAE shapes, 32 groups.
    Case("group_norm", "SD UNet 64x64 b8", dict(N=8, C=320, H=64, W=64, G=32), ("full", "quick")),
    Case("group_norm", "SD UNet 32x32 b2", dict(N=2, C=640, H=32, W=32, G=32)),
    Case("group_norm", "SD UNet 16x16 b2", dict(N=2, C=1280, H=16, W=16, G=32)),
    Case("group_norm", "VAE decoder b1", dict(N=1, C=128, H=256, W=256, G=32)),
    Case("group_norm", "tiny", dict(N=2, C=8, H=4, W=4, G=2), ("smoke",)),
    # Softmax: attention scores over the last dim, classifier logits, an inner-dim reduction.
    Case("softmax", "attention BERT b8", dict(shape=(96, 128, 128), dim=-1), ("full", "quick")),
    Case("softmax", "attention L512 b4", dict(shape=(32, 512, 512), dim=-1)),
    Case("softmax", "logits b32", dict(shape=(32, 1000), dim=-1)),
    Case("softmax", "logits b256", dict(shape=(256, 1000), dim=-1), ("full", "quick")),
    Case("softmax", "inner dim", dict(shape=(32, 128, 1024), dim=1)),
    Case("softmax", "tiny", dict(shape=(4, 32), dim=-1), ("smoke",)),
    # GridSampler2D: image-warp grids (identity plus a small displacement).
    Case("grid_sampler", "warp b1", _grid(1, 256, 64, 64, 128, 128), ("full", "quick")),
    Case("grid_sampler", "warp b32", _grid(32, 32, 64, 64, 64, 64), ("full", "quick")),
    Case("grid_sampler", "warp b32 nearest", _grid(32, 32, 64, 64, 64, 64, mode=1)),
    Case("grid_sampler", "warp b32 bicubic", _grid(32, 32, 64, 64, 64, 64, mode=2)),
    # RGB images (spatial transformers, augmentation): few channels, so the per-position cost
    # dominates (docs/kernels/grid_sampler2d_backward.md, "Records and channel blocks").
    Case("grid_sampler", "image warp RGB b4", _grid(4, 3, 224, 224, 224, 224)),
    Case("grid_sampler", "tiny", _grid(1, 4, 8, 8, 8, 8), ("smoke",)),
]


# ----------------------------------------------------------------------------------------------
# Dtypes and data

def np_dtype(name: str) -> np.dtype:
    return numpy_dtype(name)  # ml_dtypes.bfloat16 for bfloat16


def _torch_dtype(torch, name: str):
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def _to_torch(torch, arr: np.ndarray, name: str):
    """A torch tensor with the same values, in memory of its own (so neither side warms the
    other's caches)."""
    src = np.ascontiguousarray(arr)
    if name == "bfloat16":
        return torch.from_numpy(src.view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(src.copy())


def _randn(rng: np.random.Generator, shape, scale=1.0, shift=0.0) -> np.ndarray:
    return (rng.standard_normal(size=shape, dtype=np.float32) * np.float32(scale) + np.float32(shift))


@dataclass
class Prepared:
    """One case at one dtype: callables for both sides and the bytes the op must move."""
    ours: Callable[[], object]  # writes into preallocated outputs (out=)
    torch: Optional[Callable[[], object]]
    ours_outputs: Callable[[], List[np.ndarray]]
    torch_outputs: Optional[Callable[[], List[object]]]
    bytes_moved: int
    elements: int
    ours_alloc: Optional[Callable[[], object]] = None  # allocates its outputs, as torch does


def _prepare_prelu(case, dtype, ac, torch, rng) -> Prepared:
    shape = tuple(case.params["shape"])
    dt = np_dtype(dtype)
    channels = shape[1] if len(shape) >= 2 else 1
    wshape = (channels,) if case.params["weight"] == "channel" else (1,)
    x = _randn(rng, shape).astype(dt)
    go = _randn(rng, shape).astype(dt)
    w = _randn(rng, wshape, 0.05, 0.25).astype(dt)
    gi = ac.empty_aligned(shape, dt)
    gw = np.empty(wshape, dt)
    numel, wnumel = x.size, w.size

    def ours():
        return ac.prelu_backward(go, x, w, out=(gi, gw))

    torch_fn = torch_out = None
    if torch is not None:
        tx, tgo, tw = (_to_torch(torch, a, dtype) for a in (x, go, w))
        # As torch.prelu does: a per-channel weight is viewed as [C, 1, ...] to broadcast, and
        # the weight gradient is reduced back to the weight's shape (part of torch's time).
        if wnumel > 1 and len(shape) >= 2:
            tw = tw.reshape((channels,) + (1,) * (len(shape) - 2))
        kernel = torch.ops.aten._prelu_kernel_backward

        def torch_fn():
            tgi, tgw = kernel(tgo, tx, tw)
            return tgi, tgw.sum_to_size(tw.shape).reshape(wshape)

        torch_out = lambda: list(torch_fn())  # noqa: E731
    return Prepared(ours, torch_fn, lambda: [gi, gw], torch_out,
                    (3 * numel + 2 * wnumel) * dt.itemsize, numel,
                    lambda: ac.prelu_backward(go, x, w))


def _prepare_group_norm(case, dtype, ac, torch, rng) -> Prepared:
    p = case.params
    N, C, H, W, G = p["N"], p["C"], p["H"], p["W"], p["G"]
    HxW = H * W
    dt = np_dtype(dtype)
    x = _randn(rng, (N, C, H, W), 1.5, 0.3).astype(dt)
    go = _randn(rng, (N, C, H, W)).astype(dt)
    gamma = _randn(rng, (C,), 0.1, 1.0).astype(dt)
    # mean/rstd as the forward pass would have produced them from this very input.
    groups = x.reshape(N, G, -1).astype(np.float32)
    mean32 = groups.mean(axis=2, dtype=np.float64)
    var = groups.var(axis=2, dtype=np.float64)
    mean = mean32.astype(dt)
    rstd = (1.0 / np.sqrt(var + 1e-5)).astype(dt)
    del groups
    gi = ac.empty_aligned((N, C, H, W), dt)
    gg = np.empty((C,), dt)
    gb = np.empty((C,), dt)

    def ours():
        return ac.group_norm_backward(go, x, mean, rstd, gamma, N, C, HxW, G,
                                      output_mask=(True, True, True), out=(gi, gg, gb))

    torch_fn = torch_out = None
    if torch is not None:
        tx, tgo, tm, tr, tg = (_to_torch(torch, a, dtype) for a in (x, go, mean, rstd, gamma))
        kernel = torch.ops.aten.native_group_norm_backward

        def torch_fn():
            return kernel(tgo, tx, tm, tr, tg, N, C, HxW, G, [True, True, True])

        torch_out = lambda: list(torch_fn())  # noqa: E731
    numel = N * C * HxW
    return Prepared(ours, torch_fn, lambda: [gi, gg, gb], torch_out,
                    (3 * numel + 2 * N * G + 3 * C) * dt.itemsize, numel,
                    lambda: ac.group_norm_backward(go, x, mean, rstd, gamma, N, C, HxW, G))


def _prepare_softmax(case, dtype, ac, torch, rng) -> Prepared:
    shape, dim = tuple(case.params["shape"]), case.params["dim"]
    dt = np_dtype(dtype)
    logits = _randn(rng, shape, 2.0)
    e = np.exp(logits - logits.max(axis=dim, keepdims=True))
    y = (e / e.sum(axis=dim, keepdims=True)).astype(dt)
    del e, logits
    go = _randn(rng, shape).astype(dt)
    res = ac.empty_aligned(shape, dt)

    def ours():
        return ac.softmax_backward(go, y, dim, out=res)

    torch_fn = torch_out = None
    if torch is not None:
        tgo, ty = _to_torch(torch, go, dtype), _to_torch(torch, y, dtype)
        tdt = _torch_dtype(torch, dtype)
        # torch's own binding of the op: through torch.ops.aten the dispatcher's Python layer
        # added about 2 us a call (8-element call: 3.0 us against 1.2), which flattered small rows.
        kernel = torch._softmax_backward_data

        def torch_fn():
            return kernel(tgo, ty, dim, tdt)

        torch_out = lambda: [torch_fn()]  # noqa: E731
    return Prepared(ours, torch_fn, lambda: [res], torch_out, 3 * y.size * dt.itemsize, y.size,
                    lambda: ac.softmax_backward(go, y, dim))


def _warp_grid(rng, N, Ho, Wo, align) -> np.ndarray:
    """Identity sampling grid plus a small smooth-ish displacement, a few points off the edge."""
    def axis(n):
        if align:
            return np.linspace(-1.0, 1.0, n, dtype=np.float32) if n > 1 else np.zeros(1, np.float32)
        return ((2.0 * np.arange(n, dtype=np.float32) + 1.0) / n - 1.0).astype(np.float32)
    gy, gx = np.meshgrid(axis(Ho), axis(Wo), indexing="ij")
    base = np.stack([gx, gy], axis=-1)[None]  # [1, Ho, Wo, 2], (x, y) order
    return (base + _randn(rng, (N, Ho, Wo, 2), 0.05)).astype(np.float32)


def _prepare_grid_sampler(case, dtype, ac, torch, rng) -> Prepared:
    p = case.params
    N, C, H, W, Ho, Wo = p["N"], p["C"], p["H"], p["W"], p["Ho"], p["Wo"]
    mode, padding, align = p["mode"], p["padding"], p["align"]
    dt = np_dtype(dtype)
    x = _randn(rng, (N, C, H, W)).astype(dt)
    grid = _warp_grid(rng, N, Ho, Wo, align).astype(dt)
    go = _randn(rng, (N, C, Ho, Wo)).astype(dt)
    ig = ac.empty_aligned(x.shape, dt)
    gg = np.empty(grid.shape, dt)

    def ours():
        return ac.grid_sampler2d_backward(go, x, grid, mode, padding, align,
                                          output_mask=(True, True), out=(ig, gg))

    torch_fn = torch_out = None
    if torch is not None:
        tx, tgrid, tgo = (_to_torch(torch, a, dtype) for a in (x, grid, go))
        kernel = torch.ops.aten.grid_sampler_2d_backward

        def torch_fn():
            return kernel(tgo, tx, tgrid, mode, padding, align, [True, True])

        torch_out = lambda: list(torch_fn())  # noqa: E731
    # gradOutput and the grid read, inputGrad and gridGrad written, and the input read where the
    # mode interpolates (nearest has no grid gradient, so its call never reads the input).
    moved = go.size + (1 if mode == 1 else 2) * x.size + 2 * grid.size
    return Prepared(ours, torch_fn, lambda: [ig, gg], torch_out, moved * dt.itemsize, go.size,
                    lambda: ac.grid_sampler2d_backward(go, x, grid, mode, padding, align))


PREPARE = {"prelu": _prepare_prelu, "group_norm": _prepare_group_norm,
           "softmax": _prepare_softmax, "grid_sampler": _prepare_grid_sampler}


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


# Jobs whose torch call can take the process down. torch 2.13's CPU grid_sampler_2d_backward in
# fp16/bf16 corrupts the heap now and then: runs of the suite's GridSampler cases calling torch
# alone (ours never called) aborted in 5 of about 20 processes ("double free or corruption",
# "munmap_chunk(): invalid pointer", a segmentation fault), and two full bench runs died that
# way. These jobs run in a child process, so a crash costs a retry, not the run.
TORCH_CRASH_PRONE = {("grid_sampler", "float16"), ("grid_sampler", "bfloat16")}
ISOLATION_ATTEMPTS = 3


def child_command(suite: str, case: Case, dtype: str, threads: int, rounds: int, min_time: float,
                  allocate: bool, json_path: str) -> List[str]:
    """The command that times one job alone in a fresh process and writes its report as JSON."""
    cmd = [sys.executable, "-m", "aclnn_cpu", "bench", "--suite", suite, "--ops", case.op, "--case", case.label,
           "--dtypes", dtype, "--threads", str(threads), "--rounds", str(rounds), "--min-time",
           repr(min_time), "--no-overhead", "--no-progress", "--isolate", "never", "--json", json_path]
    return cmd + (["--alloc"] if allocate else [])


def run_case_isolated(suite: str, case: Case, dtype: str, threads: int, ac, rounds: int, min_time: float,
                      cache_bytes: int, allocate: bool = False) -> Dict:
    """run_case in a child process, retried when the child dies; if every attempt dies, ours and
    the copy are timed here without torch and the row says why torch is missing."""
    failures = []
    for _ in range(ISOLATION_ATTEMPTS):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "job.json")
            cmd = child_command(suite, case, dtype, threads, rounds, min_time, allocate, path)
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
    row = run_case(case, dtype, threads, ac, None, rounds, min_time, cache_bytes, allocate)
    row["torch_error"] = f"torch's call crashed its process {len(failures)} times ({'; '.join(failures)})"
    row["isolated"] = {"attempts": len(failures), "failures": failures}
    return row


def run_case(case: Case, dtype: str, threads: int, ac, torch, rounds: int, min_time: float,
             cache_bytes: int, allocate: bool = False) -> Dict:
    """Time one case at one dtype and thread count; returns the result row (errors included)."""
    rng = np.random.default_rng(20240611)
    row = {"op": case.op, "case": case.label, "shape": case.describe(), "params": dict(case.params),
           "dtype": dtype, "threads": threads, "batch": case.batch, "ours_ms": None,
           "torch_ms": None, "copy_ms": None, "speedup": None, "copy_fraction": None,
           "copy_speedup": None}
    prepared = PREPARE[case.op](case, dtype, ac, torch, rng)
    row.update(bytes_moved=prepared.bytes_moved, elements=prepared.elements,
               working_set_bytes=prepared.bytes_moved,
               larger_than_cache=prepared.bytes_moved > cache_bytes)
    fns = {}
    ours = prepared.ours_alloc if allocate else prepared.ours
    try:
        ours()
        fns["ours"] = ours
    except Exception as exc:
        row["ours_error"] = f"{type(exc).__name__}: {exc}"
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
        twin = PREPARE[case.op](case, "float32", ac, None, np.random.default_rng(20240611))
        fns["ours_fp32"] = twin.ours_alloc if allocate else twin.ours
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
    if row["ours_ms"]:
        row["ours_gbps"] = prepared.bytes_moved / (row["ours_ms"] * 1e-3) / 1e9
        row["ours_ns_per_element"] = row["ours_ms"] * 1e6 / max(prepared.elements, 1)
        # Ratios are taken round by round, then the median: the samples of one round sit next
        # to each other in time, so a slow spell of this shared machine (it comes and goes
        # within a run) slows both sides of a ratio instead of one side of a median.
        row["copy_fraction"] = _median_ratio(timing["copy"]["samples"], timing["ours"]["samples"])
        if row["torch_ms"]:
            row["speedup"] = _median_ratio(timing["torch"]["samples"], timing["ours"]["samples"])
        if "ours_fp32" in timing:
            row["per_element_vs_fp32"] = _median_ratio(timing["ours"]["samples"], timing["ours_fp32"]["samples"])
    if row["torch_ms"]:
        # torch's time over the copy's: the speed-up an op running at copy bandwidth would have.
        # A speed-up target above it asks for more than moving the op's bytes at copy speed.
        row["copy_speedup"] = _median_ratio(timing["torch"]["samples"], timing["copy"]["samples"])
    row["copy_gbps"] = prepared.bytes_moved / (row["copy_ms"] * 1e-3) / 1e9
    if "ours" in fns and "torch" in fns:
        try:
            prepared.ours()
            row["max_rel_diff_vs_torch"] = _agreement(prepared.ours_outputs(), prepared.torch_outputs())
        except Exception as exc:
            row["max_rel_diff_vs_torch"] = f"{type(exc).__name__}: {exc}"
    return row


def _tiny_inputs(op: str):
    """8-element inputs (fp32) for the per-call overhead measurement."""
    f = np.float32
    if op == "prelu":
        x = np.linspace(-1, 1, 8, dtype=f)
        return dict(go=np.ones(8, f), x=x, w=np.full(1, 0.25, f), gi=np.empty(8, f), gw=np.empty(1, f))
    if op == "group_norm":
        x = np.linspace(-1, 1, 8, dtype=f).reshape(1, 2, 2, 2)
        return dict(go=np.ones_like(x), x=x, mean=np.zeros((1, 1), f), rstd=np.ones((1, 1), f),
                    gamma=np.ones(2, f), gi=np.empty_like(x), gg=np.empty(2, f), gb=np.empty(2, f))
    if op == "softmax":
        return dict(go=np.ones(8, f), y=np.full(8, 0.125, f), out=np.empty(8, f))
    x = np.linspace(-1, 1, 8, dtype=f).reshape(1, 2, 2, 2)
    grid = np.linspace(-0.9, 0.9, 8, dtype=f).reshape(1, 2, 2, 2)
    return dict(go=np.ones_like(x), x=x, grid=grid, ig=np.empty_like(x), gg=np.empty_like(grid))


def _two_phase(ac, plan_name: str, run_name: str, *args) -> Callable[[], None]:
    """A call of both phases as a user writes it: the functions bound once (looking them up by
    name on every call had added about 0.2 us to ours), a workspace only when one is needed."""
    plan, run = getattr(ac, plan_name), getattr(ac, run_name)

    def call():
        ws, executor = plan(*args)
        run(np.empty(ws, np.uint8) if ws else None, ws, executor)
    return call


def _overhead_callables(op: str, ac, torch) -> Dict[str, Callable[[], object]]:
    """The calls timed per op. Both sides call functions and pass arrays bound beforehand, as a
    loop in user code would: a dict lookup or a module attribute per argument costs about as much
    as the differences measured here."""
    d = _tiny_inputs(op)
    fns: Dict[str, Callable[[], object]] = {}
    if op == "prelu":
        f, go, x, w, outs = ac.prelu_backward, d["go"], d["x"], d["w"], (d["gi"], d["gw"])
        fns["functional out="] = lambda: f(go, x, w, out=outs)
        fns["functional alloc"] = lambda: f(go, x, w)
        fns["two-phase"] = _two_phase(ac, "aclnnPreluBackwardGetWorkspaceSize", "aclnnPreluBackward",
                                      go, x, w, *outs)
        if torch is not None:
            kernel = torch.ops.aten._prelu_kernel_backward
            tgo, tx, tw = (torch.from_numpy(d[k].copy()) for k in ("go", "x", "w"))
            shape = tw.shape
            fns["torch"] = lambda: kernel(tgo, tx, tw)[1].sum_to_size(shape)
    elif op == "group_norm":
        f = ac.group_norm_backward
        args = (d["go"], d["x"], d["mean"], d["rstd"], d["gamma"], 1, 2, 4, 1)
        outs = (d["gi"], d["gg"], d["gb"])
        fns["functional out="] = lambda: f(*args, out=outs)
        fns["functional alloc"] = lambda: f(*args)
        fns["two-phase"] = _two_phase(
            ac, "aclnnGroupNormBackwardGetWorkspaceSize", "aclnnGroupNormBackward",
            *args, (True, True, True), *outs)
        if torch is not None:
            kernel = torch.ops.aten.native_group_norm_backward
            t = [torch.from_numpy(d[k].copy()) for k in ("go", "x", "mean", "rstd", "gamma")]
            mask = [True, True, True]
            fns["torch"] = lambda: kernel(*t, 1, 2, 4, 1, mask)
    elif op == "softmax":
        f, go, y, out = ac.softmax_backward, d["go"], d["y"], d["out"]
        fns["functional out="] = lambda: f(go, y, 0, out=out)
        fns["functional alloc"] = lambda: f(go, y, 0)
        fns["two-phase"] = _two_phase(ac, "aclnnSoftmaxBackwardGetWorkspaceSize", "aclnnSoftmaxBackward",
                                      go, y, 0, out)
        if torch is not None:
            kernel, f32 = torch._softmax_backward_data, torch.float32
            tgo, ty = torch.from_numpy(d["go"].copy()), torch.from_numpy(d["y"].copy())
            fns["torch"] = lambda: kernel(tgo, ty, 0, f32)
    else:
        f, go, x, grid, outs = ac.grid_sampler2d_backward, d["go"], d["x"], d["grid"], (d["ig"], d["gg"])
        fns["functional out="] = lambda: f(go, x, grid, 0, 0, False, out=outs)
        fns["functional alloc"] = lambda: f(go, x, grid, 0, 0, False)
        fns["two-phase"] = _two_phase(
            ac, "aclnnGridSampler2DBackwardGetWorkspaceSize", "aclnnGridSampler2DBackward",
            go, x, grid, 0, 0, False, (True, True), *outs)
        if torch is not None:
            kernel = torch.ops.aten.grid_sampler_2d_backward
            tgo, tx, tg = (torch.from_numpy(d[k].copy()) for k in ("go", "x", "grid"))
            mask = [True, True]
            fns["torch"] = lambda: kernel(tgo, tx, tg, 0, 0, False, mask)
    return fns


def run_overhead(op: str, ac, torch, rounds: int, min_time: float) -> Dict:
    """Per-call time (microseconds) on 8-element fp32 tensors: the fixed cost of a call."""
    row = {"op": op, "elements": 8, "dtype": "float32", "us": {}, "samples_us": {}, "errors": {}}
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
            if r["op"] == "grid_sampler" and r["batch"] == 1:
                goal = GRID_BATCH1_TARGET
            goal = max(goal, 1.0)
            targets.append({"name": "speedup", "goal": goal, "value": r["speedup"],
                            "pass": r["speedup"] >= goal, "text": f">={goal:g}x"})
        if r["op"] in STREAMING_OPS and r.get("larger_than_cache") and r.get("copy_fraction") is not None:
            targets.append({"name": "copy_bandwidth", "goal": COPY_FRACTION_TARGET,
                            "value": r["copy_fraction"], "pass": r["copy_fraction"] >= COPY_FRACTION_TARGET,
                            "text": f"bw>={COPY_FRACTION_TARGET:.0%}"})
        ratio = r.get("per_element_vs_fp32")  # over the fp32 twin, paired round by round
        if ratio is not None:
            # Same element count as the fp32 twin, so the time ratio is the per-element ratio.
            targets.append({"name": "per_element_vs_fp32", "goal": 1.0, "value": ratio,
                            "pass": ratio <= 1.0, "text": f"<=fp32 ({ratio:.2f}x)"})
        r["targets"] = targets


def evaluate_overhead_targets(overhead: List[Dict]) -> None:
    """Adds o["targets"]: each variant's per-call time at most torch's (median of per-round ratios)."""
    for o in overhead:
        o["targets"] = [{"name": "overhead", "variant": name, "goal": 1.0, "value": ratio, "pass": ratio <= 1.0}
                        for name, ratio in o.get("vs_torch", {}).items()]


def missed_overhead(overhead: List[Dict]) -> List[str]:
    return [f"{o['op']} per-call overhead, {t['variant']}: {t['value']:.2f}x torch's > 1"
            for o in overhead for t in o.get("targets", []) if not t["pass"]]


def missed_targets(rows: List[Dict]) -> List[str]:
    out = []
    for r in rows:
        where = f"{r['op']} {r['case']} {SHORT_DTYPE[r['dtype']]} t{r['threads']} ({r['shape']})"
        if r.get("ours_error"):
            out.append(f"{where}: ours failed: {r['ours_error']}")
        for t in r.get("targets", []):
            if not t["pass"]:
                if t["name"] == "speedup":
                    ceiling = r.get("copy_speedup")
                    bound = "" if ceiling is None else f" (a copy of the same bytes: {ceiling:.2f}x)"
                    out.append(f"{where}: speed-up {t['value']:.2f}x < {t['goal']:g}x{bound}")
                elif t["name"] == "copy_bandwidth":
                    out.append(f"{where}: {t['value']:.1%} of copy bandwidth < {t['goal']:.0%}")
                else:
                    out.append(f"{where}: {t['value']:.3f}x the fp32 time per element > 1")
                if "missed_runs" in t:  # judged on the median over repeated runs
                    out[-1] += f" (median of {t['runs']} runs; missed in {t['missed_runs']})"
    return out


# ----------------------------------------------------------------------------------------------
# Reports

def _fmt_ms(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if v < 1 else (f"{v:.2f}" if v < 100 else f"{v:.1f}")


def _target_cells(r: Dict) -> str:
    if "per_run" in r:  # a row of medians over repeated runs
        return bench_repeat.target_cells(r)
    cells = [f"{t['text']} {'pass' if t['pass'] else 'MISS'}" for t in r.get("targets", [])]
    if r.get("ours_error"):
        cells.append("ours failed")
    elif r.get("torch_error") and r.get("speedup") is None:
        cells.append("no torch")
    return ", ".join(cells)


def table_rows(rows: List[Dict]) -> List[List[str]]:
    out = []
    for r in rows:
        out.append([
            r["op"], r["case"], SHORT_DTYPE[r["dtype"]], str(r["threads"]), r["shape"],
            _fmt_ms(r.get("ours_ms")), _fmt_ms(r.get("torch_ms")),
            "-" if r.get("speedup") is None else f"{r['speedup']:.2f}x",
            "-" if r.get("copy_speedup") is None else f"{r['copy_speedup']:.2f}x",
            "-" if r.get("copy_fraction") is None else f"{r['copy_fraction']:.1%}",
            "-" if r.get("ours_gbps") is None else f"{r['ours_gbps']:.1f}",
            _target_cells(r),
        ])
    return out


TABLE_HEADER = ["op", "case", "dtype", "thr", "shape", "ours ms", "torch ms", "speed-up",
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


REPEATED_HEADER = ["op", "case", "dtype", "thr", "shape", "runs", "ours ms", "torch ms",
                   "targets (median [range])"]


def format_repeated(rows: List[Dict]) -> str:
    """The rows of medians over repeated runs: each target's median, per-run range, missed runs."""
    return "\n".join(_text_table(REPEATED_HEADER, [
        [r["op"], r["case"], SHORT_DTYPE[r["dtype"]], str(r["threads"]), r["shape"], str(r["runs"]),
         _fmt_ms(r.get("ours_ms")), _fmt_ms(r.get("torch_ms")), _target_cells(r)] for r in rows]))


def format_overhead(overhead: List[Dict]) -> str:
    lines = ["Per-call overhead, 8-element float32 tensors (microseconds per call, median; "
             "in brackets ours / torch, the median of per-round ratios):"]
    lines.append(f"{'op':<14}" + "".join(f"{c:>18}" for c in OVERHEAD_COLUMNS))
    for o in overhead:
        lines.append(f"{o['op']:<14}" + "".join(f"{c:>18}" for c in _overhead_cells(o)))
    return "\n".join(lines)


def _background_note(machine: Dict) -> str:
    other = machine.get("background_cpu_fraction")
    return "" if other is None else f" Other processes used {other:.1%} of the CPU capacity during the run."


def format_markdown(rows: List[Dict], overhead: List[Dict], machine: Dict, settings: Dict) -> str:
    lines = [f"Measured {machine['date_utc']} UTC on {machine['cpu']} ({machine['usable_cpus']} usable CPUs, "
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
        lines += ["", "Per-call overhead on 8-element float32 tensors, microseconds per call (median; in "
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


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m aclnn_cpu bench",
        description="Time aclnn_cpu against PyTorch CPU and a parallel copy of the same bytes.",
        epilog=f"Outputs: {OUTPUT_POLICY}. Targets: speed-up PReLU >= 3x, GroupNorm >= 1.5x, "
               "GridSampler >= 3x (>= 5x at batch 1), Softmax >= 1x; streaming ops >= 60% of the "
               "copy bandwidth when the working set exceeds the last-level cache; fp16/bf16 time "
               "per element <= fp32's.")
    parser.add_argument("--quick", action="store_true", help="a subset (same as --suite quick)")
    parser.add_argument("--suite", choices=("full", "quick", "smoke"), default=None,
                        help="full (default, ~2 min on a quiet 2-core machine), quick (~40 s), "
                             "or smoke (tiny shapes, for tests)")
    parser.add_argument("--ops", help="comma list: prelu, group_norm, softmax, grid_sampler")
    parser.add_argument("--dtypes", help="comma list: float32, float16, bfloat16 (or fp32, fp16, bf16)")
    parser.add_argument("--threads", default="2", help="comma list of thread counts (default 2)")
    parser.add_argument("--match", help="only cases whose op/label/shape contains this text")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # exactly this label (isolated child jobs)
    parser.add_argument("--isolate", choices=("auto", "never"), default="auto",
                        help="auto (default): jobs whose torch call is known to crash now and then "
                             "(GridSampler fp16/bf16 in torch 2.13) run in a child process; never: "
                             "everything in this process")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                        help=f"timed rounds after the warm-up (default {DEFAULT_ROUNDS})")
    parser.add_argument("--min-time", type=float, default=DEFAULT_MIN_TIME,
                        help=f"seconds each sample lasts at least (default {DEFAULT_MIN_TIME})")
    parser.add_argument("--alloc", action="store_true",
                        help="ours allocates its outputs on every call, as torch does (default: out=)")
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
                                              cache_bytes, args.alloc))
            else:
                rows.append(run_case(case, dtype, threads, ac, torch, args.rounds, args.min_time, cache_bytes,
                                     args.alloc))
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
                     "torch": torch is not None, "output_policy": output_policy(args.alloc),
                     "copy": "reads + writes the op's bytes: a buffer of half that size copied into another",
                     "targets": {"speedup": SPEEDUP_TARGET, "grid_sampler_batch1": GRID_BATCH1_TARGET,
                                 "copy_fraction": COPY_FRACTION_TARGET, "streaming_ops": list(STREAMING_OPS),
                                 "low_precision_per_element": "<= float32"}},
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.list:
        for c in select_cases(args.suite, args.ops, args.match, args.case):
            print(f"{c.op:<13} {c.label:<22} {c.describe()}")
        return 0
    torch = _import_torch(args.no_torch)
    import aclnn_cpu as ac

    print(f"aclnn_cpu {ac.__version__} (ISA {ac.config().get('isa')}) vs "
          + (f"torch {torch.__version__}" if torch is not None else
             "torch absent: timing ours and the copy only")
          + f"; threads {','.join(map(str, args.threads))}; suite {args.suite}; {output_policy(args.alloc)}.")
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
            json.dump(report, f, indent=1, default=str)
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
    failed = any(r.get("ours_error") for r in report["results"])
    if failed:
        return 1
    return 1 if (args.strict and report["missed"]) else 0


if __name__ == "__main__":
    sys.exit(main())
