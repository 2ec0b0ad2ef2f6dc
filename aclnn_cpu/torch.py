"""Opt-in bridge from PyTorch's CPU kernels to this library.

    import aclnn_cpu.torch
    aclnn_cpu.torch.enable()            # or: with aclnn_cpu.torch.enabled(): ...
    loss.backward()                     # PReLU, GroupNorm, softmax, grid_sample run here
    aclnn_cpu.torch.disable()

``enable()`` registers, through ``torch.library``, a CPU kernel for each aten op the library has
(see ``routes()``); ``disable()`` removes them, which puts torch's own kernels back. Only the CPU
dispatch key is touched: torch's autograd formulas stay, so ``.backward()`` of ``F.prelu``,
``F.group_norm``, ``torch.softmax`` and ``F.grid_sample`` reaches the library's backward
kernels, and the forward aten ops reach its forward kernels where the library has them.

A call the library cannot take runs torch's own kernel instead, as it would without the bridge:
a dtype the library has no kernel for (float64), a dtype, shape or mix its parameter rules
refuse (the library's status 161002), and backward calls that record a graph
(``create_graph=True``, double backward; torch's kernels serve it).

The bridge is reference counted and thread-safe: ``enable()`` holds one reference until
``disable()``, each ``enabled()`` block holds one while it runs, and the kernels stay
registered while any reference is held. Calling ``enable()`` or ``disable()`` twice is the same
as calling it once.
"""
from __future__ import annotations

import contextlib
import threading
import warnings
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional

import torch

import aclnn_cpu as _ac
from aclnn_cpu._errors import AclnnError
from aclnn_cpu._registry import OPS

__all__ = ["counts", "disable", "enable", "enabled", "is_enabled", "registered", "reset_counts", "routes"]

# The dtypes the library's kernels take (the vocabulary's float types short of float64).
_LIBRARY_DTYPES = frozenset({torch.float32, torch.float16, torch.bfloat16})


class _FallThrough(Exception):
    """An adapter's way of saying: torch's own kernel takes this call."""


class Route(NamedTuple):
    aten: str          # the aten operator (overload name included when not the default)
    library: str       # the library's functional name serving it
    adapter: Callable  # adapter(*aten_args) -> aten's result, or raises _FallThrough
    backward: bool     # a backward op: torch's kernel serves the calls that record a graph


def _library_has(name: str) -> bool:
    """Whether the registry has an op whose functional name is ``name`` (and it is built)."""
    return any(op["python"] == name for op in OPS) and hasattr(_ac, name)


def _check_tensors(*tensors: Optional[torch.Tensor]) -> None:
    """Falls through unless every tensor given is a CPU tensor of a library dtype (None stands
    for an absent optional tensor)."""
    for t in tensors:
        if t is not None and (t.dtype not in _LIBRARY_DTYPES or not t.is_cpu):
            raise _FallThrough


def _records_graph(args) -> bool:
    """Whether a backward op's call records a graph: grad mode on and a tensor that requires
    grad (``create_graph=True``, double backward). A plain ``.backward()`` runs with grad mode
    off, so saved inputs that require grad do not count; a forward op's inputs always may
    (autograd records them above this kernel)."""
    return torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)


def _detached(args) -> tuple:
    """The arguments with tensors detached: the same memory, but torch's DLPack export refuses
    a tensor that requires grad (autograd is handled above this kernel)."""
    return tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)


def _channel_weight(self: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The PReLU weight as the library takes it: one element, or 1-D with one per channel.
    aten's _prelu_kernel receives the weight reshaped to broadcast along dim 1 of self
    ([1, C, 1, ...] or [C, 1, ...]); any other broadcast is not a per-channel weight."""
    if weight.numel() == 1:
        return weight
    if self.dim() < 2 or weight.dim() > self.dim() or weight.numel() != self.shape[1]:
        raise _FallThrough
    channel_axis = weight.dim() - (self.dim() - 1)  # dim 1 of self, right-aligned in weight
    for axis, extent in enumerate(weight.shape):
        if axis != channel_axis and extent != 1:
            raise _FallThrough
    return weight.reshape(-1)


def _prelu_kernel(self, weight):
    _check_tensors(self, weight)
    if self.dtype != weight.dtype:  # the library promotes a mix to float32; aten keeps its own rule
        raise _FallThrough
    return _ac.prelu(self, _channel_weight(self, weight))


def _prelu_kernel_backward(grad_output, self, weight):
    _check_tensors(grad_output, self, weight)
    grad_self, grad_weight = _ac.prelu_backward(grad_output, self, _channel_weight(self, weight))
    return grad_self, grad_weight.reshape(weight.shape)


def _native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    _check_tensors(input, weight, bias)
    out, mean, rstd = _ac.group_norm(input, weight, bias, N, C, HxW, group, eps)
    # aten's mean and rstd are [N, group]; its backward formula hands them back to us.
    return out, mean.reshape(N, group), rstd.reshape(N, group)


def _native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask):
    _check_tensors(grad_out, input, mean, rstd, weight)
    return _ac.group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group,
                                   tuple(output_mask))


def _softmax(self, dim, half_to_float):
    _check_tensors(self)
    return _ac.softmax(self, dim, out_dtype=torch.float32 if half_to_float else None)


def _softmax_backward_data(grad_output, output, dim, input_dtype):
    _check_tensors(grad_output, output)
    if input_dtype not in _LIBRARY_DTYPES:
        raise _FallThrough
    out_dtype = None if input_dtype == grad_output.dtype else input_dtype
    return _ac.softmax_backward(grad_output, output, dim, out_dtype=out_dtype)


def _grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    _check_tensors(input, grid)
    return _ac.grid_sampler2d(input, grid, interpolation_mode, padding_mode, align_corners)


def _grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
                              align_corners, output_mask):
    _check_tensors(grad_output, input, grid)
    return _ac.grid_sampler2d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
                                       align_corners, tuple(output_mask))


# Every route the bridge knows; routes() keeps those whose library op is present.
ALL_ROUTES = (
    Route("_prelu_kernel", "prelu", _prelu_kernel, False),
    Route("_prelu_kernel_backward", "prelu_backward", _prelu_kernel_backward, True),
    Route("native_group_norm", "group_norm", _native_group_norm, False),
    Route("native_group_norm_backward", "group_norm_backward", _native_group_norm_backward, True),
    Route("_softmax", "softmax", _softmax, False),
    Route("_softmax_backward_data", "softmax_backward", _softmax_backward_data, True),
    Route("grid_sampler_2d", "grid_sampler2d", _grid_sampler_2d, False),
    Route("grid_sampler_2d_backward", "grid_sampler2d_backward", _grid_sampler_2d_backward, True),
)


def routes() -> List[Route]:
    """The routes enable() registers: those of ALL_ROUTES whose library op is in the registry."""
    return [r for r in ALL_ROUTES if _library_has(r.library)]


def _kernel(route: Route, original) -> Callable:
    """The CPU kernel registered for ``route``: the library's result, or torch's own kernel
    (``original``, fetched before the override) for a call the library cannot take."""
    def kernel(keyset, *args):
        try:
            if route.backward and _records_graph(args):
                raise _FallThrough
            result = route.adapter(*_detached(args))
        except (_FallThrough, AclnnError):
            _count(route.aten, 1)
            return original.call_boxed(keyset, *args)
        _count(route.aten, 0)
        return result
    kernel.__name__ = f"aclnn_cpu_{route.aten}"
    return kernel


_counts_lock = threading.Lock()
_counts: Dict[str, List[int]] = {}  # aten op -> [calls the library served, calls torch served]


def _count(aten: str, which: int) -> None:
    with _counts_lock:
        _counts.setdefault(aten, [0, 0])[which] += 1


def counts() -> Dict[str, tuple]:
    """aten op -> (calls the library served, calls that fell through to torch) since the last
    reset_counts(): how much of a workload the bridge takes."""
    with _counts_lock:
        return {aten: tuple(pair) for aten, pair in _counts.items()}


def reset_counts() -> None:
    with _counts_lock:
        _counts.clear()


_lock = threading.Lock()
_explicit = False           # enable() was called and disable() not since
_contexts = 0               # enabled() blocks running
_library: Optional[torch.library.Library] = None  # the registrations while the bridge is on


def _register() -> torch.library.Library:
    library = torch.library.Library("aten", "IMPL")
    try:
        for route in routes():
            original = torch.library.get_kernel(f"aten::{route.aten}", "CPU")
            with warnings.catch_warnings():
                # torch warns on every override of a registered kernel; overriding is the point.
                warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
                library.impl(route.aten, _kernel(route, original), "CPU", with_keyset=True)
    except BaseException:
        library._destroy()
        raise
    return library


def _sync() -> None:
    """Registers or removes the kernels to match the references held (call with _lock held)."""
    global _library
    want = _explicit or _contexts > 0
    if want and _library is None:
        _library = _register()
    elif not want and _library is not None:
        _library._destroy()
        _library = None


def enable() -> None:
    """Route torch's CPU kernels of routes() to the library until disable()."""
    global _explicit
    with _lock:
        _explicit = True
        _sync()


def disable() -> None:
    """Drop enable()'s hold; with no enabled() block running, torch's own kernels are back."""
    global _explicit
    with _lock:
        _explicit = False
        _sync()


@contextlib.contextmanager
def enabled() -> Iterator[None]:
    """The bridge on for the block (it stays on after it when enable() holds it)."""
    global _contexts
    with _lock:
        _contexts += 1
        try:
            _sync()
        except BaseException:
            _contexts -= 1
            raise
    try:
        yield
    finally:
        with _lock:
            _contexts -= 1
            _sync()


def is_enabled() -> bool:
    """Whether the library's kernels are registered now."""
    with _lock:
        return _library is not None


def registered() -> Dict[str, str]:
    """aten op -> library op of the routes registered now (empty while the bridge is off)."""
    with _lock:
        return {r.aten: r.library for r in routes()} if _library is not None else {}
