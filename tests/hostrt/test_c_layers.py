"""The C host runtime is a one-way stack: no file calls a file that calls it back.

tools/c_call_graph.py builds the file-level call graph from the compiled
objects' symbols (nm); a cycle means a helper sits in the wrong file.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("nm") is None, reason="needs gcc and nm (binutils)"
)


def _tool():  # tools/ is not a package
    spec = importlib.util.spec_from_file_location("c_call_graph", ROOT / "tools" / "c_call_graph.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def tool():
    return _tool()


@pytest.fixture(scope="module")
def graph(tool):
    return tool.call_graph(with_kernels=True)


def test_cycle_finder_finds_a_circle(tool):
    g = {"a": {"b": {"f"}}, "b": {"c": {"g"}}, "c": {"a": {"h"}}, "d": {"a": {"i"}}}
    assert tool.cycles(g) == [["a", "b", "c"]]
    assert tool.cycles({"a": {"b": {"f"}}, "b": {}}) == []


def test_graph_sees_the_runtime(graph):
    # sanity: the scan found the files and the calls every layer makes
    assert {"common", "stream", "event", "memory", "op", "pool", "blas", "kernels"} <= set(graph)
    assert "hrt_task_begin" in graph["event"]["stream"]
    assert "hrt_parallel_for" in graph["kernels"]["pool"]


def test_no_cycle_among_runtime_files(tool, graph):
    found = tool.cycles(graph)
    assert found == [], "C runtime files call each other in a circle: " + "; ".join(" ".join(c) for c in found)


def test_base_layer_calls_nothing_above_it(graph):
    # errors/handles/clock and the settings are the bottom: they call no other runtime file
    assert graph["common"] == {}
    assert graph["env"] == {}


def test_kernels_only_use_the_kernel_layer(graph):
    # kernels see hrt_kernel.h: errors, settings, attrs, the op registry, the pool and the GEMM layer
    # (BLAS, the packed kernels beside it and the packed weights they share) -- never streams, events, memory,
    # contexts or the handle registry
    assert set(graph["kernels"]) <= {"common", "env", "desc", "op", "pool", "blas", "gemm_small", "packcache"}
    assert not ({"hrt_handle_add", "hrt_handles_lock", "hrt_now_ns"} & graph["kernels"].get("common", set()))


def test_debug_lock_check_sits_at_the_bottom(tool):
    # with -DHRT_DEBUG_LOCKS every runtime file calls lock.c, which calls nothing back
    graph = tool.call_graph(with_kernels=False, defines=("HRT_DEBUG_LOCKS",))
    assert tool.cycles(graph) == []
    assert graph["lock"] == {}
    assert "hrt_lock_note" in graph["stream"]["lock"]
