"""Exceptions of the graph engine.

Every error that concerns one node says so in its message (``node 'conv1'
(Conv): ...``) and carries the node name in :attr:`GraphError.node`, so a
caller can point at the offending place in a large model.

Hierarchy::

    AioGeError
      GraphError                      (also ValueError)
        GraphCycleError               the graph is not a DAG
        DanglingValueError            a node reads a value nobody produces
        DuplicateValueError           two producers for one value name
        GraphTypeError                dtypes that do not fit the op
        ShapeInferenceError           shapes that do not fit the op
        DynamicShapeError             a dimension that is still symbolic
        UnknownOpError                an op type the IR does not define
        PlanError                     the planner cannot plan the graph
        LoweringError                 no CANN mapping for a node's attrs
        OnnxImportError               anything wrong with an ONNX model
          UnsupportedOpError          lists every unsupported (op, node)
          MalformedModelError         bytes/protobuf/graph structure broken
          ExternalDataError           escaping path, missing file, bad size
          UnsupportedOpsetError       opset outside 9..21
        TorchFrontendError            anything wrong converting a torch program
          TrainingGraphError          a training graph (grad required, buffers mutated, dropout on)

``TorchFrontendError`` and ``TrainingGraphError`` are defined here, below the runtime (which
raises them for torch feeds), and exported from :mod:`aioge.frontends.errors`, their public home.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import AioGeError

__all__ = (
    "GraphError",
    "GraphCycleError",
    "DanglingValueError",
    "DuplicateValueError",
    "GraphTypeError",
    "ShapeInferenceError",
    "DynamicShapeError",
    "UnknownOpError",
    "PlanError",
    "LoweringError",
    "OnnxImportError",
    "UnsupportedOpError",
    "MalformedModelError",
    "ExternalDataError",
    "UnsupportedOpsetError",
)


class GraphError(AioGeError, ValueError):
    """A graph that is not valid; ``node`` names the offending node if any."""

    def __init__(self, message: str, *, node: str | None = None, op_type: str | None = None) -> None:
        if node is not None:
            where = f"node {node!r}" + (f" ({op_type})" if op_type else "")
            message = f"{where}: {message}"
        super().__init__(message)
        self.node = node
        self.op_type = op_type


class GraphCycleError(GraphError):
    """The nodes do not form a DAG."""


class DanglingValueError(GraphError):
    """A node input or a graph output that no node, input or constant provides."""


class DuplicateValueError(GraphError):
    """A value name defined twice (two producers, or an input that is also produced)."""


class GraphTypeError(GraphError, TypeError):
    """Input dtypes that an op does not accept (e.g. Add of float32 and int64)."""


class ShapeInferenceError(GraphError):
    """Input shapes or attributes that an op does not accept."""


class DynamicShapeError(GraphError):
    """A dimension that is not a static integer (pass ``input_shapes=``)."""


class UnknownOpError(GraphError):
    """An op type that the IR does not define."""


class PlanError(GraphError):
    """The planner needs every value's shape and dtype (run ``infer_shapes``)."""


class LoweringError(GraphError):
    """A node whose attributes have no CANN single-op equivalent."""


class OnnxImportError(GraphError):
    """Base class of ONNX import errors."""


class UnsupportedOpError(OnnxImportError):
    """Ops (or op features) aioge does not implement.

    ``unsupported`` lists every offending ``(op_type, node_name, reason)`` in
    the model, not only the first one.
    """

    def __init__(self, unsupported: Sequence[tuple[str, str, str]]) -> None:
        self.unsupported = list(unsupported)
        lines = [f"  {op!r} at node {name!r}" + (f": {why}" if why else "") for op, name, why in unsupported]
        kinds = sorted({op for op, _, _ in unsupported}, key=str)
        super().__init__(
            f"{len(self.unsupported)} unsupported node(s), op types {kinds}:\n" + "\n".join(lines)
        )

    @property
    def op_types(self) -> list[str]:
        """Sorted distinct unsupported op types."""
        return sorted({op for op, _, _ in self.unsupported})


class MalformedModelError(OnnxImportError):
    """The model bytes, protobuf fields or graph structure are broken."""


class ExternalDataError(OnnxImportError):
    """External tensor data that escapes the model directory, is missing or has the wrong size."""


class UnsupportedOpsetError(OnnxImportError):
    """A default-domain opset outside the supported range."""


class TorchFrontendError(GraphError):
    """A torch module or FX graph that aioge cannot convert (re-exported by :mod:`aioge.frontends.errors`)."""


class TrainingGraphError(TorchFrontendError):
    """aioge runs inference only: no autograd, no buffer updates, no active dropout."""
