"""The ``aioge`` command, run for real (``python -m aioge`` subprocesses) on models the tests build.

Subprocesses cost ~1.5 s each (importing aioge), so each one checks a lot;
argument errors, which need no model run, are checked in process through
``aioge.cli.main`` (the same code path the console script takes).
"""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy as np
import onnxruntime as ort
import pytest

import aioge
from aioge import _native
from aioge.cli import COMMANDS, main
from tests.cli.conftest import aioge_cmd
from tests.cli.tracecheck import check_trace
from tests.graph import models as M


def _ort(path, feeds):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def _ordered(lat):
    assert lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"], lat
    assert lat["min"] <= lat["mean"] <= lat["max"], lat


def test_help_and_info():
    r = aioge_cmd("--help")
    assert r.code == 0, r.err
    for cmd in COMMANDS:
        assert cmd in r.out
    if importlib.util.find_spec("aioge.serve") is not None and importlib.util.find_spec("aioge.serve.cli"):
        assert "serve" in r.out  # the serving lane's subcommand joins the same --help
    r = aioge_cmd("info", "--json")
    assert r.code == 0, r.err
    info = r.json()
    assert info["backend"] == _native.backend == "host"
    assert info["library"] == str(_native.library_path)
    assert info["graph_api"] is True
    assert info["op_count"] == len(_native.op_types())
    assert info["intra_op_threads"] >= 1
    assert info["versions"]["aioge"] == aioge.__version__
    assert info["versions"]["numpy"] == np.__version__
    assert [d["id"] for d in info["devices"]] == list(range(aioge.device_count()))
    assert all(0 < d["memory_free"] <= d["memory_total"] for d in info["devices"])
    assert all(k.startswith("AIOGE_") or k in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "OPENBLAS_NUM_THREADS",
               "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS") for k in info["env"])  # fmt: skip
    assert info["blas"] == _native.blas_info()
    # the matrix-product kernel family in use: one this CPU runs (the best unless AIOGE_HOST_ISA says)
    assert info["kernel_family"] == _native.kernel_family() and info["kernel_family"] in _native.kernel_families()
    assert info["nchwc_kernel_family"] == _native.nchwc_kernel_family()
    assert info["nchwc_kernel_family"] in ("avx512", "avx2", "generic")


def test_help_on_every_subcommand(capsys):
    for cmd in COMMANDS:
        assert main([cmd, "--help"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: aioge {cmd}"), out[:200]


def test_run_given_inputs_compare_ort_and_output_dir(model_files, tmp_path):
    path = model_files["attention"]
    feeds = M.sample_inputs(M.attention(small=True), seed=3)
    np.savez(tmp_path / "in.npz", **feeds)
    r = aioge_cmd("run", path, "--input", tmp_path / "in.npz", "--compare-ort", "--output-dir", tmp_path / "out",
                  "--json")  # fmt: skip
    assert r.code == 0, r.err
    rep = r.json()
    want = _ort(path, feeds)
    assert [o["name"] for o in rep["outputs"]] == list(want)
    for o in rep["outputs"]:
        ref = want[o["name"]]
        assert o["shape"] == list(ref.shape) and o["dtype"] == str(ref.dtype)
        saved = np.load(tmp_path / "out" / f"{o['name']}.npy")
        np.testing.assert_allclose(saved, ref, rtol=1e-4, atol=1e-5)
        assert o["min"] == pytest.approx(float(saved.min())) and o["max"] == pytest.approx(float(saved.max()))
        cmp = rep["compare_ort"][o["name"]]
        assert cmp["ok"] and cmp["max_abs_err"] == pytest.approx(float(np.abs(saved - ref).max()), abs=1e-7)
    assert [i["name"] for i in rep["inputs"]] == list(feeds)


def test_bench_iterations_concurrency_compare_ort_and_trace(model_files, tmp_path):
    trace = tmp_path / "bench.json"
    r = aioge_cmd("bench", model_files["mlp"], "--iterations", 37, "--warmup", 2, "--concurrency", 3, "--compare-ort",
                  "--blocks", 2, "--trace", trace, "--trace-iterations", 4, "--json")  # fmt: skip
    assert r.code == 0, r.err
    assert r.err == ""  # stdout is a pipe: no progress bar, nothing else either
    rep = r.json()
    assert rep["aioge"]["iterations"] == 37 and rep["onnxruntime"]["iterations"] == 37
    assert rep["concurrency"] == 3 and rep["warmup"] == 2 and rep["blocks"] == 2 and rep["batch_size"] == 4
    for side in ("aioge", "onnxruntime"):
        _ordered(rep[side]["latency_ms"])
        f = rep[side]
        assert f["throughput"] == pytest.approx(f["iterations"] / f["seconds"])
        assert f["samples_per_s"] == pytest.approx(4 * f["throughput"])
    assert rep["ratio"]["throughput"] == pytest.approx(rep["aioge"]["throughput"] / rep["onnxruntime"]["throughput"])
    assert rep["compile_s"] > 0 and rep["arena_bytes"] > 0 and rep["arena_total_bytes"] >= rep["arena_bytes"]
    assert 1 <= rep["arenas"] <= 3  # at most one per execution in flight
    parts = check_trace(json.loads(trace.read_text()))
    assert rep["trace"]["executions"] == 4
    assert len([e for e in parts["launches"].values() if e["cat"] == "graph"]) == 4
    assert len(parts["threads"]) == 3  # the three clients' streams


def test_bench_duration_batch_size_and_progress(model_files):
    # --progress forces the bar on although stderr is a pipe; it shows once the work has taken a second
    r = aioge_cmd("bench", model_files["mlp"], "--duration", 1.3, "--batch-size", 3, "--warmup", 0, "--json",
                  "--progress")  # fmt: skip
    assert r.code == 0, r.err
    assert "bench" in r.err and "%" in r.err  # tqdm's bar, on stderr only: stdout stays one JSON object
    rep = r.json()
    assert rep["batch_size"] == 3 and rep["requested"] == {"iterations": None, "duration_s": 1.3}
    f = rep["aioge"]
    assert f["iterations"] >= 1 and f["seconds"] >= 1.3  # runs until the deadline, then the last one finishes
    _ordered(f["latency_ms"])
    assert "onnxruntime" not in rep


def test_trace_multi_stream_and_plot(model_files, tmp_path):
    out, png = tmp_path / "t.json", tmp_path / "t.png"
    r = aioge_cmd("trace", model_files["branchy"], "-o", out, "--plot", png, "--streams", 2, "--concurrency", 2,
                  "-n", 4, "--warmup", 1, "--json")  # fmt: skip
    assert r.code == 0, r.err
    summary = r.json()
    trace = json.loads(out.read_text())
    parts = check_trace(trace)
    assert summary["executions"] == 4 and summary["streams"] == 2
    # 2 caller streams, each with its own auxiliary stream: 4 tracks, one per stream
    assert len(parts["threads"]) == summary["tracks"] == 4
    assert summary["cross_stream_waits"] == len(parts["flows"]) > 0
    segments = [e for e in parts["launches"].values() if e["cat"] == "graph"]
    assert len(segments) == 4 * 3  # 3 segments per execution
    nodes = [e for evs in parts["slices"].values() for e in evs if e["cat"] == "node"]
    assert {e["name"] for e in nodes} >= {"MatMulV2"} or {e["name"] for e in nodes} >= {"_FusedMatMul"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert summary["key_averages"] and all(row["calls"] >= 1 for row in summary["key_averages"])


def test_ops(capsys):
    r = aioge_cmd("ops", "--filter", "conv", "--json")
    assert r.code == 0, r.err
    table = r.json()["ops"]
    assert [t["op"] for t in table] == [op for op in _native.op_types() if "conv" in op.lower()]
    conv = next(t for t in table if t["op"] == "Conv2D")
    assert "float32" in conv["dtypes"] and "bool" not in conv["dtypes"]
    assert main(["ops"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"{len(_native.op_types())} op types"
    add = next(line for line in out if line.startswith("Add "))
    assert "float32" in add and "int32" in add and "bool" not in add


def test_missing_model_is_one_line_exit_2(model_files):
    r = aioge_cmd("bench", model_files["mlp"].parent / "nope.onnx")
    assert r.code == 2
    assert r.err.count("\n") == 1 and "no such file" in r.err and "Traceback" not in r.err


@pytest.mark.parametrize(
    ("argv", "code", "text"),
    [
        (["run", "{garbage}"], 1, "not a readable ONNX model"),
        (["run", "{mlp}", "--shape", "x=4,a"], 2, "dims must be integers"),
        (["run", "{mlp}", "--shape", "x"], 2, "expected NAME=D0,D1"),
        (["run", "{mlp}", "--shape", "y=4,16"], 2, "unknown input 'y'"),
        (["run", "{mlp}", "--shape", "x=4,17"], 2, "the model's input is 4,16"),
        (["run", "{mlp}", "--input", "y={npy}"], 2, "unknown input 'y'"),
        (["run", "{mlp}", "--input", "x={missing}"], 2, "no such file"),
        (["run", "{mlp}", "--input", "x={wrong}"], 2, "the model takes (4, 16)"),
        (["bench", "{mlp}", "--iterations", "0"], 2, "is not >= 1"),
        (["bench", "{mlp}", "--iterations", "3", "--duration", "1"], 2, "not allowed with"),
        (["trace", "{mlp}"], 2, "required: -o/--output"),
        (["frobnicate"], 2, "invalid choice"),
    ],
)
def test_bad_arguments_one_line(model_files, tmp_path, capsys, argv, code, text):
    np.save(tmp_path / "ok.npy", np.zeros((4, 16), np.float32))
    np.save(tmp_path / "wrong.npy", np.zeros((4, 15), np.float32))
    subst = {"garbage": model_files["garbage"], "mlp": model_files["mlp"], "npy": tmp_path / "ok.npy",
             "wrong": tmp_path / "wrong.npy", "missing": tmp_path / "missing.npy"}  # fmt: skip
    assert main([a.format(**subst) for a in argv]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and text in err and "Traceback" not in err, err


def test_plot_without_matplotlib(model_files, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    argv = ["trace", str(model_files["mlp"]), "-o", str(tmp_path / "t.json"), "--plot", str(tmp_path / "p.png")]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--plot needs matplotlib" in err
    assert not (tmp_path / "t.json").exists()  # refused before any work
