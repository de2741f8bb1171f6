"""``aioge ops``: the CANN op types the backend registers."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ("register",)


def register(sub: Any) -> None:
    p = sub.add_parser("ops", help="the registered CANN op types and their dtypes",
                       description="List the CANN op types the backend implements, with the dtypes each accepts "
                                   "(probed on the runtime itself).")  # fmt: skip
    p.add_argument("--filter", metavar="X", default="", help="only op types containing X (case-insensitive)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ._opsprobe import probe

    table = probe(args.filter)
    if args.json:
        print(json.dumps({"ops": table}, indent=2))
        return 0
    if not table:
        print(f"no op type contains {args.filter!r}")
        return 0
    width = max(len(r["op"]) for r in table)
    for r in table:
        dts = ", ".join(r["dtypes"]) if r["dtypes"] is not None else "(dtypes not probed)"
        print(f"{r['op'].ljust(width)}  {dts}")
    print(f"{len(table)} op types")
    return 0
