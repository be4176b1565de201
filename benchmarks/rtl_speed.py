"""RTL simulation speed of the default accelerator on full runs (issue 17, "fast RTL runs").

    python -m benchmarks rtl_speed [--threads 1 2] [--sims verilator [icarus]] [--repeat 3] [--no-docs]

Three workloads on the default design (16 CEs, 256 MACs), each checked against the emulator (rows read
back bit for bit, every run's cycles): a random 256^3 bf16 GEMM (dense tiler), the ATIS TT
training step (fp + bp + wg) with the host writing and reading every run's tensors through the host
port (``fetta run --dram rule``), and the same step as ``fetta run`` runs it by default, its runs
moving their own data by DMA instructions from the bench's AXI4 RAM (``--dram dma``: no host-port
cycles; every job's cycles and every stored byte checked). The host is played in Verilog
(:mod:`sim.host_player`); Verilator models are stand-alone executables (:func:`sim.runner.build_native`,
``--threads`` as given), Icarus runs are clocked by cocotb. The wall time counts the simulation
only (not compilation, emulation, elaboration or the build), as the median of ``--repeat`` runs with
the fastest beside it (the machines this runs on are shared virtual machines whose speed varies by up
to 2x from run to run); the simulated clock cycles include the host port's writes and reads. The table goes into ``docs/accelerator.md`` between the
``rtl-speed`` markers.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

from benchmarks._docs import publish

DOC = Path(__file__).resolve().parent.parent / "docs" / "accelerator.md"
BEGIN, END = "<!-- rtl-speed:begin -->", "<!-- rtl-speed:end -->"


def gemm_workload(config):
    """Jobs of a random 256^3 GEMM and the emulator's outputs to compare with."""
    from gen.compiler.gemm import plan_gemm
    from gen.toolflow.execute import run_emulator
    from sim.bf16 import round_to_bf16_f32
    from sim.rtl import plan_jobs

    rng = np.random.default_rng(0)
    plan = plan_gemm(config, round_to_bf16_f32(rng.standard_normal((256, 256))),
                     round_to_bf16_f32(rng.standard_normal((256, 256))))
    _, cycles, _ = run_emulator(config, plan)
    return plan, cycles


def run_gemm_rtl(config, sim, plan, cycles, text):
    from gen.toolflow.execute import run_emulator
    from sim.rtl import run_plan_rtl

    stats = {}
    t0 = time.perf_counter()
    Y, rtl_cycles, _ = run_plan_rtl(config, plan, sim, text, stats)
    dt = time.perf_counter() - t0
    Ye, _, _ = run_emulator(config, plan)
    if rtl_cycles != cycles or not np.array_equal(Y.view(np.uint32), Ye.view(np.uint32)):
        raise SystemExit(f"{sim}: 256^3 GEMM differs from the emulator ({rtl_cycles} vs {cycles} cycles)")
    return rtl_cycles, stats["sim_cycles"], dt


def atis_workload(config, dram: str):
    """The ATIS TT training step compiled and executed on the emulator: through the host port
    (``dram="rule"``) or as DMA jobs (``"dma"``, as ``fetta run`` runs it)."""
    from gen.compiler import compile_layer
    from gen.compiler.dma import lower_dma
    from gen.toolflow.dmarun import execute_dma
    from gen.toolflow.execute import execute
    from gen.workload.spec import load_spec
    from sim.golden import random_inputs

    spec = load_spec(Path(__file__).resolve().parent.parent / "examples" / "atis_tt.json")
    prog = compile_layer(spec, "train", config, dram=dram)
    inputs = random_inputs(spec, 1)
    return execute_dma(lower_dma(prog, config), inputs, config) if dram == "dma" else execute(prog, inputs, config)


def run_atis_rtl(config, sim, ex):
    from gen.toolflow.dmarun import DmaExecution, rtl_check_dma
    from gen.toolflow.execute import rtl_check

    stats = {}
    t0 = time.perf_counter()
    # each raises on any difference
    (rtl_check_dma if isinstance(ex, DmaExecution) else rtl_check)(ex, config, sim, stats=stats)
    dt = time.perf_counter() - t0
    return sum(c for c, _ in ex.trace), stats["sim_cycles"], dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks rtl_speed", description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="Verilator --threads (default 1 2)")
    ap.add_argument("--sims", nargs="+", default=["verilator"], choices=["verilator", "icarus"])
    ap.add_argument("--repeat", type=int, default=3, help="runs per workload (default 3; median and best reported)")
    ap.add_argument("--no-docs", action="store_true", help="print the table only")
    args = ap.parse_args(argv)
    from gen.design.config import FettaConfig
    from gen.design.isa import Geometry
    from sim.host_player import TOP, player_verilog
    from sim.runner import build, build_native, elaborate

    config = FettaConfig()
    text = elaborate("fetta", config)
    plan, gemm_cycles = gemm_workload(config)
    atis, atis_dma = atis_workload(config, "rule"), atis_workload(config, "dma")
    rows = []
    for sim in args.sims:
        for threads in (args.threads if sim == "verilator" else [1]):
            os.environ["FETTA_SIM_THREADS"] = str(threads)
            geo = Geometry.of(config)
            bench = text + player_verilog(text, config.dram_latency, (geo.dram_num, geo.dram_den))
            sb = build_native(bench, TOP) if sim == "verilator" else build(bench, TOP, sim)
            how = f"{sim}, {threads} thread{'s' if threads > 1 else ''}" if sim == "verilator" else f"{sim} (cocotb clock)"
            for name, once in (("256^3 GEMM", lambda: run_gemm_rtl(config, sim, plan, gemm_cycles, text)),
                               ("ATIS TT train, host port", lambda: run_atis_rtl(config, sim, atis)),
                               ("ATIS TT train, DMA jobs", lambda: run_atis_rtl(config, sim, atis_dma))):
                runs = [once() for _ in range(args.repeat)]
                busy, simulated = runs[0][:2]
                walls = sorted(r[2] for r in runs)
                dt, best = walls[len(walls) // 2], walls[0]
                rows.append(f"| {how} | {sb.build_seconds:.0f}{' (cached)' if sb.cached else ''} | {name} | "
                            f"{busy:,} | {simulated:,} | {dt:.1f} ({best:.1f}) | {simulated / dt:,.0f} "
                            f"({simulated / best:,.0f}) |")
    table = "\n".join([
        f"Default design ({config.num_ces} CEs, {config.macs} MACs), {platform.machine()}, "
        f"{os.cpu_count()} cores; results equal to the emulator bit for bit, cycles included. Busy cycles: "
        "the accelerator's runs (jobs); simulated: every clock cycle, host port writes and reads included.",
        "",
        f"| simulator | build s | workload | busy cycles | simulated clock cycles | wall s, median of {args.repeat} "
        "(best) | clock cycles/s, median (best) |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ])
    return publish(table, args.no_docs, DOC, BEGIN, END, "The whole accelerator")


if __name__ == "__main__":
    raise SystemExit(main())
