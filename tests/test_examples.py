"""The examples run end to end (they assert their own results)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(*args: str) -> str:
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


@pytest.mark.parametrize("script", ["quickstart.py", "onnx_inference.py", "pipeline.py"])
def test_example_runs(script):
    stdout = run(str(EXAMPLES / script))
    if script == "onnx_inference.py":
        worst = float(stdout.rsplit("over all outputs:", 1)[1].split()[0])
        assert worst < 1e-3


def test_onnx_inference_loads_a_file_with_external_data_and_symbolic_dims(tmp_path):
    """A model file whose weights live next to it and whose batch dim is symbolic."""
    onnx = pytest.importorskip("onnx")
    spec = importlib.util.spec_from_file_location("onnx_inference", EXAMPLES / "onnx_inference.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    path = tmp_path / "resnet_tiny.onnx"
    onnx.save_model(example.build_model(batch="N"), str(path), save_as_external_data=True,
                    location="resnet_tiny.weights", size_threshold=0)  # fmt: skip
    assert (tmp_path / "resnet_tiny.weights").stat().st_size > 0
    stdout = run(str(EXAMPLES / "onnx_inference.py"), str(path), "--shape", "x=2,3,32,32")
    assert "input  %x: float32[2x3x32x32]" in stdout
    worst = float(stdout.rsplit("over all outputs:", 1)[1].split()[0])
    assert worst < 1e-3


def test_examples_state_their_needs_and_a_missing_package_is_one_line(tmp_path):
    """Each example says what it needs in its first lines; without onnx the
    ONNX example says which extra installs it, in one line, not a traceback."""
    for script in EXAMPLES.glob("*.py"):
        head = script.read_text().split('"""', 2)[1]
        assert "Needs" in head, f"{script.name} does not say what it needs"
    fake = tmp_path / "onnx"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'onnx'\", name='onnx')\n")
    out = subprocess.run([sys.executable, str(EXAMPLES / "onnx_inference.py")], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(tmp_path)})  # fmt: skip
    assert out.returncode == 1 and "Traceback" not in out.stderr
    want = "examples/onnx_inference.py needs onnx: pip install '.[examples]' (onnx and onnxruntime)"
    assert out.stderr.strip() == want


def test_onnx_inference_reports_bad_arguments_without_a_traceback(tmp_path):
    """A bad --shape or a missing model file is a usage error."""
    pytest.importorskip("onnx")
    for args in (["--shape", "x=a,b"], [str(tmp_path / "missing.onnx")]):
        out = subprocess.run([sys.executable, str(EXAMPLES / "onnx_inference.py"), *args], capture_output=True,
                             text=True, timeout=120)  # fmt: skip
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.strip().splitlines()[-1].startswith("onnx_inference.py: error: "), out.stderr
