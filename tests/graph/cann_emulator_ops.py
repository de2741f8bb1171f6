"""numpy emulation of the CANN ops the newer lowerings emit (see cann_emulator.py).

Each entry follows the GE op prototype (input order, attr names and their
meaning), written from the CANN semantics -- e.g. DynamicRNN's ijfo gate
order, its (T, B, H) step mask, ReverseSequence -- and not from the lowering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from aioge.graph.reference_ops import topk
from aioge.graph.reference_resize import resize_array

Fn = Callable[[list[Any], dict[str, Any], int], list[np.ndarray]]
SPEC: dict[str, tuple[int, int, set[str]]] = {}
REQUIRED: dict[str, set[str]] = {}
OPS: dict[str, Fn] = {}


def op(name: str, n_in: tuple[int, int], attrs: set[str] | None = None, required: set[str] | None = None):
    def deco(fn: Fn) -> Fn:
        SPEC[name] = (n_in[0], n_in[1], set(attrs or ()))
        REQUIRED[name] = set(required or ())
        OPS[name] = fn
        return fn

    return deco


def _unary(name: str, fn: Callable[[np.ndarray], np.ndarray], attrs: set[str] | None = None) -> None:
    op(name, (1, 1), attrs)(lambda ins, a, n: [np.asarray(fn(ins[0]), ins[0].dtype)])


for _n, _f in {
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Round": np.rint,
    "Sin": np.sin,
    "Cos": np.cos,
    "Square": np.square,
    "Softplus": lambda v: np.log1p(np.exp(v)),
    "HardSwish": lambda v: v * np.clip(v + 3, 0, 6) / 6,
    "Mish": lambda v: v * np.tanh(np.log1p(np.exp(v))),
}.items():
    _unary(_n, _f)

op("IsNan", (1, 1))(lambda ins, a, n: [np.isnan(ins[0])])
op("IsInf", (1, 1))(lambda ins, a, n: [np.isinf(ins[0])])
op("LogicalNot", (1, 1))(lambda ins, a, n: [np.logical_not(ins[0])])
for _n, _f in {
    "LogicalAnd": np.logical_and,
    "LogicalOr": np.logical_or,
    "NotEqual": np.not_equal,
    "GreaterEqual": np.greater_equal,
    "LessEqual": np.less_equal,
}.items():
    op(_n, (2, 2))(lambda ins, a, n, f=_f: [np.asarray(f(ins[0], ins[1]), np.bool_)])
op("Mod", (2, 2))(lambda ins, a, n: [np.asarray(np.fmod(ins[0], ins[1]), ins[0].dtype)])
op("FloorMod", (2, 2))(lambda ins, a, n: [np.asarray(np.mod(ins[0], ins[1]), ins[0].dtype)])


@op("LeakyRelu", (1, 1), {"negative_slope"})
def _leaky(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x = ins[0]
    return [np.where(x > 0, x, x * np.asarray(a.get("negative_slope", 0.0), x.dtype)).astype(x.dtype)]


@op("HardSigmoid", (1, 1), {"alpha", "beta"})
def _hsig(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x = ins[0]
    y = x * np.asarray(a.get("alpha", 1 / 6), x.dtype) + np.asarray(a.get("beta", 0.5), x.dtype)
    return [np.clip(y, 0, 1).astype(x.dtype)]


@op("PRelu", (2, 2))
def _prelu(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x, w = ins
    assert w.ndim == 1 and w.size in (1, x.shape[1] if x.ndim > 1 else 1), (x.shape, w.shape)
    ws = w.reshape(1, -1, *([1] * (x.ndim - 2))) if w.size > 1 else w.reshape(())
    return [np.where(x >= 0, x, x * ws).astype(x.dtype)]


@op("Range", (3, 3))
def _range(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    s, e, d = (np.asarray(v).reshape(()) for v in ins)
    return [np.arange(s, e, d).astype(np.asarray(ins[0]).dtype)]


@op("Cumsum", (2, 2), {"exclusive", "reverse"})
def _cumsum(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x, ax = ins[0], int(np.asarray(ins[1]).reshape(()))
    y = np.flip(x, ax) if a.get("reverse") else x
    c = np.cumsum(y, axis=ax, dtype=x.dtype)
    if a.get("exclusive"):
        c = c - y
    return [np.ascontiguousarray(np.flip(c, ax) if a.get("reverse") else c)]


op("Tril", (1, 1), {"diagonal"})(lambda ins, a, n: [np.tril(ins[0], a.get("diagonal", 0))])
op("Triu", (1, 1), {"diagonal"})(lambda ins, a, n: [np.triu(ins[0], a.get("diagonal", 0))])


@op("GatherElements", (2, 2), {"dim"})
def _gather_el(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x, idx = ins
    ax = a.get("dim", 0)
    idx = idx.astype(np.int64)
    return [np.take_along_axis(x, np.where(idx < 0, idx + x.shape[ax], idx), axis=ax)]


@op("GatherNd", (2, 2), {"negative_index_support"})
def _gather_nd(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x, idx = ins
    k = idx.shape[-1]
    ii = idx.astype(np.int64).reshape(-1, k)
    if not a.get("negative_index_support"):
        assert (ii >= 0).all()
    ii = np.where(ii < 0, ii + np.array(x.shape[:k]), ii)
    return [x[tuple(ii.T)].reshape(*idx.shape[:-1], *x.shape[k:])]


@op("ScatterElements", (3, 3), {"axis", "reduction"})
def _scatter_el(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x, idx, upd = ins
    ax = a.get("axis", 0)
    out = x.copy()
    idx = np.where(idx < 0, idx + x.shape[ax], idx)
    red = a.get("reduction", "none")
    for pos in np.ndindex(*idx.shape):
        at = list(pos)
        at[ax] = int(idx[pos])
        t = tuple(at)
        v = upd[pos]
        out[t] = v if red == "none" else {"add": out[t] + v, "mul": out[t] * v, "max": max(out[t], v),
                                          "min": min(out[t], v)}[red]  # fmt: skip
    return [out]


def _tensor_scatter(red: str) -> Fn:
    def fn(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
        x, idx, upd = ins
        out = x.copy()
        k = idx.shape[-1]
        ii = idx.reshape(-1, k)
        u = upd.reshape(ii.shape[0], *x.shape[k:])
        for j, row in enumerate(ii):
            t = tuple(int(v) + (x.shape[i] if v < 0 else 0) for i, v in enumerate(row))
            out[t] = {"none": u[j], "add": out[t] + u[j], "mul": out[t] * u[j], "max": np.maximum(out[t], u[j]),
                      "min": np.minimum(out[t], u[j])}[red]  # fmt: skip
        return [out]

    return fn


for _n, _r in {"TensorScatterUpdate": "none", "TensorScatterAdd": "add", "TensorScatterMul": "mul",
               "TensorScatterMax": "max", "TensorScatterMin": "min"}.items():  # fmt: skip
    op(_n, (3, 3))(_tensor_scatter(_r))


@op("OneHot", (4, 4), {"axis"})
def _onehot(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x, depth, on, off = ins
    d = int(np.asarray(depth).reshape(()))
    ax = a.get("axis", -1)
    ax = ax + x.ndim + 1 if ax < 0 else ax
    hot = np.expand_dims(x, ax) == np.arange(d).reshape([-1 if i == ax else 1 for i in range(x.ndim + 1)])
    return [np.where(hot, np.asarray(on).reshape(()), np.asarray(off).reshape(())).astype(np.asarray(on).dtype)]


op("NonZero", (1, 1), {"transpose", "dtype"})(
    lambda ins, a, n: [np.array(np.nonzero(ins[0]), np.int64).reshape(ins[0].ndim, -1)]
)


@op("TopKV2", (2, 2), {"dim", "largest", "sorted"})
def _topk(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x, k = ins
    ax = a.get("dim", -1) % x.ndim
    assert a.get("sorted", True)
    v, i = topk(x, int(np.asarray(k).reshape(())), ax, bool(a.get("largest", True)))
    return [v, i.astype(np.int32)]


@op("ArgMaxV2", (2, 2), {"dtype"})
def _argmax(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    return [np.argmax(ins[0], axis=int(np.asarray(ins[1]).reshape(()))).astype(a.get("dtype", np.int32))]


@op("ArgMin", (2, 2), {"dtype"})
def _argmin(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    return [np.argmin(ins[0], axis=int(np.asarray(ins[1]).reshape(()))).astype(a.get("dtype", np.int32))]


@op("DepthToSpace", (1, 1), {"block_size", "mode", "data_format"}, {"block_size"})
def _d2s(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x = ins[0]
    assert a["data_format"] == "NCHW"
    b = a["block_size"]
    nn, c, h, w = x.shape
    if a.get("mode", "DCR") == "DCR":
        y = x.reshape(nn, b, b, c // b // b, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(nn, c // b // b, b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [np.ascontiguousarray(y).reshape(nn, c // b // b, h * b, w * b)]


@op("SpaceToDepth", (1, 1), {"block_size", "data_format"}, {"block_size"})
def _s2d(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x = ins[0]
    assert a["data_format"] == "NCHW"
    b = a["block_size"]
    nn, c, h, w = x.shape
    y = x.reshape(nn, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return [np.ascontiguousarray(y).reshape(nn, c * b * b, h // b, w // b)]


def _norm_groups(x: np.ndarray, g: int, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nn = x.shape[0]
    xg = x.astype(np.float32).reshape(nn, g, -1)
    m = xg.mean(axis=2, keepdims=True)
    v = ((xg - m) ** 2).mean(axis=2, keepdims=True)
    return ((xg - m) / np.sqrt(v + np.float32(eps))).reshape(x.shape), m.reshape(nn, g), v.reshape(nn, g)


@op("InstanceNorm", (3, 3), {"data_format", "epsilon"})
def _instance(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x, gm, bt = ins
    assert a["data_format"] == "NCHW" and x.ndim == 4
    y, m, v = _norm_groups(x, x.shape[1], a.get("epsilon", 1e-6))
    y = y * gm.reshape(1, -1, 1, 1) + bt.reshape(1, -1, 1, 1)
    nn, c = x.shape[:2]
    return [y.astype(x.dtype), m.reshape(nn, c, 1, 1).astype(x.dtype), v.reshape(nn, c, 1, 1).astype(x.dtype)]


@op("GroupNorm", (3, 3), {"num_groups", "data_format", "eps", "is_training"}, {"num_groups"})
def _group(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x, gm, bt = ins
    assert a["data_format"] == "NCHW" and x.ndim == 4 and a.get("is_training") is False
    y, m, v = _norm_groups(x, a["num_groups"], a.get("eps", 1e-4))
    y = y * gm.reshape(1, -1, 1, 1) + bt.reshape(1, -1, 1, 1)
    return [y.astype(x.dtype), m.astype(x.dtype), v.astype(x.dtype)]


@op("LpNormV2", (1, 1), {"p", "axes", "keepdim", "epsilon"})
def _lpnorm(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x = ins[0]
    p = a.get("p", 2.0)
    y = np.sum(np.abs(x) ** p, axis=tuple(a["axes"]), keepdims=a.get("keepdim", False), dtype=x.dtype) ** (1 / p)
    return [np.maximum(y, a.get("epsilon", 1e-12)).astype(x.dtype)]


@op("ReduceLogSumExp", (2, 2), {"keep_dims", "noop_with_empty_axes"})
def _rlse(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x, axes = ins[0], tuple(int(v) for v in np.asarray(ins[1]).reshape(-1))
    return [np.log(np.sum(np.exp(x.astype(np.float64)), axis=axes, keepdims=a.get("keep_dims", False))).astype(x.dtype)]


for _n, _f in {"ReduceProdD": np.prod, "ReduceAnyD": np.any, "ReduceAllD": np.all}.items():
    op(_n, (1, 1), {"axes", "keep_dims"}, {"axes"})(
        lambda ins, a, n, f=_f: [np.asarray(f(ins[0], axis=tuple(a["axes"]), keepdims=a["keep_dims"]), ins[0].dtype)]
    )


@op("ReverseSequence", (2, 2), {"seq_dim", "batch_dim"}, {"seq_dim"})
def _revseq(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x, lens = ins
    sd, bd = a["seq_dim"], a.get("batch_dim", 0)
    out = x.copy()
    for b in range(x.shape[bd]):
        ln = int(lens[b])
        src = [slice(None)] * x.ndim
        src[bd] = b
        dst = list(src)
        src[sd] = slice(ln - 1, None, -1) if ln else slice(0, 0)
        dst[sd] = slice(0, ln)
        out[tuple(dst)] = x[tuple(src)]
    return [out]


@op("Resize", (1, 4), {"coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                       "extrapolation_value", "mode", "nearest_mode", "antialias"})  # fmt: skip
def _resize(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:
    x = ins[0]
    roi = ins[1] if len(ins) > 1 else None
    scales = ins[2] if len(ins) > 2 else None
    sizes = ins[3] if len(ins) > 3 else None
    if sizes is not None:
        out = [int(v) for v in sizes]
        sc = [float(v) for v in scales] if scales is not None else [o / i for o, i in zip(out, x.shape, strict=True)]
    else:
        assert scales is not None
        sc = [float(v) for v in scales]
        out = [int(d * s) for d, s in zip(x.shape, sc, strict=True)]
    attrs = {"antialias": 0, **a}
    r = None if roi is None else [float(v) for v in roi]
    return [resize_array(x, out, sc, r, attrs)]


def _sig(v: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-v))


@op("DynamicRNN", (3, 10), {"cell_type", "direction", "cell_depth", "use_peephole", "keep_prob", "cell_clip",
                            "num_proj", "time_major", "activation", "forget_bias", "gate_order", "is_training"})
def _dynamic_rnn(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:  # fmt: skip
    x, w, b = ins[:3]
    mask, h0, c0 = (ins[i] if len(ins) > i else None for i in (3, 4, 5))
    assert a["direction"] == "UNIDIRECTIONAL" and a["gate_order"] == "ijfo" and a["time_major"]
    t, bs, _ = x.shape
    hs = w.shape[1] // 4
    h = np.zeros((bs, hs), x.dtype) if h0 is None else h0[0].copy()
    c = np.zeros((bs, hs), x.dtype) if c0 is None else c0[0].copy()
    outs = [np.zeros((t, bs, hs), x.dtype) for _ in range(8)]
    for s in range(t):
        z = np.concatenate([x[s], h], axis=1) @ w + b
        i, j, f, o = (z[:, k * hs : (k + 1) * hs] for k in range(4))
        i, f, o, j = _sig(i), _sig(f + a.get("forget_bias", 0.0)), _sig(o), np.tanh(j)
        cn = f * c + i * j
        hn = o * np.tanh(cn)
        m = np.ones((bs, hs), x.dtype) if mask is None else mask[s]
        c = m * cn + (1 - m) * c
        h = m * hn + (1 - m) * h
        for k, v in enumerate((hn * m, h, c, i, j, f, o, np.tanh(cn))):
            outs[k][s] = v
    return outs[:n]


@op("DynamicGRUV2", (3, 7), {"direction", "cell_depth", "keep_prob", "cell_clip", "num_proj", "time_major",
                             "activation", "gate_order", "reset_after", "is_training"})
def _dynamic_gru(ins: list[Any], a: dict[str, Any], n: int) -> list[np.ndarray]:  # fmt: skip
    x, wi, wh = ins[:3]
    bi, bh, mask, h0 = (ins[i] if len(ins) > i else None for i in (3, 4, 5, 6))
    assert a["direction"] == "UNIDIRECTIONAL" and a["gate_order"] == "zrh" and a["time_major"]
    t, bs, _ = x.shape
    hs = wh.shape[0]
    bi = np.zeros(3 * hs, x.dtype) if bi is None else bi
    bh = np.zeros(3 * hs, x.dtype) if bh is None else bh
    h = np.zeros((bs, hs), x.dtype) if h0 is None else h0[0].copy()
    outs = [np.zeros((t, bs, hs), x.dtype) for _ in range(6)]
    for s in range(t):
        gx = x[s] @ wi + bi
        gh = h @ wh + bh
        z = _sig(gx[:, :hs] + gh[:, :hs])
        r = _sig(gx[:, hs : 2 * hs] + gh[:, hs : 2 * hs])
        if a["reset_after"]:
            nn = np.tanh(gx[:, 2 * hs :] + r * gh[:, 2 * hs :])
        else:
            nn = np.tanh(gx[:, 2 * hs :] + (r * h) @ wh[:, 2 * hs :] + bh[2 * hs :])
        hn = (1 - z) * nn + z * h
        m = np.ones((bs, hs), x.dtype) if mask is None else mask[s]
        h = m * hn + (1 - m) * h
        for k, v in enumerate((hn * m, h, z, r, nn, gh[:, 2 * hs :])):
            outs[k][s] = v
    return outs[:n]
