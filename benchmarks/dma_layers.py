"""Compiled layers run by their own DMA instructions against the DRAM timing rule (issues 14 and 17).

``python -m benchmarks dma_layers [--no-docs] [--layers a,b] [--phases fp,bp,wg,train]`` compiles each
layer and phase of ``benchmarks/layers/*.json`` once (default configuration) and executes it twice on
the emulator: as today's runs whose tensors the host writes and reads, timed end to end by the rule
of ``gen/design/timing.py`` (``rule cycles``), and lowered by ``gen.compiler.dma`` to jobs whose
``DMA`` instructions move every tensor between the DRAM and the unified memory (hardware cycles:
the sum of the jobs' cycles, the controller's own count with the DRAM's latency and its 25.6 GB/s
pacing, which the RTL reproduces cycle for cycle), first for the same program (``rule vs hardware``
is the rule's error), then for the variant the compiler chooses by the hardware count
(``compile_layer(dram="dma")``, ``fetta run --dram dma``), executed on the emulator (max. relative
error against the float64 golden model). It reports utilization over that count, the
jobs (of which DMA-only), the DMA instructions, the bytes they move and the DRAM the regions take
(the RTL bench's DRAM has 1 MiB). The table goes into ``docs/compiler.md`` between the
``dma-layers`` markers unless ``--no-docs``.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "compiler.md"
BEGIN, END = "<!-- dma-layers:begin -->", "<!-- dma-layers:end -->"


def measure(spec, phase, config) -> dict:
    from gen.compiler import compile_layer
    from gen.compiler.dma import hardware_cycles, lower_dma
    from gen.design.isa import Opcode
    from gen.toolflow.dmarun import execute_dma
    from gen.toolflow.execute import execute
    from sim.golden import compute, random_inputs

    t0 = time.perf_counter()
    prog = compile_layer(spec, phase, config)
    inputs = random_inputs(spec, 0)
    host = execute(prog, inputs, config)
    lowered = hardware_cycles(prog, config)
    prog = compile_layer(spec, phase, config, dram="dma")     # the variant chosen by the hardware count
    dprog = lower_dma(prog, config)
    ex = execute_dma(dprog, inputs, config)
    gold = compute(spec, inputs, phases=["fp", "bp", "wg"] if phase == "train" else [phase])
    err = max(float(np.max(np.abs(ex.results[k] - g)) / np.max(np.abs(g))) for k, g in gold.items())
    return dict(rule=host.cycles, lowered=lowered, hw=ex.cycles, compute=ex.compute_cycles, macs=prog.macs, runs=len(prog.runs),
                jobs=len(dprog.jobs), dma_only=sum(j.run is None for j in dprog.jobs),
                dmas=sum(ins.opcode == Opcode.DMA for j in dprog.jobs for ins in j.program),
                moved=ex.timeline.dram_bytes, regions=dprog.dram_bytes, err=err,
                seconds=time.perf_counter() - t0)


def main(argv=None) -> int:
    from gen.design.config import FettaConfig
    from gen.design.isa import Geometry
    from gen.errors import FettaError
    from gen.workload.spec import load_spec

    p = argparse.ArgumentParser(prog="python -m benchmarks dma_layers", description=__doc__.split("\n")[0])
    p.add_argument("--layers", default="atis_tt,atis_ttm_embedding,ucf_tr14,ucf_ht,ucf_bt")
    p.add_argument("--phases", default="fp,bp,wg,train")
    p.add_argument("--no-docs", action="store_true", help="print the table only")
    args = p.parse_args(argv)
    config = FettaConfig()
    geo = Geometry.of(config)
    lines = [f"Default configuration (DRAM {config.dram_gbps} GB/s at {config.freq_mhz:.0f} MHz: "
             f"{geo.dram_num}/{geo.dram_den} of a {geo.dma_bytes}-byte beat per cycle, read latency "
             f"{config.dram_latency}); emulator; {platform.machine()}, `python -m benchmarks dma_layers`.", "",
             "| layer | phase | rule cycles | the same program, hardware cycles | rule vs hardware | "
             "hardware cycles, variant chosen by them | compute cycles | utilization (hardware) | runs | "
             "jobs (DMA-only) | DMA instructions | moved KiB | DRAM regions KiB | max rel. err | s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|"]
    devs = []
    for name in args.layers.split(","):
        spec = load_spec(HERE / "layers" / f"{name}.json")
        for phase in args.phases.split(","):
            try:
                r = measure(spec, phase, config)
            except FettaError as e:
                lines.append(f"| {spec.name} | {phase} | not compiled: {str(e)[:120]} |" + " |" * 12)
                print(lines[-1], flush=True)
                continue
            dev = (r["rule"] - r["lowered"]) / r["lowered"]
            devs.append(abs(dev))
            lines.append(f"| {spec.name} | {phase} | {r['rule']:,} | {r['lowered']:,} | {dev:+.1%} | {r['hw']:,} | "
                         f"{r['compute']:,} | "
                         f"{r['macs'] / (r['hw'] * config.macs):.1%} | {r['runs']} | {r['jobs']} ({r['dma_only']}) | "
                         f"{r['dmas']} | {r['moved'] / 1024:,.0f} | {r['regions'] / 1024:,.0f} | "
                         f"{r['err']:.1e} | {r['seconds']:.0f} |")
            print(lines[-1], flush=True)
    if devs:
        lines += ["", f"Rule against hardware over {len(devs)} layer-phases: median |deviation| "
                  f"{float(np.median(devs)):.1%}, largest {max(devs):.1%}."]
    from benchmarks._docs import publish
    return publish("\n".join(lines), args.no_docs, DOC, BEGIN, END, "Compiler")


if __name__ == "__main__":
    raise SystemExit(main())
