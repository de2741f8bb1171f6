"""Model files and a runner for the ``aioge`` command's tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.graph import models as M


def branchy(n: int = 64, hidden: int = 256, batch: int = 8, seed: int = 0) -> onnx.ModelProto:
    """Two independent MatMul-Relu-MatMul branches joined by an Add: a plan on 2 streams joins them by events."""
    rng = np.random.default_rng(seed)
    inits, nodes, outs = [], [], []

    def w(name: str, shape: tuple[int, ...]) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name))
        return name

    for b in range(2):
        nodes.append(helper.make_node("MatMul", ["x", w(f"w{b}", (n, hidden))], [f"a{b}"], name=f"mm{b}"))
        nodes.append(helper.make_node("Relu", [f"a{b}"], [f"r{b}"], name=f"relu{b}"))
        nodes.append(helper.make_node("MatMul", [f"r{b}", w(f"v{b}", (hidden, n))], [f"c{b}"], name=f"mv{b}"))
        outs.append(f"c{b}")
    nodes.append(helper.make_node("Add", outs, ["y"], name="add"))
    g = helper.make_graph(nodes, "branchy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)  # fmt: skip
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture(scope="session")
def model_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("models")
    files = {"mlp": M.mlp(small=True), "attention": M.attention(small=True), "branchy": branchy()}
    out = {}
    for name, proto in files.items():
        out[name] = d / f"{name}.onnx"
        onnx.save(proto, out[name])
    out["garbage"] = d / "garbage.onnx"
    out["garbage"].write_bytes(np.random.default_rng(1).bytes(300))
    return out


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def aioge_cmd(*args: Any, cwd: Path | None = None, timeout: float = 240) -> Result:
    """Run ``python -m aioge ARGS`` as a subprocess (no asyncio debug mode: it is a user's run)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONASYNCIODEBUG"}
    p = subprocess.run([sys.executable, "-m", "aioge", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=cwd)  # fmt: skip
    return Result(p.returncode, p.stdout, p.stderr)
