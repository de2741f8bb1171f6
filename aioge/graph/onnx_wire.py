"""The weights of a serialized ONNX model, read in place.

Parsing a model with protobuf copies every initializer's bytes into the message, and reading
``TensorProto.raw_data`` copies them again.  :func:`split_weights` walks the protobuf wire
format of the serialized ``ModelProto`` instead and cuts the ``raw_data`` of the main graph's
initializers out: protobuf then parses only the model's structure (kilobytes), and the
importer views each weight in the caller's buffer, at whatever address it lies (no copy; the
readers that need a weight aligned copy it themselves).

Only what the scanner fully understands is cut; anything else (groups, a second ``graph``
field, duplicate or external initializers, a length past the end) makes it return None and
the caller parses the model as it is, where protobuf and the importer report what is wrong.
"""

from __future__ import annotations

__all__ = ("split_weights",)

#: field numbers (onnx.proto): ModelProto.graph, GraphProto.initializer, TensorProto.name,
#: TensorProto.raw_data, TensorProto.data_location
_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_NAME, _TENSOR_RAW, _TENSOR_LOCATION = 7, 5, 8, 9, 14
#: payloads below this stay in the message (cutting them saves nothing)
MIN_CUT_BYTES = 4096
#: models below this are parsed as they are (their copies cost less than the scan)
MIN_SPLIT_MODEL_BYTES = 1 << 20


class _Unhandled(Exception):
    """Something the scanner does not cut: the model is parsed as it is."""


def _varint(buf: memoryview, i: int, end: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        if i >= end or shift > 63:
            raise _Unhandled
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, i
        shift += 7


def _encode_varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _fields(buf: memoryview, start: int, end: int) -> list[tuple[int, int, int, int, int]]:
    """``(field, wire type, field start, value start, value end)`` of each field in ``buf[start:end]``."""
    out = []
    i = start
    while i < end:
        fs = i
        key, i = _varint(buf, i, end)
        field, wt = key >> 3, key & 7
        if wt == 0:
            vs = i
            _, i = _varint(buf, i, end)
        elif wt == 2:
            n, vs = _varint(buf, i, end)
            i = vs + n
        elif wt == 1:
            vs, i = i, i + 8
        elif wt == 5:
            vs, i = i, i + 4
        else:  # groups (3, 4) and invalid wire types
            raise _Unhandled
        if i > end:
            raise _Unhandled
        out.append((field, wt, fs, vs, i))
    return out


def _length_delimited(field: int, payload: bytes | bytearray) -> bytes:
    return _encode_varint(field << 3 | 2) + _encode_varint(len(payload)) + bytes(payload)


def _cut_tensor(buf: memoryview, vs: int, ve: int, names: set[str], cut: dict[str, memoryview]) -> bytes | None:
    """The TensorProto at ``buf[vs:ve]`` without its raw_data (recorded in ``cut``), or None to keep it."""
    fields = _fields(buf, vs, ve)
    name = raw = None
    for f, wt, _, a, b in fields:
        if f == _TENSOR_NAME and wt == 2:
            name = bytes(buf[a:b]).decode("utf-8", "strict")
        elif f == _TENSOR_RAW and wt == 2:
            if raw is not None:
                raise _Unhandled  # two raw_data fields (protobuf keeps the last): not cut
            raw = (a, b)
        elif f == _TENSOR_LOCATION:
            raise _Unhandled  # external (or explicitly placed) data: the importer reads it
    if name is None or name in names:
        raise _Unhandled  # unnamed or duplicate: the importer reports it
    names.add(name)
    if raw is None or raw[1] - raw[0] < MIN_CUT_BYTES:
        return None
    cut[name] = buf[raw[0] : raw[1]]
    out = bytearray()
    for f, _, fs, _, b in fields:
        if f != _TENSOR_RAW:
            out += buf[fs:b]
    return bytes(out)


def split_weights(data: bytes) -> tuple[bytes, dict[str, memoryview]] | None:
    """``data`` (a serialized ModelProto) without the raw_data of its graph's initializers, and
    those payloads by initializer name, as views into ``data``; None when nothing is cut (no
    initializer of :data:`MIN_CUT_BYTES` or more, or a model under :data:`MIN_SPLIT_MODEL_BYTES`)
    or the scanner does not handle the model."""
    if len(data) < MIN_SPLIT_MODEL_BYTES:
        return None
    buf = memoryview(data)
    try:
        top = _fields(buf, 0, len(buf))
        graphs = [x for x in top if x[0] == _MODEL_GRAPH]
        if len(graphs) != 1 or graphs[0][1] != 2:
            return None
        cut: dict[str, memoryview] = {}
        names: set[str] = set()
        graph = bytearray()
        for f, wt, fs, vs, ve in _fields(buf, graphs[0][3], graphs[0][4]):
            t = _cut_tensor(buf, vs, ve, names, cut) if f == _GRAPH_INITIALIZER and wt == 2 else None
            graph += buf[fs:ve] if t is None else _length_delimited(_GRAPH_INITIALIZER, t)
    except (_Unhandled, UnicodeDecodeError):
        return None
    if not cut:
        return None
    out = bytearray()
    for f, _, fs, _, ve in top:
        out += _length_delimited(_MODEL_GRAPH, graph) if f == _MODEL_GRAPH else buf[fs:ve]
    return bytes(out), cut
