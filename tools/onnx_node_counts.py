"""Run the ONNX backend test data of the installed ``onnx`` wheel and print the README's table.

Usage: ``PYTHONPATH=. python tools/onnx_node_counts.py`` (about a minute on the host runtime).
The outcomes are those of ``tests/graph/test_onnx_backend.py`` (same runner, same modes).
"""

from __future__ import annotations

import os
import sys
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "graph"))

import aioge


def main() -> None:
    import test_onnx_backend as t
    from onnx_backend import dir_cases, light_cases, node_cases

    dev = aioge.open_device(0)
    sources = [("node", list(node_cases()), t.BOTH), ("pytorch-converted", dir_cases("pytorch-converted"), t.BOTH),
               ("pytorch-operator", dir_cases("pytorch-operator"), t.BOTH), ("simple", dir_cases("simple"), t.BOTH),
               ("light", light_cases(), ((2, "sunk"),))]  # fmt: skip
    print("| source | cases | passed | failed | refused (reason) | unsupported op | not applicable (types / opset) |")
    print("|---|---|---|---|---|---|---|")
    for name, cases, modes in sources:
        res = {c.name: t.run_case(c, dev, modes) for c in cases}
        n = Counter(o for o, _ in res.values())
        reasons = Counter(t.REFUSED.get(k, d) for k, (o, d) in res.items() if o == "refused")
        why = ", ".join(f"{v} {r}" for r, v in reasons.items())
        na = Counter("types" if d == "types" else "opset" for o, d in res.values() if o == "not_applicable")
        print(f"| {name} | {len(cases)} | {n['passed']} | {n['failed']} | {n['refused']}{f' ({why})' if why else ''} "
              f"| {n['unsupported_op']} | {n['not_applicable']} ({na['types']} / {na['opset']}) |")  # fmt: skip
    dev.close()


if __name__ == "__main__":
    main()
