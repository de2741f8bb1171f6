"""The ONNX backend tests of the onnx wheel, on the host runtime's kernels.

Every case whose ops aioge implements must pass: compiled for the host
target (optimize level 2, sunk) and also per op at level 0 (no fusion, every
node through ``aclopCompileAndExecute``), both compared with the stored
expected outputs (onnxruntime for the ``light`` models).  The only other
outcome allowed for an implemented op is a typed refusal of a feature aioge
does not implement, listed in :data:`REFUSED` with the reason -- a new one
fails the test, as does a case that stops being refused.  ``python -m
pytest tests/graph/test_onnx_backend.py -s`` prints the counts (the README
quotes them; ``python tools/onnx_node_counts.py`` prints its table).  The
bigger light models run under the ``slow`` marker.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import aioge
from aioge.graph import DynamicShapeError, LoweringError, MalformedModelError, UnsupportedOpError, load_onnx
from aioge.graph.onnx_import import SUPPORTED_OPS
from aioge.runtime.graphs.compile import compile_graph
from tests.graph.onnx_backend import Case, dir_cases, exotic_types, light_cases, node_cases, to_opset_21

#: implemented ops' node tests that aioge refuses, with the reason (a typed error at load or compile)
REFUSED = {
    "test_training_dropout": "training mode (random)",
    "test_training_dropout_default": "training mode (random)",
    "test_training_dropout_default_mask": "training mode (random)",
    "test_training_dropout_mask": "training mode (random)",
    "test_training_dropout_zero_ratio": "training mode (random)",
    "test_training_dropout_zero_ratio_mask": "training mode (random)",
}

LIGHT_FAST = ("light_squeezenet", "light_shufflenet", "light_inception_v1")


def _refusal(e: BaseException) -> bool:
    if isinstance(e, (UnsupportedOpError, LoweringError)):
        return True
    return isinstance(e, MalformedModelError) and "not supported" in str(e)


def _load_frozen(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[Any, list[str]]:
    """load_onnx, freezing the graph inputs a shape depends on into initializers."""
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    frozen: list[str] = []
    for _ in range(8):
        try:
            return load_onnx(m2), frozen
        except DynamicShapeError as e:
            names = re.findall(r"'([^']+)'\) must be a compile-time", str(e))
            prod = {o: n for n in m2.graph.node for o in n.output}
            todo, seen, cand = list(names), set(), []
            while todo:
                v = todo.pop()
                if v in seen:
                    continue
                seen.add(v)
                if v in feeds and v not in frozen:
                    cand.append(v)
                elif v in prod:
                    todo.extend(x for x in prod[v].input if x)
            if not cand:
                raise
            for n in cand:
                m2.graph.initializer.append(numpy_helper.from_array(feeds[n], n))
                frozen.append(n)
            keep = [i for i in m2.graph.input if i.name not in frozen]
            del m2.graph.input[:]
            m2.graph.input.extend(keep)
    raise AssertionError("freezing did not converge")


def _expected(case: Case, m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    names = [o.name for o in m.graph.output]
    if case.outputs is not None:
        return dict(zip(names, case.outputs, strict=False))
    from tests.graph.onnx_util import run_ort

    return run_ort(m, feeds)


#: float16/bfloat16 tolerances: the reference rounds every intermediate to the narrow type, aioge's fused
#: chains compute in float32 and round once (1 ulp: 2^-11 and 2^-8 relative)
_HALF_RTOL = {"float16": 4e-3, "bfloat16": 1e-2}


def _compare(got: dict[str, np.ndarray], want: dict[str, np.ndarray], rtol: float, atol: float) -> None:
    for k, w in want.items():
        g = np.asarray(got[k])
        w = np.asarray(w)
        assert g.shape == w.shape, f"{k}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{k}: dtype {g.dtype} != {w.dtype}"
        if w.dtype.name in _HALF_RTOL:
            r = max(rtol, _HALF_RTOL[w.dtype.name])
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=r, atol=max(atol, r / 8),
                                       err_msg=k)  # fmt: skip
        elif w.dtype.kind in "fc":
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol, err_msg=k)
        else:
            np.testing.assert_array_equal(g, w, err_msg=k)


def run_case(case: Case, dev: Any, modes: tuple[tuple[int, str], ...]) -> tuple[str, str]:
    """(outcome, detail); see onnx_backend.py for the outcomes."""
    if exotic_types(case.model):
        return "not_applicable", "types"
    missing = sorted(case.ops - SUPPORTED_OPS)
    if missing:
        return "unsupported_op", ",".join(missing)
    try:
        m = to_opset_21(case.model)
    except Exception as e:  # the converter's own refusal: the case does not apply at opset 21
        return "not_applicable", f"opset: {type(e).__name__}"
    inits = {t.name for t in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    feeds = dict(zip(names, case.inputs, strict=False))
    try:
        want = _expected(case, m, feeds)
        g, frozen = _load_frozen(m, feeds)
        for f in frozen:
            feeds.pop(f)
        for level, mode in modes:
            model = compile_graph(dev, g, optimize=level, mode=mode)
            try:
                got = asyncio.run(model.execute({k: feeds[k] for k in model.inputs}))
            finally:
                model.close()
            _compare(got, want, case.rtol, case.atol)
    except Exception as e:
        if _refusal(e):
            return "refused", f"{type(e).__name__}: {e}"
        return "failed", f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    return "passed", ""


@pytest.fixture(scope="module")
def device() -> Any:
    dev = aioge.open_device(0)
    yield dev
    dev.close()


def _run_all(cases: list[Case], dev: Any, modes: tuple[tuple[int, str], ...]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for c in cases:
        outcome, detail = run_case(c, dev, modes)
        out.setdefault(outcome, {})[c.name] = detail
    counts = Counter({k: len(v) for k, v in out.items()})
    print(f"\n{cases[0].source if cases else '?'}: {dict(counts)}")
    return out


BOTH = ((2, "sunk"), (0, "per_op"))


def test_node_cases(device: Any) -> None:
    res = _run_all(list(node_cases()), device, BOTH)
    failed = res.get("failed", {})
    assert not failed, "\n".join(f"{k}: {v}" for k, v in sorted(failed.items()))
    refused = res.get("refused", {})
    assert set(refused) == set(REFUSED), {"new": sorted(set(refused) - set(REFUSED)),
                                          "no longer refused": sorted(set(REFUSED) - set(refused))}  # fmt: skip
    assert len(res.get("passed", {})) >= 1110  # the README table (onnx 1.23.2)


@pytest.mark.parametrize("source", ["pytorch-converted", "pytorch-operator", "simple"])
def test_model_directories(device: Any, source: str) -> None:
    cases = dir_cases(source)
    res = _run_all(cases, device, BOTH)
    failed = res.get("failed", {})
    assert not failed, "\n".join(f"{k}: {v}" for k, v in sorted(failed.items()))
    assert not res.get("refused"), res.get("refused")
    if source.startswith("pytorch"):  # the opset-6 exports load (upgraded) and pass
        assert len(res.get("passed", {})) >= 0.9 * len(cases), res


def test_light_models(device: Any) -> None:
    res = _run_all(light_cases(LIGHT_FAST), device, ((2, "sunk"),))
    assert set(res.get("passed", {})) == set(LIGHT_FAST), res


@pytest.mark.slow
def test_light_models_all(device: Any) -> None:
    res = _run_all(light_cases(), device, ((2, "sunk"),))
    assert not res.get("failed"), res.get("failed")
    assert len(res.get("passed", {})) == 9
