"""Benchmark of the whole accelerator: utilisation of dense GEMMs on the default design (emulator).

    python -m benchmarks system

Prints a Markdown table. The RTL's build time and simulation speed on full runs are
``python -m benchmarks rtl_speed``.
"""

from __future__ import annotations

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


def main() -> None:
    from gen.design.config import FettaConfig

    cfg = FettaConfig()
    print("| GEMM MxKxN | grid (gm,gn,gk) | passes | cycles | utilization | emulator s |")
    print("|---|---|---|---|---|---|")
    for name, grid, passes, cycles, util, dt in gemm_rows(cfg, [(256, 256, 256), (128, 256, 64), (32, 768, 768),
                                                               (12, 24, 20), (100, 100, 100)]):
        print(f"| {name} | {grid} | {passes} | {cycles} | {util:.1%} | {dt:.2f} |")


if __name__ == "__main__":
    main()
