"""The host runtime's environment settings: read once, validated.

A bad value is never replaced by the default in silence: aclInit (the first
``open_device``) fails with InvalidParamError naming the variable.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = """
import asyncio, aioge
async def main():
    async with aioge.open_device(0) as dev, dev.open_stream() as s:
        x = s.upload(__import__("numpy").ones(4, "float32"))
        print("ok", (await aioge.ops.add(x, x).numpy()).tolist())
try:
    asyncio.run(main())
except aioge.InvalidParamError as e:
    print("refused", e.message)
"""

BAD = [
    ("AIOGE_HOST_THREADS", "abc"),
    ("AIOGE_HOST_THREADS", "-2"),
    ("AIOGE_HOST_DEVICE_COUNT", "0"),
    ("AIOGE_HOST_DEVICE_COUNT", "65"),
    ("AIOGE_HOST_DEVICE_MEMORY", "12Q"),
    ("AIOGE_HOST_DEVICE_MEMORY", "-1G"),
    ("AIOGE_HOST_WORKER_NICE", "99"),
    ("AIOGE_HOST_SPIN_US", "-5"),
    ("AIOGE_HOST_POOL_SPIN_US", "9" * 30),
    ("AIOGE_HOST_WINOGRAD", "yes"),
    ("AIOGE_HOST_CANN_ONLY", "true"),
    ("AIOGE_HOST_INLINE_BYTES", "64K"),
]


def _run(**env: str) -> str:
    out = subprocess.run([sys.executable, "-c", SCRIPT], env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


@pytest.mark.parametrize(("name", "value"), BAD, ids=[f"{n}={v[:8]}" for n, v in BAD])
def test_bad_value_fails_aclinit_naming_the_variable(name, value):
    out = _run(**{name: value})
    assert out.startswith("refused"), out
    assert name in out and value in out, out


def test_valid_values_run():
    out = _run(AIOGE_HOST_THREADS="2", AIOGE_HOST_DEVICE_MEMORY="256M", AIOGE_HOST_SPIN_US="0",
               AIOGE_HOST_POOL_SPIN_US="0", AIOGE_HOST_WORKER_NICE="0", AIOGE_HOST_WINOGRAD="0",
               AIOGE_HOST_CANN_ONLY="1", AIOGE_HOST_DEVICE_COUNT="2")  # fmt: skip
    assert out == "ok [2.0, 2.0, 2.0, 2.0]", out
