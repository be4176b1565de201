"""Benchmark of the whole accelerator: utilisation of dense GEMMs (emulator), and the RTL's
elaboration / Verilator build time and simulation speed for a configuration.

    python -m benchmarks system [--rtl verilator|icarus|none] [--size M K N]

Prints Markdown: the emulator table, then one RTL run of the default design (default: Verilator,
256 x 256 x 256; elaboration, build (cached per design), simulated cycles and speed; the result
must equal the emulator's bit for bit). Icarus needs about an hour for 256^3 on the full design.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def gemm_rows(config, sizes):
    from gen.compiler.gemm import plan_gemm
    from gen.toolflow.execute import run_emulator
    from sim.bf16 import round_to_bf16_f32

    rows = []
    for M, K, N in sizes:
        rng = np.random.default_rng(0)
        A = round_to_bf16_f32(rng.standard_normal((M, K)))
        B = round_to_bf16_f32(rng.standard_normal((K, N)))
        t0 = time.perf_counter()
        plan = plan_gemm(config, A, B)
        Y, cycles, _ = run_emulator(config, plan)
        dt = time.perf_counter() - t0
        rows.append((f"{M}x{K}x{N}", plan.grid, len(plan.passes), cycles, plan.macs / (cycles * config.macs), dt))
    return rows


def rtl_row(config, sim, size):
    """Elaborate, build (cached per design) and run one random GEMM on the RTL; the result must
    equal the emulator's bit for bit, cycles included. The run time counts the cocotb run only
    (host writes / reads included), not elaboration or the build."""
    import hdl
    from gen.compiler.gemm import plan_gemm
    from gen.toolflow.execute import run_emulator
    from sim.rtl import run_plan_rtl
    from sim.bf16 import round_to_bf16_f32
    from sim.runner import build

    t0 = time.perf_counter()
    text = hdl.to_verilog("fetta", config)
    elab = time.perf_counter() - t0
    sb = build(text, hdl.module_name("fetta"), sim)
    M, K, N = size
    rng = np.random.default_rng(0)
    plan = plan_gemm(config, round_to_bf16_f32(rng.standard_normal((M, K))),
                     round_to_bf16_f32(rng.standard_normal((K, N))))
    stats = {}
    t0 = time.perf_counter()
    Y, cycles, _ = run_plan_rtl(config, plan, sim, text, stats)
    dt = time.perf_counter() - t0
    Ye, ce, _ = run_emulator(config, plan)
    if ce != cycles or not np.array_equal(Y.view(np.uint32), Ye.view(np.uint32)):
        raise SystemExit(f"{sim}: RTL differs from the emulator ({cycles} vs {ce} cycles)")
    return elab, sb.build_seconds, sb.cached, cycles, stats["sim_cycles"], dt


def main() -> None:
    from gen.design.config import FettaConfig

    ap = argparse.ArgumentParser()
    ap.add_argument("--rtl", choices=("icarus", "verilator", "none"), default="verilator",
                    help="simulator of the RTL row (default verilator; none: emulator table only)")
    ap.add_argument("--size", type=int, nargs=3, default=(256, 256, 256), metavar=("M", "K", "N"))
    args = ap.parse_args()
    cfg = FettaConfig()
    print("| GEMM MxKxN | grid (gm,gn,gk) | passes | cycles | utilization | emulator s |")
    print("|---|---|---|---|---|---|")
    for name, grid, passes, cycles, util, dt in gemm_rows(cfg, [(256, 256, 256), (128, 256, 64), (32, 768, 768),
                                                               (12, 24, 20), (100, 100, 100)]):
        print(f"| {name} | {grid} | {passes} | {cycles} | {util:.1%} | {dt:.2f} |")
    if args.rtl != "none":
        M, K, N = args.size
        elab, build_s, cached, cycles, sim_cycles, dt = rtl_row(cfg, args.rtl, (M, K, N))
        print(f"\nRTL of the default design ({cfg.num_ces} CEs, {cfg.macs} MACs), {M}x{K}x{N} GEMM, "
              f"result equal to the emulator bit for bit:\n")
        print("| simulator | elaboration s | build s | busy cycles | simulated clock cycles (incl. host port) "
              "| run s | clock cycles/s |")
        print("|---|---|---|---|---|---|---|")
        print(f"| {args.rtl} | {elab:.1f} | {build_s:.1f}{' (cached build)' if cached else ''} | {cycles} | "
              f"{sim_cycles} | {dt:.1f} | {sim_cycles / dt:.0f} |")


if __name__ == "__main__":
    main()
