"""Handles left open at interpreter exit: the process exits normally, with a
``ResourceWarning``, and never hangs.

One fresh interpreter per loop (the exit under test is its own) leaves every
kind of handle open, each kind on a virtual device of its own -- at module
level and in a list, with its device, and with work still in flight -- after
``asyncio.run``, ``uvloop.run`` or ``trio.run``.  Every subprocess has a timeout, so a
regression fails instead of hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

KINDS = ("Device", "Stream", "Event", "Tensor", "CompiledGraph", "Session")
LOOPS = ("asyncio", "uvloop", "trio")

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import aioge
    from aioge import _native

    runner, kinds = sys.argv[1], sys.argv[2:]
    devs = [aioge.open_device(i) for i in range(len(kinds))]  # one device per kind left open
    left = list(devs)  # handles kept in a list, as well as at module level
    handles = {}


    def delay(s, us=200_000):
        # work still in flight at exit: the exit hook must wait for it, without new threads
        with s._enqueue:  # the stream's lock, open, context bound
            _native.check(_native.lib.aiogeHostLaunchDelay(s._handle, us), "delay")


    def graph():
        g = aioge.Graph("exit")
        x = g.input("x", (2, 3), "float32")
        g.output(g.add_node("Relu", [g.add_node("Add", [x, x])]))
        return g


    async def leave_open(dev, kind):
        s = dev.default_stream if kind == "Device" else dev.open_stream()
        x = s.upload(np.ones((2, 3), np.float32))
        await x
        delay(s)
        if kind == "Device":
            h = aioge.ops.add(x, x)
        elif kind == "Stream":
            h = s
            left.append(s.upload(np.ones(4, np.float32)))  # the issue's case: an upload in flight
        elif kind == "Event":
            h = s.record_event(timing=True)
        elif kind == "Tensor":
            h = aioge.ops.add(x, x)
        elif kind == "CompiledGraph":
            h = await dev.compile(graph())
            left.append(h.launch([x], stream=s))
        else:
            h = aioge.Session(dev)
            h.add_graph(1, graph())
            await h.compile_graph(1)
            h.load_graph(1, {}, s)
            left.append(h.execute_graph_with_stream_async(1, None, [x]))
        handles[kind] = h
        left.append(h)


    async def main():
        for dev, kind in zip(devs, kinds):
            await leave_open(dev, kind)
        print("left open:", *sorted(type(h).__name__ for h in handles.values()), flush=True)


    if runner == "asyncio":
        import asyncio
        asyncio.run(main())
    elif runner == "uvloop":
        import uvloop
        uvloop.run(main())
    else:
        import trio
        trio.run(main)
    print("last line", flush=True)
    """
)


def run_script(script: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-W", "always::ResourceWarning", "-c", script, *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, **env})
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{args}: the process hung at exit\n{e.stdout}\n{e.stderr}") from None


def test_every_handle_kind_left_open_exits_normally_with_a_resource_warning():
    with ThreadPoolExecutor(max_workers=len(LOOPS)) as pool:
        results = list(pool.map(lambda r: run_script(SCRIPT, r, *KINDS, AIOGE_HOST_DEVICE_COUNT=str(len(KINDS))),
                                LOOPS))  # fmt: skip
    for runner, out in zip(LOOPS, results):
        where = f"{runner}:\n{out.stdout}\n{out.stderr}"
        assert out.returncode == 0, where
        left = sorted("Tensor" if k == "Device" else k for k in KINDS)
        assert out.stdout.split("\n")[:2] == [f"left open: {' '.join(left)}", "last line"], where
        assert "Traceback" not in out.stderr and "Exception ignored" not in out.stderr, where
        warned = [line for line in out.stderr.splitlines() if "ResourceWarning: unclosed Device" in line]
        assert len(warned) == len(KINDS), where
        for i, kind in enumerate(KINDS):
            (line,) = [w for w in warned if f"unclosed Device {i} (host) at interpreter exit" in w]
            noun = {"Stream": "1 stream", "CompiledGraph": "1 compiled graph", "Event": "1 event"}.get(kind)
            assert noun is None or noun in line, where


def test_work_stuck_past_the_exit_timeout_is_left_to_the_process_exit():
    # the stream is held far longer than the exit hook waits: it gives up, warns and exits
    script = SCRIPT.replace("delay(s)\n", "delay(s, 30_000_000)\n")
    out = run_script(script, "asyncio", "Stream", AIOGE_EXIT_TIMEOUT="0.2")
    assert out.returncode == 0, out.stderr
    assert "last line" in out.stdout
    assert "work still running after the exit timeout left to the process exit" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and "Exception ignored" not in out.stderr, out.stderr


def test_a_stream_collected_during_finalization_starts_no_thread():
    """Before the exit hook, a busy stream collected at shutdown started a thread
    that could never run: the process hung forever (the issue's reproducer)."""
    code = textwrap.dedent(
        """
        import aioge, numpy as np
        dev = aioge.open_device(0)
        s = dev.open_stream()
        keep = [dev, s, s.upload(np.ones(4, np.float32))]
        aioge.runtime._resources._at_exit.clear()  # as if the hook had not run: the GC path alone
        """
    )
    out = run_script(code)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
