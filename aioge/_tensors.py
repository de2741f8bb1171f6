"""torch <-> numpy without copies (CPU tensors share memory with their arrays)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .graph.errors import TorchFrontendError, TrainingGraphError
from .graph.ir import normalize_dtype

__all__ = ("to_numpy", "from_numpy")


def to_numpy(t: Any, what: str = "input", *, check_grad: bool = True) -> np.ndarray:
    """A numpy view of a CPU tensor (``Tensor.numpy()`` shares memory; bfloat16 via an int16 view)."""
    import torch

    if t.device.type != "cpu":
        raise TorchFrontendError(f"{what} is on {t.device}: aioge takes CPU tensors (its device memory is its own)")
    if check_grad and t.requires_grad and torch.is_grad_enabled():
        raise TrainingGraphError(
            f"{what} requires grad: aioge runs inference only (use torch.no_grad() or torch.inference_mode())"
        )
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return np.asarray(t.view(torch.int16).numpy().view(normalize_dtype("bfloat16")))
    return np.asarray(t.numpy())


def from_numpy(a: np.ndarray) -> Any:
    """A torch tensor sharing ``a``'s memory."""
    import torch

    if a.dtype == normalize_dtype("bfloat16"):
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    if not a.flags.writeable:
        a = a.copy()  # torch tensors are writable; never alias a read-only buffer
    return torch.from_numpy(a)
