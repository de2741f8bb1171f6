"""The v2 codec on its own: every datatype through JSON and binary, both ways (hypothesis)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from aioge.serve import InvalidInputError, TensorInfo, protocol
from aioge.serve.protocol import DATATYPES, decode_request, encode_response, model_metadata

NAMES = sorted(DATATYPES)


def _values(dt: np.dtype):
    if dt.kind == "V":  # bfloat16: values exactly representable in it
        return hnp.arrays(np.float32, 1, elements=st.integers(-256, 256).map(float)).map(lambda a: a[0])
    return hnp.from_dtype(dt, allow_nan=False, allow_infinity=False)


@st.composite
def cases(draw):
    name = draw(st.sampled_from(NAMES))
    dt = DATATYPES[name]
    row = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    n = draw(st.integers(1, 4))
    base = np.dtype(np.float32) if dt.kind == "V" else dt
    a = draw(hnp.arrays(base, (n, *row), elements=_values(dt))).astype(dt)
    return name, a, draw(st.booleans()), draw(st.booleans()), draw(st.booleans())


@pytest.fixture(params=["orjson", "json"])
def codec(request, monkeypatch):
    """Both JSON paths: orjson (the serve extra) and the standard library's (without it)."""
    if request.param == "json":
        monkeypatch.setattr(protocol, "orjson", None)
    elif protocol.orjson is None:
        pytest.skip("orjson is not installed")
    return request.param


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_every_datatype_round_trips_through_json_and_binary(codec, case):
    name, a, binary_in, binary_out, nested = case
    dt = DATATYPES[name]
    spec = {"t": TensorInfo("t", dt, (-1, *a.shape[1:]))}
    item = {"name": "t", "shape": list(a.shape), "datatype": name}
    tail = b""
    if binary_in:
        tail = np.ascontiguousarray(a).tobytes()
        item["parameters"] = {"binary_data_size": len(tail)}
    else:
        vals = a.astype(np.float32) if dt.kind == "V" or dt == np.float16 else a
        item["data"] = vals.tolist() if nested else vals.reshape(-1).tolist()
    outputs = [{"name": "t", "parameters": {"binary_data": binary_out}}]
    head = json.dumps({"id": "7", "inputs": [item], "outputs": outputs})
    body = head.encode() + tail
    req = decode_request(body, len(head) if binary_in else None, spec, spec, max_batch_size=4)
    got = req.inputs["t"]
    assert got.dtype == dt and got.shape == a.shape and req.rows == a.shape[0] and req.id == "7"
    np.testing.assert_array_equal(got.astype(np.float64), a.astype(np.float64))
    out, hl = encode_response("m", req, {"t": got}, spec)
    assert (hl is not None) == binary_out
    meta = json.loads(out[:hl] if hl is not None else out)
    (o,) = meta["outputs"]
    assert o["datatype"] == name and o["shape"] == list(a.shape) and meta["id"] == "7"
    if binary_out:
        back = np.frombuffer(out[hl:], dt).reshape(o["shape"])
    else:
        exact = object if dt.kind in "iu" else None  # numpy would read [0, 2**63] as float64
        back = np.array(o["data"], dtype=exact).astype(dt).reshape(o["shape"])  # as a client reads it, by datatype
    np.testing.assert_array_equal(back.astype(np.float64), a.astype(np.float64))


@pytest.mark.parametrize("body, message", [
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply|not valid JSON"),
    (b'{"inputs": "\xff\xfe"}', "not valid JSON"),
    (b'{"inputs": [1' + b"0" * 5000 + b"]}", "not valid JSON|must be an object"),
    (b'{"inputs": [', "not valid JSON"),
    (b"NaN", "not valid JSON|must be a JSON object"),
])  # fmt: skip
def test_hostile_json_is_refused_by_both_codecs(codec, body, message):
    spec = {"x": TensorInfo("x", np.dtype(np.float32), (-1, 2))}
    with pytest.raises(InvalidInputError, match=message):
        decode_request(body, None, spec, spec, max_batch_size=4)


def test_metadata_and_unbatched_models(codec):
    spec = {"x": TensorInfo("x", np.dtype(np.float16), (2, 3))}
    assert model_metadata("m", spec, spec)["inputs"] == [{"name": "x", "datatype": "FP16", "shape": [2, 3]}]
    body = json.dumps({"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP16", "data": [1, 2, 3, 4, 5, 6]}]})
    req = decode_request(body.encode(), None, spec, spec, max_batch_size=0)
    assert req.inputs["x"].dtype == np.float16 and req.inputs["x"].shape == (2, 3) and req.rows == 1
    with pytest.raises(InvalidInputError, match="takes \\[2, 3\\]"):
        decode_request(body.replace("[2, 3]", "[3, 2]").encode(), None, spec, spec, max_batch_size=0)
    with pytest.raises(InvalidInputError, match="microseconds"):
        decode_request(json.dumps({"inputs": [], "parameters": {"timeout": -1}}).encode(), None, spec, spec, 0)
    req = decode_request(json.dumps({"inputs": json.loads(body)["inputs"], "parameters": {"timeout": 2500}}).encode(),
                         None, spec, spec, 0)  # fmt: skip
    assert req.timeout == pytest.approx(0.0025)


@pytest.mark.parametrize("dt", ["FP32", "FP64", "FP16"])
def test_flat_json_floats_read_as_numpy_casts_them(codec, dt):
    """The flat-float fast path rounds as numpy's cast of the float64 does: past the type's range inf,
    below its smallest subnormal 0 (with their signs)."""
    values = [1e300, -1e300, 3.4028235e38, 3.4028236e38, 65504.0, 65520.0, 1e-46, -7e-46, 0.1, -2.5, 1e-8]
    spec = {"x": TensorInfo("x", DATATYPES[dt], (-1, len(values)))}
    body = json.dumps({"inputs": [{"name": "x", "shape": [1, len(values)], "datatype": dt, "data": values}]})
    got = decode_request(body.encode(), None, spec, spec, max_batch_size=1).inputs["x"]
    with np.errstate(over="ignore"):
        want = np.array([values], np.float64).astype(DATATYPES[dt])
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got).tolist() == np.signbit(want).tolist()


@pytest.mark.parametrize("rid", [None, "null", "7"])
def test_non_finite_outputs_are_written_as_triton_writes_them(codec, rid):
    """NaN, Infinity, -Infinity (never null) whatever the request id holds; finite values exactly."""
    spec = {"y": TensorInfo("y", np.dtype(np.float32), (-1, 4))}
    head = {"inputs": [{"name": "y", "shape": [1, 4], "datatype": "FP32", "data": [1.5, 2.0, 3.0, 4.0]}]}
    if rid is not None:
        head["id"] = rid
    req = decode_request(json.dumps(head).encode(), None, spec, spec, max_batch_size=1)
    for values in ([np.nan, np.inf, -np.inf, 0.1], [0.1, 2.0, -3.5, 1e-30]):
        y = np.array([values], np.float32)
        out, hl = encode_response("m", req, {"y": y}, spec)
        assert hl is None and b"null" not in out.replace(b'"null"', b"")
        (o,) = json.loads(out)["outputs"]
        np.testing.assert_array_equal(np.array(o["data"], np.float32), y.ravel())
        assert (b"NaN" in out) == bool(np.isnan(y).any()) and (b"-Infinity" in out) == bool(np.isneginf(y).any())
        assert json.loads(out).get("id") == rid
