"""Argument helpers shared by the ``fetta`` sub-commands, and the checks every option passes first.

Every check here runs before anything is allocated or written and raises one
:class:`gen.errors.FettaError` naming the option (one line, exit code 2; ``docs/errors.md``):
numbers through the ``argparse`` types (:func:`nonneg_int`, :func:`positive_int`,
:func:`positive_float`), output paths through :func:`output_file` / :func:`output_dir` (the folder
must exist, as with ``cp``), configurations through :func:`config_from_args` (file readable and
UTF-8, fields within :data:`CONFIG_LIMITS`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from gen.design.config import load_config
from gen.errors import ConfigError, UsageError, read_text_file
from gen.workload.spec import DEFAULT_MAX_ELEMENTS

#: upper bounds of the configuration fields that size memories and arrays (the generator, the
#: emulator and the model allocate in proportion): far above any design point, low enough that a
#: typo (``--set unified_kb=100000000``) is an error instead of a 381 GiB allocation
CONFIG_LIMITS = {"unified_kb": 1 << 16, "accum_kb": 1 << 16, "imem_depth": 1 << 16, "vector_lanes": 1 << 12,
                 "ce_rows": 64, "ce_cols": 64, "lanes": 64, "num_ces": 1024, "net_ports": 1024, "banks": 1024}


# --- argparse types ------------------------------------------------------------------
def _int(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def nonneg_int(text: str) -> int:
    """``argparse`` type: an integer >= 0 (seeds)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """``argparse`` type: an integer >= 1 (counts, limits)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """``argparse`` type: a finite number > 0 (time limits)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


# --- shared arguments ------------------------------------------------------------------
def add_config_arguments(p: argparse.ArgumentParser) -> None:
    """``--config FILE`` and ``--set key=value`` (repeatable), feeding :func:`gen.design.config.load_config`."""
    p.add_argument("--config", metavar="FILE", help="accelerator configuration (TOML); default: built-in defaults")
    p.add_argument("--set", dest="overrides", metavar="KEY=VALUE", action="append", default=[],
                   help="override one configuration field (repeatable)")


def add_json_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout (no progress output)")


def add_seed_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=nonneg_int, default=0, help="seed of the random inputs (>= 0, default 0)")


def add_max_elements_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-elements", type=positive_int, default=DEFAULT_MAX_ELEMENTS, metavar="N",
                   help=f"refuse layers whose tensors (inputs, results, golden-model intermediates) hold more "
                        f"than N elements (default {DEFAULT_MAX_ELEMENTS} = 2**27, 1 GiB of float64)")


def config_from_args(args: argparse.Namespace):
    """The configuration of ``--config`` / ``--set``: the file must be readable UTF-8 TOML, and the fields
    that size memories stay within :data:`CONFIG_LIMITS` (one :class:`ConfigError` naming the field)."""
    if args.config is not None:
        read_text_file(args.config, field="--config", error=ConfigError)
    try:
        config = load_config(args.config, args.overrides)
    except RecursionError:
        raise ConfigError("not a configuration: TOML nested too deeply", field="--config") from None
    check_config_limits(config)
    return config


def check_config_limits(config) -> None:
    for name, limit in CONFIG_LIMITS.items():
        value = getattr(config, name)
        if value > limit:
            raise ConfigError(f"must be at most {limit}, got {value}", field=name)
    for name in ("freq_mhz", "dram_gbps"):
        if not math.isfinite(getattr(config, name)):
            raise ConfigError(f"must be a finite number, got {getattr(config, name)!r}", field=name)


# --- files -------------------------------------------------------------------------
def output_file(value: str | None, option: str = "--out") -> Path | None:
    """Check an output file path before any work: not empty, not a folder, in an existing writable folder
    (a missing folder is an error, not created: a mistyped path must not go unnoticed). ``None`` passes."""
    if value is None:
        return None
    if not value.strip():
        raise UsageError("empty file name", field=option)
    path = Path(value)
    if value.endswith(("/", os.sep)):
        raise UsageError(f"{value} names a folder; give a file name", field=option)
    try:
        if path.is_dir():
            raise UsageError(f"{value} is a folder; give a file name", field=option)
        if path.exists() and not path.is_file():
            raise UsageError(f"{value} exists and is not a regular file", field=option)
        _check_folder(path.parent, option)
    except PermissionError:
        raise UsageError(f"permission denied: {value}", field=option) from None
    return path


def output_dir(value: str, option: str = "--out", create_parents: bool = False) -> Path:
    """Check an output folder: it is created if missing, but its parent must exist (unless
    ``create_parents``, for a built-in default such as ``build/sweep``); an existing file is an error."""
    if not value.strip():
        raise UsageError("empty folder name", field=option)
    path = Path(value)
    try:
        if path.exists():
            if not path.is_dir():
                raise UsageError(f"{value} exists and is not a folder", field=option)
            _check_folder(path, option)
        elif not create_parents:
            _check_folder(path.parent, option)
    except PermissionError:
        raise UsageError(f"permission denied: {value}", field=option) from None
    return path


def _check_folder(folder: Path, option: str) -> None:
    if not folder.exists():
        raise UsageError(f"folder {folder} does not exist (fetta creates no folders for a file: "
                         f"create it first)", field=option)
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder", field=option)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"folder {folder} is not writable", field=option)


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write a text file through a temporary file and a rename (nothing half-written on error)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=path.suffix, dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # as open() would create it, not mkstemp's 0600
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# --- output ---------------------------------------------------------------------------
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


__all__ = ["CONFIG_LIMITS", "nonneg_int", "positive_int", "positive_float", "add_config_arguments",
           "add_json_argument", "add_seed_argument", "add_max_elements_argument", "config_from_args",
           "check_config_limits", "output_file", "output_dir", "write_text_atomic", "print_json"]
