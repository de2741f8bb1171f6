"""Hostile gRPC messages against the server's ``GRPCInferenceService`` in process (a real ``grpc.aio``
server on 127.0.0.1 and a real channel, on one event loop).

A second run targets a sequence model (a symbolic length besides the batch): declared lengths of 0,
negative, 2**31 and 2**62, wrong fixed dims and raw sizes; refused requests compile no plan and the plan
cache never exceeds its bound.

Generated with a fixed seed: near-valid ``ModelInferRequest`` messages whose fields (model name and
version, input names, datatypes, shapes with edge values, typed contents, raw sizes, requested outputs,
parameters) are wrong in one or more ways, arbitrary bytes as a message, and hostile names for the
metadata, configuration, statistics and repository calls.  Invariant: OK with outputs equal to
onnxruntime's, or INVALID_ARGUMENT / NOT_FOUND with a message; never another code; the server stays
healthy and still answers correctly.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.fuzzutil import fuzz
from tests.serve import serve_models as M
from tests.support.edges import INT_EDGES

grpc = pytest.importorskip("grpc")
pytest.importorskip("tritonclient.grpc")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("prometheus_client")
from tritonclient.grpc import service_pb2 as pb  # noqa: E402
from tritonclient.grpc import service_pb2_grpc  # noqa: E402

from aioge.serve import ModelSpec  # noqa: E402
from aioge.serve.grpc_service import GrpcService  # noqa: E402
from aioge.serve.server import InferenceServer  # noqa: E402

PROTO = M.mlp()
SESSION = ort.InferenceSession(PROTO.SerializeToString(), providers=["CPUExecutionProvider"])
I64 = [d for d in INT_EDGES if -(2**63) <= d < 2**63]
dims = st.sampled_from([*I64, 16, 4])
CONTENTS = ["fp32_contents", "fp64_contents", "int_contents", "int64_contents", "uint_contents", "uint64_contents",
            "bool_contents", "bytes_contents"]  # fmt: skip
OK_CODES = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND}


def _fill(field: Any, name: str, n: int) -> None:
    if name in ("fp32_contents", "fp64_contents"):
        field.extend([0.5] * n)
    elif name == "bool_contents":
        field.extend([True] * n)
    elif name == "bytes_contents":
        field.extend([b"x"] * n)
    else:
        field.extend([1] * n)


@st.composite
def near_valid(draw: Any) -> bytes:
    req = pb.ModelInferRequest(model_name=draw(st.sampled_from(["mlp", "mlp", "mlp", "nope", "", "x" * 3000])),
                               model_version=draw(st.sampled_from(["", "", "1", "2", "-1"])),
                               id=draw(st.sampled_from(["", "a", "\u00e9" * 50])))  # fmt: skip
    n = draw(st.integers(0, 5))
    count_inputs = draw(st.sampled_from([1, 1, 1, 0, 2]))
    raw = draw(st.booleans())
    for _ in range(count_inputs):
        shape = (draw(st.sampled_from([[n, 16], [n], [], [n, 16, 1]])) if draw(st.booleans())
                 else draw(st.lists(dims, max_size=4)))  # fmt: skip
        size = int(np.prod([max(d, 0) for d in shape])) if shape and all(0 <= d < 1000 for d in shape) else 3
        t = req.inputs.add(name=draw(st.sampled_from(["x", "x", "y", "", "x" * 1000])),
                           datatype=draw(st.sampled_from(["FP32", "FP32", "FP16", "INT32", "BOOL", "BYTES", "FP64",
                                                          "fp32", ""])),
                           shape=shape)  # fmt: skip
        elems = size + draw(st.sampled_from([0, 0, 0, 1, -1]))
        if raw:
            width = draw(st.sampled_from([4, 4, 4, 2, 8, 1]))
            req.raw_input_contents.append(np.full(max(elems, 0), 0.25, np.float32).tobytes()[: max(elems, 0) * width])
        else:
            for f in draw(st.lists(st.sampled_from(["fp32_contents", "fp32_contents", *CONTENTS]), max_size=2)):
                _fill(getattr(t.contents, f), f, max(elems, 0))
    if raw and draw(st.integers(0, 4)) == 0:
        req.raw_input_contents.append(b"\0" * draw(st.sampled_from([0, 4, 64])))
    if draw(st.booleans()):
        for name in draw(st.lists(st.sampled_from(["y", "y", "z", ""]), max_size=2)):
            o = req.outputs.add(name=name)
            if draw(st.integers(0, 3)) == 0:
                o.parameters["classification"].int64_param = 3
    if draw(st.booleans()):
        p = req.parameters["timeout"]
        which = draw(st.sampled_from(["int64_param", "string_param", "double_param", "bool_param"]))
        values = {"int64_param": draw(st.sampled_from([0, 1, -5, 60_000_000, 2**62])), "string_param": "soon",
                  "double_param": float("nan"), "bool_param": True}  # fmt: skip
        setattr(p, which, values[which])
    return req.SerializeToString()


messages = st.one_of(st.binary(max_size=256), near_valid(), near_valid(), near_valid())
names = st.one_of(st.sampled_from(["", "..", "mlp\x00", "MLP", "x" * 5000, "stats", "mlp/../mlp"]),
                  st.text(max_size=12))  # fmt: skip


def _check(raw: bytes, resp: Any) -> None:
    req = pb.ModelInferRequest.FromString(raw)
    (t,) = req.inputs
    if req.raw_input_contents:
        x = np.frombuffer(req.raw_input_contents[0], np.float32).reshape(list(t.shape))
    else:
        x = np.asarray(t.contents.fp32_contents, np.float32).reshape(list(t.shape))
    (want,) = SESSION.run(None, {"x": x})
    assert [o.name for o in resp.outputs] == ["y"], resp
    got = np.frombuffer(resp.raw_output_contents[0], np.float32).reshape(list(resp.outputs[0].shape))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_hostile_grpc_messages(tmp_path):
    cases: list[bytes] = []
    name_cases: list[tuple[str, str]] = []

    @fuzz(40)
    @given(msg=messages)
    def draw(msg: bytes) -> None:
        cases.append(msg)

    @fuzz(20)
    @given(name=names, call=st.sampled_from(["ModelMetadata", "ModelConfig", "ModelStatistics", "ModelReady",
                                             "RepositoryModelLoad", "RepositoryModelUnload"]))  # fmt: skip
    def draw_names(name: str, call: str) -> None:
        if name != "mlp":
            name_cases.append((name, call))

    draw()
    draw_names()
    M.save(PROTO, tmp_path / "mlp.onnx")
    codes: dict[str, int] = {}

    async def main() -> None:
        server = InferenceServer({"mlp": ModelSpec(str(tmp_path / "mlp.onnx"), max_batch_size=4)})
        server.repositories = [tmp_path]
        async with server:
            svc = GrpcService(server)
            port = svc.bind("127.0.0.1", 0)
            await svc.start()
            try:
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
                    stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
                    infer = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                           response_deserializer=pb.ModelInferResponse.FromString)  # fmt: skip
                    for raw in cases:
                        try:
                            resp = await infer(raw, timeout=60)
                        except grpc.aio.AioRpcError as e:
                            code = e.code()
                            codes[code.name] = codes.get(code.name, 0) + 1
                            try:
                                pb.ModelInferRequest.FromString(raw)
                            except Exception:  # no message at all: grpcio's own answer
                                assert code == grpc.StatusCode.UNKNOWN, (raw[:100], e)
                                continue
                            assert code in OK_CODES, (raw[:300], code, e.details())
                            assert e.details(), raw[:300]
                        else:
                            codes["OK"] = codes.get("OK", 0) + 1
                            _check(raw, resp)
                    for name, call in name_cases:
                        fn = getattr(stub, call)
                        if call.startswith("Repository"):
                            req = getattr(pb, call + "Request")(model_name=name)
                        else:
                            req = getattr(pb, call + "Request")(name=name)
                        try:
                            await fn(req, timeout=60)
                        except grpc.aio.AioRpcError as e:
                            assert e.code() in OK_CODES, (name, call, e.code(), e.details())
                    # still healthy, and right
                    assert (await stub.ServerReady(pb.ServerReadyRequest(), timeout=60)).ready
                    assert (await stub.ModelReady(pb.ModelReadyRequest(name="mlp"), timeout=60)).ready
                    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
                    good = pb.ModelInferRequest(model_name="mlp")
                    good.inputs.add(name="x", datatype="FP32", shape=[3, 16])
                    good.raw_input_contents.append(x.tobytes())
                    _check(good.SerializeToString(), await stub.ModelInfer(good, timeout=60))
            finally:
                await svc.stop(5)

    asyncio.run(main())
    assert sum(codes.values()) == len(cases)
    assert codes.get("INVALID_ARGUMENT", 0) > 0, codes


SEQ = M.sequence()
SEQ_SESSION = ort.InferenceSession(SEQ.SerializeToString(), providers=["CPUExecutionProvider"])
LENGTHS = [1, 2, 7, 7, 0, -1, 2**31, 2**62, -(2**63)]


@st.composite
def near_valid_seq(draw: Any) -> bytes:
    """A ``ModelInferRequest`` for ``seq`` (x[N, S, 8]) whose rows, length, width, rank, datatype or raw size
    may be wrong."""
    req = pb.ModelInferRequest(model_name=draw(st.sampled_from(["seq", "seq", "seq", "nope"])))
    shape = [draw(st.sampled_from([1, 2, 3, 5, 0, 2**40])), draw(st.sampled_from(LENGTHS)),
             draw(st.sampled_from([8, 8, 8, 7, 0]))]  # fmt: skip
    shape = draw(st.sampled_from([shape, shape, shape, shape[:2], [*shape, 1]]))
    size = int(np.prod(shape)) if all(0 <= d < 1000 for d in shape) else 3
    elems = max(size + draw(st.sampled_from([0, 0, 0, 1, -1])), 0)
    req.inputs.add(name="x", datatype=draw(st.sampled_from(["FP32", "FP32", "FP32", "FP16", "INT64"])), shape=shape)
    req.raw_input_contents.append(np.full(elems, 0.5, np.float32).tobytes()[: elems * draw(st.sampled_from([4, 4, 2]))])
    return req.SerializeToString()


def test_hostile_grpc_messages_for_a_sequence_model(tmp_path):
    cases: list[bytes] = []

    @fuzz(40)
    @given(msg=near_valid_seq())
    def draw(msg: bytes) -> None:
        cases.append(msg)

    draw()
    M.save(SEQ, tmp_path / "seq.onnx")
    codes: dict[str, int] = {}
    plans: list[dict[str, int]] = []

    async def main() -> None:
        spec = ModelSpec(str(tmp_path / "seq.onnx"), batch_sizes=(1, 2, 4), max_plans=3)
        async with InferenceServer({"seq": spec}) as server:
            runner = server.models["seq"].runner
            svc = GrpcService(server)
            port = svc.bind("127.0.0.1", 0)
            await svc.start()
            try:
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
                    stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
                    for raw in cases:
                        req = pb.ModelInferRequest.FromString(raw)
                        try:
                            resp = await stub.ModelInfer(req, timeout=60)
                        except grpc.aio.AioRpcError as e:
                            codes[e.code().name] = codes.get(e.code().name, 0) + 1
                            assert e.code() in OK_CODES and e.details(), (req, e.code(), e.details())
                        else:
                            codes["OK"] = codes.get("OK", 0) + 1
                            (t,) = req.inputs
                            x = np.frombuffer(req.raw_input_contents[0], np.float32).reshape(list(t.shape))
                            got = np.frombuffer(resp.raw_output_contents[0], np.float32)
                            want = SEQ_SESSION.run(None, {"x": x})[0]
                            np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-5)
                        plans.append(dict(runner.plans))
                    # still healthy, and right
                    assert (await stub.ServerReady(pb.ServerReadyRequest(), timeout=60)).ready
                    x = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32)
                    good = pb.ModelInferRequest(model_name="seq")
                    good.inputs.add(name="x", datatype="FP32", shape=[2, 5, 8])
                    good.raw_input_contents.append(x.tobytes())
                    resp = await stub.ModelInfer(good, timeout=60)
                    got = np.frombuffer(resp.raw_output_contents[0], np.float32).reshape(2, 5, 4)
                    np.testing.assert_allclose(got, SEQ_SESSION.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
            finally:
                await svc.stop(5)

    asyncio.run(main())
    assert sum(codes.values()) == len(cases)
    assert codes.get("INVALID_ARGUMENT", 0) > 0, codes
    assert codes.get("OK", 0) > 0, codes  # some lengths were valid: the plans were exercised
    assert all(p["plans"] <= 3 for p in plans), plans  # the bound holds whatever the lengths
    assert plans[-1]["compiles"] <= codes.get("OK", 0), (plans[-1], codes)  # a refused request compiles nothing
