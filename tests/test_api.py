"""The Python API contract shared by every op: errors, executors, array kinds, configuration, CLI.

Softmax backward is the vehicle; its numbers are checked against a float64 formula here too, so a
passing test means the call really went through the kernel.
"""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import aclnn_cpu as ac
from aclnn_cpu import _config
from support import BFLOAT16, f64

GO = np.arange(8, dtype=np.float32).reshape(4, 2)
Y = np.array([1, 1, 1, 2, 2, 2, 3, 3], dtype=np.float32).reshape(4, 2)


def softmax_backward_ref(go, y, dim):
    go, y = f64(go), f64(y)
    return y * (go - (go * y).sum(axis=dim, keepdims=True))


def test_status_codes_and_exception_classes():
    assert ac.Status.ERR_PARAM_NULLPTR == 161001
    assert ac.Status.ERR_PARAM_INVALID == 161002
    assert ac.Status.ERR_RUNTIME_ERROR == 361001
    assert issubclass(ac.ParamNullptrError, ac.AclnnError) and issubclass(ac.ParamNullptrError, TypeError)
    assert issubclass(ac.ParamInvalidError, ac.AclnnError) and issubclass(ac.ParamInvalidError, ValueError)


def test_error_carries_status_and_validator_message():
    with pytest.raises(ac.ParamInvalidError) as info:
        ac.softmax_backward(GO, Y, 2)
    assert info.value.status == 161002
    assert "aclnnSoftmaxBackward" in str(info.value) and "dim 2" in str(info.value)
    with pytest.raises(ac.ParamNullptrError) as info:
        ac.softmax_backward(GO, None, 0)
    assert info.value.status == 161001


def test_two_phase_matches_functional_and_consumes_executor():
    out = np.zeros((4, 2), np.float32)
    ws, ex = ac.aclnnSoftmaxBackwardGetWorkspaceSize(GO, Y, 0, out)
    assert isinstance(ex, ac.Executor) and ws == ex.workspace_size
    ac.aclnnSoftmaxBackward(np.empty(ws, np.uint8) if ws else None, ws, ex)
    np.testing.assert_array_equal(f64(out), softmax_backward_ref(GO, Y, 0))
    assert ex.is_consumed
    with pytest.raises(ac.ParamInvalidError) as info:
        ac.aclnnSoftmaxBackward(None, ws, ex)
    assert info.value.status == 161002


def test_repeatable_executor_runs_many_times_until_destroyed():
    go = GO.copy()
    out = np.zeros((4, 2), np.float32)
    ws, ex = ac.aclnnSoftmaxBackwardGetWorkspaceSize(go, Y, 1, out)
    ex.set_repeatable()
    for scale in (1.0, 2.0, -3.0):
        go[...] = GO * scale  # the executor reads the arrays at run time
        ac.aclnnSoftmaxBackward(None, ws, ex)
        np.testing.assert_allclose(f64(out), softmax_backward_ref(go, Y, 1), rtol=1e-6)
    ex.destroy()
    with pytest.raises(ac.ParamInvalidError):
        ac.aclnnSoftmaxBackward(None, ws, ex)


def test_executor_keeps_its_arrays_alive():
    out = np.zeros((64, 32), np.float32)
    rng = np.random.default_rng(0)
    go = rng.standard_normal((64, 32)).astype(np.float32)
    y = rng.random((64, 32)).astype(np.float32)
    expected = softmax_backward_ref(go, y, 1)
    ws, ex = ac.aclnnSoftmaxBackwardGetWorkspaceSize(go, y, 1, out)
    del go, y
    gc.collect()
    np.ones((64, 32), np.float32)  # reuse freed memory if it had been freed
    ac.aclnnSoftmaxBackward(None, ws, ex)
    np.testing.assert_allclose(f64(out), expected, rtol=1e-5, atol=1e-6)


def test_executor_of_another_op_is_refused():
    _, ex = ac.aclnnSoftmaxBackwardGetWorkspaceSize(GO, Y, 0, np.zeros((4, 2), np.float32))
    with pytest.raises(ac.ParamInvalidError):
        ac.aclnnPreluBackward(None, 0, ex)
    ex.destroy()


def test_workspace_checks():
    out = np.zeros((4, 2), np.float32)
    ws, ex = ac.aclnnSoftmaxBackwardGetWorkspaceSize(GO, Y, 0, out)
    with pytest.raises(ac.ParamNullptrError):
        ac.aclnnSoftmaxBackward(None, ws + 64, ex)  # workspaceSize > 0 with no workspace
    with pytest.raises(ac.ParamInvalidError):
        ac.aclnnSoftmaxBackward(np.empty(8, np.uint8), ws + 64, ex)  # buffer smaller than stated
    with pytest.raises(ac.ParamNullptrError):
        ac.aclnnSoftmaxBackward(None, 0, None)
    np.testing.assert_array_equal(out, 0)  # nothing ran
    ac.aclnnSoftmaxBackward(bytearray(ws + 64), ws + 64, ex)  # any writable buffer
    np.testing.assert_array_equal(f64(out), softmax_backward_ref(GO, Y, 0))


def test_rejected_call_writes_nothing_and_keeps_inputs():
    out = np.full((4, 2), 7.0, np.float32)
    go, y = GO.copy(), Y.copy()
    with pytest.raises(ac.ParamInvalidError):
        ac.softmax_backward(go, y.astype(np.float16), 0, out=out)
    np.testing.assert_array_equal(out, 7.0)
    np.testing.assert_array_equal(go, GO)
    np.testing.assert_array_equal(y, Y)


def test_read_only_and_overlapping_outputs_are_invalid():
    ro = np.zeros((4, 2), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ac.ParamInvalidError, match="read-only"):
        ac.softmax_backward(GO, Y, 0, out=ro)
    go = GO.copy()
    with pytest.raises(ac.ParamInvalidError, match="overlap"):
        ac.softmax_backward(go, Y, 0, out=go)
    with pytest.raises(ac.ParamInvalidError):
        ac.softmax_backward(GO, Y, 0, out=np.broadcast_to(np.zeros(2, np.float32), (4, 2)))


def test_misaligned_and_byte_swapped_arrays_are_refused_clearly():
    swapped = GO.astype(GO.dtype.newbyteorder(">"))
    with pytest.raises(ac.ParamInvalidError, match="byte order"):
        ac.softmax_backward(swapped, Y, 0)
    raw = np.zeros(4 * 8 + 1, np.uint8)[1:].view(np.float32).reshape(4, 2)  # 1-byte offset
    with pytest.raises(ac.ParamInvalidError, match="aligned"):
        ac.softmax_backward(raw, Y, 0)


def test_every_message_starts_with_the_op_name():
    """Errors raised before the C validator (array conversion, out=, masks, scalar types) name
    the aclnn function first, as the validator's own messages do (docs/ops.md)."""
    raw = np.zeros(4 * 8 + 1, np.uint8)[1:].view(np.float32).reshape(4, 2)
    grid = np.zeros((1, 2, 2, 2), np.float32)
    image = np.zeros((1, 1, 2, 2), np.float32)
    calls = [
        (ac.ParamInvalidError, lambda: ac.softmax_backward(raw, Y, 0), "aclnnSoftmaxBackward: gradOutput"),
        (ac.ParamInvalidError, lambda: ac.aclnnSoftmaxBackwardGetWorkspaceSize(GO, Y, 0, raw),
         "aclnnSoftmaxBackward: out"),
        (ac.ParamInvalidError, lambda: ac.grid_sampler2d_backward(image, image, grid, out=(None,)),
         "aclnnGridSampler2DBackward: out"),
        (ac.ParamInvalidError, lambda: ac.grid_sampler2d_backward(image, image, grid, output_mask="ab"),
         "aclnnGridSampler2DBackward: outputMask"),
        (TypeError, lambda: ac.softmax_backward(GO, Y, 0.0), "aclnnSoftmaxBackward: dim"),
    ]
    for error, call, start in calls:
        with pytest.raises(error) as info:
            call()
        message = str(info.value)
        assert message.removeprefix("[161002] ").startswith(start), message


def test_scalar_arguments_are_not_truncated_or_taken_for_their_truth():
    """An integer parameter takes integers only (a float such as interpolationMode 1.5 had run
    as nearest), a bool parameter and a mask's entries bools or 0/1 (a string had been True);
    through the functional and the two-phase API alike, and nothing is written."""
    rng = np.random.default_rng(0)
    go = rng.standard_normal((1, 1, 3, 3)).astype(np.float32)
    image = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    grid = rng.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32)
    want = ac.grid_sampler2d_backward(go, image, grid, 1, 0, False)
    # Integers of any kind, NumPy bools and 0/1 for flags give the plain call's result.
    for args in [(np.int64(1), np.int32(0), np.bool_(False)), (1, 0, 0), (1, False, False)]:
        got = ac.grid_sampler2d_backward(go, image, grid, *args, output_mask=[np.bool_(True), 1])
        for g, w in zip(got, want):
            assert np.array_equal(g, w)
    bad = [((1.5, 0, False), TypeError, "interpolation_mode"), ((1, 2.0, False), TypeError, "padding_mode"),
           ((1, 0, None), TypeError, "align_corners"), ((1, 0, "no"), TypeError, "align_corners"),
           ((1, 0, 2), TypeError, "align_corners"), ((1 << 63, 0, False), ac.ParamInvalidError, "int64 range")]
    for args, error, what in bad:
        outs = (np.full_like(image, 7.0), np.full_like(grid, 7.0))
        with pytest.raises(error, match=what):
            ac.grid_sampler2d_backward(go, image, grid, *args, out=outs)
        with pytest.raises(error):
            ac.aclnnGridSampler2DBackwardGetWorkspaceSize(go, image, grid, *args, (True, True), *outs)
        assert (outs[0] == 7.0).all() and (outs[1] == 7.0).all()
    for mask in ["ab", ("yes", True), (2, True), (None, True), 5]:
        outs = (np.full_like(image, 7.0), np.full_like(grid, 7.0))
        with pytest.raises(ac.ParamInvalidError, match="outputMask"):
            ac.aclnnGridSampler2DBackwardGetWorkspaceSize(go, image, grid, 1, 0, False, mask, *outs)
        assert (outs[0] == 7.0).all() and (outs[1] == 7.0).all()
    x = np.ones((2, 4, 3), np.float32)
    with pytest.raises(TypeError, match="group"):
        ac.group_norm_backward(x, x, np.zeros(4, np.float32), np.ones(4, np.float32), None, 2, 4, 3, 2.0)
    with pytest.raises(TypeError, match="dim"):
        ac.aclnnSoftmaxBackwardGetWorkspaceSize(GO, Y, 1.0, np.empty_like(GO))


def test_bfloat16_rejected_on_atlas_training(product):
    go, y = GO.astype(BFLOAT16), Y.astype(BFLOAT16)
    ac.softmax_backward(go, y, 0)  # fine on the default (Atlas A2)
    product("atlas_training")
    with pytest.raises(ac.ParamInvalidError) as info:
        ac.softmax_backward(go, y, 0)
    assert info.value.status == 161002 and "bfloat16" in str(info.value)
    ac.softmax_backward(GO, Y, 0)  # float32 still fine
    with pytest.raises(ValueError):
        ac.set_product("atlas_unknown")


def test_thread_count_setting(threads):
    threads(1)
    assert ac.get_num_threads() == 1
    with pytest.raises(ValueError):
        ac.set_num_threads(0)


def test_torch_tensors_in_and_out(torch):
    go = torch.arange(8, dtype=torch.float32).reshape(4, 2)
    y = torch.tensor(Y)
    out = torch.zeros(4, 2)
    ac.softmax_backward(go, y, 0, out=out)  # written in place through DLPack
    np.testing.assert_array_equal(out.numpy(), softmax_backward_ref(GO, Y, 0))
    out_t = torch.zeros(2, 4).t()  # a strided (transposed) torch view
    ac.softmax_backward(go.to(torch.bfloat16), y.to(torch.bfloat16), 1, out=out_t)
    ref = softmax_backward_ref(go.to(torch.bfloat16).float().numpy(), y.to(torch.bfloat16).float().numpy(), 1)
    np.testing.assert_allclose(out_t.numpy(), ref, rtol=2 ** -7)
    with pytest.raises(ac.ParamInvalidError):
        ac.softmax_backward(go.requires_grad_(), y, 0)


class _DLPackOnly:
    """A torch tensor seen only through DLPack: the reference for the glue's direct torch path."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None):
        return self.tensor.__dlpack__()

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def _outcome(fn):
    """What a call did: its result, or the error's class, status and message."""
    try:
        return ("ok", fn())
    except ac.AclnnError as exc:
        return ("error", type(exc), exc.status, str(exc))


def _as_numpy(t):
    """A NumPy view of a CPU torch tensor, strides kept (bfloat16 as ml_dtypes')."""
    import torch

    t = t.detach().resolve_neg()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(BFLOAT16)
    return t.numpy()


def test_torch_tensors_are_read_as_dlpack_reads_them(torch):
    # Plain CPU tensors are read through their own accessors (DLPack costs ~3 us a tensor); the
    # call must see exactly what DLPack shows it: same values, layouts, dtypes and errors.
    rng = np.random.default_rng(5)
    base = torch.from_numpy(rng.standard_normal((6, 8, 5)).astype(np.float32))
    prob = torch.softmax(torch.from_numpy(rng.standard_normal((6, 8, 5)).astype(np.float32)), -1)
    variants = {
        "contiguous": lambda t: t.clone(),
        "transposed": lambda t: t.transpose(0, 2).contiguous().transpose(0, 2),
        "channels_last": lambda t: t.unsqueeze(0).contiguous(memory_format=torch.channels_last)[0],
        "offset view": lambda t: torch.cat([t, t])[6:],
        "strided view": lambda t: torch.cat([t, t], dim=2)[:, :, ::2],
        "broadcast": lambda t: t[:1].expand(6, 8, 5),
        "bfloat16": lambda t: t.to(torch.bfloat16),
        "float16": lambda t: t.to(torch.float16),
        "float64": lambda t: t.double(),
        "int32": lambda t: t.to(torch.int32),
        "requires grad": lambda t: t.clone().requires_grad_(),
        "empty": lambda t: t[:0],
        "parameter": lambda t: torch.nn.Parameter(t.clone(), requires_grad=False),
    }
    def bits(t):
        return t.view(torch.int16) if t.element_size() == 2 else t

    for name, make in variants.items():
        go, y = make(base), make(prob)
        for dim in (0, 2):
            out_dtype = go.dtype if go.is_floating_point() else torch.float32
            via_dlpack_out, via_torch_out = torch.empty(go.shape, dtype=out_dtype), torch.empty(go.shape, dtype=out_dtype)
            via_dlpack = _outcome(lambda: ac.softmax_backward(_DLPackOnly(go), _DLPackOnly(y), dim, out=via_dlpack_out))
            via_torch = _outcome(lambda: ac.softmax_backward(go, y, dim, out=via_torch_out))
            assert via_torch[0] == via_dlpack[0], (name, via_torch, via_dlpack)
            if via_torch[0] == "error":
                assert via_torch[1:] == via_dlpack[1:], name
                continue
            assert torch.equal(bits(via_torch_out), bits(via_dlpack_out)), name
            expected = softmax_backward_ref(f64(_as_numpy(go)), f64(_as_numpy(y)), dim)
            np.testing.assert_allclose(via_torch_out.float().numpy(), expected, rtol=2 ** -7, atol=2 ** -7,
                                       err_msg=name)
        if via_torch[0] == "ok":  # allocating calls: outputs in the input's layout, torch's or NumPy's
            allocated = ac.softmax_backward(go, y, 2)
            reference = ac.softmax_backward(_as_numpy(go), _as_numpy(y), 2)
            assert isinstance(allocated, torch.Tensor) and allocated.stride() == tuple(
                s // reference.itemsize for s in reference.strides), name
            assert bits(allocated).numpy().tobytes() == np.ascontiguousarray(reference).tobytes(), name


def test_torch_negative_views_are_read_as_their_values(torch):
    # torch._neg_view(m) reads as -m over m's memory; DLPack (torch 2.13) exports the memory as it
    # is, so the glue resolves such inputs and refuses such outputs.
    go, y = torch.from_numpy(GO.copy()), torch.from_numpy(Y.copy())
    neg_go = torch._neg_view(-go)
    assert neg_go.is_neg() and torch.equal(neg_go, go)
    np.testing.assert_array_equal(ac.softmax_backward(neg_go, y, 0).numpy(), softmax_backward_ref(GO, Y, 0))
    out = torch.full((4, 2), 7.0)
    neg_out = torch._neg_view(out)
    with pytest.raises(ac.ParamInvalidError) as info:
        ac.softmax_backward(go, y, 0, out=neg_out)
    assert info.value.status == 161002 and "negative view" in str(info.value)
    assert (out == 7.0).all()


def test_torch_tensors_off_the_cpu_are_invalid(torch):
    # A meta tensor has no DLPack device code: torch's __dlpack_device__ raises a bare ValueError,
    # which used to escape without the op's name, the argument's or a status.
    meta = torch.empty(4, 2, device="meta")
    out = np.full((4, 2), 7.0, np.float32)
    for args in ((meta, Y), (GO, meta)):
        with pytest.raises(ac.ParamInvalidError) as info:
            ac.softmax_backward(*args, 0, out=out)
        assert info.value.status == 161002 and "DLPack device" in str(info.value)
        assert "aclnnSoftmaxBackward" in str(info.value)
    with pytest.raises(ac.ParamInvalidError):
        ac.softmax_backward(GO, Y, 0, out=torch.empty(4, 2, device="meta"))
    assert (out == 7.0).all()


def test_concurrent_calls_from_many_threads():
    rng = np.random.default_rng(1)
    cases = [(rng.standard_normal((33, 17)).astype(np.float32), rng.random((33, 17)).astype(np.float32))
             for _ in range(8)]
    expected = [softmax_backward_ref(g, y, 1) for g, y in cases]
    errors = []

    def worker(i):
        try:
            for _ in range(200):
                got = ac.softmax_backward(*cases[i], 1)
                np.testing.assert_allclose(f64(got), expected[i], rtol=1e-5, atol=1e-6)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors, errors[0]


def test_config_reports_isa_threads_product():
    cfg = ac.config()
    assert cfg["isa"] in cfg["available_isas"]
    assert cfg["product"] == ac.get_product()
    assert cfg["threads"] == ac.get_num_threads()
    assert set(cfg["ops"]) == {op["name"] for op in ac.OPS}


def test_configuration_lists_the_declared_isa_levels_and_product_lines():
    """set_isa, set_product and their docstrings name every choice (the default product first);
    each line reports its SoC."""
    with pytest.raises(ValueError) as info:
        _config.set_isa("sse9")
    assert str(info.value) == "unknown ISA level 'sse9'; valid: 'baseline', 'avx2', 'avx512'"
    with pytest.raises(ValueError) as info:
        ac.set_product("atlas_a3")
    assert str(info.value) == "unknown product 'atlas_a3'; valid: 'atlas_a2', 'atlas_training', 'atlas_inference'"
    assert list(_config.products()) == ["atlas_a2", "atlas_training", "atlas_inference"]
    assert "'atlas_a2' (default), 'atlas_training' or 'atlas_inference'." in _config.set_product.__doc__
    assert "'baseline', 'avx2' or 'avx512' (ValueError" in _config.set_isa.__doc__
    previous = ac.get_product()
    try:
        socs = {}
        for product in _config.products():
            ac.set_product(product)
            socs[product] = _config.soc_name()
    finally:
        ac.set_product(previous)
    assert socs == {"atlas_training": "Ascend910A", "atlas_a2": "Ascend910B1", "atlas_inference": "Ascend310P3"}


def test_unknown_isa_in_the_environment_is_ignored_naming_the_levels():
    code = "from aclnn_cpu import _config; print(_config.get_isa() == _config.best_isa())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[1], env=dict(os.environ, ACLNN_CPU_ISA="sse9"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
    assert "aclnn_cpu: ignoring ACLNN_CPU_ISA=sse9 (expected baseline, avx2 or avx512)" in done.stderr


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "aclnn_cpu", *args], capture_output=True, text=True,
                          timeout=300, cwd="/")


def test_cli_info_ops_flags():
    info = run_cli("info")
    assert info.returncode == 0 and "isa" in info.stdout
    ops = run_cli("ops")
    assert ops.returncode == 0
    for op in ac.OPS:
        assert op["name"] in ops.stdout
    flags = run_cli("--cflags", "--libs")
    assert flags.returncode == 0
    assert f"-I{ac.get_include()}" in flags.stdout and "-laclnn_cpu" in flags.stdout


def test_cli_demo_runs_every_documented_example():
    demo = run_cli("demo")
    assert demo.returncode == 0, demo.stderr
    for op in ac.OPS:
        assert op["name"] in demo.stdout
    assert "-28." in demo.stdout  # softmax example: out[0,0] = 1*(0 - (0+2+8+18)) = -28


def test_cli_stops_quietly_when_the_reader_goes_away():
    # `python -m aclnn_cpu demo | head -3`: the reader closes the pipe. Closed before the demo
    # writes anything, so every write fails (reading a few lines first would race with the
    # demo's buffered output, which fits in the pipe). No traceback, the shell's SIGPIPE status.
    proc = subprocess.Popen([sys.executable, "-m", "aclnn_cpu", "demo"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd="/")
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


# --------------------------------------------------------------------------------------------
# Outputs the library allocates start on a 64-byte line (streaming stores need whole lines);
# empty_aligned gives the same to callers preparing out= arrays.

@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("shape", [(3000,), (64, 130), 5000, (2, 0, 3000), (2, 3), (), [4, 5], np.int64(7)])
def test_empty_aligned(dtype, shape):
    a = ac.empty_aligned(shape, dtype)
    expected_shape = (int(shape),) if np.ndim(shape) == 0 and not isinstance(shape, tuple) else tuple(shape)
    assert a.shape == expected_shape and a.flags.c_contiguous and a.flags.writeable
    assert a.dtype == (BFLOAT16 if dtype == "bfloat16" else np.dtype(dtype))
    if a.nbytes >= 4096:
        assert a.ctypes.data % 64 == 0
    a[...] = 1  # writable over its whole extent
    assert (f64(a) == 1).all()


@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="ASan's quarantine keeps freed memory resident by design")
def test_empty_aligned_memory_goes_with_its_last_view():
    # Arrays below the big-output threshold are heap blocks owned by their base: dropping the
    # array (and any view, torch tensor or copy of it) frees the block.
    def resident_mib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20

    keep = [ac.empty_aligned((1 << 18,), np.float32)[::2] for _ in range(4)]  # views keep theirs
    for k in keep:
        k[...] = 3
    before = resident_mib()
    for _ in range(2000):  # 2 GiB in all, 1 MiB at a time, each written
        a = ac.empty_aligned((1 << 18,), np.float32)
        a[...] = 1
        del a
    assert resident_mib() - before < 64
    assert all((k == 3).all() for k in keep)


@pytest.mark.parametrize("shape", [(-1,), (2, -3), (-1, 5000)])
def test_empty_aligned_refuses_a_negative_extent(shape):
    with pytest.raises(ValueError):
        ac.empty_aligned(shape, np.float32)


def test_functional_outputs_are_line_aligned():
    rng = np.random.default_rng(0)
    g = rng.standard_normal((64, 130)).astype(np.float32)[:, 1:]  # a view 4 bytes past the line
    y = rng.random((64, 129)).astype(np.float32)
    out = ac.softmax_backward(g, y, -1)
    assert out.ctypes.data % 64 == 0 and out.flags.c_contiguous
    np.testing.assert_allclose(f64(out), softmax_backward_ref(g, y, -1), rtol=1e-5, atol=1e-6)


def _calls_with_workspace(seed):
    """One call of each op that needs a workspace: GridSampler's fp32 accumulators of a bf16
    inputGrad, GroupNorm's per-(n, c) sums, Softmax's long-row partials, PReLU's dense copies
    and partial sums. Returns their outputs as bytes."""
    rng = np.random.default_rng(seed)
    inp = rng.standard_normal((1, 3, 9, 11)).astype(BFLOAT16)
    grid = rng.uniform(-1.1, 1.1, (1, 5, 7, 2)).astype(BFLOAT16)
    go = rng.standard_normal((1, 3, 5, 7)).astype(BFLOAT16)
    results = list(ac.grid_sampler2d_backward(go, inp, grid))
    x, dy = rng.standard_normal((2, 6, 40)).astype(np.float32), rng.standard_normal((2, 6, 40)).astype(np.float32)
    mean, rstd = rng.standard_normal((2, 3)).astype(np.float32), (rng.random((2, 3)) + 0.5).astype(np.float32)
    results += ac.group_norm_backward(dy, x, mean, rstd, None, 2, 6, 40, 3)
    g, y = rng.standard_normal((2, 40000)).astype(np.float32), rng.random((2, 40000)).astype(np.float32)
    results.append(ac.softmax_backward(g, y, 1))
    xs = rng.standard_normal((5, 4, 30)).astype(np.float32)
    results += ac.prelu_backward(xs[..., ::2], xs[..., ::2] * 2, rng.standard_normal(4).astype(np.float32))
    return [np.ascontiguousarray(r).tobytes() for r in results]


def _big_call_filling_the_workspace():
    """A call whose workspace (dense copies of two 4 MB operands) leaves values behind."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((64, 16, 64, 32)).astype(np.float32)
    ac.prelu_backward(x[..., ::2] * np.nan, x[..., ::2], np.ones(16, np.float32))


def test_reused_workspace_leaves_no_trace():
    """The functional API reuses each thread's workspace buffer: a call after a larger one
    that left NaNs in it gives the bits of the same call in a fresh thread (a fresh buffer)."""
    _big_call_filling_the_workspace()
    after_big = _calls_with_workspace(1)
    fresh = []
    worker = threading.Thread(target=lambda: fresh.append(_calls_with_workspace(1)))
    worker.start()
    worker.join()
    assert after_big == fresh[0]
    assert _calls_with_workspace(1) == after_big  # and again, reusing the same buffer


def _import_from_checkout(folder) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import aclnn_cpu; print(aclnn_cpu.config()['library'])"],
                          cwd=folder, capture_output=True, text=True, timeout=120)


def test_unbuilt_checkout_uses_only_an_installed_build_of_the_same_sources(tmp_path):
    """A source checkout without compiled modules (run from its root, it shadows any install)
    answers with the installed build only when that was built from the same .py/.pyi files;
    otherwise the import fails saying why, never borrowing a different build silently."""
    import glob
    import os
    import shutil

    here = os.path.dirname(ac.__file__)
    checkout = tmp_path / "aclnn_cpu"
    checkout.mkdir()
    for source in glob.glob(os.path.join(here, "*.py")) + glob.glob(os.path.join(here, "*.pyi")):
        shutil.copy(source, checkout)
    installed = ac._installed_build(str(checkout))
    done = _import_from_checkout(tmp_path)
    if installed:  # `pip install .`: the installed copy of these very sources answers
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == os.path.join(installed, "lib", "libaclnn_cpu.so")
    else:  # an in-place build (`pip install -e .`): nothing installed to use
        assert done.returncode != 0 and "source checkout without compiled modules" in done.stderr
    with open(checkout / "bench.py", "a") as f:
        f.write("# edited in the checkout\n")
    done = _import_from_checkout(tmp_path)
    assert done.returncode != 0 and "source checkout without compiled modules" in done.stderr
    if installed:
        assert "(bench.py differ)" in done.stderr
