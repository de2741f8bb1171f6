"""Exporters' tanh Gelu (GPT-2's gelu_new, ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``) becomes
one ``Gelu`` with ``approximate="tanh"``, which the bias + activation fusion puts in the matrix
product's epilogue; arrangements that are not that Gelu stay as they are.  Results equal the unfused
graph's (numpy reference) and, on the device, within float32 rounding."""

from __future__ import annotations

import math

import numpy as np
import pytest

import aioge
from aioge.graph import Graph, optimize
from aioge.graph.passes import fuse_gelu, infer_shapes
from aioge.graph.reference import run_reference
from tests.graph.test_fuse_gelu import feeds, ops_of, same_results

K, N = 16, 24
C = math.sqrt(2.0 / math.pi)


def tanh_gelu_graph(arrangement: str, *, c: float = C, k: float = 0.044715, power: float = 3.0,
                    half: float = 0.5, one: float = 1.0, matmul: bool = True, extra_use: bool = False,
                    other_leaf: bool = False) -> Graph:  # fmt: skip
    """x[3, K] (@ W[K, N] + b) -> the tanh Gelu written as ``arrangement`` -> y."""
    rng = np.random.default_rng(0)
    g = Graph("gelu_tanh")
    x = g.input("x", (3, K), "float32")
    if matmul:
        h = g.add_node("MatMul", [x, g.constant("w", rng.standard_normal((K, N)).astype(np.float32))], name="mm")
        x = g.add_node("Add", [h, g.constant("b", rng.standard_normal(N).astype(np.float32))], name="bias")
    z = g.input("z", (3, N if matmul else K), "float32") if other_leaf else x
    cst = lambda name, v: g.constant(name, np.array(v, np.float32))  # noqa: E731
    if arrangement == "torch_pow":  # HF gelu_new: c * (x + k * pow(x, 3))
        cube = g.add_node("Pow", [z, cst("three", power)], name="cube")
        inner = g.add_node("Add", [x, g.add_node("Mul", [cst("k", k), cube], name="kx3")], name="inner")
        arg = g.add_node("Mul", [cst("c", c), inner], name="arg")
    elif arrangement == "cube_mul":  # x * x * x, and the scale divided out
        cube = g.add_node("Mul", [x, z], name="sq")
        for i in range(int(power) - 2):
            cube = g.add_node("Mul", [cube, x], name=f"cube{i}")
        inner = g.add_node("Add", [g.add_node("Mul", [cube, cst("k", k)], name="kx3"), x], name="inner")
        arg = g.add_node("Div", [inner, cst("c", 1.0 / c)], name="arg")
    else:  # "megatron": c * x * (1 + k * x * x)
        sq = g.add_node("Mul", [g.add_node("Mul", [cst("k", k), x], name="kx"), z], name="kx2")
        if power != 3.0:
            sq = g.add_node("Mul", [sq, x], name="kx3")
        poly = g.add_node("Add", [cst("one_in", 1.0), sq], name="poly")
        arg = g.add_node("Mul", [g.add_node("Mul", [x, cst("c", c)], name="cx"), poly], name="arg")
    t = g.add_node("Add", [g.add_node("Tanh", [arg], name="tanh"), cst("one", one)], name="plus1")
    if arrangement == "torch_pow":  # (0.5 * x) * (1 + tanh)
        y = g.add_node("Mul", [g.add_node("Mul", [cst("half", half), x], name="hx"), t], name="m1")
    elif arrangement == "cube_mul":  # (x * (1 + tanh)) * 0.5
        y = g.add_node("Mul", [g.add_node("Mul", [x, t], name="m1"), cst("half", half)], name="m2")
    else:  # ((1 + tanh) * 0.5) * x
        y = g.add_node("Mul", [x, g.add_node("Mul", [t, cst("half", half)], name="m1")], name="m2")
    g.output(y)
    if extra_use:
        g.output(inner if arrangement != "megatron" else poly)
    return g


ARRANGEMENTS = ["torch_pow", "cube_mul", "megatron"]


@pytest.mark.parametrize("arrangement", ARRANGEMENTS)
def test_each_arrangement_becomes_one_tanh_gelu(arrangement):
    g = tanh_gelu_graph(arrangement, matmul=False)
    f = fuse_gelu(infer_shapes(g))
    assert ops_of(f) == ["Gelu"] and f.outputs == g.outputs
    assert f.nodes[0].attrs == {"approximate": "tanh"} and f.nodes[0].inputs == ["x"]
    assert set(f.constants) == set()
    same_results(g, f)


@pytest.mark.parametrize("arrangement", ARRANGEMENTS)
def test_the_pipeline_puts_it_in_the_products_epilogue(arrangement):
    g = tanh_gelu_graph(arrangement)
    f = optimize(g)
    assert ops_of(f) == ["_FusedMatMul"] and f.nodes[0].attrs["activation"] == "GeluTanh"
    same_results(g, f, rtol=1e-4)


def test_the_exporters_rounded_constants_still_match():
    g = tanh_gelu_graph("megatron", c=0.79788456, matmul=False)  # Megatron writes 8 digits
    assert ops_of(fuse_gelu(infer_shapes(g))) == ["Gelu"]


NOT_GELU = [
    {"k": 0.05},
    {"c": 0.8},
    {"power": 2.0},
    {"power": 4.0},
    {"half": 0.25},
    {"one": 2.0},
    {"extra_use": True},
    {"other_leaf": True},
]


@pytest.mark.parametrize("arrangement", ARRANGEMENTS)
@pytest.mark.parametrize("change", NOT_GELU, ids=[next(iter(c)) + str(next(iter(c.values()))) for c in NOT_GELU])
def test_what_is_not_gelu_stays(arrangement, change):
    g = tanh_gelu_graph(arrangement, matmul=False, **change)
    f = fuse_gelu(infer_shapes(g))
    assert "Tanh" in ops_of(f) and "Gelu" not in ops_of(f)
    same_results(g, f)


def test_a_broadcasting_constant_stops_it():
    g = Graph("bcast")
    x = g.input("x", (3, K), "float32")
    inner = g.add_node("Add", [x, g.add_node("Mul", [g.add_node("Pow", [x, g.constant("p", np.array(3, np.float32))]),
                                                     g.constant("k", np.array(0.044715, np.float32))])])  # fmt: skip
    c = g.constant("c", np.full((1, 1, 1), C, np.float32))  # one element, rank 3: broadcasts y
    t = g.add_node(
        "Add", [g.add_node("Tanh", [g.add_node("Mul", [inner, c])]), g.constant("one", np.array(1.0, np.float32))]
    )
    g.output(g.add_node("Mul", [g.add_node("Mul", [x, t]), g.constant("half", np.array(0.5, np.float32))]))
    f = fuse_gelu(infer_shapes(g))
    assert "Gelu" not in ops_of(f) and len(f.nodes) == len(g.nodes)


def test_a_plain_tanh_stays():
    g = Graph("tanh")
    x = g.input("x", (3, K), "float32")
    t = g.add_node("Add", [g.add_node("Tanh", [x]), g.constant("one", np.array(1.0, np.float32))])
    g.output(g.add_node("Mul", [g.add_node("Mul", [x, t]), g.constant("half", np.array(0.5, np.float32))]))
    assert "Gelu" not in ops_of(fuse_gelu(infer_shapes(g)))


@pytest.mark.anyio
@pytest.mark.parametrize("arrangement", ["torch_pow", "megatron"])
async def test_on_the_device_it_matches_the_unfused_graph(arrangement):
    g = tanh_gelu_graph(arrangement)
    f = feeds(g)
    want = run_reference(g, f)[g.outputs[0]]
    async with aioge.open_device(0) as dev:
        model = await dev.compile(g)
        got = (await model.execute(f))[g.outputs[0]]
        await model.aclose()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


class _TanhGelu:
    """torch modules whose legacy ONNX export writes the tanh Gelu three ways."""

    @staticmethod
    def module(kind: str) -> object:
        torch = pytest.importorskip("torch")

        class M(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = torch.nn.Linear(K, N)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                x = self.fc(x)
                if kind == "gelu_new":  # GPT-2 (Hugging Face NewGELUActivation)
                    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
                if kind == "megatron":
                    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))
                return torch.nn.functional.gelu(x, approximate="tanh")  # opset 17: decomposed

        torch.manual_seed(0)
        return M().eval()


@pytest.mark.parametrize("kind", ["gelu_new", "megatron", "functional"])
def test_torch_exports_end_in_the_products_epilogue(kind):
    import io
    import warnings

    torch = pytest.importorskip("torch")
    m = _TanhGelu.module(kind)
    x = torch.randn(8, K) * 3
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation warning
        torch.onnx.export(m, (x,), buf, dynamo=False, opset_version=17)
    g = aioge.load_onnx(buf.getvalue())
    assert "Tanh" in ops_of(g)
    f = optimize(g)
    assert ops_of(f) == ["_FusedMatMul"] and f.nodes[0].attrs["activation"] == "GeluTanh"
    got = next(iter(run_reference(f, {g.inputs[0]: x.numpy()}).values()))
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
