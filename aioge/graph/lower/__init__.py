"""Lowering: IR nodes -> CANN single ops for ``aclopCompileAndExecute``.

``lower_node(graph, node, target=HOST) -> LoweredNode`` and
``lower(graph, target=HOST) -> list[LoweredNode]`` (topological order) for a
shape-inferred graph; every emitted op type is one the :class:`~aioge.graph.target.Target`
runs (a :class:`~aioge.graph.errors.LoweringError` otherwise).  One module per op family:
:mod:`.elementwise`, :mod:`.nn`, :mod:`.shape`, :mod:`.index`, :mod:`.linalg`,
:mod:`.resize`, :mod:`.rnn`, :mod:`.host` (fused ops and the host rewrites);
:mod:`._base` has the records and the per-node builder.  Each :class:`LoweredOp`
names its CANN op type and attrs exactly as the GE op prototypes (the ``REG_OP``
declarations of CANN's op_proto headers, e.g. hicann/ops-nn ``*_proto.h``); inputs
are in IR order and are

* a value name (a graph value, or a node-local temporary in ``LoweredNode.temps``),
* a :class:`ConstInput` — a small host array passed as a *const* input
  (``aclSetTensorConst`` / host placement), e.g. Reshape's shape, axes, pads,
  scalars, or
* ``None`` — an absent OPTIONAL_INPUT (use the optional-input convention).

Attr Python types map to ``aclopSetAttr*``: ``bool`` -> Bool (uint8),
``int`` -> Int, ``float`` -> Float, ``str`` -> String, ``list[int]`` ->
ListInt (int64), ``list[float]`` -> ListFloat.  ``LoweredOp.alias`` marks an op
that need not launch: its single output is a view of input 0 with another
shape (Reshape/Identity; ORT does the same).  An alias op whose output is a
graph value that the plan gave its own buffer (e.g. the trailing reshape of a
1-D Conv lowered through ``Conv2D``) must be executed as a copy.  With
``direct_outputs=True`` such trailing views are removed instead: the real op
writes the graph value directly and ``LoweredOp.shapes`` gives the descriptor
shape it must be described with; then alias ops only ever produce node-local
temporaries or outputs of Reshape-like IR nodes (which the planner also makes
views).  Ops whose type starts with ``_`` are aioge's fused host ops and lower
to themselves.

Table (ONNX/IR op -> CANN ops):

=====================  ==================================================================
Add Sub Mul Div Pow    same name (x1, x2)
Max Min (N inputs)     ``Maximum`` / ``Minimum`` chain
Sum / Mean (N)         ``Add`` chain (/ ``Div`` by N)
Sqrt Abs Neg Erf       same name (x)
Reciprocal Relu
Sigmoid Tanh
Exp, Log               ``Exp`` / ``Log`` with base=-1.0, scale=1.0, shift=0.0
Sign                   ``Greater``/``Less`` vs 0 -> ``Cast`` -> ``Sub``
LeakyRelu, PRelu       ``Relu(x) + slope * Minimum(x, 0)`` (Relu, Minimum, Mul, Add)
Elu, Selu              ``Relu`` + ``Minimum`` -> ``Exp`` -> ``Add(-1)`` -> ``Mul`` (-> ``Mul`` gamma)
Softplus               ``Relu(x) + Log(Exp(Abs(x), scale=-1), shift=1)``
Shrink                 ``Less``/``Greater`` vs ±lambd, ``Add``/``Sub`` bias, ``Fill`` 0, ``Select`` x2
Gelu (none)            ``GeluV2`` (approximate "none": the erf form)
Gelu (tanh)            ``Gelu`` (CANN's Gelu is the tanh approximation)
Clip                   ``ClipByValue(x, clip_value_min, clip_value_max)`` (const bounds)
Cast                   ``Cast`` dst_type = aclDataType number
Not                    ``Equal(x, false)``
Equal Less Greater     same name
Where                  ``Select(condition, x1, x2)`` (``BroadcastToD`` first where shapes differ)
Identity Dropout       ``Identity`` (alias; a copy when Dropout's mask is used: ``Fill(dims, true)``)
Reshape Flatten        ``Reshape(x, shape)`` (alias), shape = the static output shape
Squeeze Unsqueeze
Transpose              ``TransposeD`` perm
MatMul                 2-D: ``MatMulV2`` (transpose_x1/x2=false); batched: ``BatchMatMulV2``
                       (adj_x1/adj_x2=false); 1-D operands are reshaped to 2-D and back
Gemm                   ``MatMulV2`` transpose_x1=transA, transpose_x2=transB, bias = C when
                       C is (N,) and alpha = beta = 1; otherwise ``Mul`` alpha, ``Mul`` beta, ``Add``
Conv (1-D, 2-D)        ``Conv2D`` strides/dilations [1,1,h,w], pads [top,bottom,left,right],
                       groups, data_format "NCHW", offset_x 0 (1-D: reshaped to H=1)
ConvTranspose          ``Conv2DTranspose(input_size, x, filter, bias)`` (same attrs plus
                       output_padding [0,0,h,w]; not in docs/acl-spec.md §7: GE nn_calculation_ops.h)
BatchNormalization     ``BatchNorm`` is_training=false, data_format "NCHW", epsilon;
                       5 scratch outputs; rank != 4 reshaped to 4-D
InstanceNormalization  ``ReduceMeanD`` / ``Sub`` / ``Mul`` / ``ReduceMeanD`` / ``Add`` eps /
                       ``Rsqrt`` / ``Mul`` / ``Mul`` scale / ``Add`` B
LayerNormalization     ``LayerNorm`` begin_norm_axis = begin_params_axis = axis, epsilon
                       (InvStdDev output: ``Add`` eps -> ``Rsqrt`` of the variance)
LRN                    ``Mul`` (square) -> ``Reshape`` (N,1,C,HW) -> ``AvgPoolV2`` over C
                       (exclusive=false) -> ``Reshape`` -> ``Log`` (scale alpha, shift bias)
                       -> ``Exp`` (scale -beta) -> ``Mul`` x
Softmax, LogSoftmax    ``SoftmaxV2`` / ``LogSoftmaxV2`` axes=[axis]
MaxPool                ``MaxPoolV3`` ksize/strides [1,1,h,w], padding_mode "CALCULATED",
                       pads [t,b,l,r], data_format "NCHW", global_pooling false, ceil_mode
AveragePool            ``AvgPoolV2`` as MaxPoolV3 plus exclusive = not count_include_pad
GlobalAveragePool      ``AvgPoolV2`` / ``MaxPoolV3`` with ksize = the spatial dims,
GlobalMaxPool          padding_mode "VALID", global_pooling true
Concat                 ``ConcatD`` concat_dim, N
Split                  equal parts: ``SplitD`` split_dim, num_split; else ``SplitV``
                       (size_splits, split_dim const inputs; num_split)
Slice                  ``StridedSlice(x, begin, end, strides)`` full-rank, clamped; end_mask
                       bit for a negative step running through index 0
Gather                 ``GatherV2(x, indices, axis)`` (axis const int32; constant indices are
                       normalized, otherwise negative_index_support=true)
Expand                 ``BroadcastToD`` shape
Tile                   ``TileD`` multiples
Pad                    ``PadV3(x, paddings, constant_values)`` paddings (rank, 2) int64,
                       paddings_contiguous=true, mode "constant"/"reflect"/"edge"; negative
                       pads crop with ``StridedSlice``
Shape                  ``Identity`` of a const input (normally folded away)
ConstantOfShape        ``Fill(dims, value)`` (const inputs, as ORT)
ReduceSum/Mean/Max/Min ``ReduceSumD`` / ``ReduceMeanD`` / ``ReduceMaxD`` / ``ReduceMinD``
                       axes, keep_dims (ReduceMeanD: noop_with_empty_axes=false);
                       a no-op reduction is an ``Identity`` copy
_FusedConv ...         themselves (host-only op types)
=====================  ==================================================================

Not lowered (raise :class:`LoweringError`): 3-D (and higher) convolution and
pooling, dilated pooling, ``Pad`` mode "wrap".
"""

from __future__ import annotations

from ..errors import LoweringError
from ..ir import Graph, Node
from ..schema import get_schema
from ..target import HOST, Target
from . import elementwise, host, index, linalg, nn, resize, rnn, shape  # noqa: F401  (register their rules)
from ._base import RULES, Builder, ConstInput, InputRef, LoweredNode, LoweredOp, acl_dtype
from .host import expand_host_ops, host_attrs

__all__ = (
    "ConstInput",
    "InputRef",
    "LoweredOp",
    "LoweredNode",
    "lower",
    "lower_node",
    "acl_dtype",
    "expand_host_ops",
    "host_attrs",
)


def lower_node(
    graph: Graph, node: Node, *, target: Target = HOST, direct_outputs: bool = False
) -> LoweredNode:
    """The CANN ops implementing ``node`` (the graph must be shape-inferred).

    ``direct_outputs``: let real ops write graph values with a descriptor shape
    override (``LoweredOp.shapes``) instead of ending in a view (see the module docstring).

    Raises:
        LoweringError: naming the node, for attrs without a CANN mapping or an
            op type ``target`` does not run.
    """
    get_schema(node.op_type, node)
    rule = RULES.get(node.op_type)
    if rule is None:
        raise LoweringError("no CANN lowering", node=node.name, op_type=node.op_type)
    L = Builder(graph, node, target)
    outs = [graph.values[o] for o in node.outputs if o]
    s0 = outs[0].shape if outs else None  # the first output decides most nodes: not empty
    if s0 is not None and 0 in s0 and all(v.shape is not None and v.dtype is not None and 0 in v.shape for v in outs):
        for v in outs:  # nothing to compute: a Fill that writes no element (no empty const to describe)
            L.fill(v.shape or (), 0, v.dtype, out=v.name)
        return LoweredNode(node, tuple(L.ops), L.temps)
    try:
        rule(L)
    except LoweringError:
        raise
    except ValueError as e:
        raise L.fail(str(e)) from e
    checked: set[str] = set()  # whether the target runs an op type does not change within a node
    for op in L.ops:
        if not op.alias and op.op_type not in checked:
            target.check(op.op_type, node.name, node.op_type)
            checked.add(op.op_type)
    _forward_copies(L)
    if direct_outputs:
        _write_outputs_directly(L)
    return LoweredNode(node, tuple(L.ops), L.temps)


def _forward_copies(L: Builder) -> None:
    """Replace ``op -> tmp; Identity(tmp) -> graph value`` by ``op -> graph value`` when that copy is
    the temporary's only reader and the two have the same shape and dtype: one op and one copy fewer
    at every run (a recurrent node's last state, a concatenation of its directions).  The producer
    may write the value early: nothing else in the node writes it, and the plan keeps a node's
    outputs apart from everything live while it runs, as it would for the copy."""
    if not L.temps:  # a copy to forward reads a temporary: most nodes have none
        return
    temps = L.temps
    copies = [k for k, cp in enumerate(L.ops)
              if cp.op_type == "Identity" and not cp.alias and not cp.attrs and not cp.shapes and len(cp.inputs) == 1
              and isinstance(cp.inputs[0], str) and cp.inputs[0] in temps and cp.outputs[0] not in temps]  # fmt: skip
    if not copies:
        return
    ops: list[LoweredOp | None] = list(L.ops)
    # one sweep counts, for every copy, the ops that write its temporary, read it and write its value.
    # A forward never changes another copy's counts: both would read one temporary (then it has two
    # readers) or write one value (two writers), and a temporary is never a copy's value.  The sweep
    # asks each op about the copies' few names (a membership test of its outputs and inputs; a str is
    # never equal to a ConstInput or None) instead of building sets of every op's names
    srcs = list(dict.fromkeys(t for k in copies if isinstance(t := L.ops[k].inputs[0], str)))  # (each one is)
    dsts = list(dict.fromkeys(L.ops[k].outputs[0] for k in copies))
    producers: dict[str, list[int]] = {t: [] for t in srcs}
    readers = dict.fromkeys(srcs, 0)
    writers = dict.fromkeys(dsts, 0)
    # most ops touch none of those names: two set probes (C loops over the op's names, hashed) pass them by
    names = {*srcs, *dsts}
    src_names = set(srcs)
    for i, op in enumerate(L.ops):
        outs, ins = op.outputs, op.inputs
        if names.isdisjoint(outs) and src_names.isdisjoint(ins):
            continue
        for t in srcs:
            if t in outs:
                producers[t].append(i)
            if t in ins:
                readers[t] += 1
        for o in dsts:
            if o in outs:
                writers[o] += 1
    changed = False
    for k in copies:
        cp = ops[k]
        assert cp is not None
        t, out = cp.inputs[0], cp.outputs[0]
        assert isinstance(t, str)
        made = producers[t]
        if len(made) != 1 or readers.get(t) != 1 or writers.get(out) != 1 or made[0] > k:
            continue
        prod = ops[made[0]]
        assert prod is not None
        v = L.g.values[out]
        if prod.alias or t in prod.shapes or temps[t] != (v.shape, v.dtype):
            continue
        ops[made[0]] = LoweredOp(prod.op_type, prod.inputs, tuple([out if o == t else o for o in prod.outputs]),
                                 prod.attrs, prod.alias, prod.shapes)  # fmt: skip
        ops[k] = None
        del temps[t]
        changed = True
    if changed:
        L.ops[:] = [op for op in ops if op is not None]


def _write_outputs_directly(L: Builder) -> None:
    """Replace ``op -> tmp; Reshape(tmp) -> graph value`` by ``op -> graph value`` with a shape override."""
    for k, view in enumerate(list(L.ops)):
        if not view.alias or view.outputs[0] in L.temps or view.inputs[0] not in L.temps:
            continue
        tmp, out = view.inputs[0], view.outputs[0]
        readers = [op for op in L.ops if tmp in op.inputs]
        producers = [i for i, op in enumerate(L.ops) if tmp in op.outputs]
        if len(readers) != 1 or len(producers) != 1:
            continue
        i = producers[0]
        prod = L.ops[i]
        shapes = {**prod.shapes, out: L.temps[tmp][0]}
        L.ops[i] = LoweredOp(
            prod.op_type,
            prod.inputs,
            tuple(out if o == tmp else o for o in prod.outputs),
            prod.attrs,
            prod.alias,
            shapes,
        )
        L.ops[k] = None  # type: ignore[call-overload]
        del L.temps[tmp]
    L.ops[:] = [op for op in L.ops if op is not None]


def lower(graph: Graph, *, target: Target = HOST, direct_outputs: bool = False) -> list[LoweredNode]:
    """Lower every node, in topological order."""
    return [lower_node(graph, n, target=target, direct_outputs=direct_outputs) for n in graph.topological_order()]
