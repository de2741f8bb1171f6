"""Lowering to CANN single ops: op types, attr names/values (acl-spec §7), errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from aioge.graph import ASCEND, Graph, LoweringError, lower, lower_node, optimize
from aioge.graph.lower import acl_dtype
from aioge.graph.passes import infer_shapes
from tests.graph.cann_emulator import SPEC, run_lowered


def lowered(
    op: str,
    shapes: list[tuple[int, ...]],
    attrs: dict | None = None,
    consts: dict | None = None,
    dtype: str = "float32",
    n_out: int = 1,
    direct: bool = False,
):
    g = Graph()
    ins = [g.input(f"x{i}", s, dtype).name for i, s in enumerate(shapes)]
    for k, v in (consts or {}).items():
        if v is None:
            ins.append("")
        else:
            ins.append(g.constant(v, name=k).name)
    n = g.add_node(op, ins, attrs or {}, name="n", num_outputs=n_out)
    g.output(n)
    g = infer_shapes(g)
    return g, lower_node(g, g.node("n"), direct_outputs=direct)


def single(op: str, shapes: list, attrs: dict | None = None, consts: dict | None = None, **kw: Any):
    _, ln = lowered(op, shapes, attrs, consts, **kw)
    assert len(ln.ops) == 1, [o.op_type for o in ln.ops]
    return ln.ops[0]


def test_conv2d_attrs() -> None:
    op = single(
        "Conv",
        [(1, 4, 9, 9)],
        {"strides": [2, 1], "pads": [1, 2, 3, 4], "dilations": [1, 2], "group": 2},
        {"w": np.ones((6, 2, 3, 3), np.float32), "b": np.zeros(6, np.float32)},
    )
    assert op.op_type == "Conv2D"
    assert op.inputs[:3] == ("x0", "w", "b") and op.inputs[3] is None
    assert op.attrs == {
        "strides": [1, 1, 2, 1],
        "pads": [1, 3, 2, 4],
        "dilations": [1, 1, 1, 2],
        "groups": 2,
        "data_format": "NCHW",
        "offset_x": 0,
    }
    op = single(
        "Conv",
        [(1, 1, 5, 5)],
        {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
        {"w": np.ones((1, 1, 2, 2), np.float32)},
    )
    assert op.attrs["pads"] == [0, 1, 0, 1] and op.inputs[2] is None


def test_pooling_attrs() -> None:
    op = single(
        "MaxPool",
        [(1, 2, 8, 8)],
        {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 0], "ceil_mode": 1},
    )
    assert op.op_type == "MaxPoolV3"
    assert op.attrs == {
        "ksize": [1, 1, 3, 2],
        "strides": [1, 1, 2, 2],
        "padding_mode": "CALCULATED",
        "pads": [1, 1, 0, 0],
        "data_format": "NCHW",
        "global_pooling": False,
        "ceil_mode": True,
    }
    op = single("AveragePool", [(1, 2, 8, 8)], {"kernel_shape": [2, 2], "count_include_pad": 1})
    assert op.op_type == "AvgPoolV2" and op.attrs["exclusive"] is False and op.attrs["ceil_mode"] is False
    op = single("GlobalAveragePool", [(1, 2, 5, 7)])
    assert (
        op.op_type == "AvgPoolV2" and op.attrs["global_pooling"] is True and op.attrs["ksize"] == [1, 1, 5, 7]
    )
    assert op.attrs["padding_mode"] == "VALID"
    assert single("GlobalMaxPool", [(1, 2, 5, 7)]).op_type == "MaxPoolV3"


def test_norms_softmax_reduce() -> None:
    _, ln = lowered(
        "BatchNormalization", [(2, 3, 4, 4)], {"epsilon": 1e-3}, {k: np.ones(3, np.float32) for k in "sbmv"}
    )
    (bn,) = ln.ops
    assert bn.op_type == "BatchNorm" and len(bn.outputs) == 6 and len(ln.temps) == 5
    assert bn.attrs == {"epsilon": 1e-3, "data_format": "NCHW", "is_training": False}
    op = single(
        "LayerNormalization",
        [(2, 5, 8)],
        {"axis": -1, "epsilon": 1e-6},
        {"g": np.ones(8, np.float32), "b": np.zeros(8, np.float32)},
    )
    assert op.op_type == "LayerNorm" and op.attrs == {
        "begin_norm_axis": 2,
        "begin_params_axis": 2,
        "epsilon": 1e-6,
    }
    assert len(op.outputs) == 3
    op = single("Softmax", [(2, 5, 8)], {"axis": 1})
    assert (op.op_type, op.attrs) == ("SoftmaxV2", {"axes": [1], "half_to_float": False})
    assert single("LogSoftmax", [(2, 5)]).attrs == {"axes": [1]}
    op = single("ReduceSum", [(2, 5, 8)], {"keepdims": 0}, {"a": np.array([-1, 0], np.int64)})
    assert (op.op_type, op.attrs) == ("ReduceSumD", {"axes": [2, 0], "keep_dims": False})
    op = single("ReduceMean", [(2, 5, 8)])
    assert op.attrs == {"axes": [0, 1, 2], "keep_dims": True, "noop_with_empty_axes": False}
    assert single("ReduceMax", [(2, 3)], {}, {"a": np.array([1], np.int64)}).op_type == "ReduceMaxD"


def test_data_movement_ops() -> None:
    op = single("Transpose", [(2, 3, 4)], {"perm": [2, 0, 1]})
    assert (op.op_type, op.attrs) == ("TransposeD", {"perm": [2, 0, 1]})
    op = single("Concat", [(2, 3), (2, 5), (2, 1)], {"axis": -1})
    assert (op.op_type, op.attrs) == ("ConcatD", {"concat_dim": 1, "N": 3})
    assert single("Split", [(6, 2)], {}, n_out=3).op_type == "SplitD"
    op = single("Split", [(6, 2)], {}, {"s": np.array([1, 5], np.int64)}, n_out=2)
    assert op.op_type == "SplitV" and op.inputs[1].value.tolist() == [1, 5] and op.attrs == {"num_split": 2}
    op = single(
        "Slice",
        [(5, 6)],
        {},
        {
            "s": np.array([4, 1], np.int64),
            "e": np.array([-100, 5], np.int64),
            "a": np.array([0, 1], np.int64),
            "st": np.array([-2, 2], np.int64),
        },
    )
    assert op.op_type == "StridedSlice" and op.attrs["end_mask"] == 1
    assert [i.value.tolist() for i in op.inputs[1:]] == [[4, 1], [0, 5], [-2, 2]]
    op = single("Gather", [(5, 6)], {"axis": 1}, {"i": np.array([-1, 2], np.int64)})
    assert op.op_type == "GatherV2" and op.inputs[1].value.tolist() == [5, 2]
    assert op.inputs[2].value.dtype == np.int32 and int(op.inputs[2].value) == 1
    op = single("Pad", [(2, 3)], {"mode": "reflect"}, {"p": np.array([1, 0, 1, 2], np.int64)})
    assert op.op_type == "PadV3" and op.inputs[1].value.tolist() == [[1, 1], [0, 2]]
    assert op.attrs == {"mode": "reflect", "paddings_contiguous": True}
    assert single("Expand", [(3, 1)], {}, {"s": np.array([2, 3, 4], np.int64)}).attrs == {"shape": [2, 3, 4]}
    assert single("Tile", [(3, 1)], {}, {"r": np.array([2, 3], np.int64)}).attrs == {"multiples": [2, 3]}
    op = single("Flatten", [(2, 3, 4)])
    assert op.op_type == "Reshape" and op.alias and op.inputs[1].value.tolist() == [2, 12]
    assert single("Identity", [(2,)]).alias


def test_elementwise_ops() -> None:
    assert single("Exp", [(3,)]).attrs == {"base": -1.0, "scale": 1.0, "shift": 0.0}
    assert single("Log", [(3,)]).attrs == {"base": -1.0, "scale": 1.0, "shift": 0.0}
    op = single("Cast", [(3,)], {"to": "float16"})
    assert op.attrs == {"dst_type": 1} and acl_dtype("int64") == 9 and acl_dtype("bool") == 12
    op = single("Clip", [(3,)], {}, {"lo": np.float32(0), "hi": np.float32(6)})
    assert op.op_type == "ClipByValue" and [float(i.value) for i in op.inputs[1:]] == [0.0, 6.0]
    op = single("Clip", [(3,)], {}, {"lo": None, "hi": np.float32(6)})
    assert float(op.inputs[1].value) == -np.inf
    assert single("Div", [(3,), (3,)]).op_type == "Div"
    assert single("Gelu", [(3,)], {"approximate": "tanh"}).op_type == "Gelu"
    _, ln = lowered("Gelu", [(3,)])
    assert [(o.op_type, o.attrs) for o in ln.ops] == [("GeluV2", {"approximate": "none"})]  # one node, not five
    _, ln = lowered("Sum", [(3,), (3,), (3,)])
    assert [o.op_type for o in ln.ops] == ["Add", "Add"]
    assert single("Not", [(3,)], dtype="bool").op_type == "LogicalNot"
    assert single("LeakyRelu", [(3,)], {"alpha": 0.2}).attrs == {"negative_slope": 0.2}
    _, ln = lowered("PRelu", [(2, 3, 4)], {}, {"s": np.ones((3, 1), np.float32)})
    assert [o.op_type for o in ln.ops] == ["Reshape", "PRelu"] and ln.ops[0].alias
    _, ln = lowered("PRelu", [(2, 3, 4)], {}, {"s": np.ones((4,), np.float32)})  # not per channel: decomposed
    assert "PRelu" not in [o.op_type for o in ln.ops]
    assert single("Mod", [(3,), (3,)], {"fmod": 1}).op_type == "Mod"
    assert single("Mod", [(3,), (3,)], dtype="int32").op_type == "FloorMod"
    assert single("Xor", [(3,), (3,)], dtype="bool").op_type == "NotEqual"


def test_matmul_gemm_variants() -> None:
    assert single("MatMul", [(2, 3), (3, 4)]).op_type == "MatMulV2"
    op = single("MatMul", [(5, 2, 3), (3, 4)])
    assert op.op_type == "BatchMatMulV2" and op.attrs == {"adj_x1": False, "adj_x2": False, "offset_x": 0}
    op = single(
        "Gemm",
        [(3, 2)],
        {"transA": 1, "transB": 1},
        {"b": np.ones((4, 3), np.float32), "c": np.ones(4, np.float32)},
    )
    assert op.op_type == "MatMulV2" and op.inputs[2] == "c"
    assert op.attrs == {"transpose_x1": True, "transpose_x2": True, "offset_x": 0}
    _, ln = lowered(
        "Gemm",
        [(2, 3)],
        {"alpha": 2.0, "beta": 0.5},
        {"b": np.ones((3, 4), np.float32), "c": np.ones((2, 4), np.float32)},
    )
    assert [o.op_type for o in ln.ops] == ["MatMulV2", "Mul", "Mul", "Add"]
    _, ln = lowered("MatMul", [(3,), (3, 4)])
    assert [o.op_type for o in ln.ops] == ["Reshape", "MatMulV2", "Reshape"]
    assert ln.ops[2].alias and ln.ops[2].outputs == ("n",)  # a view of a placed value: the executor copies
    _, ln = lowered("MatMul", [(3,), (3, 4)], direct=True)
    assert [o.op_type for o in ln.ops] == ["Reshape", "MatMulV2"]
    assert ln.ops[1].outputs == ("n",) and ln.ops[1].shapes == {"n": (1, 4)}


def test_fused_ops_lower_to_themselves() -> None:
    g = Graph()
    x = g.input("x", (1, 3, 8, 8))
    c = g.add_node("Conv", [x, g.constant(np.ones((4, 3, 3, 3), np.float32))], {"pads": [1, 1, 1, 1]})
    r = g.add_node("Relu", [g.add_node("Add", [c, g.constant(np.ones((4, 1, 1), np.float32))])])
    g.output(g.add_node("Sigmoid", [g.add_node("Neg", [r])]))
    o = optimize(g)
    ops = [op for ln in lower(o) for op in ln.ops]
    assert [op.op_type for op in ops] == ["_FusedConv", "_FusedElementwise"]
    assert ops[0].attrs["activation"] == "Relu" and "program" in ops[1].attrs


def test_every_emitted_op_type_is_known() -> None:
    from aioge.graph import load_onnx
    from tests.graph import models

    for fn in models.MODELS.values():
        g = optimize(load_onnx(fn(small=True)), level=0)
        for ln in lower(g):
            for op in ln.ops:
                assert op.op_type in SPEC, op.op_type


def test_lowering_errors_name_the_node() -> None:
    with pytest.raises(LoweringError, match=r"'n' \(Conv\).*4-D"):
        lowered("Conv", [(1, 1, 4, 4, 4, 4)], {}, {"w": np.ones((1, 1, 2, 2, 2, 2), np.float32)})
    with pytest.raises(LoweringError, match=r"'n' \(Resize\).*antialias.*'ascend' target"):
        g, _ = lowered("Resize", [(1, 1, 4, 4)], {"mode": "linear", "antialias": 1},
                       {"roi": None, "s": np.array([1, 1, 0.5, 0.5], np.float32)})  # fmt: skip
        lower_node(g, g.node("n"), target=ASCEND)


def test_decompositions_match_reference() -> None:
    from aioge.graph.reference import run_reference

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    for op, attrs, consts in [
        ("Softplus", {}, {}),
        ("Elu", {"alpha": 0.5}, {}),
        ("Selu", {}, {}),
        ("Shrink", {"lambd": 0.3}, {}),
        ("LeakyRelu", {"alpha": 0.1}, {}),
        ("Sign", {}, {}),
        ("LRN", {"size": 3}, {}),
        ("PRelu", {}, {"s": rng.standard_normal((3, 1, 1)).astype(np.float32)}),
        ("InstanceNormalization", {}, {"s": np.ones(3, np.float32), "b": np.zeros(3, np.float32)}),
        ("Mean", {}, {"m": np.ones(5, np.float32)}),
        ("Pad", {}, {"p": np.array([0, -1, 1, 0, 0, 1, -2, 2], np.int64)}),
    ]:
        g, _ = lowered(op, [x.shape], attrs, consts)
        np.testing.assert_allclose(
            run_lowered(g, {"x0": x})["n"], run_reference(g, {"x0": x})["n"], rtol=1e-5, atol=1e-6, err_msg=op
        )


def test_scratch_layout_of_decompositions() -> None:
    _, ln = lowered("MatMul", [(3,), (3, 4)], direct=True)
    total, offsets, views = ln.scratch()
    assert total == 0 and not offsets and views == {"n/t0": "x0"}  # the MatMulV2 writes "n" directly
    _, ln = lowered("Softplus", [(2, 3)])
    total, offsets, views = ln.scratch(alignment=64)
    assert len(offsets) == 4 and total == 4 * 64 and not views
    assert sorted(offsets.values()) == [0, 64, 128, 192]
