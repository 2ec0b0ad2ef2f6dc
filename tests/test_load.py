"""Load: many threads of mixed calls give correct results, memory stays flat over 100,000
calls (failing ones included), and abusing executors (dropping arrays, running twice, after
destroy, with a too-small workspace) is refused safely."""
from __future__ import annotations

import gc
import os
import resource
import threading

import numpy as np
import pytest

import aclnn_cpu as ac


def _softmax_ref(g, y, dim):
    g, y = g.astype(np.float64), y.astype(np.float64)
    return y * (g - np.sum(g * y, axis=dim, keepdims=True))


def _check_softmax(out, g, y, dim):
    """Within fp32 rounding of the terms: n * 2**-24 * |y| * (|g| + sum|g*y|)."""
    g64, y64 = g.astype(np.float64), y.astype(np.float64)
    magnitude = np.abs(y64) * (np.abs(g64) + np.sum(np.abs(g64 * y64), axis=dim, keepdims=True))
    bound = (g.shape[dim] + 4) * 2.0 ** -24 * magnitude + 2.0 ** -24 * np.abs(_softmax_ref(g, y, dim))
    assert np.all(np.abs(out.astype(np.float64) - _softmax_ref(g, y, dim)) <= bound)


def _prelu_ref(g, x, w):
    g, x, w = g.astype(np.float64), x.astype(np.float64), w.astype(np.float64)
    wb = w.reshape((1, -1) + (1,) * (x.ndim - 2))
    gi = np.where(x > 0, g, wb * g)
    gw = np.where(x > 0, 0.0, x * g).sum(axis=tuple(i for i in range(x.ndim) if i != 1))
    return gi, gw


def _mixed_call(rng, i):
    """One call of a rotating kind; returns None or raises AssertionError on a wrong result."""
    kind = i % 4
    if kind == 0:
        g = rng.standard_normal((3, 17)).astype(np.float32)
        y = rng.random((3, 17)).astype(np.float32)
        _check_softmax(ac.softmax_backward(g, y, 1), g, y, 1)
    elif kind == 1:
        x = rng.standard_normal((2, 5, 9)).astype(np.float32)
        g = rng.standard_normal((2, 5, 9)).astype(np.float32)
        w = rng.standard_normal(5).astype(np.float32)
        gi, gw = ac.prelu_backward(g, x, w)
        ref_gi, ref_gw = _prelu_ref(g, x, w)
        np.testing.assert_allclose(gi, ref_gi, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(gw, ref_gw, rtol=1e-5, atol=1e-5)
    elif kind == 2:  # a rejected call: dim out of range
        x = np.ones((2, 3), np.float32)
        with pytest.raises(ac.AclnnError) as info:
            ac.softmax_backward(x, x, 5)
        assert info.value.status == 161002
    else:  # two-phase with a workspace and a repeatable executor run twice
        g = rng.standard_normal((4, 33)).astype(np.float32)
        y = rng.random((4, 33)).astype(np.float32)
        out = np.empty_like(g)
        ws, ex = ac.aclnnSoftmaxBackwardGetWorkspaceSize(g, y, -1, out)
        ex.set_repeatable()
        buf = np.empty(max(ws, 1), np.uint8)
        for _ in range(2):
            ac.aclnnSoftmaxBackward(buf if ws else None, ws, ex)
        ex.destroy()
        _check_softmax(out, g, y, -1)


def test_eight_threads_of_mixed_calls_are_correct():
    threads, calls_per_thread = 8, 1500
    errors = []
    start = threading.Barrier(threads)

    def worker(seed):
        rng = np.random.default_rng(seed)
        start.wait()
        try:
            for i in range(calls_per_thread):
                _mixed_call(rng, i + seed)
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(s,)) for s in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors, errors[:3]


def _max_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux


@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="ASan's quarantine keeps freed memory resident by design")
def test_max_rss_stays_flat_over_100k_calls_including_failures():
    g = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    y = np.random.default_rng(1).random((4, 16)).astype(np.float32)
    w = np.ones(16, np.float32)
    bad = np.ones((4, 16), np.float16)
    out = np.empty_like(g)

    def batch(n):
        for i in range(n):
            k = i % 5
            if k == 0:
                ac.softmax_backward(g, y, 1, out=out)
            elif k == 1:
                ac.prelu_backward(g, y, w)
            elif k == 2:
                try:
                    ac.softmax_backward(g, bad, 1)  # dtype mismatch
                except ac.ParamInvalidError:
                    pass
            elif k == 3:
                try:
                    ac.prelu_backward(None, y, w)
                except ac.ParamNullptrError:
                    pass
            else:
                ws, ex = ac.aclnnSoftmaxBackwardGetWorkspaceSize(g, y, 0, out)
                del ex  # planned, never run: the executor must be freed

    batch(20_000)
    gc.collect()
    at_20k = _max_rss_mib()
    batch(80_000)
    gc.collect()
    growth = _max_rss_mib() - at_20k
    assert growth < 5.0, f"max RSS grew {growth:.1f} MiB between 20k and 100k calls"


def test_executor_survives_dropping_every_array_after_planning():
    rng = np.random.default_rng(3)
    g = rng.standard_normal((5, 7)).astype(np.float32)
    y = rng.random((5, 7)).astype(np.float32)
    expected = _softmax_ref(g, y, 1)
    out = np.empty_like(g)
    ws, ex = ac.aclnnSoftmaxBackwardGetWorkspaceSize(g.copy(), y.copy(), 1, out)
    del g, y
    gc.collect()
    np.zeros((5, 7), np.float32)  # reuse freed memory if it were freed
    ac.aclnnSoftmaxBackward(np.empty(ws, np.uint8) if ws else None, ws, ex)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)  # values, not rounding, are the point here


def test_executor_run_twice_after_destroy_and_with_small_workspace_is_refused():
    x = np.ones((64, 129), np.float32)
    out = np.empty_like(x)
    ws, ex = ac.aclnnSoftmaxBackwardGetWorkspaceSize(x, x, 1, out)
    ac.aclnnSoftmaxBackward(np.empty(ws, np.uint8) if ws else None, ws, ex)
    with pytest.raises(ac.AclnnError) as info:  # single-use
        ac.aclnnSoftmaxBackward(np.empty(ws, np.uint8) if ws else None, ws, ex)
    assert info.value.status == 161002

    ws, ex = ac.aclnnSoftmaxBackwardGetWorkspaceSize(x, x, 1, out)
    ex.destroy()
    ex.destroy()  # idempotent
    with pytest.raises(ac.AclnnError):
        ac.aclnnSoftmaxBackward(np.empty(ws, np.uint8) if ws else None, ws, ex)

    # a workspace smaller than planned (for the ops that ask for one)
    g = np.ones((3, 4, 600), np.float32)
    w = np.ones(4, np.float32)
    gi, gw = np.empty_like(g), np.empty(4, np.float32)
    ws, ex = ac.aclnnPreluBackwardGetWorkspaceSize(g, g, w, gi, gw)
    before = gi.tobytes()
    if ws > 0:
        with pytest.raises(ac.AclnnError) as info:
            ac.aclnnPreluBackward(np.empty(ws - 1, np.uint8), ws - 1, ex)
        assert info.value.status == 161002
        with pytest.raises(ac.AclnnError) as info:
            ac.aclnnPreluBackward(np.empty(ws - 1, np.uint8), ws, ex)  # claims more than it holds
        assert info.value.status == 161002
        with pytest.raises(ac.AclnnError) as info:
            ac.aclnnPreluBackward(None, ws, ex)
        assert info.value.status == 161001
        assert gi.tobytes() == before
    with pytest.raises(ac.AclnnError) as info:  # an executor of another op
        ac.aclnnSoftmaxBackward(None, 0, ex)
    assert info.value.status == 161002
    ac.aclnnPreluBackward(np.empty(ws, np.uint8) if ws else None, ws, ex)  # still runnable
    with pytest.raises(ac.AclnnError) as info:
        ac.aclnnPreluBackward(None, 0, None)
    assert info.value.status == 161001


def test_repeatable_executor_shared_by_threads_after_planning():
    rng = np.random.default_rng(5)
    g = rng.standard_normal((8, 65)).astype(np.float32)
    y = rng.random((8, 65)).astype(np.float32)
    outs = [np.empty_like(g) for _ in range(8)]
    execs = []
    for o in outs:
        ws, ex = ac.aclnnSoftmaxBackwardGetWorkspaceSize(g, y, 1, o)
        execs.append((ws, ex.set_repeatable()))
    del g, y

    def run(k):
        ws, ex = execs[k]
        for _ in range(200):
            ac.aclnnSoftmaxBackward(np.empty(ws, np.uint8) if ws else None, ws, ex)

    pool = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    for o in outs[1:]:
        assert o.tobytes() == outs[0].tobytes()
