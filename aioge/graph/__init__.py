from .ir import Graph, Node, Value
from .onnx_import import load_onnx
from .passes import optimize
