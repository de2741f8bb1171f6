"""The NCHWc8 layout pass: which nodes it converts, where the reorders fall, and that every rewritten
graph computes what the NCHW graph computes (the reference evaluator on both)."""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioge.graph import Graph, optimize
from aioge.graph.errors import ShapeInferenceError
from aioge.graph.lower import lower
from aioge.graph.passes import infer_shapes, nchwc_layout
from aioge.graph.reference import from_nchwc, run_reference, to_nchwc
from aioge.graph.target import HOST
from aioge.runtime.graphs.compile import compile_graph

BLOCKED = dataclasses.replace(HOST, layouts=HOST.layouts | {"NCHWc8"})


def w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) * (1.0 / np.sqrt(np.prod(shape[1:]) or 1))).astype(np.float32)


def counts(g: Graph) -> dict[str, int]:
    return g.op_counts()


def blocked(g: Graph, feeds: dict[str, np.ndarray]) -> Graph:
    """``g`` optimized with the pass, after checking it computes what the graph optimized without it computes."""
    want = run_reference(optimize(g), feeds)
    out = optimize(g, target=BLOCKED)
    got = run_reference(out, feeds)
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5)
    return out


def conv(g: Graph, rng: np.random.Generator, x, cin: int, cout: int, k: int = 3, **attrs):
    group = attrs.get("group", 1)
    ins = [x, g.constant(w(rng, cout, cin // group, k, k)), g.constant(w(rng, cout))]
    return g.add_node("Conv", ins, {"pads": [k // 2] * 4, **attrs})


def feeds_for(g: Graph) -> dict[str, np.ndarray]:
    return feeds(g.values["x"].shape or ())


def feeds(shape: tuple[int, ...], seed: int = 1) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}


def test_reorders_round_trip_and_lay_channel_c_at_block_c_div_8_lane_c_mod_8():
    x = np.arange(2 * 16 * 3 * 2, dtype=np.float32).reshape(2, 16, 3, 2)
    b = to_nchwc(x)
    assert b.shape == (2, 2, 3, 2, 8)
    assert b[1, 1, 2, 0, 3] == x[1, 11, 2, 0]
    np.testing.assert_array_equal(from_nchwc(b), x)


def chain() -> Graph:
    rng = np.random.default_rng(0)
    g = Graph("chain")
    x = g.input("x", (1, 8, 9, 9))
    h = g.add_node("Relu", [conv(g, rng, x, 8, 16)])
    g.output(conv(g, rng, h, 16, 8, strides=[2, 2]))
    return g


def test_conv_relu_conv_runs_blocked_between_one_reorder_each_way():
    g = chain()
    out = blocked(g, feeds_for(g))
    assert counts(out) == {"_ReorderToNchwc": 1, "_NchwcConv2D": 2, "_ReorderFromNchwc": 1}
    first = next(n for n in out.nodes if n.op_type == "_NchwcConv2D")
    assert first.attrs["activation"] == "Relu"
    assert first.attrs["pads"] == [1, 1, 1, 1] and first.attrs["strides"] == [1, 1, 1, 1]
    assert out.values[first.outputs[0]].shape == (1, 2, 9, 9, 8)


def basic_block(g: Graph, rng: np.random.Generator, x, c: int, downsample: bool):
    """ResNet's basic block: conv-relu-conv + shortcut, relu."""
    s = [2, 2] if downsample else [1, 1]
    h = g.add_node("Relu", [conv(g, rng, x, c, 2 * c if downsample else c, strides=s)])
    c2 = 2 * c if downsample else c
    h = conv(g, rng, h, c2, c2)
    short = conv(g, rng, x, c, c2, k=1, strides=s) if downsample else x
    return g.add_node("Relu", [g.add_node("Add", [h, short])])


def resnet() -> Graph:
    rng = np.random.default_rng(1)
    g = Graph("resnet")
    x = g.input("x", (1, 16, 8, 8))
    h = g.add_node("Relu", [conv(g, rng, x, 16, 16)])
    h = basic_block(g, rng, h, 16, False)
    h = basic_block(g, rng, h, 16, True)
    g.output(g.add_node("Flatten", [g.add_node("GlobalAveragePool", [h])]))
    return g


def test_residual_add_and_relu_fold_into_the_conv():
    g = resnet()
    out = blocked(g, feeds_for(g))
    c = counts(out)
    # out: the pooled [1, 32, 1, 1], the same bytes in both layouts: a Reshape
    assert c == {"_ReorderToNchwc": 1, "_NchwcConv2D": 6, "_NchwcPool2D": 1, "Reshape": 1, "Flatten": 1}
    fused = [n for n in out.nodes if n.op_type == "_NchwcConv2D" and len(n.inputs) == 4]
    assert len(fused) == 2
    assert all(n.attrs["activation"] == "Relu" for n in fused)


def test_residual_fuses_only_into_a_conv_whose_output_nothing_else_reads():
    rng = np.random.default_rng(2)
    g = Graph("shared")
    x = g.input("x", (1, 8, 6, 6))
    a = g.add_node("Relu", [conv(g, rng, x, 8, 8)])
    b = conv(g, rng, a, 8, 8)
    s = g.add_node("Add", [b, a])
    g.output(s, b)  # b is read twice: it stays its own value
    out = blocked(g, feeds((1, 8, 6, 6)))
    assert all(len(n.inputs) < 4 for n in out.nodes if n.op_type == "_NchwcConv2D")
    assert counts(out)["Add"] == 1
    assert counts(out)["_ReorderFromNchwc"] == 2  # one per graph output



def test_an_add_reading_a_value_whose_pool_stayed_nchw_reorders_it():
    """The short-chain rule reverts a pool (and so the reorder of its input that an Add of the chain
    also reads): the Add, still blocked, reorders that input itself, never mixing the two layouts."""
    rng = np.random.default_rng(5)
    g = Graph("reverted_pool")
    x = g.input("x", (1, 8, 8, 8))
    c = conv(g, rng, x, 8, 8, k=1, strides=[2, 2])  # [1, 8, 4, 4], blocked: read by two more convs
    t = g.add_node("Transpose", [c], {"perm": [0, 1, 3, 2]})  # an edge: stays NCHW
    pooled = g.add_node("MaxPool", [t], {"kernel_shape": [3, 3], "strides": [2, 2]})  # alone: reverted
    s = g.add_node("Add", [t, c])
    y = conv(g, rng, g.add_node("Relu", [conv(g, rng, c, 8, 8, group=8)]), 8, 4, k=1)
    g.output(y, pooled, s)
    out = blocked(g, feeds((1, 8, 8, 8)))
    assert "_NchwcPool2D" not in counts(out)
    (add,) = [n for n in out.nodes if n.op_type == "Add"]
    assert [len(out.values[i].shape or ()) for i in add.inputs] == [5, 5]  # both operands blocked

def mobilenet() -> Graph:
    rng = np.random.default_rng(3)
    g = Graph("mobilenet")
    x = g.input("x", (1, 16, 10, 10))
    lo, hi = g.constant(np.float32(0.0)), g.constant(np.float32(6.0))
    h = g.add_node("Clip", [conv(g, rng, x, 16, 32, k=1), lo, hi])
    h = g.add_node("Clip", [conv(g, rng, h, 32, 32, group=32), lo, hi])
    h = conv(g, rng, h, 32, 16, k=1)
    g.output(g.add_node("Add", [h, x]))
    return g


def test_depthwise_and_pointwise_with_clip_and_a_residual_stay_blocked():
    g = mobilenet()
    out = blocked(g, feeds_for(g))
    assert counts(out) == {"_ReorderToNchwc": 1, "_NchwcConv2D": 3, "_ReorderFromNchwc": 1}
    convs = [n for n in out.nodes if n.op_type == "_NchwcConv2D"]
    assert [n.attrs["groups"] for n in convs] == [1, 32, 1]
    assert [n.attrs.get("activation", "none") for n in convs] == ["Clip", "Clip", "none"]
    assert convs[1].attrs["min"] == 0.0 and convs[1].attrs["max"] == 6.0
    assert len(convs[2].inputs) == 4  # the residual: x through the shared reorder


def se(batch: int = 1) -> Graph:
    rng = np.random.default_rng(4)
    g = Graph("se")
    x = g.input("x", (batch, 32, 7, 7))
    h = g.add_node("Relu", [conv(g, rng, x, 32, 32)])
    s = g.add_node("GlobalAveragePool", [h])
    s = g.add_node("Relu", [conv(g, rng, s, 32, 8, k=1)])
    s = g.add_node("HardSigmoid", [conv(g, rng, s, 8, 32, k=1)])
    g.output(g.add_node("Mul", [h, s]))
    return g


@pytest.mark.parametrize("swap", [False, True])
def test_squeeze_excitation_scales_as_a_depthwise_conv_whose_filter_is_a_view_of_the_scale(swap):
    g = se()
    if swap:  # Mul(scale, x)
        g.nodes[-1].inputs.reverse()
    out = blocked(g, feeds_for(g))
    c = counts(out)
    assert c["_NchwcConv2D"] == 4 and c["_NchwcPool2D"] == 1 and "Mul" not in c
    assert c["_ReorderToNchwc"] == 1 and c["_ReorderFromNchwc"] == 1
    scale = out.nodes[-2]
    assert scale.op_type == "_NchwcConv2D" and scale.attrs["groups"] == 32
    assert [out.values[i].shape for i in scale.inputs] == [(1, 4, 7, 7, 8), (32, 1, 1, 1)]
    view = next(n for n in out.nodes if n.outputs == [scale.inputs[1]])
    assert view.op_type == "Reshape" and out.values[view.inputs[0]].shape == (1, 4, 1, 1, 8)


def test_a_channel_scale_of_a_batch_of_two_stays_a_blocked_mul():
    """One filter per image is not a conv: the scale of each item multiplies its own feature map."""
    g = se(batch=2)
    out = blocked(g, feeds_for(g))
    c = counts(out)
    assert c["_NchwcConv2D"] == 3 and c["Mul"] == 1
    mul = next(n for n in out.nodes if n.op_type == "Mul")
    assert sorted(out.values[i].shape for i in mul.inputs) == [(2, 4, 1, 1, 8), (2, 4, 7, 7, 8)]


def se_narrow() -> Graph:
    """A squeeze-excitation whose squeeze has 4 channels: its convs stay NCHW, its scale is reordered."""
    rng = np.random.default_rng(15)
    g = Graph("se_narrow")
    x = g.input("x", (1, 16, 7, 7))
    h = g.add_node("Relu", [conv(g, rng, x, 16, 16)])
    s = g.add_node("GlobalAveragePool", [h])
    s = g.add_node("Relu", [conv(g, rng, s, 16, 4, k=1)])
    s = conv(g, rng, s, 4, 16, k=1)
    h = g.add_node("Mul", [h, g.add_node("Sigmoid", [s])])
    g.output(conv(g, rng, h, 16, 16))
    return g


def test_a_computed_per_channel_scale_is_viewed_as_a_filter_not_the_feature_map_reordered():
    g = se_narrow()
    out = blocked(g, feeds_for(g))
    c = counts(out)
    # the squeeze (16 -> 4) and excite (4 -> 16) stay; the scaling is a depthwise conv
    assert c["_NchwcConv2D"] == 3 and c["_FusedConv"] == 2 and "Mul" not in c
    scale = next(n for n in out.nodes if n.op_type == "_NchwcConv2D" and n.attrs["groups"] == 16)
    assert [out.values[i].shape for i in scale.inputs] == [(1, 2, 7, 7, 8), (16, 1, 1, 1)]
    # in: x; out: the pooled vector (a Reshape: one pixel, the same bytes) and the result; the NCHW
    # scale viewed as the filter (a Reshape)
    assert c["_ReorderToNchwc"] == 1 and c["_ReorderFromNchwc"] == 1 and c["Reshape"] == 2


def inception() -> Graph:
    rng = np.random.default_rng(5)
    g = Graph("inception")
    x = g.input("x", (1, 8, 6, 6))
    stem = g.add_node("Relu", [conv(g, rng, x, 8, 16)])
    a = g.add_node("Relu", [conv(g, rng, stem, 16, 8, k=1)])
    b = g.add_node("Relu", [conv(g, rng, stem, 16, 16)])
    p = g.add_node("MaxPool", [stem], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1]})
    cat = g.add_node("Concat", [a, b, p, stem], {"axis": 1})  # densenet: the block's input too
    g.output(conv(g, rng, cat, 56, 8, k=1))
    return g


def test_concat_of_blocked_branches_is_a_concat_on_axis_1_of_the_blocks():
    g = inception()
    out = blocked(g, feeds_for(g))
    cat_node = next(n for n in out.nodes if n.op_type == "Concat")
    assert cat_node.attrs["axis"] == 1
    assert out.values[cat_node.outputs[0]].shape == (1, 7, 6, 6, 8)
    assert counts(out)["_ReorderToNchwc"] == 1 and counts(out)["_ReorderFromNchwc"] == 1


def densenet() -> Graph:
    rng = np.random.default_rng(12)
    g = Graph("densenet")
    x = g.input("x", (1, 8, 6, 6))
    a = g.add_node("Relu", [conv(g, rng, x, 8, 8)])
    b = g.add_node("Relu", [conv(g, rng, a, 8, 8)])
    cat = g.add_node("Concat", [a, b], {"axis": 1})
    params = [rng.uniform(0.5, 2, 16), rng.standard_normal(16), rng.standard_normal(16), rng.uniform(0.5, 2, 16)]
    bn = g.add_node("BatchNormalization", [cat, *(g.constant(p.astype(np.float32)) for p in params)])
    h = g.add_node("Relu", [bn])
    g.output(conv(g, rng, h, 16, 8, k=1))
    return g


def test_a_concat_of_blocked_and_nchw_values_reorders_the_nchw_ones():
    rng = np.random.default_rng(16)
    g = Graph("mixed")
    x = g.input("x", (1, 8, 6, 6))
    a = g.add_node("Relu", [conv(g, rng, x, 8, 16)])
    t = g.add_node("Transpose", [a], {"perm": [0, 1, 3, 2]})  # NCHW only
    cat = g.add_node("Concat", [conv(g, rng, a, 16, 8), t, x], {"axis": 1})
    g.output(conv(g, rng, cat, 32, 8))
    out = blocked(g, feeds_for(g))
    cat_node = next(n for n in out.nodes if n.op_type == "Concat")
    assert out.values[cat_node.outputs[0]].shape == (1, 4, 6, 6, 8)
    # in: x (shared by the first conv and the concat) and the Transpose's output; out: a for the Transpose
    assert counts(out)["_ReorderToNchwc"] == 2 and counts(out)["_ReorderFromNchwc"] == 2


def test_batchnorm_of_a_blocked_value_is_a_depthwise_conv_with_its_activation():
    g = densenet()
    out = blocked(g, feeds_for(g))
    assert counts(out) == {"_ReorderToNchwc": 1, "_NchwcConv2D": 4, "Concat": 1, "_ReorderFromNchwc": 1}
    dw = next(n for n in out.nodes if n.op_type == "_NchwcConv2D" and n.attrs["groups"] == 16)
    assert dw.attrs["activation"] == "Relu" and out.values[dw.inputs[1]].shape == (16, 1, 1, 1)


def test_batchnorm_alone_with_one_conv_stays_nchw():
    rng = np.random.default_rng(13)
    g = Graph("bn")
    x = g.input("x", (1, 8, 6, 6))
    h = g.add_node("Sigmoid", [conv(g, rng, x, 8, 8)])
    params = [rng.uniform(0.5, 2, 8), rng.standard_normal(8), rng.standard_normal(8), rng.uniform(0.5, 2, 8)]
    g.output(g.add_node("BatchNormalization", [h, *(g.constant(p.astype(np.float32)) for p in params)]))
    out = blocked(g, feeds((1, 8, 6, 6)))
    assert "BatchNormalization" in counts(out) and "_NchwcConv2D" not in counts(out)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("ceil_mode", [0, 1])
@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize(
    ("size", "kernel", "stride", "pads"), [(9, 3, 2, 0), (10, 3, 2, 1), (8, 2, 2, 0), (7, 3, 3, 1)]
)
def test_pooling_with_ceil_mode_pads_and_divisors(op, ceil_mode, count_include_pad, size, kernel, stride, pads):
    rng = np.random.default_rng(6)
    g = Graph("pool")
    x = g.input("x", (1, 16, size, size))
    h = conv(g, rng, x, 16, 16)
    attrs = {"kernel_shape": [kernel] * 2, "strides": [stride] * 2, "pads": [pads] * 4, "ceil_mode": ceil_mode}
    if op == "AveragePool":
        attrs["count_include_pad"] = count_include_pad
    h = g.add_node(op, [h], attrs)
    g.output(conv(g, rng, h, 16, 16))
    out = blocked(g, feeds((1, 16, size, size)))
    ref = infer_shapes(g)
    over = (ref.values[h.outputs[0]].shape[2] - 1) * stride + kernel > size + 2 * pads
    if op == "AveragePool" and count_include_pad and over:  # the contract cannot count the overhang apart
        assert counts(out)[op] == 1
        assert "_NchwcPool2D" not in counts(out)
    else:
        assert counts(out)["_NchwcPool2D"] == 1 and op not in counts(out)
        assert counts(out)["_ReorderFromNchwc"] == 1


def test_channel_counts_not_multiple_of_8_and_lone_convs_stay_nchw():
    rng = np.random.default_rng(7)
    g = Graph("odd")
    x = g.input("x", (1, 3, 8, 8))
    h = g.add_node("Relu", [conv(g, rng, x, 3, 12)])  # Cin 3 and Cout 12: no blocked form
    h = g.add_node("Relu", [conv(g, rng, h, 12, 16)])  # Cin 12
    h = g.add_node("Relu", [conv(g, rng, h, 16, 16)])  # alone between NCHW ops: not worth two reorders
    h = g.add_node("Transpose", [h], {"perm": [0, 1, 3, 2]})
    h = conv(g, rng, h, 16, 24, group=2)  # grouped 8 -> 12 per group: no blocked form
    g.output(h)
    out = blocked(g, feeds((1, 3, 8, 8)))
    assert not any(op.startswith("_Nchwc") or op.startswith("_Reorder") for op in counts(out))


def test_per_channel_and_scalar_operands_are_laid_out_once():
    rng = np.random.default_rng(8)
    g = Graph("affine")
    x = g.input("x", (1, 16, 5, 5))
    h = conv(g, rng, x, 16, 16)
    h = g.add_node("Relu", [h])
    h = conv(g, rng, h, 16, 16)
    scale = g.constant(rng.uniform(0.5, 2, (16, 1, 1)).astype(np.float32))
    shift = g.constant(rng.uniform(-1, 1, (1, 16, 1, 1)).astype(np.float32))
    h = g.add_node("Mul", [g.add_node("Sigmoid", [h]), scale])
    h = g.add_node("Add", [shift, h])
    h = g.add_node("Mul", [h, g.constant(np.float32(3.0))])
    g.output(h)
    out = blocked(g, feeds((1, 16, 5, 5)))
    assert counts(out)["_ReorderFromNchwc"] == 1
    assert {tuple(a.shape) for a in out.constants.values() if a.ndim == 5} == {(1, 2, 1, 1, 8)}


def test_a_blocked_value_read_by_several_nchw_nodes_is_reordered_once():
    rng = np.random.default_rng(9)
    g = Graph("fanout")
    x = g.input("x", (1, 8, 4, 4))
    h = g.add_node("Relu", [conv(g, rng, conv(g, rng, x, 8, 8), 8, 8)])
    a = g.add_node("Transpose", [h], {"perm": [0, 1, 3, 2]})
    b = g.add_node("Flatten", [h])
    g.output(a, b, h)
    out = blocked(g, feeds((1, 8, 4, 4)))
    assert counts(out)["_ReorderFromNchwc"] == 1 and counts(out)["_ReorderToNchwc"] == 1


def test_the_host_target_enables_the_pass_only_with_its_kernels():
    rng = np.random.default_rng(10)
    g = Graph("host")
    x = g.input("x", (1, 8, 4, 4))
    g.output(conv(g, rng, g.add_node("Relu", [conv(g, rng, x, 8, 8)]), 8, 8))
    ops = counts(optimize(g))
    assert ("NCHWc8" in HOST.layouts) == ("_NchwcConv2D" in ops)


@pytest.mark.parametrize(("value", "want"), [("1", "True"), ("0", "False"), ("", "True"), ("yes", "ValueError")])
def test_aioge_host_nchwc_selects_the_layout_for_the_host_target(value, want):
    code = (
        "try:\n    import aioge.graph as G\n"
        "except ValueError as e:\n    print('ValueError', e)\n"
        "else:\n    print('NCHWc8' in G.HOST.layouts)\n"
    )
    env = {**os.environ, "AIOGE_HOST_NCHWC": value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split()[0] == want
    if want == "ValueError":
        assert "AIOGE_HOST_NCHWC='yes'" in out


def test_lowering_is_one_to_one_with_absent_inputs_as_none():
    rng = np.random.default_rng(11)
    g = Graph("lower")
    x = g.input("x", (1, 8, 6, 6))
    a = g.add_node("Relu", [conv(g, rng, x, 8, 8)])
    b = g.add_node("Conv", [a, g.constant(w(rng, 8, 8, 3, 3))], {"pads": [1, 1, 1, 1]})  # no bias
    g.output(g.add_node("Relu", [g.add_node("Add", [b, a])]))
    out = optimize(g, target=BLOCKED)
    ops = [op for ln in lower(out, target=BLOCKED) for op in ln.ops]
    assert [op.op_type for op in ops] == ["_ReorderToNchwc", "_NchwcConv2D", "_NchwcConv2D", "_ReorderFromNchwc"]
    assert ops[2].inputs[2] is None and isinstance(ops[2].inputs[3], str)
    assert ops[2].attrs == {"strides": [1, 1, 1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1, 1, 1], "groups": 1,
                            "activation": "Relu"}  # fmt: skip


@st.composite
def random_net(draw) -> Graph:
    """A random small net of convs (plain, grouped, depthwise; channel counts 4-24), pools, elementwise
    ops, Adds of same-shape values, Concats, BatchNorms and NCHW-only ops (Transpose), with extra graph
    outputs."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    g = Graph("random")
    c0 = draw(st.sampled_from([4, 8, 16, 16]))
    vals = [(g.input("x", (1, c0, 8, 8)), c0, 8)]
    for _ in range(draw(st.integers(3, 12))):
        x, c, hw = vals[draw(st.integers(max(0, len(vals) - 3), len(vals) - 1))]
        kind = draw(st.sampled_from(["conv", "conv", "conv", "dw", "pool", "ew", "add", "concat", "bn", "edge"]))
        if kind == "conv":
            cout = draw(st.sampled_from([4, 8, 8, 16, 24]))
            k = draw(st.sampled_from([1, 3]))
            group = draw(st.sampled_from([g_ for g_ in (1, 2) if c % g_ == 0 and cout % g_ == 0]))
            stride = draw(st.sampled_from([1, 2])) if hw >= 4 else 1
            y = conv(g, rng, x, c, cout, k=k, group=group, strides=[stride] * 2)
            if draw(st.booleans()):
                y = g.add_node(draw(st.sampled_from(["Relu", "Sigmoid", "HardSwish"])), [y])
            vals.append((y, cout, (hw + 2 * (k // 2) - k) // stride + 1))
        elif kind == "dw":
            vals.append((g.add_node("Relu", [conv(g, rng, x, c, c, group=c)]), c, hw))
        elif kind == "pool" and hw >= 3:
            op = draw(st.sampled_from(["MaxPool", "AveragePool", "GlobalAveragePool"]))
            if op == "GlobalAveragePool":
                vals.append((g.add_node(op, [x]), c, 1))
                continue
            attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": int(draw(st.booleans())),
                     "pads": [draw(st.integers(0, 1))] * 4}  # fmt: skip
            y = g.add_node(op, [x], attrs)
            vals.append((y, c, infer_shapes(g).values[y.outputs[0]].shape[2]))
        elif kind == "ew":
            scale = g.constant(rng.uniform(0.5, 2, (c, 1, 1)).astype(np.float32))
            vals.append((g.add_node("Mul", [g.add_node("Tanh", [x]), scale]), c, hw))
        elif kind == "add":
            same = [v for v in vals if v[1:] == (c, hw) and v[0] is not x]
            if same:
                vals.append((g.add_node("Add", [x, draw(st.sampled_from(same))[0]]), c, hw))
        elif kind == "concat":
            same = [v for v in vals if v[2] == hw]
            other, oc, _ = draw(st.sampled_from(same))
            vals.append((g.add_node("Concat", [x, other], {"axis": 1}), c + oc, hw))
        elif kind == "bn":
            params = [rng.uniform(0.5, 2, c), rng.standard_normal(c), rng.standard_normal(c), rng.uniform(0.5, 2, c)]
            bn = g.add_node("BatchNormalization", [x, *(g.constant(p.astype(np.float32)) for p in params)])
            vals.append((g.add_node("Relu", [bn]), c, hw))
        elif kind == "edge":
            vals.append((g.add_node("Transpose", [x], {"perm": [0, 1, 3, 2]}), c, hw))
    g.output(vals[-1][0])
    for v, _, _ in vals[1:-1]:
        if draw(st.booleans()) and draw(st.booleans()):
            g.output(v)
    return g


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_net())
def test_random_nets_compute_the_same_values_with_the_pass(g):
    out = blocked(g, feeds_for(g))
    c = counts(out)
    # every blocked value leaves through at most one reorder, and every value enters at most once
    reads = [n.inputs[0] for n in out.nodes if n.op_type in ("_ReorderToNchwc", "_ReorderFromNchwc")]
    assert len(reads) == len(set(reads))
    assert c.get("_ReorderFromNchwc", 0) + c.get("Reshape", 0) <= len(g.outputs) + len(g.nodes)


def bad(op: str, shapes: list[tuple[int, ...]], **attrs) -> Graph:
    g = Graph("bad")
    ins = [g.input(f"i{k}", s) for k, s in enumerate(shapes)]
    g.output(g.add_node(op, ins, attrs))
    return g


@pytest.mark.parametrize(
    ("op", "shapes", "attrs", "msg"),
    [
        ("_ReorderToNchwc", [(1, 12, 4, 4)], {}, "multiple of 8"),
        ("_ReorderFromNchwc", [(1, 2, 4, 4, 4)], {}, "NCHWc8"),
        ("_NchwcConv2D", [(1, 2, 4, 4, 8), (16, 4, 3, 3)], {"groups": 4}, "groups 4"),
        ("_NchwcConv2D", [(1, 2, 4, 4, 8), (12, 16, 1, 1)], {}, "(12, 16, 1, 1)"),
        ("_NchwcConv2D", [(1, 2, 4, 4, 8), (16, 16, 1, 1), (16,), (1, 1, 4, 4, 8)], {}, "residual"),
        ("_NchwcConv2D", [(1, 2, 4, 4, 8), (8, 16, 5, 5)], {}, "does not fit"),
        ("_NchwcConv2D", [(1, 2, 4, 4, 8), (8, 16, 1, 1)], {"activation": "Mish"}, "unknown activation"),
        ("_NchwcPool2D", [(1, 2, 4, 4, 8)], {"mode": "min", "global": 1}, "mode"),
        ("_NchwcPool2D", [(1, 2, 4, 4, 8)], {"mode": "max", "kernel": [3]}, "kernel"),
    ],
)
def test_blocked_ops_reject_shapes_and_attrs_that_do_not_fit(op, shapes, attrs, msg):
    with pytest.raises(ShapeInferenceError, match=msg.replace("(", r"\(").replace(")", r"\)")) as e:
        infer_shapes(bad(op, shapes, **attrs))
    assert e.value.op_type == op


def test_the_pass_needs_shapes():
    g = Graph("raw")
    x = g.input("x", (1, 8, 4, 4))
    g.output(g.add_node("Relu", [x]))
    with pytest.raises(Exception, match="inferred shapes"):
        nchwc_layout(g)


# ------------------------------------------------------------------ real exports
@functools.cache
def export(name: str, size: int) -> Graph:
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    from aioge.graph import load_onnx

    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None).eval()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (torch.randn(1, 3, size, size),), buf, dynamo=False, opset_version=17,
                          input_names=["x"])  # fmt: skip
    return load_onnx(buf.getvalue())


@pytest.mark.parametrize(
    ("name", "size", "want"),
    [
        # the stem (3 input channels) stays NCHW: one reorder in at the max pool; out: the global pool's
        # one pixel, a Reshape
        ("resnet18", 32, {"_ReorderToNchwc": 1, "Reshape": 1, "_NchwcConv2D": 19, "_NchwcPool2D": 2}),
        ("mobilenet_v2", 32, {"_ReorderToNchwc": 1, "Reshape": 1, "_NchwcConv2D": 51, "_NchwcPool2D": 1}),
        # the stem conv + HardSwish (3 input channels) stays NCHW, one _FusedConv; 6 of the 9
        # squeeze-excitations scale planes of more than one pixel: depthwise convs reading a view of the
        # scale (6 Reshapes)
        (
            "mobilenet_v3_small",
            32,
            {"_ReorderToNchwc": 1, "Reshape": 7, "_NchwcConv2D": 57, "_NchwcPool2D": 10, "_FusedConv": 1, "Mul": 3},
        ),
        # 11 squeeze-excitations squeeze to channel counts that are not multiples of 8: their two convs stay
        # NCHW after views of the pooled vector (_FusedConvs with Swish and Sigmoid, 22 + the stem's); 11 of
        # the 16 scalings are depthwise convs reading a view of the scale (24 Reshapes: those + the end's),
        # the others scale one pixel
        (
            "efficientnet_b0",
            32,
            {"_ReorderToNchwc": 1, "Reshape": 24, "_NchwcConv2D": 69, "_NchwcPool2D": 17, "_FusedConv": 23, "Mul": 5},
        ),
        # BatchNorm + Relu after each Concat: depthwise 1x1 convs, so the whole net stays blocked
        ("densenet121", 32, {"_ReorderToNchwc": 1, "Reshape": 1, "_NchwcConv2D": 181, "_NchwcPool2D": 5}),
        ("squeezenet1_1", 64, {"_ReorderToNchwc": 1, "Reshape": 1, "_NchwcConv2D": 25, "_NchwcPool2D": 4}),
    ],
)
def test_torchvision_exports(name, size, want):
    g = export(name, size)
    out = blocked(g, feeds((1, 3, size, size)))
    c = counts(out)
    want = {"Conv": 0, "_ReorderFromNchwc": 0, **want}
    assert {k: c.get(k, 0) for k in want} == want
    assert "BatchNormalization" not in c


# ------------------------------------------------------------------ on the host runtime
def pooled() -> Graph:
    """Max and average pooling with ceil_mode (the overhang as padding) between convs."""
    rng = np.random.default_rng(14)
    g = Graph("pooled")
    x = g.input("x", (1, 16, 10, 10))
    h = g.add_node("Relu", [conv(g, rng, x, 16, 16)])
    h = g.add_node("MaxPool", [h], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1] * 4, "ceil_mode": 1})
    h = g.add_node("AveragePool", [conv(g, rng, h, 16, 24)], {"kernel_shape": [2, 2], "strides": [2, 2],
                                                               "ceil_mode": 1})  # fmt: skip
    g.output(conv(g, rng, h, 24, 8, k=1))
    return g


@pytest.fixture
def anyio_backend():
    """The layout is this file's subject, not the event loop: asyncio only."""
    return ("asyncio", {"debug": True})


async def run_blocked(dev, g: Graph, mode: str = "sunk") -> None:
    """Compile ``g`` for the host runtime with the pass on; its outputs must be the reference's."""
    x = feeds_for(g)
    want = run_reference(optimize(g), x)
    assert "_NchwcConv2D" in counts(optimize(g, target=BLOCKED))
    model = compile_graph(dev, g, target=BLOCKED, mode=mode)
    try:
        got = await model.execute(x)
    finally:
        await model.aclose()
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-4, err_msg=k)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sunk", "per_op"])
@pytest.mark.parametrize("build", [chain, resnet, mobilenet, se, se_narrow, inception, densenet, pooled])
async def test_the_host_runtime_computes_the_blocked_graphs(dev, build, mode):
    await run_blocked(dev, build(), mode)


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "size"), [("resnet18", 32), ("mobilenet_v2", 32), ("squeezenet1_1", 64)])
async def test_the_host_runtime_computes_blocked_torchvision_exports(dev, name, size):
    await run_blocked(dev, export(name, size))
