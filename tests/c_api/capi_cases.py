"""Cases for programs/op_runner.cpp: tensors laid out in storage files (any dtype, strides and
offset), a manifest, and the reading of the runner's results.

A case lists the C parameters of one op in order. Tensor parameters are ``T`` (an input with
values, or an output with a shape and dtype) and may take any layout; gaps in the storage of an
input hold NaN (a kernel that reads through a wrong stride produces NaN), gaps of an output hold
a sentinel that must survive the call.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from aclnn_cpu._vocabulary import DTYPE_CODES  # aclDataType values (acl/acl.h)
from support import np_dtype

OUTPUT_SENTINEL = 0x5A   # every byte of an output's storage before the call


@dataclass
class T:
    """A tensor parameter. Inputs carry ``values``; outputs carry ``shape`` and ``dtype``.

    layout: 'contiguous'; 'strided' (dims in reverse memory order, a gap after every row, an
    offset); 'negative' (dim 0 walks backwards from an offset); 'broadcast' (inputs whose values
    are constant along ``axis``: stride 0 there); or explicit ``strides``/``offset``.
    ``share``: name of an earlier tensor of the case whose storage file this one uses.
    """
    values: Optional[np.ndarray] = None
    shape: Optional[Tuple[int, ...]] = None
    dtype: Optional[str] = None
    layout: str = "contiguous"
    axis: int = 0
    strides: Optional[Sequence[int]] = None
    offset: Optional[int] = None
    share: Optional[str] = None
    readonly: bool = False
    unplaced: bool = False   # storage of a few zero bytes whatever the layout (rejected layouts)

    def __post_init__(self):
        if self.values is not None:
            self.shape = tuple(self.values.shape)
            if self.dtype is None:
                self.dtype = _dtype_name(self.values.dtype)
        self.shape = tuple(self.shape)


@dataclass
class Int:
    value: int


@dataclass
class Bool:
    value: bool


@dataclass
class Double:
    value: float


@dataclass
class Scalar:
    """An aclScalar: a float becomes float32, an int int64, a bool bool (unless dtype says)."""
    value: object
    dtype: Optional[str] = None

    def code(self) -> int:
        if self.dtype is not None:
            return DTYPE_CODES[self.dtype]
        if isinstance(self.value, bool):
            return DTYPE_CODES["bool"]
        return DTYPE_CODES["int64" if isinstance(self.value, int) else "float32"]


@dataclass
class IntArray:
    values: Sequence[int]


@dataclass
class Mask:
    flags: Sequence[bool]


class Null:
    pass


NULL = Null()


@dataclass
class Case:
    name: str
    op: str                                   # "SoftmaxBackward", ...
    params: List[Tuple[str, object]]          # C parameter order
    runs: int = 1
    null_out: Optional[str] = None            # "workspaceSize" or "executor"
    status: int = 0                           # expected phase-1 status
    fragments: Sequence[str] = ()             # expected in the message
    reference: Optional[Dict[str, Tuple[np.ndarray, np.ndarray]]] = None
    # filled by write(): param -> (file, flat element indices, dtype)
    placed: Dict[str, Tuple[str, np.ndarray, str]] = field(default_factory=dict)

    def param(self, name):
        return dict(self.params)[name]


def _dtype_name(dt) -> str:
    dt = np.dtype(dt)
    if dt == np_dtype("bfloat16"):
        return "bfloat16"
    return dt.name


def _row_major(shape):
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(shape[i + 1], 1)
    return strides


def _layout(t: T) -> Tuple[List[int], int]:
    """Strides and offset (in elements) of a tensor's layout."""
    shape = t.shape
    if t.strides is not None:
        return list(t.strides), int(t.offset or 0)
    n = len(shape)
    if t.layout == "contiguous" or n == 0:
        return _row_major(shape), 0
    if t.layout == "strided":
        # Reverse memory order (dim 0 varies fastest) with a one-element gap after each run.
        strides = [0] * n
        step = 1
        for i in range(n):
            strides[i] = step
            step *= max(shape[i], 1) + 1
        return strides, 3
    if t.layout == "negative":
        strides = _row_major(shape)
        strides = [s * 2 for s in strides]            # every other element
        strides[0] = -strides[0]
        return strides, 1 + (max(shape[0], 1) - 1) * -strides[0]
    if t.layout == "broadcast":
        strides = _row_major(shape)
        strides[t.axis] = 0
        return strides, 2
    raise ValueError(t.layout)


def _flat_indices(shape, strides, offset) -> np.ndarray:
    idx = np.full(shape, offset, dtype=np.int64)
    for axis, (size, stride) in enumerate(zip(shape, strides)):
        view = [1] * len(shape)
        view[axis] = size
        idx = idx + (np.arange(size, dtype=np.int64) * stride).reshape(view)
    return idx


def write(case: Case, directory: Path, lines: List[str]) -> None:
    """Writes the storage files of a case and appends its manifest records to ``lines``."""
    lines.append(f"case {case.name} {case.op} {case.runs}")
    for name, spec in case.params:
        if isinstance(spec, Int):
            lines.append(f"int {name} {spec.value}")
        elif isinstance(spec, Bool):
            lines.append(f"bool {name} {int(spec.value)}")
        elif isinstance(spec, Double):
            lines.append(f"double {name} {float(spec.value)!r}")
        elif isinstance(spec, Scalar):
            lines.append(f"scalar {name} {spec.code()} {float(spec.value)!r}")
        elif isinstance(spec, IntArray):
            lines.append(f"int_array {name} {len(spec.values)} " + " ".join(str(int(v)) for v in spec.values))
        elif isinstance(spec, Mask):
            lines.append(f"mask {name} {len(spec.flags)} " + " ".join(str(int(f)) for f in spec.flags))
        elif isinstance(spec, Null):
            lines.append(f"null {name}")
        elif isinstance(spec, T):
            lines.append(_write_tensor(case, name, spec, directory))
            if spec.readonly:
                lines.append(f"readonly {name}")
        else:
            raise TypeError(spec)
    if case.null_out:
        lines.append(f"null_out {case.null_out}")
    lines.append("end")


def _write_tensor(case: Case, name: str, t: T, directory: Path) -> str:
    dt = np_dtype(t.dtype)
    strides, offset = _layout(t)
    if t.values is not None and t.layout == "broadcast":
        assert np.all(t.values == np.take(t.values, [0], axis=t.axis)), "broadcast needs constant values"
    empty = any(s == 0 for s in t.shape)
    idx = _flat_indices(t.shape, strides, offset)
    if t.share is not None:
        file = case.placed[t.share][0]
    elif t.unplaced:
        file = f"{case.name}.{name}.bin"
        (directory / file).write_bytes(bytes(4 * dt.itemsize))
    else:
        file = f"{case.name}.{name}.bin"
        hi = offset + sum((s - 1) * st for s, st in zip(t.shape, strides) if st > 0 and s > 0)
        lo = offset + sum((s - 1) * st for s, st in zip(t.shape, strides) if st < 0 and s > 0)
        assert empty or lo >= 0, (name, strides, offset)
        length = (1 if empty else hi + 1) + 2            # two trailing gap elements
        if t.values is not None:                          # input: NaN in the gaps
            storage = np.full(length, np.nan, dtype=dt) if dt.kind == "f" or dt == np_dtype("bfloat16") \
                else np.zeros(length, dtype=dt)
            if not empty:
                storage[idx] = t.values.astype(dt)
            data = storage.tobytes()
        else:
            data = bytes([OUTPUT_SENTINEL]) * (length * dt.itemsize)
        (directory / file).write_bytes(data)
    case.placed[name] = (file, idx, t.dtype)
    dims = " ".join(str(s) for s in t.shape)
    strd = " ".join(str(s) for s in strides)
    return f"tensor {name} {DTYPE_CODES[t.dtype]} {len(t.shape)} {dims} {strd} {offset} {file}"


def write_all(cases: Sequence[Case], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines: List[str] = []
    for case in cases:
        write(case, directory, lines)
    (directory / "manifest.txt").write_text("\n".join(lines) + "\n")


@dataclass
class Result:
    status: int
    workspace: int
    run_status: int
    message: str


def parse_results(stdout: str) -> Dict[str, Result]:
    results = {}
    for line in stdout.splitlines():
        if line.startswith("case\t"):
            _, name, status, ws, run_status, message = (line.split("\t", 5) + [""])[:6]
            results[name] = Result(int(status), int(ws), int(run_status), message)
    return results


def read_output(case: Case, directory: Path, name: str) -> np.ndarray:
    """The values an output tensor holds after the run (through its strides and offset)."""
    file, idx, dtype = case.placed[name]
    storage = np.frombuffer((directory / (file + ".out")).read_bytes(), dtype=np_dtype(dtype))
    return storage[idx] if idx.size else np.zeros(idx.shape, np_dtype(dtype))


def changed_bytes(case: Case, directory: Path, exclude: Sequence[str] = ()) -> List[str]:
    """Storage files whose bytes changed outside the elements of the tensors in ``exclude``."""
    changed = []
    files = {}
    for name, (file, idx, dtype) in case.placed.items():
        files.setdefault(file, []).append((name, idx, dtype))
    for file, members in files.items():
        before = np.frombuffer((directory / file).read_bytes(), np.uint8)
        after = np.frombuffer((directory / (file + ".out")).read_bytes(), np.uint8)
        keep = np.ones(before.size, bool)
        for name, idx, dtype in members:
            if name in exclude and idx.size:
                item = np_dtype(dtype).itemsize
                byte_idx = (idx.reshape(-1, 1) * item + np.arange(item)).reshape(-1)
                keep[byte_idx] = False
        if not np.array_equal(before[keep], after[keep]):
            changed.append(file)
    return changed


def run_environment(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment programs run in: no LD_LIBRARY_PATH (the rpath must do), no ISA override."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "ACLNN_CPU_ISA")}
    env.update(extra or {})
    return env
