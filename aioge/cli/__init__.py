"""The ``aioge`` command (``python -m aioge``): inspect, run, benchmark and trace from the shell.

::

    aioge info [--json]                       backend, devices, BLAS, threads, versions, env
    aioge run MODEL.onnx [--compare-ort]      random (or given) inputs, outputs summarised
    aioge bench MODEL.onnx [--compare-ort]    throughput, latency percentiles, compile time, arena
    aioge trace MODEL.onnx -o trace.json      a Chrome/Perfetto trace (and --plot timeline.png)
    aioge ops [--filter X]                    the registered CANN op types and their dtypes

Exit status: 0 success, 1 runtime error, 2 bad arguments; every error is one
line on stderr (``-vv`` adds the traceback).  Progress bars (tqdm, the
``cli`` extra) appear on work over a second, and only when stdout is a terminal.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from ._common import CliError, UsageError

__all__ = ("CliError", "UsageError", "build_parser", "main")

#: built-in subcommands: modules of this package with ``register(subparsers)``
COMMANDS = ("info", "run", "bench", "trace", "ops")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = _Parser(prog="aioge", description="aioge: an asyncio-native runtime for Huawei Ascend CANN.",
                     epilog="Exit status: 0 ok, 1 runtime error, 2 bad arguments.  The backend is chosen by "
                            "AIOGE_BACKEND (host or ascend).")  # fmt: skip
    parser.add_argument("--version", action="version", version=f"aioge {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log to stderr (-v: INFO, -vv: DEBUG: compile steps with timings, plan, backend; "
                             "tracebacks)")  # fmt: skip
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    _register_serve(sub)
    return parser


def _register_serve(sub: Any) -> None:
    """``aioge serve`` lives with the serving code (aioge/serve/cli.py), when installed."""
    try:
        if importlib.util.find_spec("aioge.serve.cli") is None:
            return
        module = importlib.import_module("aioge.serve.cli")
    except ImportError:
        return
    module.register(sub)


def _setup_logging(verbose: int) -> None:
    if not verbose:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    log = logging.getLogger("aioge")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if verbose >= 2 else logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors
        return int(e.code or 0) if not isinstance(e.code, str) else 2
    _setup_logging(args.verbose)
    prog = f"aioge {args.command}"
    try:
        return int(args.func(args) or 0)
    except CliError as e:
        _fail(prog, str(e), args.verbose)
        return e.code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`aioge ops | head`): no traceback, no flush error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as e:  # runtime errors (aioge's typed ones and the rest): one line, status 1
        _fail(prog, f"{type(e).__name__}: {e}", args.verbose)
        return 1


def _fail(prog: str, message: str, verbose: int) -> None:
    if verbose >= 2:
        traceback.print_exc()
    text = " ".join(line.strip() for line in message.splitlines() if line.strip())
    print(f"{prog}: error: {text}", file=sys.stderr)
