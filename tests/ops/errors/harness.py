"""The bad-descriptor table's harness: a ``Case`` is one valid call of an op type and
the ways to spoil it (wrong input count, dtype, rank, output shape, missing or
mistyped attrs, bad formats); ``check_refusals`` runs the good call, then each bad
one, which must be refused at launch with the typed error for its ACL code, with
nothing enqueued and the stream still working.  The tables are per op family
(``test_<family>.py`` here; ``cases.CASES`` is all of them, also the fuzzers' corpus)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import aioge
from aioge import Const, HostInput, TensorSpec
from aioge.errors import (
    OpAttrMismatchError,
    OpInputMismatchError,
    OpOutputMismatchError,
    UnsupportedDataTypeError,
)
from tests.ops.opsutil import up

F, I32, U16, B = "float32", "int32", "uint16", "bool"
NCHW, NHWC, ND, NC1HWC0 = 0, 1, 2, 3


@dataclass
class Case:
    op: str
    ins: list[Any]  # ("t", shape, dtype) device tensor, ("h", array) host input, ("c", array) const, None
    outs: list[Any]  # (shape, dtype)
    attrs: dict[str, Any] = field(default_factory=dict)
    formats: list[int] | None = None
    bad: list[tuple[str, Any, type]] = field(default_factory=list)  # (kind, arg, error)


def T(shape, dt=F):
    return ("t", tuple(shape), dt)


def H(v, dt=np.int64):
    return ("h", np.asarray(v, dt))


def C(v, dt=np.int64):
    return ("c", np.asarray(v, dt))


CI, CO, CA, CT = OpInputMismatchError, OpOutputMismatchError, OpAttrMismatchError, UnsupportedDataTypeError


def unary(op, bad_dt=I32, attrs=None, extra=()):
    """An elementwise unary op on (2, 3): count, input dtype, output shape and dtype."""
    bad = [
        ("count", 2, CI),
        ("dtype", (0, T((2, 3), bad_dt)), CT),
        ("out", ((3, 2), F), CO),
        ("outdtype", "float64", CT),
    ]
    return Case(op, [T((2, 3))], [((2, 3), F)], attrs or {}, bad=bad + list(extra))


def binary(op, dt=F, out_dt=None, bad_dt=I32):
    """A broadcasting binary op: count, mixed dtypes, shapes that do not broadcast, output shape and dtype."""
    out_dt = out_dt or dt
    return Case(
        op,
        [T((2, 3), dt), T((3,), dt)],
        [((2, 3), out_dt)],
        bad=[
            ("count", 1, CI),
            ("count", 3, CI),
            ("dtype", (1, T((3,), bad_dt)), CT),
            ("in", (1, T((4,), dt)), CI),
            ("out", ((3, 3), out_dt), CO),
            ("outdtype", "float16" if out_dt != "float16" else F, CT),
        ],
    )


def reduce_d(op, dt=F, bad_dt=I32):
    """A *D reduction (axes attr, required)."""
    return Case(
        op,
        [T((2, 3), dt)],
        [((2,), dt)],
        {"axes": [1]},
        bad=[
            ("noattr", "axes", CA),
            ("attr", {"axes": [3]}, CA),
            ("attr", {"keep_dims": 1}, CA),
            ("out", ((3,), dt), CO),
            ("dtype", (0, T((2, 3), bad_dt)), CT),
            ("count", 2, CI),
        ],
    )


def reduce_in(op, dt=F, bad_dt=I32):
    """A reduction with the axes as a host-placed input."""
    return Case(
        op,
        [T((2, 3), dt), H([0])],
        [((3,), dt)],
        bad=[
            ("in", (1, H([2])), CI),
            ("in", (1, H([[0]])), CI),
            ("out", ((2,), dt), CO),
            ("dtype", (0, T((2, 3), bad_dt)), CT),
            ("outdtype", I32 if dt != I32 else F, CT),
            ("count", 3, CI),
        ],
    )


def materialise(stream, spec):
    if spec is None:
        return None
    kind = spec[0]
    if kind == "t":
        _, shape, dt = spec
        return up(stream, np.zeros(shape, np.dtype(dt)))
    if kind == "h":
        return HostInput(spec[1])
    return Const(spec[1])


def launch(stream, case, ins, outs, attrs, formats):
    tensors = [materialise(stream, s) for s in ins]
    specs = [TensorSpec(sh, dt) for sh, dt in outs]
    fm = formats
    if fm is not None and len(fm) != len(ins) + len(outs):
        fm = None
    return aioge.op(case.op, tensors, specs, attrs, stream=stream, formats=fm)


OUT_KINDS = {"out", "out1", "outdtype"}


async def check_refusals(stream: Any, case: Case) -> None:
    # the good call works
    ys = launch(stream, case, case.ins, case.outs, case.attrs, case.formats)
    await ys[0]
    for kind, arg, err in case.bad:
        ins, outs, attrs, formats = list(case.ins), list(case.outs), dict(case.attrs), case.formats
        if kind == "count":
            ins = ins[:arg] if arg < len(ins) else ins + [T((1,))] * (arg - len(ins))
            formats = None
        elif kind in ("dtype", "in"):
            i, spec = arg
            if i == len(ins):
                ins.append(spec)
            else:
                ins[i] = spec
        elif kind == "out":
            outs[0] = arg
        elif kind == "out1":
            outs[1] = arg
        elif kind == "outdtype":
            outs[0] = (outs[0][0], arg)
        elif kind == "attr":
            attrs.update(arg)
        elif kind == "noattr":
            attrs.pop(arg)
        elif kind == "fmt":
            i, f = arg
            formats = list(formats)
            formats[i] = f
        with pytest.raises(err) as ei:
            launch(stream, case, ins, outs, attrs, formats)
        msg = ei.value.message  # the runtime's own text (aclGetRecentErrMsg) names the op
        assert case.op in msg, (kind, arg, msg)
        if err is UnsupportedDataTypeError:
            assert any(n in msg for n in ("float", "int", "bool", "complex", "uint")), msg
    # nothing was enqueued by the refused calls; the stream still works
    ys = launch(stream, case, case.ins, case.outs, case.attrs, case.formats)
    await ys[0]
    await stream.synchronize()
