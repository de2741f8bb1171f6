"""aioge.graph — the pure-Python half of the graph engine.

ONNX (or the :class:`Graph` builder) -> IR -> passes -> plan -> lowering::

    g = aioge.graph.load_onnx("model.onnx", input_shapes={"x": (1, 3, 224, 224)})
    g = aioge.graph.optimize(g)              # infer shapes, fold, DCE, CSE, fuse (for target=HOST)
    p = aioge.graph.plan(g, max_streams=2)   # order, streams/events, arena
    ops = aioge.graph.lower(g)               # CANN single ops per node (target=HOST)
    out = aioge.graph.run_reference(g, {"x": x})   # numpy oracle

Modules: :mod:`.ir` (Graph/Value/Node), :mod:`.schema` (op set),
:mod:`.onnx_import`, :mod:`.reference`, :mod:`.passes`, :mod:`.planner`,
:mod:`.lower` (a package, one module per op family), :mod:`.target` (what a
backend runs: :data:`HOST`, :data:`ASCEND`), :mod:`.ewprogram` (fused
elementwise programs), :mod:`.errors`.
"""

from .errors import (
    DanglingValueError,
    DuplicateValueError,
    DynamicShapeError,
    ExternalDataError,
    GraphCycleError,
    GraphError,
    GraphTypeError,
    LoweringError,
    MalformedModelError,
    OnnxImportError,
    PlanError,
    ShapeInferenceError,
    UnknownOpError,
    UnsupportedOpError,
    UnsupportedOpsetError,
)
from .ir import Graph, Node, Value
from .lower import ConstInput, LoweredNode, LoweredOp, lower, lower_node
from .onnx_import import load_onnx
from .passes import optimize
from .planner import Buffer, Plan, Step, plan
from .reference import run_reference
from .target import ASCEND, HOST, Target, target_for

__all__ = (
    "Graph",
    "Value",
    "Node",
    "load_onnx",
    "optimize",
    "plan",
    "Plan",
    "Step",
    "Buffer",
    "lower",
    "lower_node",
    "LoweredOp",
    "LoweredNode",
    "ConstInput",
    "run_reference",
    "Target",
    "HOST",
    "ASCEND",
    "target_for",
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
