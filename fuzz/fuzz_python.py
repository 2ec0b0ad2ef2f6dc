"""atheris harness over the Python API of all four operators (functional and two-phase).

From the fuzz bytes it picks an op, an API style, dtypes, shapes (0-8 dims, small sizes), input
layouts (negative strides, zero strides, slices, transposes), outputs (right or wrong shape,
dtype, strided, read-only, aliasing an input), attributes (in range, off by a little, far outside
int64), masks of any length and None operands; then calls the op.

Findings (the harness raises, atheris records the input):
  * any exception other than an AclnnError subclass, MemoryError, or an OverflowError for an
    int attribute outside int64 (Python ints are unbounded, the C parameters are int64_t);
  * an input array whose bytes changed;
  * a successful call whose outputs hold a NaN or infinity although every input was finite;
  * a crash of the process (the sanitizers of the ASan build, or a plain segfault).

Run (from outside the checkout, so the installed build is imported):
  cd /tmp && python /work/main/fuzz/fuzz_python.py -max_total_time=300 CORPUS_DIR
FUZZ_OP=softmax|prelu|group_norm|grid_sampler restricts it to one op.
"""
from __future__ import annotations

import os
import sys
import warnings

import atheris

import ml_dtypes
import numpy as np

# Coverage feedback: the package's Python layers (the compiled parts give none without an
# instrumented build) and this harness's own choices (Call, the builders, TestOneInput).
with atheris.instrument_imports(include=["aclnn_cpu"]):
    import aclnn_cpu as ac

# NaN/inf cast to an int dtype (the harness asked for it) is not a finding.
warnings.filterwarnings("ignore", "invalid value encountered in cast")

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_ELEMENTS = 4096
OPS = ("softmax", "prelu", "group_norm", "grid_sampler")
ONLY_OP = os.environ.get("FUZZ_OP")
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
OTHER_DTYPES = (np.dtype(np.float64), np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.bool_))


class Call:
    """One fuzzed call: builds its operands, remembers the inputs to check them afterwards."""

    def __init__(self, fdp: atheris.FuzzedDataProvider):
        self.fdp = fdp
        self.inputs: list[tuple[np.ndarray, bytes]] = []  # (array, bytes of its memory before)
        self.all_finite = True
        self.attributes_in_int64 = True

    # ---- small choices --------------------------------------------------------------------
    def pick(self, n: int) -> int:
        return self.fdp.ConsumeIntInRange(0, n - 1)

    # When the input runs out, atheris returns the minimum of every range; the rare choices sit
    # at the maximum so that short inputs make ordinary (mostly valid) calls.
    def chance(self, one_in: int) -> bool:
        return self.pick(one_in) == one_in - 1

    def rare_first(self, n: int) -> int:
        return n - 1 - self.pick(n)

    def dtype(self, common: np.dtype) -> np.dtype:
        r = self.rare_first(32)
        if r == 0:
            return FLOAT_DTYPES[self.pick(3)]
        if r == 1:
            return OTHER_DTYPES[self.pick(len(OTHER_DTYPES))]
        return common

    def attribute(self, planned: int) -> int:
        r = self.rare_first(24)
        if r == 0:
            value = self.fdp.ConsumeInt(8)
        elif r == 1:
            value = [INT64_MIN, INT64_MAX, INT64_MAX + 1, INT64_MIN - 1, 2**100][self.pick(5)]
        elif r == 2:
            value = planned + self.fdp.ConsumeIntInRange(-3, 3)
        else:
            value = planned
        if not INT64_MIN <= value <= INT64_MAX:
            self.attributes_in_int64 = False
        return value

    def perturb(self, shape: list[int]) -> list[int]:
        shape = list(shape)
        r = self.rare_first(40)
        if r == 0 and shape:
            shape[self.pick(len(shape))] += 1 if self.fdp.ConsumeBool() else -1
        elif r == 1 and shape:
            shape.pop()
        elif r == 2:
            shape.insert(0, self.pick(3))
        elif r == 3 and shape:
            shape[self.pick(len(shape))] = 0
        elif r == 4:
            shape = [self.pick(4) for _ in range(self.pick(10))]
        return [max(0, d) for d in shape]

    # ---- arrays ---------------------------------------------------------------------------
    def values(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        seed = self.fdp.ConsumeIntInRange(0, 2**32 - 1)
        rng = np.random.default_rng(seed)
        data = rng.uniform(-4.0, 4.0, size=shape)
        if self.chance(8):  # specials
            flat = data.reshape(-1)
            for _ in range(min(3, flat.size)):
                flat[rng.integers(flat.size)] = [np.inf, -np.inf, np.nan, 0.0][rng.integers(4)]
        if dtype.kind == "b":
            return data > 0
        return data.astype(dtype)

    def input_array(self, shape: list[int], common: np.dtype, may_be_none: bool = True):
        if may_be_none and self.chance(40):
            return None
        shape = self.perturb(shape)
        if int(np.prod(shape, dtype=np.int64)) > MAX_ELEMENTS:
            return None
        dtype = self.dtype(common)
        layout = self.pick(8)
        if layout == 1 and shape:  # reversed along one axis
            axis = self.pick(len(shape))
            arr = np.flip(self.values(tuple(shape), dtype), axis)
        elif layout == 2 and shape:  # every other element of a twice-as-long axis
            axis = self.pick(len(shape))
            big = list(shape)
            big[axis] *= 2
            arr = self.values(tuple(big), dtype)[(slice(None),) * axis + (slice(None, None, 2),)]
        elif layout == 3 and shape:  # broadcast (zero strides): read-only view
            axis = self.pick(len(shape))
            small = list(shape)
            small[axis] = min(1, small[axis])
            arr = np.broadcast_to(self.values(tuple(small), dtype), tuple(shape))
        elif layout == 4 and len(shape) >= 2:  # transposed memory order
            arr = self.values(tuple(shape[::-1]), dtype).T
        elif layout == 5:  # a torch tensor (DLPack) instead of an array
            arr = self.values(tuple(shape), dtype)
            if dtype in (np.float32, np.float16):
                import torch
                arr = torch.from_numpy(arr)
        else:
            arr = self.values(tuple(shape), dtype)
        self.remember(arr)
        return arr

    def remember(self, arr) -> None:
        np_arr = arr.numpy() if hasattr(arr, "numpy") and not isinstance(arr, np.ndarray) else arr
        base = np_arr
        while isinstance(base.base, np.ndarray):
            base = base.base
        self.inputs.append((base, base.tobytes()))
        if np_arr.dtype.kind == "f" or np_arr.dtype == ml_dtypes.bfloat16:
            if not np.isfinite(np_arr.astype(np.float64)).all():
                self.all_finite = False

    def output_array(self, shape: list[int], common: np.dtype, may_be_none: bool = True):
        if may_be_none and self.chance(30):
            return None
        shape = self.perturb(shape)
        if int(np.prod(shape, dtype=np.int64)) > MAX_ELEMENTS:
            return None
        dtype = self.dtype(common)
        r = self.rare_first(30)
        if r == 0 and self.inputs:  # aliasing an input: must be refused
            base = self.inputs[self.pick(len(self.inputs))][0]
            if base.dtype == dtype and base.size >= int(np.prod(shape, dtype=np.int64)) and base.flags.writeable:
                return base.reshape(-1)[: int(np.prod(shape, dtype=np.int64))].reshape(shape)
        out = np.full(shape, 7, dtype=dtype)
        if r == 1 and shape:
            out = np.flip(np.full(shape, 7, dtype=dtype), self.pick(len(shape)))
        elif r == 2 and shape:
            axis = self.pick(len(shape))
            big = list(shape)
            big[axis] *= 2
            out = np.full(big, 7, dtype=dtype)[(slice(None),) * axis + (slice(None, None, 2),)]
        elif r == 3:
            out.flags.writeable = False
        elif r == 4 and shape:  # zero strides: one location written twice, must be refused
            out = np.broadcast_to(np.full([1] * len(shape), 7, dtype=dtype), shape)
        return out

    def mask(self, declared: int):
        if self.chance(40):
            return None
        size = self.pick(5) if self.chance(12) else declared
        return [self.pick(4) != 0 for _ in range(size)]

    def workspace(self, size: int):
        if size == 0:
            return None
        raw = np.empty(size + 64, np.uint8)
        start = (-raw.ctypes.data) % 64
        return raw[start:start + size]


# ---- one builder per op: returns (functional thunk, phase-1 thunk, phase-2 function) ----------

def build_softmax(c: Call, dt: np.dtype):
    shape = [c.pick(5) for _ in range(c.pick(9))]
    g = c.input_array(shape, dt)
    y = c.input_array(shape, dt)
    rank = max(len(shape), 1)
    dim = c.attribute(c.fdp.ConsumeIntInRange(-rank, rank - 1))
    out = c.output_array(shape, np.dtype(np.float64) if c.chance(4) else dt)
    out_dtype = [None, np.float32, np.float64, np.float16][c.pick(4)] if c.chance(4) else None
    functional = (lambda: ac.softmax_backward(g, y, dim, out=out if c.fdp.ConsumeBool() else None,
                                              out_dtype=out_dtype))
    phase1 = lambda: ac.aclnnSoftmaxBackwardGetWorkspaceSize(g, y, dim, out)
    return functional, phase1, ac.aclnnSoftmaxBackward, [out]


def build_prelu(c: Call, dt: np.dtype):
    shape = [c.pick(5) for _ in range(c.pick(9))]
    gshape = list(shape)
    if c.fdp.ConsumeBool():
        gshape = gshape[c.pick(len(gshape) + 1):]
        gshape = [1 if c.fdp.ConsumeBool() else d for d in gshape]
    channels = shape[1] if len(shape) >= 2 else 1
    wshape = [channels] if c.fdp.ConsumeBool() else []
    if c.chance(6):
        wshape = [1, 1]
    wn = int(np.prod(wshape, dtype=np.int64))
    g = c.input_array(gshape, dt)
    x = c.input_array(shape, dt)
    w = c.input_array(wshape, dt)
    gi = c.output_array(shape, dt)
    gw = c.output_array(wshape if wn == 1 else [wn], dt)
    use_out = c.fdp.ConsumeBool()
    functional = lambda: ac.prelu_backward(g, x, w, out=(gi, gw) if use_out else None)
    phase1 = lambda: ac.aclnnPreluBackwardGetWorkspaceSize(g, x, w, gi, gw)
    return functional, phase1, ac.aclnnPreluBackward, [gi, gw]


def build_group_norm(c: Call, dt: np.dtype):
    n, group = c.pick(4), c.fdp.ConsumeIntInRange(1, 4)
    ch = group * c.pick(4)
    rest = [c.pick(5) for _ in range(c.pick(5))]
    hxw = int(np.prod(rest, dtype=np.int64))
    xshape = [n, ch] + rest
    if c.chance(8):
        xshape = [n * ch * hxw]
    stat = [n, group] if c.fdp.ConsumeBool() else [n * group]
    dy = c.input_array(xshape, dt)
    x = c.input_array(xshape, dt)
    mean = c.input_array(stat, dt)
    rstd = c.input_array(stat, dt)
    gamma = c.input_array([ch], dt, may_be_none=False) if c.pick(4) else None
    mask = c.mask(3)
    dx = c.output_array(xshape, dt)
    dgamma = c.output_array([ch], dt)
    dbeta = c.output_array([ch], dt)
    a_n, a_c, a_hxw, a_group = c.attribute(n), c.attribute(ch), c.attribute(hxw), c.attribute(group)
    use_out = c.fdp.ConsumeBool()
    if isinstance(a_c, int) and a_c > MAX_ELEMENTS:
        # N or HxW 0 makes any C valid, and the functional API then rightly allocates and zeroes
        # gradGamma/gradBeta of C elements (GiBs, an OOM report, not a bug): pass outputs instead.
        use_out = True
    functional = lambda: ac.group_norm_backward(dy, x, mean, rstd, gamma, a_n, a_c, a_hxw, a_group,
                                                mask if mask is not None else (True, True, True),
                                                out=(dx, dgamma, dbeta) if use_out else None)
    phase1 = lambda: ac.aclnnGroupNormBackwardGetWorkspaceSize(dy, x, mean, rstd, gamma, a_n, a_c, a_hxw,
                                                               a_group, mask, dx, dgamma, dbeta)
    return functional, phase1, ac.aclnnGroupNormBackward, [dx, dgamma, dbeta]


def build_grid_sampler(c: Call, dt: np.dtype):
    n, ch = c.pick(3), c.pick(3)
    hin, win = c.fdp.ConsumeIntInRange(1, 5), c.fdp.ConsumeIntInRange(1, 5)
    hout, wout = c.pick(5), c.pick(5)
    dy = c.input_array([n, ch, hout, wout], dt)
    x = c.input_array([n, ch, hin, win], dt)
    grid = c.input_array([n, hout, wout, 2], dt)
    interp = c.attribute(c.pick(3))
    padding = c.attribute(c.pick(3))
    align = c.fdp.ConsumeBool()
    mask = c.mask(2)
    dx = c.output_array([n, ch, hin, win], dt)
    dgrid = c.output_array([n, hout, wout, 2], dt)
    use_out = c.fdp.ConsumeBool()
    functional = lambda: ac.grid_sampler2d_backward(dy, x, grid, interp, padding, align,
                                                    mask if mask is not None else (True, True),
                                                    out=(dx, dgrid) if use_out else None)
    phase1 = lambda: ac.aclnnGridSampler2DBackwardGetWorkspaceSize(dy, x, grid, interp, padding, align,
                                                                   mask, dx, dgrid)
    return functional, phase1, ac.aclnnGridSampler2DBackward, [dx, dgrid]


BUILDERS = {"softmax": build_softmax, "prelu": build_prelu, "group_norm": build_group_norm,
            "grid_sampler": build_grid_sampler}


def check_finite(results, call: Call) -> None:
    if not call.all_finite:
        return
    for r in results:
        if r is None:
            continue
        arr = r.numpy() if hasattr(r, "numpy") and not isinstance(r, np.ndarray) else np.asarray(r)
        if arr.size and not np.isfinite(arr.astype(np.float64)).all():
            raise AssertionError(f"non-finite output from finite inputs: {arr!r}")


def TestOneInput(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    call = Call(fdp)
    op = OPS[call.pick(4)] if ONLY_OP is None else ONLY_OP
    dt = FLOAT_DTYPES[call.pick(3)]
    functional, phase1, phase2, outputs = BUILDERS[op](call, dt)
    two_phase = fdp.ConsumeBool()
    try:
        if two_phase:
            size, executor = phase1()
            ws_mode = call.rare_first(8)
            if ws_mode == 0 and size > 0:  # too small: must be refused
                phase2(call.workspace(size // 2) if size // 2 else None, size // 2, executor)
                raise AssertionError("phase 2 accepted a workspace smaller than planned")
            phase2(call.workspace(size), size, executor)
            results = [o for o in outputs if o is not None]
        else:
            res = functional()
            results = list(res) if isinstance(res, tuple) else [res]
    except ac.AclnnError:
        results = []
    except MemoryError:
        results = []
    except OverflowError:
        if call.attributes_in_int64:
            raise
        results = []
    for base, before in call.inputs:
        if base.tobytes() != before:
            raise AssertionError(f"{op}: an input changed")
    check_finite(results, call)


def main() -> None:
    for fn in (build_softmax, build_prelu, build_group_norm, build_grid_sampler, TestOneInput):
        atheris.instrument_func(fn)
    for name, fn in list(vars(Call).items()):
        if callable(fn):
            setattr(Call, name, atheris.instrument_func(fn))
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
