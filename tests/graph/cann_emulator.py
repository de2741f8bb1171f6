"""numpy emulation of the CANN single ops that aioge.graph.lower emits.

It follows the GE op prototypes of docs/acl-spec.md §7 (input order, attr
names, NCHW conventions such as pads = [top, bottom, left, right]) *without*
reusing the lowering's conversions, so running a lowered graph here and
comparing with the reference executor checks the lowering.  ``SPEC`` lists,
per op, the (min, max) input count and the allowed attr names; unknown attrs
are an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ml_dtypes
import numpy as np

from aioge.graph.ewprogram import erf
from aioge.graph.ir import Graph
from aioge.graph.lower import ConstInput, lower
from aioge.graph.reference import KERNELS, conv_nd, conv_transpose_nd, pool_nd
from aioge.graph.schema import ALIAS_OPS
from tests.graph import cann_emulator_ops as NEWER

ACL_TO_NP = {
    0: np.float32,
    1: np.float16,
    2: np.int8,
    3: np.int32,
    4: np.uint8,
    6: np.int16,
    7: np.uint16,
    8: np.uint32,
    9: np.int64,
    10: np.uint64,
    11: np.float64,
    12: np.bool_,
    27: ml_dtypes.bfloat16,
}

_POOL = {"ksize", "strides", "padding_mode", "pads", "data_format", "global_pooling", "ceil_mode"}
SPEC: dict[str, tuple[int, int, set[str]]] = {
    **{
        op: (2, 2, set())
        for op in ("Add", "Sub", "Mul", "Div", "Pow", "Maximum", "Minimum", "Equal", "Less", "Greater")
    },
    **{
        op: (1, 1, set())
        for op in (
            "Sqrt",
            "Abs",
            "Neg",
            "Erf",
            "Reciprocal",
            "Relu",
            "Sigmoid",
            "Tanh",
            "Rsqrt",
            "Gelu",
            "Identity",
        )
    },
    "GeluV2": (1, 1, {"approximate"}),
    "Exp": (1, 1, {"base", "scale", "shift"}),
    "Log": (1, 1, {"base", "scale", "shift"}),
    "Cast": (1, 1, {"dst_type"}),
    "Select": (3, 3, set()),
    "Fill": (2, 2, set()),
    "ClipByValue": (3, 3, set()),
    "Reshape": (2, 2, {"axis", "num_axes"}),
    "TransposeD": (1, 1, {"perm"}),
    "MatMulV2": (2, 4, {"transpose_x1", "transpose_x2", "offset_x"}),
    "BatchMatMulV2": (2, 4, {"adj_x1", "adj_x2", "offset_x"}),
    "Conv2D": (2, 4, {"strides", "pads", "dilations", "groups", "data_format", "offset_x"}),
    "Conv2DTranspose": (
        3,
        5,
        {"strides", "pads", "dilations", "groups", "data_format", "output_padding", "offset_x"},
    ),
    "BatchNorm": (3, 5, {"epsilon", "data_format", "is_training", "exponential_avg_factor"}),
    "LayerNorm": (3, 3, {"begin_norm_axis", "begin_params_axis", "epsilon"}),
    "SoftmaxV2": (1, 1, {"axes", "half_to_float"}),
    "LogSoftmaxV2": (1, 1, {"axes"}),
    "MaxPoolV3": (1, 1, set(_POOL)),
    "AvgPoolV2": (1, 1, _POOL | {"exclusive", "divisor_override"}),
    "ConcatD": (1, 10**6, {"concat_dim", "N"}),
    "SplitD": (1, 1, {"split_dim", "num_split"}),
    "SplitV": (3, 3, {"num_split"}),
    "StridedSlice": (4, 4, {"begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"}),
    "GatherV2": (3, 3, {"batch_dims", "is_preprocessed", "negative_index_support"}),
    "BroadcastToD": (1, 1, {"shape"}),
    "TileD": (1, 1, {"multiples"}),
    "PadV3": (2, 3, {"mode", "paddings_contiguous"}),
    "ReduceSumD": (1, 1, {"axes", "keep_dims"}),
    "ReduceMeanD": (1, 1, {"axes", "keep_dims", "noop_with_empty_axes"}),
    "ReduceMaxD": (1, 1, {"axes", "keep_dims"}),
    "ReduceMinD": (1, 1, {"axes", "keep_dims"}),
}
REQUIRED = {
    "Cast": {"dst_type"},
    "TransposeD": {"perm"},
    "Conv2D": {"strides", "pads"},
    "Conv2DTranspose": {"strides", "pads"},
    "MaxPoolV3": {"ksize", "strides"},
    "AvgPoolV2": {"ksize", "strides"},
    "ConcatD": {"concat_dim"},
    "SplitD": {"split_dim", "num_split"},
    "SplitV": {"num_split"},
    "BroadcastToD": {"shape"},
    "TileD": {"multiples"},
    "ReduceSumD": {"axes"},
    "ReduceMeanD": {"axes"},
    "ReduceMaxD": {"axes"},
    "ReduceMinD": {"axes"},
}


def _onnx_pads(p4: list[int]) -> list[int]:
    t, b, l, r = p4
    return [t, l, b, r]


def _pool(x: np.ndarray, a: Mapping[str, Any], kind: str) -> np.ndarray:
    assert a["data_format"] == "NCHW" and a["ksize"][:2] == [1, 1] and a["strides"][:2] == [1, 1]
    if a.get("global_pooling"):
        return (
            x.max(axis=(2, 3), keepdims=True)
            if kind == "max"
            else x.mean(axis=(2, 3), keepdims=True, dtype=x.dtype)
        )
    assert a["padding_mode"] == "CALCULATED"
    attrs = {
        "kernel_shape": a["ksize"][2:],
        "strides": a["strides"][2:],
        "pads": _onnx_pads(a["pads"]),
        "ceil_mode": int(a.get("ceil_mode", False)),
        "count_include_pad": int(not a.get("exclusive", True)),
    }
    return pool_nd(x, attrs, kind)


def _strided_slice(
    x: np.ndarray, begin: np.ndarray, end: np.ndarray, strides: np.ndarray, a: Mapping[str, Any]
) -> np.ndarray:
    assert not a.get("begin_mask") and not a.get("ellipsis_mask") and not a.get("new_axis_mask")
    assert not a.get("shrink_axis_mask")
    idx = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides, strict=False)):
        stop = None if a.get("end_mask", 0) >> i & 1 else int(e)
        idx.append(slice(int(b), stop, int(s)))
    return np.ascontiguousarray(x[tuple(idx)])


def run_op(op: str, ins: list[Any], a: dict[str, Any], n_out: int) -> list[np.ndarray]:
    if op.startswith("_"):
        from aioge.graph.ir import Node

        return KERNELS[op](Node(op, ["x"] * len(ins), ["y"], a), ins)
    if op in NEWER.OPS:
        lo, hi, allowed = NEWER.SPEC[op]
        assert lo <= len(ins) <= hi, (op, len(ins))
        assert set(a) <= allowed, (op, set(a) - allowed)
        assert NEWER.REQUIRED[op] <= set(a), (op, NEWER.REQUIRED[op] - set(a))
        return NEWER.OPS[op](ins, a, n_out)
    lo, hi, allowed = SPEC[op]
    assert lo <= len(ins) <= hi, (op, len(ins))
    assert set(a) <= allowed, (op, set(a) - allowed)
    assert REQUIRED.get(op, set()) <= set(a), (op, REQUIRED[op] - set(a))
    x = ins[0]
    bin_ops = {
        "Add": np.add,
        "Sub": np.subtract,
        "Mul": np.multiply,
        "Maximum": np.maximum,
        "Minimum": np.minimum,
        "Pow": np.power,
    }
    if op in bin_ops:
        return [np.asarray(bin_ops[op](x, ins[1].astype(x.dtype)), x.dtype)]
    if op == "Div":
        return [np.asarray(x / ins[1].astype(x.dtype), x.dtype)]
    if op in ("Equal", "Less", "Greater"):
        return [{"Equal": np.equal, "Less": np.less, "Greater": np.greater}[op](x, ins[1])]
    un = {
        "Sqrt": np.sqrt,
        "Abs": np.abs,
        "Neg": np.negative,
        "Erf": erf,
        "Reciprocal": lambda v: 1 / v,
        "Relu": lambda v: np.maximum(v, 0),
        "Sigmoid": lambda v: 1 / (1 + np.exp(-v)),
        "Tanh": np.tanh,
        "Rsqrt": lambda v: 1 / np.sqrt(v),
        "Identity": lambda v: v,
        "Gelu": lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3))),
    }
    if op in un:
        return [np.asarray(un[op](x), x.dtype)]
    if op == "GeluV2":
        assert a.get("approximate", "none") == "none"
        return [np.asarray(0.5 * x * (1 + erf(x / np.sqrt(2))), x.dtype)]
    if op in ("Exp", "Log"):
        assert a["base"] == -1.0
        t = x * np.asarray(a["scale"], x.dtype) + np.asarray(a["shift"], x.dtype)
        return [np.asarray(np.exp(t) if op == "Exp" else np.log(t), x.dtype)]
    if op == "Cast":
        return [x.astype(ACL_TO_NP[a["dst_type"]])]
    if op == "Select":
        return [np.where(x, ins[1], ins[2])]
    if op == "Fill":
        return [np.full(tuple(int(d) for d in x), ins[1].reshape(()), dtype=ins[1].dtype)]
    if op == "ClipByValue":
        return [np.minimum(np.maximum(x, ins[1].astype(x.dtype)), ins[2].astype(x.dtype))]
    if op == "Reshape":
        return [x.reshape(tuple(int(d) for d in ins[1]))]
    if op == "TransposeD":
        return [np.ascontiguousarray(np.transpose(x, a["perm"]))]
    if op in ("MatMulV2", "BatchMatMulV2"):
        ta = a.get("transpose_x1", a.get("adj_x1", False))
        tb = a.get("transpose_x2", a.get("adj_x2", False))
        x1 = np.swapaxes(x, -1, -2) if ta else x
        x2 = np.swapaxes(ins[1], -1, -2) if tb else ins[1]
        y = np.matmul(x1, x2)
        if len(ins) > 2 and ins[2] is not None:
            y = y + ins[2]
        return [np.asarray(y, x.dtype)]
    if op == "Conv2D":
        assert a["data_format"] == "NCHW" and a["strides"][:2] == [1, 1]
        dil = a.get("dilations", [1, 1, 1, 1])
        attrs = {
            "strides": a["strides"][2:],
            "pads": _onnx_pads(a["pads"]),
            "dilations": dil[2:],
            "group": a.get("groups", 1),
        }
        return [conv_nd(x, ins[1], ins[2] if len(ins) > 2 else None, attrs)]
    if op == "Conv2DTranspose":
        size, x, w = ins[0], ins[1], ins[2]
        dil = a.get("dilations", [1, 1, 1, 1])
        attrs = {
            "strides": a["strides"][2:],
            "pads": _onnx_pads(a["pads"]),
            "dilations": dil[2:],
            "group": a.get("groups", 1),
            "output_padding": a.get("output_padding", [0] * 4)[2:],
        }
        y = conv_transpose_nd(x, w, ins[3] if len(ins) > 3 else None, attrs)
        assert tuple(y.shape) == tuple(int(d) for d in size), (y.shape, size)
        return [y]
    if op == "BatchNorm":
        assert a["is_training"] is False and a["data_format"] == "NCHW" and x.ndim == 4
        s = ins[1] / np.sqrt(ins[4] + np.float32(a["epsilon"]))
        y = (x - ins[3].reshape(1, -1, 1, 1)) * s.reshape(1, -1, 1, 1) + ins[2].reshape(1, -1, 1, 1)
        return [np.asarray(y, x.dtype)] + [np.zeros(ins[1].shape, np.float32)] * (n_out - 1)
    if op == "LayerNorm":
        ax = a["begin_norm_axis"]
        assert a["begin_params_axis"] == ax and ins[1].shape == x.shape[ax:] and ins[2].shape == x.shape[ax:]
        axes = tuple(range(ax, x.ndim))
        m = x.mean(axis=axes, keepdims=True, dtype=np.float32)
        v = ((x - m) ** 2).mean(axis=axes, keepdims=True, dtype=np.float32)
        y = (x - m) / np.sqrt(v + np.float32(a["epsilon"])) * ins[1] + ins[2]
        return [np.asarray(y, x.dtype), m, v]
    if op in ("SoftmaxV2", "LogSoftmaxV2"):
        (ax,) = a["axes"]
        m = x.max(axis=ax, keepdims=True)
        e = np.exp(x - m)
        s = e.sum(axis=ax, keepdims=True, dtype=x.dtype)
        return [np.asarray(e / s if op == "SoftmaxV2" else x - m - np.log(s), x.dtype)]
    if op == "MaxPoolV3":
        return [_pool(x, a, "max")]
    if op == "AvgPoolV2":
        assert a.get("divisor_override", 0) == 0
        return [_pool(x, a, "avg")]
    if op == "ConcatD":
        assert a["N"] == len(ins)
        return [np.concatenate(ins, axis=a["concat_dim"])]
    if op == "SplitD":
        assert a["num_split"] == n_out
        return list(np.split(x, a["num_split"], axis=a["split_dim"]))
    if op == "SplitV":
        sizes, dim = [int(s) for s in ins[1]], int(ins[2])
        assert a["num_split"] == n_out == len(sizes)
        return list(np.split(x, np.cumsum(sizes)[:-1], axis=dim))
    if op == "StridedSlice":
        return [_strided_slice(x, ins[1], ins[2], ins[3], a)]
    if op == "GatherV2":
        idx = ins[1].astype(np.int64)
        ax = int(ins[2])
        if not a.get("negative_index_support"):
            assert (idx >= 0).all()
        return [np.take(x, np.where(idx < 0, idx + x.shape[ax], idx), axis=ax)]
    if op == "BroadcastToD":
        return [np.array(np.broadcast_to(x, tuple(a["shape"])))]
    if op == "TileD":
        return [np.tile(x, a["multiples"])]
    if op == "PadV3":
        assert a["paddings_contiguous"] is True
        pads = [tuple(int(v) for v in p) for p in ins[1].reshape(-1, 2)]
        if a["mode"] == "constant":
            value = ins[2].reshape(()) if len(ins) > 2 and ins[2] is not None else 0
            return [np.pad(x, pads, constant_values=value)]
        return [np.pad(x, pads, mode=a["mode"])]
    if op.startswith("Reduce"):
        fn = {"ReduceSumD": np.sum, "ReduceMeanD": np.mean, "ReduceMaxD": np.max, "ReduceMinD": np.min}[op]
        kw = {"dtype": x.dtype} if op in ("ReduceSumD", "ReduceMeanD") else {}
        return [np.asarray(fn(x, axis=tuple(a["axes"]), keepdims=a["keep_dims"], **kw), x.dtype)]
    raise AssertionError(f"no emulation for {op}")


def run_lowered(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Execute ``lower(graph)`` with the emulated CANN ops, both lowering styles; they must agree."""
    a = _run(graph, feeds, direct_outputs=False)
    b = _run(graph, feeds, direct_outputs=True)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    return b


def _run(graph: Graph, feeds: Mapping[str, np.ndarray], direct_outputs: bool) -> dict[str, np.ndarray]:
    env: dict[str, Any] = dict(graph.constants)
    env.update(feeds)
    with np.errstate(all="ignore"):
        for ln in lower(graph, direct_outputs=direct_outputs):
            for op in ln.ops:
                ins = [
                    i.value if isinstance(i, ConstInput) else (None if i is None else env[i])
                    for i in op.inputs
                ]
                outs = run_op(op.op_type, ins, dict(op.attrs), len(op.outputs))
                for name, arr in zip(op.outputs, outs, strict=False):
                    own = ln.temps[name][0] if name in ln.temps else graph.values[name].shape
                    want = op.shapes.get(name, own)
                    assert tuple(arr.shape) == tuple(want), (op.op_type, name, arr.shape, want)
                    # a real op never leaves a view of a graph value behind
                    is_view = ln.node.op_type in ALIAS_OPS and len([o for o in ln.node.outputs if o]) == 1
                    assert not direct_outputs or not op.alias or name in ln.temps or is_view, (op, ln.node)
                    env[name] = arr.reshape(own)
    return {o: env[o] for o in graph.outputs}
