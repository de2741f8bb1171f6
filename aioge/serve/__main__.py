"""``python -m aioge.serve [serve] MODEL.onnx ...`` -- the ``serve`` sub-command on its own."""

from __future__ import annotations

import argparse
import sys

from .cli import register


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "serve":
        argv.insert(0, "serve")
    parser = argparse.ArgumentParser(prog="python -m aioge.serve")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
