"""Einsum equations as the ONNX schema allows them: upper- and lower-case letters, spaces, ``...``.

Each case runs through onnxruntime (the oracle), the reference interpreter, the
lowering (CANN emulator) and the host runtime's kernels.
"""

from __future__ import annotations

import numpy as np
import pytest

from aioge import _shapes as S
from aioge.graph import load_onnx, optimize
from aioge.graph.errors import MalformedModelError
from aioge.graph.reference import run_reference
from tests.graph.cann_emulator import run_lowered
from tests.graph.onnx_util import assert_close, one_op, rand
from tests.graph.test_onnx_ops import _device, check, run_on_device

__all__ = ["_device"]  # the module fixture that opens the host device

CASES = [
    # MaxViT's attention (torchvision export): upper case and spaces
    ("B G H I D, B G H J D -> B G H I J", [(1, 2, 2, 3, 4), (1, 2, 2, 5, 4)]),
    ("B G H I J, B G H J D -> B G H I D", [(1, 2, 2, 3, 5), (1, 2, 2, 5, 4)]),
    # a and A are different axes
    ("aA,Ab->ab", [(3, 4), (4, 2)]),
    ("Aa,aA->", [(3, 4), (4, 3)]),
    ("ij , jk -> ik", [(3, 4), (4, 5)]),
    # ellipsis together with upper-case letters: its dims take letters the equation does not use
    ("...IJ,...JK->...IK", [(2, 3, 4), (2, 4, 5)]),
    ("A..., B... -> ...AB", [(3, 2, 4), (5, 1, 4)]),
    # diagonals and sums in upper case
    ("II->I", [(4, 4)]),
    ("IJ->", [(3, 4)]),
]
# implicit outputs with upper-case letters: letters seen once, in ASCII order (upper case
# before lower case) as numpy.einsum orders them (onnxruntime rejects upper case in an
# implicit output; numpy is the oracle)
IMPLICIT_MIXED = [
    ("IJ", [(3, 4)]),
    ("ij,JK", [(3, 4), (2, 5)]),
    ("bA", [(2, 3)]),
    ("Ba,aC", [(2, 3), (3, 4)]),
    ("...Aa", [(2, 3, 4)]),
]


@pytest.mark.parametrize(("eq", "shapes"), CASES, ids=[c[0] for c in CASES])
def test_einsum_equation(eq: str, shapes: list[tuple[int, ...]]) -> None:
    feeds = {f"x{i}": rand(*s, seed=i) for i, s in enumerate(shapes)}
    check(one_op("Einsum", feeds, {"equation": eq}, opset=12), feeds)


@pytest.mark.parametrize(("eq", "shapes"), IMPLICIT_MIXED, ids=[c[0] for c in IMPLICIT_MIXED])
def test_einsum_implicit_mixed_case(eq: str, shapes: list[tuple[int, ...]]) -> None:
    feeds = {f"x{i}": rand(*s, seed=i) for i, s in enumerate(shapes)}
    g = load_onnx(one_op("Einsum", feeds, {"equation": eq}, opset=12))
    want = {"y0": np.einsum(eq, *feeds.values())}
    for level in (0, 2):
        og = optimize(g, level=level)
        assert_close(run_reference(og, feeds), want, what=f"reference level {level}: ")
        assert_close(run_lowered(og, feeds), want, what=f"lowered level {level}: ")
        got = run_on_device(g, feeds, optimize_level=level, mode="sunk" if level else "per_op")
        assert_close(got, want, what=f"device level {level}: ")


@pytest.mark.parametrize(("eq", "shapes"), CASES + IMPLICIT_MIXED, ids=[c[0] for c in CASES + IMPLICIT_MIXED])
def test_parse_einsum_matches_numpy(eq: str, shapes: list[tuple[int, ...]]) -> None:
    xs = [rand(*s, seed=i).astype(np.float64) for i, s in enumerate(shapes)]
    ins, out, sizes = S.parse_einsum(eq, shapes)
    got = np.einsum(",".join(ins) + "->" + out, *xs)
    want = np.einsum(eq.replace(" ", ""), *xs)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert tuple(sizes[ch] for ch in out) == want.shape


@pytest.mark.parametrize(
    ("eq", "shapes", "msg"),
    [
        ("i1,1j->ij", [(2, 2), (2, 2)], "letters"),
        ("i...j...,jk->ik", [(2, 2), (2, 2)], "'...'"),
        ("Ij,jK->IK", [(2, 3), (4, 5)], "sizes"),
        ("AB,BC->AD", [(2, 3), (3, 4)], "bad output"),
    ],
)
def test_bad_equations_are_malformed_model_errors(eq: str, shapes: list[tuple[int, ...]], msg: str) -> None:
    feeds = {f"x{i}": rand(*s, seed=i) for i, s in enumerate(shapes)}
    with pytest.raises(MalformedModelError, match=msg):
        load_onnx(one_op("Einsum", feeds, {"equation": eq}, opset=12))


def test_too_many_axes_for_the_ellipsis() -> None:
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxy"  # 51 letters, 1 free for '...'
    S.parse_einsum(letters + "...", [(1,) * 52])
    with pytest.raises(ValueError, match="52"):
        S.parse_einsum(letters + "...", [(1,) * 53])
