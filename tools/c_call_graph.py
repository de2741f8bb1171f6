"""File-level call graph of the embedded C host runtime (cffi_build/hostrt).

Compiles every runtime ``.c`` file on its own (``gcc -O0 -c``, into a temporary
folder) and reads each object's defined and undefined symbols with ``nm``: file
A calls file B when A leaves undefined a symbol that B defines.  The kernels
(``kernels/*.c``) count as one node, ``kernels``.  Prints the edges (with the
symbols behind each), then the cycles: every strongly connected group of two or
more files.  The runtime is meant to be a one-way stack, so there should be
none.

    python tools/c_call_graph.py            # the graph and its cycles
    python tools/c_call_graph.py --dot      # Graphviz text instead
    python tools/c_call_graph.py --check    # exit 1 if there is a cycle
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
HOSTRT = ROOT / "cffi_build" / "hostrt"
KERNELS = "kernels"
# nm symbol types that define a global symbol (text, data, bss, read-only, common, weak)
_DEFINED = set("TDBRCGSVW")


def node_of(src: pathlib.Path) -> str:
    """The graph node of a source file: its stem, or ``kernels`` for any kernel."""
    return KERNELS if src.parent.name == KERNELS else src.stem


def sources(with_kernels: bool = True) -> list[pathlib.Path]:
    files = sorted(HOSTRT.glob("*.c"))
    if with_kernels:
        files += sorted((HOSTRT / KERNELS).glob("*.c"))
    return files


def _compile(src: pathlib.Path, out: pathlib.Path, defines: tuple[str, ...]) -> pathlib.Path:
    cmd = ["gcc", "-O0", "-std=gnu11", "-pthread", "-w", "-c", str(src), "-o", str(out)]
    cmd += [f"-D{d}" for d in defines]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


def _symbols(obj: pathlib.Path) -> tuple[set[str], set[str]]:
    text = subprocess.run(["nm", str(obj)], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in _DEFINED:
            defined.add(parts[2])
    return defined, undefined


def call_graph(with_kernels: bool = True, defines: tuple[str, ...] = ()) -> dict[str, dict[str, set[str]]]:
    """{caller: {callee: symbols}} between the runtime's files (no self edges)."""
    srcs = sources(with_kernels)
    with tempfile.TemporaryDirectory() as tmp:
        outs = [pathlib.Path(tmp) / f"{i}_{s.stem}.o" for i, s in enumerate(srcs)]
        jobs = min(4, os.cpu_count() or 1)
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            objs = list(pool.map(lambda a: _compile(a[0], a[1], defines), zip(srcs, outs)))
        syms = [_symbols(o) for o in objs]
    owner: dict[str, str] = {}
    for src, (defined, _) in zip(srcs, syms):
        for name in defined:
            owner[name] = node_of(src)
    graph: dict[str, dict[str, set[str]]] = {node_of(s): {} for s in srcs}
    for src, (_, undefined) in zip(srcs, syms):
        a = node_of(src)
        for name in undefined:
            b = owner.get(name)
            if b is not None and b != a:
                graph[a].setdefault(b, set()).add(name)
    return graph


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected groups of two or more nodes (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(groups)


def layers(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The files by level, bottom first (a file sits above everything it calls); acyclic graphs only."""
    level: dict[str, int] = {}

    def depth(v: str) -> int:
        if v not in level:
            level[v] = -1  # cycle guard
            level[v] = 1 + max((depth(w) for w in graph.get(v, {})), default=-1)
        return level[v]

    for v in graph:
        depth(v)
    out: list[list[str]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for v, n in level.items():
        out[n].append(v)
    return [sorted(x) for x in out]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dot", action="store_true", help="print Graphviz text")
    ap.add_argument("--check", action="store_true", help="exit 1 if the files call each other in a circle")
    ap.add_argument("--no-kernels", action="store_true", help="leave the kernels out")
    args = ap.parse_args(argv)
    graph = call_graph(with_kernels=not args.no_kernels)
    found = cycles(graph)
    if args.dot:
        print("digraph hostrt {")
        for a in sorted(graph):
            for b in sorted(graph[a]):
                print(f'  "{a}" -> "{b}";')
        print("}")
    else:
        for a in sorted(graph):
            for b in sorted(graph[a]):
                names = sorted(graph[a][b])
                more = f" (+{len(names) - 4})" if len(names) > 4 else ""
                print(f"{a:>9} -> {b:<9} {', '.join(names[:4])}{more}")
        print()
        if found:
            for group in found:
                print(f"cycle ({len(group)} files): {' '.join(group)}")
        else:
            print("no cycles; layers, bottom first:")
            for n, files in enumerate(layers(graph)):
                print(f"  {n}: {' '.join(files)}")
    return 1 if args.check and found else 0


if __name__ == "__main__":
    sys.exit(main())
