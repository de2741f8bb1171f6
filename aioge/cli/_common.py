"""What the subcommands share: errors with exit codes, model and input loading, statistics."""

from __future__ import annotations

import argparse
import copy
import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..runtime import _trace
from ._progress import Bar

__all__ = (
    "CliError",
    "Loaded",
    "UsageError",
    "add_compile_args",
    "add_input_args",
    "compile_model",
    "latency_stats",
    "load_model",
    "make_feeds",
    "ort_session",
    "parse_shapes",
)


class CliError(Exception):
    """A failure to report in one line; ``code`` is the exit status (1: runtime error)."""

    code = 1


class UsageError(CliError):
    """Bad arguments (exit status 2): a missing file, a malformed option, an unknown input name."""

    code = 2


# ---- arguments ---------------------------------------------------------------------------------
def add_input_args(p: argparse.ArgumentParser, *, inputs: bool = True) -> None:
    p.add_argument("model", metavar="MODEL.onnx", help="an ONNX model file")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="static shape of an input with symbolic dims (repeatable), e.g. x=1,3,224,224")  # fmt: skip
    p.add_argument("--batch-size", type=_positive_int, default=None, metavar="B",
                   help="set the first dim of every input to B (for models whose batch is not baked into their ops)")
    if inputs:
        p.add_argument("--input", action="append", default=[], metavar="NAME=FILE",
                       help="an input from a .npy file, or from a .npz (NAME=FILE.npz picks one array; FILE.npz "
                            "alone feeds every array by its name); repeatable.  Inputs not given are random, "
                            "of the right shape and dtype")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")


def add_compile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", type=int, default=0, metavar="N", help="device id (default 0)")
    p.add_argument("--streams", type=_positive_int, default=None, metavar="S",
                   help="streams a compiled plan may use (GE multi-stream; default: the backend's)")
    p.add_argument("--mode", choices=("auto", "sunk", "per_op"), default="auto",
                   help="sunk: the plan runs inside the runtime; per_op: one aclopCompileAndExecute per node")
    p.add_argument("--optimize", type=int, choices=(0, 1, 2), default=2, help="pass level (default 2)")


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} is not >= 1")
    return n


def positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not x > 0 or not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{text} is not > 0")
    return x


def non_negative_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n} is not >= 0")
    return n


positive_int = _positive_int


def parse_shapes(items: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """``["x=1,3,224,224"]`` -> ``{"x": (1, 3, 224, 224)}`` (``x`` separators also accepted)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, dims = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--shape {item!r}: expected NAME=D0,D1,... (e.g. x=1,3,224,224)")
        parts = [d for d in dims.replace("x", ",").split(",") if d.strip()] if dims.strip() else []
        try:
            shape = tuple(int(d) for d in parts)
        except ValueError:
            raise UsageError(f"--shape {item!r}: dims must be integers") from None
        if any(d < 0 for d in shape):
            raise UsageError(f"--shape {item!r}: dims must be >= 0")
        shapes[name] = shape
    return shapes


# ---- models ------------------------------------------------------------------------------------
@dataclass
class Loaded:
    """A model read from the command line: its (possibly re-batched) proto and the aioge graph."""

    path: str
    proto: Any
    graph: Any
    load_s: float

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


def graph_inputs(proto: Any) -> list[str]:
    inits = {i.name for i in proto.graph.initializer}
    return [vi.name for vi in proto.graph.input if vi.name not in inits]


def _rebatch(proto: Any, batch: int) -> Any:
    """A copy of ``proto`` whose inputs' first dims are ``batch`` (outputs' and value infos' left open)."""
    proto = copy.deepcopy(proto)
    names = set(graph_inputs(proto))
    for vi in proto.graph.input:
        dims = vi.type.tensor_type.shape.dim
        if vi.name in names and len(dims):
            dims[0].Clear()
            dims[0].dim_value = batch
    for vi in proto.graph.output:
        dims = vi.type.tensor_type.shape.dim
        if len(dims):
            dims[0].Clear()
            dims[0].dim_param = "batch"
    del proto.graph.value_info[:]
    return proto


def load_model(path: str, shapes: Mapping[str, Sequence[int]], batch_size: int | None = None) -> Loaded:
    """Read and import an ONNX model; every failure is a :class:`CliError` with one line."""
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not an ONNX model")
    try:
        import onnx
    except ImportError:
        raise CliError("reading ONNX models needs the onnx package: pip install 'aioge[onnx]'") from None
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

    from ..graph import GraphError, load_onnx

    t0 = time.perf_counter()
    try:
        proto = onnx.load_model(path, load_external_data=False)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise CliError(f"{path}: not a readable ONNX model ({_first_line(e)})") from None
    names = graph_inputs(proto)
    unknown = [n for n in shapes if n not in names]
    if unknown:
        raise UsageError(f"--shape: unknown input {unknown[0]!r} (the model's inputs: {', '.join(names) or 'none'})")
    for vi in proto.graph.input:
        if vi.name in shapes and vi.type.tensor_type.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
            want = tuple(shapes[vi.name])
            if len(want) != len(dims) or any(d is not None and d != w for d, w in zip(dims, want)):
                shown = ",".join("?" if d is None else str(d) for d in dims)
                raise UsageError(f"--shape {vi.name}={','.join(map(str, want))}: the model's input is {shown}")
    if batch_size is not None:
        proto = _rebatch(proto, batch_size)
    try:
        graph = load_onnx(proto, input_shapes=dict(shapes), base_dir=os.path.dirname(os.path.abspath(path)))
    except GraphError as e:
        raise CliError(f"{path}: {_first_line(e)}") from None
    return Loaded(path, proto, graph, time.perf_counter() - t0)


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


async def compile_model(dev: Any, loaded: Loaded, args: argparse.Namespace, *, show: bool | None = None) -> Any:
    """``dev.compile`` with a progress bar (after a second, on a terminal); returns (model, seconds)."""
    bar = Bar(None, f"compile {loaded.name}", unit="step", show=show)

    def progress(step: str, done: int, total: int) -> None:
        bar.set(done, total=total, desc=f"compile: {step}")

    _trace.compile_progress = progress
    t0 = time.perf_counter()
    try:
        model = await dev.compile(loaded.graph, optimize=args.optimize, max_streams=args.streams, mode=args.mode)
    finally:
        _trace.compile_progress = None
        bar.close()
    return model, time.perf_counter() - t0


# ---- inputs ------------------------------------------------------------------------------------
def make_feeds(inputs: Mapping[str, tuple[tuple[int, ...], np.dtype]], given: Sequence[str],
               seed: int) -> dict[str, np.ndarray]:  # fmt: skip
    """The arrays named by ``--input`` (checked against the model), random ones for the rest."""
    arrays: dict[str, np.ndarray] = {}
    names = list(inputs)
    for item in given:
        name, sep, file = item.partition("=")
        if not sep:
            name, file = "", item
        if not os.path.isfile(file):
            raise UsageError(f"--input {item}: no such file {file!r}")
        try:
            if file.endswith(".npz"):
                with np.load(file, allow_pickle=False) as z:
                    if name:
                        key = name if name in z.files else (z.files[0] if len(z.files) == 1 else None)
                        if key is None:
                            raise UsageError(f"--input {item}: {file} has no array {name!r} (it has {z.files})")
                        arrays[name] = np.asarray(z[key])
                    else:
                        arrays.update({k: np.asarray(z[k]) for k in z.files})
            else:
                if not name:
                    if len(names) != 1:
                        raise UsageError(f"--input {item}: name the input (NAME=FILE); the model has {names}")
                    name = names[0]
                arrays[name] = np.load(file, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise UsageError(f"--input {item}: cannot read {file} ({_first_line(e)})") from None
    feeds: dict[str, np.ndarray] = {}
    for name, arr in arrays.items():
        if name not in inputs:
            raise UsageError(f"--input: unknown input {name!r} (the model's inputs: {', '.join(names)})")
        shape, dt = inputs[name]
        if tuple(arr.shape) != tuple(shape):
            raise UsageError(f"--input {name}: shape {tuple(arr.shape)}, the model takes {tuple(shape)} "
                             "(--shape sets symbolic dims)")  # fmt: skip
        if arr.dtype != dt:
            if not np.can_cast(arr.dtype, dt, "same_kind"):
                raise UsageError(f"--input {name}: dtype {arr.dtype}, the model takes {dt}")
            arr = arr.astype(dt)
        feeds[name] = arr
    rng = np.random.default_rng(seed)
    for name, (shape, dt) in inputs.items():
        if name not in feeds:
            if not all(isinstance(d, int) for d in shape):  # a dynamic model (aioge.DynamicCompiledGraph)
                shown = ",".join("?" if d is None else str(d) for d in shape)
                raise UsageError(f"input {name!r} has symbolic dims {shown}: pin them with --shape {name}=...")
            feeds[name] = random_array(rng, shape, dt)
    return {n: feeds[n] for n in inputs}


def random_array(rng: np.random.Generator, shape: Sequence[int], dt: np.dtype) -> np.ndarray:
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        return rng.integers(0, 10, size=shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


# ---- onnxruntime, statistics ---------------------------------------------------------------------
def ort_session(proto: Any) -> Any:
    try:
        import onnxruntime as ort  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        raise CliError("--compare-ort needs onnxruntime: pip install onnxruntime") from None
    so = ort.SessionOptions()
    so.log_severity_level = 3
    try:
        return ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        raise CliError(f"onnxruntime cannot load the model: {_first_line(e)}") from None


def latency_stats(seconds: Sequence[float]) -> dict[str, float]:
    """mean, p50, p90, p99, min and max of latencies, in ms."""
    if not seconds:
        return {k: math.nan for k in ("mean", "p50", "p90", "p99", "min", "max")}
    a = np.asarray(seconds, np.float64) * 1e3
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"mean": float(a.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99),
            "min": float(a.min()), "max": float(a.max())}  # fmt: skip
