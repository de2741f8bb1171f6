"""The Open Inference Protocol (KServe v2) over HTTP, with Triton's binary tensor data extension.

Pure functions between request bodies and numpy arrays; no web framework.

Request body: JSON ``{"id", "parameters", "inputs": [{"name", "shape",
"datatype", "parameters", "data"}], "outputs": [{"name", "parameters"}]}``,
``data`` row-major, nested or flat.  With the binary extension the body
is the JSON header (its length in the ``Inference-Header-Content-Length``
HTTP header) followed by the raw bytes of every input whose parameters
give a ``binary_data_size``, in input order.  An output is returned
binary when its request asks ``"binary_data": true`` or the request's
parameters ``"binary_data_output": true``; the response then carries the
same header.  The request parameter ``timeout`` (microseconds, as in
Triton) sets the request's deadline.

Everything a client sends is checked before anything is allocated: a
declared shape is compared with the model's (and the batch limit) before
its size is used, binary sizes are checked against the declared shape and
the bytes present, JSON data is converted with exact element counts.
Every failure is an :class:`InvalidInputError` with a message for the client.

JSON goes through ``orjson`` when it is installed (the ``serve`` extra has
it: parsing and writing 1024 floats is 10-20x faster than the standard
library's), else through :mod:`json`.  Non-finite floats are ``NaN``,
``Infinity`` and ``-Infinity``, read and written as Triton does (and Python's
:mod:`json`, which tritonclient's JSON mode uses); JSON booleans are refused
for numeric datatypes.
"""

from __future__ import annotations

import array
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes
from .errors import InvalidInputError
from .runner import TensorInfo

orjson: Any
try:
    import orjson
except ImportError:  # pragma: no cover - the serve extra installs it
    orjson = None

__all__ = (
    "DATATYPES",
    "InferRequest",
    "datatype_of",
    "decode_request",
    "encode_response",
    "model_metadata",
    "HEADER_LENGTH",
)

#: the HTTP header that gives the JSON part's length of a binary-extension body
HEADER_LENGTH = "inference-header-content-length"

#: v2 datatype name -> numpy dtype (BYTES, variable-length strings, is not served)
DATATYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BF16": dtypes.bfloat16,
}
_NAMES: dict[np.dtype[Any], str] = {v: k for k, v in DATATYPES.items()}
# what a JSON array may decode to for each kind of datatype (numpy's inferred kind)
_JSON_KINDS = {"b": "b", "u": "iu", "i": "iu", "f": "iuf", "V": "iuf"}  # bfloat16's kind is 'V'
_KIND_NAMES = {"b": "booleans", "i": "integers", "u": "integers", "f": "non-integer numbers", "U": "strings",
               "O": "nulls, objects or numbers too large"}  # fmt: skip


def datatype_of(dt: Any) -> str:
    """The v2 datatype name of a numpy dtype (ValueError for one the protocol lacks)."""
    if isinstance(dt, np.dtype):  # the served specs' own: no normalisation needed
        name = _NAMES.get(dt)
        if name is not None:
            return name
    d = dtypes.normalize(dt)
    try:
        return _NAMES[d]
    except KeyError:
        raise ValueError(f"dtype {d} has no Open Inference Protocol datatype") from None


@dataclass(slots=True)
class InferRequest:
    """A decoded request: the input arrays and what to answer."""

    inputs: dict[str, np.ndarray]
    rows: int
    id: str | None = None
    #: requested outputs in order, name -> binary; None: every output
    outputs: dict[str, bool] | None = None
    binary_output: bool = False
    #: seconds, from the request's ``timeout`` parameter (microseconds)
    timeout: float | None = None
    parameters: dict[str, Any] = field(default_factory=dict)


def model_metadata(name: str, inputs: Mapping[str, TensorInfo], outputs: Mapping[str, TensorInfo],
                   *, platform: str = "aioge", versions: tuple[str, ...] = ("1",)) -> dict[str, Any]:  # fmt: skip
    """``GET /v2/models/{name}``: inputs and outputs with datatype and shape (-1: the batch dimension)."""

    def tensor(t: TensorInfo) -> dict[str, Any]:
        return {"name": t.name, "datatype": datatype_of(t.dtype), "shape": list(t.shape)}

    return {"name": name, "versions": list(versions), "platform": platform,
            "inputs": [tensor(t) for t in inputs.values()],
            "outputs": [tensor(t) for t in outputs.values()]}  # fmt: skip


def _bad(msg: str) -> InvalidInputError:
    return InvalidInputError(msg)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


_NONE: dict[str, Any] = {}


def _params(obj: Mapping[str, Any], where: str | None = None, name: str = "") -> dict[str, Any]:
    """``obj``'s parameters (``where``: what to call it in an error; default ``input {name!r}``)."""
    p = obj.get("parameters")
    if p is None:
        return _NONE
    if not isinstance(p, dict):
        raise _bad(f"{where or f'input {name!r}'}: 'parameters' must be an object")
    return p


def dumps(obj: Any) -> bytes:
    """Compact JSON; numpy arrays in ``obj`` are written as (nested) lists.

    NaN and infinities are written ``NaN``, ``Infinity``, ``-Infinity`` as Triton writes them:
    orjson writes them ``null``, so an orjson answer holding ``null`` is written again by the
    standard library (the bodies the server writes have no null of their own; a string holding
    the word only takes that slower path).  No scan of the arrays for non-finite values first:
    that took a third of encoding a small response.
    """
    if orjson is not None:
        out: bytes = orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)
        if b"null" not in out:
            return out
    return json.dumps(obj, separators=(",", ":"), default=_tolist).encode()


def _tolist(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


#: the non-finite numbers of Triton's JSON (and Python's): NaN, Infinity, -Infinity
_NONFINITE = (b"NaN", b"Infinity")


def _load_json(raw: bytes | memoryview) -> Any:
    try:
        if orjson is not None:
            try:
                return orjson.loads(raw)  # nesting past 1024 levels, invalid UTF-8: JSONDecodeError (a ValueError)
            except ValueError:
                b = bytes(raw)
                if not any(w in b for w in _NONFINITE):
                    raise
                # orjson refuses NaN/Infinity/-Infinity, which Triton's parser (and tritonclient's JSON
                # mode, through Python's json) accept: the standard library's parser reads them
                return json.loads(b)
        return json.loads(bytes(raw))
    except RecursionError:
        raise _bad("the request's JSON is nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as e:  # JSONDecodeError is a ValueError; so is a 4301-digit int
        raise _bad(f"the request is not valid JSON: {e}") from None


def decode_request(
    body: bytes,
    header_length: str | int | None,
    inputs: Mapping[str, TensorInfo],
    outputs: Mapping[str, TensorInfo],
    max_batch_size: int,
) -> InferRequest:
    """Parse and check an infer request body against a model's inputs.

    ``max_batch_size`` 0 means the model has no batch dimension (shapes are
    compared whole).  Raises :class:`InvalidInputError` for anything that
    does not fit; nothing is allocated before the declared sizes have been
    checked against the model.
    """
    head: bytes | memoryview = body
    binary = memoryview(b"")
    if header_length is not None:
        try:
            hl = int(header_length)
        except (TypeError, ValueError):
            raise _bad(f"Inference-Header-Content-Length {header_length!r} is not an integer") from None
        if not 0 <= hl <= len(body):
            raise _bad(f"Inference-Header-Content-Length {hl} is outside the body's {len(body)} bytes")
        view = memoryview(body)
        head, binary = view[:hl], view[hl:]
    req = _load_json(head)
    raw = head if isinstance(head, bytes) else bytes(head)
    maybe_bools = b"true" in raw or b"false" in raw  # else no JSON boolean can hide among numbers
    if not isinstance(req, dict):
        raise _bad("the request must be a JSON object")
    rid = req.get("id")
    if rid is not None and not isinstance(rid, str):
        raise _bad("'id' must be a string")
    params = _params(req, "request") or {}  # its own: the request keeps it
    timeout = params.get("timeout")
    seconds: float | None = None
    if timeout is not None:
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not math.isfinite(timeout) \
                or timeout < 0:  # fmt: skip
            raise _bad("parameter 'timeout' must be a number of microseconds >= 0")
        seconds = float(timeout) / 1e6 if timeout > 0 else None  # Triton: 0 means no timeout
    binary_output = params.get("binary_data_output", False)
    if not isinstance(binary_output, bool):
        raise _bad("parameter 'binary_data_output' must be a boolean")

    items = req.get("inputs")
    if not isinstance(items, list) or not items:
        raise _bad("'inputs' must be a non-empty list")
    arrays: dict[str, np.ndarray] = {}
    rows: int | None = None
    offset = 0
    batching = max_batch_size > 0
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _bad(f"inputs[{i}] must be an object")
        name = item.get("name")
        if not isinstance(name, str):
            raise _bad(f"inputs[{i}]: 'name' must be a string")
        spec = inputs.get(name)
        if spec is None:
            raise _bad(f"unknown input {name!r} (the model takes {list(inputs)})")
        if name in arrays:
            raise _bad(f"input {name!r} is given twice")
        shape = _check_shape(item.get("shape"), spec, max_batch_size)
        if batching:
            if rows is not None and shape[0] != rows:
                raise _bad(f"input {name!r} has {shape[0]} rows, another input {rows}")
            rows = shape[0]
        dt_name = item.get("datatype")
        want = datatype_of(spec.dtype)
        if dt_name != want:
            raise _bad(f"input {name!r} has datatype {dt_name!r}, the model takes {want}")
        count = math.prod(shape)  # bounded: each dim matched the model's or the batch limit
        p = _params(item, name=name)
        size = p.get("binary_data_size")
        if size is not None:
            nbytes = count * spec.dtype.itemsize
            if not _is_int(size) or size != nbytes:
                raise _bad(f"input {name!r}: binary_data_size {size!r} does not match shape {shape} of "
                           f"{want} ({nbytes} bytes)")  # fmt: skip
            if "data" in item:
                raise _bad(f"input {name!r} has both binary data and 'data'")
            if offset + nbytes > len(binary):
                raise _bad(f"input {name!r}: the body holds {len(binary) - offset} bytes of binary data, "
                           f"{nbytes} are declared")  # fmt: skip
            a = np.frombuffer(binary, dtype=spec.dtype, count=count, offset=offset).reshape(shape)
            offset += nbytes
        else:
            a = _from_json(item.get("data"), spec.dtype, shape, name, maybe_bools)
        arrays[name] = a
    if offset != len(binary):
        raise _bad(f"the body has {len(binary) - offset} bytes of binary data that no input declares")
    missing = [n for n in inputs if n not in arrays]
    if missing:
        raise _bad(f"missing inputs {missing}")

    wanted: dict[str, bool] | None = None
    outs = req.get("outputs")
    if outs is not None:
        if not isinstance(outs, list):
            raise _bad("'outputs' must be a list")
        wanted = {}
        for i, o in enumerate(outs):
            if not isinstance(o, dict) or not isinstance(o.get("name"), str):
                raise _bad(f"outputs[{i}] must be an object with a string 'name'")
            if o["name"] not in outputs:
                raise _bad(f"unknown output {o['name']!r} (the model has {list(outputs)})")
            op = _params(o, f"output {o['name']!r}")
            if op.get("classification"):
                raise _bad("the classification extension is not supported")
            b = op.get("binary_data", binary_output)
            if not isinstance(b, bool):
                raise _bad(f"output {o['name']!r}: 'binary_data' must be a boolean")
            wanted[o["name"]] = b
    return InferRequest(arrays, rows if rows is not None else 1, rid, wanted, binary_output, seconds, params)


def _check_shape(shape: Any, spec: TensorInfo, max_batch_size: int) -> list[int]:
    if type(shape) is not list:
        raise _bad(f"input {spec.name!r}: 'shape' must be a list of non-negative integers")
    for d in shape:
        if type(d) is not int or d < 0:  # JSON integers (a bool is not one)
            raise _bad(f"input {spec.name!r}: 'shape' must be a list of non-negative integers")
    want = spec.shape
    if len(shape) != len(want):
        raise _bad(f"input {spec.name!r} has shape {shape}, the model takes {list(want)}")
    if max_batch_size > 0:
        if not _fits(shape[1:], want[1:]):
            raise _bad(f"input {spec.name!r} has shape {shape}, the model takes {list(want)}")
        if not 1 <= shape[0] <= max_batch_size:
            raise _bad(f"input {spec.name!r} has {shape[0]} rows; the model takes 1 to {max_batch_size} "
                       "per request")  # fmt: skip
    elif not _fits(shape, want):
        raise _bad(f"input {spec.name!r} has shape {shape}, the model takes {list(want)}")
    return shape


def _fits(shape: list[int], want: tuple[int, ...]) -> bool:
    """Whether a shape fits the model's dims: fixed ones equal, a symbolic one (-1) any positive size."""
    if tuple(shape) == want:
        return True
    return len(shape) == len(want) and all(s == w if w != -1 else s >= 1 for s, w in zip(shape, want, strict=True))


def _has_bool(data: list[Any]) -> bool:
    for v in data:
        if type(v) is bool or (type(v) is list and _has_bool(v)):
            return True
    return False


def _from_json(data: Any, dt: np.dtype[Any], shape: list[int], name: str, maybe_bools: bool = True) -> np.ndarray:
    if not isinstance(data, list):
        raise _bad(f"input {name!r} has neither 'data' (a list) nor binary_data_size")
    if maybe_bools and dt.kind != "b":
        try:
            found = _has_bool(data)
        except RecursionError:
            raise _bad(f"input {name!r}: 'data' is nested too deeply") from None
        if found:  # numpy would read true as 1: Triton refuses booleans for numeric datatypes
            raise _bad(f"input {name!r}: 'data' holds booleans, not {datatype_of(dt)} values")
    count = math.prod(shape)
    if dt.kind == "f" and count and len(data) == count and type(data[0]) is float:
        # flat JSON numbers for a float input (what clients send): C doubles straight from the
        # list, about twice numpy's inference; anything else (nesting, strings, nulls, huge
        # integers) fails here and the general path below says what is wrong
        # float32 straight into C floats (rounded as a cast of the double is, beyond the range inf:
        # what astype does, without its errstate and copy)
        code = "f" if dt == np.float32 else "d"
        try:
            flat = np.frombuffer(array.array(code, data), np.float32 if code == "f" else np.float64)
        except (TypeError, OverflowError):
            pass
        else:
            if code == "f" or dt.itemsize >= 8:
                return flat.reshape(shape)
            with np.errstate(over="ignore"):
                return flat.astype(dt).reshape(shape)
    try:
        a = np.asarray(data)  # inferred first: strings, nulls and objects are refused, not coerced
    except (ValueError, TypeError, OverflowError, RecursionError):
        raise _bad(f"input {name!r}: 'data' is not a regular array of numbers") from None
    if a.dtype.kind == "f" and dt.kind == "f" and a.size == count:  # the usual case: JSON numbers to floats
        if dt.itemsize >= a.dtype.itemsize:
            return a.reshape(shape)
        with np.errstate(over="ignore"):  # finite float64 beyond the type's range becomes inf, as a cast does
            return a.astype(dt).reshape(shape)
    big_ints = False
    if dt.kind in "iu" and a.dtype.kind == "f":  # numpy reads [0, 2**63] as float64: are they all integers?
        exact = np.array(data, dtype=object)
        if exact.shape == a.shape and all(type(v) is int for v in exact.flat):
            a, big_ints = exact, True
    if a.dtype.kind not in _JSON_KINDS.get(dt.kind, "") and not big_ints:
        what = _KIND_NAMES.get(a.dtype.kind, "values of another kind")
        raise _bad(f"input {name!r}: 'data' holds {what}, not {datatype_of(dt)} values")
    if a.size != count:
        raise _bad(f"input {name!r}: 'data' has {a.size} elements, shape {shape} needs {count}")
    if dt.kind in "iu" and (a.dtype.kind in "iu" or big_ints) and a.size:
        info = np.iinfo(dt)
        lo, hi = int(a.min()), int(a.max())
        if lo < info.min or hi > info.max:
            raise _bad(f"input {name!r}: values out of range for {datatype_of(dt)}")
    with np.errstate(over="ignore"):  # finite float64 beyond fp16's range becomes inf, as a cast does
        return a.astype(dt, copy=False).reshape(shape)


def encode_response(
    model_name: str,
    request: InferRequest,
    results: Mapping[str, np.ndarray],
    outputs: Mapping[str, TensorInfo],
    *,
    version: str = "1",
) -> tuple[bytes, int | None]:
    """The response body, and the JSON header's length when any output is binary (else ``None``)."""
    names = list(request.outputs) if request.outputs is not None else list(outputs)
    out_json: list[dict[str, Any]] = []
    blobs: list[bytes] = []
    for n in names:
        a = np.asarray(results[n])
        binary = request.outputs[n] if request.outputs is not None else request.binary_output
        entry: dict[str, Any] = {"name": n, "datatype": datatype_of(outputs[n].dtype), "shape": list(a.shape)}
        if binary:
            raw = np.ascontiguousarray(a).tobytes()
            entry["parameters"] = {"binary_data_size": len(raw)}
            blobs.append(raw)
        else:
            flat = np.ascontiguousarray(a.reshape(-1))
            if flat.dtype.kind == "V" or flat.dtype == np.float16:  # bfloat16/fp16 are written as float32 values
                flat = flat.astype(np.float32)
            entry["data"] = flat
        out_json.append(entry)
    resp: dict[str, Any] = {"model_name": model_name, "model_version": version, "outputs": out_json}
    if request.id is not None:
        resp["id"] = request.id
    head = dumps(resp)
    if not blobs:
        return head, None
    return b"".join([head, *blobs]), len(head)
