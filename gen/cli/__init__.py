"""The ``fetta`` command line (also ``python -m gen``).

Sub-commands live in :mod:`gen.cli` (one module each). Errors that name
a bad field (:class:`gen.errors.FettaError`) print one line and exit with 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from gen import __version__
from gen.errors import FettaError

#: sub-command -> module in gen.cli (in the order `fetta --help` lists them)
COMMANDS = ("verilog", "golden", "search", "run", "model", "synth", "sweep", "lint", "demo")


def _load(name: str):
    return importlib.import_module(f"gen.cli.{name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fetta", description="FETTA accelerator generator and tool flow")
    parser.add_argument("--version", action="version", version=f"fetta {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = _load(name)
        except ModuleNotFoundError as exc:
            if exc.name != f"gen.cli.{name}":
                raise
            continue  # not built yet
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_main=mod.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_main", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args._main(args) or 0)
    except FettaError as exc:
        print(f"fetta: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("fetta: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of our output went away (e.g. `| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
