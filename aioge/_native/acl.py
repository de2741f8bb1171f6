"""A typed wrapper per ACL call the runtime core makes.

The core (``aioge.runtime``) calls C only through this module: every wrapper
checks the return code inside (raising the :class:`~aioge.AclError` subclass
for it) unless its docstring says it returns the code, and every magic number
of the ACL headers is an ``IntEnum`` here, its values read from cffi's named
constants of ``cffi_build/acl.h`` (so they cannot drift from the header).

Handles (``aclrtStream``, ``aclrtEvent``, ``aclTensorDesc *``...) stay opaque
cffi pointers (``Handle``).  Calls on the hot path of a launch
(:func:`compile_and_execute`, :func:`record_event`, :func:`stream_wait_event`)
are one Python frame over the cffi call; keep them so.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from ..errors import OutOfDeviceMemoryError, error_class
from . import _has, _launch, check, ffi, host_ptr, lib, recent_error

Handle = Any  # an opaque cffi pointer (aclrtStream, aclrtEvent, aclTensorDesc *, ...)

__all__ = (
    "NULL", "Handle", "MemcpyKind", "MemType", "EventFlag", "MemAttr", "MallocPolicy", "Format", "DataType",
    "EventStatus", "ERROR_INVALID_PARAM", "ERROR_REPEAT_INITIALIZE", "ERROR_WAIT_TIMEOUT",
)  # fmt: skip

NULL = ffi.NULL


class MemcpyKind(enum.IntEnum):
    """``aclrtMemcpyKind``."""

    HOST_TO_HOST = lib.ACL_MEMCPY_HOST_TO_HOST
    HOST_TO_DEVICE = lib.ACL_MEMCPY_HOST_TO_DEVICE
    DEVICE_TO_HOST = lib.ACL_MEMCPY_DEVICE_TO_HOST
    DEVICE_TO_DEVICE = lib.ACL_MEMCPY_DEVICE_TO_DEVICE


class MemType(enum.IntEnum):
    """``aclMemType``: where a tensor's bytes are placed (``aclSetTensorPlaceMent``)."""

    DEVICE = lib.ACL_MEMTYPE_DEVICE
    HOST = lib.ACL_MEMTYPE_HOST


class EventFlag(enum.IntFlag):
    """``aclrtCreateEventWithFlag`` flags."""

    #: usable by aclrtStreamWaitEvent
    SYNC = lib.ACL_EVENT_SYNC
    #: usable by aclrtEventElapsedTime
    TIME_LINE = lib.ACL_EVENT_TIME_LINE


class MemAttr(enum.IntEnum):
    """``aclrtMemAttr`` (``aclrtGetMemInfo``)."""

    DDR = lib.ACL_DDR_MEM
    HBM = lib.ACL_HBM_MEM


class MallocPolicy(enum.IntEnum):
    """``aclrtMemMallocPolicy``."""

    HUGE_FIRST = lib.ACL_MEM_MALLOC_HUGE_FIRST


class Format(enum.IntEnum):
    """``aclFormat`` values the runtime core uses (the public table is :class:`aioge.dtypes.Format`)."""

    UNDEFINED = lib.ACL_FORMAT_UNDEFINED
    NCHW = lib.ACL_FORMAT_NCHW
    ND = lib.ACL_FORMAT_ND


class DataType(enum.IntEnum):
    """``aclDataType`` values the runtime core names (the public table is :class:`aioge.dtypes.DataType`)."""

    UNDEFINED = lib.ACL_DT_UNDEFINED


class EventStatus(enum.IntEnum):
    """``aclrtEventRecordedStatus``."""

    NOT_READY = lib.ACL_EVENT_RECORDED_STATUS_NOT_READY
    COMPLETE = lib.ACL_EVENT_RECORDED_STATUS_COMPLETE


ERROR_INVALID_PARAM = int(lib.ACL_ERROR_INVALID_PARAM)
ERROR_REPEAT_INITIALIZE = int(lib.ACL_ERROR_REPEAT_INITIALIZE)
ERROR_WAIT_TIMEOUT = int(lib.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT)
ERROR_STREAM_TIMEOUT = int(lib.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT)
ERROR_INTERNAL = int(lib.ACL_ERROR_INTERNAL_ERROR)


def has_entry(name: str) -> bool:
    """The loaded backend defines the entry point ``name`` (optional calls are probed so)."""
    return hasattr(lib, name)


# ---- runtime, devices, contexts -------------------------------------------------------
def init() -> None:
    """``aclInit(NULL)``; a process where someone else initialised ACL already is fine."""
    rc = lib.aclInit(NULL)
    if rc == ERROR_REPEAT_INITIALIZE:
        recent_error()
    else:
        check(rc, "aclInit")


def finalize() -> None:
    """``aclFinalize``; its failure at teardown is not for anyone (the text is cleared)."""
    lib.aclFinalize()
    recent_error()


def device_count() -> int:
    n = ffi.new("uint32_t *")
    check(lib.aclrtGetDeviceCount(n), "aclrtGetDeviceCount")
    return int(n[0])


def set_device(device_id: int) -> None:
    check(lib.aclrtSetDevice(device_id), "aclrtSetDevice")


def reset_device(device_id: int) -> None:
    """``aclrtResetDevice``, unchecked (teardown and failure paths)."""
    lib.aclrtResetDevice(device_id)


def create_context(device_id: int) -> Handle:
    p = ffi.new("aclrtContext *")
    check(lib.aclrtCreateContext(p, device_id), "aclrtCreateContext")
    return p[0]


def destroy_context(ctx: Handle) -> None:
    """``aclrtDestroyContext``, unchecked (teardown)."""
    lib.aclrtDestroyContext(ctx)


def mem_info(attr: MemAttr = MemAttr.HBM) -> tuple[int, int] | None:
    """``(free, total)`` bytes, or ``None`` when the backend cannot tell."""
    free, total = ffi.new("size_t *"), ffi.new("size_t *")
    if lib.aclrtGetMemInfo(int(attr), free, total):
        recent_error()
        return None
    return int(free[0]), int(total[0])


def mem_info_checked(attr: MemAttr = MemAttr.HBM) -> tuple[int, int]:
    free, total = ffi.new("size_t *"), ffi.new("size_t *")
    check(lib.aclrtGetMemInfo(int(attr), free, total), "aclrtGetMemInfo")
    return int(free[0]), int(total[0])


# ---- memory ---------------------------------------------------------------------------
def malloc_rc(nbytes: int) -> tuple[int, Handle]:
    """``aclrtMalloc``: returns ``(rc, ptr)`` so the caller can retry after freeing its cache."""
    p = ffi.new("void **")
    rc = lib.aclrtMalloc(p, nbytes, int(MallocPolicy.HUGE_FIRST))
    return int(rc), p[0]


def malloc_blocks(caps: Sequence[int]) -> tuple[int, list[tuple[Handle, Handle]]]:
    """``aclrtMalloc`` and ``aclCreateDataBuffer`` of each of ``caps``: ``(rc, blocks)``, the
    ``(ptr, aclDataBuffer)`` of each; where one fails, ``rc`` (the malloc's; a data buffer's failure
    is :class:`~aioge.OutOfDeviceMemoryError`, its block freed) and the blocks made before it."""
    p = ffi.new("void *[]", len(caps))
    malloc, buffer, policy = lib.aclrtMalloc, lib.aclCreateDataBuffer, int(MallocPolicy.HUGE_FIRST)
    out: list[tuple[Handle, Handle]] = []
    for i, cap in enumerate(caps):
        rc = malloc(p + i, cap, policy)
        if rc:
            return int(rc), out
        b = buffer(p[i], cap)
        if b == NULL:
            lib.aclrtFree(p[i])
            for ptr, buf in out:
                lib.aclDestroyDataBuffer(buf)
                lib.aclrtFree(ptr)
            raise OutOfDeviceMemoryError(207001, "aclCreateDataBuffer failed", "aclCreateDataBuffer")
        out.append((p[i], b))
    return 0, out


def free(ptr: Handle) -> None:
    """``aclrtFree``, unchecked (a finalizer frees)."""
    lib.aclrtFree(ptr)


def malloc_host(nbytes: int) -> Handle:
    p = ffi.new("void **")
    check(lib.aclrtMallocHost(p, nbytes), "aclrtMallocHost")
    return p[0]


def free_host(ptr: Handle) -> None:
    lib.aclrtFreeHost(ptr)


def create_data_buffer(ptr: Handle, nbytes: int) -> Handle:
    """``aclCreateDataBuffer``; NULL is :class:`~aioge.OutOfDeviceMemoryError`."""
    b = lib.aclCreateDataBuffer(ptr, nbytes)
    if b == NULL:
        raise OutOfDeviceMemoryError(207001, "aclCreateDataBuffer failed", "aclCreateDataBuffer")
    return b


def destroy_data_buffer(buf: Handle) -> None:
    lib.aclDestroyDataBuffer(buf)


def memcpy(dst: Handle, src: Handle, nbytes: int, kind: MemcpyKind) -> None:
    """``aclrtMemcpy``: copies at once, outside any stream's order."""
    check(lib.aclrtMemcpy(dst, nbytes, src, nbytes, kind), "aclrtMemcpy")


def memcpy_async(dst: Handle, src: Handle, nbytes: int, kind: MemcpyKind, stream: Handle) -> None:
    check(lib.aclrtMemcpyAsync(dst, nbytes, src, nbytes, kind, stream), "aclrtMemcpyAsync")


def memset_async(dst: Handle, nbytes: int, value: int, stream: Handle) -> None:
    check(lib.aclrtMemsetAsync(dst, nbytes, value, nbytes, stream), "aclrtMemsetAsync")


def memmove(dst: Any, src: Any, nbytes: int) -> None:
    """A host copy (``ffi.memmove``)."""
    ffi.memmove(dst, src, nbytes)


# ---- streams and events ---------------------------------------------------------------
def create_stream() -> Handle:
    p = ffi.new("aclrtStream *")
    check(lib.aclrtCreateStream(p), "aclrtCreateStream")
    return p[0]


def destroy_stream(stream: Handle) -> None:
    """``aclrtDestroyStream``, unchecked (teardown)."""
    lib.aclrtDestroyStream(stream)


# ---- stream capture (aclmdlRI*) ---------------------------------------------------------
class CaptureMode(enum.IntEnum):
    """``aclmdlRICaptureMode``: which threads may make unsafe calls (synchronous copies,
    device synchronize) while a capture runs."""

    GLOBAL = lib.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL
    THREAD_LOCAL = lib.ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL
    RELAXED = lib.ACL_MODEL_RI_CAPTURE_MODE_RELAXED


class CaptureStatus(enum.IntEnum):
    """``aclmdlRICaptureStatus``."""

    NONE = lib.ACL_MODEL_RI_CAPTURE_STATUS_NONE
    ACTIVE = lib.ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE
    INVALIDATED = lib.ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED


def capture_begin(stream: Handle, mode: CaptureMode) -> None:
    check(lib.aclmdlRICaptureBegin(stream, int(mode)), "aclmdlRICaptureBegin")


def capture_info(stream: Handle) -> tuple[CaptureStatus, Handle]:
    status, model = ffi.new("aclmdlRICaptureStatus *"), ffi.new("aclmdlRI *")
    check(lib.aclmdlRICaptureGetInfo(stream, status, model), "aclmdlRICaptureGetInfo")
    return CaptureStatus(status[0]), model[0]


def capture_end(stream: Handle) -> Handle:
    """``aclmdlRICaptureEnd``: the captured model (an invalidated capture raises its error)."""
    p = ffi.new("aclmdlRI *")
    check(lib.aclmdlRICaptureEnd(stream, p), "aclmdlRICaptureEnd")
    return p[0]


def model_ri_execute_async(model: Handle, stream: Handle) -> None:
    check(lib.aclmdlRIExecuteAsync(model, stream), "aclmdlRIExecuteAsync")


def model_ri_destroy(model: Handle) -> None:
    """``aclmdlRIDestroy``, unchecked (teardown: queued replays keep the model until they ran)."""
    lib.aclmdlRIDestroy(model)


def create_event(flags: EventFlag = EventFlag.SYNC | EventFlag.TIME_LINE) -> Handle:
    p = ffi.new("aclrtEvent *")
    check(lib.aclrtCreateEventWithFlag(p, int(flags)), "aclrtCreateEventWithFlag")
    return p[0]


def destroy_event(ev: Handle) -> None:
    """``aclrtDestroyEvent``, unchecked (events are pooled and destroyed at teardown)."""
    lib.aclrtDestroyEvent(ev)


def record_event(ev: Handle, stream: Handle) -> None:
    check(lib.aclrtRecordEvent(ev, stream), "aclrtRecordEvent")


def stream_wait_event(stream: Handle, ev: Handle) -> None:
    check(lib.aclrtStreamWaitEvent(stream, ev), "aclrtStreamWaitEvent")


#: ``aclrtSynchronizeEventWithTimeout(ev, ms) -> rc``: the raw entry point, for the
#: completion lanes that interpret its codes (timeout, the launch's own error) themselves
synchronize_event_rc = lib.aclrtSynchronizeEventWithTimeout


def query_event_done(ev: Handle) -> bool:
    st = ffi.new("aclrtEventRecordedStatus *")
    check(lib.aclrtQueryEventStatus(ev, st), "aclrtQueryEventStatus")
    return int(st[0]) == EventStatus.COMPLETE


class ElapsedTimer:
    """``aclrtEventElapsedTime`` with one reused out-parameter (per completion lane)."""

    __slots__ = ("_ms",)

    def __init__(self) -> None:
        self._ms = ffi.new("float *")

    def __call__(self, start: Handle, end: Handle) -> float | None:
        """Milliseconds between two recorded events, or ``None`` when the runtime cannot tell."""
        if lib.aclrtEventElapsedTime(self._ms, start, end):
            return None
        return float(self._ms[0])


def try_elapsed_ms(start: Handle, end: Handle) -> float | None:
    """Milliseconds between two recorded events, or ``None`` when the runtime cannot tell."""
    return ElapsedTimer()(start, end)


def elapsed_ms(start: Handle, end: Handle) -> float:
    ms = ffi.new("float *")
    check(lib.aclrtEventElapsedTime(ms, start, end), "aclrtEventElapsedTime")
    return float(ms[0])


def event_timestamp_us(ev: Handle) -> int | None:
    us = ffi.new("uint64_t *")
    if lib.aclrtEventGetTimestamp(ev, us):
        return None
    return int(us[0])


# ---- tensor descriptors, attrs, single ops ---------------------------------------------
def _dims(shape: Sequence[int]) -> Any:
    return ffi.new("int64_t[]", list(shape)) if len(shape) else NULL


def create_tensor_desc(dtype: int, shape: Sequence[int], fmt: int) -> Handle:
    d = lib.aclCreateTensorDesc(dtype, len(shape), _dims(shape), fmt)
    if d == NULL:
        raise error_class(ERROR_INVALID_PARAM)(ERROR_INVALID_PARAM, recent_error(), "aclCreateTensorDesc")
    return d


def absent_tensor_desc() -> Handle:
    """The optional-input convention: an UNDEFINED desc (``aclCreateTensorDesc(-1, 0, NULL, -1)``)."""
    return create_tensor_desc(int(DataType.UNDEFINED), (), int(Format.UNDEFINED))


def destroy_tensor_desc(d: Handle) -> None:
    lib.aclDestroyTensorDesc(d)


def set_tensor_const(d: Handle, ptr: Handle, nbytes: int) -> None:
    check(lib.aclSetTensorConst(d, ptr, nbytes), "aclSetTensorConst")


def set_tensor_placement(d: Handle, where: MemType) -> None:
    check(lib.aclSetTensorPlaceMent(d, int(where)), "aclSetTensorPlaceMent")


def create_attr() -> Handle:
    h = lib.aclopCreateAttr()
    if h == NULL:
        raise MemoryError("aclopCreateAttr failed")
    return h


def destroy_attr(h: Handle) -> None:
    lib.aclopDestroyAttr(h)


def set_attr(h: Handle, name: str, kind: str, v: Any) -> None:
    """``aclopSetAttr<kind>``; ``kind`` is one of ``Bool Int Float String DataType List*``."""
    n = name.encode()
    if kind == "Bool":
        rc = lib.aclopSetAttrBool(h, n, 1 if v else 0)
    elif kind == "Int":
        rc = lib.aclopSetAttrInt(h, n, int(v))
    elif kind == "Float":
        rc = lib.aclopSetAttrFloat(h, n, float(v))
    elif kind == "String":
        rc = lib.aclopSetAttrString(h, n, str(v).encode())
    elif kind == "DataType":
        rc = lib.aclopSetAttrDataType(h, n, int(v))
    elif kind == "ListBool":
        rc = lib.aclopSetAttrListBool(h, n, len(v), ffi.new("uint8_t[]", [1 if x else 0 for x in v]))
    elif kind == "ListInt":
        rc = lib.aclopSetAttrListInt(h, n, len(v), ffi.new("int64_t[]", [int(x) for x in v]))
    elif kind == "ListFloat":
        rc = lib.aclopSetAttrListFloat(h, n, len(v), ffi.new("float[]", [float(x) for x in v]))
    else:  # ListString
        keep = [ffi.new("char[]", str(x).encode()) for x in v]
        rc = lib.aclopSetAttrListString(h, n, len(v), ffi.new("char *[]", keep))
    check(rc, f"aclopSetAttr{kind}({name!r})")


def pointer_arrays(n_in: int, n_out: int) -> tuple[Any, Any, Any, Any]:
    """Input descs, input buffers, output descs, output buffers: the arrays of one op launch."""
    return (ffi.new("aclTensorDesc *[]", n_in), ffi.new("aclDataBuffer *[]", n_in),
            ffi.new("aclTensorDesc *[]", n_out), ffi.new("aclDataBuffer *[]", n_out))  # fmt: skip


#: ``aclopCompileAndExecute(op, n_in, descs, bufs, n_out, descs, bufs, attr, engine, compile, path, stream) -> rc``:
#: the raw entry point for the launch hot path (one cffi call, no Python frame); check with :func:`raise_for`
compile_and_execute_rc = lib.aclopCompileAndExecute
#: ``aclrtRecordEvent(event, stream) -> rc``, raw, for the enqueue transaction's commit
record_event_rc = lib.aclrtRecordEvent


def raise_for(rc: int, what: str) -> None:
    """Raise the :class:`~aioge.AclError` subclass of a raw entry point's non-zero code."""
    raise error_class(rc)(rc, recent_error(), what)


def compile_and_execute(op: bytes, n_in: int, din: Any, bin_: Any, n_out: int, dout: Any, bout: Any, attr: Handle,
                        stream: Handle, what: str) -> None:  # fmt: skip
    """``aclopCompileAndExecute`` (engine, compile type and path: ACL's defaults); a refusal raises naming ``what``."""
    rc = compile_and_execute_rc(op, n_in, din, bin_, n_out, dout, bout, attr, 0, 0, NULL, stream)
    if rc:
        raise_for(rc, what)


# ---- compiled graphs (the aiogeGraph API) ----------------------------------------------
def graph_create(in_bytes: Sequence[int], out_bytes: Sequence[int], arena: int, segments: int) -> Handle:
    """A new graph (``in_bytes``/``out_bytes``: lists or tuples, which cffi passes as temporary C arrays)."""
    p = ffi.new("aiogeGraph **")
    check(lib.aiogeGraphCreate(p, len(in_bytes), _c_array(in_bytes), len(out_bytes), _c_array(out_bytes), arena,
                               segments), "aiogeGraphCreate")  # fmt: skip
    return p[0]


def _c_array(xs: Sequence[int]) -> Any:
    """``xs`` as cffi takes an array argument: a list or tuple as it is (cffi copies it into a temporary
    C array for the call), anything else as a list."""
    return xs if type(xs) is list or type(xs) is tuple else list(xs)


def graph_destroy(g: Handle) -> None:
    lib.aiogeGraphDestroy(g)


def graph_pack_weights(g: Handle, first: int, host: Sequence[Any], dev: Sequence[Any] | None) -> tuple[int, int]:
    """Pack a graph's weights (inputs ``first``.., values in ``host``, device copies at ``dev``; None:
    not uploaded, each packed node reads its packed copy) once: ``(packed bytes, nodes packed)``;
    ``(0, 0)`` where the runtime has no packed kernels."""
    if not _has("aiogeGraphPackWeights") or not host:
        return 0, 0
    nbytes, nodes = ffi.new("size_t *"), ffi.new("int32_t *")
    hp = ffi.new("void *[]", list(host))
    dp = ffi.new("void *[]", list(dev)) if dev is not None else ffi.NULL
    check(lib.aiogeGraphPackWeights(g, first, len(host), hp, dp, nbytes, nodes), "aiogeGraphPackWeights")
    return int(nbytes[0]), int(nodes[0])


def graph_pack_fill_weights(g: Handle, first: int, values: Sequence[Any]) -> tuple[int, int, list[bool]] | None:
    """Before :func:`graph_pack_weights`: pack the nodes whose first packable weight (inputs ``first``..)
    is a fill -- ``values[w]``: a pointer to the one element weight ``w`` repeats, or None (not a fill)
    -- from the value alone: ``(packed bytes, nodes packed, per weight whether graph_pack_weights
    needs its bytes)``; None where the runtime has no such call (pack every weight from its bytes)."""
    if not _has("aiogeGraphPackFillWeights"):
        return None
    count = len(values)
    nbytes, nodes, need = ffi.new("size_t *"), ffi.new("int32_t *"), ffi.new("uint8_t[]", max(count, 1))
    vp = ffi.new("void *[]", [NULL if v is None else v for v in values])
    check(lib.aiogeGraphPackFillWeights(g, first, count, vp, need, nbytes, nodes), "aiogeGraphPackFillWeights")
    return int(nbytes[0]), int(nodes[0]), [bool(x) for x in need[0:count]]


def graph_pack_only_weights(g: Handle, first: int, count: int) -> list[bool]:
    """After :func:`graph_pack_weights`: per weight (inputs ``first``.. ``first + count``), whether the
    graph reads it only through packed copies; the graph forgets those (executions pass NULL for
    them).  All False where the runtime has no such call."""
    if not _has("aiogeGraphPackOnlyWeights") or not count:
        return [False] * count
    out = ffi.new("uint8_t[]", count)
    check(lib.aiogeGraphPackOnlyWeights(g, first, count, out, ffi.NULL), "aiogeGraphPackOnlyWeights")
    return [bool(x) for x in out]


def graph_add_node(g: Handle, segment: int, op_type: str, name: str,
                   inputs: tuple[Sequence[Handle], Sequence[int], Sequence[int]],
                   outputs: tuple[Sequence[Handle], Sequence[int], Sequence[int]], attr: Handle) -> None:  # fmt: skip
    """One node: ``(descs, locations, offsets)`` of its inputs and of its outputs (lists or tuples:
    cffi passes each as a temporary C array, no ``ffi.new`` per array)."""
    di, li, ai = inputs
    do, lo, ao = outputs
    rc = lib.aiogeGraphAddNode(g, segment, op_type.encode(), name.encode(), len(di), di, li, ai, len(do), do, lo, ao,
                               attr)  # fmt: skip
    if rc:
        raise error_class(rc)(rc, recent_error(), f"compile node {name!r} ({op_type})")


def graph_add_nodes(g: Handle, segments: Sequence[int], op_types: Sequence[str], names: Sequence[str],
                    counts: tuple[Sequence[int], Sequence[int]], operands: tuple[list[Handle], list[int], list[int]],
                    attrs: Sequence[Handle]) -> None:  # fmt: skip
    """Nodes in order, as :func:`graph_add_node` adds them one by one: node ``i`` has ``counts[0][i]``
    inputs and then ``counts[1][i]`` outputs, whose ``(descs, locations, offsets)`` follow the previous
    node's in ``operands``.  One ``aiogeGraphAddNodes`` call (one ``aiogeGraphAddNode`` per node where
    the runtime has no such call); the error of a node that fails names it."""
    n_in, n_out = counts
    descs, locs, ats = operands
    if not names:
        return
    if not _has("aiogeGraphAddNodes"):
        k = 0
        for i, name in enumerate(names):
            m, e = k + n_in[i], k + n_in[i] + n_out[i]
            graph_add_node(g, segments[i], op_types[i], name, (descs[k:m], locs[k:m], ats[k:m]),
                           (descs[m:e], locs[m:e], ats[m:e]), attrs[i])  # fmt: skip
            k = e
        return
    tb, nb = _nul_separated(op_types), _nul_separated(names)
    added = ffi.new("int32_t *")
    rc = lib.aiogeGraphAddNodes(g, len(names), segments, tb, len(tb), nb, len(nb), n_in, n_out, len(descs), descs,
                                locs, ats, attrs, added)  # fmt: skip
    if rc:
        i = int(added[0])
        what = f"compile node {names[i]!r} ({op_types[i]})" if i < len(names) else "aiogeGraphAddNodes"
        raise error_class(rc)(rc, recent_error(), what)


def _nul_separated(strings: Sequence[str]) -> bytes:
    """``strings`` as one NUL-separated, NUL-terminated C buffer; a NUL inside a string ends it there
    (as the C string of ``aiogeGraphAddNode`` would)."""
    joined = "\0".join(strings)
    if joined.count("\0") != len(strings) - 1:
        joined = "\0".join(t.split("\0", 1)[0] for t in strings)
    return joined.encode() + b"\0"


def graph_add_nodes_by_value(g: Handle, segments: Sequence[int], op_types: Sequence[str], names: Sequence[str],
                             counts: tuple[Sequence[int], Sequence[int]],
                             operands: tuple[list[int], list[int], list[int]],
                             table: tuple[Sequence[int], Sequence[int], Sequence[int], Sequence[int], Sequence[Any]],
                             attrs: Sequence[Handle]) -> None:  # fmt: skip
    """:func:`graph_add_nodes` with the descs given by value: ``operands`` is ``(desc indices, locations,
    offsets)``, and desc ``d`` of ``table = (dtypes, formats, ndims, dims, consts)`` is
    ``create_tensor_desc(dtypes[d], its dims, formats[d])`` -- its dims the next ``ndims[d]`` of ``dims``
    -- with the const value of the C-contiguous array ``consts[d]`` (None: not const).  One
    ``aiogeGraphAddNodesByValue`` call, which makes the descs for the call only; where the runtime has
    no such call, the descs are made here and destroyed once the nodes are added."""
    index, locs, ats = operands
    dts, fmts, nds, dims, consts = table
    if not names:
        return
    if not _has("aiogeGraphAddNodesByValue"):
        if type(segments) is memoryview:  # node_table's arrays: as the lists they stand for
            segments, index, locs, ats, dts, fmts, nds, dims = (
                list(x) for x in (segments, index, locs, ats, dts, fmts, nds, dims))  # fmt: skip
            counts = (list(counts[0]), list(counts[1]))
        made: list[Handle] = []
        try:
            k = 0
            for dt, fmt, nd, c in zip(dts, fmts, nds, consts, strict=True):
                d = create_tensor_desc(dt, dims[k : k + nd], fmt)
                made.append(d)
                k += nd
                if c is not None:
                    set_tensor_const(d, host_ptr(c), c.nbytes)
            graph_add_nodes(g, segments, op_types, names, counts, ([made[i] for i in index], locs, ats), attrs)
        finally:
            for d in made:
                destroy_tensor_desc(d)
        return
    if type(segments) is memoryview:  # node_table's batch: its arrays' bytes as they are, in one C call
        failed = _launch.add_table(int(ffi.cast("uintptr_t", g)), _add_by_value_address(), segments, op_types, names,
                                   *counts, index, locs, ats, dts, fmts, nds, dims, consts, attrs,
                                   _const_address)  # fmt: skip
        rc, i = failed if failed is not None else (0, 0)
    else:
        tb, nb = _nul_separated(op_types), _nul_separated(names)
        ptrs = [NULL if c is None else host_ptr(c) for c in consts]
        added = ffi.new("int32_t *")
        rc = lib.aiogeGraphAddNodesByValue(g, len(names), segments, tb, len(tb), nb, len(nb), counts[0], counts[1],
                                           len(index), index, locs, ats, len(dts), dts, fmts, nds, dims or NULL,
                                           len(dims), ptrs, [0 if c is None else c.nbytes for c in consts], attrs,
                                           added)  # fmt: skip
        i = int(added[0])
    if rc:  # i: the node that failed; -1: a desc or an operand's desc index failed, before any node
        what = (f"compile node {names[i]!r} ({op_types[i]})" if 0 <= i < len(names)
                else "a tensor desc of the graph's nodes" if i < 0 else "aiogeGraphAddNodesByValue")  # fmt: skip
        raise error_class(rc)(rc, recent_error(), what)


_by_value_address: list[int] = []


def _add_by_value_address() -> int:
    """The address of ``aiogeGraphAddNodesByValue`` (``_launch.add_table`` calls it)."""
    if not _by_value_address:
        fn = lib.aiogeGraphAddNodesByValue  # a function pointer in ABI mode, a built-in in API mode
        ptr = fn if isinstance(fn, ffi.CData) else ffi.addressof(lib, "aiogeGraphAddNodesByValue")
        _by_value_address.append(int(ffi.cast("uintptr_t", ptr)))
    return _by_value_address[0]


def _const_address(value: Any) -> int:
    """:func:`host_ptr` of a const value without a buffer-protocol format, as an address."""
    return int(ffi.cast("uintptr_t", host_ptr(value)))


def pointer_list(ptrs: Sequence[Handle]) -> Any:
    """A ``void *[]`` of device pointers (kept alive by the caller)."""
    return ffi.new("void *[]", list(ptrs))


def graph_execute(g: Handle, segment: int, arena: Handle, ins: tuple[int, Any], outs: tuple[int, Any],
                  stream: Handle, times: Any, what: str) -> None:  # fmt: skip
    """Enqueue one segment; ``times`` (a :func:`timestamps` array, or None) also times every node."""
    if times is None:
        rc = lib.aiogeGraphExecuteAsync(g, segment, arena, ins[0], ins[1], outs[0], outs[1], stream)
    else:
        rc = lib.aiogeGraphExecuteTimedAsync(g, segment, arena, ins[0], ins[1], outs[0], outs[1], stream, times,
                                             len(times))  # fmt: skip
    if rc:
        raise error_class(rc)(rc, recent_error(), what)


def offset_pointers(base: Handle, offsets: Sequence[int], tail: Sequence[Handle]) -> Any:
    """A ``void *[]`` of ``base + offset`` for each offset, then the pointers of ``tail``."""
    b = ffi.cast("char *", base)
    return ffi.new("void *[]", [b + at for at in offsets] + list(tail))


def graph_execute_host(g: Handle, segment: int, arena: Handle, ins: tuple[int, Any, Any], outs: tuple[int, Any, Any],
                       stream: Handle, times: Any, what: str) -> None:  # fmt: skip
    """``aiogeGraphExecuteHostAsync``: one task copying host inputs in, running ``segment``, copying outputs out.

    ``ins`` and ``outs`` are ``(count, device pointers, host pointers)``; ``times`` (a
    :func:`timestamps` array, or None) also times every node."""
    t, n = (NULL, 0) if times is None else (times, len(times))
    rc = lib.aiogeGraphExecuteHostAsync(g, segment, arena, *ins, *outs, stream, t, n)
    if rc:
        raise error_class(rc)(rc, recent_error(), what)


#: ``aiogeGraphExecuteHostNow`` (host runtime only, else None): runs a small execution on the
#: calling thread when its stream is idle; the caller checks the rc (hot path: no wrapper call)
graph_execute_host_now_rc: Any = lib.aiogeGraphExecuteHostNow if _has("aiogeGraphExecuteHostNow") else None


#: a pointer to a C-contiguous array's bytes, alive as long as the result (ValueError if the
#: array is not contiguous; BufferError/TypeError for dtypes without a buffer format)
host_buffer = ffi.from_buffer


def int32_out() -> Any:
    """An ``int32_t[1]`` out-parameter."""
    return ffi.new("int32_t[1]")


def timestamps(n: int) -> Any:
    """A ``uint64_t[n]`` for node timings."""
    return ffi.new("uint64_t[]", n)


# ---- host runtime notify hooks ---------------------------------------------------------
def stream_set_notify_fd(stream: Handle, fd: int) -> None:
    check(lib.aiogeHostStreamSetNotifyFd(stream, fd), "aiogeHostStreamSetNotifyFd")


def stream_clear_notify_fd(stream: Handle) -> None:
    lib.aiogeHostStreamSetNotifyFd(stream, -1)


def stream_arm_notify(stream: Handle) -> None:
    lib.aiogeHostStreamArmNotify(stream)


# ---- host runtime: prepared launches, completion by stream sequence numbers ----------------
# (aioge_host.h; absent from a real libascendcl.so: callers check has_entry first)
def launch_prepare(op: bytes, descs_in: Sequence[Handle], descs_out: Sequence[Handle], what: str) -> Handle:
    """``aiogeHostLaunchPrepare``: a prepared launch of ``op`` for these descs; a refusal raises naming ``what``."""
    p = ffi.new("aiogeLaunch **")
    rc = lib.aiogeHostLaunchPrepare(p, op, len(descs_in), ffi.new("aclTensorDesc *[]", list(descs_in)),
                                    len(descs_out), ffi.new("aclTensorDesc *[]", list(descs_out)))  # fmt: skip
    if rc:
        raise_for(rc, what)
    return p[0]


def launch_destroy(launch: Handle) -> None:
    lib.aiogeHostLaunchDestroy(launch)


def pointer_scratch(n: int) -> Any:
    """A reusable ``void *[n]`` (the device pointers of one prepared launch)."""
    return ffi.new("void *[]", n)


#: ``aiogeHostLaunchExecute(launch, ptrs, attr, stream) -> seq | -code``, raw: the launch hot path
launch_execute_rc: Any = getattr(lib, "aiogeHostLaunchExecute", None)
#: ``launch_plain(enq, op_type, inputs, outputs, attrs, name) -> Completion | None``: the prepared
#: launch of ``aioge.op`` in one C call (``_launch.c``) when it needs nothing but the launch, else
#: None, nothing launched; usable once :func:`bind_launch` bound the runtime's types
launch_plain = _launch.launch
#: ``launch_op(op_type, inputs, outputs, attrs, stream) -> [output] | None``: ``aioge.op``'s prepared
#: launch into one given output, unobserved, in one C call (:func:`launch_plain` on the stream's
#: Enqueue); None, nothing launched, for anything else
launch_op = _launch.op
#: ``node_table(ops, nchw_ops, codes, normalize, formats, node_batch, const_batch_bytes)``: a layout's placed ops
#: as the batches :func:`graph_add_nodes_by_value` takes (its arrays as int32/int64 memoryviews), in one C call
node_table = _launch.node_table
#: ``attr_key(attrs, kind_of)``: the cache key of an attr set (``descs._attr_key``), in one C call
attr_key = _launch.attr_key
#: ``note_launch(comp, reads, writes, stream)``: the one definition of a launch's reader and writer notes
note_launch = _launch.note
#: ``submit_seq(lane, keep, what, name, tseq) -> Completion``: ``Lane.submit_seq``'s one definition
submit_seq = _launch.submit_seq
#: ``ring(fd)``: add 1 to an eventfd without releasing the GIL (:class:`aioge.runtime.scheduler` wakes
#: a loop this way from a thread about to block)
ring = _launch.ring


def bind_launch(tensor: type, memory: type, completion: type, poll_every: int, trace: Any, enqueue: type,
                lane: type) -> None:  # fmt: skip
    """Hand ``_launch`` the runtime's Tensor, DeviceMemory, Completion, Enqueue and Lane classes (slot layouts
    checked: a Completion it makes has every slot ``Completion.__init__`` sets), the pending
    length above which a lane polls, the module whose ``hub`` means an observer, and the host
    runtime's ``aiogeHostLaunchExecute`` and ``aiogeHostStreamProgress`` (a launch that has already
    run settles at once)."""
    fn = launch_execute_rc  # a function pointer in ABI mode, a built-in of the compiled module in API mode
    ptr = fn if isinstance(fn, ffi.CData) else ffi.addressof(lib, "aiogeHostLaunchExecute")
    progress = lib.aiogeHostStreamProgress
    pptr = progress if isinstance(progress, ffi.CData) else ffi.addressof(lib, "aiogeHostStreamProgress")
    _launch.init(int(ffi.cast("uintptr_t", ptr)), ffi.CData, raise_for, tensor, memory, completion, poll_every, trace,
                 enqueue, int(ffi.cast("uintptr_t", pptr)), lane)  # fmt: skip


def cdata_address(handle: Handle) -> int:
    """The address ``_launch`` reads from a cffi pointer (tests compare it with ``ffi.cast``)."""
    return _launch.address(handle)


#: ``aiogeHostStreamSubmitted(stream) -> seq``, raw: the number of the stream's latest task
stream_submitted: Any = getattr(lib, "aiogeHostStreamSubmitted", None)
#: ``aiogeHostStreamWaitCompleted(stream, seq, timeout_ms) -> rc``, raw, for the lane thread
stream_wait_completed_rc: Any = getattr(lib, "aiogeHostStreamWaitCompleted", None)


class StreamProgress:
    """``aiogeHostStreamProgress`` of one stream with a reused out-parameter:
    ``progress() -> (tasks completed, failures logged)``."""

    __slots__ = ("_call", "_fails", "_handle")

    def __init__(self, stream: Handle) -> None:
        self._handle = stream
        self._fails = ffi.new("uint64_t[1]")
        self._call = lib.aiogeHostStreamProgress

    def __call__(self) -> tuple[int, int]:
        done = self._call(self._handle, self._fails)
        return done, self._fails[0]


def stream_log_failures(stream: Handle, enable: bool, *, check_rc: bool = True) -> None:
    rc = lib.aiogeHostStreamLogFailures(stream, 1 if enable else 0)
    if check_rc:
        check(rc, "aiogeHostStreamLogFailures")
    elif rc:
        recent_error()


def stream_take_failure(stream: Handle) -> tuple[int, int, str] | None:
    """The oldest failed task the runtime kept: ``(seq, code, message)``, or None."""
    seq, code, msg = ffi.new("uint64_t *"), ffi.new("aclError *"), ffi.new("char[]", 1024)
    if not lib.aiogeHostStreamTakeFailure(stream, seq, code, msg, 1024):
        return None
    return int(seq[0]), int(code[0]), ffi.string(msg).decode("utf-8", "replace")


def stream_arm_notify_at(stream: Handle, seq: int) -> None:
    lib.aiogeHostStreamArmNotifyAt(stream, seq)


def stream_wait_seq(stream: Handle, other: Handle, seq: int) -> None:
    """Make ``stream`` wait (on the device) until task ``seq`` of ``other`` has run."""
    check(lib.aiogeHostStreamWaitSeq(stream, other, seq), "aiogeHostStreamWaitSeq")


class Loc(enum.IntEnum):
    """Where a compiled-graph node's tensor lives (``AIOGE_LOC_*`` of ``aioge_graph.h``)."""

    ARENA = lib.AIOGE_LOC_ARENA
    INPUT = lib.AIOGE_LOC_INPUT
    OUTPUT = lib.AIOGE_LOC_OUTPUT
    CONST = lib.AIOGE_LOC_CONST
    ABSENT = lib.AIOGE_LOC_ABSENT
