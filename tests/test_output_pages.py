"""Big outputs of the functional API come from runtime/output_pages.cpp (aclnn_cpu/_glue.pyx, "Big
outputs"): 2 MiB-aligned mappings advised for transparent huge pages, and a small cache of released
ones. These tests check that such outputs hold the bits of the same call into plain NumPy memory,
in every setting of the allocator (huge pages on and off, cache on and off, the allocator off);
that the arrays own their memory (freed when the last view, torch tensor or DLPack capsule goes,
not before, and no leak over many calls); where the data sits; and that threads and forked
children get correct buffers.
"""
from __future__ import annotations

import gc
import os
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest

import aclnn_cpu as ac
from aclnn_cpu import _glue
from support import BFLOAT16, random_array

HUGE = 2 << 20
MIB = 1 << 20

pytestmark = pytest.mark.skipif(not _glue.output_pages()["available"],
                                reason="NumPy headers without PyDataMem_Handler (< 1.22)")


def handler_name(arr) -> str:
    return np._core.multiarray.get_handler_name(arr) if hasattr(np, "_core") \
        else np.core.multiarray.get_handler_name(arr)


@pytest.fixture
def pages():
    """Restores the allocator's settings after the test, and empties the cache around it."""
    before = _glue.output_pages()
    _glue.output_pages(cache_bytes=0)
    _glue.output_pages(cache_bytes=before["cache_bytes"])
    yield before
    gc.collect()
    _glue.output_pages(huge_pages=before["huge_pages"], cache_bytes=0, min_bytes=before["min_bytes"])
    _glue.output_pages(cache_bytes=before["cache_bytes"])


SETTINGS = {
    "huge+cache": dict(huge_pages=True, cache_bytes=256 * MIB),
    "huge": dict(huge_pages=True, cache_bytes=0),
    "small pages+cache": dict(huge_pages=False, cache_bytes=256 * MIB),
    "plain": None,  # the allocator off: NumPy memory, 64-byte aligned
}


def apply(setting):
    if setting is None:
        _glue.output_pages(min_bytes=1 << 62)
    else:
        _glue.output_pages(min_bytes=4 * MIB, **setting)


def softmax_backward_case(rng, dtype, shape=(16, 256, 512)):
    g = random_array(rng, shape, dtype)
    y = random_array(rng, shape, dtype, 0.0, 1.0)
    return (lambda out=None: ac.softmax_backward(g, y, -1, out=out)), [(shape, dtype)]


def softmax_case(rng, dtype, shape=(8, 512, 512)):
    x = random_array(rng, shape, dtype)
    return (lambda out=None: ac.softmax(x, 1, out=out)), [(shape, dtype)]


def prelu_backward_case(rng, dtype, shape=(8, 64, 64, 64)):
    g, x = random_array(rng, shape, dtype), random_array(rng, shape, dtype)
    w = random_array(rng, (shape[1],), dtype)
    return (lambda out=None: ac.prelu_backward(g, x, w, out=out)), [(shape, dtype), ((shape[1],), dtype)]


def group_norm_backward_case(rng, dtype, shape=(8, 64, 64, 64), group=8):
    n, c = shape[:2]
    hw = shape[2] * shape[3]
    g, x = random_array(rng, shape, dtype), random_array(rng, shape, dtype)
    mean = random_array(rng, (n, group), dtype, -0.1, 0.1)
    rstd = random_array(rng, (n, group), dtype, 0.5, 1.5)
    gamma = random_array(rng, (c,), dtype)
    return ((lambda out=None: ac.group_norm_backward(g, x, mean, rstd, gamma, n, c, hw, group, out=out)),
            [(shape, dtype), ((c,), dtype), ((c,), dtype)])


CASES = [
    (softmax_backward_case, np.float32), (softmax_backward_case, np.float16),
    (softmax_backward_case, BFLOAT16), (softmax_case, np.float32),
    (prelu_backward_case, np.float32), (prelu_backward_case, BFLOAT16),
    (group_norm_backward_case, np.float16), (group_norm_backward_case, np.float32),
]


def as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


def bits(a):
    a = np.asarray(a)
    return a.view(np.uint8 if a.dtype.itemsize == 1 else f"u{a.dtype.itemsize}")


@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("make, dtype", CASES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_functional_outputs_hold_the_bits_of_out_calls(pages, setting, make, dtype):
    apply(SETTINGS[setting])
    call, out_specs = make(np.random.default_rng(52), dtype)
    # out= into plain NumPy memory, 16 bytes past a line as NumPy puts big arrays
    expected = tuple(np.empty(shape, dt) for shape, dt in out_specs)
    call(out=expected if len(expected) > 1 else expected[0])
    for round_ in range(3):  # round 2 and 3 reuse buffers the cache kept (where it is on)
        got = as_tuple(call())
        for e, o in zip(expected, got):
            assert o.shape == e.shape and o.dtype == e.dtype and o.flags.c_contiguous
            np.testing.assert_array_equal(bits(o), bits(e))
        big = got[0]
        if setting == "plain":
            assert _glue.output_pages_owner(big) == 0 and big.ctypes.data % 64 == 0
        else:
            assert _glue.output_pages_owner(big) >= big.nbytes
            assert big.ctypes.data % HUGE == 0 and big.flags.owndata
            assert handler_name(big) == "aclnn_cpu_output_pages"
        for o in got:  # leave junk behind for the next round's reused buffers
            o[...] = np.nan
        del got, big


def test_small_outputs_stay_on_numpys_heap(pages):
    out = ac.softmax_backward(np.ones((64, 1024), np.float32), np.ones((64, 1024), np.float32), -1)
    assert out.nbytes < pages["min_bytes"] and _glue.output_pages_owner(out) == 0
    assert out.ctypes.data % 64 == 0


def test_empty_aligned_and_layouts_of_big_outputs(pages):
    a = ac.empty_aligned((1024, 2048), BFLOAT16)  # 4 MiB
    assert a.ctypes.data % HUGE == 0 and a.flags.owndata and a.dtype == BFLOAT16
    a[...] = 1.5
    assert (a.astype(np.float32) == 1.5).all()
    # an output in a channels-last input's memory order: a transposed view of one buffer
    rng = np.random.default_rng(1)
    x = random_array(rng, (8, 64, 64, 64), np.float32).transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2)
    w = random_array(rng, (64,), np.float32)
    y = ac.prelu(x, w)
    assert y.strides == x.strides and y.base is not None
    assert y.base.ctypes.data % HUGE == 0 and _glue.output_pages_owner(y.base) > 0
    np.testing.assert_array_equal(y, np.where(x >= 0, x, x * w[None, :, None, None]))


# ---- ownership -----------------------------------------------------------------------------

def live_bytes():
    gc.collect()
    return _glue.output_pages()["live_bytes"]


def test_views_keep_the_buffer_and_the_last_one_frees_it(pages):
    _glue.output_pages(cache_bytes=0)
    base = live_bytes()
    out = ac.softmax_backward(np.ones((32, 256, 512), np.float32), np.full((32, 256, 512), .5, np.float32), -1)
    length = _glue.output_pages_owner(out)
    assert length >= out.nbytes and live_bytes() == base + length
    view = out[1:, ::2]
    flat = out.reshape(-1)
    del out
    assert live_bytes() == base + length
    assert (view == 0.5 * (1 - 512 * 0.5)).all() and flat.size == 32 * 256 * 512  # y (g - sum(g y))
    del flat
    assert live_bytes() == base + length
    del view
    assert live_bytes() == base


def test_copies_and_pickles_have_memory_of_their_own(pages):
    out = ac.softmax(np.arange(8 << 20, dtype=np.float32).reshape(8, -1) % 7, -1)
    back = pickle.loads(pickle.dumps(out))
    dup = out.copy()
    assert handler_name(back) != "aclnn_cpu_output_pages" and _glue.output_pages_owner(back) == 0
    before = live_bytes()
    expected = out.copy()
    del out
    assert live_bytes() < before
    np.testing.assert_array_equal(back, expected)
    np.testing.assert_array_equal(dup, expected)


def test_resize_moves_the_data_off_the_pages(pages):
    out = ac.softmax(np.ones((4, 1 << 20), np.float32), -1)
    ref = out.copy()
    before = live_bytes()
    out.resize((5, 1 << 20), refcheck=False)  # owned data: NumPy reallocates through the handler
    assert live_bytes() < before and _glue.output_pages_owner(out) == 0
    np.testing.assert_array_equal(out[:4], ref)


def test_torch_outputs_and_dlpack_keep_the_buffer(pages, torch):
    _glue.output_pages(cache_bytes=0)
    base = live_bytes()
    g = torch.ones((16, 256, 512), dtype=torch.bfloat16)
    y = torch.full((16, 256, 512), 0.25, dtype=torch.bfloat16)
    t = ac.softmax_backward(g, y, -1)  # torch inputs: a torch tensor over the allocated buffer
    assert isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16
    assert t.data_ptr() % HUGE == 0 and live_bytes() > base
    s = t[3:]
    del t
    assert live_bytes() > base and (s == 0.25 * (1 - 512 * 0.25)).all()  # y (g - sum(g y))
    del s
    assert live_bytes() == base
    arr = ac.softmax_backward(g.float().numpy(), y.float().numpy(), -1)
    d = torch.from_dlpack(arr)
    assert d.data_ptr() == arr.ctypes.data
    del arr
    assert live_bytes() > base and (d == 0.25 * (1 - 512 * 0.25)).all()
    del d
    assert live_bytes() == base


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="VmRSS is read from Linux's /proc")
@pytest.mark.parametrize("setting", ["huge+cache", "huge", "small pages+cache"])
def test_many_calls_keep_rss_bounded(pages, setting):
    apply(SETTINGS[setting])
    rng = np.random.default_rng(3)
    shape = (32, 256, 512)  # 16 MiB in, 16 MiB out, fp16
    g = random_array(rng, shape, np.float16)
    y = random_array(rng, shape, np.float16, 0.0, 1.0)
    for _ in range(3):
        ac.softmax_backward(g, y, -1)
    gc.collect()
    start, live = rss_bytes(), live_bytes()
    kept = []
    for i in range(60):
        out = ac.softmax_backward(g, y, -1)
        if i % 10 == 0:
            kept.append(out)  # some outputs live on for a while, most go at once
        if len(kept) > 2:
            kept.pop(0)
        del out
    del kept
    gc.collect()
    grown = rss_bytes() - start
    # 60 calls of 16 MiB: a leak would add 960 MiB; the cache and the two kept may add 4 buffers
    assert grown < 5 * 16 * MIB + 16 * MIB, grown
    assert live_bytes() == live
    _glue.output_pages(cache_bytes=0)
    assert _glue.output_pages()["cached_bytes"] == 0


def test_cache_is_bounded_and_reuses_buffers(pages):
    _glue.output_pages(huge_pages=True, cache_bytes=48 * MIB)
    outs = [ac.empty_aligned((5, MIB), np.float32) for _ in range(12)]  # 20 MiB in 20 MiB mappings
    addresses = {o.ctypes.data for o in outs}
    del outs
    gc.collect()
    st = _glue.output_pages()
    assert st["cached_bytes"] <= 48 * MIB and st["cached_buffers"] == 2
    again = [ac.empty_aligned((5, MIB), np.float32) for _ in range(2)]
    assert {o.ctypes.data for o in again} <= addresses  # the cached two, reused
    assert _glue.output_pages()["cached_buffers"] == 0
    other = ac.empty_aligned((9, MIB), np.float32)  # a size class of its own: a fresh mapping
    assert other.ctypes.data not in addresses


# ---- huge pages ----------------------------------------------------------------------------

def thp_mode():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return None


def anon_huge_bytes(address):
    """AnonHugePages of the mapping holding `address` (/proc/self/smaps)."""
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split()[0]
            if "-" in head and all(c in "0123456789abcdef-" for c in head):
                lo, hi = (int(v, 16) for v in head.split("-"))
                inside = lo <= address < hi
            elif inside and head == "AnonHugePages:":
                return int(line.split()[1]) * 1024
    raise AssertionError("mapping not found")


@pytest.mark.skipif(thp_mode() not in ("madvise", "always"), reason="no transparent huge pages here")
@pytest.mark.parametrize("huge", [True, False])
def test_huge_pages_follow_the_setting(pages, huge):
    _glue.output_pages(huge_pages=huge, cache_bytes=0)
    out = ac.softmax_backward(np.ones((32, 256, 512), np.float32), np.ones((32, 256, 512), np.float32), -1)
    assert out.ctypes.data % HUGE == 0 and (out == 1 - 512).all()  # y (g - sum(g y)), y = g = 1
    got = anon_huge_bytes(out.ctypes.data)
    if huge:
        assert got > 0  # at least some of the 32 MiB come as huge pages
    elif thp_mode() == "madvise":
        assert got == 0  # not advised: small pages only


def run_child(code, **env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), timeout=300)


def test_environment_switches():
    code = ("import numpy as np, aclnn_cpu as ac; from aclnn_cpu import _glue\n"
            "o = ac.softmax(np.ones((8, 1 << 20), np.float32), -1)\n"
            "st = _glue.output_pages(); print(st['huge_pages'], st['cache_bytes'],"
            " _glue.output_pages_owner(o) > 0, o.ctypes.data % (2 << 20), float(o[0, 0]))\n")
    off = run_child(code, ACLNN_CPU_HUGE_PAGES="0", ACLNN_CPU_OUTPUT_CACHE_BYTES="0")
    assert off.returncode == 0, off.stderr
    assert off.stdout.split() == ["False", "0", "True", "0", str(2.0 ** -20)]
    on = run_child(code, ACLNN_CPU_HUGE_PAGES="1", ACLNN_CPU_OUTPUT_CACHE_BYTES="1000000")
    assert on.returncode == 0, on.stderr
    assert on.stdout.split()[1:] == ["1000000", "True", "0", str(2.0 ** -20)]


# ---- threads and forks ---------------------------------------------------------------------

def softmax_backward_with_out(seed):
    """Inputs of an 8 MiB fp32 softmax_backward and its result through out= (NumPy memory)."""
    rng = np.random.default_rng(seed)
    g = random_array(rng, (8, 256, 512), np.float32)
    y = random_array(rng, (8, 256, 512), np.float32, 0.0, 1.0)
    expected = np.empty_like(g)
    ac.softmax_backward(g, y, -1, out=expected)
    return g, y, expected


def test_threads_allocating_and_freeing_at_once(pages):
    g, y, expected = softmax_backward_with_out(9)
    base = live_bytes()
    failures = []

    def work():
        for _ in range(15):
            o = ac.softmax_backward(g, y, -1)
            if not np.array_equal(bits(o), bits(expected)):
                failures.append(o.ctypes.data)
            o[...] = np.nan
            del o

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert live_bytes() == base


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_uses_and_frees_buffers(pages):
    g, y, expected = softmax_backward_with_out(11)
    held = ac.softmax_backward(g, y, -1)  # live in the parent across the fork
    dropped = ac.softmax_backward(g, y, -1)
    dropped[...] = np.nan
    del dropped  # cached in the parent across the fork
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            outs = [ac.softmax_backward(g, y, -1) for _ in range(3)]
            ok = all(np.array_equal(bits(o), bits(expected)) for o in outs)
            ok = ok and np.array_equal(bits(held), bits(expected))
            del outs
            gc.collect()
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    again = ac.softmax_backward(g, y, -1)
    np.testing.assert_array_equal(bits(again), bits(expected))
    np.testing.assert_array_equal(bits(held), bits(expected))
