"""``fetta model``: latency / traffic / energy of a layer (INTERFACES sections 4 and 5).

Every architecture is the compiled program (:func:`gen.compiler.estimate.model_compiled`) of its
capability set (:mod:`gen.compiler.capabilities`: ``fetta``, the baselines ``sigma``, ``treta``,
``tpu``, ``tpu-offchip`` and the ablations of FETTA), lowered to runs that move their own data by
DMA instructions (:mod:`gen.compiler.dma`) and timed by the controller's own count, which the
emulator and the RTL reproduce cycle for cycle - the same cycles ``fetta run`` reports for
``fetta``. ``--dram rule`` gives the compiler's faster estimate instead: the program's static
instruction timing plus the DRAM transfers by the rule of :mod:`gen.design.timing` (for a dense
layer the cycles of ``fetta run --dram rule``'s GEMM tiler, which runs through the host port and is
timed that way).
``--analytical`` (fetta only) gives the per-step estimate (:func:`gen.search.model_phase`) the
search's stage 2 ranks paths with. The JSON says which in ``timing`` (``compiled`` /
``analytical``) and, when compiled, how DRAM was timed in ``dram``; a fetta phase that does not compile
falls back to the analytical estimate with a warning and ``compile_error``; another architecture's
is an error (exit 2).
"""

from __future__ import annotations

import argparse

import sys

from gen.cli.common import add_config_arguments, add_json_argument, config_from_args, positive_int, print_json
from gen.compiler import CompileError
from gen.compiler.estimate import model_compiled
from gen.compiler.capabilities import ABLATIONS, ARCHS, PATHS
from gen.errors import UsageError
from gen.search import model_phase, search
from gen.workload.spec import load_spec

HELP = "cycles, DRAM/SRAM traffic, energy and EDP of a layer phase on an architecture (fetta: the compiled program)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", required=True, metavar="S.json", help="layer spec (INTERFACES section 1)")
    p.add_argument("--phase", required=True, choices=("fp", "bp", "wg", "train"), help="training phase")
    p.add_argument("--arch", default="fetta", choices=(*ARCHS, *ABLATIONS),
                   help="architecture, or FETTA without one capability (default fetta; docs/comparison.md)")
    p.add_argument("--path", choices=PATHS,
                   help="contraction order: the CSSE's (optimal) or another work's (btt, ette, left, right, tetrix); "
                        "default: the architecture's (optimal)")
    p.add_argument("--metric", default="flops", choices=("flops", "latency", "energy", "edp"),
                   help="how the contraction paths are chosen (CSSE; default: the MAC optimum)")
    p.add_argument("--top-k", type=positive_int, default=8, metavar="K", help="stage-1 candidates for --metric")
    p.add_argument("--steps", action="store_true", help="include the per-step mappings in the JSON")
    p.add_argument("--dram", choices=("rule", "dma"),
                   help="compiled timing: dma (default): the program lowered to runs that "
                        "move their own data by DMA instructions, chosen and timed by the controller's own count "
                        "(fetta run's cycles; docs/compiler.md \"DMA lowering\"); rule: the compiler's DRAM rule "
                        "(for dense, fetta run --dram rule's GEMM tiler)")
    p.add_argument("--analytical", action="store_true",
                   help="fetta: the per-step analytical estimate (the search's stage 2) instead of the compiled program")
    add_config_arguments(p)
    add_json_argument(p)


def main(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    config = config_from_args(args)
    if args.analytical and args.dram is not None:
        raise UsageError("--dram applies to the compiled program, not the analytical estimate", field="--dram")
    if args.analytical and args.arch != "fetta":
        raise UsageError("--analytical is the search's per-step estimate of fetta; every architecture is timed "
                         "by the compiled program", field="--analytical")
    if args.path is not None and args.metric != "flops":
        raise UsageError("--path fixes the contraction order; --metric searches for one", field="--path")
    paths = None
    if args.metric != "flops":
        found = search(spec, args.phase, metric=args.metric, top_k=args.top_k, config=config)
        paths = {e["label"]: e["path"] for e in found["networks"]}
    res, timing, error = None, "analytical", None
    # as fetta run times the layer: by its DMA jobs (``--dram rule``: the rule, the dense GEMM tiler's count)
    dram = args.dram or "dma"
    if not args.analytical:
        try:
            res, timing = model_compiled(spec, args.phase, config, paths, arch=args.arch, path=args.path,
                                         dram=dram), "compiled"
        except CompileError as exc:
            if args.arch != "fetta" or args.path not in (None, "optimal"):
                raise
            error = str(exc)
            print(f"fetta: warning: {spec.name} {args.phase} does not compile ({exc}); "
                  "using the analytical model", file=sys.stderr)
    if res is None:
        res = model_phase(spec, args.phase, config, paths)
    out = {"spec": spec.name, "format": spec.format, "phase": args.phase, "arch": args.arch, "timing": timing,
           **res.summary(), **({"compile_error": error} if error else {})}
    if timing == "compiled":
        out["dram"] = dram
    if res.program is not None:
        prog = res.program
        out.update(relayouts=prog.relayouts, onchip_relayouts=prog.onchip_relayouts, transposes=prog.transposes,
                   dataflows=prog.dataflows(), pieces=prog.pieces)
    if args.steps:
        out["steps"] = res.steps
    if args.json:
        print_json(out)
        return 0
    print(f"{spec.name} ({spec.format}) {args.phase} on {args.arch} ({timing}): {out['cycles']} cycles "
          f"({out['latency_us']} us), {out['macs']} MACs, utilization {out['utilization']}, "
          f"DRAM {out['dram_bytes']} B, SRAM {out['sram_accesses']} accesses, "
          f"{out['energy_pj'] / 1e6:.3f} uJ, EDP {out['edp']:.4g} pJ*us")
    return 0
