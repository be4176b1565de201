"""The ``fetta`` command line (also ``python -m gen``).

Sub-commands live in :mod:`gen.commands` (one module each). Errors that name
a bad field (:class:`gen.errors.FettaError`) print one line and exit with 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any, Sequence

from .errors import FettaError

#: sub-command -> module in gen.commands (in the order `fetta --help` lists them)
COMMANDS = ("verilog", "golden", "search", "run", "model", "synth", "sweep")


def add_config_arguments(p: argparse.ArgumentParser) -> None:
    """``--config FILE`` and ``--set key=value`` (repeatable), feeding :func:`gen.config.load_config`."""
    p.add_argument("--config", metavar="FILE", help="accelerator configuration (TOML); default: built-in defaults")
    p.add_argument("--set", dest="overrides", metavar="KEY=VALUE", action="append", default=[],
                   help="override one configuration field (repeatable)")


def add_json_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout (no progress output)")


def config_from_args(args: argparse.Namespace):
    from .config import load_config

    return load_config(args.config, args.overrides)


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=_json_default)
    sys.stdout.write("\n")


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _load(name: str):
    return importlib.import_module(f"gen.commands.{name}")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="fetta", description="FETTA accelerator generator and tool flow")
    parser.add_argument("--version", action="version", version=f"fetta {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = _load(name)
        except ModuleNotFoundError as exc:
            if exc.name != f"gen.commands.{name}":
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
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
