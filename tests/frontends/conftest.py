"""PyTorch front-end tests.

torch and torchvision are required here (the ``torch`` extra, which ``test``
pulls in): a missing or mismatched pair FAILS these tests at collection --
they never skip.  The async tests run on asyncio only: their subject is the
conversion, not the event loop (the core tests cover the three backends).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # transformers: configs only, never the hub

import torch
import torchvision


def _check_pair() -> None:
    # PyPI's newest torchvision beside another torch build imports but has no C ops
    boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]])
    torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8]), 0.5)


_check_pair()


@pytest.fixture
def anyio_backend():
    return ("asyncio", {"debug": True})
