"""``fetta lint`` (``make lint``): ``verilator --lint-only -Wall`` on the emitted blocks (:mod:`gen.toolflow.lint`)."""

from __future__ import annotations

import argparse

import hdl
from gen.cli.common import add_config_arguments, config_from_args
from gen.toolflow.lint import WAIVERS, lint_report

HELP = "Verilator -Wall lint of every emitted block (exit 1 on any unwaived warning)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_config_arguments(p)
    p.add_argument("--top", action="append", metavar="BLOCK", help="block to lint (repeatable); default: all")
    p.add_argument("--waivers", action="store_true", help="print the waiver table and exit")


def main(args: argparse.Namespace) -> int:
    if args.waivers:
        for name, why in WAIVERS.items():
            print(f"{name:14s} {why}")
        return 0
    def show(lines):
        for line in lines:
            print(line, flush=True)

    _, failed = lint_report(args.top or sorted(hdl.TOPS), config_from_args(args), progress=show)
    return 1 if failed else 0
