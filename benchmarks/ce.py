"""Contraction-engine benchmark: PE utilization per mapping, simulator build time and speed.

    python -m benchmarks ce [--size M N K] [--sims verilator [icarus]] [--no-docs]

For every mapping of :class:`gen.design.isa.CEMode` a random bf16 GEMM of the given
size is run on the emitted Verilog of the default 4x4 CE (cocotb bench,
cycle-exact scoreboard against :mod:`sim.ce_model`, so the cycle counts
below are the RTL's). Utilization = useful MACs / (R * C * cycles), counting
every cycle from the first IB load to the last Psum out (fill and drain
included). The table goes into ``docs/compute_core.md`` between the
``ce-benchmark`` markers.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._docs import publish

DOC = Path(__file__).resolve().parent.parent / "docs" / "compute_core.md"
BEGIN, END = "<!-- ce-benchmark:begin -->", "<!-- ce-benchmark:end -->"


def run_sim(sim: str, size, seed: int = 0):
    import hdl
    from gen.design.config import FettaConfig
    from hdl.ce import CEMode
    from sim.bf16 import round_to_bf16_f32
    from sim.ce_model import program_to_json, ce_program
    from sim.runner import build, run

    config = FettaConfig()
    t0 = time.perf_counter()
    text = hdl.to_verilog("ce", config)
    elab = time.perf_counter() - t0
    sb = build(text, "fetta_ce", sim)
    build_s = sb.build_seconds
    rng = np.random.default_rng(seed)
    M, N, K = size
    progs = []
    for mode in CEMode:
        A = round_to_bf16_f32(rng.standard_normal((M, K)))
        B = round_to_bf16_f32(rng.standard_normal((K, N)))
        progs.append(ce_program(mode, A, B))
    with tempfile.TemporaryDirectory() as tmp:
        jobs = Path(tmp) / "jobs.json"
        jobs.write_text(json.dumps([program_to_json(p) for p in progs]))
        run_dir = run(sb, "sim.benches.ce_bench", env={"FETTA_CE_JOBS": str(jobs)})
    out = json.loads((run_dir / "ce_out.json").read_text())
    return config, progs, out, elab, build_s, sb.cached


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks ce", description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, nargs=3, default=(64, 64, 64), metavar=("M", "N", "K"))
    ap.add_argument("--sims", nargs="+", default=["verilator"], choices=["verilator", "icarus"])
    ap.add_argument("--no-docs", action="store_true", help="print the table only")
    args = ap.parse_args(argv)
    M, N, K = args.size
    util_rows, sim_rows = [], []
    for i, sim in enumerate(args.sims):
        config, progs, out, elab, build_s, cached = run_sim(sim, args.size)
        cycles = sum(r["cycles"] for r in out)
        seconds = sum(r["seconds"] for r in out)
        sim_rows.append(f"| {sim} | {elab:.1f} | {build_s:.1f}{' (cached)' if cached else ''} | "
                        f"{cycles} | {seconds:.1f} | {cycles / seconds:,.0f} |")
        if i == 0:
            for prog in progs:
                util_rows.append(f"| `{prog.mode.name}` | {M}x{N}x{K} | {prog.macs} | {prog.cycles} | "
                                 f"{100 * prog.utilization:.2f} % |")
    table = "\n".join([
        f"CE {config.ce_rows}x{config.ce_cols}, bf16, random GEMM C[{M},{N}] = A[{M},{K}] @ B[{K},{N}]; "
        f"cycles checked cycle-exactly on the RTL ({args.sims[0]}).",
        "",
        "| mapping | M x N x K | MACs | cycles | PE utilization |",
        "|---|---|---|---|---|",
        *util_rows,
        "",
        f"Simulators (cocotb 2.1, {platform.machine()}, shared 2-core machine; build time of the cached build "
        "when marked):",
        "",
        "| simulator | elaboration s | build s | simulated cycles | wall s | cycles/s |",
        "|---|---|---|---|---|---|",
        *sim_rows,
    ])
    return publish(table, args.no_docs, DOC, BEGIN, END, "Compute core")
