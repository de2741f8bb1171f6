"""``torch.compile(backend="aioge")``: graph breaks, signatures, refusals; torch tensors in ``model.execute``."""

from __future__ import annotations

import asyncio
import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn

import aioge
from aioge.frontends import TrainingGraphError
from aioge.frontends.dynamo import close_runtime

_G = torch.Generator().manual_seed(0)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
    close_runtime()  # before the leak check: the backend's device is process-wide


class Breaks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 2)

    def forward(self, x):
        y = torch.relu(self.a(x))
        if float(y.sum()) > 0:  # data-dependent Python: a graph break
            y = y * 2
        return self.b(y)


def test_backend_is_registered():
    assert "aioge" in torch._dynamo.list_backends()


def test_graph_break_runs_both_parts_on_aioge():
    m = Breaks().eval()
    calls = []
    from aioge.frontends import dynamo

    real = dynamo._Compiled._build

    def counting(self, args):
        calls.append(self)
        return real(self, args)

    dynamo._Compiled._build = counting
    try:
        fn = torch.compile(m, backend="aioge")
        x = torch.randn(3, 4, generator=_G)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Dynamo's graph-break notice
            got = fn(x)
            ref = m(x)
    finally:
        dynamo._Compiled._build = real
    assert len(calls) >= 2  # the graph before the break and the one after
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)


def test_one_compile_per_signature_and_new_shapes():
    m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 3)).eval()
    fn = torch.compile(m, backend="aioge")
    with torch.no_grad():
        for n in (2, 5, 2, 7):  # a new batch makes Dynamo trace symbolically: still one aioge graph per shape
            x = torch.randn(n, 4, generator=_G)
            torch.testing.assert_close(fn(x), m(x), rtol=1e-4, atol=1e-5)


def test_outputs_share_memory_with_results_and_inputs_are_not_copied():
    from aioge._tensors import from_numpy, to_numpy

    t = torch.randn(4, 5, generator=_G)
    a = to_numpy(t)
    assert np.shares_memory(a, t.numpy())
    b = torch.randn(3, generator=_G).to(torch.bfloat16)
    assert to_numpy(b).dtype == aioge.bfloat16 and np.shares_memory(to_numpy(b), b.view(torch.int16).numpy())
    arr = np.arange(6, dtype=np.float32)
    assert from_numpy(arr).data_ptr() == arr.ctypes.data


def test_training_refused():
    m = nn.Linear(4, 2)  # parameters require grad, and grad mode is on
    fn = torch.compile(m, backend="aioge")
    with pytest.raises(Exception, match="inference only") as ei:
        fn(torch.randn(2, 4))
    chain, e = [], ei.value
    while e is not None:
        chain.append(type(e))
        e = e.__cause__ or e.__context__
    assert TrainingGraphError in chain


def test_unsupported_fails_unless_fallback():
    class Sorts(nn.Module):
        def forward(self, x):
            return torch.sort(x * 2, 1).values + 1

    m = Sorts().eval()
    x = torch.randn(3, 5, generator=_G)
    with torch.no_grad():
        with pytest.raises(Exception, match="sort"):
            torch.compile(m, backend="aioge")(x)
        torch._dynamo.reset()
        fn = torch.compile(m, backend="aioge", options={"fallback": True})
        with pytest.warns(RuntimeWarning, match="eagerly.*sort"):
            got = fn(x)
        torch.testing.assert_close(got, m(x))


def test_called_from_inside_an_event_loop():
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh()).eval()
    fn = torch.compile(m, backend="aioge")
    x = torch.randn(2, 4, generator=_G)

    async def main():
        with torch.no_grad():
            return fn(x)  # blocks this loop; the backend's device runs on its own

    torch.testing.assert_close(asyncio.run(main()), torch.tanh(m[0](x)).detach(), rtol=1e-4, atol=1e-5)


@pytest.mark.anyio
async def test_execute_takes_and_returns_torch_tensors(compiled):
    m = nn.Sequential(nn.Linear(6, 3), nn.ReLU()).eval()
    x = torch.randn(2, 6, generator=_G)
    model = await compiled(aioge.from_torch(m, (x,)))
    out = await model.execute({"input": x}, as_torch=True)
    assert isinstance(out["output"], torch.Tensor)
    with torch.no_grad():
        torch.testing.assert_close(out["output"], m(x), rtol=1e-4, atol=1e-5)
    grad = x.clone().requires_grad_(True)  # detached on the way in: execute needs no no_grad()
    out2 = await model.execute({"input": grad})
    np.testing.assert_allclose(out2["output"], out["output"].numpy(), rtol=0, atol=0)
    with pytest.raises(ValueError, match="exclude"):
        await model.execute({"input": x}, as_torch=True, as_tensors=True)
    with pytest.raises(ValueError, match="shape"):
        await model.execute({"input": torch.zeros(3, 6)})
