"""Load (or build) an ONNX model, compile it once, run it from many tasks at once.

Needs: onnx and onnxruntime -- the `examples` extra:

    pip install ".[examples]" && python examples/onnx_inference.py [model.onnx] [--shape x=1,3,224,224 ...]

Without a model a small residual CNN is built with onnx.helper. A model file
is loaded with ``aioge.load_onnx(path)``, so external tensor data next to it
is found; ``--shape`` fixes inputs whose ONNX shape has symbolic dims (a
batch dim "N", say). Results are checked against onnxruntime.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import numpy as np

import aioge

try:
    import onnx
    import onnxruntime as ort
except ImportError as e:  # one clear line instead of a traceback
    sys.exit(f"examples/onnx_inference.py needs {e.name}: pip install '.[examples]' (onnx and onnxruntime)")


def build_model(batch: int | str = 4) -> onnx.ModelProto:
    """A small residual CNN: Conv-BN-Relu, a residual block, GlobalAveragePool, Gemm.

    ``batch`` may be a symbolic dim name (then give the shape when loading).
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def w(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)

    inits = [w("w0", 16, 3, 3, 3), w("w1", 16, 16, 3, 3), w("w2", 16, 16, 3, 3), w("fc_w", 10, 16), w("fc_b", 10)]
    for i in range(3):
        inits += [numpy_helper.from_array(rng.uniform(0.5, 1.5, 16).astype(np.float32), f"bn{i}_s"),
                  numpy_helper.from_array(rng.uniform(-0.1, 0.1, 16).astype(np.float32), f"bn{i}_b"),
                  numpy_helper.from_array(rng.uniform(-0.1, 0.1, 16).astype(np.float32), f"bn{i}_m"),
                  numpy_helper.from_array(rng.uniform(0.5, 1.5, 16).astype(np.float32), f"bn{i}_v")]  # fmt: skip
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"], **conv),
        helper.make_node("BatchNormalization", ["c0", "bn0_s", "bn0_b", "bn0_m", "bn0_v"], ["b0"]),
        helper.make_node("Relu", ["b0"], ["r0"]),
        helper.make_node("Conv", ["r0", "w1"], ["c1"], **conv),
        helper.make_node("BatchNormalization", ["c1", "bn1_s", "bn1_b", "bn1_m", "bn1_v"], ["b1"]),
        helper.make_node("Relu", ["b1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], **conv),
        helper.make_node("BatchNormalization", ["c2", "bn2_s", "bn2_b", "bn2_m", "bn2_v"], ["b2"]),
        helper.make_node("Add", ["b2", "r0"], ["s"]),
        helper.make_node("Relu", ["s"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 32, 32])
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "resnet_tiny", [x], [logits], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def shape_arg(spec: str) -> tuple[str, tuple[int, ...]]:
    """``"x=1,3,224,224"`` -> ``("x", (1, 3, 224, 224))`` (argparse reports a bad one as a usage error)."""
    name, eq, dims = spec.partition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not name or not eq or not shape or any(d < 0 for d in shape):
        raise argparse.ArgumentTypeError(f"{spec!r} is not NAME=D0,D1,... (non-negative integer dims)")
    return name, shape


def random_feeds(rng: np.random.Generator, inputs: dict[str, tuple[tuple[int, ...], np.dtype]]) -> dict[str, Any]:
    return {n: (rng.standard_normal(shape) if dt.kind == "f" else rng.integers(0, 2, shape)).astype(dt)
            for n, (shape, dt) in inputs.items()}  # fmt: skip


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?", help="an .onnx file (default: build a small CNN)")
    ap.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...", type=shape_arg,
                    help="static shape of an input with symbolic dims (repeatable)")  # fmt: skip
    args = ap.parse_args()
    shapes = dict(args.shape)
    try:
        if args.model:
            graph = aioge.load_onnx(args.model, input_shapes=shapes)  # external data: read next to the file
            source: str | bytes = args.model
        else:
            source = build_model().SerializeToString()
            graph = aioge.load_onnx(source, input_shapes=shapes)
    except (OSError, aioge.GraphError) as e:  # a missing file, a symbolic dim without --shape, ...
        ap.error(str(e))
    print(graph)
    async with aioge.open_device(0) as dev:
        t0 = time.perf_counter()
        # optimise, plan, lower, load: off the event loop; closed when the block ends
        async with await dev.compile(graph) as model:
            print(f"compiled in {(time.perf_counter() - t0) * 1e3:.1f} ms: {model}")
            rng = np.random.default_rng(1)
            batches = [random_feeds(rng, model.inputs) for _ in range(32)]

            async def client(i: int) -> dict[str, np.ndarray]:
                return await model.execute(batches[i])

            t0 = time.perf_counter()
            results = await asyncio.gather(*(client(i) for i in range(len(batches))))
            dt = time.perf_counter() - t0
            print(f"{len(batches)} concurrent executions in {dt * 1e3:.1f} ms ({len(batches) / dt:.1f}/s)")
    sess = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    worst = 0.0
    for feeds, res in zip(batches, results):
        for name, ref in zip((o.name for o in sess.get_outputs()), sess.run(None, feeds)):
            worst = max(worst, float(np.max(np.abs(res[name] - ref))))
    print(f"max |aioge - onnxruntime| over all outputs: {worst:.2e}")


if __name__ == "__main__":
    asyncio.run(main())
