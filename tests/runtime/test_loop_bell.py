"""The bell that wakes an asyncio loop from a ThreadJob's worker (scheduler._Bell)."""

from __future__ import annotations

import asyncio
import gc
import os
import threading

import pytest

from aioge._native import acl
from aioge.runtime import scheduler
from aioge.runtime.scheduler import ThreadJob

pytestmark = pytest.mark.skipif(not hasattr(os, "eventfd"), reason="the bell needs eventfd")


def test_ring_adds_one_and_reports_a_bad_fd() -> None:
    fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    try:
        acl.ring(fd)
        acl.ring(fd)
        assert os.eventfd_read(fd) == 2
        with pytest.raises(BlockingIOError):
            os.eventfd_read(fd)
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        acl.ring(fd)  # closed now
    with pytest.raises(TypeError):
        acl.ring("3")  # type: ignore[arg-type]


def test_a_thread_job_wakes_its_loop_through_the_bell() -> None:
    release = threading.Event()

    async def main() -> tuple[int, object]:
        loop = asyncio.get_running_loop()
        # the call ends only once the caller is parked on it (a call done before its await makes no waiter)
        job = ThreadJob(lambda: release.wait(30) and threading.get_ident(), "aioge-test", lambda r: None)
        loop.call_soon(release.set)
        ran_on = await job.result()
        return ran_on, scheduler._bells.get(loop)

    ran_on, bell = asyncio.run(main())
    assert ran_on != threading.get_ident()
    assert isinstance(bell, scheduler._Bell)


def test_posts_from_many_threads_all_run_on_the_loop_in_order_per_thread() -> None:
    async def main() -> dict[int, list[int]]:
        loop = asyncio.get_running_loop()
        post = scheduler._bell_of(loop)
        seen: dict[int, list[int]] = {t: [] for t in range(4)}
        loop_thread = threading.get_ident()
        done = asyncio.Event()
        wrong: list[int] = []

        def note(arg: tuple[int, int]) -> None:
            if threading.get_ident() != loop_thread:
                wrong.append(arg[0])
            seen[arg[0]].append(arg[1])
            if sum(map(len, seen.values())) == 4 * 500:
                done.set()

        def poster(t: int) -> None:
            for i in range(500):
                post(note, (t, i))

        threads = [threading.Thread(target=poster, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        await asyncio.wait_for(done.wait(), 30)
        for th in threads:
            th.join()
        assert not wrong
        return seen

    seen = asyncio.run(main())
    assert all(v == list(range(500)) for v in seen.values())


def test_a_call_that_raises_is_reported_and_the_next_still_runs() -> None:
    async def main() -> tuple[list[dict[str, object]], list[int]]:
        loop = asyncio.get_running_loop()
        reported: list[dict[str, object]] = []
        loop.set_exception_handler(lambda lp, ctx: reported.append(ctx))
        post = scheduler._bell_of(loop)
        ran: list[int] = []
        done = asyncio.Event()

        def boom(arg: int) -> None:
            raise ValueError(f"boom {arg}")

        def ok(arg: int) -> None:
            ran.append(arg)
            done.set()

        def from_thread() -> None:
            post(boom, 1)
            post(ok, 2)

        threading.Thread(target=from_thread).start()
        await asyncio.wait_for(done.wait(), 30)
        return reported, ran

    reported, ran = asyncio.run(main())
    assert ran == [2]
    assert len(reported) == 1 and isinstance(reported[0]["exception"], ValueError)


def test_posting_to_a_closed_loop_raises_and_the_fd_closes_with_the_loop() -> None:
    loop = asyncio.new_event_loop()

    async def grab() -> scheduler._Bell:
        running = asyncio.get_running_loop()
        scheduler._bell_of(running)
        bell = scheduler._bells[running]
        assert bell is not None
        return bell

    bell = loop.run_until_complete(grab())
    fd = bell._fd
    os.fstat(fd)  # open
    loop.close()
    with pytest.raises(RuntimeError, match="closed"):
        bell.post(print, None)
    del loop
    gc.collect()
    with pytest.raises(RuntimeError, match="closed"):
        bell.post(print, None)  # the loop is gone
    with pytest.raises(OSError):
        os.fstat(fd)  # closed with the loop


def test_a_thread_job_result_reaching_a_closed_loop_is_discarded() -> None:
    release = threading.Event()
    discarded: list[object] = []
    loop = asyncio.new_event_loop()

    async def start() -> ThreadJob[object]:
        job: ThreadJob[object] = ThreadJob(lambda: release.wait(30) and "result", "aioge-test", discarded.append)
        task = asyncio.ensure_future(job.result())
        await asyncio.sleep(0)  # parked on the job
        task.cancel()
        return job

    job = loop.run_until_complete(start())
    loop.close()
    release.set()
    assert job.wait_sync(30)
    assert discarded == ["result"]  # nobody left to take it: discarded, no error from the closed loop


class _NoReaders(asyncio.SelectorEventLoop):
    def add_reader(self, fd: object, callback: object, *args: object) -> None:
        raise NotImplementedError


def test_a_loop_without_add_reader_is_woken_by_call_soon_threadsafe() -> None:
    loop = _NoReaders()
    try:

        release = threading.Event()

        async def main() -> str:
            # the call ends only once the caller is parked on it: it is woken through the loop, whose
            # bell is looked up then (a call done before its await makes no waiter)
            job = ThreadJob(lambda: release.wait(30) and "done", "aioge-test", lambda r: None)
            asyncio.get_running_loop().call_soon(release.set)
            return await job.result()

        assert loop.run_until_complete(main()) == "done"
        assert loop in scheduler._bells and scheduler._bells[loop] is None
        assert scheduler._bell_of(loop) == loop.call_soon_threadsafe
    finally:
        loop.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_its_own_bell() -> None:
    loop = asyncio.new_event_loop()

    async def ring_once() -> object:
        return scheduler._bell_of(asyncio.get_running_loop())

    try:
        parent = loop.run_until_complete(ring_once())
        assert scheduler._bells[loop] is not None
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: the parent's bells are forgotten
            os.write(w, b"1" if loop not in scheduler._bells else b"0")
            os._exit(0)
        os.close(w)
        got = os.read(r, 1)
        os.close(r)
        os.waitpid(pid, 0)
        assert got == b"1"
        assert loop.run_until_complete(ring_once()) == parent  # the parent keeps its own
    finally:
        loop.close()
