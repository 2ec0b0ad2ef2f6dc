"""Processes forked after parallel calls (multiprocessing's default start method on Linux before
Python 3.14). GNU OpenMP keeps a pool of worker threads per thread that opened a parallel region;
fork() copies the pool's bookkeeping but not its threads, so without the library's fork handler
(runtime/threads.cpp) a child's first parallel call waits forever for workers that do not exist.
Each child here must finish in time, with the parent's bits, on the parent's thread count; so
must children forked while other threads are inside the library (runtime/fork_guard.h)."""
from __future__ import annotations

import multiprocessing
import os
import pickle
import select
import signal
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import aclnn_cpu as ac
from aclnn_cpu import _config

TIMEOUT_S = 60.0


def softmax_call():
    # 256 rows of 4096: well over the kernels' grain, so the call opens a parallel region.
    rng = np.random.default_rng(7)
    grad = rng.standard_normal((256, 4096), dtype=np.float32)
    y = np.full((256, 4096), 1 / 4096, np.float32)
    return ac.softmax_backward(grad, y, -1)


def group_norm_call():
    rng = np.random.default_rng(8)
    dy = rng.standard_normal((2, 64, 32, 32), dtype=np.float32)
    x = rng.standard_normal((2, 64, 32, 32), dtype=np.float32)
    mean = np.zeros((2, 8), np.float32)
    rstd = np.ones((2, 8), np.float32)
    return ac.group_norm_backward(dy, x, mean, rstd, np.ones(64, np.float32), 2, 64, 1024, 8)


def in_forked_child(fn):
    """fn() in a child forked now: its result, or a failure if the child hangs or dies."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report, then leave without running the parent's cleanup
        status = 1
        try:
            os.close(read_end)
            payload = pickle.dumps(fn())
            with os.fdopen(write_end, "wb") as out:
                out.write(payload)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    # Read while the child writes (a result bigger than the pipe's buffer blocks it until then),
    # up to a deadline: a child that hangs never closes its end.
    deadline = time.monotonic() + TIMEOUT_S
    chunks = []
    with os.fdopen(read_end, "rb", buffering=0) as src:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([src], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail(f"the forked child did not finish in {TIMEOUT_S:.0f} s (a stale OpenMP pool?)")
            chunk = src.read(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child exit status {status}"
    payload = b"".join(chunks)
    return pickle.loads(payload)


@pytest.fixture
def two_threads():
    previous = ac.get_num_threads()
    ac.set_num_threads(2)
    yield
    ac.set_num_threads(previous)


@pytest.mark.parametrize("call", [softmax_call, group_norm_call], ids=["softmax", "group_norm"])
def test_child_forked_after_parallel_calls_runs_them_too(two_threads, call):
    parent = call()  # the parent's pool now exists
    parent = parent if isinstance(parent, tuple) else (parent,)
    threads, child = in_forked_child(lambda: (ac.get_num_threads(), call()))
    child = child if isinstance(child, tuple) else (child,)
    assert threads == 2, "the child should keep the parent's thread count"
    assert [a.tobytes() for a in child] == [a.tobytes() for a in parent]
    # The parent's own next call still works (its pool was released for the fork and restarts).
    again = call()
    again = again if isinstance(again, tuple) else (again,)
    assert [a.tobytes() for a in again] == [a.tobytes() for a in parent]


def test_grandchild_of_forks_after_parallel_calls(two_threads):
    expected = softmax_call().tobytes()

    def child():
        softmax_call()  # the child's own pool, released again by its own fork
        return in_forked_child(lambda: softmax_call().tobytes())

    assert in_forked_child(child) == expected


# Builds without OpenMP have no pool, and those on LLVM's or Intel's runtime let it re-initialise
# itself in the child: neither has this fallback. CI's and these machines' builds (GNU OpenMP) do.
@pytest.mark.skipif(not _config.has_fork_pool_handler(), reason="this build has no OpenMP pool handler")
def test_child_runs_on_one_thread_where_the_pool_cannot_be_released(two_threads):
    # The fallback (a runtime without omp_pause_resource_all, or a fork from inside a parallel
    # region): the parent's pool stays, so the child must not open a parallel region at all.
    expected = [a.tobytes() for a in group_norm_call()]
    _config.set_release_pool_on_fork(False)
    try:
        def child():
            state = (_config.single_threaded_after_fork(), ac.get_num_threads(), ac.config()["threads"])
            ac.set_num_threads(2)  # asking again does not bring the threads back
            grandchild = in_forked_child(lambda: (_config.single_threaded_after_fork(), ac.get_num_threads()))
            return state, ac.get_num_threads(), [a.tobytes() for a in group_norm_call()], grandchild

        state, threads_after_asking, results, grandchild = in_forked_child(child)
    finally:
        _config.set_release_pool_on_fork(True)
    assert state == (True, 1, 1) and threads_after_asking == 1
    assert grandchild == (True, 1)
    assert results == expected
    assert not _config.single_threaded_after_fork() and ac.get_num_threads() == 2


def test_children_forked_while_other_threads_plan_calls():
    # fork() copies only the forking thread: a runtime mutex another thread holds at that moment
    # (here the executor registry's, taken by every GetWorkspaceSize) would stay locked in the
    # child. Before runtime/fork_guard.h, 4 of 300 such children hung; the loop gives a
    # regression about a 93% chance to show per run, and the fixed library none to fail.
    grad = np.ones((4, 8), np.float32)
    y = np.full((4, 8), 1 / 8, np.float32)
    expected = ac.softmax_backward(grad, y, -1).tobytes()
    stop = threading.Event()

    def plan_calls():
        while not stop.is_set():
            ac.softmax_backward(grad, y, -1)

    workers = [threading.Thread(target=plan_calls) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: "multi-threaded, use of fork()"
            results = [in_forked_child(lambda: ac.softmax_backward(grad, y, -1).tobytes()) for _ in range(200)]
    finally:
        stop.set()
        for w in workers:
            w.join()
    assert results == [expected] * 200


def _pool_task(seed):
    return softmax_call().tobytes()


def test_multiprocessing_fork_pool_after_parallel_calls(two_threads):
    expected = softmax_call().tobytes()
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        results = pool.map_async(_pool_task, range(4)).get(timeout=TIMEOUT_S)
    assert results == [expected] * 4


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
