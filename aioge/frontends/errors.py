"""Errors of the PyTorch front end.

Hierarchy (all are :class:`aioge.graph.GraphError`, hence ``ValueError``)::

    TorchFrontendError            anything wrong converting a torch program
      UnsupportedTorchOpError     lists EVERY unsupported ATen op with its source location
      TrainingGraphError          a training graph (grad required, buffers mutated, dropout on)

``TorchFrontendError`` and ``TrainingGraphError`` are defined in :mod:`aioge.graph.errors`
(the runtime raises them for torch feeds, and sits below this package) and re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..graph.errors import TorchFrontendError, TrainingGraphError

__all__ = ("TorchFrontendError", "UnsupportedTorchOpError", "TrainingGraphError")


class UnsupportedTorchOpError(TorchFrontendError):
    """ATen ops (or op features) with no aioge IR mapping.

    ``unsupported`` lists every offending ``(aten_op, fx_node, reason, location)``
    of the program, not only the first one; ``location`` is the user source
    line the FX node records (``file:line in function: code``) or ``""``.
    """

    def __init__(self, unsupported: Sequence[tuple[str, str, str, str]]) -> None:
        self.unsupported = list(unsupported)
        lines = []
        for op, node, why, loc in self.unsupported:
            line = f"  {op} at FX node {node!r}" + (f": {why}" if why else "")
            if loc:
                line += f"\n      at {loc}"
            lines.append(line)
        super().__init__(
            f"{len(self.unsupported)} unsupported ATen node(s), ops {self.op_types}:\n" + "\n".join(lines)
        )

    @property
    def op_types(self) -> list[str]:
        """Sorted distinct unsupported ATen ops."""
        return sorted({op for op, _, _, _ in self.unsupported})
