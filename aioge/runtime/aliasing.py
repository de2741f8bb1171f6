"""Which launches may write an output over one of their inputs.

An output that is also an input is only correct for kernels that read each
element before writing that element and nothing else: elementwise ops on the
very same tensor (CANN's in-place contract), the copy ops, and the scatter
ops on their data input.  Everything else (MatMul, Conv2D, Transpose,
reversed slices, reductions, norms, ...) would return wrong numbers, so the
launch is refused with :class:`~aioge.InvalidParamError` before anything is
enqueued, on every backend.  The host runtime applies the same table in C
(``cffi_build/hostrt/alias.c``) to every ``aclopCompileAndExecute``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import InvalidParamError
from .stream import Tensor

INPLACE = frozenset(
    """Abs Add AddV2 Ceil ClipByValue Cos Div Erf Exp ExpandDims FastGelu Fills Flatten Floor FloorMod Gelu GeluV2
    HardSigmoid HardSwish Identity Inv LeakyRelu Log LogicalAnd LogicalNot LogicalOr Maximum Minimum Mish Mod Mul Neg
    OnesLike PRelu Pow RealDiv Reciprocal Relu Reshape Round Rsqrt Select SelectV2 Sigmoid Sign Sin Snapshot Softplus
    Sqrt Square SquaredDifference Squeeze Sub Swish Tanh Unsqueeze ZerosLike _FusedElementwise""".split()
)
#: ops that update their data input (input 0) in place
INPLACE_DATA = frozenset(
    "ScatterElements TensorScatterAdd TensorScatterMax TensorScatterMin TensorScatterMul TensorScatterUpdate".split()
)


def may_alias(op_type: str, input_index: int) -> bool:
    """Whether ``op_type`` may write an output over its input ``input_index`` (same tensor)."""
    return op_type in INPLACE or (input_index == 0 and op_type in INPLACE_DATA)


def check(op_type: str, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
    """Refuse outputs that share memory with each other or with an input the op cannot update in place.

    Tensors own whole device blocks (views are reshapes of the same block),
    so two tensors overlap exactly when they share their memory.
    """
    given = [(j, y._mem) for j, y in enumerate(outputs) if type(y) is Tensor and y._mem is not None]
    if not given:
        return
    seen: dict[int, int] = {}
    for j, m in given:
        if id(m) in seen:
            raise InvalidParamError(100000, f"{op_type}: outputs {seen[id(m)]} and {j} overlap in memory", op_type)
        seen[id(m)] = j
    for i, x in enumerate(inputs):
        if type(x) is Tensor and x._mem is not None and id(x._mem) in seen and not may_alias(op_type, i):
            j = seen[id(x._mem)]
            msg = (
                f"{op_type}: output {j} is input {i}, and {op_type} cannot run in place (its kernel reads the input "
                "after writing the output); use a separate output tensor"
            )
            raise InvalidParamError(100000, msg, op_type)
