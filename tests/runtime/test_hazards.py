"""Memory hazards between launches : read-after-write,
write-after-read and write-after-write, on one stream and across two, through
a tensor, through reshape views of it, through a compiled model's inputs and
outputs and through its arenas.

Determinism without sleeps: the first launch is held on the device by a gate
(``aiogeHostLaunchGate``), so the second is enqueued while the first is still
pending; the second must then not run until the gate opens (a bounded probe
that can only time out if it is ordered, never a sleep standing in for
synchronisation), and after the gate opens the values show which order the
device ran them in.
"""

from __future__ import annotations

import numpy as np
import pytest

import aioge
from aioge import TensorSpec, _native
from aioge._native import ffi, lib
from aioge.graph import run_reference
from tests.runtime.test_executable import branches

pytestmark = pytest.mark.anyio

OLD, NEW, NEWER = 1.0, 2.0, 3.0
N = 8
M = 64  # the model's size: big enough for the planner to give its branches two streams


class Gate:
    """Holds a stream on the device until opened (its own timeout keeps a failing test from hanging)."""

    def __init__(self, s: aioge.Stream) -> None:
        g = ffi.new("uint64_t *")
        with s._enqueue:  # the stream's lock, open, context bound
            _native.check(lib.aiogeHostLaunchGate(s._handle, 20_000, g), "gate")
        self.id = int(g[0])

    def open(self) -> None:
        if lib.aiogeHostOpenGate(self.id):  # idempotent: an opened gate is no longer pending
            _native.recent_error()

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.open()


def held(comp: aioge.Completion | None) -> bool:
    """The launch has not run after a bounded wait: it waits for the gated one.

    When the launch is ordered behind the gate this is True whatever the
    machine's speed; an unordered launch would run (and the value checks
    after the gate opens catch it even when this probe is too short)."""
    assert comp is not None
    return not comp._ran_within(20)


@pytest.fixture
async def pair(dev):
    async with dev.open_stream() as a, dev.open_stream() as b:
        yield a, b


def write(t: aioge.Tensor, value: float, s: aioge.Stream) -> aioge.Completion:
    """Overwrite ``t`` with ``value`` on ``s`` (Fills reads only the shape of its input)."""
    like = s.empty(t.shape)
    (out,) = aioge.op("Fills", [like], [t], {"value": value}, stream=s)
    assert out.launch is not None
    return out.launch


def read(t: aioge.Tensor, s: aioge.Stream) -> aioge.Tensor:
    """A copy of ``t`` made by a launch on ``s``."""
    (out,) = aioge.op("Identity", [t], [TensorSpec(t.shape, t.dtype)], stream=s)
    return out


def handles(x: aioge.Tensor, through: str) -> tuple[aioge.Tensor, aioge.Tensor]:
    """What the first and the second launch use: ``x`` itself, or a view of it for one of them."""
    return (x, x) if through == "tensor" else (x, x.reshape(2, N // 2))


@pytest.mark.parametrize("through", ["tensor", "view"])
@pytest.mark.parametrize("streams", ["same", "cross"])
@pytest.mark.parametrize("hazard", ["RAW", "WAR", "WAW"])
async def test_hazard_matrix_on_tensors_and_views(pair, hazard, streams, through):
    a, b = pair
    second = b if streams == "cross" else a
    x = a.upload(np.full(N, OLD, np.float32))
    await x
    first_h, second_h = handles(x, through)
    with Gate(a) as gate:
        if hazard == "RAW":
            write(first_h, NEW, a)
            r = read(second_h, second)
            assert held(r.launch)
        elif hazard == "WAR":
            r = read(first_h, a)
            assert held(write(second_h, NEW, second))
        else:
            write(first_h, NEW, a)
            assert held(write(second_h, NEWER, second))
        gate.open()
        if hazard == "RAW":
            np.testing.assert_array_equal((await r.numpy()).ravel(), np.full(N, NEW, np.float32))
        elif hazard == "WAR":  # the read saw the value before the write
            np.testing.assert_array_equal((await r.numpy()).ravel(), np.full(N, OLD, np.float32))
            np.testing.assert_array_equal(await x.numpy(), np.full(N, NEW, np.float32))
        else:  # the later write wins
            np.testing.assert_array_equal(await x.numpy(), np.full(N, NEWER, np.float32))
        await a.synchronize()
        await second.synchronize()


@pytest.mark.parametrize("anyio_backend", [("asyncio", {"debug": True})], ids=["asyncio"])
@pytest.mark.parametrize("mode", ["sunk", "per_op"])
@pytest.mark.parametrize("hazard", ["RAW-input", "WAR-input", "WAW-output", "RAW-output"])
async def test_hazards_on_model_inputs_and_outputs(pair, compiled, mode, hazard):
    """A model's execution is one reader of its inputs and one writer of its outputs,
    whatever streams its segments run on (two here, in sunk mode)."""
    a, b = pair
    g = branches(M)
    model = await compiled(g, mode=mode, max_streams=2)
    assert mode == "per_op" or model.plan.num_streams == 2
    rng = np.random.default_rng(0)
    old, new = (rng.standard_normal((M, M)).astype(np.float32) for _ in range(2))
    ref_old, ref_new = (next(iter(run_reference(g, {"x": v}).values())) for v in (old, new))
    x = a.upload(old)
    y = a.empty(ref_old.shape)  # an output the caller provides
    await x
    with Gate(a) as gate:
        if hazard == "RAW-input":  # a write of the input, then the model reads it on another stream
            (src,) = aioge.op("Identity", [b.upload(new)], [x], stream=a)  # pending behind the gate
            outs, comps = model.launch([x], stream=b)
            assert held(comps[-1])
        elif hazard == "WAR-input":  # the model reads the input, then another stream overwrites it
            outs, _ = model.launch([x], stream=a)
            (src,) = aioge.op("Identity", [b.upload(new)], [x], stream=b)
            assert held(src.launch)
        elif hazard == "WAW-output":  # the model writes the caller's output, then another stream does
            outs, _ = model.launch([x], [y], stream=a)
            assert held(write(y, NEWER, b))
        else:  # the model writes an output, another stream reads it
            outs, _ = model.launch([x], [y], stream=a)
            r = read(y, b)
            assert held(r.launch)
        gate.open()
        (out,) = outs.values()
        tol = {"rtol": 1e-4, "atol": 1e-5}
        if hazard == "RAW-input":
            np.testing.assert_allclose(await out.numpy(), ref_new, **tol)
        elif hazard == "WAR-input":
            np.testing.assert_allclose(await out.numpy(), ref_old, **tol)
            np.testing.assert_array_equal(await x.numpy(), new)
        elif hazard == "WAW-output":
            np.testing.assert_array_equal(await y.numpy(), np.full(ref_old.shape, NEWER, np.float32))
        else:
            np.testing.assert_allclose(await r.numpy(), ref_old, **tol)
        await a.synchronize()
        await b.synchronize()


@pytest.mark.parametrize("anyio_backend", [("asyncio", {"debug": True})], ids=["asyncio"])
async def test_arenas_are_never_shared_by_executions_in_flight(pair, compiled):
    """Executions on two streams: the one held on the device keeps its arena; the
    other stream's executions run meanwhile in another one and reuse only that."""
    a, b = pair
    g = branches(M)
    model = await compiled(g, max_streams=2)
    assert model.plan.num_streams == 2
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((M, M)).astype(np.float32) for _ in range(3)]
    refs = [next(iter(run_reference(g, {"x": v}).values())) for v in xs]
    ins = [a.upload(xs[0]), b.upload(xs[1]), b.upload(xs[2])]
    for t in ins:
        await t
    with Gate(a) as gate:
        held_outs, comps = model.launch([ins[0]], stream=a)
        assert held(comps[-1])
        for i in (1, 2):  # run to completion while the first is held: its arena is not theirs
            outs, _ = model.launch([ins[i]], stream=b)
            np.testing.assert_allclose(await next(iter(outs.values())).numpy(), refs[i], rtol=1e-4, atol=1e-5)
        assert model.stats["arenas"] == 2 and model.stats["in_flight"] == 1
        gate.open()
        np.testing.assert_allclose(await next(iter(held_outs.values())).numpy(), refs[0], rtol=1e-4, atol=1e-5)
        await a.synchronize()
