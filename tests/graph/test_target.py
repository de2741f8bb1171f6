"""Compile targets: the ascend target emits only CANN op types, the host target fuses.

Every model of the suite (tests/graph/models.py, small and realistic sizes)
is compiled for the ascend target: optimize + lower + host rewrites must not
emit one ``_``-prefixed (host-only) op type, and the lowered ops must still
compute what the reference computes.  On the device, a subprocess with
``AIOGE_HOST_CANN_ONLY=1`` (the host runtime with its host-only kernels
hidden) runs the ascend-target compile sunk and refuses the host-target one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aioge.graph import ASCEND, HOST, Graph, LoweringError, Target, load_onnx, lower, lower_node, optimize, target_for
from aioge.graph.lower import expand_host_ops
from aioge.graph.passes import infer_shapes
from aioge.graph.reference import run_reference
from tests.graph import models
from tests.graph.cann_emulator import run_lowered
from tests.graph.onnx_util import assert_close

ROOT = Path(__file__).resolve().parents[2]


def _emitted(g: Graph, target: Target) -> set[str]:
    return {op.op_type for n in g.topological_order() for op in expand_host_ops(g, lower_node(g, n, target=target),
                                                                                   target).ops}  # fmt: skip


@pytest.mark.parametrize("small", [True, False], ids=["small", "realistic"])
@pytest.mark.parametrize("name", list(models.MODELS))
def test_ascend_target_emits_only_cann_op_types(name: str, small: bool) -> None:
    m = models.MODELS[name](small=small)
    g = optimize(load_onnx(m), level=2, target=ASCEND)
    assert not [n.op_type for n in g.nodes if n.op_type.startswith("_")]
    ops = _emitted(g, ASCEND)
    assert ops and not [o for o in ops if o.startswith("_")], sorted(ops)
    if small:
        feeds = models.sample_inputs(m)
        assert_close(run_lowered(g, feeds), run_reference(optimize(load_onnx(m), level=0), feeds))


def test_host_target_fuses_and_ascend_folds_batchnorm_only() -> None:
    g = load_onnx(models.residual_cnn(small=True))
    host = optimize(g, target=HOST).op_counts()
    asc = optimize(g, target=ASCEND).op_counts()
    assert host.get("_FusedConv", 0) > 0 and "BatchNormalization" not in host
    assert "BatchNormalization" not in asc and asc.get("Conv", 0) > 0  # conv_bn folding is op-type neutral
    assert "_FusedConv2D" in _emitted(optimize(g, target=HOST), HOST)


def test_a_host_only_op_is_refused_for_the_ascend_target() -> None:
    g = optimize(load_onnx(models.mlp(small=True)), target=HOST)
    fused = next(n for n in g.nodes if n.op_type.startswith("_"))
    with pytest.raises(LoweringError, match="'ascend' target cannot run '_Fused"):
        lower_node(g, fused, target=ASCEND)
    with pytest.raises(LoweringError, match=fused.name):
        lower(g, target=ASCEND)


def test_target_lookup_and_capabilities() -> None:
    assert target_for("host") is HOST and target_for("ascend") is ASCEND and target_for(ASCEND) is ASCEND
    other = target_for("npu9")
    assert other.name == "npu9" and not other.host_ops and other.fusions == ASCEND.fusions
    narrow = Target("tiny", fusions=frozenset(), host_ops=False, op_types=frozenset({"Add"}))
    assert narrow.allows("Add") and not narrow.allows("Mul") and not narrow.allows("_FusedMatMul")
    g = Graph()
    x = g.input("x", (2, 3))
    g.output(g.add_node("Mul", [x, x], name="m"))
    g = infer_shapes(g)
    with pytest.raises(LoweringError, match="'tiny' target cannot run 'Mul'"):
        lower(g, target=narrow)
    with pytest.raises(ValueError, match="unknown fusions"):
        Target("bad", fusions=frozenset({"magic"}), host_ops=True)
    assert HOST.data_format("Conv2D", 4) == "NCHW" and HOST.data_format("Conv2D", 2) == "ND"


_CANN_ONLY = """
import asyncio, sys
import numpy as np
sys.path.insert(0, sys.argv[1])  # the repository root
from tests.graph import models
import aioge
from aioge.runtime.graphs.compile import compile_graph

async def main():
    async with aioge.open_device(0) as dev:
        for name in ("mlp", "residual_cnn", "attention"):
            proto = models.MODELS[name](small=True)
            g = aioge.load_onnx(proto)
            feeds = models.sample_inputs(proto)
            ref = aioge.graph.run_reference(g, feeds)
            m = compile_graph(dev, g, target="ascend")
            assert m.mode == "sunk" and not [op for op in m._build.ops if op.op_type.startswith("_")]
            out = await m.execute(feeds)
            for k in ref:
                np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=1e-5)
            m.close()
        try:
            compile_graph(dev, aioge.load_onnx(models.mlp(small=True)), target="host")
        except aioge.OpNotFoundError as e:
            print("refused:", e.message)

asyncio.run(main())
"""


def test_host_runtime_without_its_host_only_kernels_runs_the_ascend_target() -> None:
    env = {**os.environ, "AIOGE_HOST_CANN_ONLY": "1"}
    out = subprocess.run([sys.executable, "-c", _CANN_ONLY, str(Path(__file__).resolve().parents[2])], env=env,
                         capture_output=True, text=True, cwd=ROOT, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "refused:" in out.stdout and "_Fused" in out.stdout, out.stdout
    assert "Traceback" not in out.stderr
