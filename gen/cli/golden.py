"""``fetta golden``: reference tensors of a layer for all phases (INTERFACES section 2)."""

from __future__ import annotations

import argparse
import time

from gen.cli.common import add_json_argument, add_max_elements_argument, add_seed_argument, output_file, print_json
from gen.workload.spec import load_spec
from sim.golden import check_size, golden, write_npz

HELP = "write inputs (bfloat16-exact) and float64 reference results of FP, BP and WG to an npz"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", required=True, metavar="S.json", help="layer spec (INTERFACES section 1)")
    add_seed_argument(p)
    p.add_argument("--out", required=True, metavar="F.npz", help="output file (its folder must exist)")
    add_max_elements_argument(p)
    add_json_argument(p)


def main(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    out = output_file(args.out)
    check_size(spec, args.max_elements)
    t0 = time.perf_counter()
    arrays = golden(spec, args.seed)
    write_npz(out, arrays, spec)
    seconds = time.perf_counter() - t0
    summary = {"spec": spec.name, "format": spec.format, "seed": args.seed, "out": args.out,
               "keys": sorted(arrays), "cores": spec.num_cores, "params": spec.params(),
               "seconds": round(seconds, 4)}
    if args.json:
        print_json(summary)
    else:
        print(f"{spec.name} ({spec.format}, {spec.num_cores} cores, {spec.params()} parameters): "
              f"wrote {len(arrays)} arrays to {args.out} in {seconds:.2f} s")
    return 0
