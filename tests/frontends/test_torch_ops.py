"""ATen ops one at a time through ``from_torch`` (the handlers the model zoo does not reach), and errors."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import aioge
from aioge.frontends import TorchFrontendError, TrainingGraphError, UnsupportedTorchOpError

_G = torch.Generator().manual_seed(0)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_G)


class Fn(nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


X4 = _r(1, 4, 6, 7)
NAN = torch.tensor([[1.0, float("nan"), -2.0, float("inf")], [0.0, 3.0, float("-inf"), 2.0]])
IDS = torch.tensor([[3, 1, 0, 2]])

CASES = {
    "upsample_bicubic": (lambda x: F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False), (X4,)),
    "upsample_bilinear_ac": (lambda x: F.interpolate(x, size=(9, 11), mode="bilinear", align_corners=True), (X4,)),
    "upsample_bilinear_down": (lambda x: F.interpolate(x, size=(4, 3), mode="bilinear"), (X4,)),
    "upsample_nearest_frac": (lambda x: F.interpolate(x, size=(9, 10), mode="nearest"), (X4,)),
    "upsample_nearest_exact": (lambda x: F.interpolate(x, size=(9, 10), mode="nearest-exact"), (X4,)),
    "adaptive_avg_uneven": (lambda x: F.adaptive_avg_pool2d(x, (4, 3)), (X4,)),
    "adaptive_avg_even": (lambda x: F.adaptive_avg_pool2d(x, (3, 7)), (X4,)),
    "group_norm": (nn.GroupNorm(2, 4), (X4,)),
    "instance_norm": (nn.InstanceNorm2d(4, affine=True), (X4,)),
    "flip": (lambda x: torch.flip(x, [1, 3]), (X4,)),
    "pad_constant": (lambda x: F.pad(x, (1, 2, 0, 3), value=0.5), (X4,)),
    "pad_reflect": (lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"), (X4,)),
    "pad_replicate": (lambda x: F.pad(x, (2, 1, 1, 2), mode="replicate"), (X4,)),
    "compare_nan": (lambda x: torch.stack([x <= 1, x >= 1, x != x, x == 2, x < 0, x > 0]).float(), (NAN,)),
    "isnan_isinf": (lambda x: torch.stack([torch.isnan(x), torch.isinf(x)]).float(), (NAN,)),
    "logical": (
        lambda a, b: torch.stack([(a > 0) & (b > 0), (a > 0) | (b > 0), (a > 0) ^ (b > 0), ~(a > 0)]).float(),
        (_r(3, 4), _r(3, 4)),
    ),
    "var_std": (
        lambda x: torch.cat([x.var(1, keepdim=True), x.std(2, unbiased=False, keepdim=True).mean(1, True)], 2),
        (_r(2, 5, 6),),
    ),
    "any_all": (lambda x: torch.stack([(x > 1).any(1), (x > -3).all(1)]).float(), (_r(3, 5),)),
    "amax_amin_sum": (lambda x: torch.cat([x.amax(1), x.amin(1), x.sum(1), x.max(1).values]), (_r(3, 5),)),
    "index_tensor": (lambda x: x[:, torch.tensor([2, 0, 2])] + x[:, :3, [1]], (_r(2, 4, 3),)),
    "index_runtime": (lambda x, i: x[i] * 2, (_r(5, 3), IDS)),
    "embedding": (nn.Embedding(5, 3), (IDS,)),
    "clamp_tensor": (lambda x, lo: torch.clamp(x, min=lo, max=lo + 1), (_r(3, 4), _r(1, 4))),
    "clamp_min": (lambda x: torch.clamp(x, min=-0.2), (_r(3, 4),)),
    "activations": (
        lambda x: torch.cat([F.hardswish(x), F.hardsigmoid(x), F.silu(x), F.mish(x), F.elu(x, 0.7),
                             F.leaky_relu(x, 0.2), F.softplus(x), F.gelu(x, approximate="tanh"),
                             F.relu6(x), torch.sign(x), torch.erf(x)]),
        (_r(3, 4) * 4,),
    ),
    "log_softmax": (lambda x: F.log_softmax(x, -1) + F.softmax(x, 0), (_r(3, 4),)),
    # rows of all -inf give 0, a NaN row stays NaN (scaled_dot_product_attention's softmax)
    "safe_softmax": (
        lambda x: torch.ops.aten._safe_softmax(x, -1) + torch.ops.aten._safe_softmax(x, 0),
        (torch.tensor([[float("-inf")] * 4, [1.0, float("-inf"), 2.0, 0.5], [float("nan"), 0, 1, 2]]),),
    ),
    "pow": (lambda x: torch.cat([x**3, x.abs() ** 0.5, 2**x, x**2, torch.rsqrt(x.abs() + 1)]), (_r(3, 4),)),
    "rsub_div": (lambda x: torch.cat([1 - x, x / 3, 3 / (x.abs() + 1), x - 2 * x]), (_r(3, 4),)),
    "repeat_expand": (lambda x: x.repeat(2, 1, 3) + x.expand(2, 3, 4).repeat(1, 1, 3)[:, :, :12], (_r(3, 4),)),
    "cat_split": (lambda x: torch.cat([*torch.split(x, [1, 3], 1)[::-1], *torch.chunk(x, 2, 1)], 1), (_r(3, 4),)),
    "unbind_select": (lambda x: torch.stack([*x.unbind(1)]) + x[:, -1] + x[1], (_r(3, 3),)),
    "slice_step": (lambda x: x[:, 1::2, ::3] * 2 + x[:, -3:-1:2, 1:8:3], (_r(2, 6, 9),)),
    "int_math": (lambda i: (i * 3 + 1 - i).to(torch.float32) / 2, (IDS,)),
    "where_masked_fill": (lambda x: torch.where(x > 0, x, 0.5).masked_fill(x < -1, -7.0), (_r(3, 4),)),
    "conv1d_dilated_grouped": (nn.Conv1d(4, 8, 3, dilation=2, groups=2, padding=2), (_r(1, 4, 10),)),
    "conv2d_dilated": (nn.Conv2d(4, 6, 3, dilation=(2, 1), padding=(2, 1), stride=(1, 2)), (X4,)),
    "conv_transpose_outpad": (nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1), (X4,)),
    "avg_pool_exclusive": (nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (X4,)),
    "max_pool_ceil": (nn.MaxPool2d(3, stride=2, ceil_mode=True), (X4,)),
    "layer_norm_noaffine": (lambda x: F.layer_norm(x, (7,)), (X4,)),
    "batch_norm_1d": (nn.BatchNorm1d(4).eval(), (_r(3, 4),)),
    "matmul_broadcast": (
        lambda a, b: a @ b + torch.baddbmm(a @ b, a, b, beta=0.5, alpha=2),
        (_r(2, 3, 4), _r(2, 4, 5)),
    ),
    "sdpa": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        (_r(1, 2, 5, 4), _r(1, 2, 5, 4), _r(1, 2, 5, 4)),
    ),
    "constant_only_output": (lambda x: (x + 1, torch.arange(4.0)), (_r(2, 2),)),
    "input_passthrough": (lambda x, y: (x, y * 2, x), (_r(2, 2), _r(2, 2))),
}


@pytest.mark.anyio
@pytest.mark.parametrize("name", list(CASES))
async def test_op(name, compiled):
    fn, args = CASES[name]
    m = (fn if isinstance(fn, nn.Module) else Fn(fn)).eval()
    with torch.no_grad():
        ref = m(*args)
    refs = list(ref) if isinstance(ref, tuple) else [ref]
    g = aioge.from_torch(m, args)
    model = await compiled(g)
    out = await model.execute(dict(zip(g.inputs, args)), as_torch=True)
    assert len(out) == len(refs)
    for o, r in zip(out.values(), refs):
        assert o.dtype == r.dtype
        torch.testing.assert_close(o, r, rtol=1e-4, atol=1e-5, equal_nan=True)


class _Unsupported(nn.Module):
    def forward(self, x):
        a = torch.cumsum(x, 1)
        b = torch.argmax(x, 1, keepdim=True).float()
        c = torch.sort(x, 1).values
        return a + b + c + x[x > 0].sum()


def test_every_unsupported_op_listed_with_its_source_line():
    with pytest.raises(UnsupportedTorchOpError) as ei:
        aioge.from_torch(_Unsupported(), (_r(2, 5),))
    e = ei.value
    assert {"cumsum.default", "argmax.default", "sort.default"} <= set(e.op_types)
    text = str(e)
    # the user's source line of each (this file, inside forward)
    assert len(re.findall(r"test_torch_ops\.py:\d+ in forward", text)) >= 3, text
    assert "torch.cumsum(x, 1)" in text and "torch.argmax(x, 1, keepdim=True)" in text
    assert isinstance(e, aioge.graph.GraphError)


def test_training_graphs_refused():
    bn = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))  # training mode: updates running stats
    with pytest.raises(TrainingGraphError, match="eval"):
        aioge.from_torch(bn, (_r(1, 3, 8, 8),))
    drop = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))  # dropout active
    with pytest.raises(TrainingGraphError, match="dropout"):
        aioge.from_torch(drop, (_r(2, 4),))
    assert aioge.from_torch(drop.eval(), (_r(2, 4),)).op_counts() == {"Gemm": 1}


def test_export_failures_are_typed():
    class DataDependent(nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x

    with pytest.raises(TorchFrontendError, match=r"torch\.export\.export failed") as ei:
        aioge.from_torch(DataDependent(), (_r(3),))
    assert ei.value.__cause__ is not None


def test_from_torch_refuses_non_modules():
    with pytest.raises(TorchFrontendError, match=r"nn\.Module"):
        aioge.from_torch(lambda x: x, (_r(2),))


def test_names_of_inputs_and_outputs():
    lstm = nn.LSTM(3, 4, batch_first=True).eval()
    g = aioge.from_torch(lstm, (_r(1, 2, 3),))
    assert g.inputs == ["input"]
    assert g.outputs == ["output_0", "output_1_0", "output_1_1"]  # (out, (h, c))


def test_parameters_become_named_constants():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
    g = aioge.from_torch(m, (_r(1, 3, 8, 8),))
    assert "0.weight" in g.constants and "0.bias" in g.constants
    np.testing.assert_array_equal(g.constants["0.weight"], m[0].weight.detach().numpy())
    assert g.op_counts() == {"Conv": 1, "Relu": 1}


class _MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 3)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)).reshape(x.shape[0], -1))


@pytest.mark.anyio
async def test_dynamic_shapes_pinned_per_conversion(compiled):
    m = _MLP().eval()
    batch = torch.export.Dim("batch", min=1, max=16)
    ep = aioge.frontends.export_program(m, (_r(2, 8),), dynamic_shapes={"x": {0: batch}})
    for n in (1, 5):
        g = aioge.from_torch(ep, input_shapes={"x": (n, 8)})
        assert g.values["x"].shape == (n, 8)
        x = _r(n, 8)
        out = await (await compiled(g)).execute({"x": x}, as_torch=True)
        with torch.no_grad():
            torch.testing.assert_close(out["output"], m(x), rtol=1e-4, atol=1e-5)
    # straight from the module: the example's shape by default
    g = aioge.from_torch(m, (_r(3, 8),), dynamic_shapes={"x": {0: batch}})
    assert g.values["x"].shape == (3, 8)
    with pytest.raises(TorchFrontendError, match="outside the exported range"):
        aioge.from_torch(ep, input_shapes={"x": (17, 8)})
    with pytest.raises(TorchFrontendError, match="input_shapes"):
        aioge.from_torch(ep)  # nothing pins the batch
    with pytest.raises(TorchFrontendError, match="static"):
        aioge.from_torch(ep, input_shapes={"x": (2, 9)})
