"""``fetta model``: analytical latency / traffic / energy of a layer (INTERFACES section 4)."""

from __future__ import annotations

import argparse

from gen.cli.common import add_config_arguments, add_json_argument, config_from_args, positive_int, print_json
from gen.model.arch import ARCHS
from gen.search import model_phase
from gen.search import search
from gen.workload.spec import load_spec

HELP = "analytical cycles, DRAM/SRAM traffic, energy and EDP of a layer phase on an architecture"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", required=True, metavar="S.json", help="layer spec (INTERFACES section 1)")
    p.add_argument("--phase", required=True, choices=("fp", "bp", "wg", "train"), help="training phase")
    p.add_argument("--arch", default="fetta", choices=ARCHS, help="architecture (default fetta)")
    p.add_argument("--metric", default="flops", choices=("flops", "latency", "energy", "edp"),
                   help="how the contraction paths are chosen (CSSE; default: the MAC optimum)")
    p.add_argument("--top-k", type=positive_int, default=8, metavar="K", help="stage-1 candidates for --metric")
    p.add_argument("--steps", action="store_true", help="include the per-step mappings in the JSON")
    add_config_arguments(p)
    add_json_argument(p)


def main(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    config = config_from_args(args)
    paths = None
    if args.metric != "flops":
        found = search(spec, args.phase, metric=args.metric, top_k=args.top_k, config=config, arch=args.arch)
        paths = {e["label"]: e["path"] for e in found["networks"]}
    res = model_phase(spec, args.phase, config, args.arch, paths)
    out = {"spec": spec.name, "format": spec.format, "phase": args.phase, "arch": args.arch, **res.summary()}
    if args.steps:
        out["steps"] = res.steps
    if args.json:
        print_json(out)
        return 0
    print(f"{spec.name} ({spec.format}) {args.phase} on {args.arch}: {out['cycles']} cycles "
          f"({out['latency_us']} us), {out['macs']} MACs, utilization {out['utilization']}, "
          f"DRAM {out['dram_bytes']} B, SRAM {out['sram_accesses']} accesses, "
          f"{out['energy_pj'] / 1e6:.3f} uJ, EDP {out['edp']:.4g} pJ*us")
    return 0
