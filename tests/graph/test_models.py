"""Whole models (built with onnx.helper in models.py): load_onnx -> optimize -> run_reference
against onnxruntime, fused vs unfused, lowered (emulated CANN ops) vs reference."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from aioge.graph import load_onnx, optimize
from aioge.graph.reference import run_reference
from aioge.graph.target import HOST
from tests.graph import models
from tests.graph.cann_emulator import run_lowered
from tests.graph.onnx_util import assert_close, check_against_ort

NAMES = list(models.MODELS)


@pytest.mark.parametrize("name", NAMES)
def test_small_models_match_onnxruntime_at_every_level(name: str) -> None:
    m = models.MODELS[name](small=True)
    check_against_ort(m, models.sample_inputs(m), levels=(0, 1, 2))


@pytest.mark.parametrize("name", NAMES)
def test_realistic_models_match_onnxruntime(name: str) -> None:
    m = models.MODELS[name]()
    check_against_ort(m, models.sample_inputs(m, seed=1), levels=(0, 2))


@pytest.mark.parametrize("name", NAMES)
def test_fused_and_unfused_agree_and_fusion_happens(name: str) -> None:
    m = models.MODELS[name](small=True)
    g = load_onnx(m)
    feeds = models.sample_inputs(m, seed=2)
    unfused = optimize(g, level=1)
    fused = optimize(g, level=2)
    assert_close(run_reference(fused, feeds), run_reference(unfused, feeds))
    counts = fused.op_counts()
    assert sum(v for k, v in counts.items() if k.startswith("_Fused")) > 0, counts
    assert "BatchNormalization" not in counts
    assert len(fused.nodes) < len(unfused.nodes)


def test_expected_fusions_per_model() -> None:
    nchw = dataclasses.replace(HOST, layouts=HOST.layouts - {"NCHWc8"})  # the NCHW fusions
    cnn = optimize(load_onnx(models.residual_cnn(small=True)), target=nchw).op_counts()
    assert cnn.get("_FusedConv", 0) >= 3 and cnn.get("_FusedElementwise", 0) >= 1
    att = optimize(load_onnx(models.attention(small=True)))
    counts = att.op_counts()
    assert counts["_FusedMatMul"] >= 6  # q/k/v/out projections, scaled QK^T, FFN
    assert "Shape" not in counts and "Gather" not in counts and "Concat" not in counts  # folded
    scaled = [n for n in att.nodes if n.op_type == "_FusedMatMul" and "scale" in n.attrs]
    assert len(scaled) == 1 and abs(scaled[0].attrs["scale"] - 1 / np.sqrt(8)) < 1e-6
    # the exported erf Gelu (Div, Erf, Add, Mul, Mul) is one Gelu in the FFN product's epilogue
    assert "_FusedElementwise" not in counts and "Erf" not in counts
    assert [n.attrs.get("activation") for n in att.nodes if n.op_type == "_FusedMatMul"].count("Gelu") == 1


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("level", [0, 2])
def test_lowered_models_match_reference(name: str, level: int) -> None:
    m = models.MODELS[name](small=True)
    g = optimize(load_onnx(m), level=level)
    feeds = models.sample_inputs(m)
    assert_close(run_lowered(g, feeds), run_reference(g, feeds))


def test_builders_are_deterministic() -> None:
    for fn in models.MODELS.values():
        assert fn(small=True).SerializeToString() == fn(small=True).SerializeToString()
        assert fn(small=True, seed=1).SerializeToString() != fn(small=True).SerializeToString()


def test_realistic_sizes() -> None:
    g = load_onnx(models.residual_cnn())
    assert g.values[g.inputs[0]].shape == (1, 3, 224, 224)
    assert any(v.shape == (1, 64, 56, 56) for v in g.values.values())
    a = load_onnx(models.attention())
    assert a.values[a.inputs[0]].shape == (1, 128, 256)
