"""aclnn_cpu.torch: torch's CPU kernels routed to the library while the bridge is on.

The routing is proven, not assumed: with the bridge on, torch's autograd gives bit for bit the
library's direct call, and where torch's own kernel differs (bf16 grid_sample gridGrad) the
bridge's result is the library's. Off again, torch's dispatch table and results are as before.
"""
import threading

import pytest

import aclnn_cpu as ac
from support import import_or_skip

torch = import_or_skip("torch", "the bridge's subject and oracle")
F = torch.nn.functional
import aclnn_cpu.torch as bridge  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
ROUTED = {r.aten for r in bridge.ALL_ROUTES}


def dispatch_state():
    """Every routed aten op's registrations and computed dispatch table, as torch prints them."""
    return {name: (torch._C._dispatch_dump(f"aten::{name}"), torch._C._dispatch_dump_table(f"aten::{name}"))
            for name in sorted(ROUTED)}


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def require(name):
    """Skip, saying why, while the registry lacks the forward op ``name``."""
    if not bridge._library_has(name):
        pytest.skip(f"the registry has no op '{name}' yet; its route registers once it lands")


@pytest.fixture(autouse=True)
def bridge_off():
    """Each test starts and ends with the bridge off and torch's table untouched."""
    assert not bridge.is_enabled()
    before = dispatch_state()
    yield
    bridge.disable()
    assert not bridge.is_enabled()
    assert dispatch_state() == before


# ---- the routes --------------------------------------------------------------------------

def test_routes_follow_the_registry():
    names = {op["python"] for op in ac.OPS}
    assert {r.aten for r in bridge.routes()} == {r.aten for r in bridge.ALL_ROUTES if r.library in names}
    for backward in ("_prelu_kernel_backward", "native_group_norm_backward", "_softmax_backward_data",
                     "grid_sampler_2d_backward"):
        assert backward in {r.aten for r in bridge.routes()}


def test_nothing_changes_until_enable():
    before = dispatch_state()
    import importlib
    importlib.reload(bridge)  # importing the module registers nothing
    assert dispatch_state() == before and bridge.registered() == {}
    bridge.enable()
    during = dispatch_state()
    for r in bridge.routes():
        assert during[r.aten] != before[r.aten], r.aten
    assert set(bridge.registered()) == {r.aten for r in bridge.routes()}


def test_enable_disable_idempotent_and_restore_torch():
    before = dispatch_state()
    bridge.enable()
    once = dispatch_state()
    bridge.enable()
    assert dispatch_state() == once
    bridge.disable()
    assert dispatch_state() == before and not bridge.is_enabled()
    bridge.disable()
    assert dispatch_state() == before


def test_enabled_context_nests_with_enable():
    before = dispatch_state()
    with bridge.enabled():
        assert bridge.is_enabled()
        with bridge.enabled():
            assert bridge.is_enabled()
        assert bridge.is_enabled()
    assert dispatch_state() == before
    bridge.enable()
    with bridge.enabled():
        pass
    assert bridge.is_enabled()  # enable()'s hold outlives the block
    bridge.disable()
    with pytest.raises(ZeroDivisionError):
        with bridge.enabled():
            1 / 0
    assert not bridge.is_enabled() and dispatch_state() == before


def test_thread_safe():
    """Threads switching the bridge and running backward through it at once: every call inside
    enabled() gets the library's result, and torch is as it was at the end."""
    before = dispatch_state()
    go, x, grid = grid_case(torch.bfloat16, seed=3)
    expect = ac.grid_sampler2d_backward(go, x, grid, 0, 0, False)[1]
    errors = []

    def worker(k):
        try:
            for i in range(15):
                if (i + k) % 3 == 0:
                    bridge.enable()
                    bridge.disable()
                with bridge.enabled():
                    got = torch.ops.aten.grid_sampler_2d_backward(go, x, grid, 0, 0, False, [True, True])[1]
                    if not same_bits(got, expect):
                        errors.append(f"thread {k} call {i}: not the library's result")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert not bridge.is_enabled() and dispatch_state() == before


# ---- the backward ops through torch autograd -------------------------------------------

def grid_case(dtype, seed=0, n=2, c=3, h=7, w=8, ho=5, wo=6):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, h, w, generator=g).to(dtype)
    grid = (torch.rand(n, ho, wo, 2, generator=g) * 2.2 - 1.1).to(dtype)
    go = torch.randn(n, c, ho, wo, generator=g).to(dtype)
    return go, x, grid


def leaf(t):
    return t.detach().clone().requires_grad_(True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mode,padding,align", [(0, 0, False), (1, 1, True), (2, 2, False)])
def test_grid_sample_backward_is_the_library(dtype, mode, padding, align):
    go, x, grid = grid_case(dtype, seed=mode)
    names = ("bilinear", "nearest", "bicubic")
    pads = ("zeros", "border", "reflection")
    xl, gl = leaf(x), leaf(grid)
    with bridge.enabled():
        F.grid_sample(xl, gl, mode=names[mode], padding_mode=pads[padding], align_corners=align).backward(go)
    dx, dgrid = ac.grid_sampler2d_backward(go, x, grid, mode, padding, align)
    assert same_bits(xl.grad, dx) and same_bits(gl.grad, dgrid)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_prelu_backward_is_the_library(dtype):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 5, 4, 4, generator=g).to(dtype)
    go = torch.randn(3, 5, 4, 4, generator=g).to(dtype)
    for w in (torch.rand(5, generator=g).to(dtype), torch.rand(1, generator=g).to(dtype)):
        xl, wl = leaf(x), leaf(w)
        with bridge.enabled():
            F.prelu(xl, wl).backward(go)
        dx, dw = ac.prelu_backward(go, x, w)
        assert same_bits(xl.grad, dx) and same_bits(wl.grad, dw.reshape(w.shape))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_group_norm_backward_is_the_library(dtype):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 6, 5, 3, generator=g).to(dtype)
    gamma = torch.rand(6, generator=g).to(dtype) + 0.5
    beta = torch.randn(6, generator=g).to(dtype)
    go = torch.randn(2, 6, 5, 3, generator=g).to(dtype)
    xl, gl, bl = leaf(x), leaf(gamma), leaf(beta)
    with bridge.enabled():
        y, mean, rstd = torch.ops.aten.native_group_norm(x, gamma, beta, 2, 6, 15, 3, 1e-5)
        F.group_norm(xl, 3, gl, bl, eps=1e-5).backward(go)
    dx, dgamma, dbeta = ac.group_norm_backward(go, x, mean, rstd, gamma, 2, 6, 15, 3, (True, True, True))
    assert same_bits(xl.grad, dx) and same_bits(gl.grad, dgamma) and same_bits(bl.grad, dbeta)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax_backward_is_the_library(dtype):
    g = torch.Generator().manual_seed(6)
    x = torch.randn(4, 9, 6, generator=g).to(dtype)
    go = torch.randn(4, 9, 6, generator=g).to(dtype)
    for dim in (1, -1):
        xl = leaf(x)
        with bridge.enabled():
            y = torch.softmax(xl, dim)
            y.backward(go)
        assert same_bits(xl.grad, ac.softmax_backward(go, y.detach(), dim))


def test_routing_proven_where_torch_differs():
    """bf16 grid_sample: torch's own kernel accumulates gridGrad in bf16, the library in fp32.
    With the bridge on, autograd's gridGrad is the library's, and closer to float64 than torch's."""
    go, x, grid = grid_case(torch.bfloat16, seed=7, n=1, c=64, h=16, w=16, ho=8, wo=8)
    own = leaf(grid)
    F.grid_sample(x, own, align_corners=False).backward(go)
    routed = leaf(grid)
    with bridge.enabled():
        F.grid_sample(x, routed, align_corners=False).backward(go)
    exact = leaf(grid.double())
    F.grid_sample(x.double(), exact, align_corners=False).backward(go.double())
    library = ac.grid_sampler2d_backward(go, x, grid, 0, 0, False, (False, True))[1]
    assert same_bits(routed.grad, library)
    assert not same_bits(own.grad, library)
    err_routed = (routed.grad.double() - exact.grad).abs().max()
    err_own = (own.grad.double() - exact.grad).abs().max()
    assert err_routed < err_own


# ---- what the library cannot take falls through -----------------------------------------

def run_all(dtype, create_graph=False, between=lambda: None):
    """F.prelu, F.group_norm, torch.softmax and F.grid_sample, forward and backward: outputs and
    gradients; with create_graph, also the second-order gradients (``between`` runs before
    that second pass)."""
    g = torch.Generator().manual_seed(8)
    x = leaf(torch.randn(2, 4, 6, 5, generator=g).to(dtype))
    w = leaf(torch.rand(4, generator=g).to(dtype))
    gamma = leaf(torch.rand(4, generator=g).to(dtype) + 0.5)
    beta = leaf(torch.randn(4, generator=g).to(dtype))
    grid = leaf((torch.rand(2, 3, 3, 2, generator=g) * 2 - 1).to(dtype))
    h = F.prelu(x, w)
    h = F.group_norm(h, 2, gamma, beta)
    h = torch.softmax(h, -1)
    out = F.grid_sample(h, grid, align_corners=False)
    loss = (out * out).sum()
    grads = torch.autograd.grad(loss, (x, w, gamma, beta, grid), create_graph=create_graph)
    first = [out.detach()] + [gr.detach() for gr in grads]
    if not create_graph:
        return first
    between()
    second = torch.autograd.grad(sum((gr * gr).sum() for gr in grads), (x, w, gamma, beta, grid))
    return first, list(second)


def test_float64_falls_through_to_torch():
    own = run_all(torch.float64)
    bridge.reset_counts()
    with bridge.enabled():
        routed = run_all(torch.float64)
    assert all(same_bits(a, b) for a, b in zip(own, routed))
    counted = bridge.counts()
    assert counted and all(served == 0 and fell > 0 for served, fell in counted.values())


def test_double_backward_falls_through_to_torch():
    """Backward calls that record a graph (create_graph=True) run torch's own kernels; the
    second-order pass (grad mode off again) may take the library's, and agrees."""
    own, own_second = run_all(torch.float32, create_graph=True)
    first_pass = {}
    bridge.reset_counts()
    with bridge.enabled():
        routed, routed_second = run_all(torch.float32, create_graph=True,
                                        between=lambda: first_pass.update(bridge.counts()))
    # (GroupNorm's create_graph formula is torch's differentiable composite: no backward op call)
    for r in bridge.routes():
        if r.backward:
            assert first_pass.get(r.aten, (0, 0))[0] == 0, (r.aten, first_pass)
    assert sum(fell for _, fell in first_pass.values()) >= 3, first_pass
    if not any(not r.backward for r in bridge.routes()):  # torch's forward too: its bits exactly
        assert all(same_bits(a, b) for a, b in zip(own, routed))
    # fp32 agreement, normwise over each order's gradients (some second-order gradients are 0
    # in exact arithmetic and rounding noise in both runs)
    for mine, theirs in ((own, routed), (own_second, routed_second)):
        scale = max(float(a.abs().max()) for a in mine)
        for a, b in zip(mine, theirs):
            assert float((a - b).abs().max()) <= 1e-5 * scale, (float((a - b).abs().max()), scale)


def test_refused_calls_fall_through():
    """Shapes and mixes the library's rules refuse (161002) run torch's kernel, with no error."""
    g = torch.Generator().manual_seed(9)
    # rank 9: the library takes at most 8 dims
    x9 = torch.randn(*([2] * 9), generator=g)
    y9 = torch.softmax(x9, 3)
    go9 = torch.randn(*([2] * 9), generator=g)
    own = torch.ops.aten._softmax_backward_data(go9, y9, 3, torch.float32)
    # bf16 input with fp32 gamma/beta: torch's mixed-type GroupNorm; the library wants one dtype
    x = torch.randn(2, 4, 3, generator=g).to(torch.bfloat16)
    gamma, beta = torch.rand(4, generator=g), torch.randn(4, generator=g)
    go = torch.randn(2, 4, 3, generator=g).to(torch.bfloat16)

    def mixed():
        xl, gl, bl = leaf(x), leaf(gamma), leaf(beta)
        F.group_norm(xl, 2, gl, bl).backward(go)
        return xl.grad, gl.grad, bl.grad

    own_mixed = mixed()
    bridge.reset_counts()
    with bridge.enabled():
        routed = torch.ops.aten._softmax_backward_data(go9, y9, 3, torch.float32)
        routed_mixed = mixed()
    assert same_bits(own, routed)
    assert all(same_bits(a, b) for a, b in zip(own_mixed, routed_mixed))
    assert bridge.counts()["_softmax_backward_data"] == (0, 1)
    assert bridge.counts()["native_group_norm_backward"] == (0, 1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_torch_own_results_after_disable(dtype):
    own = run_all(dtype)
    bridge.enable()
    routed = run_all(dtype)
    bridge.disable()
    again = run_all(dtype)
    assert all(same_bits(a, b) for a, b in zip(own, again))
    if dtype == torch.bfloat16:  # the bridge was really on in between
        assert not all(same_bits(a, b) for a, b in zip(own, routed))


# ---- the forward ops, routed once the registry has them ---------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_prelu_forward_is_the_library(dtype):
    require("prelu")
    g = torch.Generator().manual_seed(10)
    x = torch.randn(3, 5, 4, generator=g).to(dtype)
    w = torch.rand(5, generator=g).to(dtype)
    xl, wl = leaf(x), leaf(w)
    go = torch.randn(3, 5, 4, generator=g).to(dtype)
    with bridge.enabled():
        y = F.prelu(xl, wl)
        y.backward(go)
    assert same_bits(y.detach(), ac.prelu(x, w))
    dx, dw = ac.prelu_backward(go, x, w)
    assert same_bits(xl.grad, dx) and same_bits(wl.grad, dw)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_group_norm_forward_is_the_library(dtype):
    require("group_norm")
    g = torch.Generator().manual_seed(11)
    x = torch.randn(2, 6, 10, generator=g).to(dtype)
    gamma = torch.rand(6, generator=g).to(dtype) + 0.5
    beta = torch.randn(6, generator=g).to(dtype)
    go = torch.randn(2, 6, 10, generator=g).to(dtype)
    xl, gl, bl = leaf(x), leaf(gamma), leaf(beta)
    with bridge.enabled():
        y = F.group_norm(xl, 3, gl, bl, eps=1e-5)
        y.backward(go)
    out, mean, rstd = ac.group_norm(x, gamma, beta, 2, 6, 10, 3, 1e-5)
    assert same_bits(y.detach(), out.reshape(y.shape))
    dx, dgamma, dbeta = ac.group_norm_backward(go, x, mean.reshape(2, 3), rstd.reshape(2, 3), gamma,
                                               2, 6, 10, 3, (True, True, True))
    assert same_bits(xl.grad, dx) and same_bits(gl.grad, dgamma) and same_bits(bl.grad, dbeta)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax_forward_is_the_library(dtype):
    require("softmax")
    g = torch.Generator().manual_seed(12)
    x = torch.randn(4, 9, generator=g).to(dtype)
    go = torch.randn(4, 9, generator=g).to(dtype)
    xl = leaf(x)
    with bridge.enabled():
        y = torch.softmax(xl, -1)
        y.backward(go)
    direct = ac.softmax(x, -1)
    assert same_bits(y.detach(), direct)
    assert same_bits(xl.grad, ac.softmax_backward(go, direct, -1))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_grid_sample_forward_is_the_library(dtype):
    require("grid_sampler2d")
    go, x, grid = grid_case(dtype, seed=13)
    xl, gl = leaf(x), leaf(grid)
    with bridge.enabled():
        y = F.grid_sample(xl, gl, mode="bilinear", padding_mode="border", align_corners=True)
        y.backward(go)
    assert same_bits(y.detach(), ac.grid_sampler2d(x, grid, 0, 1, True))
    dx, dgrid = ac.grid_sampler2d_backward(go, x, grid, 0, 1, True)
    assert same_bits(xl.grad, dx) and same_bits(gl.grad, dgrid)


# ---- PyTorch's own OpInfo samples as the peer suite ---------------------------------------

OPINFO_OPS = {  # op_db name -> the backward aten op its gradient goes through
    "nn.functional.prelu": "_prelu_kernel_backward",
    "nn.functional.group_norm": "native_group_norm_backward",
    "softmax": "_softmax_backward_data",
    "nn.functional.grid_sample": "grid_sampler_2d_backward",
}
UNIT_ROUNDOFF = {torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}
# The floor a gradient in the dtype can reach: rounded once at the end, and read from forward
# results rounded to the dtype (softmax's output, GroupNorm's mean and rstd): a few unit
# roundoffs of the gradient's scale, plus what the sample's conditioning adds to that. The
# second part is measured, not assumed: it is the error torch's own kernel makes on the same
# sample (tiny groups of GroupNorm, whose exact gradient is near 0, cancel the forward's
# rounding into the whole result for any kernel).
FLOOR_ULPS = 8


@pytest.fixture(scope="module")
def op_db():
    import_or_skip("expecttest", "torch's OpInfo helpers import it; the test extra has it")
    from torch.testing._internal.common_methods_invocations import op_db as db
    return {(op.name, op.variant_test_name): op for op in db if op.name in OPINFO_OPS}


def _map_tensors(sample, fn):
    def one(v):
        return fn(v) if isinstance(v, torch.Tensor) else v
    return one(sample.input), [one(a) for a in sample.args], {k: one(v) for k, v in sample.kwargs.items()}


def _grads(op, sample, fn, upstream_seed):
    """Gradients of op's output(s) with respect to every tensor that requires grad, under a
    fixed random upstream gradient; ``fn`` maps the sample's tensors (to float64, say)."""
    inp, args, kwargs = _map_tensors(sample, lambda t: fn(t.detach()).requires_grad_(t.requires_grad))
    leaves = [t for t in [inp, *args, *kwargs.values()] if isinstance(t, torch.Tensor) and t.requires_grad]
    out = op(inp, *args, **kwargs)
    outs = [out] if isinstance(out, torch.Tensor) else [o for o in out if isinstance(o, torch.Tensor)]
    g = torch.Generator().manual_seed(upstream_seed)
    ups = [torch.randn(o.shape, generator=g).to(o.dtype) for o in outs]
    return torch.autograd.grad(outs, leaves, ups, allow_unused=True), ups


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(OPINFO_OPS))
def test_opinfo_gradients_agree_with_float64(op_db, name, dtype):
    """Every OpInfo sample through autograd with the bridge on: where the library served the
    backward call, gradients within the dtype's floor of float64 autograd; where it fell through
    (a 5-D grid_sample, float64 results), torch's own gradients bit for bit."""
    ops = [op for (n, _), op in op_db.items() if n == name]
    assert ops, f"op_db has no {name}"
    u = UNIT_ROUNDOFF[dtype]
    served_total = checked = 0
    for op in ops:
        for k, sample in enumerate(op.sample_inputs("cpu", dtype, requires_grad=True)):
            bridge.reset_counts()
            with bridge.enabled():
                grads, _ = _grads(op, sample, lambda t: t, k)
            served = bridge.counts().get(OPINFO_OPS[name], (0, 0))[0]
            served_total += served
            own, _ = _grads(op, sample, lambda t: t, k)
            exact, _ = _grads(op, sample, lambda t: t.double(), k)
            for got, mine, ref in zip(grads, own, exact):
                if ref is None or ref.numel() == 0:
                    continue
                assert got is not None and got.dtype == mine.dtype
                if not served:
                    assert same_bits(got, mine), f"{name} sample {k}: fell through, yet not torch's result"
                    continue
                got, mine, ref = got.double(), mine.double(), ref.detach()
                assert torch.equal(got.isnan(), ref.isnan()), f"{name} sample {k}: NaNs differ"
                finite = ref.isfinite()
                if not finite.any():
                    continue
                scale = ref[finite].abs().max().item()
                err = (got[finite] - ref[finite]).abs().max().item()
                err_own = (mine[finite] - ref[finite]).abs().max().item()
                bound = FLOOR_ULPS * u * scale + err_own
                assert err <= bound, (
                    f"{name} sample {k} ({sample}): {err:.3g} off float64 ({err / (u * scale):.1f} unit "
                    f"roundoffs of the gradient's scale {scale:.3g}); torch's own kernel {err_own:.3g}")
                checked += 1
    assert served_total > 0 and checked > 0, f"the library served none of {name}'s backward calls"


# ---- the training-step benchmark ----------------------------------------------------------

def test_training_benchmark_smoke(capsys):
    """bench --suite training at tiny shapes: a row per op and the block, each step served by the
    library with the bridge on, its gradients within bf16 precision of float64."""
    from aclnn_cpu import bench, bench_training
    rows = bench_training.run(["bfloat16"], [1], rounds=1, min_time=0.001, suite="smoke")
    assert [r["op"] for r in rows] == list(bench_training.OPS)
    for r in rows:
        served, total = map(int, r["library_calls"].split("/"))
        assert 0 < served <= total, r
        assert r["torch_ms"] > 0 and r["bridge_ms"] > 0
        assert r["bridge_grad_err"] < 0.05, r  # bf16 at tiny shapes: a few unit roundoffs
    text = bench_training.format_rows(rows, "smoke")
    assert all(op in text for op in bench_training.OPS)
    args = bench.parse_args(["--suite", "training", "--dtypes", "bf16", "--threads", "1"])
    assert args.suite == "training" and args.dtypes == ["bfloat16"]
    assert not bridge.is_enabled()


def test_readme_example_runs_through_the_library():
    import re
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Inside PyTorch", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    bridge.reset_counts()
    exec(compile(code, "README.md", "exec"), {})
    assert bridge.counts()["grid_sampler_2d_backward"][0] == 1
