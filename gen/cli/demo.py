"""``fetta demo`` (``make demo``): elaborate the accelerator and run a layer on its RTL (:mod:`gen.toolflow.demo`)."""

from __future__ import annotations

import argparse

from gen.design.config import load_config
from gen.errors import ConfigError, read_text_file
from gen.toolflow.demo import run_demo
from gen.workload.spec import load_spec

HELP = "the main job: elaborate the default accelerator, check the golden model, run a layer on the RTL"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sim", default="verilator", choices=("icarus", "verilator"))
    p.add_argument("--config", default="configs/default.toml", help="configuration of the simulated design")
    p.add_argument("--spec", default="examples/atis_tt.json", help="layer to run on the RTL")
    p.add_argument("--phase", default="train", choices=("fp", "bp", "wg", "train"))


def main(args: argparse.Namespace) -> int:
    # the demo elaborates for a minute before it reads these: check them first
    read_text_file(args.config, field="--config", error=ConfigError)
    load_config(args.config)
    load_spec(args.spec)
    return run_demo(args.sim, args.config, args.spec, args.phase)
