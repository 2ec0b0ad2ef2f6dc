"""A CPU training step in PyTorch, timed with and without the aclnn_cpu.torch bridge.

The step is a spatial-transformer block: grid_sample of the input at an affine warp, GroupNorm,
PReLU, and softmax attention over the spatial positions, forward and backward. One row per op
(that op alone, forward and backward, at the block's shapes) and one for the whole block; each
row times the same step with torch's own kernels and with the bridge on, alternating the two
every round, and says how many of the routed calls the library served and how far each
step's gradients are from float64 autograd on the same values (the largest error relative to
the gradient's largest magnitude).

    python -m aclnn_cpu bench --suite training [--dtypes bf16] [--threads 1,2]
"""
from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, List, Optional, Sequence

# (N, C, H, W) of the input, (H_out, W_out) of the warp, GroupNorm groups
SHAPES = {"full": ((8, 32, 48, 48), (32, 32), 8), "smoke": ((2, 4, 6, 6), (4, 4), 2)}
DTYPES = ("float32", "float16", "bfloat16")
OPS = ("grid_sample", "group_norm", "prelu", "softmax", "block")


class Block:
    """The block's parameters and input, and a step() per row: forward, backward, gradients."""

    def __init__(self, torch, dtype, shapes, seed: int = 0):
        (n, c, h, w), (ho, wo), groups = shapes
        g = torch.Generator().manual_seed(seed)
        self.torch, self.F, self.groups, self.out_hw = torch, torch.nn.functional, groups, (ho, wo)

        def param(*shape, scale=1.0, shift=0.0):
            return (torch.randn(*shape, generator=g) * scale + shift).to(dtype).requires_grad_(True)

        self.x = param(n, c, h, w)
        # a mild random affine warp per sample: rotation/shear/scale near the identity
        theta = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]) + 0.1 * torch.randn(n, 2, 3, generator=g)
        self.grid = self.F.affine_grid(theta, (n, c, ho, wo), align_corners=False).to(dtype).requires_grad_(True)
        self.gamma = param(c, scale=0.1, shift=1.0)
        self.beta = param(c, scale=0.1)
        self.alpha = param(c, scale=0.05, shift=0.25)
        self.h = param(n, c, ho, wo)  # the input of the single-op rows after grid_sample
        self.upstream = {}  # op -> the fixed upstream gradient of its step, in the dtype
        self._generator = g

    def in_float64(self) -> "Block":
        """The same block, its tensors exactly converted to float64 (the error reference)."""
        exact = object.__new__(Block)
        exact.__dict__.update(self.__dict__)
        for name in ("x", "grid", "gamma", "beta", "alpha", "h"):
            setattr(exact, name, getattr(self, name).detach().double().requires_grad_(True))
        exact.upstream = {op: u.double() for op, u in self.upstream.items()}
        return exact

    def _attention(self, h):
        n, c = h.shape[:2]
        scores = self.torch.softmax(h.flatten(2) * (1.0 / c ** 0.5), dim=-1)
        return (h.flatten(2) * scores).sum(-1)

    def forward(self, op: str):
        F = self.F
        if op == "grid_sample":
            return F.grid_sample(self.x, self.grid, align_corners=False), (self.x, self.grid)
        if op == "group_norm":
            return F.group_norm(self.h, self.groups, self.gamma, self.beta), (self.h, self.gamma, self.beta)
        if op == "prelu":
            return F.prelu(self.h, self.alpha), (self.h, self.alpha)
        if op == "softmax":
            return self.torch.softmax(self.h.flatten(2), dim=-1), (self.h,)
        h = F.grid_sample(self.x, self.grid, align_corners=False)
        h = F.prelu(F.group_norm(h, self.groups, self.gamma, self.beta), self.alpha)
        return self._attention(h), (self.x, self.grid, self.gamma, self.beta, self.alpha)

    def step(self, op: str):
        """One training step of the row: forward, backward with a fixed upstream gradient."""
        out, leaves = self.forward(op)
        if op not in self.upstream:  # random, drawn once: the float64 reference gets the same values
            self.upstream[op] = self.torch.randn(out.shape, generator=self._generator).to(out.dtype)
        return self.torch.autograd.grad(out, leaves, self.upstream[op])


def _alternate(plain: Callable[[], object], bridged: Callable[[], object], bridge, rounds: int,
               min_time: float) -> Dict[str, float]:
    """Median seconds per call of each, sampled in alternation (the bridge switched on around its
    own samples only, never inside a timed call)."""
    def loops_for(fn):
        loops = 1
        while True:
            start = time.perf_counter()
            for _ in range(loops):
                fn()
            if time.perf_counter() - start >= min_time:
                return loops
            loops *= 2

    def sample(fn, loops):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        return (time.perf_counter() - start) / loops

    plain_loops = loops_for(plain)
    with bridge.enabled():
        bridged_loops = loops_for(bridged)
    times = {"torch": [], "bridge": []}
    for _ in range(rounds):
        times["torch"].append(sample(plain, plain_loops))
        with bridge.enabled():
            times["bridge"].append(sample(bridged, bridged_loops))
    return {name: statistics.median(values) for name, values in times.items()}


def run_row(torch, bridge, op: str, dtype: str, threads: int, shapes, rounds: int,
            min_time: float) -> Dict:
    import aclnn_cpu as ac

    torch.set_num_threads(threads)
    ac.set_num_threads(threads)
    block = Block(torch, getattr(torch, dtype), shapes)
    own = block.step(op)
    bridge.reset_counts()
    with bridge.enabled():
        routed = block.step(op)
    counted = bridge.counts()
    served = sum(s for s, _ in counted.values())
    total = sum(s + f for s, f in counted.values())
    exact = block.in_float64().step(op)
    timed = _alternate(lambda: block.step(op), lambda: block.step(op), bridge, rounds, min_time)
    return {"op": op, "dtype": dtype, "threads": threads, "torch_ms": timed["torch"] * 1e3,
            "bridge_ms": timed["bridge"] * 1e3, "speedup": timed["torch"] / timed["bridge"],
            "library_calls": f"{served}/{total}", "torch_grad_err": _relative_error(own, exact),
            "bridge_grad_err": _relative_error(routed, exact)}


def _relative_error(grads, exact) -> float:
    """The largest gradient error against float64, relative to that gradient's largest magnitude."""
    return max(float((g.double() - e).abs().max() / e.abs().max().clamp_min(1e-300))
               for g, e in zip(grads, exact))


def run(dtypes: Sequence[str] = DTYPES, threads: Sequence[int] = (2,), rounds: int = 5,
        min_time: float = 0.2, suite: str = "full", ops: Sequence[str] = OPS,
        progress: Optional[Callable[[str], None]] = None) -> List[Dict]:
    """The rows for every (dtype, thread count, op); ``suite`` "smoke" takes tiny shapes."""
    import torch

    import aclnn_cpu.torch as bridge

    rows = []
    for dtype in dtypes:
        for t in threads:
            for op in ops:
                if progress:
                    progress(f"training {op} {dtype} {t} thread(s)")
                rows.append(run_row(torch, bridge, op, dtype, t, SHAPES[suite], rounds, min_time))
    return rows


def format_rows(rows: List[Dict], suite: str = "full") -> str:
    (n, c, h, w), (ho, wo), groups = SHAPES[suite]
    lines = [f"Training step (spatial-transformer block: input [{n}, {c}, {h}, {w}], warp to "
             f"{ho}x{wo}, GroupNorm {groups} groups, PReLU per channel, softmax attention), "
             "forward + backward, torch's CPU kernels vs aclnn_cpu.torch:"]
    header = ["op", "dtype", "thr", "torch ms", "bridge ms", "speed-up", "library calls",
              "torch grad err", "bridge grad err"]
    body = [[r["op"], r["dtype"], str(r["threads"]), f"{r['torch_ms']:.3f}", f"{r['bridge_ms']:.3f}",
             f"{r['speedup']:.2f}x", r["library_calls"], f"{r['torch_grad_err']:.1e}",
             f"{r['bridge_grad_err']:.1e}"] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    for line in [header] + body:
        lines.append("  ".join(cell.rjust(wd) if i > 1 else cell.ljust(wd) for i, (cell, wd) in
                               enumerate(zip(line, widths))))
    return "\n".join(lines)


def main(args) -> int:
    """Entry point of `python -m aclnn_cpu bench --suite training`: uses args.dtypes,
    args.threads, args.rounds, args.min_time and (when set) args.json."""
    import json
    import sys

    rows = run(args.dtypes, args.threads, args.rounds, args.min_time,
               progress=None if getattr(args, "no_progress", False) else
               (lambda s: print(s, file=sys.stderr, flush=True)))
    print(format_rows(rows))
    if getattr(args, "json", None):
        with open(args.json, "w") as f:
            json.dump({"training": rows}, f, indent=1)
        print(f"wrote {args.json}")
    return 0
