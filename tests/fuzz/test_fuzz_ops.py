"""aioge.op over every registered op type with hostile arguments.

The corpus is tests/ops' table of one valid call per op type (``CASES``, which
a test keeps complete).  Each example mutates one call: integer attrs set to
int64/int32 edge values (0, -1, 2^31±1, 2^62, 2^63-1, INT64_MIN ...), lists of
them, attrs of the wrong type, int-valued inputs (axes, shapes, offsets)
filled with edges, zero-sized and huge dims, other dtypes.

Invariant: the call raises an aioge error (never a builtin, a crash or a
hang), or it runs and gives the same bytes twice; either way the stream still
runs the unmutated call, and the live-handle counters are back to baseline
at the end of the module.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import aioge
from aioge import Const, HostInput, TensorSpec
from aioge.errors import AioGeError
from tests.fuzz.fuzzutil import fuzz
from tests.ops.errors.cases import CASES
from tests.support.edges import BIG_DIMS, DTYPES, INT_EDGES
from tests.support.harness import live_handles

pytestmark = pytest.mark.anyio

# the integer attrs the kernels read (grep hrt_attr_get_int / k_attr_ints in cffi_build/hostrt)
INT_ATTRS = (
    "axis", "axes", "perm", "offsets", "size", "ksize", "strides", "pads", "dilations", "groups", "group",
    "depth_radius", "num_split", "split_dim", "size_splits", "multiples", "block_size", "N", "begin", "end",
    "begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask", "batch_dims", "dim",
    "concat_dim", "num_groups", "begin_norm_axis", "begin_params_axis", "seq_dim", "batch_dim", "diagonal",
    "output_padding", "shape", "num_axes", "offset_x", "input_size", "num_proj", "cell_depth", "dimension",
    "divisor_override", "dst_type", "dtype", "exclusive", "reverse", "keep_dims", "p",
)  # fmt: skip


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module", autouse=True)
def no_leaked_handles():
    before = live_handles()
    yield
    after = live_handles()
    assert after == before, f"leaked runtime handles: {after} != {before}"


@pytest.fixture(scope="module")
async def shared_stream():
    loop, errors = asyncio.get_running_loop(), []
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    async with aioge.open_device(0) as dev, dev.open_stream() as s:
        yield s
    loop.set_exception_handler(None)
    assert not errors, f"the event loop reported: {errors}"


def _value(rng: np.random.Generator, shape: tuple[int, ...], dt: str) -> np.ndarray:
    d = aioge.bfloat16 if dt == "bfloat16" else np.dtype(dt)
    if np.dtype(d).kind in "iub":
        return rng.integers(0, 2, size=shape).astype(d)
    return rng.standard_normal(shape).astype(d)


def _materialise(stream: Any, spec: Any, rng: np.random.Generator) -> Any:
    if spec is None:
        return None
    if spec[0] == "t":
        a = _value(rng, spec[1], spec[2])
        return stream.upload(a).reshape(a.shape)
    return HostInput(spec[1]) if spec[0] == "h" else Const(spec[1])


def _launch(stream: Any, case: Any, ins: list, outs: list, attrs: dict, formats: Any, seed: int) -> list:
    rng = np.random.default_rng(seed)
    tensors = [_materialise(stream, s, rng) for s in ins]
    specs = [TensorSpec(sh, dt) for sh, dt in outs]
    fm = formats if formats is not None and len(formats) == len(ins) + len(outs) else None
    return aioge.op(case.op, tensors, specs, attrs, stream=stream, formats=fm)


edge = st.sampled_from(INT_EDGES)


@st.composite
def mutation(draw: Any, case: Any) -> tuple[list, list, dict, Any]:
    ins, outs, attrs = list(case.ins), list(case.outs), dict(case.attrs)
    kind = draw(st.sampled_from(["attr", "attr", "attr", "value", "value", "dims", "outdims", "dtype", "attrtype"]))
    if kind == "attr":
        names = sorted({k for k, v in attrs.items() if isinstance(v, (int, list, tuple))} | set(INT_ATTRS))
        name = draw(st.sampled_from(names))
        old = attrs.get(name)
        if isinstance(old, (list, tuple)) and old and draw(st.booleans()):
            new = list(old)
            for _ in range(draw(st.integers(1, len(new)))):
                new[draw(st.integers(0, len(new) - 1))] = draw(edge)
            attrs[name] = new
        elif draw(st.booleans()):
            attrs[name] = draw(edge)
        else:
            attrs[name] = draw(st.lists(edge, max_size=9))
    elif kind == "attrtype":
        name = draw(st.sampled_from(sorted(set(attrs) | {"axis", "perm"})))
        attrs[name] = draw(st.sampled_from(["", "x" * 300, 1.5, float("nan"), True, [1.5], ["a"], [True]]))
    elif kind == "value":
        vals = [i for i, s in enumerate(ins) if s is not None and s[0] in "hc" and s[1].dtype.kind in "iu"]
        if not vals:
            return mutation_fallback(draw, ins, outs, attrs, case)
        i = draw(st.sampled_from(vals))
        kind_, arr = ins[i]
        info = np.iinfo(arr.dtype)
        n = arr.size if draw(st.booleans()) else draw(st.integers(0, 9))
        new = [min(max(v, info.min), info.max) for v in draw(st.lists(edge, min_size=n, max_size=n))]
        ins[i] = (kind_, np.array(new, arr.dtype).reshape(arr.shape if n == arr.size else (n,)))
    elif kind == "dims":
        return mutation_fallback(draw, ins, outs, attrs, case)
    elif kind == "outdims":
        j = draw(st.integers(0, len(outs) - 1))
        shape, dt = outs[j]
        big = draw(st.sampled_from(BIG_DIMS))
        outs[j] = ((big, *shape[1:]) if shape else (big,), dt)
    else:  # dtype of a tensor input or of the output
        ts = [i for i, s in enumerate(ins) if s is not None and s[0] == "t"]
        dt = draw(st.sampled_from(DTYPES))
        if ts and draw(st.booleans()):
            i = draw(st.sampled_from(ts))
            ins[i] = ("t", ins[i][1], dt)
        else:
            outs[0] = (outs[0][0], dt)
    return ins, outs, attrs, case.formats


def mutation_fallback(draw: Any, ins: list, outs: list, attrs: dict, case: Any) -> tuple[list, list, dict, Any]:
    """A zero-sized dim in a tensor input (and the same dim of the output when it lines up)."""
    ts = [i for i, s in enumerate(ins) if s is not None and s[0] == "t" and s[1]]
    if not ts:
        outs[0] = ((0,), outs[0][1])
        return ins, outs, attrs, case.formats
    i = draw(st.sampled_from(ts))
    shape = list(ins[i][1])
    d = draw(st.integers(0, len(shape) - 1))
    shape[d] = 0
    ins[i] = ("t", tuple(shape), ins[i][2])
    if draw(st.booleans()) and len(outs[0][0]) == len(shape):
        o = list(outs[0][0])
        o[d] = 0
        outs[0] = (tuple(o), outs[0][1])
    return ins, outs, attrs, case.formats


async def _run(stream: Any, case: Any, ins: list, outs: list, attrs: dict, formats: Any) -> list[bytes] | None:
    """The outputs' bytes, or None when the call or its execution raised an aioge error."""
    try:
        ys = _launch(stream, case, ins, outs, attrs, formats, seed=0)
        return [(await y.numpy()).tobytes() for y in ys]
    except AioGeError:
        return None


RUNS = {"calls": 0, "refused": 0}


@pytest.mark.parametrize("case", CASES, ids=[c.op for c in CASES])
async def test_hostile_arguments(shared_stream, case):
    stream = shared_stream

    # hypothesis draws the (seeded) examples; they run afterwards on this test's loop
    pending: list = []

    @fuzz()
    @given(m=mutation(case))
    def draw(m: Any) -> None:
        pending.append(m)

    draw()
    for ins, outs, attrs, formats in pending:
        RUNS["calls"] += 1
        first = await _run(stream, case, ins, outs, attrs, formats)
        try:
            await stream.synchronize()
        except AioGeError:
            pass  # a failure already raised to its awaiter is also the stream's sticky error
        if first is None:
            RUNS["refused"] += 1
            continue
        again = await _run(stream, case, ins, outs, attrs, formats)
        assert again == first, f"{case.op} {attrs} gave different bytes on a second run"
    # the stream still runs the valid call
    ys = _launch(stream, case, case.ins, case.outs, case.attrs, case.formats, seed=0)
    await ys[0]
    await stream.synchronize()
