"""``fetta run``: compile a layer into instruction passes and execute it on the simulated accelerator.

Every format runs, compiled by :mod:`gen.compiler` into runs that move their own data by DMA instructions
(``--dram dma``, the default; ``dense`` specs as a two-tensor network). ``--dram rule`` runs the same program
through the host port, DRAM time added by the rule of :mod:`gen.design.timing`; for a ``dense`` spec it runs
the dedicated GEMM tiler instead (each phase one GEMM (``fp``: ``Y = X @ W``; ``bp``: ``dX = dY @ W.T``; ``wg``:
``dcore_0 = X.T @ dY``) tiled over all CEs by :mod:`gen.compiler.gemm`, its own passes through the host port,
timed by the same rule). ``--sim emulator`` runs the instruction-level emulator;
``--sim icarus|verilator`` runs the emitted Verilog of the whole accelerator
under cocotb, the host played in Verilog (``sim/host_player.py``). Compiled layers are pairwise
contractions along the CSSE's MAC-optimal paths (``docs/compiler.md``); on ``icarus``/``verilator``
the compiled runs are executed on
the emulator and on the RTL, and every row read back and every run's cycle count must agree
bit for bit (else exit 1).

``--inputs F.npz`` takes the inputs (``X``, ``dY``, ``core_k``; INTERFACES section 2 keys) from a file
(:func:`sim.golden.read_inputs` checks keys, shapes, dtypes and bfloat16-exact values); keys it lacks are
drawn from ``--seed`` exactly as without it, so a golden npz of seed S read back gives the run of seed S.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gen.cli.common import (add_config_arguments, add_json_argument, add_max_elements_argument, add_seed_argument,
                            config_from_args, output_file, print_json, positive_int)
from gen.compiler.capabilities import PATHS, named_paths
from gen.compiler.compiler import RELAYOUT_POLICIES
from gen.errors import ConfigError, UsageError
from gen.toolflow.run import DRAM_MODES, PHASES, SIMS, max_rel_err, phases_of, run_compiled_layer, run_dense, trace_files
from gen.workload.spec import load_spec
from sim.golden import check_size, compute, random_inputs, read_inputs, write_npz

HELP = "compile and execute a layer (any format, fp/bp/wg/train) on the simulated accelerator"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", required=True, metavar="S.json", help="layer spec (INTERFACES section 1)")
    p.add_argument("--phase", default="fp", choices=(*PHASES, "train"), help="training phase (default fp)")
    add_seed_argument(p)
    p.add_argument("--inputs", metavar="F.npz",
                   help="take X, dY, core_k from this npz (INTERFACES section 2 keys, float32 bfloat16-exact "
                        "values); keys it lacks are drawn from --seed")
    p.add_argument("--sim", default="emulator", choices=SIMS, help="execution engine (default emulator)")
    p.add_argument("--out", metavar="F.npz", help="write inputs and results (INTERFACES section 2; folder must exist)")
    p.add_argument("--trace", metavar="F.fst",
                   help="--sim icarus|verilator: write an FST waveform of every signal of the design over the run "
                        "(GTKWave, Surfer; a dense train run with --dram rule writes F.fp.fst, F.bp.fst, "
                        "F.wg.fst); the traced model is built and cached apart from the plain one, and runs slower")
    p.add_argument("--pieces", type=positive_int, metavar="P",
                   help="compiled layers: run the batch in P pieces (1: all at once; default: the compiler "
                        "tries several and keeps the fewest cycles end to end; docs/compiler.md)")
    p.add_argument("--relayout", default="auto", choices=RELAYOUT_POLICIES,
                   help="compiled layers: re-lay out tensors on chip (identity GEMM), through the host, or "
                        "whichever is estimated faster (default auto)")
    p.add_argument("--dram", choices=DRAM_MODES,
                   help="dma (default): the compiler emits DMA instructions, the runs move their "
                        "own data and the compiler chooses its variants by that count: the cycles are the "
                        "controller's own, as the RTL runs them (docs/compiler.md \"DMA lowering\"); rule: the host "
                        "writes each run's operands and reads its results, DRAM time added by the rule of "
                        "gen/design/timing.py (the compiler's fast estimate; docs/compiler.md compares the two). "
                        "dense layers are compiled as a two-tensor network and run as DMA jobs like the others; "
                        "with rule they run the dedicated GEMM tiler (its own passes through the host port, timed by "
                        "the rule)")
    p.add_argument("--path", default="optimal", choices=PATHS,
                   help="compiled layers: contraction order, the CSSE's (default optimal) or a fixed one "
                        "(btt, ette, left, right, tetrix: gen/search/baselines.py; a fixed order skips the training-aware "
                        "WG re-solve)")
    add_max_elements_argument(p)
    add_config_arguments(p)
    add_json_argument(p)


def main(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    config = config_from_args(args)
    if config.datatype != "bf16":
        raise ConfigError("fetta run drives bf16 layers; int16 is for dataflow bring-up", field="datatype")
    output_file(args.out)
    trace = check_trace(args)
    phases = phases_of(args.phase)
    check_size(spec, args.max_elements, phases)
    given = read_inputs(args.inputs, spec) if args.inputs is not None else {}
    inputs = {**random_inputs(spec, args.seed), **given}
    source = {"file": args.inputs, "keys": sorted(given), "seed": args.seed}
    if spec.format != "dense" or args.dram != "rule":
        return run_compiled(args, spec, config, inputs, source, trace)
    for opt, given_ in (("--pieces", args.pieces is not None), ("--relayout", args.relayout != "auto"),
                        ("--path", args.path != "optimal")):
        if given_:
            raise UsageError("--pieces, --relayout and --path apply to compiled layers; a dense layer with --dram "
                             "rule runs the GEMM tiler, which has its own passes", field=opt)
    golden = compute(spec, inputs, phases=phases)
    t0 = time.perf_counter()
    r = run_dense(config, inputs, phases, args.sim, show_progress=not args.json, trace=trace)
    seconds = time.perf_counter() - t0
    if args.out:
        write_npz(args.out, {**inputs, **r["results"]}, spec)
    result = {"spec": spec.name, "phase": args.phase, "sim": args.sim, "inputs": source,
              "cycles": r["cycles"], "macs": r["macs"],
              "utilization": r["macs"] / (r["cycles"] * config.macs), "max_rel_err": max_rel_err(r["results"], golden),
              "compute_cycles": r["compute_cycles"], "dram_stall_cycles": r["dram_stall_cycles"],
              "dram_bytes": r["dram_bytes"], "relayouts": 0, "dataflows": r["dataflows"], "transposes": 0,
              "tcu_macs": r["tcu_macs"], "passes": r["passes"], "grids": r["grids"],
              "seconds": round(seconds, 3)}
    if trace is not None:
        result["traces"] = [str(f) for f in trace_files(trace, phases).values()]
    if args.json:
        print_json(result)
    else:
        print(f"{spec.name} {args.phase} on {args.sim}: {r['cycles']} cycles, {r['macs']} MACs, utilization "
              f"{result['utilization']:.1%}, max rel. error {result['max_rel_err']:.2e} ({seconds:.1f} s)")
    return 0


def check_trace(args):
    """``--trace``: a writable ``.fst`` file and an RTL simulator, checked before any work; ``None`` when not given."""
    if args.trace is None:
        return None
    path = output_file(args.trace, "--trace")
    if path.suffix != ".fst":
        raise UsageError(f"{args.trace}: the waveform is written as FST; name it F.fst", field="--trace")
    if args.sim == "emulator":
        raise UsageError("a waveform needs an RTL simulator: add --sim icarus or --sim verilator", field="--trace")
    return path


def run_compiled(args, spec, config, inputs, source: dict, trace=None) -> int:
    """Tensorized formats: :func:`run_compiled_layer`, JSON / npz output; ``source`` says where the inputs
    came from (``file`` and its ``keys``, ``seed`` for the rest); ``trace``: the checked ``--trace`` file."""
    t0 = time.perf_counter()
    prog, ex, rtl = run_compiled_layer(spec, args.phase, config, inputs, args.sim, show_progress=not args.json,
                                       trace=trace, dram=args.dram or "dma",
                                       pieces=args.pieces, relayout=args.relayout,
                                       paths=named_paths(spec, args.phase, args.path),
                                       reuse=args.path == "optimal")
    golden = compute(spec, inputs, phases=phases_of(args.phase))
    seconds = time.perf_counter() - t0
    if args.out:
        out = dict(inputs)
        out.update({k: v.astype(np.float32) for k, v in ex.results.items()})
        write_npz(args.out, out, spec)
    result = {"spec": spec.name, "format": spec.format, "phase": args.phase, "sim": args.sim,
              "inputs": source, "cycles": ex.cycles, "macs": prog.macs,
              "utilization": prog.macs / (ex.cycles * config.macs),
              "max_rel_err": max_rel_err(ex.results, golden), "tcu_macs": ex.tcu_macs, "runs": len(prog.runs),
              "instructions": sum(len(r.program) for r in prog.runs),
              "relayouts": prog.relayouts, "relayout_bytes": prog.relayout_bytes,
              "relayout_causes": prog.relayout_causes,
              "onchip_relayouts": prog.onchip_relayouts, "pieces": prog.pieces,
              "compute_cycles": ex.compute_cycles, "dram_stall_cycles": ex.dram_stall_cycles,
              "onchip_bytes": prog.onchip_bytes,
              "dram_bytes": ex.timeline.dram_bytes, "dataflows": prog.dataflows(), "transposes": prog.transposes,
              "paths": prog.paths, "reused": prog.reused,
              "seconds": round(seconds, 3)}
    if rtl is not None:
        result["rtl_equal"] = rtl
    result["dram"] = args.dram or "dma"
    if result["dram"] == "dma":
        result.update(jobs=ex.runs, rule_cycles=prog.timeline(config).cycles)
    if trace is not None:
        result["traces"] = [str(trace)]
    if args.json:
        print_json(result)
    else:
        print(f"{spec.name} {args.phase} on {args.sim}: {ex.cycles} cycles, {prog.macs} MACs, utilization "
              f"{result['utilization']:.1%}, max rel. error {result['max_rel_err']:.2e}, "
              f"{prog.relayouts} host + {prog.onchip_relayouts} on-chip re-layouts, {prog.pieces} batch piece(s) "
              f"({seconds:.1f} s)")
    return 0

