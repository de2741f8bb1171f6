"""Front ends: PyTorch programs into aioge graphs.

* :func:`from_torch` -- ``torch.export`` -> core ATen -> :class:`aioge.Graph` (no ONNX in between);
* ``torch.compile(module, backend="aioge")`` -- the Dynamo backend in :mod:`aioge.frontends.dynamo`.

torch is imported only when one of them is used (the ``torch`` extra).
"""

from __future__ import annotations

from . import _aten  # noqa: F401  (registers the ATen handlers)
from .errors import TorchFrontendError, TrainingGraphError, UnsupportedTorchOpError
from .torch_export import export_program, from_torch

__all__ = ("from_torch", "export_program", "TorchFrontendError", "UnsupportedTorchOpError", "TrainingGraphError")
