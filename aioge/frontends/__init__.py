"""Front ends: PyTorch programs into aioge graphs.

* :func:`from_torch` -- ``torch.export`` -> core ATen -> :class:`aioge.Graph` (no ONNX in between);
* ``torch.compile(module, backend="aioge")`` -- the Dynamo backend in :mod:`aioge.frontends.dynamo`.

torch is imported only when one of them is used (the ``torch`` extra).
"""

from __future__ import annotations

from typing import Any

from .errors import TorchFrontendError, TrainingGraphError, UnsupportedTorchOpError

__all__ = ("from_torch", "TorchFrontendError", "UnsupportedTorchOpError", "TrainingGraphError")


def from_torch(module: Any, example_args: Any = (), **kwargs: Any) -> Any:
    """See :func:`aioge.frontends.torch_export.from_torch`."""
    from . import _aten  # noqa: F401  (registers the ATen handlers)
    from .torch_export import from_torch as _from_torch

    return _from_torch(module, example_args, **kwargs)
