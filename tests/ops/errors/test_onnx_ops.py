"""Bad descriptors of the op types added for ONNX (activation, modulo, scan, gather, topk,
space, groupnorm, lpnorm, rnn, resize kernels): each refused at launch with its typed error
(the harness: ``harness.check_refusals``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.ops.errors.harness import CA, CI, CO, CT, I32, B, C, Case, F, T, check_refusals

pytestmark = pytest.mark.anyio


def _cases() -> list[Case]:
    def unary(op: str, attrs: dict[str, Any] | None = None, bad_dt: str = I32, out_dt: str = F, in_dt: str = F) -> Any:
        return Case(op, [T((2, 3), in_dt)], [((2, 3), out_dt)], attrs or {},
                    bad=[("count", 2, CI), ("dtype", (0, T((2, 3), bad_dt)), CT), ("out", ((3, 2), out_dt), CO)])

    def scatter_nd(op: str) -> Any:
        return Case(op, [T((4, 3)), T((2, 1), I32), T((2, 3))], [((4, 3), F)],
                    bad=[("count", 2, CI), ("in", (2, T((2, 4))), CI), ("dtype", (2, T((2, 3), I32)), CT),
                         ("out", ((4, 4), F), CO)])

    rnn_outs = [((2, 1, 3), F)] * 8
    return [
        unary("HardSigmoid", {"alpha": 0.2, "beta": 0.5}),
        unary("HardSwish"),
        unary("Mish"),
        unary("LogicalNot", bad_dt=F, out_dt=B, in_dt=B),
        unary("IsNan", out_dt=B),
        unary("IsInf", out_dt=B),
        Case("PRelu", [T((2, 3, 4)), T((3,))], [((2, 3, 4), F)],
             bad=[("count", 1, CI), ("in", (1, T((4,))), CI), ("dtype", (1, T((3,), I32)), CT),
                  ("out", ((2, 3, 5), F), CO)]),
        Case("Mod", [T((2, 3)), T((3,))], [((2, 3), F)],
             bad=[("count", 1, CI), ("in", (1, T((4,))), CI), ("dtype", (1, T((3,), I32)), CT),
                  ("out", ((2, 4), F), CO)]),
        Case("FloorMod", [T((2, 3), I32), T((2, 3), I32)], [((2, 3), I32)],
             bad=[("count", 3, CI), ("dtype", (0, T((2, 3), B)), CT), ("outdtype", F, CT)]),
        Case("Cumsum", [T((2, 3)), C([1])], [((2, 3), F)], {"exclusive": True},
             bad=[("count", 1, CI), ("in", (1, C([2])), CA), ("dtype", (0, T((2, 3), B)), CT),
                  ("out", ((3, 2), F), CO)]),
        Case("Tril", [T((3, 4))], [((3, 4), F)], {"diagonal": -1},
             bad=[("count", 2, CI), ("in", (0, T((4,))), CI), ("dtype", (0, T((3, 4), "complex64")), CT),
                  ("out", ((4, 3), F), CO)]),
        Case("Triu", [T((3, 4), I32)], [((3, 4), I32)], {"diagonal": 2},
             bad=[("count", 0, CI), ("outdtype", F, CT), ("attr", {"diagonal": 1.5}, CA)]),
        Case("Range", [C(0, np.int32), C(6, np.int32), C(2, np.int32)], [((3,), I32)],
             bad=[("count", 2, CI), ("in", (2, C(0, np.int32)), CI), ("out", ((4,), I32), CO),
                  ("dtype", (0, C(0, np.int8)), CT)]),
        Case("ReverseSequence", [T((4, 2, 3)), T((2,), I32)], [((4, 2, 3), F)], {"seq_dim": 0, "batch_dim": 1},
             bad=[("count", 1, CI), ("in", (1, T((3,), I32)), CI), ("dtype", (1, T((2,), F)), CT),
                  ("out", ((4, 2, 4), F), CO), ("noattr", "seq_dim", CA)]),
        Case("GatherElements", [T((3, 4)), T((2, 4), I32)], [((2, 4), F)], {"dim": 0},
             bad=[("count", 1, CI), ("in", (1, T((2,), I32)), CI), ("dtype", (1, T((2, 4), F)), CT),
                  ("out", ((2, 3), F), CO), ("attr", {"dim": 5}, CA)]),
        Case("GatherNd", [T((3, 4)), T((2, 1), I32)], [((2, 4), F)], {"negative_index_support": True},
             bad=[("count", 1, CI), ("in", (1, T((2, 3), I32)), CI), ("dtype", (1, T((2, 1), F)), CT),
                  ("out", ((2, 3), F), CO)]),
        Case("ScatterElements", [T((3, 4)), T((2, 4), I32), T((2, 4))], [((3, 4), F)], {"axis": 0, "reduction": "add"},
             bad=[("count", 2, CI), ("in", (2, T((2, 3))), CI), ("dtype", (1, T((2, 4), F)), CT),
                  ("out", ((4, 4), F), CO), ("attr", {"reduction": "avg"}, CA)]),
        *(scatter_nd(op) for op in ("TensorScatterUpdate", "TensorScatterAdd", "TensorScatterMul", "TensorScatterMax",
                                    "TensorScatterMin")),
        Case("OneHot", [T((3,), I32), C(4, np.int32), C(1.0, np.float32), C(0.0, np.float32)], [((3, 4), F)],
             {"axis": -1},
             bad=[("count", 3, CI), ("in", (1, C(-1, np.int32)), CI), ("dtype", (0, T((3,), F)), CT),
                  ("out", ((3, 5), F), CO)]),
        Case("NonZero", [C([[1.0, 0.0], [0.0, 2.0]], np.float32)], [((2, 2), "int64")], {"dtype": np.dtype("int64")},
             bad=[("count", 2, CI), ("dtype", (0, T((2, 3), "complex64")), CT), ("out", ((3, 2), "int64"), CO),
                  ("outdtype", F, CT), ("attr", {"transpose": True}, CA)]),
        Case("TopKV2", [T((3, 5)), C(2, np.int32)], [((3, 2), F), ((3, 2), I32)], {"dim": -1, "largest": True},
             bad=[("count", 1, CI), ("in", (1, C(6, np.int32)), CI), ("dtype", (0, T((3, 5), B)), CT),
                  ("out", ((3, 3), F), CO), ("out1", ((3, 2), F), CT)]),
        Case("DepthToSpace", [T((1, 8, 2, 3))], [((1, 2, 4, 6), F)], {"block_size": 2, "data_format": "NCHW"},
             bad=[("count", 2, CI), ("attr", {"block_size": 3}, CI), ("attr", {"block_size": 0}, CA),
                  ("attr", {"mode": "XYZ"}, CA), ("out", ((1, 2, 4, 5), F), CO), ("dtype", (0, T((1, 8, 2, 3), "complex64")), CT)]),  # noqa: E501
        Case("SpaceToDepth", [T((1, 2, 4, 6))], [((1, 8, 2, 3), F)], {"block_size": 2, "data_format": "NCHW"},
             bad=[("count", 2, CI), ("attr", {"block_size": 4}, CI), ("noattr", "block_size", CA),
                  ("outdtype", I32, CT)]),
        Case("InstanceNorm", [T((2, 3, 4, 4)), T((3,)), T((3,))],
             [((2, 3, 4, 4), F), ((2, 3, 1, 1), F), ((2, 3, 1, 1), F)], {"data_format": "NCHW", "epsilon": 1e-5},
             bad=[("count", 2, CI), ("in", (1, T((4,))), CI), ("dtype", (0, T((2, 3, 4, 4), I32)), CT),
                  ("out", ((2, 3, 4, 5), F), CO), ("attr", {"data_format": "NHWC"}, CA)]),
        Case("GroupNorm", [T((2, 4, 3, 3)), T((4,)), T((4,))], [((2, 4, 3, 3), F), ((2, 2), F), ((2, 2), F)],
             {"num_groups": 2, "data_format": "NCHW", "eps": 1e-5, "is_training": False},
             bad=[("count", 2, CI), ("attr", {"num_groups": 3}, CA), ("dtype", (1, T((4,), "float16")), CT),
                  ("out1", ((2, 3), F), CO), ("noattr", "num_groups", CA)]),
        Case("LpNormV2", [T((2, 3, 4))], [((2, 4), F)], {"p": 2.0, "axes": [1], "keepdim": False, "epsilon": 0.0},
             bad=[("count", 2, CI), ("attr", {"axes": [5]}, CA), ("attr", {"p": -1.0}, CA),
                  ("dtype", (0, T((2, 3, 4), I32)), CT), ("out", ((2, 3), F), CO)]),
        Case("ReduceLogSumExp", [T((2, 3, 4)), C([0, 2])], [((3,), F)], {"keep_dims": False},
             bad=[("count", 1, CI), ("in", (1, C([3])), CI), ("dtype", (0, T((2, 3, 4), I32)), CT),
                  ("out", ((2,), F), CO)]),
        Case("DynamicRNN", [T((2, 1, 4)), T((7, 12)), T((12,))], rnn_outs,
             {"direction": "UNIDIRECTIONAL", "gate_order": "ijfo", "time_major": True, "is_training": False},
             bad=[("count", 2, CI), ("in", (1, T((6, 12))), CI), ("in", (2, T((11,))), CI),
                  ("dtype", (1, T((7, 12), I32)), CT), ("out", ((2, 1, 4), F), CO),
                  ("attr", {"gate_order": "xyzw"}, CA), ("attr", {"direction": "BIDIRECTIONAL"}, CA)]),
        Case("DynamicGRUV2", [T((2, 1, 4)), T((4, 9)), T((3, 9))], rnn_outs[:6],
             {"direction": "UNIDIRECTIONAL", "gate_order": "zrh", "reset_after": True, "is_training": False},
             bad=[("count", 2, CI), ("in", (2, T((3, 6))), CI), ("dtype", (0, T((2, 1, 4), I32)), CT),
                  ("out", ((2, 1, 4), F), CO), ("attr", {"activation": "relu"}, CA)]),
        Case("Resize", [T((1, 1, 2, 3)), None, C([1.0, 1.0, 2.0, 2.0], np.float32)], [((1, 1, 4, 6), F)],
             {"mode": "linear", "coordinate_transformation_mode": "half_pixel"},
             bad=[("count", 5, CI), ("in", (2, C([1.0, 2.0], np.float32)), CI), ("out", ((1, 1, 4, 5), F), CO),
                  ("attr", {"mode": "bilinear"}, CA), ("dtype", (0, T((1, 1, 2, 3), B)), CT)]),
    ]


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[c.op for c in CASES])
async def test_bad_descriptors(shared_stream, case):
    await check_refusals(shared_stream, case)
