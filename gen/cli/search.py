"""``fetta search``: contraction sequence search (CSSE, INTERFACES section 4)."""

from __future__ import annotations

import argparse

from gen.cli.common import add_config_arguments, add_json_argument, config_from_args, positive_int, print_json
from gen.progress import interactive
from gen.search import search, training_aware
from gen.workload.spec import load_spec

HELP = "find the optimal pairwise contraction order of a layer's networks (stage 1 MACs, stage 2 model)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", required=True, metavar="S.json", help="layer spec (INTERFACES section 1)")
    p.add_argument("--phase", required=True, choices=("fp", "bp", "wg", "train"), help="training phase")
    p.add_argument("--metric", default="flops", choices=("flops", "latency", "energy", "edp"),
                   help="flops: the MAC optimum (stage 1); otherwise stage 2 ranks the top-K by the model")
    p.add_argument("--top-k", type=positive_int, default=8, metavar="K",
                   help="stage-1 candidates per network (default 8)")
    p.add_argument("--training-aware", action="store_true",
                   help="also choose FP/BP orders jointly with WG (reuse of saved intermediates)")
    add_config_arguments(p)
    add_json_argument(p)


def main(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    config = config_from_args(args)
    show = interactive(args.json)
    out = search(spec, args.phase, metric=args.metric, top_k=args.top_k, config=config, show_progress=show)
    if args.training_aware:
        out["training_aware"] = training_aware(spec, top_k=args.top_k, show_progress=show)
    if args.json:
        print_json(out)
        return 0
    print(f"{spec.name} ({spec.format}) {args.phase}, metric {args.metric}: {out['macs']} MACs "
          f"in {out['seconds']:.3f} s")
    for e in out["networks"]:
        print(f"  {e['label']}: {e['macs']} MACs (optimum {e['optimal_macs']}), path {e['path']}")
    print("  baselines:")
    for name, b in out["baselines"].items():
        print(f"    {name:14s} {b['macs']:>16d} MACs  ({b['reduction_vs_dense']}x vs dense)")
    if "training_aware" in out:
        t = out["training_aware"]
        print(f"  training-aware: {t['joint']['macs']} MACs/step vs per-phase {t['per_phase']['macs']} "
              f"({t['gain_vs_per_phase']}x), saved intermediates {t['joint']['saved_bytes']} B")
    return 0
