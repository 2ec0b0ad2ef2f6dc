"""A training step written as a CANN user writes one (programs/training_step.cpp): GroupNorm and
Softmax forward, then SoftmaxBackward on the softmax's own output and GroupNormBackward on the
forward's own mean and rstd, through both phases of the C API with device buffers and
aclrtMemcpy. Each printed stage equals PyTorch float64 on the stage's own printed inputs, and
the program is clean under valgrind memcheck."""
from __future__ import annotations

import re

import numpy as np

from capi_build import run_program

N, C, HXW, GROUP, EPS = 2, 4, 3, 2, 1e-5
# Each stage is a handful of fp32 operations over at most C/GROUP*HxW = 6 terms: 64 roundings of
# the largest value bound it with room, and any wrong term is far larger.
STAGE_BOUND = 64 * np.finfo(np.float32).eps


def _inputs():
    i = np.arange(N * C * HXW)
    x = (0.25 * ((i * 7) % 11) - 1.0).astype(np.float32).reshape(N, C, HXW)
    grad_s = (0.125 * ((i * 5) % 9) - 0.5).astype(np.float32).reshape(N, C, HXW)
    gamma = np.array([1.5, -0.5, 2.0, 0.75], np.float32)
    beta = np.array([0.1, 0.2, -0.3, 0.0], np.float32)
    return x, grad_s, gamma, beta


def _printed(stdout: str) -> dict:
    values = {}
    for name, index, value in re.findall(r"^(\w+)\[(\d+)\] is: (\S+)$", stdout, re.M):
        values.setdefault(name, {})[int(index)] = float(value)
    return {name: np.array([v[i] for i in range(len(v))]) for name, v in values.items()}


def _assert_close(name, got, want):
    want = np.asarray(want, np.float64).reshape(-1)
    bound = STAGE_BOUND * max(1.0, float(np.abs(want).max()))
    err = np.abs(got - want)
    assert got.shape == want.shape and (err <= bound).all(), f"{name}: error {err.max():.3g} > {bound:.3g}"


def test_training_step_matches_torch(programs, torch):
    done = run_program([programs["training_step"]])
    assert done.returncode == 0, done.stdout + done.stderr
    p = _printed(done.stdout)
    x, grad_s, gamma, beta = (torch.from_numpy(a).double() for a in _inputs())

    # GroupNorm forward from the inputs.
    y, mean, rstd = torch.ops.aten.native_group_norm(x, gamma, beta, N, C, HXW, GROUP, EPS)
    for name, want in (("y", y), ("mean", mean), ("rstd", rstd)):
        _assert_close(name, p[name], want.numpy())
    # Softmax forward from the program's own y.
    y_ = torch.from_numpy(p["y"].reshape(N, C, HXW))
    _assert_close("s", p["s"], torch.softmax(y_, -1).numpy())
    # SoftmaxBackward from the program's own s.
    s_ = torch.from_numpy(p["s"].reshape(N, C, HXW))
    _assert_close("gradY", p["gradY"], torch.ops.aten._softmax_backward_data(grad_s, s_, -1, torch.float64).numpy())
    # GroupNormBackward from the program's own gradY, mean and rstd.
    grad_y = torch.from_numpy(p["gradY"].reshape(N, C, HXW))
    mean_ = torch.from_numpy(p["mean"].reshape(N, GROUP))
    rstd_ = torch.from_numpy(p["rstd"].reshape(N, GROUP))
    gx, gg, gb = torch.ops.aten.native_group_norm_backward(grad_y, x, mean_, rstd_, gamma, N, C, HXW, GROUP,
                                                           [True, True, True])
    for name, want in (("gradX", gx), ("gradGamma", gg), ("gradBeta", gb)):
        _assert_close(name, p[name], want.numpy())


def test_training_step_under_valgrind(programs, valgrind):
    done = valgrind([programs["training_step"]])
    assert "gradX[0] is: " in done.stdout
