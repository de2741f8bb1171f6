"""``torch.compile(module, backend="aioge")``: a Dynamo backend on the host runtime.

Registered through the ``torch_dynamo_backends`` entry point (``aioge``).
Each graph Dynamo captures (graph breaks give several, the Python between
them runs eagerly) is lowered to functional core ATen with ``make_fx``
(functionalized, core-ATen decompositions), converted by the same converter
as :func:`aioge.from_torch`, compiled once per input signature (shapes and
dtypes: aioge graphs are static) and run on a process-wide device
(:mod:`._host`).  Parameters and buffers are captured as constants when a
signature is compiled: after changing weights in place, call
``torch._dynamo.reset()``.

Inference only: a call with grad enabled on tensors that require it is
refused (:class:`TrainingGraphError`) -- use ``torch.no_grad()`` or
``torch.inference_mode()``.  ``options={"fallback": True}`` runs a captured
graph eagerly (with a warning naming the ops) instead of failing when it
holds ATen ops aioge cannot convert.
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from .._tensors import from_numpy, to_numpy
from ._convert import convert_fx, torch_dtype_to_np
from ._host import close_runtime, runtime
from .errors import TorchFrontendError, TrainingGraphError, UnsupportedTorchOpError

__all__ = ("aioge_backend", "close_runtime", "MAX_SIGNATURES")

MAX_SIGNATURES = 16  # compiled shapes kept per captured graph (least recently used dropped)


def aioge_backend(gm: Any, example_inputs: Sequence[Any], *, options: dict[str, Any] | None = None) -> Any:
    """The Dynamo backend: returns a callable running ``gm`` on aioge."""
    import torch

    opts = dict(options or {})
    fallback = bool(opts.pop("fallback", False))
    compile_options = opts.pop("compile", {})
    if opts:
        raise TorchFrontendError(f"unknown aioge backend options {sorted(opts)} (known: fallback, compile)")
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs):
        raise TrainingGraphError(
            "torch.compile(backend='aioge') runs inference only, and this graph needs autograd "
            "(inputs or parameters require grad): call it under torch.no_grad() or torch.inference_mode()"
        )
    return _Compiled(gm, list(example_inputs), fallback, dict(compile_options))


def _decompositions() -> dict[Any, Any]:
    """Core ATen decompositions, except for ops the converter maps better whole (upsampling, group norm...)."""
    from torch._decomp import core_aten_decompositions

    from ._aten import KEEP_WHOLE
    from ._convert import target_name

    return {op: fn for op, fn in core_aten_decompositions().items()  # type: ignore[no-untyped-call]
            if target_name(op) not in KEEP_WHOLE}


def _is_weight(node: Any, value: Any) -> bool:
    import torch

    if isinstance(value, torch.nn.Parameter):
        return True
    ga = node.meta.get("grapharg")
    source = getattr(getattr(ga, "source", None), "name", None)
    name = source() if callable(source) else str(source or "")
    return "._buffers[" in name or "._parameters[" in name


class _Entry:
    def __init__(self, graph: Any, out_spec: Any, statics: list[tuple[int, Any]], n_out: int) -> None:
        self.graph = graph
        self.out_spec = out_spec
        self.statics = statics  # (position, value) of non-tensor outputs
        self.n_out = n_out
        self.model: Any = None
        self.generation = -1

    def __del__(self) -> None:
        # dropped with its captured graph (torch._dynamo.reset(), the LRU): close the model
        if self.model is not None:
            runtime().release_soon(self.model, self.generation)


class _Compiled:
    """The function Dynamo calls in place of one captured graph."""

    def __init__(self, gm: Any, example_inputs: list[Any], fallback: bool, compile_options: dict[str, Any]) -> None:
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.gm = gm
        self.weights = {i: v for i, (n, v) in enumerate(zip(placeholders, example_inputs)) if _is_weight(n, v)}
        self.names = [n.name for n in placeholders]
        self.fallback = fallback
        self.compile_options = compile_options
        self._cache: OrderedDict[Any, _Entry | None] = OrderedDict()
        self._lock = threading.Lock()

    def _signature(self, args: Sequence[Any]) -> tuple[Any, ...]:
        import torch

        return tuple(
            (tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else ("v", a)
            for i, a in enumerate(args) if i not in self.weights
        )  # fmt: skip

    def __call__(self, *args: Any) -> Any:
        import torch

        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            raise TrainingGraphError(
                "torch.compile(backend='aioge') runs inference only: call the module under torch.no_grad()"
            )
        key = self._signature(args)
        with self._lock:
            hit = key in self._cache
            entry = self._cache.get(key)
            if hit:
                self._cache.move_to_end(key)
        if not hit:
            entry = self._build(args)
            with self._lock:
                self._cache[key] = entry
                while len(self._cache) > MAX_SIGNATURES:
                    _, old = self._cache.popitem(last=False)
                    if old is not None and old.model is not None:
                        runtime().release(old.model)
        if entry is None:  # unsupported, running eagerly
            return self.gm(*args)
        return self._run(entry, args)

    def _user(self, args: Sequence[Any]) -> list[Any]:
        return [a for i, a in enumerate(args) if i not in self.weights]

    def _build(self, args: Sequence[Any]) -> _Entry | None:
        import torch
        import torch.utils._pytree as pytree
        from torch.fx.experimental.proxy_tensor import make_fx

        from . import _aten  # noqa: F401  (registers the handlers)

        full = list(args)
        user_idx = [i for i in range(len(full)) if i not in self.weights]
        spec: list[Any] = []
        statics: list[tuple[int, Any]] = []

        def flat_gm(*user: Any) -> list[Any]:
            merged = list(full)
            for i, u in zip(user_idx, user):
                merged[i] = u
            leaves, out_spec = pytree.tree_flatten(self.gm(*merged))
            spec.append(out_spec)
            statics.clear()
            statics.extend((j, v) for j, v in enumerate(leaves) if not isinstance(v, torch.Tensor))
            return [v for v in leaves if isinstance(v, torch.Tensor)]

        user = [full[i] for i in user_idx]
        tensors = [u for u in user if isinstance(u, torch.Tensor)]
        if len(tensors) != len(user):
            # SymInt/int inputs (dynamic shapes): baked into this signature's graph
            t_idx = [k for k, u in enumerate(user) if isinstance(u, torch.Tensor)]

            def traced_fn(*ts: Any) -> list[Any]:
                vals = list(user)
                for k, t in zip(t_idx, ts):
                    vals[k] = t
                return flat_gm(*vals)
        else:
            traced_fn = flat_gm
        with torch.no_grad():
            fx = make_fx(torch.func.functionalize(traced_fn, remove="mutations_and_views"),
                         decomposition_table=_decompositions(), tracing_mode="real")(*tensors)  # fmt: skip
        placeholders = [n for n in fx.graph.nodes if n.op == "placeholder"]
        inputs = {}
        for k, (ph, t) in enumerate(zip(placeholders, tensors)):
            inputs[ph.name] = (f"input_{k}", tuple(int(d) for d in t.shape), torch_dtype_to_np(t.dtype))
        n_out = len(next(n for n in fx.graph.nodes if n.op == "output").args[0])
        try:
            graph = convert_fx(fx, inputs, {}, [f"output_{j}" for j in range(n_out)], name=type(self.gm).__name__)
        except UnsupportedTorchOpError as e:
            if not self.fallback:
                raise
            warnings.warn(f"aioge: running a captured graph eagerly: {e}", RuntimeWarning, stacklevel=3)
            return None
        return _Entry(graph, spec[-1], list(statics), n_out)

    def _run(self, entry: _Entry, args: Sequence[Any]) -> Any:
        import torch
        import torch.utils._pytree as pytree

        rt = runtime()
        if entry.model is None or entry.generation != rt.generation or entry.model.closed:
            entry.model, entry.generation = rt.compile(entry.graph, **self.compile_options)
        tensors = [a for a in self._user(args) if isinstance(a, torch.Tensor)]
        feeds = {f"input_{k}": to_numpy(t, f"input {k}") for k, t in enumerate(tensors)}
        out = rt.execute(entry.model, feeds)
        outs = [from_numpy(out[f"output_{j}"]) for j in range(entry.n_out)]
        for j, v in entry.statics:
            outs.insert(j, v)
        return pytree.tree_unflatten(outs, entry.out_spec)
