"""aioge's fused ops and their rewrite into the host runtime's kernels.

The fusion passes produce ``_FusedConv``, ``_FusedMatMul`` and
``_FusedElementwise`` nodes (:mod:`aioge.graph.passes.fuse`); they lower to
themselves.  :func:`expand_host_ops` then rewrites them for a target:

* ``_FusedConv`` (ONNX-style attrs) becomes CANN ``Conv2D`` (bias fused in
  the GEMM) or, with an activation, the host-only ``_FusedConv2D``: the same
  inputs and attrs plus ``activation`` (and ``alpha``/``min``/``max``),
  applied to each output tile before it is stored;
* ``_FusedMatMul`` and ``_FusedElementwise`` stay (host kernels of those names),
  and so do the blocked-layout ops of :mod:`aioge.graph.passes.nchwc`
  (``_ReorderToNchwc``, ``_ReorderFromNchwc``, ``_NchwcConv2D``,
  ``_NchwcPool2D``: their graph attrs are the kernels' attrs).

For a target without host-only ops (``ascend``) any ``_``-prefixed op left is
a :class:`~aioge.graph.errors.LoweringError` (optimize for that target: it
does not create them).  :func:`host_attrs` converts attrs into the form the
host kernels take.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..._layout import conv2d_attrs
from ..errors import LoweringError
from ..ir import Graph
from ..target import HOST, Target
from ._base import RULES, Builder, LoweredNode, LoweredOp

__all__ = ("expand_host_ops", "host_attrs", "NCHWC_OPS")

#: the blocked-layout ops (:mod:`aioge.graph.passes.nchwc`), lowered 1:1 to the host kernels of those names
NCHWC_OPS = ("_ReorderToNchwc", "_ReorderFromNchwc", "_NchwcConv2D", "_NchwcPool2D")


def _fused(L: Builder) -> None:
    L.op(L.node.op_type, [i or None for i in L.node.inputs], L.node.outputs, **L.node.attrs)  # "": absent


RULES.update({op: _fused for op in ("_FusedConv", "_FusedMatMul", "_FusedElementwise", *NCHWC_OPS)})


def host_attrs(op_type: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attrs of aioge's fused ops in the form the host kernels take.

    ``_FusedElementwise``'s ``program`` (a list of ``(opcode, srcs, params)``
    steps) becomes ``ops`` (ListString), ``srcs`` (ListInt) and ``params``
    (ListFloat), two of each of the last two per step.
    """
    if op_type != "_FusedElementwise" or "program" not in attrs:
        return dict(attrs)
    out = {k: v for k, v in attrs.items() if k != "program"}
    ops: list[str] = []
    srcs: list[int] = []
    params: list[float] = []
    for opcode, regs, ps in attrs["program"]:
        ops.append(str(opcode))
        srcs += [int(regs[0]), int(regs[1]) if len(regs) > 1 else -1]
        ps = [float(p) for p in ps] + [0.0, 0.0]
        params += ps[:2]
    out.update(ops=ops, srcs=srcs, params=params)
    return out


def expand_host_ops(g: Graph, ln: LoweredNode, target: Target = HOST) -> LoweredNode:
    """Rewrite fused ops into ``target``'s kernels (see the module docstring)."""
    del g  # the rewrite needs only the lowered ops (kept in the signature for rewrites that will)
    for op in ln.ops:
        if op.op_type.startswith("_"):
            break
    else:  # nothing to rewrite (a loop: cheaper than any() over a generator for a node's few ops)
        return ln
    ops: list[LoweredOp] = []
    for op in ln.ops:
        if op.op_type != "_FusedConv":
            target.check(op.op_type, ln.node.name, ln.node.op_type)
            ops.append(op)
            continue
        if len(op.attrs["kernel_shape"]) != 2:
            n_sp = len(op.attrs["kernel_shape"])
            raise LoweringError(f"_FusedConv with {n_sp} spatial dims is not supported", node=ln.node.name)
        conv = conv2d_attrs(op.attrs)
        conv["data_format"] = "NCHW"
        x, w = op.inputs[0], op.inputs[1]
        b = op.inputs[2] if len(op.inputs) > 2 and op.inputs[2] else None
        if "activation" not in conv:
            ops.append(LoweredOp("Conv2D", (x, w, b), op.outputs, conv))
            continue
        target.check("_FusedConv2D", ln.node.name, ln.node.op_type)
        ops.append(LoweredOp("_FusedConv2D", (x, w, b), op.outputs, conv))
    return LoweredNode(ln.node, tuple(ops), dict(ln.temps))
