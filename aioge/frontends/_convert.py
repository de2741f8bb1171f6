"""FX graph (core ATen, functional) -> aioge IR.

Values flowing through the conversion are either

* :class:`Val` -- a tensor computed at run time, an IR value name;
* a ``torch.Tensor`` -- a constant known at conversion time (parameters,
  buffers, and everything computed from constants and static shapes alone:
  masks from ``arange``, ``full`` tensors, transposed weights ...), folded by
  running the ATen op itself, so no IR op is needed for it;
* plain Python values (ints, floats, lists, ``None``) and tuples of the above.

Shapes come from each FX node's ``meta["val"]``; a symbolic dimension is
evaluated at the pinned sizes the caller gives (see :class:`Pins`).

An op without a handler (or a handler that refuses the node's arguments)
records an entry and poisons its outputs, so one conversion reports every
unsupported op of the program at once (:class:`UnsupportedTorchOpError`).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from ..graph.errors import GraphError
from ..graph.ir import Graph, normalize_dtype
from .errors import TorchFrontendError, UnsupportedTorchOpError

__all__ = ("Val", "Cx", "Unsupported", "convert_fx", "HANDLERS", "handler", "torch_dtype_to_np")


@dataclass(frozen=True)
class Val:
    """A run-time tensor: the IR value ``name``."""

    name: str


class _Poison:
    """Output of a node that could not be converted (already reported)."""


POISON = _Poison()


class Unsupported(Exception):
    """Raised by a handler: this node's op or arguments have no IR mapping (``reason``)."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


Handler = Callable[["Cx", Any, dict[str, Any]], Any]
HANDLERS: dict[str, Handler] = {}


_F = TypeVar("_F", bound=Handler)


def handler(*names: str) -> Callable[[_F], _F]:
    """Register a handler for ATen overloads by name (``"add.Tensor"``)."""

    def deco(fn: _F) -> _F:
        for n in names:
            HANDLERS[n] = fn
        return fn

    return deco


def torch_dtype_to_np(dt: Any) -> np.dtype:
    """numpy dtype of a ``torch.dtype``."""
    import torch

    table = {
        torch.float32: "float32",
        torch.float16: "float16",
        torch.bfloat16: "bfloat16",
        torch.float64: "float64",
        torch.int64: "int64",
        torch.int32: "int32",
        torch.int16: "int16",
        torch.int8: "int8",
        torch.uint8: "uint8",
        torch.bool: "bool",
    }
    name = table.get(dt)
    if name is None:
        raise Unsupported(f"dtype {dt} has no aioge equivalent")
    return normalize_dtype(name)


def np_to_torch_dtype(dt: np.dtype) -> Any:
    import torch

    if dt == normalize_dtype("bfloat16"):
        return torch.bfloat16
    return {
        "float32": torch.float32,
        "float16": torch.float16,
        "float64": torch.float64,
        "int64": torch.int64,
        "int32": torch.int32,
        "int16": torch.int16,
        "int8": torch.int8,
        "uint8": torch.uint8,
        "bool": torch.bool,
    }[str(dt)]


def tensor_to_numpy(t: Any) -> np.ndarray:
    """A host copy-free view (where torch allows) of a constant tensor as numpy."""
    import torch

    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        return np.asarray(t.contiguous().view(torch.int16).numpy().view(normalize_dtype("bfloat16")))
    return np.asarray(t.contiguous().numpy())


class Pins:
    """Concrete values of the symbolic sizes of an exported program."""

    def __init__(self, subs: Mapping[Any, int] | None = None) -> None:
        self.subs: dict[Any, int] = dict(subs or {})

    def int(self, d: Any) -> int:
        """A dimension or SymInt as a Python int at the pinned sizes."""
        if isinstance(d, (int, np.integer)):
            return int(d)
        node = getattr(d, "node", None)
        expr = getattr(node, "expr", None)
        if expr is None:
            return int(d)
        val = expr.xreplace(self.subs) if self.subs else expr
        if isinstance(val, (int, np.integer)):
            return int(val)
        if not getattr(val, "is_number", False):
            missing = sorted(str(s) for s in val.free_symbols)
            raise TorchFrontendError(
                f"symbolic size {expr} is not pinned (symbols {missing}): pass input_shapes= "
                "(aioge graphs are specialised to concrete shapes)"
            )
        return int(val)

    def scalar(self, v: Any) -> Any:
        """A SymInt/SymFloat/SymBool meta value at the pinned sizes (plain values unchanged)."""
        import torch

        if isinstance(v, torch.SymBool):
            expr = v.node.expr.xreplace(self.subs)
            return bool(expr)
        if isinstance(v, torch.SymFloat):
            return float(v.node.expr.xreplace(self.subs))
        if isinstance(v, torch.SymInt):
            return self.int(v)
        return v


def _location(node: Any) -> str:
    """``file:line in fn: code`` of the innermost user frame the FX node recorded."""
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', trace)
    if frames:
        f, line, fn, code = frames[-1]
        loc = f"{f}:{line} in {fn}: {code.strip()}"
    else:
        loc = ""
    stack = node.meta.get("nn_module_stack")
    if stack:
        path, cls = list(stack.values())[-1]
        name = getattr(cls, "__name__", None) or str(cls).rsplit(".", 1)[-1].rstrip("'>")
        mod = f"module {path or '<root>'} ({name})"
        loc = f"{mod}, {loc}" if loc else mod
    return loc


def target_name(target: Any) -> str:
    s = str(target)
    return s[5:] if s.startswith("aten.") else s


class Cx:
    """Conversion state: the graph being built and helpers for handlers."""

    def __init__(self, g: Graph, pins: Pins) -> None:
        self.g = g
        self.pins = pins
        self.info: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
        self._consts: dict[int, tuple[Any, str]] = {}
        self.names: dict[int, str] = {}  # id(tensor) -> a readable constant name (parameter FQNs)
        self._prefix = "v"

    # ---- meta ----
    def meta(self, n: Any) -> Any:
        return n.meta.get("val")

    def out_shape(self, n: Any, i: int | None = None) -> tuple[int, ...]:
        v = self.meta(n)
        if i is not None:
            v = v[i]
        return tuple(self.pins.int(d) for d in v.shape)

    def out_dtype(self, n: Any, i: int | None = None) -> np.dtype:
        v = self.meta(n)
        if i is not None:
            v = v[i]
        return torch_dtype_to_np(v.dtype)

    def shape(self, v: Any) -> tuple[int, ...]:
        if isinstance(v, Val):
            return self.info[v.name][0]
        if hasattr(v, "shape"):
            return tuple(int(d) for d in v.shape)
        return ()

    def dtype(self, v: Any) -> np.dtype:
        if isinstance(v, Val):
            return self.info[v.name][1]
        if hasattr(v, "dtype"):
            return torch_dtype_to_np(v.dtype)
        if isinstance(v, bool):
            return np.dtype("bool")
        if isinstance(v, int):
            return np.dtype("int64")
        return np.dtype("float32")

    # ---- building ----
    def emit(self, op: str, inputs: Sequence[str | None], shape: Sequence[int], dtype: Any,
             **attrs: Any) -> Val:  # fmt: skip
        """One IR node with one output of known shape/dtype."""
        node = self.g.add_node(op, list(inputs), attrs, name=self.g.fresh_name(self._prefix))
        name = node.outputs[0]
        self.info[name] = (tuple(int(d) for d in shape), normalize_dtype(dtype))
        return Val(name)

    def emit_multi(self, op: str, inputs: Sequence[str | None], kinds: Sequence[tuple[Sequence[int], Any]],
                   **attrs: Any) -> list[Val]:  # fmt: skip
        name = self.g.fresh_name(self._prefix)
        node = self.g.add_node(op, list(inputs), attrs, name=name, num_outputs=len(kinds))
        out = []
        for o, (shape, dt) in zip(node.outputs, kinds):
            self.info[o] = (tuple(int(d) for d in shape), normalize_dtype(dt))
            out.append(Val(o))
        return out

    def const(self, value: Any, dtype: Any = None, name: str | None = None) -> str:
        """An IR constant from a tensor / array / Python scalar (cached per tensor object)."""
        import torch

        if isinstance(value, torch.Tensor):
            key = id(value)
            hit = self._consts.get(key)
            want = None if dtype is None else normalize_dtype(dtype)
            if hit is not None and hit[0] is value and want in (None, self.info[hit[1]][1]):
                return hit[1]
            arr = tensor_to_numpy(value)
            if want is not None and arr.dtype != want:
                arr = arr.astype(want)
            v = self.g.constant(arr, name=self._fresh_const(name or self.names.get(key)))
            if want is None or want == torch_dtype_to_np(value.dtype):
                self._consts[key] = (value, v.name)
        else:
            arr = np.asarray(value, dtype=None if dtype is None else normalize_dtype(dtype))
            if dtype is None and arr.dtype == np.float64:
                arr = arr.astype(np.float32)
            v = self.g.constant(arr, name=self._fresh_const(name))
        self.info[v.name] = (tuple(int(d) for d in v.shape or ()), normalize_dtype(v.dtype))
        return v.name

    def _fresh_const(self, name: str | None) -> str:
        if name and name not in self.g.values:
            return name
        return self.g.fresh_name(name or "const")

    def ir(self, v: Any, dtype: Any = None) -> str:
        """The IR name of ``v`` (a Val, a constant tensor or a Python scalar), cast to ``dtype`` if given."""
        if isinstance(v, str):  # an IR name already
            v = Val(v)
        if isinstance(v, Val):
            if dtype is not None and self.info[v.name][1] != normalize_dtype(dtype):
                return self.cast(v, dtype).name
            return v.name
        if v is None:
            raise Unsupported("a None operand")
        if dtype is None and not hasattr(v, "dtype"):
            dtype = self.dtype(v)
        return self.const(v, dtype)

    def cast(self, v: Val, dtype: Any) -> Val:
        dt = normalize_dtype(dtype)
        if self.info[v.name][1] == dt:
            return v
        return self.emit("Cast", [v.name], self.info[v.name][0], dt, to=str(dt))

    def reshape(self, v: Any, shape: Sequence[int]) -> Val:
        shape = tuple(int(d) for d in shape)
        name = self.ir(v)
        if self.info[name][0] == shape:
            return Val(name)
        return self.emit("Reshape", [name, self.const(np.array(shape, np.int64))], shape, self.info[name][1])


def _map(a: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(a, (list, tuple)):
        return type(a)(_map(x, fn) for x in a)
    if isinstance(a, dict):
        return {k: _map(x, fn) for k, x in a.items()}
    return fn(a)


def _flat(a: Any) -> list[Any]:
    if isinstance(a, (list, tuple)):
        return [y for x in a for y in _flat(x)]
    if isinstance(a, dict):
        return [y for x in a.values() for y in _flat(x)]
    return [a]


def bind(target: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments by schema name, defaults filled in."""
    out: dict[str, Any] = {}
    for i, a in enumerate(target._schema.arguments):
        if i < len(args):
            out[a.name] = args[i]
        elif a.name in kwargs:
            out[a.name] = kwargs[a.name]
        elif a.has_default_value():
            out[a.name] = a.default_value
        else:
            out[a.name] = None
    return out


# ops whose results must never be computed at conversion time
_NO_FOLD = re.compile(r"^(rand|randn|randint|randperm|bernoulli|normal|uniform|native_dropout|exponential|"
                      r"multinomial|poisson)")  # fmt: skip
# ops whose output depends only on the input's shape and dtype
_SHAPE_ONLY = {"full_like.default", "zeros_like.default", "ones_like.default", "new_zeros.default",
               "new_ones.default", "new_full.default", "scalar_tensor.default", "empty_like.default"}  # fmt: skip
_IGNORED = {"_assert_tensor_metadata.default", "_assert_scalar.default", "sym_constrain_range_for_size.default",
            "sym_constrain_range.default", "_assert_async.msg", "_assert_async.default"}  # fmt: skip
_TRAINING = {"native_dropout.default": "dropout is active (call module.eval())",
             "_native_batch_norm_legit_functional.default": "batch norm is in training mode (call module.eval())",
             "_native_batch_norm_legit.default": "batch norm is in training mode (call module.eval())"}  # fmt: skip


def convert_fx(
    gm: Any,
    inputs: Mapping[str, tuple[str, tuple[int, ...], np.dtype]],
    constants: Mapping[str, Any],
    output_names: Sequence[str],
    *,
    name: str = "torch",
    pins: Pins | None = None,
    constant_names: Mapping[str, Any] | None = None,
) -> Graph:
    """Convert a functional core-ATen FX graph.

    Args:
        gm: the ``torch.fx.GraphModule`` (or ``Graph``).
        inputs: placeholder name -> (graph input name, shape, dtype), for run-time inputs.
        constants: placeholder name -> tensor (parameters, buffers, lifted constants).
        output_names: one name per flattened output.
        pins: values of symbolic sizes.
        constant_names: readable name -> tensor (parameter and buffer FQNs) for the IR constants.
    """
    import torch

    graph = getattr(gm, "graph", gm)
    g = Graph(name)
    cx = Cx(g, pins or Pins())
    cx.names = {id(t): n for n, t in (constant_names or {}).items()}
    env: dict[Any, Any] = {}
    problems: list[tuple[str, str, str, str]] = []
    for in_name, shape, dt in inputs.values():
        g.input(in_name, shape, dt)
        cx.info[in_name] = (tuple(shape), normalize_dtype(dt))
    out_args: list[Any] = []
    with torch.no_grad():
        for n in graph.nodes:
            if n.op == "placeholder":
                if n.name in inputs:
                    env[n] = Val(inputs[n.name][0])
                elif n.name in constants:
                    env[n] = constants[n.name]
                else:
                    env[n] = None  # tokens, custom objects: unused by core ATen ops
                continue
            if n.op == "output":
                out_args = _flat(n.args[0])
                continue
            if n.op == "get_attr":
                env[n] = getattr(gm, str(n.target))
                continue
            if n.op != "call_function":
                problems.append((str(n.op), n.name, "only call_function nodes are supported", _location(n)))
                env[n] = POISON
                continue
            args = _map(n.args, lambda a: env[a] if isinstance(a, torch.fx.Node) else a)
            kwargs = _map(dict(n.kwargs), lambda a: env[a] if isinstance(a, torch.fx.Node) else a)
            flat = _flat(args) + _flat(kwargs)
            if any(x is POISON for x in flat):
                env[n] = POISON
                continue
            cx._prefix = n.name
            try:
                env[n] = _convert_node(cx, n, args, kwargs, flat)
            except Unsupported as e:
                problems.append((target_name(n.target), n.name, e.reason, _location(n)))
                env[n] = POISON
            except GraphError:
                raise
            except Exception as e:  # a torch error folding constants, or a converter bug: say where
                raise TorchFrontendError(
                    f"FX node {n.name!r} ({target_name(n.target)}): {type(e).__name__}: {e}"
                    + (f"\n  at {_location(n)}" if _location(n) else "")
                ) from e
    if problems:
        raise UnsupportedTorchOpError(problems)
    _set_outputs(cx, [env[a] if isinstance(a, torch.fx.Node) else a for a in out_args], output_names)
    g.validate()
    return g


def _convert_node(cx: Cx, n: Any, args: Any, kwargs: dict[str, Any], flat: list[Any]) -> Any:
    import torch

    target = n.target
    meta = cx.meta(n)
    # a static scalar (sym_size, sym arithmetic): its value is in the metadata
    if isinstance(meta, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
        expr = getattr(getattr(meta, "node", None), "expr", None)
        if expr is not None and any(str(sym).startswith("u") for sym in getattr(expr, "free_symbols", ())):
            raise Unsupported("a data-dependent scalar (Tensor.item(), nonzero sizes): aioge graphs are static")
        return cx.pins.scalar(meta)
    if target is operator.getitem:
        seq, i = args
        return seq[i]
    if not isinstance(target, torch._ops.OpOverload):
        if any(isinstance(x, Val) for x in flat):
            raise Unsupported(f"Python function {target!r} on run-time tensors")
        return target(*args, **kwargs)
    key = target_name(target)
    if key in _IGNORED:
        return None
    if key in _TRAINING:
        from .errors import TrainingGraphError

        if key != "native_dropout.default" or bind(target, args, kwargs).get("train"):
            raise TrainingGraphError(f"FX node {n.name!r} ({key}): {_TRAINING[key]}; aioge runs inference only")
        return (args[0], None)
    runtime = any(isinstance(x, Val) for x in flat)
    if not runtime and not _NO_FOLD.match(key):
        return target(*args, **kwargs)  # constant folding by ATen itself
    if key in _SHAPE_ONLY:
        sub = _map(args, lambda a: torch.zeros(cx.shape(a), dtype=np_to_torch_dtype(cx.dtype(a)))
                   if isinstance(a, Val) else a)  # fmt: skip
        return target(*sub, **kwargs)
    h = HANDLERS.get(key)
    if h is None:
        raise Unsupported("" if runtime else "non-deterministic op")
    p = bind(target, args, kwargs)
    return h(cx, n, p)


def _set_outputs(cx: Cx, vals: list[Any], names: Sequence[str]) -> None:
    import torch

    g = cx.g
    if len(vals) != len(names):
        raise TorchFrontendError(f"{len(vals)} outputs but {len(names)} output names")
    producers = g.producers()
    taken: set[str] = set()
    for v, want in zip(vals, names):
        if v is None:
            continue
        if isinstance(v, Val):
            name = v.name
        elif isinstance(v, torch.Tensor):
            name = cx.const(v)
        else:
            name = cx.const(np.asarray(v))
        node = producers.get(name)
        if node is not None and name not in taken and name not in g.inputs and want not in g.values:
            # rename the producer's output to the user-facing name
            i = node.outputs.index(name)
            node.outputs[i] = want
            g.values[want] = g.values.pop(name)
            g.values[want].name = want
            g.rename_uses({name: want})
            cx.info[want] = cx.info[name]
            producers[want] = node
            name = want
        elif name != want:
            if want in g.values:
                want = g.fresh_name(want)
            g.add_node("Identity", [name], name=g.fresh_name("output"), outputs=[want])
            cx.info[want] = cx.info[name]
            name = want
        g.output(name)
        taken.add(name)
        shape, dt = cx.info[name]
        g.values[name].shape, g.values[name].dtype = shape, dt


def numel(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)
