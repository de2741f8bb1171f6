"""Mutated ONNX models: ``aioge.load_onnx`` + ``dev.compile`` + ``execute``.

The corpus is tests/graph's model builders (small variants).  Byte-level
mutations (flips, truncation, splices) and structural ones (attr ints set to
edge values, input dims, initializer shapes and types, node inputs rewired or
dropped, duplicate outputs) are applied with a fixed seed.  Invariant: a typed
aioge error, or a model that runs and agrees with onnxruntime whenever
onnxruntime accepts the same model; the runtime's handle counters are back
to baseline at the end.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import aioge
from aioge.errors import AioGeError
from tests.fuzz.fuzzutil import fuzz
from tests.graph import models
from tests.support.edges import BIG_DIMS, INT_EDGES
from tests.support.harness import live_handles

ort = pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.anyio

CORPUS = {name: models.MODELS[name](**models.SMALL[name]) for name in sorted(models.MODELS)}
MAX_FEED = 1 << 20  # elements: a mutated input shape beyond this is compiled but not fed
MAX_MODEL_BYTES = 1 << 30  # all values together: a model beyond this is loaded but not compiled


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module", autouse=True)
def no_leaked_handles():
    before = live_handles()
    yield
    assert live_handles() == before


def _byte_mutation(data: Any, blob: bytes) -> bytes:
    b = bytearray(blob)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "truncate", "splice", "zero"]))
        at = data.draw(st.integers(0, max(0, len(b) - 1)))
        if kind == "flip" and b:
            b[at] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "truncate":
            del b[at:]
        elif kind == "splice":
            n = data.draw(st.integers(1, 64))
            src = data.draw(st.integers(0, max(0, len(b) - n)))
            b[at:at] = b[src : src + n]
        else:
            b[at : at + 8] = bytes(len(b[at : at + 8]))
    return bytes(b)


def _structural_mutation(data: Any, m: onnx.ModelProto) -> onnx.ModelProto:
    m = copy.deepcopy(m)
    g = m.graph
    kind = data.draw(st.sampled_from(["attr", "attr", "dim", "init_dims", "init_type", "rewire", "drop", "dup"]))
    nodes = list(g.node)
    if kind == "attr":
        cands = [
            (n, a) for n in nodes for a in n.attribute if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS)
        ]
        if cands:
            n, a = data.draw(st.sampled_from(cands))
            if a.type == onnx.AttributeProto.INT:
                a.i = data.draw(st.sampled_from(INT_EDGES))
            else:
                del a.ints[:]
                a.ints.extend(data.draw(st.lists(st.sampled_from(INT_EDGES), max_size=6)))
    elif kind == "dim":
        dims = [d for vi in g.input for d in vi.type.tensor_type.shape.dim]
        if dims:
            data.draw(st.sampled_from(dims)).dim_value = data.draw(st.sampled_from(sorted({1, 3, *BIG_DIMS})))
    elif kind in ("init_dims", "init_type") and len(g.initializer):
        t = data.draw(st.sampled_from(list(g.initializer)))
        if kind == "init_dims" and len(t.dims):
            t.dims[data.draw(st.integers(0, len(t.dims) - 1))] = data.draw(st.sampled_from(INT_EDGES))
        else:
            t.data_type = data.draw(st.sampled_from([0, 2, 6, 7, 9, 10, 11, 16, 99]))
    elif kind == "rewire" and nodes:
        n = data.draw(st.sampled_from(nodes))
        names = [vi.name for vi in g.input] + [o for x in nodes for o in x.output] + ["", "nope"]
        if len(n.input):
            n.input[data.draw(st.integers(0, len(n.input) - 1))] = data.draw(st.sampled_from(names))
    elif kind == "drop" and nodes:
        g.node.remove(data.draw(st.sampled_from(nodes)))
    elif kind == "dup" and len(nodes) > 1:
        a, b = data.draw(st.sampled_from(nodes)), data.draw(st.sampled_from(nodes))
        if len(a.output) and len(b.output):
            b.output[0] = a.output[0]
    return m


def _feeds(m: onnx.ModelProto) -> dict[str, np.ndarray] | None:
    inits = {t.name for t in m.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if math.prod(shape) > MAX_FEED:
            return None
        feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _ort(blob: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    try:
        sess = ort.InferenceSession(blob, providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)
    except Exception:  # onnxruntime's own view of a broken model is not ours to judge
        return None


async def _check(dev: Any, blob: bytes) -> str:
    try:
        graph = aioge.load_onnx(blob)
        # the host runtime's device memory is this machine's RAM: a mutated model whose tensors are
        # merely big (not beyond 2^62 bytes, which load refuses) is loaded but not compiled, or a
        # fuzz run would take the shared machine's memory (one took 16 GB)
        if sum(math.prod(v.shape) * v.dtype.itemsize for v in graph.values.values() if v.known) > MAX_MODEL_BYTES:
            return "too big"
        model = await dev.compile(graph)
    except AioGeError:
        return "refused"
    async with model:
        proto = onnx.load_from_string(blob)
        feeds = _feeds(proto)
        if feeds is None:
            return "compiled"
        try:
            out = await model.execute(feeds)
        except AioGeError:
            return "failed"
    ref = _ort(blob, feeds)
    if ref is not None:
        for got, want in zip(out.values(), ref):
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    return "ran"


@pytest.mark.parametrize("name", sorted(CORPUS))
@pytest.mark.parametrize("level", ["bytes", "structure"])
async def test_mutated_models(dev, name, level):
    base = CORPUS[name]
    blob = base.SerializeToString()
    pending: list[bytes] = []

    @fuzz(3)
    @given(data=st.data())
    def draw(data: Any) -> None:
        if level == "bytes":
            pending.append(_byte_mutation(data, blob))
        else:
            pending.append(_structural_mutation(data, base).SerializeToString())

    draw()
    outcomes = [await _check(dev, b) for b in pending]
    assert outcomes  # the unmutated model still runs afterwards:
    assert await _check(dev, blob) == "ran"
