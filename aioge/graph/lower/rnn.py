"""Lowering of LSTM, GRU and RNN.

=====================  ==================================================================
LSTM                   ``DynamicRNN`` per direction: x time-major (T, B, I), w = [W^T; R^T]
                       (I + H, 4H) with the gate columns reordered from ONNX's iofc to
                       CANN's ijfo, b = Wb + Rb; init_h/init_c (1, B, H); seq_length a
                       (T, B, H) float mask (1 = valid step); attrs cell_type "LSTM",
                       direction "UNIDIRECTIONAL", gate_order "ijfo", time_major, forget_bias
                       0, is_training false.  Y_h / Y_c are the last step of output_h /
                       output_c (a masked step carries the state)
GRU                    ``DynamicGRUV2``: weight_input W^T (I, 3H), weight_hidden R^T (H, 3H),
                       bias_input Wb, bias_hidden Rb, gate_order "zrh", reset_after =
                       linear_before_reset; otherwise as LSTM
reverse direction      the sequence reversed on the way in and out: ``ReverseSequence``
                       (seq_dim 0, batch_dim 1) with sequence_lens, ``StridedSlice`` without
bidirectional          both directions, ``ConcatD`` on the direction axis
RNN, and LSTM/GRU      unrolled into CANN ops: one ``MatMulV2`` for every step's input
with what the fused    projection, then per step ``MatMulV2`` (recurrence), ``Add``, the gate
ops lack (clip,        activations (``Sigmoid`` ``Tanh`` ``Relu`` ``HardSigmoid``
input_forget,          ``LeakyRelu`` ``Softplus``, ``Mul``/``Add`` for Affine/ScaledTanh),
peepholes, other       ``Select`` on the step mask for sequence_lens
activations, dynamic
weights)
layout 1               ``TransposeD`` to time-major and back
=====================  ==================================================================
"""

from __future__ import annotations

import numpy as np

from ..reference_rnn import DEFAULT_ACTIVATIONS, rnn_activations
from ._base import RULES, Builder, ConstInput, InputRef, acl_dtype, const
from .shape import _strided_slice

_F32 = np.dtype(np.float32)


def _slice(L: Builder, x: str, axis: int, start: int, stop: int, step: int = 1) -> str:
    s = L.shape(x)
    ranges = [(0, d, 1) for d in s]
    ranges[axis] = (start, stop, step)
    dims = list(s)
    dims[axis] = len(range(start, stop, step))
    out = L.tmp(dims, L.dtype(x))
    _strided_slice(L, x, ranges, out)
    return out


class _Seq:
    """The time-major input, its sequence lengths and how to reverse along time."""

    def __init__(self, L: Builder) -> None:
        self.L = L
        n = L.node
        x = n.inputs[0]
        self.layout = int(L.attr("layout"))
        if self.layout:
            s = L.shape(x)
            x = L.to("TransposeD", [x], (s[1], s[0], s[2]), L.dtype(x), perm=[1, 0, 2])
        self.x = x
        self.t, self.b = L.shape(x)[:2]
        self.lens_name = n.input(4)
        lc = const(L, 4) if self.lens_name else None
        self.lens_const = None if lc is None else np.asarray(lc, np.int64)
        if self.lens_const is not None and np.all(self.lens_const == self.t):
            self.lens_name, self.lens_const = "", None  # every sequence is full: no mask needed

    def reverse(self, v: str) -> str:
        """``v`` (T, B, ...) with each sequence's valid steps reversed."""
        L = self.L
        if not self.lens_name:
            return _slice(L, v, 0, self.t - 1, -1, -1)
        lens: InputRef = self.lens_name if self.lens_const is None else ConstInput(self.lens_const.astype(np.int32))
        return L.to("ReverseSequence", [v, lens], L.shape(v), L.dtype(v), seq_dim=0, batch_dim=1)

    def step_mask(self, hidden: int, dtype: np.dtype) -> InputRef:
        """(T, B, H) 1/0 mask of the valid steps (None when every step is valid)."""
        L = self.L
        if not self.lens_name:
            return None
        if self.lens_const is not None:
            m = np.arange(self.t).reshape(-1, 1) < self.lens_const.reshape(1, -1)
            return ConstInput(np.broadcast_to(m[:, :, None], (self.t, self.b, hidden)).astype(dtype))
        lens = self.lens_name
        iota = ConstInput(np.arange(self.t, dtype=np.int32).reshape(-1, 1))
        lb = L.reshape(lens, (1, self.b))
        valid = L.to("Less", [iota, lb], (self.t, self.b), np.bool_)
        vf = L.to("Cast", [valid], (self.t, self.b), dtype, dst_type=acl_dtype(dtype))
        return L.to("BroadcastToD", [L.reshape(vf, (self.t, self.b, 1))], (self.t, self.b, hidden), dtype,
                    shape=[self.t, self.b, hidden])  # fmt: skip


def _gate_rows(h: int, order: list[int]) -> np.ndarray:
    """The row indices that regroup a (G*H, ...) weight gate by gate in ``order`` (``w[rows]``: one
    gather for each weight, where a concatenation of the gates' slices made G slices and a copy)."""
    return np.arange(len(order) * h).reshape(len(order), h)[order].reshape(-1)


def _state(L: Builder, i: int, d: int, seq: _Seq, h: int) -> InputRef:
    """Initial state ``i`` (5: h, 6: c) of direction ``d`` as (1, B, H), or None."""
    name = L.node.input(i)
    if not name:
        return None
    if seq.layout:  # (B, D, H)
        part = _slice(L, name, 1, d, d + 1)
        return L.to("TransposeD", [part], (1, seq.b, h), L.dtype(name), perm=[1, 0, 2])
    return _slice(L, name, 0, d, d + 1)


def _fused_ok(L: Builder, nd: int) -> bool:
    op = L.node.op_type
    if op == "RNN" or L.attr("clip") is not None or any(not L.node.input(i) or const(L, i) is None for i in (1, 2)):
        return False
    if L.node.input(3) and const(L, 3) is None:
        return False
    if op == "LSTM" and (int(L.attr("input_forget")) or L.node.input(7)):
        return False
    if "activations" not in L.node.attrs:
        return True  # the defaults, which take no alpha or beta: what rnn_activations would list
    acts = rnn_activations(L.node, nd)
    return all(a == (name, None, None) for a, name in zip(acts, DEFAULT_ACTIVATIONS[op] * nd, strict=True))


def _recurrent(L: Builder) -> None:
    n = L.node
    w, r = L.shape(n.inputs[1]), L.shape(n.inputs[2])
    nd, h = w[0], r[2]
    seq = _Seq(L)
    dt = L.dtype(seq.x)
    fused = _fused_ok(L, nd)
    direction = str(L.attr("direction"))
    ys, hs, cs = [], [], []
    for d in range(nd):
        reverse = direction == "reverse" or d == 1
        x = seq.reverse(seq.x) if reverse else seq.x
        y, yh, yc = (_fused if fused else _unrolled)(L, d, x, seq, h)
        if reverse:
            y = seq.reverse(y)
        ys.append(L.reshape(y, (seq.t, 1, seq.b, h)))
        hs.append(yh)
        cs.append(yc)
    outs = list(n.outputs) + [""] * (3 - len(n.outputs))
    # both directions, time-major: each concatenation writes its output itself when the output has its
    # shape and dtype (what a copy of a temporary would forward to; all of them or none, so the node's
    # other temporaries keep their names)
    shapes = ((seq.t, nd, seq.b, h), (nd, seq.b, h), (nd, seq.b, h))
    present = [(o, s) for o, s in zip(outs, shapes, strict=True) if o]
    direct = nd > 1 and not seq.layout and all(
        outs.count(o) == 1 and (L.g.values[o].shape, L.g.values[o].dtype) == (s, dt) for o, s in present
    )
    if nd == 1:
        y_all = ys[0]
    elif direct and outs[0]:
        y_all = outs[0]
        L.op("ConcatD", ys, [y_all], concat_dim=1, N=nd)
    else:
        y_all = L.to("ConcatD", ys, shapes[0], dt, concat_dim=1, N=nd)
    for j, (parts, out) in enumerate(((None, outs[0]), (hs, outs[1]), (cs, outs[2]))):
        if not out:
            continue
        if j == 0:
            if seq.layout:
                L.op("TransposeD", [y_all], [out], perm=[2, 0, 1, 3])
            elif not direct:
                L.op("Identity", [y_all], [out])
            continue
        assert parts is not None
        if direct:
            L.op("ConcatD", parts, [out], concat_dim=0, N=nd)
            continue
        v = parts[0] if nd == 1 else L.to("ConcatD", parts, (nd, seq.b, h), dt, concat_dim=0, N=nd)
        if seq.layout:
            L.op("TransposeD", [v], [out], perm=[1, 0, 2])
        else:
            L.op("Identity", [v], [out])


def _fused(L: Builder, d: int, x: str, seq: _Seq, h: int) -> tuple[str, str, str]:
    """One direction through DynamicRNN / DynamicGRUV2; (y, last h, last c) with y (T, B, H)."""
    n = L.node
    dt = L.dtype(x)
    w = np.asarray(const(L, 1))[d]
    r = np.asarray(const(L, 2))[d]
    bc = const(L, 3)
    g = 4 if n.op_type == "LSTM" else 3
    bias = np.zeros(2 * g * h, dt) if bc is None else np.asarray(bc)[d]
    t, b = seq.t, seq.b
    mask = seq.step_mask(h, dt)
    full = (t, b, h)
    temps = L.tmps(8 if n.op_type == "LSTM" else 6, full, dt)
    y, out_h = temps[0], temps[1]
    if n.op_type == "LSTM":
        rows = _gate_rows(h, [0, 3, 2, 1])  # ONNX i o f c -> CANN i j(=c) f o
        wt = np.concatenate([w[rows].T, r[rows].T], axis=0).astype(dt, copy=False)
        bb = (bias[: 4 * h] + bias[4 * h :])[rows]  # Wb + Rb, then regrouped
        L.op("DynamicRNN",
             [x, ConstInput(wt), ConstInput(bb.reshape(-1).astype(dt, copy=False)), mask, _state(L, 5, d, seq, h),
              _state(L, 6, d, seq, h), None, None, None, None],
             temps, cell_type="LSTM", direction="UNIDIRECTIONAL", cell_depth=1, use_peephole=False, keep_prob=1.0,
             cell_clip=-1.0, num_proj=0, time_major=True, activation="tanh", forget_bias=0.0, gate_order="ijfo",
             is_training=False)  # fmt: skip
        out_c = temps[2]
        return y, _slice(L, out_h, 0, t - 1, t), _slice(L, out_c, 0, t - 1, t)
    L.op("DynamicGRUV2",
         [x, ConstInput(w.T.astype(dt, order="C")), ConstInput(r.T.astype(dt, order="C")),
          ConstInput(bias[: 3 * h].astype(dt)), ConstInput(bias[3 * h :].astype(dt)), mask, _state(L, 5, d, seq, h)],
         temps, direction="UNIDIRECTIONAL", cell_depth=1, keep_prob=1.0, cell_clip=-1.0, num_proj=0, time_major=True,
         activation="tanh", gate_order="zrh", reset_after=bool(int(L.attr("linear_before_reset"))),
         is_training=False)  # fmt: skip
    last = _slice(L, out_h, 0, t - 1, t)
    return y, last, last


# ----------------------------------------------------------------------- the unrolled cell
def _act(L: Builder, name: str, alpha: float | None, beta: float | None, v: str) -> str:
    s, dt = L.shape(v), L.dtype(v)
    if name in ("Sigmoid", "Tanh", "Relu"):
        return L.to(name, [v], s, dt)
    if name == "Softplus":
        return L.to("Softplus", [v], s, dt)
    if name == "HardSigmoid":
        a, b = 0.2 if alpha is None else alpha, 0.5 if beta is None else beta
        return L.to("HardSigmoid", [v], s, dt, alpha=a, beta=b)
    if name == "LeakyRelu":
        return L.to("LeakyRelu", [v], s, dt, negative_slope=0.01 if alpha is None else alpha)
    if name == "Affine":
        m = L.to("Mul", [v, L.scalar(1.0 if alpha is None else alpha, dt)], s, dt)
        return L.to("Add", [m, L.scalar(0.0 if beta is None else beta, dt)], s, dt)
    if name == "ScaledTanh":
        m = L.to("Mul", [v, L.scalar(1.0 if beta is None else beta, dt)], s, dt)
        return L.to("Mul", [L.to("Tanh", [m], s, dt), L.scalar(1.0 if alpha is None else alpha, dt)], s, dt)
    raise L.fail(f"activation {name!r} has no CANN lowering in a recurrent cell")


def _weight(L: Builder, i: int, d: int) -> str | ConstInput:
    c = const(L, i)
    if c is not None:
        return ConstInput(np.ascontiguousarray(np.asarray(c)[d]))
    name = L.node.inputs[i]
    part = _slice(L, name, 0, d, d + 1)
    return L.reshape(part, L.shape(name)[1:])


def _cols(L: Builder, v: str, k: int, h: int) -> str:
    return _slice(L, v, 1, k * h, (k + 1) * h)


def _unrolled(L: Builder, d: int, x: str, seq: _Seq, h: int) -> tuple[str, str, str]:
    n = L.node
    op = n.op_type
    dt = L.dtype(x)
    t, b, isz = L.shape(x)
    g = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    nd = L.shape(n.inputs[1])[0]
    per = len(DEFAULT_ACTIVATIONS[op])
    acts = rnn_activations(n, nd)[d * per : (d + 1) * per]
    clip = L.attr("clip")
    w, r = _weight(L, 1, d), _weight(L, 2, d)
    bc = const(L, 3) if n.input(3) else np.zeros((nd, 2 * g * h), dt)
    wb: InputRef
    rb: InputRef
    if n.input(3) and bc is None:
        bvec = L.reshape(_slice(L, n.inputs[3], 0, d, d + 1), (2 * g * h,))
        wb, rb = _slice(L, bvec, 0, 0, g * h), _slice(L, bvec, 0, g * h, 2 * g * h)
    else:
        bd = np.asarray(bc)[d]
        wb, rb = ConstInput(bd[: g * h].astype(dt)), ConstInput(bd[g * h :].astype(dt))
    # every step's input projection in one GEMM
    xw = L.to("MatMulV2", [L.reshape(x, (t * b, isz)), w, wb, None], (t * b, g * h), dt, transpose_x1=False,
              transpose_x2=True, offset_x=0)  # fmt: skip
    xw3 = L.reshape(xw, (t, b, g * h))
    h0, c0 = _state(L, 5, d, seq, h), _state(L, 6, d, seq, h) if op == "LSTM" else None
    hp: InputRef = ConstInput(np.zeros((b, h), dt)) if not isinstance(h0, str) else L.reshape(h0, (b, h))
    cp: InputRef = None
    if op == "LSTM":
        cp = ConstInput(np.zeros((b, h), dt)) if not isinstance(c0, str) else L.reshape(c0, (b, h))
    peep = None
    if op == "LSTM" and n.input(7):
        pc = const(L, 7)
        peep = [ConstInput(np.asarray(pc)[d, k * h : (k + 1) * h].astype(dt)) for k in range(3)] if pc is not None \
            else [_slice(L, L.reshape(_slice(L, n.inputs[7], 0, d, d + 1), (3 * h,)), 0, k * h, (k + 1) * h)
                  for k in range(3)]  # fmt: skip
    mask = seq.step_mask(h, dt)
    s2 = (b, h)

    def f(k: int, v: str) -> str:
        if clip is not None:
            v = L.to("ClipByValue", [v, L.scalar(-float(clip), dt), L.scalar(float(clip), dt)], s2, dt)
        return _act(L, *acts[k], v)

    ys = []
    for step in range(t):
        xt = L.reshape(_slice(L, xw3, 0, step, step + 1), (b, g * h))
        hr = L.to("MatMulV2", [hp, r, rb, None], (b, g * h), dt, transpose_x1=False, transpose_x2=True, offset_x=0)
        if op == "LSTM":
            pre = L.to("Add", [xt, hr], (b, g * h), dt)
            gi, go, gf, gc = (_cols(L, pre, k, h) for k in range(4))
            if peep is not None:
                gi = L.to("Add", [gi, L.to("Mul", [cp, peep[0]], s2, dt)], s2, dt)
                gf = L.to("Add", [gf, L.to("Mul", [cp, peep[2]], s2, dt)], s2, dt)
            i = f(0, gi)
            fg = L.to("Sub", [L.scalar(1, dt), i], s2, dt) if int(L.attr("input_forget")) else f(0, gf)
            cn = L.to("Add", [L.to("Mul", [fg, cp], s2, dt), L.to("Mul", [i, f(1, gc)], s2, dt)], s2, dt)
            if peep is not None:
                go = L.to("Add", [go, L.to("Mul", [cn, peep[1]], s2, dt)], s2, dt)
            hn = L.to("Mul", [f(0, go), f(2, cn)], s2, dt)
        elif op == "GRU":
            xz, xr, xh = (_cols(L, xt, k, h) for k in range(3))
            hz, hrr, hh = (_cols(L, hr, k, h) for k in range(3))
            z = f(0, L.to("Add", [xz, hz], s2, dt))
            rg = f(0, L.to("Add", [xr, hrr], s2, dt))
            if int(L.attr("linear_before_reset")):
                cand = f(1, L.to("Add", [xh, L.to("Mul", [rg, hh], s2, dt)], s2, dt))
            else:
                rh = L.to("Mul", [rg, hp], s2, dt)
                hh2 = L.to("MatMulV2", [rh, _rows_h(L, r, h), _bias_h(L, rb, h), None], s2, dt, transpose_x1=False,
                           transpose_x2=True, offset_x=0)  # fmt: skip
                cand = f(1, L.to("Add", [xh, hh2], s2, dt))
            # h = (1 - z) * cand + z * h_prev = cand + z * (h_prev - cand)
            hn = L.to("Add", [cand, L.to("Mul", [z, L.to("Sub", [hp, cand], s2, dt)], s2, dt)], s2, dt)
            cn = None
        else:
            hn = f(0, L.to("Add", [xt, hr], s2, dt))
            cn = None
        if mask is not None:
            m = _mask_step(L, mask, step, b, h)
            yt = L.to("Mul", [hn, m], s2, dt)
            hn = L.to("Add", [hp, L.to("Mul", [m, L.to("Sub", [hn, hp], s2, dt)], s2, dt)], s2, dt)
            if cn is not None and cp is not None:
                cn = L.to("Add", [cp, L.to("Mul", [m, L.to("Sub", [cn, cp], s2, dt)], s2, dt)], s2, dt)
        else:
            yt = hn
        ys.append(L.reshape(yt, (1, b, h)))
        hp = hn
        if cn is not None:
            cp = cn
    y = ys[0] if t == 1 else L.to("ConcatD", ys, (t, b, h), dt, concat_dim=0, N=t)
    assert isinstance(hp, str)
    last_h = L.reshape(hp, (1, b, h))
    last_c = L.reshape(cp, (1, b, h)) if isinstance(cp, str) else last_h
    return y, last_h, last_c


def _rows_h(L: Builder, r: str | ConstInput, h: int) -> str | ConstInput:
    """The candidate gate's rows of R (2H..3H)."""
    if isinstance(r, ConstInput):
        return ConstInput(np.ascontiguousarray(r.value[2 * h : 3 * h]))
    return _slice(L, r, 0, 2 * h, 3 * h)


def _bias_h(L: Builder, rb: InputRef, h: int) -> InputRef:
    if isinstance(rb, ConstInput):
        return ConstInput(np.ascontiguousarray(rb.value[2 * h : 3 * h]))
    assert isinstance(rb, str)
    return _slice(L, rb, 0, 2 * h, 3 * h)


def _mask_step(L: Builder, mask: InputRef, step: int, b: int, h: int) -> InputRef:
    if isinstance(mask, ConstInput):
        return ConstInput(np.ascontiguousarray(mask.value[step]))
    assert isinstance(mask, str)
    return L.reshape(_slice(L, mask, 0, step, step + 1), (b, h))


RULES.update({"LSTM": _recurrent, "GRU": _recurrent, "RNN": _recurrent})
