"""Which dtypes each registered op accepts, asked of the runtime itself.

The runtime registers op types, not their signatures, so each op is tried
with a few generic call shapes (unary, binary, comparison, reduction, ...);
the first shape the runtime accepts in float32 (or int32 / bool) is then
repeated with every dtype, and the dtypes it accepts are the op's.  Ops that
accept none of the shapes are listed without dtypes.  The launches run on
a stream of their own and are discarded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ("DTYPES", "probe")

DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
_SEEDS = ("float32", "int32", "bool")

# a template: dtype -> (inputs, outputs, attrs); inputs are ("t", shape, dtype) device tensors or
# ("h", array) host-placed values; outputs (shape, dtype)
_Spec = tuple[list[Any], list[tuple[tuple[int, ...], str]], dict[str, Any]]
_Tpl = Callable[[str], _Spec]


def _t(shape: tuple[int, ...], dt: str) -> tuple[str, tuple[int, ...], str]:
    return ("t", shape, dt)


def _h(values: Any) -> tuple[str, np.ndarray]:
    return ("h", np.asarray(values, np.int64))


_TEMPLATES: list[tuple[str, _Tpl]] = [
    ("unary", lambda d: ([_t((2, 3), d)], [((2, 3), d)], {})),
    ("binary", lambda d: ([_t((2, 3), d), _t((2, 3), d)], [((2, 3), d)], {})),
    ("compare", lambda d: ([_t((2, 3), d), _t((2, 3), d)], [((2, 3), "bool")], {})),
    ("select", lambda d: ([_t((2, 3), "bool"), _t((2, 3), d), _t((2, 3), d)], [((2, 3), d)], {})),
    ("clip", lambda d: ([_t((2, 3), d), _t((), d), _t((), d)], [((2, 3), d)], {})),
    ("reduce-attr", lambda d: ([_t((2, 3), d)], [((2,), d)], {"axes": [1]})),
    ("reduce-input", lambda d: ([_t((2, 3), d), _h([1])], [((2,), d)], {})),
    ("arg-attr", lambda d: ([_t((2, 3), d)], [((2,), "int32")], {"dimension": 1})),
    ("arg-input", lambda d: ([_t((2, 3), d), _h(1)], [((2,), "int32")], {})),
    ("matmul", lambda d: ([_t((2, 3), d), _t((3, 2), d)], [((2, 2), d)], {})),
    ("batch-matmul", lambda d: ([_t((2, 2, 3), d), _t((2, 3, 2), d)], [((2, 2, 2), d)], {})),
    ("cast", lambda d: ([_t((2, 3), d)], [((2, 3), "float32")], {"dst_type": 0})),
    ("reshape", lambda d: ([_t((2, 3), d), _h([3, 2])], [((3, 2), d)], {})),
    ("transpose-input", lambda d: ([_t((2, 3), d), _h([1, 0])], [((3, 2), d)], {})),
    ("transpose-attr", lambda d: ([_t((2, 3), d)], [((3, 2), d)], {"perm": [1, 0]})),
    ("squeeze", lambda d: ([_t((1, 3), d)], [((3,), d)], {"axis": [0]})),
    ("expand", lambda d: ([_t((3,), d), _h([0])], [((1, 3), d)], {})),
    ("unsqueeze", lambda d: ([_t((3,), d)], [((1, 3), d)], {"axes": [0]})),
    ("concat-attr", lambda d: ([_t((2, 3), d), _t((2, 3), d)], [((4, 3), d)], {"concat_dim": 0, "N": 2})),
    ("concat-input", lambda d: ([_h(0), _t((2, 3), d), _t((2, 3), d)], [((4, 3), d)], {"N": 2})),
    ("concatv2-input", lambda d: ([_t((2, 3), d), _t((2, 3), d), _h(0)], [((4, 3), d)], {"N": 2})),
    ("pack", lambda d: ([_t((3,), d), _t((3,), d)], [((2, 3), d)], {"axis": 0, "N": 2})),
    ("split-attr", lambda d: ([_t((4, 3), d)], [((2, 3), d), ((2, 3), d)], {"split_dim": 0, "num_split": 2})),
    ("split-input", lambda d: ([_h(0), _t((4, 3), d)], [((2, 3), d), ((2, 3), d)], {"num_split": 2})),
    ("tile-input", lambda d: ([_t((2, 3), d), _h([2, 1])], [((4, 3), d)], {})),
    ("tile-attr", lambda d: ([_t((2, 3), d)], [((4, 3), d)], {"multiples": [2, 1]})),
    ("broadcast-input", lambda d: ([_t((3,), d), _h([2, 3])], [((2, 3), d)], {})),
    ("broadcast-attr", lambda d: ([_t((3,), d)], [((2, 3), d)], {"shape": [2, 3]})),
    ("fill", lambda d: ([_h([2, 3]), _t((), d)], [((2, 3), d)], {})),
    ("fills", lambda d: ([_t((2, 3), d)], [((2, 3), d)], {"value": 1.0})),
    ("gather", lambda d: ([_t((4, 3), d), _t((2,), "int32")], [((2, 3), d)], {})),
    ("gather-axis", lambda d: ([_t((4, 3), d), _t((2,), "int32"), _h(0)], [((2, 3), d)], {})),
    ("slice-input", lambda d: ([_t((4, 3), d), _h([0, 0]), _h([2, 3])], [((2, 3), d)], {})),
    ("slice-attr", lambda d: ([_t((4, 3), d)], [((2, 3), d)], {"offsets": [0, 0], "size": [2, 3]})),
    ("strided-input", lambda d: ([_t((4, 3), d), _h([0, 0]), _h([2, 3]), _h([1, 1])], [((2, 3), d)], {})),
    ("strided-attr", lambda d: ([_t((4, 3), d)], [((2, 3), d)], {"begin": [0, 0], "end": [2, 3], "strides": [1, 1]})),
    ("pad-input", lambda d: ([_t((2, 3), d), _h([[0, 0], [1, 1]])], [((2, 5), d)], {})),
    ("padv2-input", lambda d: ([_t((2, 3), d), _h([[0, 0], [1, 1]]), _t((), d)], [((2, 5), d)], {})),
    ("pad-attr", lambda d: ([_t((2, 3), d)], [((2, 5), d)], {"paddings": [[0, 0], [1, 1]]})),
    ("flatten", lambda d: ([_t((2, 3, 2), d)], [((2, 6), d)], {"axis": 1})),
    ("softmax", lambda d: ([_t((2, 3), d)], [((2, 3), d)], {"axes": [-1]})),
    ("layernorm", lambda d: ([_t((2, 3), d), _t((3,), d), _t((3,), d)], [((2, 3), d), ((2, 1), d), ((2, 1), d)],
                             {"begin_norm_axis": 1, "begin_params_axis": 1})),
    ("rmsnorm", lambda d: ([_t((2, 3), d), _t((3,), d)], [((2, 3), d), ((2, 1), "float32")], {})),
    ("gemm", lambda d: ([_t((2, 3), d), _t((3, 2), d), _t((2, 2), d), _t((), d), _t((), d)], [((2, 2), d)], {})),
    ("pool", lambda d: ([_t((1, 2, 4, 4), d)], [((1, 2, 2, 2), d)],
                        {"ksize": [1, 1, 2, 2], "strides": [1, 1, 2, 2], "padding_mode": "VALID",
                         "data_format": "NCHW", "pads": [0, 0, 0, 0]})),
    ("conv", lambda d: ([_t((1, 2, 4, 4), d), _t((2, 2, 1, 1), d)], [((1, 2, 4, 4), d)],
                        {"strides": [1, 1, 1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1, 1, 1],
                         "data_format": "NCHW"})),
    ("batchnorm", lambda d: ([_t((1, 2, 2, 2), d), *[_t((2,), "float32")] * 4], [((1, 2, 2, 2), d)] +
                             [((2,), "float32")] * 4, {"is_training": False, "data_format": "NCHW"})),
    ("lrn", lambda d: ([_t((1, 2, 2, 2), d)], [((1, 2, 2, 2), d)], {"depth_radius": 1})),
    ("pool-nhwc", lambda d: ([_t((1, 4, 4, 2), d)], [((1, 2, 2, 2), d)],
                             {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"})),
    ("splitv-input", lambda d: ([_t((5,), d), _h([2, -1]), _h(0)], [((2,), d), ((3,), d)], {"num_split": 2})),
    ("splitv-attr", lambda d: ([_t((5,), d)], [((2,), d), ((3,), d)],
                               {"size_splits": [2, -1], "split_dim": 0, "num_split": 2})),
    ("conv-transpose-attr", lambda d: ([_t((1, 3, 4, 4), d), _t((3, 2, 3, 3), d), None, None], [((1, 2, 8, 8), d)],
                                       {"input_size": [1, 2, 8, 8], "strides": [1, 1, 2, 2], "pads": [1, 0, 1, 0],
                                        "data_format": "NCHW"})),
    ("conv-transpose-input", lambda d: ([_h([1, 2, 8, 8]), _t((1, 3, 4, 4), d), _t((3, 2, 3, 3), d), None, None],
                                        [((1, 2, 8, 8), d)], {"strides": [1, 1, 2, 2], "pads": [1, 0, 1, 0],
                                                              "data_format": "NCHW"})),
]


def probe(filter_text: str = "") -> list[dict[str, Any]]:
    """``[{"op", "dtypes", "call"}]`` for the registered op types containing ``filter_text``."""
    from aioge import _native

    ops = [op for op in _native.op_types() if filter_text.lower() in op.lower()]
    if not ops:
        return []
    return asyncio.run(_probe_all(ops))


async def _probe_all(ops: list[str]) -> list[dict[str, Any]]:
    import aioge

    out: list[dict[str, Any]] = []
    async with aioge.open_device(0) as dev, dev.open_stream() as s:
        tensors: dict[tuple[tuple[int, ...], str], Any] = {}

        def tensor(shape: tuple[int, ...], dt: str) -> Any:
            t = tensors.get((shape, dt))
            if t is None:
                t = tensors[(shape, dt)] = s.zeros(shape, dt)
            return t

        def accepts(op: str, spec: _Spec) -> bool:
            ins, outs, attrs = spec
            args = [None if x is None else tensor(x[1], x[2]) if x[0] == "t" else aioge.HostInput(x[1]) for x in ins]
            specs = [aioge.TensorSpec(shape, dt) for shape, dt in outs]
            try:
                aioge.op(op, args, specs, attrs, stream=s)
            except (aioge.AclError, ValueError, TypeError):
                return False
            return True

        for op in ops:
            found = next(((name, tpl) for seed in _SEEDS for name, tpl in _TEMPLATES if accepts(op, tpl(seed))), None)
            if found is None:
                out.append({"op": op, "dtypes": None, "call": None})
                continue
            name, tpl = found
            out.append({"op": op, "dtypes": [d for d in DTYPES if accepts(op, tpl(d))], "call": name})
        try:
            await s.synchronize()  # the probes ran on zeros: a launch may fail, that is fine
        except aioge.AclError:
            pass
    return out

