"""View ops through ``torch.compile(backend="aioge")``: Dynamo's graphs are functionalized, so every
view op reaches the converter as its ``*_copy`` twin (``unbind_copy.int``, ``view_copy``, ...),
which ``torch.export``'s graphs never hold. Each group is checked against eager torch, and the
``*_copy`` ops named are checked to have reached the converter (not decomposed away).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import aioge
from aioge.frontends import _convert
from aioge.frontends.dynamo import close_runtime

aten = torch.ops.aten
_G = torch.Generator().manual_seed(0)
X4 = torch.randn(2, 3, 4, 5, generator=_G)
X2 = torch.randn(4, 6, generator=_G)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
    close_runtime()


@pytest.fixture
def seen(monkeypatch) -> set[str]:
    """The ATen overloads the converter was asked for during the test."""
    names: set[str] = set()
    for key, fn in list(_convert.HANDLERS.items()):

        def record(cx: Any, n: Any, p: Any, _key: str = key, _fn: Any = fn) -> Any:
            names.add(_key)
            return _fn(cx, n, p)

        monkeypatch.setitem(_convert.HANDLERS, key, record)
    return names


def same_as_eager(fn: Callable[..., Any], *xs: torch.Tensor) -> None:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.compile(fn, backend="aioge")(*xs)
        want = fn(*xs)
    if isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w)
    else:
        torch.testing.assert_close(got, want)


def test_unbind(seen):
    """``torch.unbind`` (timm's mobilevit): Dynamo emits ``unbind_copy.int``."""
    same_as_eager(lambda x: sum(t * (i + 1) for i, t in enumerate(torch.unbind(x, 1))), X4)
    same_as_eager(lambda x: torch.stack([t + 1 for t in x.unbind(0)], -1), X4)
    same_as_eager(lambda x: [t * 2 for t in aten.unbind_copy.int(x, -1)], X4)
    same_as_eager(lambda x: [t - 1 for t in x[:, :1].unbind(1)], X4)  # one piece
    assert "unbind_copy.int" in seen


def test_reshaping_copies(seen):
    same_as_eager(lambda x: aten.view_copy.default(x, [6, 20]) + 1, X4)
    same_as_eager(lambda x: aten.squeeze_copy.dim(x[:, :1], 1) * 2, X4)
    same_as_eager(lambda x: aten.squeeze_copy.dims(x[:1, :, :1], [0, 2]) * 2, X4)
    same_as_eager(lambda x: aten.squeeze_copy.default(x[:1, :1]) * 2, X4)
    same_as_eager(lambda x: aten.unsqueeze_copy.default(x, 2) + 1, X4)
    same_as_eager(lambda x: aten.as_strided_copy.default(x, [6, 20], [20, 1]) + 1, X4)
    assert {"view_copy.default", "as_strided_copy.default"} <= seen  # (squeeze/unsqueeze_copy decompose)


def test_aliases(seen):
    same_as_eager(lambda x: x.detach() + 1, X4)
    same_as_eager(lambda x: aten.alias_copy.default(x) * 3, X4)
    same_as_eager(lambda x: aten.detach_copy.default(x) * 3, X4)
    assert "detach_copy.default" in seen


def test_axis_moves(seen):
    same_as_eager(lambda x: aten.permute_copy.default(x, [0, 2, 3, 1]) + 1, X4)
    same_as_eager(lambda x: aten.transpose_copy.int(x, 1, 3) + 1, X4)
    same_as_eager(lambda x: aten.t_copy.default(x) @ x, X2)
    same_as_eager(lambda x: aten.expand_copy.default(x[:, :1], [2, 3, 4, 5]) + x, X4)
    same_as_eager(lambda x: x.mT.movedim(1, -1) + 1, X4)
    assert "permute_copy.default" in seen  # (transpose_copy, t_copy and expand_copy decompose)


def test_slices(seen):
    same_as_eager(lambda x: aten.slice_copy.Tensor(x, 2, 1, 3) * 2, X4)
    same_as_eager(lambda x: aten.slice_copy.Tensor(x, 3, 0, 5, 2) * 2, X4)
    same_as_eager(lambda x: aten.select_copy.int(x, 1, -1) * 2, X4)
    same_as_eager(lambda x: aten.narrow_copy.default(x, 3, 1, 3) * 2, X4)
    same_as_eager(lambda x: x[:, 1:3, ::2, -1] * 2, X4)
    assert {"slice_copy.Tensor", "select_copy.int"} <= seen


def test_splits(seen):
    same_as_eager(lambda x: [t * 2 for t in aten.split_copy.Tensor(x, 2, 3)], X4)
    same_as_eager(lambda x: [t * 2 for t in aten.split_with_sizes_copy.default(x, [1, 2], 1)], X4)
    same_as_eager(lambda x: [t * 2 for t in x.chunk(2, dim=2)], X4)
    same_as_eager(lambda x: [t * 2 for t in torch.tensor_split(x, 3, dim=3)], X4)
    assert seen & {"split_copy.Tensor", "split_with_sizes_copy.default"}


@pytest.mark.parametrize(("offset", "d1", "d2"), [(0, 2, 3), (1, -2, -1), (-2, 3, 2), (0, 0, 3), (7, 2, 3)])
def test_diagonal(seen, offset, d1, d2):
    same_as_eager(lambda x: torch.diagonal(x, offset, d1, d2) + 1, X4)
    same_as_eager(lambda x: aten.diagonal_copy.default(x, offset, d1, d2) * 2, X4)
    assert seen & {"diagonal.default", "diagonal_copy.default"}


def test_diag_of_a_matrix():
    same_as_eager(lambda x: torch.diag(x) + 1, X2)
    same_as_eager(lambda x: torch.diag(x, -1) + torch.diag(x, 1)[:3], X2)


@pytest.mark.parametrize(("dim", "size", "step"), [(3, 2, 1), (2, 2, 2), (1, 3, 1), (0, 1, 1), (-1, 5, 3)])
def test_unfold(seen, dim, size, step):
    same_as_eager(lambda x: x.unfold(dim, size, step) + 1, X4)
    same_as_eager(lambda x: aten.unfold_copy.default(x, dim, size, step) * 2, X4)
    assert seen & {"unfold.default", "unfold_copy.default"}


def test_diagonal_and_unfold_through_from_torch():
    """torch.export's graphs hold the non-copy ops: the same handlers convert them."""

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.diagonal(x, 1, 2, 3).sum(-1) + x.unfold(3, 2, 2).sum((-1, -2, -3))

    m = M().eval()
    g = aioge.from_torch(m, (X4,))
    got = aioge.graph.run_reference(g, {g.inputs[0]: X4.numpy()})
    with torch.no_grad():
        want = m(X4).numpy()
    np.testing.assert_allclose(next(iter(got.values())), want, rtol=1e-5, atol=1e-6)
