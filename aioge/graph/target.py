"""Compile targets: what one backend can run.

The compile pipeline (:func:`aioge.graph.optimize`, :func:`aioge.graph.lower`
and the host rewrites of :mod:`aioge.graph.lower.host`) takes a
:class:`Target` and emits only what that backend executes:

* ``host`` -- the embedded host runtime: every fusion (Conv+BatchNorm
  folding, bias+activation into ``_FusedConv``/``_FusedMatMul``, elementwise
  chains into ``_FusedElementwise``) and its host-only kernels
  (``_FusedConv2D``, ``_FusedMatMul``, ``_FusedElementwise``) and the
  ``NCHWc8`` layout (``AIOGE_HOST_NCHWC=0`` turns it off);
* ``ascend`` -- a real ``libascendcl.so``: only CANN op types (no
  ``_``-prefixed op is ever emitted), and only the fusions that rewrite into
  standard ops (Conv+BatchNorm folding changes weights, not op types).

Example:
    >>> g = aioge.graph.optimize(graph, target=aioge.graph.ASCEND)
    >>> ops = aioge.graph.lower(g, target=aioge.graph.ASCEND)   # CANN op types only
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .._layout import NCHW_OPS
from .._layout import data_format as _data_format
from .errors import LoweringError

__all__ = ("Target", "HOST", "ASCEND", "FUSIONS", "NCHW_OPS", "target_for", "is_host_only")

#: the fusion passes of :mod:`aioge.graph.passes.fuse`, by name
FUSIONS = frozenset({"conv_bn", "bias_activation", "elementwise"})


def is_host_only(op_type: str) -> bool:
    """Whether ``op_type`` is one of aioge's host-only op types (``_``-prefixed)."""
    return op_type.startswith("_")


@dataclass(frozen=True)
class Target:
    """The capabilities of one backend, as the compiler sees them.

    Attributes:
        name: ``"host"``, ``"ascend"``, ...
        fusions: which fusion passes may run (a subset of :data:`FUSIONS`).
        host_ops: whether aioge's host-only op types may be emitted.
        op_types: the CANN op types the backend runs (``None``: any CANN op type).
        layouts: the data formats the backend takes for 4-D NCHW-style operands;
            ``"NCHWc8"``: it runs the channel-blocked layout's host ops, and
            :func:`~aioge.graph.optimize` computes convolution chains in that
            layout (:mod:`aioge.graph.passes.nchwc`).
    """

    name: str
    fusions: frozenset[str]
    host_ops: bool
    op_types: frozenset[str] | None = None
    layouts: frozenset[str] = frozenset({"NCHW", "ND"})

    def __post_init__(self) -> None:
        unknown = set(self.fusions) - FUSIONS
        if unknown:
            raise ValueError(f"unknown fusions {sorted(unknown)} (known: {sorted(FUSIONS)})")

    def allows(self, op_type: str) -> bool:
        """Whether the backend runs ``op_type``."""
        if self.host_ops and self.op_types is None:
            return True  # every op type, host-only ones too (the host target): nothing to look up
        if is_host_only(op_type):
            return self.host_ops
        return self.op_types is None or op_type in self.op_types

    def check(self, op_type: str, node: str | None = None, node_op: str | None = None) -> None:
        """Raise :class:`LoweringError` unless the backend runs ``op_type``."""
        if not self.allows(op_type):
            why = "a host-only op type" if is_host_only(op_type) else "not an op type it runs"
            raise LoweringError(f"the {self.name!r} target cannot run {op_type!r} ({why})", node=node, op_type=node_op)

    def data_format(self, op_type: str, rank: int) -> str:
        """``"NCHW"`` for the 4-D operands of NCHW ops, else ``"ND"`` (:mod:`aioge._layout`)."""
        return _data_format(op_type, rank)


def _host_layouts() -> frozenset[str]:
    """The host target's layouts: ``NCHWc8`` too unless ``AIOGE_HOST_NCHWC=0`` (read once, at import)."""
    text = os.environ.get("AIOGE_HOST_NCHWC", "").strip() or "1"
    if text not in ("0", "1"):
        raise ValueError(f"AIOGE_HOST_NCHWC={text!r} must be 0 or 1")
    return frozenset({"NCHW", "ND", "NCHWc8"} if text == "1" else {"NCHW", "ND"})


HOST = Target("host", fusions=FUSIONS, host_ops=True, layouts=_host_layouts())
ASCEND = Target("ascend", fusions=frozenset({"conv_bn"}), host_ops=False)
_BY_NAME = {t.name: t for t in (HOST, ASCEND)}


def target_for(backend: str | Target) -> Target:
    """The target of a backend name (``"host"``, ``"ascend"``); any other backend is CANN-only."""
    if isinstance(backend, Target):
        return backend
    t = _BY_NAME.get(backend)
    return t if t is not None else Target(backend, fusions=ASCEND.fusions, host_ops=False)
