"""The graph IR: values, nodes, constants, a builder and validation.

A :class:`Graph` is a set of :class:`Node` objects connected by value *names*.
Every name that appears anywhere has a :class:`Value` entry in
``graph.values`` with a static ``shape`` (a tuple of ints) and a numpy
``dtype``; for intermediate values both may be ``None`` until
:func:`aioge.graph.passes.infer_shapes` fills them in.  Constants
(initializers) are numpy arrays in ``graph.constants``; graph inputs and
outputs are ordered lists of names.

Op semantics are ONNX's, in one canonical form independent of the opset the
model came from (see :mod:`aioge.graph.schema`): e.g. ``Squeeze`` axes,
``Split`` sizes, ``Clip`` bounds, ``Pad`` pads and ``Slice`` starts are
always *inputs*, as in the newest opsets.  Op types starting with ``_`` are
aioge's fused host ops (``_FusedConv``, ``_FusedMatMul``,
``_FusedElementwise``; see :mod:`aioge.graph.passes.fuse`).

The builder
-----------
Every builder call names first: ``g.input(name, shape, dtype)``,
``g.constant(name, array)`` (``g.constant(array)`` picks a fresh name; the
older ``g.constant(array, name)`` order still works and warns),
``g.add_node(op_type, inputs, attrs, name=...)`` and ``g.output(*values)``.

Chaining: ``input``/``constant`` return a :class:`Value` and ``add_node``
returns the :class:`Node`; either can be passed wherever a value is expected
(a value name as a str works too).  A Node stands for its *single* output; for
a node with several outputs pick one with ``node.outputs[i]`` (or
``node.out(i)``), e.g. ``q, k, v = (split.out(i) for i in range(3))``.  Inputs
may be ``None`` for an absent optional input.  Shapes and dtypes of node
outputs are left to :func:`aioge.graph.passes.infer_shapes`
(``optimize``/``dev.compile`` run it); :meth:`Graph.validate` checks
structure, dtypes and -- when every input has a static shape -- shapes, naming
the offending node.

Dynamic shapes
--------------
A graph input may have *symbolic* dims: ``g.input("x", ("batch", 16))`` (a str
names a dim, ``None`` is an anonymous one).  Its Value has ``shape=None``
and the dims live in ``graph.symbolic``; ``graph.is_dynamic`` is then true.
``graph.specialize({"x": (4, 16)})`` returns the static graph for one
concrete shape (a dim name binds one size across every input);
``dev.compile`` of a dynamic graph returns an
:class:`aioge.DynamicCompiledGraph`, which specialises and compiles per
concrete input shape on first use.

Example -- a two-layer MLP with a residual and a softmax head::

    >>> g = Graph("mlp")
    >>> x = g.input("x", (8, 16), "float32")
    >>> w1 = g.constant("w1", np.ones((16, 16), np.float32))
    >>> h = g.add_node("Relu", [g.add_node("MatMul", [x, w1])])      # chained: a Node is its output
    >>> y = g.add_node("Add", [h, x], name="residual")
    >>> parts = g.add_node("Split", [y, g.constant("sizes", np.array([8, 8]))], {"axis": 1}, num_outputs=2)
    >>> g.output(g.add_node("Softmax", [parts.out(0)], {"axis": -1}), parts.out(1))
    >>> g.validate()
    >>> print(g)            # a readable listing
"""

from __future__ import annotations

import copy as _copy
import heapq
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from .. import dtypes as _dtypes
from .errors import (
    DanglingValueError,
    DuplicateValueError,
    DynamicShapeError,
    GraphCycleError,
    GraphError,
)
from .schema import check_node_dtypes, check_node_signature

__all__ = ("Value", "Node", "Graph", "ValueLike", "Dim", "normalize_dtype", "normalize_shape")

#: a dimension of a graph input: a size, a symbol name, or None (an anonymous symbolic dim)
Dim = int | str | None

#: shape inference, which ``Graph.validate(shapes=True)`` runs on a copy.  The pass sits above
#: the IR (it builds on it) and registers itself here when it is loaded -- importing
#: ``aioge.graph`` loads it -- so that the IR never imports upward.
_shape_inference: Callable[[Graph], object] | None = None


def register_shape_inference(fn: Callable[[Graph], object]) -> None:
    """Called once by :mod:`aioge.graph.passes.infer_shapes`."""
    global _shape_inference
    _shape_inference = fn


def normalize_dtype(dtype: Any) -> np.dtype:
    """numpy dtype of a dtype-like (``"float32"``, ``np.float32``, ``"bfloat16"`` ...):
    :func:`aioge.dtypes.as_numpy`, raising :class:`GraphError`."""
    if isinstance(dtype, np.dtype):  # its own normal form (np.dtype(dtype) is dtype)
        return dtype
    try:
        return _dtypes.as_numpy(dtype)
    except TypeError as e:
        raise GraphError(str(e)) from e


_INT = {int}


def normalize_shape(shape: Iterable[Any], *, what: str = "value") -> tuple[int, ...]:
    """A static shape as a tuple of non-negative Python ints.

    Raises:
        DynamicShapeError: for a symbolic (str/None) or negative dimension.
    """
    out = []
    for d in shape:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) or int(d) < 0:
            raise DynamicShapeError(
                f"{what} has a non-static dimension {d!r} in shape {tuple(shape)!r}; "
                "values have static shapes (only a graph input's dims may be symbolic: a str dim name)"
            )
        out.append(int(d))
    return tuple(out)


@dataclass
class Value:
    """A named tensor: ``shape`` and ``dtype`` are ``None`` until inferred."""

    name: str
    shape: tuple[int, ...] | None = None
    dtype: np.dtype | None = None

    @property
    def known(self) -> bool:
        """Whether both shape and dtype are known."""
        return self.shape is not None and self.dtype is not None

    @property
    def size(self) -> int:
        """Number of elements."""
        if self.shape is None:
            raise GraphError(f"value {self.name!r} has no inferred shape")
        return math.prod(self.shape)  # Python ints: exact (shapes hold Python ints, see normalize_shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the dense tensor."""
        if self.dtype is None:
            raise GraphError(f"value {self.name!r} has no inferred dtype")
        return self.size * self.dtype.itemsize

    def __str__(self) -> str:
        shape = "?" if self.shape is None else "x".join(map(str, self.shape)) or "scalar"
        dtype = "?" if self.dtype is None else str(self.dtype)
        return f"%{self.name}: {dtype}[{shape}]"


@dataclass
class Node:
    """One operation.

    ``inputs`` and ``outputs`` are value names; ``""`` marks an absent
    optional input (or an unused optional output).  ``attrs`` holds plain
    Python values (int, float, str, lists of them) and numpy arrays.
    """

    op_type: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    domain: str = ""

    def out(self, i: int = 0) -> str:
        """The name of output ``i`` (for chaining a node with several outputs)."""
        if not 0 <= i < len(self.outputs) or not self.outputs[i]:
            raise GraphError(f"has no output {i}", node=self.name, op_type=self.op_type)
        return self.outputs[i]

    @property
    def output(self) -> str:
        """The single output name (error if the node has several)."""
        real = [o for o in self.outputs if o]
        if len(real) != 1:
            raise GraphError(f"has {len(real)} outputs, expected 1", node=self.name, op_type=self.op_type)
        return real[0]

    def input(self, i: int) -> str:
        """Input ``i`` or ``""`` if absent."""
        return self.inputs[i] if i < len(self.inputs) else ""

    def copy(self) -> Node:
        """A copy with its own lists and attr dict (arrays shared: treat them as immutable)."""
        return Node(
            self.op_type, list(self.inputs), list(self.outputs), dict(self.attrs), self.name, self.domain
        )

    def __str__(self) -> str:
        return self.format()

    def format(self, values: Mapping[str, Value] | None = None) -> str:
        """One line: ``%y: float32[2x3] = Op(%a, %b; attr=...)  # name``."""

        def out(o: str) -> str:
            if not o:
                return "_"
            v = values.get(o) if values else None
            return str(v) if v is not None and v.known else f"%{o}"

        outs = ", ".join(out(o) for o in self.outputs)
        ins = ", ".join(f"%{i}" if i else "_" for i in self.inputs)
        attrs = ", ".join(f"{k}={_fmt_attr(v)}" for k, v in sorted(self.attrs.items()))
        dom = f"{self.domain}." if self.domain else ""
        return f"{outs} = {dom}{self.op_type}({ins}{'; ' + attrs if attrs else ''})  # {self.name}"


def _fmt_dims(dims: Sequence[Dim]) -> str:
    return "x".join("?" if d is None else str(d) for d in dims) or "scalar"


def _fmt_attr(v: Any) -> str:
    if isinstance(v, np.ndarray):
        if v.size <= 8:
            return f"array({v.tolist()!r}, {v.dtype})"
        return f"array(<{v.dtype}{list(v.shape)}>)"
    if isinstance(v, float):
        return f"{v:g}"
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


ValueLike = str | Value | Node


class Graph:
    """A dataflow graph of static-shape values; graph inputs may have symbolic dims (see the module docstring)."""

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self.values: dict[str, Value] = {}
        self.nodes: list[Node] = []
        self.constants: dict[str, np.ndarray] = {}
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self._counter = 0
        # node-name index, rebuilt when `nodes` changed behind our back (passes edit the list)
        self._names: set[str] = set()
        self._names_key: tuple[int, int] = (0, -1)
        self._issued: set[str] = set()
        #: symbolic dims of the graph inputs that have any (their Values have ``shape=None``)
        self.symbolic: dict[str, tuple[Dim, ...]] = {}
        #: a working graph of ``optimize`` (never one it returns): its passes edit it in place
        #: instead of copying it (``passes._util.working_copy``); a copy is never one
        self._scratch = False

    # ---------------------------------------------------------------- builder
    def input(self, name: str, shape: Sequence[Dim], dtype: Any = "float32") -> Value:
        """Declare a graph input; a str (a dim name) or None in ``shape`` makes a dim symbolic."""
        self._check_new_value(name)
        dims = tuple(shape)
        if not (set(map(type, dims)) - _INT) and (not dims or min(cast("tuple[int, ...]", dims)) >= 0):
            # the usual input: static dims as Python ints, which normalize_shape would return as they are
            v = Value(name, cast("tuple[int, ...]", dims), normalize_dtype(dtype))
        elif any(d is None or isinstance(d, str) for d in dims):
            bad = [d for d in dims if isinstance(d, str) and not d]
            static = [d for d in dims if d is not None and not isinstance(d, str)]
            if bad:
                raise DynamicShapeError(f"input {name!r}: an empty dim name in shape {dims!r}")
            normalize_shape(static, what=f"input {name!r}")
            v = Value(name, None, normalize_dtype(dtype))
            self.symbolic[name] = tuple(d if d is None or isinstance(d, str) else int(d) for d in dims)
        else:
            v = Value(name, normalize_shape(dims, what=f"input {name!r}"), normalize_dtype(dtype))
        self.values[name] = v
        self.inputs.append(name)
        return v

    @property
    def is_dynamic(self) -> bool:
        """Whether some graph input has symbolic dims (see :meth:`specialize`)."""
        return any(n in self.symbolic for n in self.inputs)

    def input_dims(self, name: str) -> tuple[Dim, ...]:
        """A graph input's dims: its static shape, or its symbolic dims."""
        if name in self.symbolic:
            return self.symbolic[name]
        shape = self.values[name].shape
        if shape is None:
            raise DynamicShapeError(f"graph input {name!r} has no shape")
        return shape

    def bind_dims(self, shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
        """Check concrete input shapes against the declared dims; the size of each dim name.

        Raises:
            ShapeInferenceError: an unknown input, a missing symbolic input, a
                rank or static dim that differs, or one dim name given two sizes.
        """
        from .errors import ShapeInferenceError

        unknown = [n for n in shapes if n not in self.inputs]
        if unknown:
            raise ShapeInferenceError(f"{unknown} are not inputs of graph {self.name!r}; its inputs are {self.inputs}")
        missing = [n for n in self.inputs if n in self.symbolic and n not in shapes]
        if missing:
            raise ShapeInferenceError(f"graph {self.name!r}: no concrete shape for the symbolic inputs {missing}")
        sizes: dict[str, int] = {}
        for name, given in shapes.items():
            dims = self.input_dims(name)
            want = normalize_shape(given, what=f"input {name!r}")
            if len(want) != len(dims):
                raise ShapeInferenceError(f"input {name!r} has shape {want}; the graph takes {_fmt_dims(dims)}")
            for d, w in zip(dims, want, strict=True):
                if isinstance(d, str):
                    if sizes.setdefault(d, w) != w:
                        raise ShapeInferenceError(
                            f"input {name!r} has shape {want}: dim {d!r} is {w} here but {sizes[d]} in another input"
                        )
                elif d is not None and d != w:
                    raise ShapeInferenceError(f"input {name!r} has shape {want}; the graph takes {_fmt_dims(dims)}")
        return sizes

    def specialize(self, shapes: Mapping[str, Sequence[int]]) -> Graph:
        """A static copy of a dynamic graph for concrete input shapes (checked by :meth:`bind_dims`).

        Shapes inside are left to ``infer_shapes`` (``optimize``/``dev.compile`` run it).
        """
        self.bind_dims(shapes)
        g = self.copy()
        for name in list(g.symbolic):
            g.values[name].shape = normalize_shape(shapes[name])
        g.symbolic = {}
        return g

    def constant(self, first: Any = None, array: Any = None, *, name: str | None = None) -> Value:
        """Add a constant (initializer) holding a read-only copy of an array.

        ``constant(name, array)``; ``constant(array)`` or ``constant(array, name=...)``
        (the keyword form of the older order) also work, a fresh name is picked
        when none is given.  The older positional order ``constant(array, name)``
        still works but warns (:class:`DeprecationWarning`).
        """
        if isinstance(first, str):
            if name is not None:
                raise GraphError(f"constant {first!r} named twice (name={name!r})")
            name = first
        elif first is not None:
            if isinstance(array, str):  # constant(array, name): the older order
                warnings.warn(
                    "Graph.constant(array, name) is deprecated: use Graph.constant(name, array)",
                    DeprecationWarning,
                    stacklevel=2,
                )
                name, array = array, first
            elif array is None:
                array = first
            else:
                raise GraphError(f"constant name must be a str, not {type(first).__name__}")
        if array is None:
            raise GraphError("constant needs an array")
        arr = np.array(array, copy=True)
        arr.setflags(write=False)
        name = name or self.fresh_name("const")
        self._check_new_value(name)
        self.constants[name] = arr
        v = Value(name, arr.shape, arr.dtype)
        self.values[name] = v
        return v

    def add_node(
        self,
        op_type: str,
        inputs: Sequence[ValueLike | None],
        attrs: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        outputs: Sequence[str] | None = None,
        num_outputs: int = 1,
        domain: str = "",
    ) -> Node:
        """Append a node and create Values for its outputs.

        ``inputs`` may be names, :class:`Value`, single-output :class:`Node`
        objects, or ``None``/``""`` for an absent optional input.  Output
        names default to ``<node name>`` (one output) or ``<node name>:<i>``.
        """
        name = name or self.fresh_name(op_type)
        names = self._node_names()
        if name in names:
            raise DuplicateValueError(f"node name {name!r} already used", node=name, op_type=op_type)
        in_names = [i if type(i) is str else self._name_of(i) for i in inputs]
        if outputs is None:
            if num_outputs == 1:
                outputs = [name if name not in self.values else self.fresh_name(name)]
            else:
                outputs = [f"{name}:{i}" for i in range(num_outputs)]
        for o in outputs:
            if o:
                self._check_new_value(o, node=name)
        node = Node(op_type, in_names, list(outputs), dict(attrs or {}), name, domain)
        for o in node.outputs:
            if o:
                self.values[o] = Value(o)
        nodes = self.nodes
        nodes.append(node)
        names.add(name)
        self._names_key = (id(nodes), len(nodes))
        return node

    def output(self, *values: ValueLike) -> None:
        """Mark values (or all outputs of a node) as graph outputs, in order."""
        for v in values:
            names = [o for o in v.outputs if o] if isinstance(v, Node) else [self._name_of(v)]
            for n in names:
                if n not in self.values:
                    raise DanglingValueError(f"graph output {n!r} is not defined")
                self.outputs.append(n)

    def _name_of(self, v: ValueLike | None) -> str:
        if v is None:
            return ""
        if isinstance(v, Value):
            return v.name
        if isinstance(v, Node):
            return v.output
        return v

    def _check_new_value(self, name: str, node: str | None = None) -> None:
        if not name:
            raise GraphError("empty value name", node=node)
        if name in self.values:
            raise DuplicateValueError(f"value {name!r} is already defined", node=node)

    def _node_names(self) -> set[str]:
        key = (id(self.nodes), len(self.nodes))
        if key != self._names_key:
            self._names = {n.name for n in self.nodes}
            self._names_key = key
        return self._names

    def has_node(self, name: str) -> bool:
        """Whether a node is called ``name``."""
        return name in self._node_names()

    def fresh_name(self, prefix: str) -> str:
        """A value/node name not used yet in this graph (names handed out are never repeated)."""
        names = self._node_names()
        while True:
            self._counter += 1
            cand = f"{prefix}_{self._counter}"
            if cand not in self.values and cand not in names and cand not in self._issued:
                self._issued.add(cand)
                return cand

    # ---------------------------------------------------------------- queries
    def value(self, name: str) -> Value:
        """The Value for ``name`` (KeyError-free: raises DanglingValueError)."""
        try:
            return self.values[name]
        except KeyError:
            raise DanglingValueError(f"value {name!r} is not defined") from None

    def node(self, name: str) -> Node:
        """The node called ``name``."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise GraphError(f"no node named {name!r}")

    def producers(self) -> dict[str, Node]:
        """Map value name -> the node producing it."""
        return {o: n for n in self.nodes for o in n.outputs if o}

    def consumers(self) -> dict[str, list[Node]]:
        """Map value name -> nodes reading it (a node appears once per value)."""
        out: dict[str, list[Node]] = {}
        get = out.get
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    readers = get(i)
                    if readers is None:
                        out[i] = [n]
                    elif readers[-1] is not n:  # each value once per node: n, if there, was appended last
                        readers.append(n)
        return out

    def is_constant(self, name: str) -> bool:
        """Whether ``name`` is a constant."""
        return name in self.constants

    def topological_order(self) -> list[Node]:
        """Nodes in a deterministic topological order (ties keep list order).

        Raises:
            GraphCycleError: naming a node on a cycle.
        """
        prod = {o: i for i, n in enumerate(self.nodes) for o in n.outputs if o}
        # the list is usually sorted already (imports, and every pass's output): each node then reads
        # only values produced before it, and the heap below would return the list as it is
        if self._reads_only_earlier(prod):
            return list(self.nodes)
        indeg = [0] * len(self.nodes)
        succ: list[list[int]] = [[] for _ in self.nodes]
        for i, n in enumerate(self.nodes):
            deps = {prod[x] for x in n.inputs if x in prod}
            indeg[i] = len(deps)
            for d in deps:
                succ[d].append(i)
        ready = [i for i, d in enumerate(indeg) if d == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for s in succ[i]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(ready, s)
        if len(order) != len(self.nodes):
            left = [i for i, d in enumerate(indeg) if d > 0]
            cycle = self._find_cycle(left, prod)
            names = " -> ".join(self.nodes[i].name for i in cycle)
            first = self.nodes[cycle[0]]
            raise GraphCycleError(f"is on a cycle: {names}", node=first.name, op_type=first.op_type)
        return [self.nodes[i] for i in order]

    def _reads_only_earlier(self, prod: dict[str, int]) -> bool:
        """Whether each node reads only values produced by nodes before it (or by none)."""
        get = prod.get
        for i, n in enumerate(self.nodes):
            for x in n.inputs:
                if get(x, -1) >= i:
                    return False
        return True

    def _find_cycle(self, left: list[int], prod: dict[str, int]) -> list[int]:
        left_set = set(left)
        # walk predecessors inside the blocked set until a node repeats
        cur, seen, path = left[0], {}, []  # type: ignore[var-annotated]
        while cur not in seen:
            seen[cur] = len(path)
            path.append(cur)
            cur = next(prod[x] for x in self.nodes[cur].inputs if x in prod and prod[x] in left_set)
        cyc = path[seen[cur] :]
        cyc.reverse()
        return [*cyc, cyc[0]]

    # ------------------------------------------------------------- validation
    def validate(self, *, shapes: bool = True) -> None:
        """Check structure, dtypes and shapes; raise a :class:`GraphError` subclass naming the node.

        Checks: unique definitions, no dangling inputs/outputs, known op types
        with valid input/output counts and attrs, no cycles, dtype consistency
        wherever dtypes are known, and -- with ``shapes`` and every graph input
        static -- the shapes each op accepts (a 2x2 @ 3x3 MatMul), as
        ``dev.compile`` would find them (shape inference on a copy).
        """
        self._validate_structure()
        order = self.topological_order()
        dtypes = {k: v.dtype for k, v in self.values.items() if v.dtype is not None}
        for n in order:
            outs = check_node_dtypes(n, [dtypes.get(i) if i else None for i in n.inputs])
            for o, dt in zip(n.outputs, outs, strict=False):
                if not o:
                    continue
                known = self.values[o].dtype
                if dt is not None and known is not None and dt != known:
                    from .errors import GraphTypeError

                    raise GraphTypeError(
                        f"output {o!r} is declared {known} but the op produces {dt}",
                        node=n.name,
                        op_type=n.op_type,
                    )
                if dt is not None:
                    dtypes[o] = dt
        if shapes and all(self.values[i].known for i in self.inputs):
            if _shape_inference is None:  # only if aioge.graph.ir were loaded without aioge.graph
                raise RuntimeError("shape inference is not loaded: import aioge.graph")
            _shape_inference(self)  # raises naming the node; the result (a copy) is not needed

    def _validate_structure(self, *, signatures: bool = True) -> None:
        """``validate``'s structural checks: unique definitions, nothing dangling, a Value for each
        name; ``signatures``: each node's op type, arity and attrs too (``check_node_signature``).
        ``optimize`` runs just these on the graph ``infer_shapes`` returned, which checked the rest."""
        defined: dict[str, str | Node] = {}  # value -> "input", "constant" or its node
        for name in self.inputs:
            if name in defined:
                raise DuplicateValueError(f"graph input {name!r} declared twice")
            defined[name] = "input"
        for name in self.constants:
            if name in defined:
                raise DuplicateValueError(f"{name!r} is both a graph input and a constant")
            defined[name] = "constant"
        node_names: set[str] = set()
        for n in self.nodes:
            if n.name in node_names:
                raise DuplicateValueError("node name used twice", node=n.name, op_type=n.op_type)
            node_names.add(n.name)
            for o in n.outputs:
                if not o:
                    continue
                if o in defined:
                    d = defined[o]
                    by = d if isinstance(d, str) else f"node {d.name!r}"
                    raise DuplicateValueError(
                        f"output {o!r} is already defined (by {by})", node=n.name, op_type=n.op_type
                    )
                defined[o] = n  # described only in an error
        for n in self.nodes:
            for i in n.inputs:
                if i and i not in defined:
                    raise DanglingValueError(
                        f"input {i!r} is not produced by any node, graph input or constant",
                        node=n.name,
                        op_type=n.op_type,
                    )
            if signatures:
                check_node_signature(n)
        for o in self.outputs:
            if o not in defined:
                raise DanglingValueError(f"graph output {o!r} is not produced by any node, input or constant")
        for name in defined:
            if name not in self.values:
                raise GraphError(f"value {name!r} has no Value entry in graph.values")

    # ---------------------------------------------------------------- editing
    def copy(self) -> Graph:
        """A structural copy: new nodes/values/lists; constant arrays are shared (read-only)."""
        g = Graph(self.name)
        g.values = {k: Value(v.name, v.shape, v.dtype) for k, v in self.values.items()}
        g.nodes = [n.copy() for n in self.nodes]
        g.constants = dict(self.constants)
        g.inputs = list(self.inputs)
        g.outputs = list(self.outputs)
        g._counter = self._counter
        g._issued = set(self._issued)
        g.symbolic = dict(self.symbolic)
        return g

    def replace_uses(self, old: str, new: str) -> None:
        """Make every consumer (and graph output slot) of ``old`` read ``new``."""
        self.rename_uses({old: new})

    def rename_uses(self, mapping: Mapping[str, str]) -> None:
        """``replace_uses`` for many values in one sweep."""
        if not mapping:
            return
        for n in self.nodes:
            if any(i in mapping for i in n.inputs):
                n.inputs = [mapping.get(i, i) for i in n.inputs]
        self.outputs = [mapping.get(o, o) for o in self.outputs]

    def remove_nodes(self, nodes: Iterable[Node]) -> None:
        """Remove nodes (by identity) and the Values of their outputs no one else defines."""
        drop = {id(n) for n in nodes}
        gone = [n for n in self.nodes if id(n) in drop]
        self.nodes = [n for n in self.nodes if id(n) not in drop]
        still = set(self.inputs)
        still.update(self.constants)
        for n in self.nodes:
            still.update(n.outputs)
        for n in gone:
            for o in n.outputs:
                if o and o not in still:
                    self.values.pop(o, None)

    def set_constant(self, name: str, array: np.ndarray) -> None:
        """Define ``name`` as a constant (its Value gets the array's shape/dtype)."""
        arr = np.asarray(array)
        if arr.flags.writeable:
            arr = arr.copy()
            arr.setflags(write=False)
        self.constants[name] = arr
        self.values[name] = Value(name, arr.shape, arr.dtype)  # an ndarray's shape: a tuple of Python ints

    def prune_values(self) -> None:
        """Drop Values and constants no node, input or output refers to."""
        nodes = self.nodes
        used = {x for n in nodes for x in n.inputs}  # comprehensions: no method call per node
        used.update([x for n in nodes for x in n.outputs])
        used.update(self.inputs)
        used.update(self.outputs)
        used.discard("")  # an absent optional input / unused output: never a value's name
        for k in [k for k in self.constants if k not in used]:
            del self.constants[k]
        for k in [k for k in self.values if k not in used]:
            del self.values[k]

    def sort(self) -> None:
        """Reorder ``nodes`` topologically (deterministic)."""
        self.nodes = self.topological_order()

    # --------------------------------------------------------------- printing
    def __str__(self) -> str:
        lines = [f"graph {self.name} ("]
        for i in self.inputs:
            v = self.values[i]
            shown = f"%{i}: {v.dtype}[{_fmt_dims(self.symbolic[i])}]" if i in self.symbolic else str(v)
            lines.append(f"  input  {shown}")
        lines.append(") {")
        for k, arr in self.constants.items():
            v = self.values.get(k) or Value(k, arr.shape, arr.dtype)
            preview = f" = {arr.tolist()!r}" if arr.size <= 6 else ""
            lines.append(f"  const  {v}{preview}")
        try:
            order = self.topological_order()
        except GraphCycleError:
            order = self.nodes
        for n in order:
            lines.append(f"  {n.format(self.values)}")
        lines.append("} -> (" + ", ".join(f"%{o}" for o in self.outputs) + ")")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<Graph {self.name!r}: {len(self.inputs)} inputs, {len(self.nodes)} nodes, "
            f"{len(self.constants)} constants, {len(self.outputs)} outputs>"
        )

    def op_counts(self) -> dict[str, int]:
        """Number of nodes per op type (handy in tests and reports)."""
        out: dict[str, int] = {}
        for n in self.nodes:
            out[n.op_type] = out.get(n.op_type, 0) + 1
        return out

    def __deepcopy__(self, memo: dict[int, Any]) -> Graph:
        g = self.copy()
        g.constants = {k: _copy.deepcopy(v, memo) for k, v in self.constants.items()}
        return g
