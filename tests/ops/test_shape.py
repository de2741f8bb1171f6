"""Shape and data-movement ops against numpy, typed and CANN-level."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import aioge
from aioge import Const, HostInput, TensorSpec, ops
from tests.ops.opsutil import BF16, F16, F32, few, rand, shapes, up

pytestmark = pytest.mark.anyio

ANY = [
    F32,
    F16,
    BF16,
    np.dtype(np.float64),
    np.dtype(np.int8),
    np.dtype(np.int32),
    np.dtype(np.int64),
    np.dtype(np.uint8),
    np.dtype(np.bool_),
    np.dtype(np.uint16),
]


def _eq(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint8), np.ascontiguousarray(want).reshape(-1).view(np.uint8))


@few(60)
@given(shape=shapes(0, 6, 1, 5), dt=st.sampled_from(ANY), seed=st.integers(0, 2**16))
async def test_transpose(stream, shape, dt, seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, shape, dt)
    perm = tuple(int(a) for a in rng.permutation(len(shape)))
    _eq(await ops.transpose(up(stream, x), perm).numpy(), x.transpose(perm))


async def test_transpose_large_blocked(stream):
    x = np.arange(300 * 257, dtype=np.float32).reshape(300, 257)
    _eq(await ops.transpose(up(stream, x)).numpy(), x.T)
    y = np.arange(2 * 33 * 65 * 3, dtype=np.int16).reshape(2, 33, 65, 3)
    _eq(await ops.transpose(up(stream, y), (0, 3, 2, 1)).numpy(), y.transpose(0, 3, 2, 1))


@few(40)
@given(base=shapes(1, 4, 1, 4), n=st.integers(1, 4), dt=st.sampled_from(ANY), seed=st.integers(0, 2**16))
async def test_concat_split(stream, base, n, dt, seed):
    rng = np.random.default_rng(seed)
    axis = int(rng.integers(-len(base), len(base)))
    parts = []
    for _ in range(n):
        sh = list(base)
        sh[axis] = int(rng.integers(0, 4))
        parts.append(rand(rng, tuple(sh), dt))
    cat = np.concatenate(parts, axis=axis)
    _eq(await ops.concat([up(stream, p) for p in parts], axis=axis).numpy(), cat)
    sizes = [p.shape[axis] for p in parts]
    outs = ops.split(up(stream, cat), sizes, axis=axis)
    for o, p in zip(outs, parts, strict=True):
        _eq(await o.numpy(), p)
    if cat.shape[axis] % n == 0:
        for o, p in zip(ops.split(up(stream, cat), n, axis=axis), np.split(cat, n, axis=axis), strict=True):
            _eq(await o.numpy(), p)


@st.composite
def slice_case(draw):
    shape = draw(shapes(1, 4, 1, 7))
    k = draw(st.integers(1, len(shape)))
    axes = draw(st.permutations(range(len(shape))))[:k]
    specs = []
    for a in axes:
        n = shape[a]
        step = draw(st.sampled_from([1, 1, 2, 3, -1, -2]))
        start = draw(st.integers(-n - 2, n + 2))
        end = draw(st.integers(-n - 2, n + 2))
        specs.append((a, start, end, step))
    return shape, specs


@few(80)
@given(case=slice_case(), dt=st.sampled_from(ANY), seed=st.integers(0, 2**16))
async def test_slice_onnx_semantics(stream, case, dt, seed):
    shape, specs = case
    x = rand(np.random.default_rng(seed), shape, dt)
    idx = [slice(None)] * len(shape)
    for a, b, e, s in specs:
        idx[a] = slice(b, e, s)
    got = await ops.slice(
        up(stream, x),
        [s[1] for s in specs],
        [s[2] for s in specs],
        [s[0] for s in specs],
        [s[3] for s in specs],
    ).numpy()
    _eq(got, x[tuple(idx)])


@few(50)
@given(
    xs=shapes(1, 3, 1, 5),
    ishape=shapes(0, 2, 0, 4),
    dt=st.sampled_from(ANY),
    seed=st.integers(0, 2**16),
    i64=st.booleans(),
)
async def test_gather(stream, xs, ishape, dt, seed, i64):
    rng = np.random.default_rng(seed)
    x = rand(rng, xs, dt)
    axis = int(rng.integers(-len(xs), len(xs)))
    n = xs[axis]
    idx = rng.integers(-n, n, size=ishape).astype(np.int64 if i64 else np.int32)
    _eq(await ops.gather(up(stream, x), up(stream, idx), axis=axis).numpy(), np.take(x, idx, axis=axis))


async def test_gather_bad_index_fails_the_launch_only(stream):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = ops.gather(up(stream, x), [0, 4], axis=0)  # 4 is out of range: checked on the device side
    with pytest.raises(aioge.AclError) as ei:
        await y.numpy()
    assert ei.value.code == 507015 and "out of range" in str(ei.value)
    with pytest.raises(aioge.AclError):  # the stream reports its first failure at the next synchronize
        await stream.synchronize()
    # the stream stays usable
    _eq(await ops.gather(up(stream, x), [-1, 0], axis=0).numpy(), x[[-1, 0]])
    (y,) = aioge.op(
        "GatherV2",
        [up(stream, x), up(stream, np.array([-1], np.int32)), HostInput(np.array([0]))],
        [TensorSpec((1, 3), "float32")],
    )
    with pytest.raises(aioge.AclError, match="negative_index_support"):
        await y.numpy()
    with pytest.raises(aioge.AclError):
        await stream.synchronize()
    (y,) = aioge.op(
        "Gather",
        [up(stream, x), up(stream, np.array([[1, 2]], np.int64))],
        [TensorSpec((1, 2, 3), "float32")],
    )
    _eq(await y.numpy(), x[[[1, 2]]])


@few(40)
@given(
    pair=st.tuples(shapes(0, 3, 1, 4), shapes(0, 2, 1, 3)),
    dt=st.sampled_from(ANY),
    seed=st.integers(0, 2**16),
)
async def test_broadcast_to_and_tile(stream, pair, dt, seed):
    shape, extra = pair
    rng = np.random.default_rng(seed)
    target = tuple(extra) + tuple(1 if d == 1 else d for d in shape)
    src = tuple(1 if rng.random() < 0.4 else d for d in shape)
    x = rand(rng, src, dt)
    _eq(await ops.broadcast_to(up(stream, x), target).numpy(), np.broadcast_to(x, target))
    reps = tuple(int(r) for r in rng.integers(0, 3, size=int(rng.integers(0, len(src) + 2))))
    _eq(await ops.tile(up(stream, x), reps).numpy(), np.tile(x, reps))


@few(50)
@given(
    shape=shapes(1, 4, 1, 5),
    mode=st.sampled_from(["constant", "reflect", "edge"]),
    dt=st.sampled_from(ANY),
    seed=st.integers(0, 2**16),
)
async def test_pad(stream, shape, mode, dt, seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, shape, dt)
    pairs = []
    for n in shape:
        hi = n - 1 if mode == "reflect" else 3
        lo = 0 if mode != "constant" else -min(n, 2)
        b = int(rng.integers(lo, hi + 1))
        e = int(rng.integers(max(lo, -n - b), hi + 1))
        pairs.append((b, e))
    if mode == "constant":
        val = rand(rng, (), dt)
        got = await ops.pad(up(stream, x), pairs, constant_value=val).numpy()
        pos = [(max(b, 0), max(e, 0)) for b, e in pairs]
        want = np.pad(x, pos, constant_values=val)
        want = want[tuple(slice(-min(b, 0), want.shape[d] + min(e, 0)) for d, (b, e) in enumerate(pairs))]
    else:
        got = await ops.pad(up(stream, x), pairs, mode=mode).numpy()
        want = np.pad(x, pairs, mode=mode)
    _eq(got, want)


async def test_views_and_fill(stream):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = up(stream, x)
    _eq(await ops.reshape(t, (4, -1)).numpy(), x.reshape(4, -1))
    _eq(await ops.flatten(t).numpy(), x.reshape(2, 12))
    _eq(await ops.flatten(t, 0).numpy(), x.reshape(1, 24))
    _eq(await ops.unsqueeze(t, (0, -1)).numpy(), x[None, ..., None])
    _eq(await ops.squeeze(ops.unsqueeze(t, 1)).numpy(), x)
    _eq(await ops.fill((2, 2), 3, "int32", stream=stream).numpy(), np.full((2, 2), 3, np.int32))
    _eq(await ops.fill((0, 2), 1.5, stream=stream).numpy(), np.zeros((0, 2), np.float32))


# ------------------------------------------------------------------ CANN level
async def test_cann_copy_ops(stream):
    x = np.arange(24, dtype=np.float32).reshape(2, 1, 3, 4)
    t = up(stream, x)
    cases = [
        ("Reshape", [t, HostInput(np.array([4, -1, 0], np.int64))], (4, 2, 3), {}),
        ("Reshape", [t, Const(np.array([6, 4], np.int32))], (6, 4), {}),
        ("Reshape", [t, HostInput(np.array([12], np.int64))], (2, 12), {"axis": 1}),
        ("Squeeze", [t], (2, 3, 4), {}),
        ("Squeeze", [t], (2, 3, 4), {"axis": [1]}),
        ("Unsqueeze", [t], (1, 2, 1, 3, 4, 1), {"axes": [0, -1]}),
        ("ExpandDims", [t, HostInput(np.array([-1], np.int32))], (2, 1, 3, 4, 1), {}),
        ("Flatten", [t], (2, 12), {}),
        ("Flatten", [t], (6, 4), {"axis": 3}),
        ("Identity", [t], (2, 1, 3, 4), {}),
    ]
    for op, ins, shape, attrs in cases:
        (y,) = aioge.op(op, ins, [TensorSpec(shape, "float32")], attrs)
        _eq(await y.numpy(), x.reshape(shape))


async def test_cann_data_movement(stream):
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    t = up(stream, x)

    async def run(op, ins, shape, attrs=None, dt="int32"):
        (y,) = aioge.op(op, ins, [TensorSpec(shape, dt)], attrs)
        return await y.numpy()

    _eq(await run("Transpose", [t, HostInput(np.array([2, 0, 1]))], (4, 2, 3)), x.transpose(2, 0, 1))
    _eq(await run("TransposeD", [t], (3, 2, 4), {"perm": [1, 0, 2]}), x.transpose(1, 0, 2))
    _eq(await run("ConcatV2D", [t, t], (2, 6, 4), {"concat_dim": 1, "N": 2}), np.concatenate([x, x], 1))
    _eq(
        await run("Concat", [HostInput(np.array(2, np.int32)), t, t], (2, 3, 8), {"N": 2}),
        np.concatenate([x, x], 2),
    )
    _eq(await run("ConcatV2", [t, t, HostInput(np.array(0, np.int32))], (4, 3, 4)), np.concatenate([x, x], 0))
    _eq(await run("Pack", [t, t], (2, 2, 3, 4), {"axis": 1, "N": 2}), np.stack([x, x], 1))
    _eq(await run("SliceD", [t], (1, 2, 3), {"offsets": [1, 1, 0], "size": [1, -1, 3]}), x[1:2, 1:, 0:3])
    _eq(
        await run("Slice", [t, HostInput(np.array([0, 0, 1])), HostInput(np.array([2, 1, 2]))], (2, 1, 2)),
        x[0:2, 0:1, 1:3],
    )
    # TF StridedSlice with masks: x[..., ::-2] with new axis and shrink
    begin, end, strides = np.array([0, 0, -1]), np.array([0, 0, 0]), np.array([1, 1, -2])
    _eq(
        await run(
            "StridedSlice",
            [t, HostInput(begin), HostInput(end), HostInput(strides)],
            (2, 3, 2),
            {"begin_mask": 3, "end_mask": 7},
        ),
        x[:, :, ::-2],
    )
    _eq(
        await run(
            "StridedSliceD",
            [t],
            (1, 3, 4),
            {
                "begin": [1, 0, 0],
                "end": [2, 0, 3],
                "strides": [1, 1, 1],
                "shrink_axis_mask": 1,
                "new_axis_mask": 2,
            },
        ),
        x[1, None, 0:3],
    )
    _eq(
        await run(
            "StridedSliceD",
            [t],
            (2, 3),
            {"begin": [0, 1], "end": [0, 2], "strides": [1, 1], "ellipsis_mask": 1, "shrink_axis_mask": 2},
        ),
        x[..., 1],
    )
    _eq(
        await run("BroadcastToD", [up(stream, x[:1])], (3, 2, 3, 4), {"shape": [3, 2, 3, 4]}),
        np.broadcast_to(x[:1], (3, 2, 3, 4)),
    )
    _eq(
        await run("BroadcastTo", [up(stream, x[:, :1]), HostInput(np.array([2, 5, 4]))], (2, 5, 4)),
        np.broadcast_to(x[:, :1], (2, 5, 4)),
    )
    _eq(await run("TileD", [t], (2, 6, 4), {"multiples": [1, 2, 1]}), np.tile(x, (1, 2, 1)))
    _eq(await run("Tile", [t, HostInput(np.array([2, 1, 1, 2]))], (2, 2, 3, 8)), np.tile(x, (2, 1, 1, 2)))
    pads = np.array([[0, 1], [1, 1], [2, 0]])
    _eq(
        await run(
            "PadV3",
            [t, HostInput(pads), Const(np.array(7, np.int32))],
            (3, 5, 6),
            {"mode": "constant", "paddings_contiguous": True},
        ),
        np.pad(x, pads, constant_values=7),
    )
    _eq(
        await run(
            "PadV3",
            [t, HostInput(pads.T.copy().reshape(-1))],
            (3, 5, 6),
            {"mode": "reflect", "paddings_contiguous": False},
        ),
        np.pad(x, pads, mode="reflect"),
    )
    _eq(await run("Pad", [t, HostInput(pads)], (3, 5, 6)), np.pad(x, pads))
    _eq(
        await run("Fill", [Const(np.array([2, 2], np.int64)), up(stream, np.array([5], np.int32))], (2, 2)),
        np.full((2, 2), 5, np.int32),
    )
    _eq(await run("Fills", [t], (2, 3, 4), {"value": 2.0}), np.full_like(x, 2))
    _eq(await run("ZerosLike", [t], (2, 3, 4)), np.zeros_like(x))
    _eq(await run("OnesLike", [t], (2, 3, 4)), np.ones_like(x))
    parts = aioge.op(
        "SplitV",
        [t, HostInput(np.array([1, -1])), HostInput(np.array(2))],
        [TensorSpec((2, 3, 1), "int32"), TensorSpec((2, 3, 3), "int32")],
        {"num_split": 2},
    )
    _eq(await parts[1].numpy(), x[:, :, 1:])
    parts = aioge.op("Split", [HostInput(np.array(1)), t], [TensorSpec((2, 1, 4), "int32")] * 3, {"num_split": 3})
    _eq(await parts[2].numpy(), x[:, 2:3])
