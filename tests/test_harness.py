"""The test harness itself (tests/conftest.py): every event loop a test
runs, however it was started, is in debug mode and has what it only logs
turned into a failure."""

from __future__ import annotations

import asyncio
import threading

import pytest
import uvloop

from tests.support.harness import loop_errors


@pytest.mark.parametrize("new_loop", [asyncio.new_event_loop, uvloop.new_event_loop], ids=["asyncio", "uvloop"])
def test_loops_started_by_a_test_run_in_debug_mode_and_report_errors(new_loop):
    seen = {}

    def run() -> None:  # in a thread, as the several-loops tests do
        async def main() -> None:
            loop = asyncio.get_running_loop()
            seen["debug"] = loop.get_debug()
            loop.call_exception_handler({"message": "a task exception was never retrieved"})

        with asyncio.Runner(loop_factory=new_loop) as runner:
            runner.run(main())

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert seen["debug"]
    errors, loop_errors.records = loop_errors.records, []  # what would fail this test at teardown
    assert len(errors) == 1 and errors[0].getMessage().startswith("a task exception was never retrieved")
