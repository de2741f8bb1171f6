"""Serve an ONNX model over HTTP (Open Inference Protocol / KServe v2) and call it four ways.

    python examples/serve_onnx.py [model.onnx]

Starts ``python -m aioge serve MODEL --port 0`` as a user would in a terminal, waits for its "listening
on" line, then calls it with ``tritonclient.http`` (JSON, then binary
tensors), with ``httpx`` and with ``curl``; every answer is checked against
onnxruntime (or, without it, against each other).  SIGTERM then stops the
server gracefully (exit code 0).  Without an argument a small MLP with a
symbolic batch dimension is written to a temporary directory first.
Needs the ``serve`` extra, plus ``tritonclient[http]`` and ``httpx`` (it says so, and
exits, when one is missing).
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def build_model(path: Path) -> Path:
    """A 32 -> 64 -> 10 MLP whose inputs have a symbolic batch dimension ``N``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((32, 64)).astype(np.float32) / 6, rng.standard_normal((64, 10)).astype(np.float32) / 8
    inits = [numpy_helper.from_array(a, n) for n, a in
             (("w1", w1), ("b1", np.zeros(64, np.float32)), ("w2", w2), ("b2", np.zeros(10, np.float32)))]  # fmt: skip
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=1)]  # fmt: skip
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 32])
    probs = helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])
    graph = helper.make_graph(nodes, "mlp", [x], [probs], inits)
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def require(with_onnx: bool) -> None:
    """Exit with a clear message (not a traceback) when a package the example needs is missing."""
    needed = [("starlette", "aioge[serve]"), ("uvicorn", "aioge[serve]"), ("tritonclient.http", "tritonclient[http]"),
              ("httpx", "httpx")] + ([("onnx", "aioge[serve]")] if with_onnx else [])  # fmt: skip
    missing = []
    for module, package in needed:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append((module, package))
    if missing:
        names = ", ".join(m for m, _ in missing)
        pkgs = " ".join(sorted({f"'{p}'" for _, p in missing}))
        raise SystemExit(f"serve_onnx.py needs {names}: pip install {pkgs}")


def start_server(model: Path) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "aioge", "serve", str(model), "--port", "0", "--max-batch-size", "16",
           "--max-queue-delay-us", "500", "--grpc-port", "0"]  # fmt: skip  (HTTP only here: no gRPC port to collide)
    print("$ python", " ".join(cmd[1:]))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed once every model is compiled and the port listens
    m = re.search(r"listening on (http://\S+)", line)
    if not m:
        if line:  # something else on stdout: not a server that is about to listen
            proc.kill()
        code = proc.wait(60)
        raise SystemExit(f"the server did not start (exit code {code}; its error is above)")
    print(line.strip())
    return proc, m.group(1)


def main() -> None:
    require(with_onnx=len(sys.argv) < 2)
    tmp: Path | None = None
    try:
        if len(sys.argv) > 1:
            model = Path(sys.argv[1])
        else:
            tmp = Path(tempfile.mkdtemp(prefix="aioge-serve-"))
            model = build_model(tmp / "mlp.onnx")
        serve(model)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def serve(model: Path) -> None:
    name = model.stem
    proc, url = start_server(model)
    try:
        import httpx
        import tritonclient.http as triton

        client = triton.InferenceServerClient(url.removeprefix("http://"))
        meta = client.get_model_metadata(name)
        inp = meta["inputs"][0]
        out_name = meta["outputs"][0]["name"]
        print(f"model {name}: input {inp['name']} {inp['datatype']}{inp['shape']} -> output {out_name}")
        shape = [3 if d == -1 else d for d in inp["shape"]]
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)

        answers = {}
        for binary in (False, True):  # JSON tensors, then Triton's binary tensor data extension
            t = triton.InferInput(inp["name"], shape, "FP32")
            t.set_data_from_numpy(x, binary_data=binary)
            res = client.infer(name, [t], outputs=[triton.InferRequestedOutput(out_name, binary_data=binary)])
            answers["tritonclient " + ("binary" if binary else "JSON")] = res.as_numpy(out_name)
        client.close()

        body = {"id": "httpx-1", "inputs": [{"name": inp["name"], "shape": shape, "datatype": "FP32",
                                             "data": x.tolist()}]}  # fmt: skip
        r = httpx.post(f"{url}/v2/models/{name}/infer", json=body, timeout=30)
        r.raise_for_status()
        o = r.json()["outputs"][0]
        answers["httpx"] = np.asarray(o["data"], np.float32).reshape(o["shape"])

        if shutil.which("curl"):
            cmd = ["curl", "-s", "-X", "POST", f"{url}/v2/models/{name}/infer", "-H", "Content-Type: application/json",
                   "-d", json.dumps(body)]  # fmt: skip
            print("$ curl -s -X POST", f"{url}/v2/models/{name}/infer", "-d '{\"inputs\": [...]}'")
            o = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)["outputs"][0]
            answers["curl"] = np.asarray(o["data"], np.float32).reshape(o["shape"])

        try:
            import onnxruntime as ort

            sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
            reference, ref_name = sess.run([out_name], {inp["name"]: x})[0], "onnxruntime"
        except ImportError:
            reference, ref_name = answers["httpx"], "the httpx answer"
        for how, y in answers.items():
            diff = float(np.max(np.abs(y - reference)))
            print(f"{how:22s} {y.shape}  max |diff| vs {ref_name}: {diff:.2e}")
            assert diff < 1e-4, how
        print(httpx.get(f"{url}/metrics", timeout=30).text.count("aioge_serve_"), "aioge_serve_* samples at /metrics")
    finally:
        proc.send_signal(signal.SIGTERM)  # graceful: finishes accepted requests, closes models and device
        code = proc.wait(60)
    print("server exited with", code)
    assert code == 0


if __name__ == "__main__":
    main()
