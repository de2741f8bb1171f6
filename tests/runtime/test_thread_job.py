"""ThreadJob on the runtime's long-lived workers: one call shared by its awaiters,
parallel jobs in parallel (up to the workers' limit), idle workers kept and then
let go, cancellation, discarded results, wait_sync, and compiles on a worker that
still has another (closed) device's context bound -- on asyncio, uvloop and trio."""

from __future__ import annotations

import gc
import threading
import weakref

import anyio
import numpy as np
import pytest

import aioge
import aioge.runtime.device
import aioge.runtime.graphs.compile
from aioge.graph import run_reference
from aioge.runtime import scheduler
from aioge.runtime.scheduler import ThreadJob
from tests.runtime.test_executable import mlp

pytestmark = pytest.mark.anyio


class Box:
    """A result that can be watched for being dropped or discarded."""

    def __init__(self, value: object = None) -> None:
        self.value = value
        self.discarded = False


def discard(b: Box) -> None:
    b.discarded = True


@pytest.fixture
def workers(monkeypatch):
    """A pool of its own (2 workers, kept 0.2 s), so counts do not see other tests' jobs."""
    pool = scheduler._Workers(limit=2, keep=0.2, idle_name="aioge-idle")
    monkeypatch.setattr(scheduler, "_workers", pool)
    yield pool
    deadline = threading.Event()
    for _ in range(400):  # the pool's workers end once idle for `keep` (a busy machine: late)
        if not pool.threads:
            break
        deadline.wait(0.05)
    assert pool.threads == 0


async def test_sequential_jobs_reuse_one_named_worker(workers):
    seen = []

    def call() -> Box:
        t = threading.current_thread()
        seen.append((t.ident, t.name, t.daemon))
        return Box()

    for _ in range(5):
        assert not (await ThreadJob(call, "aioge-compile", discard).result()).discarded
    assert workers.started == 1 and workers.threads == 1
    assert len({ident for ident, _, _ in seen}) == 1 and seen[0][0] != threading.get_ident()
    assert all(name == "aioge-compile" and daemon for _, name, daemon in seen)
    (worker,) = [t for t in threading.enumerate() if t.ident == seen[0][0]]
    for _ in range(4000):  # between jobs the worker says it is idle
        if worker.name == "aioge-idle":
            break
        await anyio.sleep(0.005)
    assert worker.name == "aioge-idle"
    for _ in range(4000):  # idle longer than the pool keeps it: gone
        if not worker.is_alive():
            break
        await anyio.sleep(0.005)
    assert workers.threads == 0 and not worker.is_alive()
    await ThreadJob(call, "aioge-probe", discard).result()  # the next job starts a new one
    assert workers.started == 2 and seen[-1][1] == "aioge-probe"


async def test_concurrent_jobs_run_in_parallel_up_to_the_limit(workers):
    pair = threading.Barrier(2, timeout=20)  # passes only if two calls run at once
    running, peak, lock = [0], [0], threading.Lock()
    release = threading.Event()

    def call(i: int) -> Box:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        try:
            if i < 2:
                pair.wait()
            assert release.wait(20)
            return Box(i)
        finally:
            with lock:
                running[0] -= 1

    jobs = [ThreadJob(lambda i=i: call(i), "aioge-compile", discard) for i in range(5)]
    for _ in range(4000):
        if peak[0] == 2:
            break
        await anyio.sleep(0.005)
    assert peak[0] == 2 and not any(j.done for j in jobs)  # the others wait their turn
    release.set()
    got = [(await j.result()).value for j in jobs]
    assert got == [0, 1, 2, 3, 4] and peak[0] == 2
    assert workers.started == 2


async def test_concurrent_awaiters_share_one_call_and_cancellation_leaves_it_running(workers):
    release = threading.Event()
    calls = []

    def call() -> Box:
        calls.append(1)
        assert release.wait(20)
        return Box("x")

    job = ThreadJob(call, "aioge-compile", discard)
    assert job.join() and job.join()
    got = []

    async def taker() -> None:
        got.append(await job.result())

    async with anyio.create_task_group() as tg:
        tg.start_soon(taker)
        with anyio.move_on_after(0.05) as scope:  # returns at once; the call goes on
            await job.result()
        assert scope.cancelled_caught and not job.done
        release.set()
        got.append(await job.result())
    assert len(calls) == 1 and got[0] is got[1] and not got[0].discarded


async def test_a_result_no_one_takes_is_discarded_and_not_kept_by_the_worker(workers):
    release = threading.Event()
    made: list[weakref.ref[Box]] = []

    def call() -> Box:
        assert release.wait(20)
        b = Box()
        made.append(weakref.ref(b))
        return b

    job = ThreadJob(call, "aioge-compile", discard)
    with anyio.move_on_after(0.02):
        await job.result()
    release.set()
    assert job.wait_sync(20) and job.done and not job.join()  # dropped: a new job is needed
    (ref,) = made
    box = ref()
    assert box is not None and box.discarded
    del box, job
    for _ in range(4000):  # once the worker is back idle, it holds nothing of the job it ran
        gc.collect()
        if ref() is None:
            break
        await anyio.sleep(0.005)
    assert ref() is None


async def test_wait_sync_times_out_while_the_call_runs(workers):
    release = threading.Event()
    job = ThreadJob(lambda: Box() if release.wait(20) else None, "aioge-compile", discard)
    assert job.wait_sync(0.02) is False and not job.done
    release.set()
    assert job.wait_sync(20) is True and job.done
    assert not (await job.result()).discarded


async def test_errors_reach_the_awaiter_and_a_failing_discard_keeps_the_worker(workers, monkeypatch):
    def fail() -> Box:
        raise ValueError("no compile")

    with pytest.raises(ValueError, match="no compile"):
        await ThreadJob(fail, "aioge-compile", discard).result()
    reported = []
    monkeypatch.setattr(threading, "excepthook", lambda args: reported.append(args.exc_value))

    def bad_discard(b: Box) -> None:
        raise RuntimeError("discard failed")

    release = threading.Event()
    job = ThreadJob(lambda: Box() if release.wait(20) else None, "aioge-compile", bad_discard)
    with anyio.move_on_after(0.02):
        await job.result()
    release.set()
    assert job.wait_sync(20)
    for _ in range(4000):
        if reported:
            break
        await anyio.sleep(0.005)
    assert [str(e) for e in reported] == ["discard failed"]
    assert (await ThreadJob(Box, "aioge-compile", discard).result()).value is None
    assert workers.started == 1  # the same worker went on


def test_a_pool_needs_a_thread():
    with pytest.raises(ValueError, match="at least 1"):
        scheduler._Workers(limit=0, keep=1.0, idle_name="aioge-idle")


async def test_compiles_on_a_worker_that_had_a_closed_device_bound(monkeypatch):
    monkeypatch.setattr(aioge.runtime.graphs.compile, "INLINE_NODES", -1)  # every compile on a worker
    g = mlp()
    x = np.ones((4, 8), np.float32)
    (ref,) = run_reference(g, {"x": x}).values()
    for _ in range(3):  # each device's compile on a worker bound to the previous (closed) one
        async with aioge.open_device(0) as dev:
            model = await dev.compile(g)
            (out,) = (await model.execute({"x": x})).values()
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert scheduler._workers.threads >= 1  # kept: the leak check counts handles, not idle workers
