"""ONNX -> aioge IR.

``load_onnx(model, *, input_shapes=None, base_dir=None)`` accepts a path, the
serialized bytes or an ``onnx.ModelProto`` of a default-domain model with
opset 6..21, rewrites every node into the IR's canonical form (see
:mod:`aioge.graph.schema`), validates it and infers all shapes.  ``onnx`` is
imported lazily (install the ``aioge[onnx]`` extra).

Validation: every node's attributes are checked against the schema of the
model's *declared* opset (an attribute that only exists in a later opset, such
as Split's ``num_outputs`` in an opset-17 model, is a
:class:`MalformedModelError` naming the node), and ``onnx.checker`` runs on the
model.  Models of opset 1..8 (exporters wrote 6..8) are first checked, then
upgraded to opset 9 with ``onnx.version_converter`` (onnx's own adapters);
opsets above 21 are refused with :class:`UnsupportedOpsetError`.

Opset differences handled here:

* Squeeze/Unsqueeze (<13), ReduceSum (<13), ReduceMean/Max/Min (<18): ``axes``
  attr -> constant input; Split (<13) ``split`` attr -> input, (>=18)
  ``num_outputs`` checked against the outputs;
* Clip (<11) ``min``/``max`` attrs, Pad (<11) ``pads``/``value`` attrs, Slice
  (<10) ``starts``/``ends``/``axes`` attrs -> constant inputs;
* Softmax/LogSoftmax (<13): "flatten to 2-D at axis" semantics ->
  ``Flatten -> Softmax(axis=-1) -> Reshape(Shape(x))`` (no-op reshapes are
  removed later by the simplifier);
* Dropout (<12) ``ratio`` attr dropped (inference); (>=12) ``training_mode``
  must not be true;
* BatchNormalization: inference, or (>=14) ``training_mode=1`` decomposed into
  batch statistics and the updated running mean/variance outputs.

Errors (all :class:`~aioge.graph.errors.OnnxImportError`):
:class:`UnsupportedOpError` lists every unsupported op/feature with its node
name; :class:`MalformedModelError` covers undecodable bytes, bad
attribute types, missing initializers, cycles, type and shape mismatches;
:class:`ExternalDataError` covers external data outside the model directory,
missing files and size mismatches.  An input without any shape raises
:class:`~aioge.graph.errors.DynamicShapeError`.

Symbolic dims (``dim_param``, or a dim with neither value nor name) that
``input_shapes`` does not pin make a *dynamic* graph (``graph.is_dynamic``,
the dims in ``graph.symbolic``): it is validated but not shape-inferred here;
``dev.compile`` returns an :class:`aioge.DynamicCompiledGraph` that
specialises it per concrete input shape on first use.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import (
    DuplicateValueError,
    DynamicShapeError,
    ExternalDataError,
    GraphError,
    MalformedModelError,
    OnnxImportError,
    UnsupportedOpError,
    UnsupportedOpsetError,
)
from .ir import Graph, Node, Value, normalize_dtype
from .onnx_wire import split_weights
from .schema import check_node_dtypes

if TYPE_CHECKING:  # pragma: no cover
    import onnx

__all__ = ("load_onnx", "MIN_OPSET", "MAX_OPSET", "MIN_UPGRADE_OPSET", "SUPPORTED_OPS")

MIN_OPSET = 9
MAX_OPSET = 21
#: oldest opset accepted: 1..8 are upgraded to MIN_OPSET by onnx.version_converter
MIN_UPGRADE_OPSET = 1
_LITTLE = sys.byteorder == "little"
#: TensorProto data types (onnx.TensorProto.FLOAT, DOUBLE, INT32, INT64) whose values are stored in a
#: field of the dtype itself: the tensor is that field as an array of ``dims``
_TYPED_FIELDS = {1: "float_data", 11: "double_data", 6: "int32_data", 7: "int64_data"}
#: TensorProto data type -> its dtype, for the types aioge reads (filled by :meth:`_Importer.dtype_of`)
_DTYPES: dict[int, np.dtype] = {}
#: TensorProto data type -> its dtype's name (:meth:`_Importer.dtype_name_of`)
_DTYPE_NAMES: dict[int, str] = {}
#: TensorProto.DataLocation.EXTERNAL (onnx.proto): the tensor's data lies in a file
_EXTERNAL = 1

# ONNX attribute kinds per op (AttributeProto type names); anything else is malformed.
_CONV = {
    "auto_pad": "STRING",
    "dilations": "INTS",
    "group": "INT",
    "kernel_shape": "INTS",
    "pads": "INTS",
    "strides": "INTS",
}
_POOL = {
    "auto_pad": "STRING",
    "ceil_mode": "INT",
    "dilations": "INTS",
    "kernel_shape": "INTS",
    "pads": "INTS",
    "strides": "INTS",
}
_RED = {"axes": "INTS", "keepdims": "INT", "noop_with_empty_axes": "INT"}
_RNN = {
    "activation_alpha": "FLOATS",
    "activation_beta": "FLOATS",
    "activations": "STRINGS",
    "clip": "FLOAT",
    "direction": "STRING",
    "hidden_size": "INT",
    "layout": "INT",
}
_ATTRS: dict[str, dict[str, str]] = {
    **{
        op: {}
        for op in (
            "Add",
            "Sub",
            "Mul",
            "Div",
            "Pow",
            "Sqrt",
            "Exp",
            "Log",
            "Abs",
            "Neg",
            "Erf",
            "Reciprocal",
            "Relu",
            "PRelu",
            "Sigmoid",
            "Tanh",
            "Softplus",
            "Max",
            "Min",
            "Sum",
            "Mean",
            "Where",
            "Equal",
            "Less",
            "Greater",
            "Not",
            "MatMul",
            "GlobalAveragePool",
            "GlobalMaxPool",
            "Identity",
            "Expand",
            "Tile",
            "Sign",
            "And",
            "Or",
            "Xor",
            "GreaterOrEqual",
            "LessOrEqual",
            "IsNaN",
            "Floor",
            "Ceil",
            "Round",
            "Sin",
            "Cos",
            "HardSwish",
            "Mish",
            "Range",
            "NonZero",
            "Size",
            "MatMulInteger",
            "CastLike",
        )
    },
    "IsInf": {"detect_negative": "INT", "detect_positive": "INT"},
    "Mod": {"fmod": "INT"},
    "HardSigmoid": {"alpha": "FLOAT", "beta": "FLOAT"},
    "CumSum": {"exclusive": "INT", "reverse": "INT"},
    "Trilu": {"upper": "INT"},
    "GatherElements": {"axis": "INT"},
    "GatherND": {"batch_dims": "INT"},
    "ScatterElements": {"axis": "INT", "reduction": "STRING"},
    "Scatter": {"axis": "INT"},
    "ScatterND": {"reduction": "STRING"},
    "OneHot": {"axis": "INT"},
    "TopK": {"axis": "INT", "largest": "INT", "sorted": "INT", "k": "INT"},
    "ArgMax": {"axis": "INT", "keepdims": "INT", "select_last_index": "INT"},
    "ArgMin": {"axis": "INT", "keepdims": "INT", "select_last_index": "INT"},
    "DepthToSpace": {"blocksize": "INT", "mode": "STRING"},
    "SpaceToDepth": {"blocksize": "INT"},
    "Einsum": {"equation": "STRING"},
    "QuantizeLinear": {
        "axis": "INT",
        "saturate": "INT",
        "block_size": "INT",
        "output_dtype": "INT",
        "precision": "INT",
    },
    "DequantizeLinear": {"axis": "INT", "block_size": "INT", "output_dtype": "INT"},
    "GroupNormalization": {"epsilon": "FLOAT", "num_groups": "INT", "stash_type": "INT"},
    "LSTM": {**_RNN, "input_forget": "INT"},
    "GRU": {**_RNN, "linear_before_reset": "INT"},
    "RNN": dict(_RNN),
    "Resize": {
        "antialias": "INT",
        "axes": "INTS",
        "coordinate_transformation_mode": "STRING",
        "cubic_coeff_a": "FLOAT",
        "exclude_outside": "INT",
        "extrapolation_value": "FLOAT",
        "keep_aspect_ratio_policy": "STRING",
        "mode": "STRING",
        "nearest_mode": "STRING",
    },
    "Upsample": {"mode": "STRING", "scales": "FLOATS"},
    "LeakyRelu": {"alpha": "FLOAT"},
    "Elu": {"alpha": "FLOAT"},
    "Selu": {"alpha": "FLOAT", "gamma": "FLOAT"},
    "Gelu": {"approximate": "STRING"},
    "Shrink": {"bias": "FLOAT", "lambd": "FLOAT"},
    "Clip": {"min": "FLOAT", "max": "FLOAT"},
    "Cast": {"to": "INT", "saturate": "INT"},
    "Gemm": {"alpha": "FLOAT", "beta": "FLOAT", "transA": "INT", "transB": "INT"},
    "Conv": dict(_CONV),
    "ConvTranspose": {**_CONV, "output_padding": "INTS", "output_shape": "INTS"},
    "BatchNormalization": {"epsilon": "FLOAT", "momentum": "FLOAT", "training_mode": "INT"},
    "InstanceNormalization": {"epsilon": "FLOAT"},
    "LayerNormalization": {"axis": "INT", "epsilon": "FLOAT", "stash_type": "INT"},
    "MaxPool": {**_POOL, "storage_order": "INT"},
    "AveragePool": {**_POOL, "count_include_pad": "INT"},
    "LRN": {"alpha": "FLOAT", "beta": "FLOAT", "bias": "FLOAT", "size": "INT"},
    "Softmax": {"axis": "INT"},
    "LogSoftmax": {"axis": "INT"},
    "Dropout": {"ratio": "FLOAT", "seed": "INT"},
    "Flatten": {"axis": "INT"},
    "Reshape": {"allowzero": "INT"},
    "Transpose": {"perm": "INTS"},
    "Squeeze": {"axes": "INTS"},
    "Unsqueeze": {"axes": "INTS"},
    "Concat": {"axis": "INT"},
    "Split": {"axis": "INT", "split": "INTS", "num_outputs": "INT"},
    "Slice": {"starts": "INTS", "ends": "INTS", "axes": "INTS"},
    "Gather": {"axis": "INT"},
    "Pad": {"mode": "STRING", "pads": "INTS", "value": "FLOAT"},
    "Shape": {"start": "INT", "end": "INT"},
    "Constant": {
        "value": "TENSOR",
        "value_float": "FLOAT",
        "value_floats": "FLOATS",
        "value_int": "INT",
        "value_ints": "INTS",
        "value_string": "STRING",
        "value_strings": "STRINGS",
        "sparse_value": "SPARSE_TENSOR",
    },
    "ConstantOfShape": {"value": "TENSOR"},
    "ReduceSum": dict(_RED),
    "ReduceMean": dict(_RED),
    "ReduceMax": dict(_RED),
    "ReduceMin": dict(_RED),
    **{
        op: dict(_RED)
        for op in ("ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
    },
}
SUPPORTED_OPS = frozenset(_ATTRS)
#: AttributeProto.AttributeType numbers (onnx.proto) of the kinds above
_ATTR_TYPES = {
    "FLOAT": 1, "INT": 2, "STRING": 3, "TENSOR": 4, "FLOATS": 6, "INTS": 7, "STRINGS": 8, "SPARSE_TENSOR": 11
}  # fmt: skip


#: op type -> attribute name -> (its AttributeProto type number, its kind name): _ATTRS as :meth:`_Importer._attrs`
#: reads it, one lookup per attribute
_ATTR_KINDS: dict[str, dict[str, tuple[int, str]]] = {
    op: {a: (_ATTR_TYPES[k], k) for a, k in kinds.items()} for op, kinds in _ATTRS.items()
}


#: opset -> op type -> the attribute names of the default-domain op's schema in that opset (None: not
#: defined there), read from onnx's schema table once per process
_SCHEMA_ATTRS: dict[int, dict[str, frozenset[str] | None]] = {}


def _schema_attrs(onnx: Any, op: str, opset: int) -> frozenset[str] | None:
    try:
        return frozenset(onnx.defs.get_schema(op, opset, "").attributes)
    except onnx.defs.SchemaError:
        return None


#: the ``onnx`` package with the submodules the import uses, once :func:`_import_onnx` found it
_ONNX: Any = None
#: protobuf's DecodeError (``google.protobuf.message``), imported with onnx
_DECODE_ERROR: Any = None


def _import_onnx() -> Any:
    global _ONNX, _DECODE_ERROR
    if _ONNX is not None and sys.modules.get("onnx") is _ONNX:  # (still the one imported: not removed since)
        return _ONNX
    try:
        import onnx
        import onnx.checker
        import onnx.defs
        import onnx.numpy_helper
        import onnx.version_converter
        from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("aioge.load_onnx needs the 'onnx' package: pip install 'aioge[onnx]'") from e
    _ONNX, _DECODE_ERROR = onnx, DecodeError
    return onnx


def load_onnx(
    model: str | os.PathLike[str] | bytes | bytearray | memoryview | onnx.ModelProto,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
) -> Graph:
    """Import an ONNX model as a validated, shape-inferred :class:`Graph`.

    Args:
        model: a file path, the serialized model, or an ``onnx.ModelProto``.
        input_shapes: static shapes for inputs whose ONNX shape has symbolic
            or missing dims, e.g. ``{"x": (1, 3, 224, 224)}``; symbolic dims
            left unpinned make a dynamic graph (see the module docstring).
        base_dir: directory that external tensor data is read from when
            ``model`` is bytes or a ModelProto (default for a path: its directory).

    Raises:
        UnsupportedOpError, MalformedModelError, ExternalDataError,
        UnsupportedOpsetError, DynamicShapeError (see the module docstring).
    """
    onnx = _import_onnx()
    proto, base, weights, whole = _read(onnx, model, base_dir)
    source_opset = _declared_opset(proto)
    if weights and source_opset < MIN_OPSET:  # the version converter reads the weights in the message
        proto, base, weights, whole = _read(onnx, model, base_dir, split=False)
    proto, upgraded = _upgrade(onnx, proto, source_opset)
    im = _Importer(
        onnx, proto, base, dict(input_shapes or {}), source_opset, weights, None if upgraded else source_opset
    )
    g = im.run()
    infer_in_place = _infer_shapes().infer_in_place

    try:
        if g.is_dynamic:  # inferred per concrete shape (Graph.specialize)
            g.validate(shapes=False)
        else:  # validate(shapes=False)'s node checks are infer_shapes' own: not run twice
            if not im.ordered:  # (an ordered import passes the structure check: see _Importer.ordered)
                g._validate_structure(signatures=False)
            # the graph is ours alone: inferred in place, each node's dtypes checked once (emit did)
            g = infer_in_place(g, declared_dtypes=True, checked=im.dtypes, ordered=im.ordered)
    except (DynamicShapeError, OnnxImportError):
        raise
    except GraphError as e:
        raise MalformedModelError(str(e), node=None) from e
    if not upgraded:  # our checks name the node, so they go first; an upgraded model was checked before
        _check(onnx, proto, whole, (im.external, im.shapeless))
    return g


#: :mod:`.passes.infer_shapes`, imported on first use (the passes import this module's package)
_INFER_SHAPES: Any = None


def _infer_shapes() -> Any:
    global _INFER_SHAPES
    if _INFER_SHAPES is None:
        import importlib

        _INFER_SHAPES = importlib.import_module(".passes.infer_shapes", __package__)
    return _INFER_SHAPES


def _raw_view(raw: bytes | memoryview, dt: np.dtype, dims: list[int]) -> np.ndarray | None:
    """A read-only view of little-endian raw tensor bytes as ``dims`` x ``dt`` (no copy); None when
    the dtype has no such form or the byte count does not match."""
    if dt.kind not in "biuf" or dt.itemsize not in (1, 2, 4, 8) or len(raw) != math.prod(dims) * dt.itemsize:
        return None
    return np.ndarray(dims, dt, raw)  # (np.frombuffer(raw, dt).reshape(dims) in one step)


def _read(
    onnx: Any, model: Any, base_dir: Any, split: bool = True
) -> tuple[Any, str | None, dict[str, memoryview], bytes | None]:
    """The ModelProto, the directory of external data, the initializers' raw bytes that
    :func:`~aioge.graph.onnx_wire.split_weights` cut out of the message (views into the model's
    bytes: protobuf then copies neither into the message nor out of it), and the serialized
    model when the message was parsed from all of it (None: a ModelProto was given, or weights
    were cut)."""
    base = os.fspath(base_dir) if base_dir is not None else None
    if type(model) is bytes:  # the common case, before os.PathLike's (abstract class) isinstance check
        data = model
    elif isinstance(model, onnx.ModelProto):
        return model, base, {}, None
    elif isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        with open(path, "rb") as f:
            data = f.read()
        base = base or os.path.dirname(os.path.abspath(path))
    elif isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
    else:
        raise TypeError(f"load_onnx takes a path, bytes or onnx.ModelProto, not {type(model).__name__}")
    cut = split_weights(data) if split and _LITTLE else None
    weights: dict[str, memoryview] = {}
    if cut is not None:
        stripped, weights = cut
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(stripped if cut is not None else data)
    except (_DECODE_ERROR, ValueError, RuntimeError) as e:
        if cut is not None:  # the model's own bytes give protobuf's error
            return _read(onnx, model, base_dir, split=False)
        raise MalformedModelError(f"cannot decode the ONNX protobuf ({len(data)} bytes): {e}") from e
    if not proto.HasField("graph"):
        raise MalformedModelError("the model has no graph (truncated or not an ONNX model?)")
    return proto, base, weights, data if cut is None else None


def _declared_opset(proto: Any) -> int:
    for o in proto.opset_import:  # the first default-domain entry
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    raise MalformedModelError("the model imports no default-domain opset")


#: a model parsed from this many bytes or fewer is checked from its bytes when nothing needs a stub
CHECK_AS_IS_BYTES = 1 << 20


def _check(onnx: Any, proto: Any, whole: bytes | None = None, read: tuple[bool, list[Any]] | None = None) -> None:
    """``onnx.checker`` on the model (its structural and schema rules), as a MalformedModelError.

    The checker sees the model's structure with every initializer stubbed to a
    scalar of its dtype: their data was already decoded and checked (external
    data against the model's directory, which the checker cannot see for a
    ModelProto), and the stub keeps a model of any size under protobuf's 2 GB.
    One rule is relaxed, as onnxruntime does: a graph input/output typed as a
    tensor without a ``shape`` passes (its shape is inferred, or given by
    ``input_shapes``).

    ``whole``: the serialized model ``proto`` was parsed from (``proto`` is then the caller's own
    message, done with).  A small one (up to :data:`CHECK_AS_IS_BYTES`) without external
    initializers is checked as it is, not as a stub: its initializers' data is what the importer
    decoded, and the relaxed rule is applied to ``proto`` in place (an empty shape for each graph
    input/output tensor without one, then serialized again) or, when no such tensor exists, the
    checker reads ``whole`` itself.

    ``read``: what the importer saw of ``proto`` as it read it (:attr:`_Importer.external`,
    :attr:`_Importer.shapeless`), instead of walking the graph's initializers, inputs and outputs again.
    """
    if whole is not None and len(whole) <= CHECK_AS_IS_BYTES:
        external, shapeless = read if read is not None else (_external_initializers(proto.graph), None)
        if not external:
            if shapeless is None:
                shapeless = _shapeless_io(proto.graph)
            for vi in shapeless:
                vi.type.tensor_type.shape.SetInParent()
            _run_checker(onnx, proto.SerializeToString() if shapeless else whole)
            return
    stub = onnx.ModelProto()
    for fd, v in proto.ListFields():
        if fd.name != "graph":
            _copy_field(stub, fd, v)
    sg = stub.graph
    for fd, v in proto.graph.ListFields():
        if fd.name != "initializer":
            _copy_field(sg, fd, v)
    for t in proto.graph.initializer:
        s = sg.initializer.add()
        s.name, s.data_type = t.name, t.data_type
        s.raw_data = b"\0" * np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
    for vi in _shapeless_io(sg):
        vi.type.tensor_type.shape.SetInParent()
    _run_checker(onnx, stub)


def _external_initializers(gp: Any) -> bool:
    """Whether an initializer is (or claims to be) external: the checker would look for its file."""
    for t in gp.initializer:
        if t.data_location == _EXTERNAL or len(t.external_data):
            return True
    return False


def _shapeless_io(gp: Any, outputs: bool = True) -> list[Any]:
    """The graph inputs and outputs (``outputs``: those too) typed as a tensor without a ``shape``
    (the rule the checker relaxes)."""
    out = []
    for vi in (*gp.input, *gp.output) if outputs else gp.input:
        t = vi.type
        if t.HasField("tensor_type") and not t.tensor_type.HasField("shape"):
            out.append(vi)
    return out


def _run_checker(onnx: Any, model: Any) -> None:
    """``onnx.checker.check_model(model)`` (its public call: the C++ function behind it takes other
    arguments in other onnx releases), a failure as a MalformedModelError."""
    checker = onnx.checker
    try:
        checker.check_model(model)
    except checker.ValidationError as e:
        msg = " ".join(str(e).split())
        raise MalformedModelError(f"onnx.checker: {msg}") from None


def _copy_field(dst: Any, fd: Any, v: Any) -> None:
    repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED
    if repeated:
        getattr(dst, fd.name).extend(v)
    elif fd.type == fd.TYPE_MESSAGE:
        getattr(dst, fd.name).CopyFrom(v)
    else:
        try:
            setattr(dst, fd.name, v)
        except ValueError as e:  # a string field of bytes that are not UTF-8 (UnicodeDecodeError)
            raise MalformedModelError(f"field {fd.name!r} of the model is invalid: {e}") from None


def _upgrade(onnx: Any, proto: Any, v: int) -> tuple[Any, bool]:
    """Refuse opsets outside 6..21; convert 6..8 to MIN_OPSET (``onnx.version_converter``).
    ``v``: the model's declared opset (:func:`_declared_opset`)."""
    if v > MAX_OPSET or v < MIN_UPGRADE_OPSET:  # (opset 0 does not exist)
        raise UnsupportedOpsetError(
            f"opset {v} is not supported: aioge imports opsets {MIN_OPSET}..{MAX_OPSET} and upgrades "
            f"older ones with onnx.version_converter"
            + (" (re-export the model with an older opset)" if v > MAX_OPSET else "")
        )
    if v >= MIN_OPSET:
        return proto, False
    _check(onnx, proto)
    try:
        up = onnx.version_converter.convert_version(proto, MIN_OPSET)
    except Exception as e:  # the converter raises RuntimeError/ConvertError/IndexError for what it cannot adapt
        raise UnsupportedOpsetError(
            f"opset {v} model: onnx.version_converter cannot upgrade it to opset {MIN_OPSET}: {e}"
        ) from None
    return up, True


class _Importer:
    def __init__(
        self,
        onnx: Any,
        proto: Any,
        base: str | None,
        input_shapes: dict[str, Sequence[int]],
        source_opset: int | None = None,
        weights: dict[str, memoryview] | None = None,
        opset: int | None = None,
    ) -> None:
        """``opset``: ``proto``'s declared opset when the caller read it already (else read here)."""
        self.onnx = onnx
        self.proto = proto
        #: initializers' raw_data cut out of the message (:func:`_read`), by name
        self.weights = weights or {}
        self.base = base
        self.input_shapes = input_shapes
        self.g = Graph(proto.graph.name or "onnx_graph")
        self.opset = self._opset(opset)
        self._schema_attrs = _SCHEMA_ATTRS.setdefault(self.opset, {})
        #: the opset the model was written for (before an upgrade by onnx.version_converter)
        self.source_opset = source_opset if source_opset is not None else self.opset
        self.unsupported: list[tuple[str, str, str]] = []
        self.dtypes: dict[str, np.dtype] = {}
        #: each node with its inputs and outputs (read once: every access to a protobuf field builds
        #: new Python objects)
        self._nodes: list[tuple[Any, list[str], list[str]]] = []
        #: every name the model gives a value (fresh names avoid them), collected by the first fresh()
        self._onnx_names: set[str] | None = None
        #: the initializers' names (run reads them before any node)
        self._init_names: set[str] = set()
        self.node_names: set[str] = set()
        self.emitted: set[str] = set()
        self._n = 0
        #: what :func:`_check` asks of the model, seen as run reads it: whether an initializer is (or
        #: claims to be) external, and the graph inputs and outputs typed as a tensor without a shape
        self.external = False
        self.shapeless: list[Any] = []
        #: every node emitted so far reads only values defined before it (graph inputs, constants,
        #: earlier nodes' outputs) and defines each of its outputs once: the graph is in topological
        #: order and passes ``Graph._validate_structure`` (its values are defined once by construction)
        self.ordered = True

    # --------------------------------------------------------------- basics
    def _opset(self, declared: int | None) -> int:
        v = _declared_opset(self.proto) if declared is None else declared
        if not MIN_OPSET <= v <= MAX_OPSET:
            raise UnsupportedOpsetError(f"opset {v} is outside the supported range {MIN_OPSET}..{MAX_OPSET}")
        return v

    def fresh(self, prefix: str) -> str:
        onnx_names = self._onnx_names if self._onnx_names is not None else self._collect_onnx_names()
        while True:
            self._n += 1
            name = f"{prefix}__{self._n}"
            if name not in onnx_names and name not in self.g.values and name not in self.node_names:
                return name

    def _collect_onnx_names(self) -> set[str]:
        gp = self.proto.graph
        names: set[str] = set()
        for _, ins, outs in self._nodes:  # (converters only drop omitted "" entries from these lists)
            names.update(ins)
            names.update(outs)
        names.discard("")
        names.update(self._init_names)  # (run read every initializer's name first)
        names.update(i.name for i in gp.input)
        self._onnx_names = names
        return names

    def dtype_of(self, onnx_type: int, what: str) -> np.dtype:
        dt = _DTYPES.get(onnx_type)
        if dt is None:
            dt = _DTYPES[onnx_type] = self._dtype_of(onnx_type, what)
        return dt

    def dtype_name_of(self, onnx_type: int, what: str) -> str:
        """The name of :meth:`dtype_of`'s dtype (numpy builds ``dtype.name`` anew on each read)."""
        name = _DTYPE_NAMES.get(onnx_type)
        if name is None:
            name = _DTYPE_NAMES[onnx_type] = self.dtype_of(onnx_type, what).name
        return name

    def _dtype_of(self, onnx_type: int, what: str) -> np.dtype:
        TP = self.onnx.TensorProto
        if onnx_type in (TP.STRING, TP.UNDEFINED, TP.COMPLEX64, TP.COMPLEX128) or onnx_type > TP.BFLOAT16:
            name = TP.DataType.Name(onnx_type) if onnx_type in TP.DataType.values() else str(onnx_type)
            raise MalformedModelError(f"{what} has unsupported element type {name}")
        try:
            return normalize_dtype(self.onnx.helper.tensor_dtype_to_np_dtype(onnx_type))
        except (KeyError, ValueError, TypeError) as e:
            raise MalformedModelError(f"{what} has an invalid element type {onnx_type}") from e

    # ------------------------------------------------------------- tensors
    def tensor(self, t: Any, what: str, raw: memoryview | None = None) -> np.ndarray:
        """``t`` as an array; ``raw``: its raw_data, cut out of the message (:func:`_read`)."""
        if t.HasField("segment"):
            raise MalformedModelError(f"{what}: segmented tensors are not supported")
        code = t.data_type
        dt = _DTYPES.get(code)
        if dt is None:
            dt = self.dtype_of(code, what)
        dims: list[int] = t.dims[:]
        if dims and min(dims) < 0:
            raise MalformedModelError(f"{what} has negative dims {dims}")
        if raw is not None:
            arr = _raw_view(raw, dt, dims)
            if arr is None:
                raise MalformedModelError(
                    f"{what}: raw data of {len(raw)} bytes for {dims} x {dt} = {math.prod(dims) * dt.itemsize} bytes"
                )
            # a view where it lies, at any address: every reader is correct on unaligned data (numpy
            # ufuncs and BLAS calls buffer or copy it themselves; the upload's memcpy and const descs
            # copy bytes; the kernels' weight packing copies it aligned for the pack alone: packcache.c)
            return arr
        if t.data_location == _EXTERNAL:
            t = self._load_external(t, dt, dims, what)
        if t.HasField("raw_data"):
            if _LITTLE:  # the common case, as to_array does it
                arr = _raw_view(t.raw_data, dt, dims)
                if arr is not None:
                    return arr
        elif t.data_type in _TYPED_FIELDS:  # a field of the dtype itself, as to_array reads it
            try:
                # the field as a list first ([:]: one call), which numpy converts faster than the container
                return np.asarray(getattr(t, _TYPED_FIELDS[t.data_type])[:], dtype=dt).reshape(dims)
            except ValueError as e:
                raise MalformedModelError(f"{what}: cannot decode tensor data: {e}") from e
        try:
            arr = self.onnx.numpy_helper.to_array(t)
        except Exception as e:  # onnx raises ValueError/TypeError/AssertionError for bad payloads
            raise MalformedModelError(f"{what}: cannot decode tensor data: {e}") from e
        if tuple(arr.shape) != tuple(dims):
            raise MalformedModelError(f"{what}: data has shape {arr.shape}, dims say {dims}")
        return np.asarray(arr, dtype=dt)

    def _load_external(self, t: Any, dt: np.dtype, dims: list[int], what: str) -> Any:
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location")
        if not loc:
            raise ExternalDataError(f"{what}: external data without a location")
        if "\0" in loc:
            raise ExternalDataError(f"{what}: external data location {loc!r} contains a NUL byte; refused")
        if self.base is None:
            raise ExternalDataError(
                f"{what}: external data {loc!r} needs the model's directory (load from a path or pass base_dir=)"
            )
        if os.path.isabs(loc) or loc.startswith(("/", "\\")) or (len(loc) > 1 and loc[1] == ":"):
            raise ExternalDataError(f"{what}: external data path {loc!r} is absolute; refused")
        root = os.path.realpath(self.base)
        path = os.path.realpath(os.path.join(root, loc))
        if os.path.commonpath([root, path]) != root:
            raise ExternalDataError(f"{what}: external data path {loc!r} escapes the model directory; refused")
        if not os.path.isfile(path):
            raise ExternalDataError(f"{what}: external data file {loc!r} does not exist")
        try:
            offset = int(info.get("offset", "0"))
            length = int(info["length"]) if "length" in info else None
        except ValueError as e:
            raise ExternalDataError(f"{what}: bad external data offset/length: {e}") from e
        expected = math.prod(dims) * dt.itemsize
        if offset < 0:
            raise ExternalDataError(f"{what}: negative external data offset {offset}")
        if length is not None and length != expected:
            raise ExternalDataError(
                f"{what}: external data length {length} does not match {dims} x {dt} = {expected} bytes"
            )
        size = os.path.getsize(path)
        if offset + expected > size:
            raise ExternalDataError(
                f"{what}: {loc!r} has {size} bytes, the tensor needs {expected} bytes at offset {offset}"
            )
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(expected)
        copy = self.onnx.TensorProto()
        copy.CopyFrom(t)
        del copy.external_data[:]
        copy.data_location = self.onnx.TensorProto.DEFAULT
        copy.raw_data = data
        return copy

    # ---------------------------------------------------------------- graph
    def run(self) -> Graph:
        gp = self.proto.graph
        g = self.g
        self._nodes = nodes = [(n, n.input[:], n.output[:]) for n in gp.node]
        if len(gp.sparse_initializer):
            raise MalformedModelError("sparse initializers are not supported")
        self._init_names = init_names = set()
        unsplit = not self.weights  # (weights cut out of the model: _check stubs the initializers anyway)
        for t in gp.initializer:
            tname = t.name
            if not tname:
                raise MalformedModelError("an initializer has no name")
            if tname in init_names:
                raise MalformedModelError(f"initializer {tname!r} is defined twice")
            init_names.add(tname)
            if unsplit and (t.data_location == _EXTERNAL or len(t.external_data)):
                self.external = True
            arr = self.tensor(t, f"initializer {tname!r}", self.weights.get(tname))
            g.set_constant(tname, arr)
            self.dtypes[tname] = arr.dtype
        # an input with a default (initializer) is a constant here
        real_inputs = [vi for vi in gp.input if vi.name not in init_names]
        if len(real_inputs) != len(gp.input):  # (_add_input sees the others)
            self.shapeless += [vi for vi in _shapeless_io(gp, outputs=False) if vi.name in init_names]
        if self.input_shapes:
            real = [vi.name for vi in real_inputs]
            unknown = [k for k in self.input_shapes if k not in real]
            if unknown:
                raise OnnxImportError(
                    f"input_shapes names {sorted(unknown)}, which are not inputs of the model; its inputs are {real}"
                )
        for vi in real_inputs:
            self._add_input(vi)
        names = []
        for i, (n, _, _) in enumerate(nodes):
            name = n.name or f"{n.op_type}_{i}"
            if type(name) is not str:  # protobuf hands a proto2 string that is not UTF-8 over as bytes
                raise MalformedModelError(f"node name {name!r} is not UTF-8 text")
            while name in self.node_names:
                name = f"{name}_{i}"
            self.node_names.add(name)
            names.append(name)
        for (n, ins, outs), name in zip(nodes, names, strict=False):
            self._node(n, name, ins, outs)
        for v in g.values:
            if type(v) is not str:
                raise MalformedModelError(f"value name {v!r} is not UTF-8 text")
        if self.unsupported:
            raise UnsupportedOpError(self.unsupported)
        for o in gp.output:
            if not o.name:
                raise MalformedModelError("a graph output has no name")
            if o.name not in g.values:
                raise MalformedModelError(f"graph output {o.name!r} is not produced by any node")
            g.outputs.append(o.name)
            t = o.type
            if t.HasField("tensor_type") and not t.tensor_type.HasField("shape"):
                self.shapeless.append(o)
        return g

    def _add_input(self, vi: Any) -> None:
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None or not tt.HasField("elem_type"):
            raise MalformedModelError(f"graph input {vi.name!r} is not a typed tensor")
        dt = self.dtype_of(tt.elem_type, f"graph input {vi.name!r}")
        dims: list[Any] = []
        if tt.HasField("shape"):
            for d in tt.shape.dim:
                dims.append(int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or None))
        elif vi.name not in self.input_shapes:
            raise DynamicShapeError(f"graph input {vi.name!r} has no shape; pass input_shapes={{{vi.name!r}: ...}}")
        else:
            self.shapeless.append(vi)
        if vi.name in self.input_shapes:
            want = tuple(int(x) for x in self.input_shapes[vi.name])
            if tt.HasField("shape"):
                if len(want) != len(dims) or any(
                    isinstance(d, int) and d != w for d, w in zip(dims, want, strict=False)
                ):
                    raise OnnxImportError(f"input_shapes[{vi.name!r}] = {want} contradicts the model's {dims}")
            dims = list(want)
        self.g.input(vi.name, dims, dt)  # symbolic dims (str/None) make the graph dynamic
        self.dtypes[vi.name] = dt

    # ------------------------------------------------------------------ nodes
    def _node(self, n: Any, name: str, inputs: list[str], outputs: list[str]) -> None:
        op = n.op_type
        domain = n.domain
        if domain not in ("", "ai.onnx") or op not in _ATTRS:
            if type(op) is not str or type(domain) is not str:
                raise MalformedModelError(f"op type {op!r} (domain {domain!r}) is not UTF-8 text", node=name)
            self.unsupported.append((f"{domain}.{op}", name, "custom domain") if domain not in ("", "ai.onnx")
                                    else (op, name, ""))  # fmt: skip
            return
        schema_attrs = self._schema_attrs
        if op in schema_attrs:
            known = schema_attrs[op]
        else:
            known = schema_attrs[op] = _schema_attrs(self.onnx, op, self.opset)
        if known is None:
            self.unsupported.append((op, name, f"not defined in opset {self.opset}"))
            return
        proto_attrs = n.attribute[:]
        if (op == "Constant" or op == "ConstantOfShape") and len(proto_attrs) == 1 and "value" in known:
            # the usual Constant or ConstantOfShape (one tensor attribute, "value"; the light models
            # hold their weights as fills), read as _attr_values reads it when it passes
            a = proto_attrs[0]
            if a.type == 4 and a.name == "value" and not a.ref_attr_name:
                value = self.tensor(a.t, f"attribute 'value' of node {name!r}")
                if op == "Constant":  # its one value: defined here as _constant does (no converter dispatch)
                    while outputs and not outputs[-1]:
                        outputs.pop()
                    if not outputs:
                        raise MalformedModelError("has no outputs", node=name, op_type=op)
                    _define_constant(self, op, outputs, value, name)
                    return
                attrs = {"value": value}
            else:
                attrs = self._attrs(n, name, proto_attrs, known)
        else:
            attrs = self._attrs(n, name, proto_attrs, known) if proto_attrs else {}
        while outputs and not outputs[-1]:
            outputs.pop()
        if not outputs:
            raise MalformedModelError("has no outputs", node=name, op_type=op)
        conv = _CONVERTERS.get(op)
        try:
            if conv is None:  # an op taken as it is
                self.emit(op, inputs, attrs, outputs, name)
            else:
                conv(self, op, inputs, outputs, attrs, name)
        except _Unsupported as e:
            self.unsupported.append((op, name, str(e)))
        except OnnxImportError:
            raise
        except GraphError as e:
            raise MalformedModelError(str(e)) from e

    def _check_attrs_in_opset(self, n: Any, name: str, known: frozenset[str]) -> None:
        """Every attribute must exist in the op's schema of the declared opset (as onnx.checker says)."""
        for a in n.attribute:
            if a.name in known:
                continue
            since = None
            for v in range(self.opset + 1, MAX_OPSET + 3):
                try:
                    if a.name in self.onnx.defs.get_schema(n.op_type, v, "").attributes:
                        since = v
                        break
                except self.onnx.defs.SchemaError:
                    break
            later = f"; it exists from opset {since}" if since else ""
            raise MalformedModelError(
                f"attribute {a.name!r} is not defined for {n.op_type} in the model's opset {self.opset}{later}",
                node=name,
                op_type=n.op_type,
            )

    def _attrs(self, n: Any, name: str, proto_attrs: list[Any], known: frozenset[str]) -> dict[str, Any]:
        """The node's attributes as Python values: first each must exist in the op's schema of the
        declared opset (:meth:`_check_attrs_in_opset`), then be one aioge knows, of its type."""
        try:
            return self._attr_values(n, name, proto_attrs, known)
        except Exception:
            # an attribute's error, in one pass: the schema check of all attributes comes first
            if not known.issuperset(a.name for a in proto_attrs):
                self._check_attrs_in_opset(n, name, known)
            raise

    def _attr_values(self, n: Any, name: str, proto_attrs: list[Any], known: frozenset[str]) -> dict[str, Any]:
        """:meth:`_attrs` of attributes that pass (an error is raised as met: :meth:`_attrs` orders them)."""
        kinds = _ATTR_KINDS[n.op_type]
        out: dict[str, Any] = {}
        for a in proto_attrs:
            aname = a.name
            if aname not in known:
                self._check_attrs_in_opset(n, name, known)
            spec = kinds.get(aname)
            if spec is None:
                raise MalformedModelError(f"unknown attribute {aname!r}", node=name, op_type=n.op_type)
            if a.ref_attr_name:
                raise MalformedModelError(
                    f"attribute {aname!r} references a function attribute", node=name, op_type=n.op_type
                )
            t = a.type
            if t != spec[0]:
                AP = self.onnx.AttributeProto
                got = AP.AttributeType.Name(t) if t in AP.AttributeType.values() else str(t)
                raise MalformedModelError(
                    f"attribute {aname!r} has type {got}, expected {spec[1]}", node=name, op_type=n.op_type
                )
            # the field of the checked type, read directly (as onnx.helper.get_attribute_value does);
            # protobuf hands INT/FLOAT fields over as Python ints/floats, repeated ones as their lists
            v: Any
            if t == 2:  # INT
                v = a.i
            elif t == 7:  # INTS
                v = a.ints[:]
            elif t == 1:  # FLOAT
                v = a.f
            elif t == 6:  # FLOATS
                v = a.floats[:]
            elif t == 3:  # STRING
                v = a.s.decode("utf-8", "replace")
            elif t == 8:  # STRINGS
                v = [s.decode("utf-8", "replace") for s in a.strings]
            elif t == 4:  # TENSOR
                v = self.tensor(a.t, f"attribute {aname!r} of node {name!r}")
            else:
                v = self.onnx.helper.get_attribute_value(a)
            out[aname] = v
        return out

    # ---------------------------------------------------------------- emitting
    def const(self, array: Any, hint: str) -> str:
        name = self.fresh(hint)
        self.g.set_constant(name, np.asarray(array))
        self.dtypes[name] = self.g.constants[name].dtype
        return name

    def emit(self, op: str, inputs: Sequence[str], attrs: dict[str, Any], outputs: Sequence[str], name: str) -> None:
        """Append node ``name`` (made unique) to the graph, with a Value per named output, and record its
        outputs' dtypes (:func:`~aioge.graph.schema.check_node_dtypes`).

        The node is appended to ``Graph.nodes`` as the passes do: :meth:`Graph.add_node`'s
        checks are the importer's own here (node names are unique by construction, ``inputs`` are
        names), but for the one a model can break, an output that is already defined."""
        if name in self.emitted:
            name = self.fresh(name)
        self.emitted.add(name)
        self.node_names.add(name)
        g = self.g
        values = g.values
        for o in outputs:
            if o and o in values:
                raise DuplicateValueError(f"value {o!r} is already defined", node=name)
        dtypes = self.dtypes
        # read before the outputs are defined: a value without a dtype yet may be one defined later
        # (or by this node), which the structure check and the topological sort then look at
        in_dtypes = [dtypes.get(i) if i else None for i in inputs]
        if self.ordered and (None in in_dtypes or (len(outputs) > 1 and len(set(outputs)) != len(outputs))):
            self.ordered = all(not i or i in values for i in inputs) and len(set(outputs)) == len(outputs)
        node = Node(op, list(inputs), list(outputs), attrs, name)
        for o in outputs:
            if o:
                values[o] = Value(o)
        g.nodes.append(node)
        try:
            dts = check_node_dtypes(node, in_dtypes)
        except GraphError as e:
            raise MalformedModelError(str(e)) from e
        for o, dt in zip(node.outputs, dts, strict=False):
            if o and dt is not None:
                dtypes[o] = dt

    def tmp(self, name: str) -> str:
        return self.fresh(name)


class _Unsupported(Exception):
    """An op feature that aioge does not implement (collected, not raised)."""


Converter = Callable[[_Importer, str, list[str], list[str], dict[str, Any], str], None]


def _constant(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    if len(attrs) != 1:
        raise MalformedModelError("Constant needs exactly one value attribute", node=name, op_type=op)
    ((k, v),) = attrs.items()
    if k in ("value_string", "value_strings"):
        raise _Unsupported("string constants")
    if k == "sparse_value":
        raise _Unsupported("sparse constants")
    if k in ("value_float", "value_floats"):
        arr = np.array(v, np.float32)
    elif k in ("value_int", "value_ints"):
        arr = np.array(v, np.int64)
    else:
        arr = np.asarray(v)
    _define_constant(im, op, outs, arr, name)


def _define_constant(im: _Importer, op: str, outs: list[str], arr: np.ndarray, name: str) -> None:
    """Constant node ``name``'s one output as the graph constant ``arr``."""
    if len(outs) != 1:
        raise MalformedModelError("Constant has one output", node=name, op_type=op)
    if outs[0] in im.g.values:
        raise MalformedModelError(f"output {outs[0]!r} is already defined", node=name, op_type=op)
    im.g.set_constant(outs[0], arr)
    im.dtypes[outs[0]] = arr.dtype


def _axes_attr_to_input(since: int) -> Converter:
    """Squeeze/Unsqueeze/Reduce*: move the ``axes`` attr to an input before opset ``since``."""

    def conv(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
        if im.opset < since:
            axes = attrs.pop("axes", None)
            if len(ins) > 1:
                raise MalformedModelError(f"takes one input before opset {since}", node=name, op_type=op)
            ins = [ins[0], im.const(np.array(axes, np.int64), f"{name}/axes") if axes is not None else ""]
            if op != "Unsqueeze" and axes is None:
                ins = ins[:1]
        elif "axes" in attrs:
            raise MalformedModelError(f"'axes' is an input since opset {since}", node=name, op_type=op)
        if op == "Unsqueeze" and (len(ins) < 2 or not ins[1]):
            raise MalformedModelError("Unsqueeze needs axes", node=name, op_type=op)
        im.emit(op, ins, attrs, outs, name)

    return conv


def _split(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    if im.opset < 13:
        split = attrs.pop("split", None)
        ins = [ins[0]] + ([im.const(np.array(split, np.int64), f"{name}/split")] if split is not None else [])
    n_out = attrs.pop("num_outputs", None)
    if n_out is not None and n_out != len(outs):
        raise MalformedModelError(f"num_outputs={n_out} but the node has {len(outs)} outputs", node=name, op_type=op)
    if any(not o for o in outs):
        raise _Unsupported("an omitted Split output in the middle")
    im.emit(op, ins, attrs, outs, name)


def _clip(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    if im.opset < 11:
        dt = im.dtypes.get(ins[0], np.dtype(np.float32))
        lo, hi = attrs.pop("min", None), attrs.pop("max", None)
        ins = [
            ins[0],
            im.const(np.array(lo, dt), f"{name}/min") if lo is not None else "",
            im.const(np.array(hi, dt), f"{name}/max") if hi is not None else "",
        ]
        while ins and not ins[-1]:
            ins.pop()
    im.emit(op, ins, attrs, outs, name)


def _pad(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    if im.opset < 11:
        pads = attrs.pop("pads", None)
        if pads is None:
            raise MalformedModelError("Pad needs 'pads'", node=name, op_type=op)
        value = attrs.pop("value", 0.0)
        dt = im.dtypes.get(ins[0], np.dtype(np.float32))
        ins = [
            ins[0],
            im.const(np.array(pads, np.int64), f"{name}/pads"),
            im.const(np.array(value, dt), f"{name}/value"),
        ]
    im.emit(op, ins, attrs, outs, name)


def _slice(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    if im.opset < 10:
        starts, ends, axes = attrs.pop("starts", None), attrs.pop("ends", None), attrs.pop("axes", None)
        if starts is None or ends is None:
            raise MalformedModelError("Slice needs starts and ends", node=name, op_type=op)
        ins = [
            ins[0],
            im.const(np.array(starts, np.int64), f"{name}/starts"),
            im.const(np.array(ends, np.int64), f"{name}/ends"),
        ]
        if axes is not None:
            ins.append(im.const(np.array(axes, np.int64), f"{name}/axes"))
    im.emit(op, ins, attrs, outs, name)


def _softmax(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    if im.opset >= 13:
        im.emit(op, ins, attrs, outs, name)
        return
    # before 13: softmax over the flattened trailing dims starting at `axis` (default 1)
    axis = int(attrs.get("axis", 1))
    flat, sm, shp = im.tmp(f"{name}/flat"), im.tmp(f"{name}/2d"), im.tmp(f"{name}/shape")
    im.emit("Flatten", [ins[0]], {"axis": axis}, [flat], im.tmp(f"{name}/Flatten"))
    im.emit(op, [flat], {"axis": -1}, [sm], name)
    im.emit("Shape", [ins[0]], {}, [shp], im.tmp(f"{name}/Shape"))
    im.emit("Reshape", [sm, shp], {}, outs, im.tmp(f"{name}/Reshape"))


def _dropout(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    attrs.pop("ratio", None)
    if im.opset < 12:
        ins = ins[:1]
    im.emit(op, ins, attrs, outs, name)


def _batchnorm(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    training = int(attrs.get("training_mode", 0))
    if training and im.opset >= 14:
        _batchnorm_training(im, ins, outs, attrs, name)
        return
    if training or any(outs[1:]):
        raise _Unsupported("training mode before opset 14 (only inference BatchNormalization is supported)")
    im.emit(op, ins, attrs, outs[:1], name)


def _batchnorm_training(im: _Importer, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    """Training-mode BatchNormalization (opset 14+): normalise with the batch's own mean and
    (population) variance over every axis but 1, and output the updated running statistics
    ``running = input * momentum + batch * (1 - momentum)``.  Rank-agnostic: x is viewed as
    (N, C, -1) (Reshape with 0 = keep that dim) and reshaped back."""
    x, scale, bias, mean_in, var_in = ins[:5]
    dt = im.dtypes.get(x, np.dtype(np.float32))
    mom = float(attrs.get("momentum", 0.9))

    def t(what: str) -> str:
        return im.tmp(f"{name}/{what}")

    def node(op: str, xs: list[str], out: str | None = None, **a: Any) -> str:
        o = out or t(op)
        im.emit(op, xs, a, [o], t(f"{op}_node"))
        return o

    def c(v: Any, what: str, dtype: Any = dt) -> str:
        return im.const(np.array(v, dtype), f"{name}/{what}")

    x3 = node("Reshape", [x, c([0, 0, -1], "nc_rest", np.int64)])
    axes = c([0, 2], "axes", np.int64)
    mean = node("ReduceMean", [x3, axes], keepdims=1)
    d = node("Sub", [x3, mean])
    var = node("ReduceMean", [node("Mul", [d, d]), axes], keepdims=1)
    inv = node("Reciprocal", [node("Sqrt", [node("Add", [var, c(float(attrs.get("epsilon", 1e-5)), "eps")])])])
    col = c([1, -1, 1], "col", np.int64)
    y3 = node("Add", [node("Mul", [node("Mul", [d, inv]), node("Reshape", [scale, col])]),
                      node("Reshape", [bias, col])])  # fmt: skip
    node("Reshape", [y3, node("Shape", [x])], outs[0])
    flat = c([-1], "flat", np.int64)
    for out, running, batch in ((outs[1:2], mean_in, mean), (outs[2:3], var_in, var)):
        if out and out[0]:
            kept = node("Mul", [running, c(mom, "momentum")])
            node("Add", [kept, node("Mul", [node("Reshape", [batch, flat]), c(1 - mom, "rest")])], out[0])


def _maxpool(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    im.emit(op, ins, attrs, outs, name)


def _cast(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    if "to" not in attrs:
        raise MalformedModelError("Cast needs 'to'", node=name, op_type=op)
    try:
        attrs["to"] = im.dtype_name_of(int(attrs["to"]), f"Cast target of node {name!r}")
    except MalformedModelError as e:
        raise _Unsupported(str(e)) from None
    attrs.pop("saturate", None)
    im.emit(op, ins, attrs, outs, name)


def _layernorm(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    if any(not o for o in outs[1:]) and len(outs) == 3:
        # Mean omitted but InvStdDev used: give Mean a scratch name
        outs = [outs[0], outs[1] or im.tmp(f"{name}/mean"), outs[2]]
    im.emit(op, ins, attrs, outs, name)


def _gelu(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    if attrs.get("approximate", "none") not in ("none", "tanh"):
        raise MalformedModelError(f"approximate={attrs['approximate']!r}", node=name, op_type=op)
    im.emit(op, ins, attrs, outs, name)


def _conv(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    if attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise MalformedModelError(f"auto_pad={attrs['auto_pad']!r}", node=name, op_type=op)
    im.emit(op, ins, attrs, outs, name)


def _named_outputs(im: _Importer, outs: list[str], name: str) -> list[str]:
    """Scratch names for omitted outputs before the last used one (the IR names every output it lists)."""
    return [o or im.tmp(f"{name}/unused{i}") for i, o in enumerate(outs)]


def _topk(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    if im.opset < 10:
        k = attrs.pop("k", None)
        if k is None:
            raise MalformedModelError("TopK needs 'k' before opset 10", node=name, op_type=op)
        ins = [ins[0], im.const(np.array([k], np.int64), f"{name}/k")]
    elif "k" in attrs:
        raise MalformedModelError("'k' is an input since opset 10", node=name, op_type=op)
    outs = _named_outputs(im, outs, name)
    if len(outs) == 1:
        outs.append(im.tmp(f"{name}/indices"))
    im.emit(op, ins, attrs, outs, name)


def _scatter(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    im.emit("ScatterElements", ins, attrs, outs, name)  # Scatter (opsets 9, 10) is ScatterElements


def _cast_like(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    dt = im.dtypes.get(ins[1]) if len(ins) > 1 else None
    if dt is None:
        raise MalformedModelError("CastLike needs a typed target_type input", node=name, op_type=op)
    im.emit("Cast", [ins[0]], {"to": dt.name}, outs, name)


def _quantize(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    attrs.pop("saturate", None)  # float8 only
    od = attrs.pop("output_dtype", 0)
    if od and op == "QuantizeLinear":
        attrs["output_dtype"] = im.dtype_name_of(int(od), f"output_dtype of node {name!r}")
    elif od:
        raise _Unsupported("output_dtype")
    if attrs.pop("precision", 0):
        raise _Unsupported("precision")
    im.emit(op, ins, attrs, outs, name)


def _mod(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    dt = im.dtypes.get(ins[0])
    if not int(attrs.get("fmod", 0)) and dt is not None and dt.kind == "f":
        raise MalformedModelError("Mod of floats needs fmod=1", node=name, op_type=op)
    im.emit(op, ins, attrs, outs, name)


def _prelu(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    """PRelu before opset 7 (which the version converter keeps as it is) takes a 1-D slope per channel."""
    x = im.g.values.get(ins[0])
    s = im.g.values.get(ins[1])
    if im.source_opset < 7 and x is not None and s is not None and x.shape and s.shape and len(s.shape) == 1:
        if len(x.shape) > 2 and s.shape[0] == x.shape[1] and s.shape[0] != x.shape[-1]:
            shape = im.const(np.array([s.shape[0], *([1] * (len(x.shape) - 2))], np.int64), f"{name}/slope_shape")
            slope = im.tmp(f"{name}/slope")
            im.emit("Reshape", [ins[1], shape], {}, [slope], im.tmp(f"{name}/Reshape"))
            ins = [ins[0], slope]
    im.emit(op, ins, attrs, outs, name)


#: the recurrent ops' activation names, lower case (read from :mod:`.reference_rnn` on first use)
_RNN_ACTIVATIONS: frozenset[str] | None = None


def _rnn_activations() -> frozenset[str]:
    global _RNN_ACTIVATIONS
    if _RNN_ACTIVATIONS is None:
        from .reference_rnn import ACTIVATIONS

        _RNN_ACTIVATIONS = frozenset(x.lower() for x in ACTIVATIONS)
    return _RNN_ACTIVATIONS


def _recurrent(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    acts = attrs.get("activations")
    known = _rnn_activations() if acts else frozenset()
    for a in acts or []:
        if a.lower() not in known:
            raise MalformedModelError(f"unknown activation {a!r}", node=name, op_type=op)
    if not any(outs):
        raise MalformedModelError("has no outputs", node=name, op_type=op)
    im.emit(op, ins, attrs, _named_outputs(im, outs, name), name)


def _nearest_of_scales(im: _Importer, scales: str) -> str:
    """Upsample/Resize-10 nearest: floor when upsampling, ceil when downsampling (as onnxruntime)."""
    s = im.g.constants.get(scales) if scales else None
    return "ceil" if s is not None and s.size and float(np.max(s)) <= 1.0 and float(np.min(s)) < 1.0 else "floor"


def _resize(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    if im.opset < 11:  # Resize-10: (X, scales), Upsample's semantics
        if len(ins) != 2:
            raise MalformedModelError("Resize takes (X, scales) before opset 11", node=name, op_type=op)
        _upsample(im, op, ins, outs, attrs, name)
        return
    if attrs.get("mode", "nearest") not in ("nearest", "linear", "cubic"):
        raise MalformedModelError(f"unknown mode {attrs['mode']!r}", node=name, op_type=op)
    while ins and not ins[-1]:
        ins.pop()
    im.emit(op, ins, attrs, outs, name)


def _upsample(im: _Importer, op: str, ins: list[str], outs: list[str], attrs: dict[str, Any], name: str) -> None:
    mode = attrs.pop("mode", "nearest")
    mode = {"bilinear": "linear", "trilinear": "linear"}.get(mode, mode)
    if mode not in ("nearest", "linear"):
        raise MalformedModelError(f"unknown mode {mode!r}", node=name, op_type=op)
    if len(ins) != 2 or not ins[1]:
        raise MalformedModelError("takes (X, scales)", node=name, op_type=op)
    res = {"mode": mode, "coordinate_transformation_mode": "asymmetric"}
    if mode == "nearest":
        res["nearest_mode"] = _nearest_of_scales(im, ins[1])
    im.emit("Resize", [ins[0], "", ins[1]], res, outs, name)


_CONVERTERS: dict[str, Converter] = {
    "Constant": _constant,
    "Squeeze": _axes_attr_to_input(13),
    "Unsqueeze": _axes_attr_to_input(13),
    "ReduceSum": _axes_attr_to_input(13),
    "ReduceMean": _axes_attr_to_input(18),
    "ReduceMax": _axes_attr_to_input(18),
    "ReduceMin": _axes_attr_to_input(18),
    "Split": _split,
    "Clip": _clip,
    "Pad": _pad,
    "Slice": _slice,
    "Softmax": _softmax,
    "LogSoftmax": _softmax,
    "Dropout": _dropout,
    "BatchNormalization": _batchnorm,
    "MaxPool": _maxpool,
    "AveragePool": _conv,
    "Conv": _conv,
    "ConvTranspose": _conv,
    "Cast": _cast,
    "LayerNormalization": _layernorm,
    "Gelu": _gelu,
    **{
        op: _axes_attr_to_input(18)
        for op in ("ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
    },
    "TopK": _topk,
    "Scatter": _scatter,
    "CastLike": _cast_like,
    "QuantizeLinear": _quantize,
    "DequantizeLinear": _quantize,
    "Mod": _mod,
    "PRelu": _prelu,
    "LSTM": _recurrent,
    "GRU": _recurrent,
    "RNN": _recurrent,
    "Resize": _resize,
    "Upsample": _upsample,
}
