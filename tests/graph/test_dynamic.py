"""Dynamic shapes: graphs with symbolic input dims, specialised and compiled per concrete shape."""

from __future__ import annotations

import anyio
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import aioge
from aioge.graph import DynamicShapeError, Graph, ShapeInferenceError, load_onnx
from aioge.graph.passes.infer_shapes import infer_shapes
from tests.graph.onnx_util import assert_close, make_model, rand, run_ort

pytestmark = pytest.mark.anyio
D, H = 16, 2  # model width, heads


def _c(name: str, a: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(a), name)


def causal_attention() -> onnx.ModelProto:
    """A GPT-2-style block on x[B, S, D] with B and S symbolic: positions from Range over Shape(x),
    head reshapes from Shape -> Gather -> Concat, a causal mask from Trilu of ConstantOfShape, Where."""
    rng = np.random.default_rng(0)
    w = {k: (rng.standard_normal((D, D)) / 4).astype(np.float32) for k in ("wq", "wk", "wv")}
    inits = [_c(k, v) for k, v in w.items()] + [
        _c("pos_table", rng.standard_normal((64, D)).astype(np.float32)),
        _c("i0", np.array(0, np.int64)), _c("i1", np.array(1, np.int64)),
        _c("ax0", np.array([0], np.int64)), _c("heads", np.array([H, D // H], np.int64)),
        _c("width", np.array([D], np.int64)), _c("scale", np.array(1 / np.sqrt(D // H), np.float32)),
        _c("neg", np.array(-1e9, np.float32)),
    ]  # fmt: skip
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["xs"]),
        n("Gather", ["xs", "i0"], ["b"], axis=0),
        n("Gather", ["xs", "i1"], ["s"], axis=0),
        n("Range", ["i0", "s", "i1"], ["pos"]),
        n("Gather", ["pos_table", "pos"], ["pe"], axis=0),
        n("Add", ["x", "pe"], ["h"]),
        n("Unsqueeze", ["b", "ax0"], ["b1"]),
        n("Unsqueeze", ["s", "ax0"], ["s1"]),
        n("Concat", ["b1", "s1", "heads"], ["hshape"], axis=0),
        n("Concat", ["b1", "s1", "width"], ["oshape"], axis=0),
        n("Concat", ["s1", "s1"], ["mshape"], axis=0),
    ]
    for k in "qkv":
        nodes += [
            n("MatMul", ["h", f"w{k}"], [f"{k}0"]),
            n("Reshape", [f"{k}0", "hshape"], [f"{k}1"]),
            n("Transpose", [f"{k}1"], [k], perm=[0, 2, 3, 1] if k == "k" else [0, 2, 1, 3]),
        ]
    nodes += [
        n("MatMul", ["q", "k"], ["qk"]),
        n("Mul", ["qk", "scale"], ["sc"]),
        n("ConstantOfShape", ["mshape"], ["ones"], value=helper.make_tensor("v", TensorProto.BOOL, [1], [True])),
        n("Trilu", ["ones"], ["keep"], upper=0),
        n("Where", ["keep", "sc", "neg"], ["masked"]),
        n("Softmax", ["masked"], ["p"], axis=-1),
        n("MatMul", ["p", "v"], ["o"]),
        n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ot", "oshape"], ["y"]),
        n("ReduceSum", ["y", "ax0"], ["total"], keepdims=0),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", D])
    outs = [helper.make_tensor_value_info(k, TensorProto.FLOAT, None) for k in ("y", "total")]
    g = helper.make_graph(nodes, "causal_attention", [x], outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def mlp(batch: object = "N") -> Graph:
    g = Graph("mlp")
    x = g.input("x", (batch, 8))
    w = g.constant("w", np.linspace(-1, 1, 8 * 4, dtype=np.float32).reshape(8, 4))
    g.output(g.add_node("Relu", [g.add_node("MatMul", [x, w])], name="y"))
    return g


def mlp_ref(x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4), 0)


# ---- the graph side ---------------------------------------------------------------------------
def test_symbolic_inputs_make_a_dynamic_graph() -> None:
    g = Graph()
    x = g.input("x", ("batch", 3, None), "float32")
    y = g.input("y", (2,))
    assert x.shape is None and x.dtype == np.float32 and y.shape == (2,)
    assert g.is_dynamic and g.symbolic == {"x": ("batch", 3, None)}
    assert g.input_dims("x") == ("batch", 3, None) and g.input_dims("y") == (2,)
    assert "%x: float32[batchx3x?]" in str(g)
    assert g.copy().symbolic == g.symbolic
    with pytest.raises(DynamicShapeError):
        g.input("z", (-1, "n"))
    with pytest.raises(DynamicShapeError, match="empty dim name"):
        g.input("z", ("", 3))


def test_specialize_binds_dim_names_across_inputs() -> None:
    g = Graph("two")
    a = g.input("a", ("n", 4))
    b = g.input("b", ("n", None))
    g.output(g.add_node("Add", [a, b]))
    g.validate()  # structure and dtypes only: shapes are not known yet
    s = g.specialize({"a": (3, 4), "b": (3, 4)})
    assert not s.is_dynamic and s.values["a"].shape == (3, 4)
    assert g.is_dynamic and g.values["a"].shape is None  # the original is untouched
    assert infer_shapes(s).values[g.outputs[0]].shape == (3, 4)
    bad = [
        ({"a": (3, 4), "b": (2, 4)}, r"dim 'n' is 2 here but 3"),
        ({"a": (3, 5), "b": (3, 4)}, r"'a' has shape \(3, 5\); the graph takes nx4"),
        ({"a": (3, 4, 1), "b": (3, 4)}, r"'a'.*takes nx4"),
        ({"a": (3, 4)}, r"no concrete shape for the symbolic inputs \['b'\]"),
        ({"a": (3, 4), "b": (3, 4), "c": (1,)}, r"\['c'\] are not inputs.*\['a', 'b'\]"),
    ]
    for shapes, msg in bad:
        with pytest.raises(ShapeInferenceError, match=msg):
            g.specialize(shapes)
    with pytest.raises(ShapeInferenceError, match=r"'a' and 'b' do not broadcast|broadcast"):
        infer_shapes(g.specialize({"a": (3, 4), "b": (3, 5)}))
    with pytest.raises(DynamicShapeError, match=r"'a' has symbolic dims.*specialize"):
        infer_shapes(g)


def test_load_onnx_keeps_symbolic_dims_unless_pinned() -> None:
    m = causal_attention()
    g = load_onnx(m)
    assert g.is_dynamic and g.symbolic == {"x": ("B", "S", D)}
    pinned = load_onnx(m, input_shapes={"x": (2, 5, D)})
    assert not pinned.is_dynamic and pinned.values["y"].shape == (2, 5, D)
    anon = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(2, 3)}, ["y"], input_dims={"x": [None, 3]})
    assert load_onnx(anon).symbolic == {"x": (None, 3)}


# ---- the runtime side -------------------------------------------------------------------------
async def test_one_compile_runs_every_shape_like_onnxruntime(dev) -> None:
    m = causal_attention()
    async with await dev.compile(load_onnx(m)) as model:
        assert isinstance(model, aioge.DynamicCompiledGraph)
        assert model.inputs == {"x": (("B", "S", D), np.dtype("float32"))}
        assert model.outputs == {"y": (("B", "S", D), np.dtype("float32")), "total": (("S", D), np.dtype("float32"))}
        rng = np.random.default_rng(1)
        for b, s in [(1, 5), (3, 7), (2, 1), (1, 5)]:
            x = rng.standard_normal((b, s, D)).astype(np.float32)
            assert_close(await model.execute({"x": x}), run_ort(m, {"x": x}), what=f"{b}x{s}: ")
        assert model.stats == {"plans": 3, "max_plans": aioge.runtime.graphs.dynamic.MAX_PLANS, "hits": 1, "misses": 3,
                               "compiles": 3, "evictions": 0, "compiling": 0}  # fmt: skip
        assert model.cached_shapes == [{"x": (3, 7, D)}, {"x": (2, 1, D)}, {"x": (1, 5, D)}]
        with pytest.raises(ValueError, match=r"'x' has shape \(2, 5\); the graph takes BxSx16"):
            await model.execute({"x": rand(2, 5)})
        with pytest.raises(TypeError, match="dtype"):
            await model.execute({"x": np.zeros((1, 2, D), np.float64)})
        with pytest.raises(ValueError, match="missing inputs"):
            await model.execute({})
        assert model.stats["compiles"] == 3  # a bad feed compiles nothing


async def test_concurrent_first_runs_share_one_specialisation(dev) -> None:
    async with await dev.compile(mlp()) as model:
        xs = [np.full((6, 8), i, np.float32) for i in range(4)]
        results: dict[int, np.ndarray] = {}

        async def run(i: int) -> None:
            results[i] = (await model.execute({"x": xs[i]}))["y"]

        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(run, i)
        for i in range(4):
            np.testing.assert_allclose(results[i], mlp_ref(xs[i]), rtol=1e-5)
        assert model.stats["compiles"] == 1 and model.stats["misses"] == 4 and model.stats["plans"] == 1
        assert model.stats["compiling"] == 0


async def test_plans_are_a_bounded_lru(dev) -> None:
    async with await dev.compile(mlp()) as model:
        model.max_plans = 2
        first = await model.specialize({"x": (1, 8)})
        for n in (1, 2, 3, 2):
            x = np.arange(n * 8, dtype=np.float32).reshape(n, 8)
            np.testing.assert_allclose((await model.execute({"x": x}))["y"], mlp_ref(x), rtol=1e-5)
        assert first.closed  # the least recently used plan went when the third came
        assert model.cached_shapes == [{"x": (3, 8)}, {"x": (2, 8)}]
        st = model.stats
        assert (st["plans"], st["evictions"], st["compiles"], st["hits"]) == (2, 1, 3, 2)
        model.max_plans = 1
        assert model.cached_shapes == [{"x": (2, 8)}] and model.stats["evictions"] == 2
        with pytest.raises(ValueError, match=">= 1"):
            model.max_plans = 0


async def test_a_plan_evicted_while_in_use_finishes_its_run(dev) -> None:
    async with await dev.compile(mlp()) as model:
        model.max_plans = 1
        xs = [np.ones((n, 8), np.float32) * n for n in (1, 2, 3, 4, 1, 2)]
        got: dict[int, np.ndarray] = {}

        async def run(i: int) -> None:
            got[i] = (await model.execute({"x": xs[i]}))["y"]

        async with anyio.create_task_group() as tg:
            for i in range(len(xs)):
                tg.start_soon(run, i)
        for i, x in enumerate(xs):
            np.testing.assert_allclose(got[i], mlp_ref(x), rtol=1e-5)
        assert model.stats["plans"] == 1


async def test_launch_needs_a_specialised_shape(dev, stream) -> None:
    async with await dev.compile(mlp()) as model:
        x = stream.upload(np.ones((5, 8), np.float32))
        with pytest.raises(ValueError, match=r"no plan for input shapes.*specialize"):
            model.launch([x], stream=stream)
        plan = await model.specialize({"x": (5, 8)})
        assert isinstance(plan, aioge.CompiledGraph) and plan.inputs == {"x": ((5, 8), np.dtype("float32"))}
        outs, _ = model.launch([x], stream=stream)
        np.testing.assert_allclose(await outs["y"].numpy(), mlp_ref(np.ones((5, 8), np.float32)), rtol=1e-5)
        with pytest.raises(ValueError, match="takes Nx8"):
            model.launch([stream.upload(np.ones((5, 7), np.float32))], stream=stream)


async def test_closing_closes_every_plan(dev) -> None:
    model = await dev.compile(mlp())
    plan = await model.specialize({"x": (2, 8)})
    await model.aclose()
    assert model.closed and plan.closed
    with pytest.raises(aioge.ClosedResourceError):
        await model.execute({"x": np.ones((2, 8), np.float32)})
    other = await dev.compile(mlp())
    await other.specialize({"x": (3, 8)})
    await dev.aclose()  # the device closes its dynamic models with their plans
    assert other.closed


async def test_input_shapes_still_pin_a_static_model(dev) -> None:
    m = causal_attention()
    async with await dev.compile(load_onnx(m, input_shapes={"x": (2, 3, D)})) as model:
        assert isinstance(model, aioge.CompiledGraph) and model.inputs["x"][0] == (2, 3, D)
        x = np.random.default_rng(2).standard_normal((2, 3, D)).astype(np.float32)
        assert_close(await model.execute({"x": x}), run_ort(m, {"x": x}))


async def test_a_shape_the_graph_rejects_fails_alone(dev) -> None:
    g = Graph("fixed_rows")
    x = g.input("x", ("n", 3))
    g.output(g.add_node("Reshape", [x, g.constant("to", np.array([2, -1], np.int64))], name="to_two_rows"))
    async with await dev.compile(g) as model:
        with pytest.raises(ShapeInferenceError, match="to_two_rows"):
            await model.execute({"x": np.ones((3, 3), np.float32)})  # 9 elements do not make 2 rows
        assert model.stats["compiling"] == 0 and model.stats["plans"] == 0
        got = await model.execute({"x": np.ones((4, 3), np.float32)})
        assert got[g.outputs[0]].shape == (2, 6)


async def test_a_cancelled_first_run_leaves_nothing_behind(dev) -> None:
    async with await dev.compile(mlp()) as model:
        with anyio.move_on_after(0):  # cancelled at its first wait, the compile goes on on its thread
            await model.execute({"x": np.ones((9, 8), np.float32)})
        assert model.stats["compiling"] == 0
        x = np.ones((9, 8), np.float32)
        np.testing.assert_allclose((await model.execute({"x": x}))["y"], mlp_ref(x), rtol=1e-5)
        assert model.stats["plans"] == 1
