"""PyTorch float64 references for the golden data `python -m aclnn_cpu golden` writes, recomputed
from the written inputs of a case folder (tests/test_golden_cases.py, benchmarks/golden_campaign.py).

Each reference takes the inputs and attributes in the op's C parameter order and returns its
outputs in C order (None where outputMask leaves one out). Big cases are recomputed in slices
along a batch axis (the ops are independent across it; per-slice gamma/beta gradients add up).
"""
from __future__ import annotations

import json
import os

import numpy as np
from support import UNIT_ROUNDOFF, np_dtype
# Error allowed beyond the output's rounding, in units of the golden's roundoff and relative to
# the output's largest magnitude: the reductions' fp32 error (sums over up to millions of terms
# in pairwise or blocked order) stays far below it; a wrong formula or index does not.
REDUCTION_ULPS = 512


def _t(torch, x):
    return torch.from_numpy(np.array(x, copy=True, order="C"))


def _prelu_backward(torch, inputs, attrs):
    grad, x, w = (_t(torch, v).requires_grad_(i > 0) for i, v in enumerate(inputs[:3]))
    y = torch.nn.functional.prelu(x, w.reshape(-1) if x.dim() >= 2 else w)
    y.backward(grad.expand_as(y))
    return [x.grad.numpy(), w.grad.numpy().reshape(-1) if w.numel() > 1 else w.grad.numpy()]


def _softmax_backward(torch, inputs, attrs):
    grad, y = (_t(torch, v) for v in inputs[:2])
    return [torch._softmax_backward_data(grad, y, attrs["dim"], grad.dtype).numpy()]


def _group_norm_backward(torch, inputs, attrs):
    grad, x, mean, rstd = (_t(torch, v) for v in inputs[:4])
    # gamma absent means ones (docs/contract.md); the aten op itself fails on a None gamma
    gamma = _t(torch, inputs[4]) if inputs[4] is not None else torch.ones(attrs["C"], dtype=x.dtype)
    mask = list(attrs["outputMask"])
    out = torch.ops.aten.native_group_norm_backward(grad, x, mean, rstd, gamma, attrs["N"], attrs["C"],
                                                    attrs["HxW"], attrs["group"], mask)
    return [o.numpy() if m else None for o, m in zip(out, mask)]


def _grid_sampler2d_backward(torch, inputs, attrs):
    grad, x, grid = (_t(torch, v) for v in inputs[:3])
    mask = list(attrs["outputMask"])
    out = torch.ops.aten.grid_sampler_2d_backward(grad, x, grid, attrs["interpolationMode"], attrs["paddingMode"],
                                                  attrs["alignCorners"], mask)
    return [o.numpy() if m else None for o, m in zip(out, mask)]


def _prelu(torch, inputs, attrs):
    x, w = (_t(torch, v) for v in inputs[:2])
    return [torch.nn.functional.prelu(x, w.reshape(-1) if x.dim() >= 2 else w).numpy()]


def _softmax(torch, inputs, attrs):
    (dim,) = [v for v in attrs.values()][:1]
    return [torch.softmax(_t(torch, inputs[0]), dim).numpy()]


def _group_norm(torch, inputs, attrs):
    x, gamma, beta = (_t(torch, v) if v is not None else None for v in inputs[:3])
    n, c, hw, group, eps = list(attrs.values())[:5]
    return [o.numpy() for o in torch.native_group_norm(x, gamma, beta, n, c, hw, group, eps)]


def _grid_sampler2d(torch, inputs, attrs):
    x, grid = (_t(torch, v) for v in inputs[:2])
    interp, pad, align = list(attrs.values())[:3]
    return [torch.grid_sampler_2d(x, grid, interp, pad, align).numpy()]


# op -> (reference, how to slice a big case: {input index: axis}, per-output "cat"/"sum", the
# attribute holding the batch size or None)
REFERENCES = {
    "aclnnPreluBackward": (_prelu_backward, None),
    "aclnnSoftmaxBackward": (_softmax_backward, "softmax"),
    "aclnnGroupNormBackward": (_group_norm_backward, ({0: 0, 1: 0, 2: 0, 3: 0}, ["cat", "sum", "sum"], "N")),
    "aclnnGridSampler2DBackward": (_grid_sampler2d_backward, ({0: 0, 1: 0, 2: 0}, ["cat", "cat"], None)),
    # forward ops, positional (their C signatures: self/input first, attributes in C order)
    "aclnnPrelu": (_prelu, None),
    "aclnnSoftmax": (_softmax, None),
    "aclnnGroupNorm": (_group_norm, None),
    "aclnnGridSampler2D": (_grid_sampler2d, None),
}


def load_case(folder):
    with open(os.path.join(folder, "case.json")) as f:
        manifest = json.load(f)

    def load(entry, mmap=True):
        dtype = np_dtype(entry["dtype"])
        path = os.path.join(folder, entry["file"])
        shape = tuple(entry["shape"])
        if mmap and int(np.prod(shape)) > 0:
            return np.memmap(path, dtype=dtype, mode="r", shape=shape)
        return np.fromfile(path, dtype=dtype).reshape(shape)

    return manifest, load


def _decode(value):
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    return value


def recompute(torch, folder, registry_op, slice_elements=1 << 25, dtype=np.float64):
    """{output name: reference} recomputed in `dtype` (default float64) from the case folder's
    written inputs."""
    manifest, load = load_case(folder)
    fn, split = REFERENCES[manifest["aclnn_name"]]
    attrs = {k: _decode(v) for k, v in manifest["attrs"].items()}
    written = {e["name"]: load(e) for e in manifest["inputs"]}
    params = [p for p in registry_op["params"] if p["kind"] == "input"]
    inputs = [written.get(p["name"]) for p in params]
    names = [p["name"] for p in registry_op["params"] if p["kind"] == "output"]
    biggest = max((int(np.prod(v.shape)) for v in inputs if v is not None), default=0)
    if split == "softmax" and inputs[0].ndim >= 2:
        axis = 1 if attrs["dim"] % inputs[0].ndim == 0 else 0
        split = ({0: axis, 1: axis}, ["cat"], None)
    if isinstance(split, tuple):
        axes, combine, batch_attr = split
        first = min(axes)
        length = inputs[first].shape[axes[first]]
    if not isinstance(split, tuple) or biggest <= slice_elements or length <= 1:
        results = fn(torch, [None if v is None else np.asarray(v, dtype) for v in inputs], attrs)
        return {n: r for n, r in zip(names, results) if r is not None}
    step = max(1, length * slice_elements // biggest)
    parts = None
    for start in range(0, length, step):
        stop = min(length, start + step)
        sliced = [v[(slice(None),) * axes[i] + (slice(start, stop),)] if i in axes and v is not None else v
                  for i, v in enumerate(inputs)]
        sub_attrs = dict(attrs, **({batch_attr: stop - start} if batch_attr else {}))
        results = fn(torch, [None if v is None else np.asarray(v, dtype) for v in sliced], sub_attrs)
        if parts is None:
            parts = [[] if r is not None else None for r in results]
        for part, r in zip(parts, results):
            if part is not None:
                part.append(r)
    return {name: np.concatenate(part, axis=axes[first]) if how == "cat" else np.sum(part, axis=0)
            for name, part, how in zip(names, parts, combine) if part is not None}


def check_against(actual, reference, dtype_name, what, overflow=None, chunk=1 << 24):
    """|actual - reference| within actual's rounding of the reference plus REDUCTION_ULPS of the
    golden's roundoff relative to the output's scale; inf and nan exactly where the reference,
    rounded to actual's dtype, has them. `overflow`: positions where the op itself, computed by
    PyTorch in actual's dtype, is not finite while the float64 result is (arithmetic past the
    dtype's range): there actual must not be finite either. Returns the worst error / bound.
    Chunk by chunk, so that a gigabyte output needs no float64 copies of its whole."""
    assert tuple(actual.shape) == tuple(reference.shape), f"{what}: shape {actual.shape}, reference {reference.shape}"
    dtype = np_dtype(dtype_name)
    flat_a, flat_ref = np.asarray(actual).reshape(-1), np.asarray(reference).reshape(-1)
    flat_over = overflow.reshape(-1) if overflow is not None else None
    finite_ref = [np.abs(flat_ref[i:i + chunk][np.isfinite(flat_ref[i:i + chunk])]) for i in range(0, flat_ref.size, chunk)]
    scale = max((float(f.max()) for f in finite_ref if f.size), default=0.0)
    u = UNIT_ROUNDOFF[dtype]
    wide = UNIT_ROUNDOFF[np.dtype(np.float64 if dtype == np.float64 else np.float32)]
    worst = 0.0
    for start in range(0, flat_a.size, chunk):
        a = flat_a[start:start + chunk].astype(np.float64)
        ref = flat_ref[start:start + chunk].astype(np.float64)
        with np.errstate(over="ignore"):
            r = ref.astype(dtype).astype(np.float64)
        if flat_over is not None:
            over = flat_over[start:start + chunk]
            assert not np.isfinite(a[over]).any(), f"{what}: finite where the op overflows {dtype_name}"
            r = np.where(over, a, r)  # compared as equal there
        assert np.array_equal(np.isnan(a), np.isnan(r)), \
            f"{what}: nan positions differ ({int(np.isnan(a).sum())} vs {int(np.isnan(r).sum())} from {start})"
        inf = np.isinf(r)
        assert np.array_equal(np.isinf(a), inf) and np.array_equal(a[inf], r[inf]), f"{what}: inf positions differ"
        finite = np.isfinite(r)
        if not finite.any():
            continue
        ref = ref[finite]
        bound = u * np.abs(ref) + REDUCTION_ULPS * wide * (np.abs(ref) + scale) + np.finfo(np.float64).tiny
        error = np.abs(a[finite] - ref)
        ratio = error / bound
        worst = max(worst, float(ratio.max()))
        assert worst <= 1.0, (f"{what}: error up to {worst:.3g} x the bound; max error "
                              f"{float(np.max(error)):.3g} at scale {scale:.3g}")
    return worst


def verify_case(torch, folder, registry_op):
    """Checks every golden and same-precision output of a case folder against PyTorch float64;
    returns ({output: worst error / bound of the golden}, {output: positions past the range}).

    Where the golden is not finite but the float64 result is, and the golden's dtype is the case's
    own (the op accepts no wider one), PyTorch's op in that dtype decides: it
    must overflow at the same positions (the official benchmark computes it that way)."""
    manifest, load = load_case(folder)
    reference = recompute(torch, folder, registry_op)
    golden = {e["name"]: load(e) for e in manifest["outputs"]}
    overflow, counts = {}, {}
    suspicious = [n for n, g in golden.items()
                  if not np.isfinite(np.asarray(g)).all() and np.isfinite(reference[n]).any()]
    if suspicious and manifest["golden_is_same_precision"] and manifest["case_dtype"] != "float64":
        own = recompute(torch, folder, registry_op, dtype=np.dtype(manifest["case_dtype"]))
        for name in suspicious:
            mask = ~np.isfinite(own[name]) & np.isfinite(reference[name])
            if mask.any():
                overflow[name], counts[name] = mask, int(mask.sum())
    worst = {}
    for key in ("outputs", "same_precision"):
        for entry in manifest[key]:
            name = entry["name"]
            assert name in reference, f"{folder}: {name} has no reference"
            ratio = check_against(load(entry), reference[name], entry["dtype"], f"{folder} {key} {name}",
                                  overflow.get(name))
            if key == "outputs":
                worst[name] = ratio
    assert {e["name"] for e in manifest["outputs"]} == set(reference), f"{folder}: outputs differ from the reference's"
    return worst, counts
