"""Times benchmarks/micro/permutation_pull.cpp's prototype against the installed aclnn_cpu on the
suite's nearest b32 call, alternating blocks of calls in one process, and checks its bits.

    python benchmarks/micro/permutation_pull.py LIB.so [N,C,H,W,Ho,Wo] [variants] [rounds]

variants: a comma list of the prototype's variant numbers (see its header), default 0x80,0x40;
PAD=k in the environment gives variants with bit 0x8 gradOutput planes k floats further apart
(a padded copy). Prints, per variant, whether its output equals the library's bit for bit and
its median time and median per-round ratio to the library's call.
"""
import ctypes
import os
import statistics
import sys
import time

import numpy as np
import aclnn_cpu as ac
from aclnn_cpu import bench
lib = ctypes.CDLL(os.path.abspath(sys.argv[1]))
lib.proto.restype = ctypes.c_double
lib.proto.argtypes = [ctypes.c_void_p]*3 + [ctypes.c_int]*6 + [ctypes.c_int]*2 + [ctypes.c_long]
N, C, H, W, Ho, Wo = [int(v) for v in (sys.argv[2] if len(sys.argv) > 2 else "32,32,64,64,64,64").split(",")]
variants = [int(v, 0) for v in (sys.argv[3] if len(sys.argv) > 3 else "0x80,0x40").split(",")]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 40
rng = np.random.default_rng(20240611)
x = bench._randn(rng, (N, C, H, W)).astype(np.float32)
grid = bench._warp_grid(rng, N, Ho, Wo, False).astype(np.float32)
go = bench._randn(rng, (N, C, Ho, Wo)).astype(np.float32)
ig = ac.empty_aligned(x.shape, np.float32); gg = np.empty(grid.shape, np.float32)
ig2 = ac.empty_aligned(x.shape, np.float32)
ac.set_num_threads(2)
def ours():
    ac.grid_sampler2d_backward(go, x, grid, 1, 0, False, output_mask=(True, True), out=(ig, gg))
pad = int(os.environ.get("PAD", "0"))
stride = Ho * Wo + pad
gopad = np.zeros(N * C * stride + 64, np.float32)
gopad[:N * C * stride].reshape(N * C, stride)[:, :Ho * Wo] = go.reshape(N * C, Ho * Wo)
def mk(v):
    src = gopad if (v & 8) else go
    st = stride if (v & 8) else Ho * Wo
    def f():
        lib.proto(src.ctypes.data, grid.ctypes.data, ig2.ctypes.data, N, C, H, W, Ho, Wo, v & ~8, 2, st)
    return f
ours()
for v in variants:
    ig2.fill(np.nan); mk(v)()
    if not (v & 2):
        same = np.array_equal(ig.view(np.uint32), ig2.view(np.uint32))
        print(f"variant {v:#x}: bits equal to the library: {same}", flush=True)
fns = {"lib": ours, **{f"{v:#x}": mk(v) for v in variants}}
calls = 5
times = {k: [] for k in fns}
for r in range(rounds):
    keys = list(fns) if r % 2 == 0 else list(fns)[::-1]
    for k in keys:
        t = time.perf_counter()
        for _ in range(calls): fns[k]()
        times[k].append((time.perf_counter() - t) / calls)
med = {k: statistics.median(v) for k, v in times.items()}
for k in fns:
    ratio = statistics.median(a / b for a, b in zip(times[k], times["lib"]))
    print(f"{k:>6}: {med[k]*1e3:.3f} ms  ratio to lib {ratio:.3f}")
