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


def phases_of(phase: str) -> list[str]:
    """The phases one ``--phase`` value runs (``train``: FP, BP and WG)."""
    return ["fp", "bp", "wg"] if phase == "train" else [phase]


def max_rel_err(results: dict, golden: dict) -> float:
    """``max |R - G| / max |G|`` over the golden model's result keys."""
    return max(float(np.max(np.abs(results[k] - ref)) / max(float(np.max(np.abs(ref))), np.finfo(np.float64).tiny))
               for k, ref in golden.items())


def run_dense(config, inputs, phases, sim: str, show_progress: bool = False) -> dict:
    """The GEMM of each phase of a ``dense`` layer, tiled by :mod:`gen.gemm`, executed on ``sim``:
    ``results`` (npz key -> float32 array), ``cycles``, ``macs``, ``tcu_macs``, ``passes``, ``grids``."""
    from ..gemm import plan_gemm
    from ..progress import progress

    r = {"results": {}, "cycles": 0, "macs": 0, "tcu_macs": 0, "passes": 0, "grids": []}
    for phase in phases:
        key, operands = PHASES[phase]
        plan = plan_gemm(config, *operands(inputs))
        with progress(len(plan.passes), f"{phase} on {sim}", enabled=show_progress) as bar:
            Y, c, tm = execute(config, plan, sim, advance=bar)
        r["results"][key] = Y.astype(np.float32)
        r["cycles"] += c
        r["macs"] += plan.macs
        r["tcu_macs"] += tm
        r["passes"] += len(plan.passes)
        r["grids"].append(list(plan.grid))
    return r


def run_compiled_layer(spec, phase: str, config, inputs, sim: str, show_progress: bool = False):
    """Tensorized formats: ``(program, emulator execution, rtl)``; on ``icarus``/``verilator`` the
    runs are replayed on the RTL (:func:`gen.compiler.rtl_check` raises on any difference, ``rtl``
    is then True), on ``emulator`` ``rtl`` is None."""
    from ..compiler import compile_layer, execute as run_program, rtl_check
    from ..progress import progress

    prog = compile_layer(spec, phase, config)
    with progress(len(prog.runs), f"{phase} on emulator", enabled=show_progress) as bar:
        ex = run_program(prog, inputs, config, progress=bar)
    rtl = rtl_check(ex, config, sim) if sim != "emulator" else None
    return prog, ex, rtl


def main(args: argparse.Namespace) -> int:
    from sim.golden import compute, random_inputs, write_npz

    from ..spec import load_spec

    spec = load_spec(args.spec)
    config = config_from_args(args)
    if config.datatype != "bf16":
        from ..errors import ConfigError
        raise ConfigError("fetta run drives bf16 layers; int16 is for dataflow bring-up", field="datatype")
    inputs = random_inputs(spec, args.seed)
    if spec.format != "dense":
        return run_compiled(args, spec, config, inputs)
    phases = phases_of(args.phase)
    golden = compute(spec, inputs, phases=phases)
    t0 = time.perf_counter()
    r = run_dense(config, inputs, phases, args.sim, show_progress=not args.json)
    seconds = time.perf_counter() - t0
    if args.out:
        write_npz(args.out, {**inputs, **r["results"]}, spec)
    result = {"spec": spec.name, "phase": args.phase, "sim": args.sim, "cycles": r["cycles"], "macs": r["macs"],
              "utilization": r["macs"] / (r["cycles"] * config.macs), "max_rel_err": max_rel_err(r["results"], golden),
              "tcu_macs": r["tcu_macs"], "passes": r["passes"], "grids": r["grids"],
              "seconds": round(seconds, 3)}
    if args.json:
        print_json(result)
    else:
        print(f"{spec.name} {args.phase} on {args.sim}: {r['cycles']} cycles, {r['macs']} MACs, utilization "
              f"{result['utilization']:.1%}, max rel. error {result['max_rel_err']:.2e} ({seconds:.1f} s)")
    return 0


def run_compiled(args, spec, config, inputs) -> int:
    """Tensorized formats: :func:`run_compiled_layer`, JSON / npz output."""
    from sim.golden import compute, write_npz

    t0 = time.perf_counter()
    prog, ex, rtl = run_compiled_layer(spec, args.phase, config, inputs, args.sim, show_progress=not args.json)
    golden = compute(spec, inputs, phases=phases_of(args.phase))
    seconds = time.perf_counter() - t0
    if args.out:
        out = dict(inputs)
        out.update({k: v.astype(np.float32) for k, v in ex.results.items()})
        write_npz(args.out, out, spec)
    result = {"spec": spec.name, "format": spec.format, "phase": args.phase, "sim": args.sim,
              "cycles": ex.cycles, "macs": prog.macs, "utilization": prog.macs / (ex.cycles * config.macs),
              "max_rel_err": max_rel_err(ex.results, golden), "tcu_macs": ex.tcu_macs, "runs": len(prog.runs),
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
