"""The ``fetta`` command line (also ``python -m gen``).

Sub-commands live in :mod:`gen.cli` (one module each). Errors that name
a bad field (:class:`gen.errors.FettaError`) print one line and exit with 2, and so do
bad arguments (``argparse``'s errors, without the usage text). A last guard turns any
remaining ``OSError``, ``MemoryError`` or text-decoding error into one line with exit code 2;
other exceptions are bugs and keep their traceback (exit 1). See ``docs/errors.md``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from gen import __version__
from gen.errors import FettaError, UsageError

#: sub-command -> module in gen.cli (in the order `fetta --help` lists them)
COMMANDS = ("verilog", "golden", "search", "run", "model", "train", "hooi", "synth", "sweep", "lint", "demo")


def _load(name: str):
    return importlib.import_module(f"gen.cli.{name}")


class Parser(argparse.ArgumentParser):
    """``argparse`` whose errors are one line (a :class:`UsageError`, exit code 2) instead of the usage text."""

    def error(self, message: str):
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="fetta", description="FETTA accelerator generator and tool flow")
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
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "_main", None):
            parser.print_help(sys.stderr)
            return 2
        return int(args._main(args) or 0)
    except FettaError as exc:
        return _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        print("fetta: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of our output went away (e.g. `| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    # the last guard: what the checks up front missed is still one line, not a traceback
    except MemoryError:
        return _fail("out of memory; try a smaller layer, or lower --max-elements so that fetta refuses it "
                     "before starting")
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        return _fail(f"{exc.strerror or exc}{where}")
    except UnicodeError as exc:  # a file that is not UTF-8 text, or a terminal that cannot show a name
        return _fail(f"text encoding: {exc} (UTF-8 expected)")


def _fail(message: str, code: int = 2) -> int:
    """Print ``fetta: error: MESSAGE`` as one line (newlines inside become spaces)."""
    print(f"fetta: error: {' '.join(message.split())}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
