"""Argument helpers shared by the ``fetta`` sub-commands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from gen.design.config import load_config


def add_config_arguments(p: argparse.ArgumentParser) -> None:
    """``--config FILE`` and ``--set key=value`` (repeatable), feeding :func:`gen.design.config.load_config`."""
    p.add_argument("--config", metavar="FILE", help="accelerator configuration (TOML); default: built-in defaults")
    p.add_argument("--set", dest="overrides", metavar="KEY=VALUE", action="append", default=[],
                   help="override one configuration field (repeatable)")


def add_json_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout (no progress output)")


def config_from_args(args: argparse.Namespace):
    return load_config(args.config, args.overrides)


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=_json_default)
    sys.stdout.write("\n")


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


__all__ = ["add_config_arguments", "add_json_argument", "config_from_args", "print_json"]
