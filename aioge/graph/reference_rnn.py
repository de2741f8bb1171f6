"""ONNX LSTM, GRU and RNN: the numpy reference.

ONNX's equations (gate orders ``iofc`` for LSTM, ``zrh`` for GRU), every
direction, ``layout`` 0 (time-major) and 1 (batch-major), ``sequence_lens``
(steps past a sequence's length output zeros and carry the state, so ``Y_h``
is the state at its last valid step; the reverse direction starts at the
last valid step), initial states, LSTM peepholes and ``input_forget``,
``clip`` (applied to the activations' inputs) and the activation functions
ONNX lists (with ``activation_alpha``/``activation_beta``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .ir import Node
from .reference_base import Arr, _kernel
from .schema import get_attr

__all__ = ("ACTIVATIONS", "DEFAULT_ACTIVATIONS", "rnn_activations")

Act = Callable[[Arr], Arr]


def _act(name: str, alpha: float | None, beta: float | None) -> Act:
    a, b = alpha, beta
    fns: dict[str, Act] = {
        "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "Tanh": np.tanh,
        "Relu": lambda x: np.maximum(x, 0),
        "Affine": lambda x: (1.0 if a is None else a) * x + (0.0 if b is None else b),
        "LeakyRelu": lambda x: np.where(x >= 0, x, (0.01 if a is None else a) * x),
        "ThresholdedRelu": lambda x: np.where(x > (1.0 if a is None else a), x, 0),
        "ScaledTanh": lambda x: (1.0 if a is None else a) * np.tanh((1.0 if b is None else b) * x),
        "HardSigmoid": lambda x: np.clip((0.2 if a is None else a) * x + (0.5 if b is None else b), 0, 1),
        "Elu": lambda x: np.where(x >= 0, x, (1.0 if a is None else a) * (np.exp(x) - 1)),
        "Softsign": lambda x: x / (1 + np.abs(x)),
        "Softplus": lambda x: np.log1p(np.exp(x)),
    }
    fn = fns.get(name)
    if fn is None:
        raise ValueError(f"unknown activation {name!r}")
    return fn


#: the activation functions ONNX's recurrent ops may name
ACTIVATIONS = frozenset(
    {"Sigmoid", "Tanh", "Relu", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu",
     "Softsign", "Softplus"}
)  # fmt: skip
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}


def rnn_activations(node: Node, directions: int) -> list[tuple[str, float | None, float | None]]:
    """(name, alpha, beta) per activation slot and direction, defaults filled in (ONNX names)."""
    per = len(DEFAULT_ACTIVATIONS[node.op_type])
    names = get_attr(node, "activations")
    names = [str(n) for n in names] if names else DEFAULT_ACTIVATIONS[node.op_type] * directions
    if len(names) == per:  # one set for both directions
        names = names * directions
    if len(names) != per * directions:
        raise ValueError(f"{len(names)} activations given, expected {per * directions}")
    canon = {n.lower(): n for n in ACTIVATIONS}
    out_names = []
    for n in names:
        c = canon.get(n.lower())
        if c is None:
            raise ValueError(f"unknown activation {n!r}")
        out_names.append(c)
    alphas = [float(v) for v in (get_attr(node, "activation_alpha") or [])]
    betas = [float(v) for v in (get_attr(node, "activation_beta") or [])]
    # alpha/beta values are consumed in order by the activations that take them
    takes_a = {"Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu"}
    takes_b = {"Affine", "ScaledTanh", "HardSigmoid"}
    res: list[tuple[str, float | None, float | None]] = []
    ia = ib = 0
    for n in out_names:
        a = alphas[ia] if n in takes_a and ia < len(alphas) else None
        b = betas[ib] if n in takes_b and ib < len(betas) else None
        ia += n in takes_a and ia < len(alphas)
        ib += n in takes_b and ib < len(betas)
        res.append((n, a, b))
    return res


def _clipped(f: Act, c: float) -> Act:
    return lambda v: f(np.clip(v, -c, c))


@_kernel("LSTM", "GRU", "RNN")
def _recurrent(node: Node, xs: list[Any]) -> list[Arr]:
    op = node.op_type
    xs = xs + [None] * (8 - len(xs))
    x, w, r, bias, seq, h0, c0, peep = xs
    layout = int(get_attr(node, "layout"))
    if layout:
        x = np.swapaxes(x, 0, 1)
        h0 = None if h0 is None else np.swapaxes(h0, 0, 1)
        c0 = None if c0 is None else np.swapaxes(c0, 0, 1)
    t_len, batch = x.shape[:2]
    direction = str(get_attr(node, "direction"))
    nd = w.shape[0]
    hs = r.shape[2]
    g = w.shape[1] // hs
    acts = rnn_activations(node, nd)
    per = len(DEFAULT_ACTIVATIONS[op])
    clip = get_attr(node, "clip")
    dt = x.dtype
    lens = np.full(batch, t_len, np.int64) if seq is None else np.asarray(seq, np.int64)
    if np.any(lens < 0) or np.any(lens > t_len):
        raise ValueError(f"sequence_lens must be in [0, {t_len}]")
    y = np.zeros((t_len, nd, batch, hs), dt)
    y_h = np.zeros((nd, batch, hs), dt)
    y_c = np.zeros((nd, batch, hs), dt)
    for d in range(nd):
        reverse = direction == "reverse" or d == 1
        fs = [_act(*a) for a in acts[d * per : (d + 1) * per]]
        if clip is not None:
            fs = [_clipped(f, float(clip)) for f in fs]
        wb = np.zeros(g * hs, dt) if bias is None else bias[d, : g * hs]
        rb = np.zeros(g * hs, dt) if bias is None else bias[d, g * hs :]
        h = np.zeros((batch, hs), dt) if h0 is None else h0[d].astype(dt)
        c = np.zeros((batch, hs), dt) if c0 is None else c0[d].astype(dt)
        p = np.zeros((3, hs), dt) if peep is None else peep[d].reshape(3, hs)
        xw = x @ w[d].T + wb  # (T, B, gH): the input projection of every step at once
        for step in range(t_len):
            tb = np.where(reverse, lens - 1 - step, step)  # the time index each batch row takes now
            live = (tb >= 0) & (step < lens)
            if not live.any():
                continue
            rows = np.nonzero(live)[0]
            xt = xw[tb[rows], rows]
            hp, cp = h[rows], c[rows]
            hr = hp @ r[d].T
            if op == "LSTM":
                gi, go, gf, gc = (xt + hr + rb).reshape(len(rows), 4, hs).transpose(1, 0, 2)
                i = fs[0](gi + p[0] * cp)
                f = 1 - i if int(get_attr(node, "input_forget")) else fs[0](gf + p[2] * cp)
                cn = f * cp + i * fs[1](gc)
                o = fs[0](go + p[1] * cn)
                hn = o * fs[2](cn)
                c[rows] = cn
            elif op == "GRU":
                xz, xr, xh = xt.reshape(len(rows), 3, hs).transpose(1, 0, 2)
                hz, hrr, hh = (hr + rb).reshape(len(rows), 3, hs).transpose(1, 0, 2)
                z = fs[0](xz + hz)
                rr = fs[0](xr + hrr)
                if int(get_attr(node, "linear_before_reset")):
                    cand = fs[1](xh + rr * hh)
                else:
                    cand = fs[1](xh + (rr * hp) @ r[d][2 * hs :].T + rb[2 * hs :])
                hn = (1 - z) * cand + z * hp
            else:
                hn = fs[0](xt + hr + rb)
            h[rows] = hn
            y[tb[rows], d, rows] = hn
        y_h[d], y_c[d] = h, c
    outs = [y, y_h, y_c][: len(node.outputs)]
    if layout:
        outs = [np.ascontiguousarray(np.transpose(o, (2, 0, 1, 3)) if o.ndim == 4 else np.swapaxes(o, 0, 1))
                for o in outs]  # fmt: skip
    return [np.ascontiguousarray(o, dt) for o in outs]
