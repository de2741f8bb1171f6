"""``aioge.from_torch``: a torch module -> ``torch.export`` -> core ATen -> aioge IR.

No ONNX in between: the exported program's graph is converted node by node
(:mod:`._convert`, handlers in :mod:`._aten`).  Parameters, buffers and
lifted constants become IR constants; user inputs keep the names of the
module's ``forward`` arguments; outputs are named after their place in the
returned structure (``output`` for one tensor, ``last_hidden_state`` for a
field of a ``ModelOutput``, ``output_1_0`` for ``out[1][0]`` ...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..graph.ir import Graph
from ._aten import KEEP_WHOLE
from ._convert import Pins, convert_fx, target_name, torch_dtype_to_np
from .errors import TorchFrontendError, TrainingGraphError

__all__ = ("from_torch", "export_program", "convert_program", "output_names")


def export_program(module: Any, example_args: Sequence[Any], *, dynamic_shapes: Any = None,
                   example_kwargs: Mapping[str, Any] | None = None) -> Any:  # fmt: skip
    """``torch.export.export`` then ``run_decompositions()`` (the core ATen op set), without grad."""
    import warnings

    import torch

    with torch.no_grad(), warnings.catch_warnings():
        # nn.LSTM/GRU re-assign their flat weight list in forward: torch warns, the weights are exported right
        warnings.filterwarnings("ignore", message="The tensor attributes .* were assigned during export")
        try:
            ep = torch.export.export(module, tuple(example_args), kwargs=dict(example_kwargs or {}),
                                     dynamic_shapes=dynamic_shapes)  # fmt: skip
        except Exception as e:  # data-dependent control flow, untraceable Python, bad dynamic_shapes...
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise TorchFrontendError(
                f"torch.export.export failed ({type(e).__name__}: {first}); from_torch needs a module "
                "torch.export can capture as one graph (torch.compile(backend='aioge') takes graph breaks)"
            ) from e
        table = torch.export.default_decompositions()
        for op in list(table.keys()):  # type: ignore[no-untyped-call]
            if target_name(op) in KEEP_WHOLE:
                del table[op]  # the converter maps these better than their decompositions
        return ep.run_decompositions(table)


def _clean(s: str) -> str:
    s = re.sub(r"[\[\]'\"]+", "_", s)
    s = re.sub(r"[^0-9A-Za-z_.]+", "_", s).strip("_.")
    return re.sub(r"_+", "_", s.replace("._", ".").replace("_.", "."))


def output_names(out_spec: Any, n: int) -> list[str]:
    """Names of the flattened outputs from the pytree spec (``output``, ``logits``, ``output_1_0``...)."""
    import torch.utils._pytree as pytree

    if out_spec is None:
        return ["output"] if n == 1 else [f"output_{i}" for i in range(n)]
    tree = pytree.tree_unflatten(list(range(n)), out_spec)
    leaves = pytree.tree_flatten_with_path(tree)[0]
    names: list[str] = []
    for path, _ in leaves:
        parts = []
        for k in path:
            key = getattr(k, "key", getattr(k, "idx", getattr(k, "name", None)))
            parts.append(str(key))
        if not parts:
            name = "output"
        elif isinstance(getattr(path[0], "idx", None), int):
            name = "output_" + "_".join(parts)
        else:
            name = "_".join(parts)
        name = _clean(name) or "output"
        while name in names:
            name += "_"
        names.append(name)
    return names


def _pins(ep: Any, user: list[Any], input_shapes: Mapping[str, Sequence[int]] | None,
          example: list[Any]) -> Pins:  # fmt: skip
    """Concrete values for the program's size symbols: from ``input_shapes`` or the example inputs."""
    import torch

    subs: dict[Any, int] = {}
    for node, ex in zip(user, example):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        want = (input_shapes or {}).get(node.name)
        if want is None and ex is None:
            continue  # nothing pins it: a symbolic dim fails later, asking for input_shapes
        concrete = list(want) if want is not None else list(getattr(ex, "shape", ()))
        if len(concrete) != val.dim():
            raise TorchFrontendError(f"input {node.name!r}: shape {tuple(concrete)} has the wrong rank for {val.shape}")
        for d, c in zip(val.shape, concrete):
            expr = getattr(getattr(d, "node", None), "expr", None)
            if expr is None:
                if int(d) != int(c):
                    raise TorchFrontendError(f"input {node.name!r}: dim {int(d)} is static, cannot pin it to {c}")
            elif getattr(expr, "is_Symbol", False):
                if expr in subs and subs[expr] != int(c):
                    raise TorchFrontendError(f"input {node.name!r}: size {expr} pinned to both {subs[expr]} and {c}")
                subs[expr] = int(c)
    for sym, rng in getattr(ep, "range_constraints", {}).items():
        if sym in subs and not (int(rng.lower) <= subs[sym] <= (rng.upper if rng.upper.is_finite else subs[sym])):
            raise TorchFrontendError(
                f"size {sym} = {subs[sym]} is outside the exported range [{rng.lower}, {rng.upper}]"
            )
    return Pins(subs)


def convert_program(ep: Any, *, name: str = "torch", input_shapes: Mapping[str, Sequence[int]] | None = None,
                    example_args: Sequence[Any] | None = None) -> Graph:  # fmt: skip
    """Convert an ``ExportedProgram`` (already decomposed to core ATen) into an :class:`aioge.Graph`."""
    import torch
    from torch.export.graph_signature import InputKind, OutputKind

    sig = ep.graph_signature
    state = ep.state_dict
    consts = getattr(ep, "constants", {}) or {}
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    by_name = {n.name: n for n in placeholders}
    constants: dict[str, Any] = {}
    readable: dict[str, Any] = {}
    user: list[Any] = []
    for spec in sig.input_specs:
        ph = by_name[spec.arg.name] if hasattr(spec.arg, "name") else None
        if spec.kind == InputKind.USER_INPUT:
            if ph is not None and isinstance(ph.meta.get("val"), torch.Tensor):
                user.append(ph)
            continue
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            t = state[spec.target] if spec.target in state else consts[spec.target]
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            t = consts[spec.target]
        else:
            continue
        if ph is not None:
            constants[ph.name] = t
            readable[str(spec.target)] = t
    for spec in sig.output_specs:
        if spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.GRADIENT_TO_PARAMETER,
                         OutputKind.GRADIENT_TO_USER_INPUT, OutputKind.LOSS_OUTPUT):  # fmt: skip
            raise TrainingGraphError(
                f"the program {spec.kind.name.lower().replace('_', ' ')} {spec.target!r}: aioge runs inference only "
                "(call module.eval(); BatchNorm in training mode updates its running stats)"
            )
    example = list(example_args) if example_args is not None else [None] * len(user)
    flat_ex = [a for a in _flat_tensors(example)] if example_args is not None else [None] * len(user)
    pins = _pins(ep, user, input_shapes, flat_ex if len(flat_ex) == len(user) else [None] * len(user))
    inputs = {}
    for ph in user:
        val = ph.meta["val"]
        inputs[ph.name] = (ph.name, tuple(pins.int(d) for d in val.shape), torch_dtype_to_np(val.dtype))
    n_user_out = sum(1 for s in sig.output_specs if s.kind == OutputKind.USER_OUTPUT)
    names = output_names(getattr(ep, "call_spec", None) and ep.call_spec.out_spec, n_user_out)
    # the graph's output node lists mutations first, then user outputs: convert only the user ones
    out_node = next(n for n in ep.graph.nodes if n.op == "output")
    flat_out = list(out_node.args[0])
    user_out = [a for a, s in zip(flat_out, sig.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    if len(user_out) != len(flat_out):
        out_node.args = (tuple(user_out),)
    return convert_fx(ep.graph_module, inputs, constants, names, name=name, pins=pins, constant_names=readable)


def _flat_tensors(args: Sequence[Any]) -> list[Any]:
    import torch
    import torch.utils._pytree as pytree

    return [a for a in pytree.tree_leaves(list(args)) if isinstance(a, torch.Tensor)]


def from_torch(
    module: Any,
    example_args: Sequence[Any] = (),
    *,
    dynamic_shapes: Any = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    example_kwargs: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> Graph:
    """Convert a PyTorch module (or an ``ExportedProgram``) into an :class:`aioge.Graph`.

    ``torch.export.export(module, example_args, dynamic_shapes=...)``, decomposed
    to core ATen, is converted straight into aioge's IR: parameters and buffers
    become constants, the inputs keep the names of ``forward``'s arguments.

    Args:
        module: a ``torch.nn.Module`` (in eval mode) or an ``ExportedProgram``.
        example_args: a tuple of example inputs (torch tensors).
        dynamic_shapes: passed to ``torch.export`` (``torch.export.Dim``...).
        input_shapes: ``{input name: shape}`` pinning the symbolic dims of a
            dynamic export (default: the example inputs' shapes); aioge graphs
            are specialised to concrete shapes, so export once and convert per shape.
        example_kwargs: keyword example inputs.
        name: the graph's name (default: the module's class name).

    Raises:
        UnsupportedTorchOpError: listing every unsupported ATen op with its source line.
        TrainingGraphError: a module that would update buffers or run dropout (call ``eval()``).

    Example:
        >>> g = aioge.from_torch(torchvision.models.resnet18().eval(), (torch.randn(1, 3, 64, 64),))
        >>> model = await dev.compile(g)
        >>> out = await model.execute({"x": x}, as_torch=True)
    """
    import torch

    if isinstance(module, torch.export.ExportedProgram):
        ep = module
        gname = name or "exported"
    else:
        if not isinstance(module, torch.nn.Module):
            raise TorchFrontendError(f"from_torch takes a torch.nn.Module or ExportedProgram, not {type(module)!r}")
        if not isinstance(example_args, (tuple, list)):
            example_args = (example_args,)
        ep = export_program(module, example_args, dynamic_shapes=dynamic_shapes, example_kwargs=example_kwargs)
        gname = name or type(module).__name__
    ex = list(example_args) + list((example_kwargs or {}).values()) if example_args else None
    return convert_program(ep, name=gname, input_shapes=input_shapes, example_args=ex)


