"""``python -m gen.lint`` (``make lint``): ``verilator --lint-only -Wall`` on the emitted blocks.

Every block of :data:`hdl.TOPS` (or those named with ``--top``, repeatable) is
elaborated for the configuration (``--config`` / ``--set``), written to
``build/lint/fetta_<name>.v`` and linted with the pinned Verilator 5.048
(:func:`sim.toolchain.sim_env`). Warnings listed in :data:`WAIVERS` are
switched off with ``-Wno-<name>``; any other warning is printed and the exit
status is 1. Add a waiver only with the reason it is not a defect.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

#: Verilator warning -> why it is not a defect in Amaranth-emitted Verilog.
WAIVERS: dict[str, str] = {
    # Amaranth emits every register as `reg x = <reset>;` and assigns it in
    # an always block; the initial value is the reset value, on purpose.
    "PROCASSINIT": "Amaranth declares registers with their reset value as initialiser",
    # Amaranth sizes every intermediate expression exactly and relies on
    # Verilog's implicit zero-extension / truncation on assignment.
    "WIDTHEXPAND": "Amaranth widens operands implicitly by design",
    "WIDTHTRUNC": "Amaranth truncates on assignment by design (wrapping counters, slices)",
    # Amaranth flattens the hierarchy and keeps each submodule port as a named
    # alias; in an array of identical PEs the edge ones are unconnected by
    # construction (b_out of the bottom row, psum_valid of inner rows,
    # drain_valid of columns > 0), and intermediate expressions keep bits
    # that a later slice drops (e.g. the carry bit of the exponent adders).
    "UNUSEDSIGNAL": "flattened port aliases of uniform PEs and unused bits of sized intermediates",
    # All modules of a design go into one file; submodules that Amaranth does
    # not flatten are named `<top>.<path>`, which can never match a file name.
    "DECLFILENAME": "Amaranth emits every module of a design into one file",
}

ROOT = Path(__file__).resolve().parent.parent


def lint_verilog(text: str, module: str, *, workdir: Path | None = None,
                 waivers: dict[str, str] | None = None) -> list[str]:
    """Lint Verilog ``text`` (top ``module``); return the unwaived warning lines."""
    from sim.toolchain import require, sim_env

    require("verilator")
    workdir = workdir or ROOT / "build" / "lint"
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / f"{module}.v"
    src.write_text(text)
    waivers = WAIVERS if waivers is None else waivers
    cmd = ["verilator", "--lint-only", "-Wall", "--top-module", module,
           *[f"-Wno-{w}" for w in waivers], str(src)]
    proc = subprocess.run(cmd, env=sim_env(), capture_output=True, text=True)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("%Warning") or ln.startswith("%Error")]
    if proc.returncode != 0 and not lines:
        lines = [f"%Error: verilator exited with {proc.returncode}: {proc.stderr.strip()[-500:]}"]
    return lines


def lint_top(name: str, config) -> list[str]:
    """Unwaived lint warnings of block ``name`` of ``hdl.TOPS`` for ``config``."""
    import hdl

    return lint_verilog(hdl.to_verilog(name, config), hdl.module_name(name))


def main(argv: list[str] | None = None) -> int:
    import hdl

    from .cli import add_config_arguments, config_from_args
    from .errors import FettaError

    p = argparse.ArgumentParser(prog="python -m gen.lint", description=__doc__.splitlines()[0])
    add_config_arguments(p)
    p.add_argument("--top", action="append", metavar="BLOCK", help="block to lint (repeatable); default: all")
    p.add_argument("--waivers", action="store_true", help="print the waiver table and exit")
    args = p.parse_args(argv)
    if args.waivers:
        for name, why in WAIVERS.items():
            print(f"{name:14s} {why}")
        return 0
    try:
        config = config_from_args(args)
        tops = args.top or sorted(hdl.TOPS)
        failed = 0
        for name in tops:
            warnings = lint_top(name, config)
            kinds = sorted(set(re.findall(r"%(?:Warning|Error)-?(\w*)", "\n".join(warnings))))
            status = "clean" if not warnings else f"{len(warnings)} warnings ({', '.join(k for k in kinds if k)})"
            print(f"{name:12s} {status}")
            for line in warnings[:20]:
                print(f"    {line}")
            failed += bool(warnings)
    except FettaError as exc:
        print(f"gen.lint: error: {exc}", file=sys.stderr)
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
