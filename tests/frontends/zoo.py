"""Real architectures with deterministic random weights (no downloads), shared by tests and benchmarks.

Random weights of a fresh torchvision model give outputs near zero (BatchNorm
running stats of 0/1 on activations that shrink layer by layer, zero-initialised
heads), which would make any comparison pass.  :func:`calibrate` gives every
BatchNorm random affine parameters and running statistics measured on a random
batch, and zero-initialised weights small random values, so activations are
O(1) all the way through.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ("MODELS", "build", "calibrate", "reference64", "UNet")


def calibrate(m: nn.Module, args: tuple[Any, ...], seed: int = 0) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() >= 2 and not p.any():
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
        bns = [x for x in m.modules() if isinstance(x, nn.modules.batchnorm._BatchNorm)]
        for bn in bns:
            if bn.affine:
                bn.weight.copy_(torch.rand(bn.weight.shape, generator=g) + 0.5)
                bn.bias.copy_(torch.randn(bn.bias.shape, generator=g) * 0.1)
            bn.momentum = 1.0  # running stats := this batch's
        if bns:
            m.train()
            batch = tuple(torch.cat([a, torch.randn(a.shape, generator=g)]) if a.is_floating_point() else a
                          for a in args)  # fmt: skip
            m(*batch)
    return m.eval()


class UNet(nn.Module):
    """A small UNet: strided convs down, ConvTranspose and Upsample (bilinear and nearest) up, skips."""

    def __init__(self) -> None:
        super().__init__()
        self.d1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.d2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.d3 = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU())
        self.up3 = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.c3 = nn.Conv2d(32, 16, 3, padding=1)
        self.up2 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.c2 = nn.Conv2d(24, 8, 3, padding=1)
        self.up1 = nn.Upsample(scale_factor=2, mode="nearest")
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.d1(x)
        b = self.d2(a)
        c = self.d3(b)
        u = F.relu(self.c3(torch.cat([self.up3(c), b], 1)))
        u = F.relu(self.c2(torch.cat([self.up2(u), a], 1)))
        return self.head(u + self.up1(F.avg_pool2d(u, 2)))


def _tv(name: str, size: int = 64, **kw: Any) -> Callable[[], tuple[nn.Module, tuple[Any, ...]]]:
    def make() -> tuple[nn.Module, tuple[Any, ...]]:
        import torchvision

        torch.manual_seed(0)
        m = getattr(torchvision.models, name)(weights=None, **kw)
        args = (torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(1)),)
        return calibrate(m, args), args

    return make


def _ids(vocab: int, n: int) -> torch.Tensor:
    return torch.randint(0, vocab, (1, n), generator=torch.Generator().manual_seed(1))


def _bert() -> tuple[nn.Module, tuple[Any, ...]]:
    import transformers as T

    torch.manual_seed(0)
    c = T.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64)  # fmt: skip
    return T.BertModel(c).eval(), (_ids(100, 16),)


def _gpt2() -> tuple[nn.Module, tuple[Any, ...]]:
    import transformers as T

    torch.manual_seed(0)
    c = T.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False,
                     bos_token_id=0, eos_token_id=0)  # fmt: skip
    return T.GPT2Model(c).eval(), (_ids(100, 16),)


def _vit_hf() -> tuple[nn.Module, tuple[Any, ...]]:
    import transformers as T

    torch.manual_seed(0)
    c = T.ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64)  # fmt: skip
    return T.ViTModel(c).eval(), (torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1)),)


def _t5_encoder() -> tuple[nn.Module, tuple[Any, ...]]:
    import transformers as T

    torch.manual_seed(0)
    c = T.T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, use_cache=False)
    return T.T5EncoderModel(c).eval(), (_ids(100, 16),)


def _lstm() -> tuple[nn.Module, tuple[Any, ...]]:
    torch.manual_seed(0)
    m = nn.LSTM(8, 16, num_layers=2, batch_first=True)
    return m.eval(), (torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1)),)


def _gru() -> tuple[nn.Module, tuple[Any, ...]]:
    torch.manual_seed(0)
    m = nn.GRU(8, 16, batch_first=True, bidirectional=True)
    return m.eval(), (torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1)),)


def _unet() -> tuple[nn.Module, tuple[Any, ...]]:
    torch.manual_seed(0)
    args = (torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1)),)
    return calibrate(UNet(), args), args


MODELS: dict[str, Callable[[], tuple[nn.Module, tuple[Any, ...]]]] = {
    "resnet18": _tv("resnet18"),
    "mobilenet_v2": _tv("mobilenet_v2"),
    "mobilenet_v3_small": _tv("mobilenet_v3_small"),
    "efficientnet_b0": _tv("efficientnet_b0"),
    "squeezenet1_1": _tv("squeezenet1_1"),
    "shufflenet_v2_x1_0": _tv("shufflenet_v2_x1_0"),
    "googlenet": _tv("googlenet", aux_logits=False, init_weights=True),
    "densenet121": _tv("densenet121"),
    "regnet_y_400mf": _tv("regnet_y_400mf"),
    "convnext_tiny": _tv("convnext_tiny"),
    "vit_b_16": _tv("vit_b_16", 64, image_size=64),
    "bert": _bert,
    "gpt2": _gpt2,
    "vit_hf": _vit_hf,
    "t5_encoder": _t5_encoder,
    "lstm": _lstm,
    "gru": _gru,
    "unet": _unet,
}

_BUILT: dict[str, tuple[nn.Module, tuple[Any, ...], list[torch.Tensor]]] = {}
_F64: dict[str, list[torch.Tensor]] = {}


def reference64(name: str) -> list[torch.Tensor]:
    """The model's outputs computed in float64 (an oracle for float32 rounding), once per process."""
    import copy

    import torch.utils._pytree as pytree

    if name not in _F64:
        m, args, _ = build(name)
        m64 = copy.deepcopy(m).double()
        with torch.no_grad():
            out = m64(*[a.double() if a.is_floating_point() else a for a in args])
        _F64[name] = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    return _F64[name]


def build(name: str) -> tuple[nn.Module, tuple[Any, ...], list[torch.Tensor]]:
    """(module, example args, eager outputs flattened), built once per process."""
    import torch.utils._pytree as pytree

    if name not in _BUILT:
        m, args = MODELS[name]()
        with torch.no_grad():
            ref = [t for t in pytree.tree_leaves(m(*args)) if isinstance(t, torch.Tensor)]
        _BUILT[name] = (m, args, ref)
        # the models live for the whole run: keep them out of the per-test leak checks' gc passes
        # (each pass over a few large modules and their parameters costs ~1 s)
        gc.collect()
        gc.freeze()
    return _BUILT[name]
