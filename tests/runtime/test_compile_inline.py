"""Where ``Device.compile`` runs a compile: a small graph on the host backend on
the calling thread (no hop to a worker and back), any other compile on a worker
named ``aioge-compile``; the same semantics either way (shared compiles,
cancellation, close() refusing while one runs, errors as they were raised,
dynamic shapes' plans) -- on asyncio, uvloop and trio."""

from __future__ import annotations

import threading

import anyio
import numpy as np
import pytest

import aioge
import aioge.runtime.device
import aioge.runtime.graphs.compile
import aioge.runtime.graphs.dynamic
from aioge.graph import Graph, GraphError, run_reference
from aioge.runtime.graphs.compile import INLINE_ELEMENTS, INLINE_NODES, compiles_inline
from tests.runtime.test_executable import mlp
from tests.runtime.test_execute_feeds import dynamic_one_input

pytestmark = pytest.mark.anyio


@pytest.fixture
def compiles(monkeypatch) -> list[tuple[int, str]]:
    """The thread (id, name then) of every ``compile_graph`` call, in order."""
    seen: list[tuple[int, str]] = []
    real = aioge.runtime.graphs.compile.compile_graph

    def spy(*args, **kwargs):
        seen.append((threading.get_ident(), threading.current_thread().name))
        return real(*args, **kwargs)

    monkeypatch.setattr(aioge.runtime.graphs.compile, "compile_graph", spy)
    return seen


def where(seen: list[tuple[int, str]]) -> list[str]:
    """``"here"`` for a compile on the calling thread, else its thread's name."""
    me = threading.get_ident()
    return ["here" if ident == me else name for ident, name in seen]


def chain(nodes: int) -> Graph:
    """``nodes`` Softmaxes in a row on a small input (nothing fuses them)."""
    g = Graph(f"chain{nodes}")
    h = g.input("x", (2, 3), "float32")
    for i in range(nodes):
        h = g.add_node("Softmax", [h], {"axis": -1}, name=f"n{i}")
    g.output(h)
    return g


def big_weight() -> Graph:
    """Two nodes, one weight of more than ``INLINE_ELEMENTS`` elements."""
    g = Graph("big_weight")
    x = g.input("x", (2, 1025), "float32")
    w = g.constant("w", np.full((1025, 1024), 0.5, np.float32))
    g.output(g.add_node("Relu", [g.add_node("MatMul", [x, w])], name="y"))
    return g


def test_the_bounds_count_nodes_and_the_elements_of_known_values():
    assert compiles_inline(mlp())  # its node outputs have no shape yet: they count nothing
    assert compiles_inline(chain(INLINE_NODES))
    assert not compiles_inline(chain(INLINE_NODES + 1))
    assert 1025 * 1024 > INLINE_ELEMENTS and not compiles_inline(big_weight())


async def test_a_small_graph_compiles_on_the_calling_thread_a_large_one_on_a_worker(dev, compiles):
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    g = mlp()
    model = await dev.compile(g)
    assert where(compiles) == ["here"]
    (out,), (ref,) = (await model.execute({"x": x})).values(), run_reference(g, {"x": x}).values()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    for big in (chain(INLINE_NODES + 1), big_weight()):
        (await dev.compile(big)).close()
    model.close()
    assert where(compiles) == ["here", "aioge-compile", "aioge-compile"] and not dev.context.compiles


async def test_every_compile_on_ascend_goes_to_a_worker(dev, compiles, monkeypatch):
    monkeypatch.setattr(dev, "backend", "ascend")  # only the decision reads it: the compile is the host's
    (await dev.compile(mlp())).close()
    assert where(compiles) == ["aioge-compile"]


async def test_concurrent_callers_share_one_inline_compile(dev, compiles):
    g = mlp()
    got: list[object] = []

    async def caller() -> None:
        got.append(await dev.compile(g))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(caller)
    # the compile has no await point: the callers that came while its caller took
    # the result (one checkpoint) joined it
    assert where(compiles) == ["here"]
    assert len(got) == 4 and all(m is got[0] for m in got)
    assert not dev.context.compiles  # the finished compile is forgotten: a later call compiles anew
    again = await dev.compile(g)
    assert again is not got[0] and len(compiles) == 2
    other = await dev.compile(g, optimize=1)  # other options: another compile
    assert len(compiles) == 3
    for m in (got[0], again, other):
        m.close()


async def test_a_cancelled_inline_compile_closes_the_model_nobody_took(dev, compiles):
    with anyio.CancelScope() as scope:
        scope.cancel()
        await dev.compile(mlp())
    assert scope.cancelled_caught and len(compiles) == 1
    assert not dev.context.compiles and not dev.context.models  # discarded: closed
    model = await dev.compile(mlp())  # the device goes on
    assert not model.closed and set(dev.context.models) == {model}
    model.close()


async def test_close_refuses_while_an_inline_compile_runs(dev, monkeypatch):
    real = aioge.runtime.graphs.compile.compile_graph
    seen: list[list[bool]] = []

    def inside(device, *args, **kwargs):  # the compile is registered before it runs
        seen.append([job.done for job in device.context.compiles.values()])
        with pytest.raises(aioge.BusyResourceError, match="compile in flight"):
            device.close()
        return real(device, *args, **kwargs)

    monkeypatch.setattr(aioge.runtime.graphs.compile, "compile_graph", inside)
    model = await dev.compile(mlp())
    assert seen == [[False]] and not dev.closed and not model.closed
    await dev.aclose()
    assert dev.closed and model.closed and not dev.context.compiles


def mismatched() -> Graph:
    g = Graph("mismatched")
    x = g.input("x", (4, 8), "float32")
    g.output(g.add_node("MatMul", [x, g.constant("w", np.ones((7, 4), np.float32))], name="y"))
    return g


async def test_a_compile_error_is_raised_as_it_was_on_either_path(dev, compiles, monkeypatch):
    raised: list[type[BaseException]] = []
    for nodes in (INLINE_NODES, -1):  # inline, then on a worker
        monkeypatch.setattr(aioge.runtime.graphs.compile, "INLINE_NODES", nodes)
        with pytest.raises(ValueError, match="mode must be") as e1:
            await dev.compile(mlp(), mode="bogus")
        with pytest.raises(GraphError) as e2:
            await dev.compile(mismatched())
        raised += [e1.type, e2.type]
        assert not dev.context.compiles and not dev.context.models
    assert where(compiles) == ["here", "here", "aioge-compile", "aioge-compile"]
    assert raised[:2] == raised[2:]


async def test_dynamic_shapes_probe_and_compile_their_plans_through_the_same_decision(dev, compiles, monkeypatch):
    real_probe = aioge.runtime.graphs.dynamic._probe_outputs
    probes: list[tuple[int, str]] = []

    def probe(graph):
        probes.append((threading.get_ident(), threading.current_thread().name))
        return real_probe(graph)

    monkeypatch.setattr(aioge.runtime.graphs.dynamic, "_probe_outputs", probe)
    g = dynamic_one_input()
    model = await dev.compile(g)
    assert isinstance(model, aioge.DynamicCompiledGraph) and where(probes) == ["here"]
    for n in (1, 3):
        x = np.linspace(-1, 1, n * 8, dtype=np.float32).reshape(n, 8)
        (out,), (ref,) = (await model.execute({"x": x})).values(), run_reference(g, {"x": x}).values()
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert where(compiles) == ["here", "here"]
    # concurrent first executions at a new shape share one specialisation and one compile
    x5 = np.ones((5, 8), np.float32)
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(model.execute, {"x": x5})
    assert where(compiles) == ["here"] * 3 and model.stats["compiles"] == 3
    monkeypatch.setattr(aioge.runtime.graphs.compile, "INLINE_NODES", -1)
    await model.execute({"x": np.ones((2, 8), np.float32)})
    assert where(compiles)[3:] == ["aioge-compile"] and model.stats["compiles"] == 4
    await model.aclose()
    other = await dev.compile(dynamic_one_input())
    assert where(probes) == ["here", "aioge-compile"] and other.outputs == model.outputs
    await other.aclose()
