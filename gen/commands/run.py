"""``fetta run``: compile a layer into instruction passes and execute it on the simulated accelerator.

Every format runs: ``dense`` specs keep the dedicated GEMM tiler (each phase one GEMM (``fp``: ``Y = X @ W``; ``bp``:
``dX = dY @ W.T``; ``wg``: ``dcore_0 = X.T @ dY``) tiled over all CEs by
:mod:`gen.gemm`. ``--sim emulator`` runs the instruction-level emulator;
``--sim icarus|verilator`` runs the emitted Verilog of the whole accelerator
under cocotb (``sim/benches/system_bench.py``). The other formats (``tt, tr, ttm, ht, bt,
tucker``) go through :mod:`gen.compiler` (pairwise contractions along the CSSE's MAC-optimal
paths, see ``docs/compiler.md``); on ``icarus``/``verilator`` the compiled runs are executed on
the emulator and on the RTL, and every row read back and every run's cycle count must agree
bit for bit (else exit 1).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ..cli import add_config_arguments, add_json_argument, config_from_args, print_json

HELP = "compile and execute a layer (any format, fp/bp/wg/train) on the simulated accelerator"

SIMS = ("emulator", "icarus", "verilator")
#: phase -> (result key, operands from the inputs)
PHASES = {
    "fp": ("Y", lambda a: (a["X"], a["core_0"])),
    "bp": ("dX", lambda a: (a["dY"], a["core_0"].T)),
    "wg": ("dcore_0", lambda a: (a["X"].T, a["dY"])),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", required=True, metavar="S.json", help="layer spec (INTERFACES section 1)")
    p.add_argument("--phase", default="fp", choices=(*PHASES, "train"), help="training phase (default fp)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--sim", default="emulator", choices=SIMS, help="execution engine (default emulator)")
    p.add_argument("--out", metavar="F.npz", help="write inputs and results (INTERFACES section 2)")
    add_config_arguments(p)
    add_json_argument(p)


def main(args: argparse.Namespace) -> int:
    from sim.golden import compute, random_inputs, write_npz

    from ..errors import SpecError
    from ..gemm import plan_gemm
    from ..progress import progress
    from ..spec import load_spec

    spec = load_spec(args.spec)
    config = config_from_args(args)
    if config.datatype != "bf16":
        from ..errors import ConfigError
        raise ConfigError("fetta run drives bf16 layers; int16 is for dataflow bring-up", field="datatype")
    inputs = random_inputs(spec, args.seed)
    if spec.format != "dense":
        return run_compiled(args, spec, config, inputs)
    phases = ["fp", "bp", "wg"] if args.phase == "train" else [args.phase]
    golden = compute(spec, inputs, phases=phases)
    out = dict(inputs)
    cycles = macs = tcu_macs = passes = 0
    grids = []
    errs = []
    t0 = time.perf_counter()
    for phase in phases:
        key, operands = PHASES[phase]
        A, B = operands(inputs)
        plan = plan_gemm(config, A, B)
        with progress(len(plan.passes), f"{phase} on {args.sim}", enabled=not args.json) as bar:
            Y, c, tm = execute(config, plan, args.sim, advance=bar)
        out[key] = Y.astype(np.float32)
        cycles += c
        macs += plan.macs
        tcu_macs += tm
        passes += len(plan.passes)
        grids.append(list(plan.grid))
        ref = golden[key]
        errs.append(float(np.max(np.abs(Y - ref)) / max(float(np.max(np.abs(ref))), np.finfo(np.float64).tiny)))
    seconds = time.perf_counter() - t0
    if args.out:
        write_npz(args.out, out, spec)
    result = {"spec": spec.name, "phase": args.phase, "sim": args.sim, "cycles": cycles, "macs": macs,
              "utilization": macs / (cycles * config.macs), "max_rel_err": max(errs),
              "tcu_macs": tcu_macs, "passes": passes, "grids": grids,
              "seconds": round(seconds, 3)}
    if args.json:
        print_json(result)
    else:
        print(f"{spec.name} {args.phase} on {args.sim}: {cycles} cycles, {macs} MACs, utilization "
              f"{result['utilization']:.1%}, max rel. error {result['max_rel_err']:.2e} ({seconds:.1f} s)")
    return 0


def run_compiled(args, spec, config, inputs) -> int:
    """Tensorized formats: :func:`gen.compiler.compile_layer` + emulator (+ RTL cross-check)."""
    from sim.golden import compute, write_npz

    from ..compiler import compile_layer, execute as run_program, rtl_check
    from ..progress import progress

    t0 = time.perf_counter()
    prog = compile_layer(spec, args.phase, config)
    with progress(len(prog.runs), f"{args.phase} on emulator", enabled=not args.json) as bar:
        ex = run_program(prog, inputs, config, progress=bar)
    rtl = None
    if args.sim != "emulator":
        rtl = rtl_check(ex, config, args.sim)
    phases = ["fp", "bp", "wg"] if args.phase == "train" else [args.phase]
    golden = compute(spec, inputs, phases=phases)
    errs = [float(np.max(np.abs(ex.results[k] - ref)) / max(float(np.max(np.abs(ref))), np.finfo(np.float64).tiny))
            for k, ref in golden.items()]
    seconds = time.perf_counter() - t0
    if args.out:
        out = dict(inputs)
        out.update({k: v.astype(np.float32) for k, v in ex.results.items()})
        write_npz(args.out, out, spec)
    result = {"spec": spec.name, "format": spec.format, "phase": args.phase, "sim": args.sim,
              "cycles": ex.cycles, "macs": prog.macs, "utilization": prog.macs / (ex.cycles * config.macs),
              "max_rel_err": max(errs), "tcu_macs": ex.tcu_macs, "runs": len(prog.runs),
              "instructions": sum(len(r.program) for r in prog.runs),
              "relayouts": prog.relayouts, "relayout_bytes": prog.relayout_bytes,
              "relayout_cycles": prog.relayout_cycles, "onchip_bytes": prog.onchip_bytes,
              "dram_bytes": prog.dram_bytes, "paths": prog.paths, "reused": prog.reused,
              "seconds": round(seconds, 3)}
    if rtl is not None:
        result["rtl_equal"] = rtl
    if args.json:
        print_json(result)
    else:
        print(f"{spec.name} {args.phase} on {args.sim}: {ex.cycles} cycles, {prog.macs} MACs, utilization "
              f"{result['utilization']:.1%}, max rel. error {result['max_rel_err']:.2e}, "
              f"{prog.relayouts} re-layouts ({seconds:.1f} s)")
    return 0


def execute(config, plan, sim: str, advance=None):
    """Run a :class:`gen.gemm.GemmPlan` on ``sim``; returns ``(Y, cycles, tcu_macs)``."""
    if sim == "emulator":
        from ..gemm import run_emulator

        return run_emulator(config, plan, progress=advance)
    from sim.benches.system_bench import run_plan_rtl

    return run_plan_rtl(config, plan, sim)
