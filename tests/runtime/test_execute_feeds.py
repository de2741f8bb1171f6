"""What ``execute()`` takes: a dict of input name -> array, or one array for a model of one input.

Anything else is a :class:`aioge.FeedError` (a TypeError and a ValueError) naming what the
model takes, the same on every route an execution can take: the synchronous path of small
host executions, the host path (one task), the launch path (device tensors out), the per-op
mode and dynamic-shape models.
"""

from __future__ import annotations

import numpy as np
import pytest

import aioge
from aioge.graph import Graph, run_reference
from tests.runtime.test_executable import ew_chain, mlp
from tests.runtime.test_execute_now import launched, until_now

pytestmark = pytest.mark.anyio


def one_input() -> Graph:
    g = Graph("one")
    x = g.input("x", (3, 5), "float32")
    g.output(g.add_node("Sigmoid", [g.add_node("Mul", [x, g.constant("two", np.float32(2))])]))
    return g


def dynamic_one_input() -> Graph:
    g = Graph("dyn")
    x = g.input("x", ("N", 8), "float32")
    w = g.constant("w", np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4))
    g.output(g.add_node("Relu", [g.add_node("MatMul", [x, w])], name="y"))
    return g


def dynamic_two_inputs() -> Graph:
    g = Graph("dyn2")
    x = g.input("x", ("N", 4), "float32")
    y = g.input("y", (4,), "float32")
    g.output(g.add_node("Add", [x, y], name="z"))
    return g


X = np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5)
NOT_CONTIGUOUS = np.asfortranarray(X)  # the synchronous path declines it: the host path runs it


def torch_tensor(a: np.ndarray):
    torch = pytest.importorskip("torch")
    return torch.from_numpy(a.copy())


def wrong_feeds(x: np.ndarray) -> list:
    return [[x], (x,), 3, 2.5, "x", None]


def test_feed_error_is_both_a_type_and_a_value_error() -> None:
    assert issubclass(aioge.FeedError, aioge.AioGeError)
    assert issubclass(aioge.FeedError, TypeError) and issubclass(aioge.FeedError, ValueError)


async def test_one_array_is_the_input_of_a_one_input_model_on_the_synchronous_path(dev, compiled):
    model = await compiled(one_input())
    want = run_reference(one_input(), {"x": X})
    (name,) = model.outputs
    s = dev.default_stream
    await until_now(model, {"x": X}, s)  # the model runs on the caller's thread now
    before = launched(s)
    got = await model.execute(X)
    assert launched(s) == before, "a bare array took the general path"
    np.testing.assert_allclose(got[name], want[name], rtol=1e-6)


@pytest.mark.parametrize("mode", ["sunk", "per_op"])
async def test_one_array_on_the_host_and_launch_paths(dev, compiled, mode):
    model = await compiled(one_input(), mode=mode)
    want = run_reference(one_input(), {"x": X})[next(iter(one_input().outputs))]
    (name,) = model.outputs
    got = await model.execute(NOT_CONTIGUOUS)  # not contiguous: the host path
    np.testing.assert_allclose(got[name], want, rtol=1e-6)
    outs = await model.execute(X, as_tensors=True)  # device tensors out: the launch path
    np.testing.assert_allclose(await outs[name].numpy(), want, rtol=1e-6)
    t = dev.default_stream.upload(X)  # a device tensor, used in place
    np.testing.assert_allclose((await model.execute(t))[name], want, rtol=1e-6)
    got = await model.execute(torch_tensor(X), as_torch=True)
    np.testing.assert_allclose(got[name].numpy(), want, rtol=1e-6)


async def test_mlp_takes_one_array(compiled):
    model = await compiled(mlp())
    x = np.ones((4, 8), np.float32)
    (name,) = model.outputs
    np.testing.assert_array_equal((await model.execute(x))[name], (await model.execute({"x": x}))[name])


@pytest.mark.parametrize("mode", ["sunk", "per_op"])
async def test_wrong_feeds_are_feed_errors_on_every_route(dev, compiled, mode):
    one = await compiled(one_input(), mode=mode)
    two = await compiled(ew_chain(), mode=mode)
    s = dev.default_stream
    if mode == "sunk":
        await until_now(one, {"x": X}, s)  # the synchronous path is armed: it must not see these first
    for wrong in wrong_feeds(X):
        for kw in ({}, {"as_tensors": True}):
            with pytest.raises(aioge.FeedError, match=r"one: execute\(\) takes a dict .* the model takes "
                                                      r"\{'x': float32\[3, 5\]\}"):  # fmt: skip
                await one.execute(wrong, **kw)
    y = np.ones(5, np.float32)
    two_inputs = r"ew: execute\(\) was given one array, but the model takes 2 inputs; .*\{'x': float32\[3, 5\], 'y'"
    for bare in (X, NOT_CONTIGUOUS, s.upload(X), torch_tensor(X)):
        for kw in ({}, {"as_tensors": True}):
            with pytest.raises(aioge.FeedError, match=two_inputs):
                await two.execute(bare, **kw)
    for wrong in [[X, y], (X, y), 7]:
        with pytest.raises(aioge.FeedError, match="takes a dict"):
            await two.execute(wrong)
    with pytest.raises(aioge.FeedError, match=r"missing inputs \['y'\]"):
        await two.execute({"x": X})
    # the model is fine afterwards, on every path
    want = run_reference(ew_chain(), {"x": X, "y": y})
    (name,) = two.outputs
    np.testing.assert_allclose((await two.execute({"x": X, "y": y}))[name], want[name], rtol=1e-6)


async def test_dynamic_models_take_one_array_and_give_the_same_errors(dev):
    async with await dev.compile(dynamic_one_input()) as model:
        assert isinstance(model, aioge.DynamicCompiledGraph)
        w = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
        for n in (2, 5):
            x = np.linspace(-2, 2, n * 8, dtype=np.float32).reshape(n, 8)
            np.testing.assert_allclose((await model.execute(x))["y"], np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)
        for wrong in wrong_feeds(x):
            with pytest.raises(aioge.FeedError, match=r"dyn: execute\(\) takes a dict .*\{'x': float32\[N, 8\]\}"):
                await model.execute(wrong)
        assert model.stats["compiles"] == 2  # a bad feed compiles nothing
    async with await dev.compile(dynamic_two_inputs()) as model:
        assert isinstance(model, aioge.DynamicCompiledGraph)
        x = np.ones((2, 4), np.float32)
        with pytest.raises(aioge.FeedError, match=r"dyn2: execute\(\) was given one array, but the model takes 2"):
            await model.execute(x)
        with pytest.raises(aioge.FeedError, match="takes a dict"):
            await model.execute([x, np.ones(4, np.float32)])
        with pytest.raises(aioge.FeedError, match=r"unknown inputs \['q'\]"):
            await model.execute({"x": x, "y": np.ones(4, np.float32), "q": x})
        assert model.stats["compiles"] == 0
