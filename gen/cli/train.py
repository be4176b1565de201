"""``fetta train``: whole SGD steps of a tensorized transformer (seed 003) on the simulated accelerator.

Every contraction of the step (the ``ttm`` embedding, the ``tt`` layers' FP / BP / WG, the attention
products, the classifier) runs on the accelerator as DMA jobs (``--dram dma``, the default: the
controller's own cycle count; ``--dram rule``: the host port and the compiler's DRAM rule); softmax,
layer norm, GELU, the sums and the SGD update run on its vector unit; only the loss runs on the host
(:mod:`gen.toolflow.train` says how each is counted). See ``docs/training.md``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gen.cli.common import (add_config_arguments, add_json_argument, add_seed_argument, config_from_args, output_file,
                            positive_int, print_json)
from gen.errors import ConfigError
from gen.progress import progress
from gen.toolflow.run import DRAM_MODES, SIMS
from gen.toolflow.train import run_training
from gen.workload.transformer import load_atis, load_model

HELP = "whole training steps of a tensorized transformer (seed 003) on the simulated accelerator"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="M.json",
                   help="model file (examples/atis_transformer.json, examples/atis_transformer_tiny.json)")
    p.add_argument("--steps", type=positive_int, default=1, metavar="N", help="SGD steps, batch 1 (default 1)")
    p.add_argument("--data", metavar="DIR",
                   help="train on ATIS files in the JointBERT layout (DIR/seq.in and DIR/label, or DIR/train/...) "
                        "instead of the seeded synthetic set (docs/training.md)")
    p.add_argument("--out", metavar="F.npz",
                   help="write the trained parameters (FP32 master weights; keys emb.core_k, pos, enc{e}.{layer}.core_k, "
                        "cls; folder must exist)")
    add_seed_argument(p)
    p.add_argument("--sim", default="emulator", choices=SIMS,
                   help="execution engine (default emulator; icarus / verilator replay every run on the RTL)")
    p.add_argument("--dram", default="dma", choices=DRAM_MODES,
                   help="how the contractions move their data: dma (default; DMA instructions, the controller's own "
                        "cycle count) or rule (the host port, timed by the compiler's DRAM rule); the vector unit's "
                        "runs use the host port either way")
    add_config_arguments(p)
    add_json_argument(p)


def main(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if config.datatype != "bf16":
        raise ConfigError("fetta train runs in bf16; int16 is for dataflow bring-up", field="datatype")
    model = load_model(args.model)
    output_file(args.out)
    data, about = None, {"data": "synthetic"}
    if args.data is not None:
        data, summary = load_atis(model, args.data)
        about = {"data": args.data, **summary, "intents": len(summary["intents"])}
    t0 = time.perf_counter()
    with progress(args.steps, f"{model.name} on {args.sim}", enabled=not args.json) as bar:
        r = run_training(model, config, args.steps, seed=args.seed, sim=args.sim, advance=bar, data=data,
                         dram=args.dram)
    seconds = time.perf_counter() - t0
    if args.out:
        np.savez(args.out, **r.params)
    result = {"model": args.model, "name": model.name, "sim": args.sim, "dram": args.dram, "seed": args.seed, **about,
              **r.summary(),
              "seconds": round(seconds, 3)}
    if args.json:
        print_json(result)
    else:
        losses = result["losses"]
        print(f"{model.name} on {args.sim}: {args.steps} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
              f"{result['cycles']} cycles ({result['cycles'] // args.steps} per step), utilization "
              f"{result['utilization']:.1%}, {result['dram_bytes']} DRAM bytes ({seconds:.1f} s)")
    return 0
