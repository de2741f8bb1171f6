"""Each compile pass on small graphs: structure before/after and unchanged numerics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aioge.graph import Graph, optimize
from aioge.graph.ewprogram import OPCODES, encode_program
from aioge.graph.passes import (
    eliminate_common_subexpressions,
    eliminate_dead_code,
    fold_constants,
    fold_conv_batchnorm,
    fuse,
    fuse_bias_activation,
    fuse_elementwise,
    infer_shapes,
    simplify,
)
from aioge.graph.reference import run_reference

RNG = np.random.default_rng(0)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def same_outputs(before: Graph, after: Graph, feeds: dict, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    want = run_reference(before, feeds)
    got = run_reference(after, feeds)
    assert list(got) == list(want) == before.outputs == after.outputs
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol)
    after.validate()


# ---------------------------------------------------------------- simplify
def test_simplify_removes_identity_noop_reshape_cast_transpose() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    a = g.add_node("Identity", [x])
    b = g.add_node("Reshape", [a, g.constant(np.array([2, 3], np.int64))])
    c = g.add_node("Cast", [b], {"to": "float32"})
    d = g.add_node("Transpose", [c], {"perm": [0, 1]})
    e = g.add_node("Dropout", [d])
    y = g.add_node("Relu", [e], name="y")
    g.output(y)
    g = infer_shapes(g)
    s = simplify(g)
    assert s.op_counts() == {"Relu": 1}
    assert s.nodes[0].inputs == ["x"]
    same_outputs(g, s, {"x": rand(2, 3)})


def test_simplify_keeps_output_names_and_collapses_reshape_chains() -> None:
    g = Graph()
    x = g.input("x", (2, 3, 4))
    r = g.add_node("Relu", [x])
    f = g.add_node("Flatten", [r], {"axis": 1})
    u = g.add_node("Unsqueeze", [f, g.constant(np.array([0], np.int64))])
    sq = g.add_node("Squeeze", [u, g.constant(np.array([0], np.int64))])
    out = g.add_node("Identity", [sq], name="out")
    g.output(out)
    g = infer_shapes(g)
    s = simplify(g)
    assert s.outputs == ["out"]
    assert s.op_counts() == {"Relu": 1, "Reshape": 1}
    reshape = next(n for n in s.nodes if n.op_type == "Reshape")
    assert reshape.inputs[0] == r.output and reshape.outputs == ["out"]
    assert s.constants[reshape.inputs[1]].tolist() == [2, 12]
    same_outputs(g, s, {"x": rand(2, 3, 4)})


@pytest.mark.parametrize("shared", [False, True])
def test_simplify_composes_transpose_chains(shared: bool) -> None:
    """BERT's (2,0,1,3) -> (1,2,0,3) -> (0,2,1,3): one Transpose of x; a shared middle one stays."""
    g = Graph()
    x = g.input("x", (2, 3, 4, 5))
    a = g.add_node("Transpose", [x], {"perm": [2, 0, 1, 3]})
    b = g.add_node("Transpose", [a], {"perm": [1, 2, 0, 3]})
    c = g.add_node("Transpose", [b], {"perm": [0, 2, 1, 3]}, name="y")
    g.output(c)
    if shared:
        g.output(g.add_node("Relu", [a], name="z"))
    g = infer_shapes(g)
    s = simplify(g)
    ts = [n for n in s.nodes if n.op_type == "Transpose"]
    last = next(n for n in ts if n.outputs == ["y"])
    assert last.inputs == ["x"] and list(last.attrs["perm"]) == [0, 2, 1, 3]
    assert len(ts) == (2 if shared else 1)
    same_outputs(g, s, {"x": rand(2, 3, 4, 5)})


def test_simplify_keeps_identity_between_input_and_output() -> None:
    g = Graph()
    x = g.input("x", (2,))
    g.output(g.add_node("Identity", [x], name="y"))
    s = simplify(infer_shapes(g))
    assert s.op_counts() == {"Identity": 1}


# ---------------------------------------------------------------- constant folding
def test_fold_constants_folds_constant_subgraphs_and_shapes() -> None:
    g = Graph()
    x = g.input("x", (4, 6))
    c1 = g.constant(np.arange(6, dtype=np.float32))
    c2 = g.add_node("Mul", [c1, g.constant(np.float32(2.0))], name="c2")
    shp = g.add_node("Shape", [x], name="shp")
    dbl = g.add_node("Mul", [shp, g.constant(np.array([2, 1], np.int64))], name="dbl")
    half = g.add_node("Div", [dbl, g.constant(np.array([1, 2], np.int64))], name="half")
    y = g.add_node("Add", [x, c2], name="y")
    r = g.add_node("Reshape", [y, half], name="r")
    g.output(r)
    g = infer_shapes(g)
    f = fold_constants(g)
    assert f.op_counts() == {"Add": 1, "Reshape": 1}
    assert f.constants["c2"].tolist() == [0, 2, 4, 6, 8, 10]
    assert f.constants["half"].tolist() == [8, 3]
    assert f.values["r"].shape == (8, 3)
    same_outputs(g, f, {"x": rand(4, 6)})


def test_fold_constants_does_not_blow_up_small_constants() -> None:
    g = Graph()
    x = g.input("x", (1,))
    big = g.add_node(
        "ConstantOfShape",
        [g.constant(np.array([2048, 1024], np.int64))],
        {"value": np.array([1.0], np.float32)},
        name="big",
    )
    small = g.add_node(
        "ConstantOfShape",
        [g.constant(np.array([3], np.int64))],
        {"value": np.array([1.0], np.float32)},
        name="small",
    )
    y = g.add_node("Add", [big, x], name="y")
    z = g.add_node("Add", [small, x], name="z")
    g.output(y, z)
    f = fold_constants(infer_shapes(g))
    assert "big" not in f.constants and "small" in f.constants
    assert f.op_counts() == {"ConstantOfShape": 1, "Add": 2}


def test_fold_constant_graph_output() -> None:
    g = Graph()
    g.input("x", (1,))
    c = g.add_node("Neg", [g.constant(np.float32(3))], name="c")
    g.output(c)
    f = fold_constants(infer_shapes(g))
    assert not f.nodes and f.outputs == ["c"] and float(f.constants["c"]) == -3.0
    assert run_reference(f, {"x": np.zeros(1, np.float32)})["c"] == -3.0


# ---------------------------------------------------------------- DCE
def test_dce_removes_dead_nodes_constants_and_optional_outputs() -> None:
    g = Graph()
    x = g.input("x", (2, 4))
    unused_in = g.input("unused", (1,))
    dead = g.add_node("Exp", [g.add_node("Neg", [x])], name="dead")
    ln = g.add_node(
        "LayerNormalization", [x, g.constant(np.ones(4, np.float32), name="gamma")], num_outputs=3, name="ln"
    )
    dr = g.add_node("Dropout", [ln.outputs[0]], num_outputs=2, name="dr")
    g.constant(np.zeros(3, np.float32), name="orphan")
    g.output(dr.outputs[0])
    g = infer_shapes(g)
    d = eliminate_dead_code(g)
    assert d.op_counts() == {"LayerNormalization": 1, "Dropout": 1}
    assert "orphan" not in d.constants and "gamma" in d.constants
    assert d.node("ln").outputs == [ln.outputs[0]] and d.node("dr").outputs == [dr.outputs[0]]
    assert d.inputs == ["x", "unused"]
    assert dead.output not in d.values
    same_outputs(g, d, {"x": rand(2, 4), "unused": rand(1)})
    del unused_in


# ---------------------------------------------------------------- CSE
def test_cse_merges_duplicate_nodes_and_constants() -> None:
    g = Graph()
    x = g.input("x", (3,))
    c1 = g.constant(np.array([1, 2, 3], np.float32))
    c2 = g.constant(np.array([1, 2, 3], np.float32))
    a1 = g.add_node("Add", [x, c1])
    a2 = g.add_node("Add", [x, c2])
    r1 = g.add_node("LeakyRelu", [a1], {"alpha": 0.1})
    r2 = g.add_node("LeakyRelu", [a2], {"alpha": 0.1})
    r3 = g.add_node("LeakyRelu", [a2], {"alpha": 0.2})
    y = g.add_node("Sum", [r1, r2, r3], name="y")
    g.output(y)
    g = infer_shapes(g)
    c = eliminate_common_subexpressions(g)
    assert c.op_counts() == {"Add": 1, "LeakyRelu": 2, "Sum": 1}
    assert len(c.constants) == 1
    same_outputs(g, c, {"x": rand(3)})


def test_cse_merges_constants_by_value_not_bytes() -> None:
    """Constants merge when their elements are equal: the same bytes, or other bytes of equal values
    (-0.0 and 0.0, at a position the bucketing sample skips); one other value keeps both."""
    base = np.linspace(-1, 1, 200, dtype=np.float32)
    base[1] = 0.0

    def merged(other: np.ndarray) -> bool:
        g = Graph()
        x = g.input("x", (200,))
        g.output(
            g.add_node("Sum", [g.add_node("Add", [x, g.constant(base)]), g.add_node("Mul", [x, g.constant(other)])])
        )
        c = eliminate_common_subexpressions(infer_shapes(g))
        same_outputs(g, c, {"x": rand(200)})
        return len(c.constants) == 1

    assert merged(base.copy())
    negzero = base.copy()
    negzero[1] = -0.0  # other bytes, an equal value
    assert negzero.tobytes() != base.tobytes() and merged(negzero)
    off = base.copy()
    off[1] = 0.5  # the sample (every third element and the last) still agrees
    assert not merged(off)


def test_cse_keeps_graph_outputs() -> None:
    g = Graph()
    x = g.input("x", (3,))
    g.output(g.add_node("Relu", [x], name="a"), g.add_node("Relu", [x], name="b"))
    c = eliminate_common_subexpressions(infer_shapes(g))
    assert c.outputs == ["a", "b"] and len(c.nodes) == 2
    g = Graph()
    x = g.input("x", (3,))
    a = g.add_node("Relu", [x], name="a")
    b = g.add_node("Relu", [x], name="b")
    g.output(g.add_node("Neg", [a], name="n"), b)
    c = eliminate_common_subexpressions(infer_shapes(g))
    assert c.op_counts() == {"Relu": 1, "Neg": 1}
    assert c.node("n").inputs == ["b"]
    same_outputs(infer_shapes(g), c, {"x": rand(3)})


# ---------------------------------------------------------------- fusion
def _conv_bn_graph(bias: bool = True, act: str | None = "Relu") -> Graph:
    g = Graph("cbr")
    x = g.input("x", (2, 3, 8, 8))
    ins = [x, g.constant(rand(4, 3, 3, 3), name="w")]
    if bias:
        ins.append(g.constant(rand(4), name="b"))
    c = g.add_node("Conv", ins, {"pads": [1, 1, 1, 1]}, name="conv")
    bn = g.add_node(
        "BatchNormalization",
        [
            c,
            g.constant(rand(4) + 2),
            g.constant(rand(4)),
            g.constant(rand(4)),
            g.constant(np.abs(rand(4)) + 0.5),
        ],
        {"epsilon": 1e-3},
        name="bn",
    )
    y = g.add_node(act, [bn], name="y") if act else bn
    g.output(y)
    return infer_shapes(g)


@pytest.mark.parametrize("bias", [True, False])
def test_conv_batchnorm_folding(bias: bool) -> None:
    g = _conv_bn_graph(bias, act=None)
    f = fold_conv_batchnorm(g)
    assert f.op_counts() == {"Conv": 1}
    conv = f.nodes[0]
    assert conv.outputs == g.outputs and len(conv.inputs) == 3
    assert all(i in f.constants for i in conv.inputs[1:])
    same_outputs(g, f, {"x": rand(2, 3, 8, 8)}, rtol=1e-4, atol=1e-5)


def test_conv_bn_not_folded_when_conv_output_is_shared() -> None:
    g = Graph()
    x = g.input("x", (1, 2, 4, 4))
    c = g.add_node("Conv", [x, g.constant(rand(2, 2, 1, 1))], name="conv")
    bn = g.add_node("BatchNormalization", [c, *(g.constant(np.ones(2, np.float32)) for _ in range(4))])
    g.output(bn, c)
    f = fold_conv_batchnorm(infer_shapes(g))
    assert f.op_counts() == {"Conv": 1, "BatchNormalization": 1}


@pytest.mark.parametrize(
    ("act", "attrs", "consts", "want"),
    [
        ("Relu", {}, [], {"activation": "Relu"}),
        ("LeakyRelu", {"alpha": 0.2}, [], {"activation": "LeakyRelu", "alpha": 0.2}),
        ("Sigmoid", {}, [], {"activation": "Sigmoid"}),
        ("Tanh", {}, [], {"activation": "Tanh"}),
        ("Gelu", {}, [], {"activation": "Gelu"}),
        ("Gelu", {"approximate": "tanh"}, [], {"activation": "GeluTanh"}),
        ("Clip", {}, [0.0, 6.0], {"activation": "Clip", "min": 0.0, "max": 6.0}),
        ("Clip", {}, [None, 1.5], {"activation": "Clip", "min": -math.inf, "max": 1.5}),
        ("HardSwish", {}, [], {"activation": "HardSwish"}),
    ],
)
def test_conv_bias_activation_fusion(act: str, attrs: dict, consts: list, want: dict) -> None:
    g = Graph()
    x = g.input("x", (1, 3, 6, 6))
    c = g.add_node("Conv", [x, g.constant(rand(5, 3, 3, 3))], {"strides": [2, 2]}, name="conv")
    a = g.add_node("Add", [g.constant(rand(1, 5, 1, 1)), c], name="bias")
    ins = [a] + [g.constant(np.float32(v)) if v is not None else None for v in consts]
    y = g.add_node(act, ins, attrs, name="y")
    g.output(y)
    g = infer_shapes(g)
    f = fuse_bias_activation(g)
    assert f.op_counts() == {"_FusedConv": 1}
    node = f.nodes[0]
    assert node.outputs == ["y"] and len(node.inputs) == 3
    assert f.constants[node.inputs[2]].shape == (5,)
    assert node.attrs["strides"] == [2, 2] and node.attrs["pads"] == [0, 0, 0, 0]
    assert (
        node.attrs["kernel_shape"] == [3, 3]
        and node.attrs["dilations"] == [1, 1]
        and node.attrs["group"] == 1
    )
    for k, v in want.items():
        assert node.attrs[k] == v
    same_outputs(g, f, {"x": rand(1, 3, 6, 6)})


@pytest.mark.parametrize("sigmoid_first", [True, False])
@pytest.mark.parametrize("product", ["Conv", "MatMul"])
def test_swish_joins_the_product(product: str, sigmoid_first: bool) -> None:
    """x * sigmoid(x) after a product (EfficientNet's convs, LLaMA's gate) is its Swish activation."""
    g = Graph()
    if product == "Conv":
        x = g.input("x", (1, 3, 6, 6))
        c = g.add_node("Conv", [x, g.constant(rand(5, 3, 3, 3)), g.constant(rand(5))], name="p")
        feeds = {"x": rand(1, 3, 6, 6) * 4}
    else:
        x = g.input("x", (2, 4, 8))
        c = g.add_node("MatMul", [x, g.constant(rand(8, 6))], name="p")
        feeds = {"x": rand(2, 4, 8) * 4}
    s = g.add_node("Sigmoid", [c])
    y = g.add_node("Mul", [s, c] if sigmoid_first else [c, s], name="y")
    g.output(y)
    g = infer_shapes(g)
    f = fuse_bias_activation(g)
    fused = "_FusedConv" if product == "Conv" else "_FusedMatMul"
    assert f.op_counts() == {fused: 1}
    assert f.nodes[0].attrs["activation"] == "Swish" and f.nodes[0].outputs == ["y"]
    same_outputs(g, f, feeds)


@pytest.mark.parametrize("spatial", [1, 3])
def test_only_2d_convs_fuse(spatial: int) -> None:
    """A 1-D or 3-D Conv keeps its own op (the fused conv is 2-D), its Swish and Add too."""
    g = Graph()
    x = g.input("x", (1, 3, *[6] * spatial))
    c = g.add_node("Conv", [x, g.constant(rand(5, 3, *[3] * spatial))], name="p")
    c = g.add_node("Add", [c, g.constant(rand(1, 5, *[1] * spatial))])
    g.output(g.add_node("Mul", [c, g.add_node("Sigmoid", [c])], name="y"))
    f = fuse_bias_activation(infer_shapes(g))
    assert f.op_counts() == {"Conv": 1, "Add": 1, "Sigmoid": 1, "Mul": 1}


@pytest.mark.parametrize("shared", ["sigmoid", "product", "output"])
def test_swish_not_fused_when_a_value_is_read_elsewhere(shared: str) -> None:
    g = Graph()
    x = g.input("x", (1, 3, 6, 6))
    c = g.add_node("Conv", [x, g.constant(rand(5, 3, 3, 3))], name="p")
    s = g.add_node("Sigmoid", [c])
    y = g.add_node("Mul", [c, s], name="y")
    extra = {"sigmoid": s, "product": c}.get(shared)
    if extra is not None:
        g.output(y, g.add_node("Neg", [extra]))
    else:
        g.output(y, c)
    f = fuse_bias_activation(infer_shapes(g))
    assert f.op_counts().get("Sigmoid") == 1 and f.op_counts().get("Mul") == 1
    assert all(n.attrs.get("activation", "none") == "none" for n in f.nodes if n.op_type == "_FusedConv")


def test_matmul_scale_bias_activation_fusion() -> None:
    g = Graph()
    x = g.input("x", (2, 5, 8))
    mm = g.add_node("MatMul", [x, g.constant(rand(8, 4))], name="mm")
    sc = g.add_node("Div", [mm, g.constant(np.float32(2.0))], name="scale")
    a = g.add_node("Add", [sc, g.constant(rand(4))], name="bias")
    y = g.add_node("Gelu", [a], name="y")
    g.output(y)
    g = infer_shapes(g)
    f = fuse_bias_activation(g)
    assert f.op_counts() == {"_FusedMatMul": 1}
    n = f.nodes[0]
    assert n.attrs["activation"] == "Gelu" and n.attrs["scale"] == 0.5
    same_outputs(g, f, {"x": rand(2, 5, 8)})


def test_gemm_fusion_folds_alpha_beta_and_transposes() -> None:
    g = Graph()
    x = g.input("x", (6, 3))
    gm = g.add_node(
        "Gemm",
        [x, g.constant(rand(4, 6)), g.constant(rand(1, 4))],
        {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0},
        name="gemm",
    )
    y = g.add_node("Clip", [gm, g.constant(np.float32(0)), g.constant(np.float32(6))], name="y")
    g.output(y)
    g = infer_shapes(g)
    f = fuse_bias_activation(g)
    n = f.nodes[0]
    assert n.op_type == "_FusedMatMul"
    assert (n.attrs["trans_a"], n.attrs["trans_b"], n.attrs["scale"]) == (1, 1, 0.5)
    assert n.attrs["activation"] == "Clip" and (n.attrs["min"], n.attrs["max"]) == (0.0, 6.0)
    same_outputs(g, f, {"x": rand(6, 3) * 3})


@pytest.mark.parametrize(
    ("attrs", "c_shape", "fused"),
    [({"alpha": 0.5}, None, True), ({"beta": 2.0}, (4,), True), ({}, (1, 4), True), ({}, (), True),
     ({}, (4,), False), ({}, None, False), ({"transB": 1}, (4,), False), ({"alpha": 3.0}, (5, 4), False)],
)  # fmt: skip
def test_a_gemm_alone_fuses_when_it_would_lower_to_more_ops(attrs, c_shape, fused) -> None:
    # alpha != 1 or a C that is not a plain (N,) bias: _FusedMatMul carries them into the product's
    # store; a plain Gemm (or a C over rows, which no (N,) bias holds) stays
    g = Graph()
    x = g.input("x", (5, 6))
    b = rand(4, 6) if attrs.get("transB") else rand(6, 4)
    ins = [x, g.constant(b)] + ([g.constant(rand(*c_shape))] if c_shape is not None else [])
    g.output(g.add_node("Gemm", ins, attrs, name="gemm"))
    g = infer_shapes(g)
    f = fuse_bias_activation(g)
    assert f.op_counts() == ({"_FusedMatMul": 1} if fused else {"Gemm": 1})
    same_outputs(g, f, {"x": rand(5, 6)})


def test_no_fusion_across_shared_or_output_values() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    mm = g.add_node("MatMul", [x, g.constant(rand(3, 3))], name="mm")
    a = g.add_node("Add", [mm, g.constant(rand(3))], name="a")
    r = g.add_node("Relu", [a], name="r")
    g.output(r, a)  # a is a graph output: the Relu cannot be absorbed
    f = fuse_bias_activation(infer_shapes(g))
    assert f.op_counts() == {"_FusedMatMul": 1, "Relu": 1}
    assert f.node("r").inputs == ["a"]
    g2 = Graph()
    x = g2.input("x", (2, 3))
    mm = g2.add_node("MatMul", [x, g2.constant(rand(3, 3))], name="mm")
    a = g2.add_node("Add", [mm, x], name="a")  # non-constant bias: MatMul stays
    g2.output(a)
    assert fuse_bias_activation(infer_shapes(g2)).op_counts() == {"MatMul": 1, "Add": 1}


def _ew_graph() -> Graph:
    g = Graph("ew")
    x = g.input("x", (2, 3, 4))
    s = g.input("s", (3, 1))
    m = g.add_node("Mul", [x, s], name="m")
    a = g.add_node("Add", [m, g.constant(np.float32(0.5))], name="a")
    e = g.add_node("Erf", [a], name="e")
    lk = g.add_node("LeakyRelu", [e], {"alpha": 0.3}, name="lk")
    c = g.add_node("Clip", [lk, g.constant(np.float32(-0.5)), None], name="c")
    y = g.add_node("Mul", [c, x], name="y")
    g.output(y)
    return infer_shapes(g)


def test_elementwise_chain_fusion_and_program_format() -> None:
    g = _ew_graph()
    f = fuse_elementwise(g)
    assert f.op_counts() == {"_FusedElementwise": 1}
    n = f.nodes[0]
    assert n.outputs == ["y"]
    assert n.inputs[:2] == ["x", "s"] and len(n.inputs) == 3  # x, s, the 0.5 constant (x deduplicated)
    prog = n.attrs["program"]
    assert prog == [
        ("Mul", (0, 1), ()),
        ("Add", (3, 2), ()),
        ("Erf", (4,), ()),
        ("LeakyRelu", (5,), (0.3,)),
        ("Clip", (6,), (-0.5, math.inf)),
        ("Mul", (7, 0), ()),
    ]
    codes, params = encode_program(prog)
    assert codes.shape == (6, 4) and codes.dtype == np.int32 and params.shape == (6, 2)
    assert codes[0].tolist() == [OPCODES["Mul"], 0, 1, 0]
    assert codes[2].tolist() == [OPCODES["Erf"], 4, -1, 0]
    assert params[4].tolist() == [-0.5, math.inf]
    same_outputs(g, f, {"x": rand(2, 3, 4), "s": rand(3, 1)})


def test_elementwise_fusion_stops_at_multi_consumer_and_dtype_change() -> None:
    g = Graph()
    x = g.input("x", (4,))
    a = g.add_node("Exp", [x], name="a")
    b = g.add_node("Neg", [a], name="b")  # a has two consumers
    c = g.add_node("Sqrt", [a], name="c")
    d = g.add_node("Add", [b, c], name="d")
    e = g.add_node("Cast", [d], {"to": "float64"}, name="e")
    f_ = g.add_node("Abs", [e], name="f")
    g.output(f_)
    g = infer_shapes(g)
    f = fuse_elementwise(g)
    fused = [n for n in f.nodes if n.op_type == "_FusedElementwise"]
    assert len(fused) == 1 and fused[0].outputs == ["d"] and fused[0].inputs == ["a"]
    assert f.op_counts() == {"Exp": 1, "_FusedElementwise": 1, "Cast": 1, "Abs": 1}
    same_outputs(g, f, {"x": rand(4)})


def test_fuse_pipeline_conv_bn_relu() -> None:
    g = _conv_bn_graph(bias=True, act="Relu")
    f = fuse(g)
    assert f.op_counts() == {"_FusedConv": 1}
    same_outputs(g, f, {"x": rand(2, 3, 8, 8)}, rtol=1e-4, atol=1e-5)
    assert fuse(g, conv_bn=False, bias_activation=False).op_counts() == g.op_counts()


@pytest.mark.parametrize("level", [0, 1, 2])
def test_optimize_levels_preserve_results(level: int) -> None:
    g = _ew_graph()
    o = optimize(g, level=level)
    same_outputs(g, o, {"x": rand(2, 3, 4), "s": rand(3, 1)})
    if level == 2:
        assert o.op_counts() == {"_FusedElementwise": 1}
    with pytest.raises(ValueError):
        optimize(g, level=3)


def test_passes_do_not_mutate_their_input() -> None:
    g = _conv_bn_graph()
    before = str(g)
    for p in (simplify, fold_constants, eliminate_dead_code, eliminate_common_subexpressions, fuse):
        p(g)
    assert str(g) == before


def test_fused_conv_resolves_auto_pad() -> None:
    g = Graph()
    x = g.input("x", (1, 2, 7, 7))
    c = g.add_node("Conv", [x, g.constant(rand(3, 2, 3, 3))], {"auto_pad": "SAME_UPPER", "strides": [2, 2]})
    g.output(g.add_node("Relu", [c], name="y"))
    g = infer_shapes(g)
    f = fuse_bias_activation(g)
    (n,) = f.nodes
    assert "auto_pad" not in n.attrs and n.attrs["pads"] == [1, 1, 1, 1]
    same_outputs(g, f, {"x": rand(1, 2, 7, 7)})


def test_fold_constants_materialises_big_weights() -> None:
    # a ConstantOfShape read only as a MatMul's weights is folded whatever its size (the onnx light
    # models' weights): it would be refilled on every run otherwise
    g = Graph()
    x = g.input("x", (1, 2048))
    w = g.add_node(
        "ConstantOfShape",
        [g.constant(np.array([2048, 1024], np.int64))],
        {"value": np.array([0.5], np.float32)},
        name="w",
    )
    y = g.add_node("MatMul", [x, w], name="y")
    g.output(y)
    f = fold_constants(infer_shapes(g))
    assert "w" in f.constants and f.op_counts() == {"MatMul": 1}
    # whole numbers: every order of the 2,048-term sums is exact (BLAS's order depends on alignment)
    same_outputs(g, f, {"x": np.random.default_rng(0).integers(-2, 3, (1, 2048)).astype(np.float32)})


def _shape_arithmetic() -> Graph:
    g = Graph()
    x = g.input("x", (4, 6))
    shp = g.add_node("Shape", [x], name="shp")
    dbl = g.add_node("Mul", [shp, g.constant("k", np.array([2, 1], np.int64))], name="dbl")
    half = g.add_node("Div", [dbl, g.constant("d", np.array([1, 2], np.int64))], name="half")
    g.output(g.add_node("Reshape", [x, half], name="r"))
    return g


def test_fold_constants_takes_the_values_shape_inference_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    fc = sys.modules["aioge.graph.passes.fold_constants"]
    calls: list[str] = []
    evaluate = fc.evaluate_node
    monkeypatch.setattr(fc, "evaluate_node", lambda n, ins: calls.append(n.name) or evaluate(n, ins))
    g = infer_shapes(_shape_arithmetic())
    f = fold_constants(g)
    assert calls == []  # Mul and Div were evaluated by shape inference: not again
    assert f.constants["half"].tolist() == [8, 3] and f.constants["half"].dtype == np.int64
    assert f.op_counts() == {"Reshape": 1}
    # a constant changed since inference: the node is evaluated on what it reads now
    g.constants["k"] = np.array([3, 1], np.int64)
    f = fold_constants(g)
    assert calls == ["dbl", "half"]
    assert f.constants["half"].tolist() == [12, 3]
