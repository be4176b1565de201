"""Bandwidth of the DMA engine's AXI4 manager in RTL (issue 17: >= 90 % of the configured bandwidth
on long bursts).

    python -m benchmarks dma [--sim verilator|icarus] [--no-docs]

The emitted Verilog of ``fetta_dma`` (:class:`hdl.dma.AxiDma`) for the default configuration and
two other burst settings, on cocotbext-axi's ``AxiRam`` without pauses (``sim/dma_rtl.py``): one
load and one store of each size, the data checked. Bandwidth is beats moved per cycle from the
first busy cycle to ``done``, against the interface's one beat per cycle (``dma_data_bits / 8``
bytes per cycle: 32 B/cycle at 256 bits). The table goes into ``docs/accelerator.md`` between the
``dma`` markers.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks._docs import publish

DOC = Path(__file__).resolve().parent.parent / "docs" / "accelerator.md"
BEGIN, END = "<!-- dma:begin -->", "<!-- dma:end -->"
SIZES = (16, 64, 256, 2048)
SETTINGS = ({}, {"dma_burst": 4, "dma_outstanding": 1}, {"dma_burst": 1, "dma_outstanding": 1})


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks dma", description=__doc__.split("\n")[0])
    p.add_argument("--sim", default="verilator", choices=("verilator", "icarus"))
    p.add_argument("--no-docs", action="store_true", help="print the table only")
    args = p.parse_args(argv)
    from gen.design.config import FettaConfig
    from sim.dma_rtl import run_dma_rtl

    t0 = time.perf_counter()
    lines = []
    for extra in SETTINGS:
        cfg = FettaConfig(**extra)
        bb = cfg.dma_data_bits // 8
        descs, addr = [], 0
        for n in SIZES:
            descs += [(False, addr, 0, n), (True, addr + (1 << 17), 0, n)]
            addr += n * bb
        with tempfile.TemporaryDirectory() as tmp:
            cycles, um, dram, want_um, want_dram = run_dma_rtl(cfg, descs, args.sim, Path(tmp), pause=False,
                                                               dram_bytes=1 << 18)
        if dram != want_dram or um != want_um or any(err for _, err in cycles):
            raise SystemExit(f"DMA moved wrong data ({extra})")
        cells = []
        for i, n in enumerate(SIZES):
            (cl, _), (cs, _) = cycles[2 * i], cycles[2 * i + 1]
            cells.append(f"{cl} / {cs} ({100 * n / cl:.1f} / {100 * n / cs:.1f} %)")
        lines.append(f"| {cfg.dma_data_bits} bits, bursts of {cfg.dma_burst}, {cfg.dma_outstanding} in flight | "
                     + " | ".join(cells) + " |")
    head = (f"{args.sim}, cocotbext-axi AxiRam (no pauses), {time.perf_counter() - t0:.0f} s. Cycles of a load / a "
            "store (first busy cycle to `done`) and their share of one beat per cycle:\n\n"
            "| DMA | " + " | ".join(f"{n} beats" for n in SIZES) + " |\n|---|" + "---|" * len(SIZES) + "\n")
    return publish(head + "\n".join(lines), args.no_docs, DOC, BEGIN, END, "Accelerator")
