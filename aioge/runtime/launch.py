"""Single-op launches: ``aclopCompileAndExecute`` from Python values.

``aioge.op`` maps one-to-one onto the ACL call: inputs in IR order, outputs,
attrs by CANN name.  Descriptors and attrs are cached per device (ACL copies
what it needs at enqueue time, so one cached desc serves every call).

On the host runtime a launch of device tensors (and absent optional inputs)
takes the fast path: a prepared launch (``aiogeHostLaunchPrepare``: descs
checked once) is cached per device by (op, attrs, dtypes and shapes), and a
launch is then one C call taking the device pointers that enqueues the op and
returns its stream sequence number, which is its completion (no event).  The
checks, the compiled-op cache accounting and the errors are the runtime's
own, as for ``aclopCompileAndExecute``.  That launch is one transaction of the
stream's enqueue primitive (``Enqueue.run_prepared`` in stream.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _native, dtypes
from .._native import acl
from ..dtypes import ACL_CODE as _ACL_CODE
from . import _trace, aliasing
from .descs import Attr
from .scheduler import SEQ_MODE, Completion
from .stream import DeviceMemory, Tensor, TensorSpec

if TYPE_CHECKING:
    from .stream import Stream

__all__ = ("Attr", "Const", "HostInput", "launch", "op")

_ND = int(acl.Format.ND)
_compile_and_execute = acl.compile_and_execute_rc
#: prepared launches exist (the host runtime): see the module docstring
_FAST = SEQ_MODE and acl.launch_execute_rc is not None
_launch_op = acl.launch_op
_NULL = acl.NULL


class Const:
    """A constant input: its value is folded into the compiled op (``aclSetTensorConst``).

    Example:
        >>> aioge.op("Fill", [aioge.Const(np.array([2, 3])), value], [aioge.TensorSpec((2, 3))], stream=s)
    """

    __slots__ = ("array",)

    def __init__(self, value: Any, dtype: dtypes.DTypeLike | None = None) -> None:
        self.array = _native.contiguous(value, None if dtype is None else dtypes.normalize(dtype))
        dtypes.normalize(self.array.dtype)


class HostInput:
    """A host-placed input (``aclSetTensorPlaceMent(ACL_MEMTYPE_HOST)``): small
    value inputs such as shapes, perms and axes that the runtime reads itself."""

    __slots__ = ("array",)

    def __init__(self, value: Any, dtype: dtypes.DTypeLike | None = None) -> None:
        self.array = _native.contiguous(value, None if dtype is None else dtypes.normalize(dtype))
        dtypes.normalize(self.array.dtype)


InputLike = Any  # Tensor | Const | HostInput | np.ndarray | None


def launch(
    stream: Stream,
    op_type: str,
    inputs: Sequence[InputLike],
    outputs: Sequence[Tensor],
    attrs: Mapping[str, Any] | None = None,
    formats: Sequence[int] | None = None,
    what: str | None = None,
) -> Completion:
    """Enqueue one op on ``stream``; return its completion.

    ``formats`` gives the aclFormat of each input then each output (ND by
    default); ``what`` names the launch in its device error (default: the op
    type).  Raises the AclError of a failed compile/validation at once.
    This is the hot path of every launch: keep it lean.
    """
    if formats is None:  # observed (a profiler, metrics) or not, a launch takes the same route
        fast = _FAST
        tensors = True
        for x in inputs:
            if type(x) is not Tensor:
                tensors = False
                if x is not None:
                    fast = False
                    break
        if fast:
            return stream._enqueue.run_prepared(op_type, inputs, outputs, attrs, what)
        if tensors:
            return _launch_tensors(stream, op_type, inputs, outputs, attrs, what)
    cache = stream.device.context.cache
    n_in, n_out = len(inputs), len(outputs)
    codes = _ACL_CODE
    with stream._enqueue as tx:
        attr_h = cache.attr(attrs)
        descs = cache.desc_table
        din, bin_, dout, bout = tx.scratch(n_in, n_out)
        keep: list[Any] = []
        reads: list[DeviceMemory] = []
        writes: list[DeviceMemory] = []
        temp_descs: list[Any] = []
        temp_bufs: list[Any] = []
        try:
            for i, x in enumerate(inputs):
                if type(x) is Tensor:
                    m = x._mem
                    if m is None or m.ptr is None:
                        m = x._memory()  # raises ClosedResourceError
                    key = (codes[x.dtype], x.shape, formats[i] if formats else _ND, False)
                    d = descs.get(key)
                    din[i] = d if d is not None else cache.desc(*key)
                    bin_[i] = m.buffer
                    keep.append(m)
                    reads.append(m)
                elif x is None:
                    din[i], bin_[i] = cache.absent()
                elif isinstance(x, Const):
                    a = x.array
                    d = acl.create_tensor_desc(codes[a.dtype], a.shape, formats[i] if formats else _ND)
                    temp_descs.append(d)
                    if a.nbytes:
                        acl.set_tensor_const(d, _native.host_ptr(a), a.nbytes)
                    din[i], bin_[i] = d, cache.null_buffer()
                else:
                    a = x.array if isinstance(x, HostInput) else _native.contiguous(x)
                    din[i] = cache.desc(int(dtypes.to_acl(a.dtype)), a.shape, formats[i] if formats else _ND, True)
                    b = acl.create_data_buffer(_native.host_ptr(a) if a.nbytes else acl.NULL, a.nbytes)
                    temp_bufs.append(b)
                    bin_[i] = b
                    keep.append(a)
            for j, y in enumerate(outputs):
                m = y._memory()
                key = (codes[y.dtype], y.shape, formats[n_in + j] if formats else _ND, False)
                d = descs.get(key)
                dout[j] = d if d is not None else cache.desc(*key)
                bout[j] = m.buffer
                keep.append(m)
                writes.append(m)
            tx.order(reads, writes)
            tx.mark_start()
            acl.compile_and_execute(cache.op_name(op_type), n_in, din, bin_, n_out, dout, bout, attr_h, tx.handle,
                                    op_type)  # fmt: skip
        finally:
            for d in temp_descs:
                acl.destroy_tensor_desc(d)
            for b in temp_bufs:
                acl.destroy_data_buffer(b)
        comp = tx.commit(keep, op_type, reads=reads, writes=writes, name=what)
        if _trace.hub is not None:
            _trace.hub.annotate(comp, inputs, outputs)
    return comp


def _launch_tensors(
    stream: Stream,
    op_type: str,
    inputs: Sequence[Tensor],
    outputs: Sequence[Tensor],
    attrs: Mapping[str, Any] | None,
    what: str | None = None,
) -> Completion:
    """launch() for the common case: device tensors only, ND formats, no timing.

    Same semantics, fewer Python steps (this is what a tight loop of tiny ops pays).
    """
    cache = stream.device.context.cache
    codes = _ACL_CODE
    descs = cache.desc_table
    n_in, n_out = len(inputs), len(outputs)
    with stream._enqueue as tx:
        attr_h = cache.attr(attrs)
        din, bin_, dout, bout = tx.scratch(n_in, n_out)
        reads: list[DeviceMemory] = []
        i = 0
        for x in inputs:
            m = x._mem
            if m is None or m.ptr is None:
                m = x._memory()  # raises ClosedResourceError
            key = (codes[x.dtype], x.shape, _ND, False)
            d = descs.get(key)
            din[i] = d if d is not None else cache.desc(*key)
            bin_[i] = m.buffer
            reads.append(m)
            i += 1
        writes: list[DeviceMemory] = []
        j = 0
        for y in outputs:
            m = y._memory()
            key = (codes[y.dtype], y.shape, _ND, False)
            d = descs.get(key)
            dout[j] = d if d is not None else cache.desc(*key)
            bout[j] = m.buffer
            writes.append(m)
            j += 1
        tx.order(reads, writes)
        tx.mark_start()
        rc = _compile_and_execute(cache.op_name(op_type), n_in, din, bin_, n_out, dout, bout, attr_h, 0, 0, acl.NULL,
                                  tx.handle)  # fmt: skip
        if rc:
            acl.raise_for(rc, op_type)
        comp = tx.commit((reads, writes), op_type, reads=reads, writes=writes, name=what)
        if _trace.hub is not None:
            _trace.hub.annotate(comp, inputs, outputs)
        return comp


def op(
    op_type: str,
    inputs: Sequence[InputLike],
    outputs: Sequence[Tensor | TensorSpec],
    attrs: Mapping[str, Any] | None = None,
    *,
    stream: Stream | None = None,
    formats: Sequence[int] | None = None,
) -> list[Tensor]:
    """Launch one CANN operator: ``aclopCompileAndExecute``, one to one.

    Args:
        op_type: the CANN op type, e.g. ``"Add"``, ``"MatMulV2"``, ``"Cast"``.
        inputs: in IR order; each a :class:`Tensor` (device), ``None`` (an
            absent optional input), :class:`Const` (folded into the compiled
            op) or :class:`HostInput` / numpy array (host-placed value input).
        outputs: :class:`TensorSpec` to allocate, or a :class:`Tensor` to write into.
        attrs: CANN attr names to Python values (types inferred: bool, int,
            float, str, numpy dtype, lists of those) or :class:`Attr`.
        stream: where to enqueue; default: the stream of the first tensor.
        formats: aclFormat per input then per output (default ND).

    Returns:
        The output tensors, at once; ``await`` one to wait for the launch.

    Raises:
        AclError: the runtime refused the call (e.g. ``OpOutputMismatchError``
            for an output shape the op does not produce); nothing was enqueued
            and the stream stays usable.

    Example:
        >>> (y,) = aioge.op("Add", [x, x], [aioge.TensorSpec((2, 3), "float32")], stream=s)
    """
    if _FAST and formats is None:  # into one given output, unobserved: one C call (or None)
        done = _launch_op(op_type, inputs, outputs, attrs, stream)
        if done is not None:
            return done
    s = stream
    if s is None:  # the stream of the first tensor: Tensor.home(), inline for the common case
        x = inputs[0] if inputs else None
        m = x._mem if type(x) is Tensor else None
        if m is not None and m.ptr is not None and not m.stream._closed:
            s = m.stream
        else:
            for x in (*inputs, *outputs):
                if type(x) is Tensor:
                    s = x._memory().home()
                    break
            else:
                raise ValueError("no Tensor among the inputs/outputs: pass stream=")
    # before launch, so every backend refuses the same (only outputs given as tensors can overlap)
    outs = []
    given = 0
    mem = None  # of the given output, when one is
    for y in outputs:
        if type(y) is Tensor:
            given += 1
            mem = y._mem
            outs.append(y)
        else:
            spec = _spec(y)
            outs.append(Tensor._empty(s, spec.shape, spec.dtype))
    fast = _FAST and formats is None and given < 2  # two given outputs: check them below
    if fast:
        for x in inputs:  # device tensors and absent inputs, none of them the given output
            if type(x) is Tensor:
                if given and x._mem is mem:
                    fast = False
                    break
            elif x is not None:
                fast = False
                break
    if fast:
        s._enqueue.run_prepared(op_type, inputs, outs, attrs)
        return outs
    if given:
        aliasing.check(op_type, inputs, outputs)
    launch(s, op_type, inputs, outs, attrs, formats)
    return outs


def _spec(y: Any) -> TensorSpec:
    if isinstance(y, TensorSpec):
        return y
    if isinstance(y, tuple) and len(y) == 2 and not isinstance(y[0], (int, np.integer)):
        return TensorSpec(y[0], y[1])
    raise TypeError(f"outputs must be Tensor or TensorSpec, got {y!r}")
