"""Compiler benchmark: the layers of ``benchmarks/layers/*.json`` per phase on the emulator.

``python -m benchmarks layers [--write-docs] [--layers a,b] [--phases fp,bp,wg,train] [--set KEY=VALUE]`` prints, per
layer and phase, as ``fetta run`` compiles and runs it (``--dram dma``: the runs move their own data by
DMA instructions, ``gen/compiler/dma.py``; a ``dense`` layer as ``fetta run --dram dma`` runs it, compiled as
a two-tensor network, not by the GEMM tiler): end-to-end cycles (the jobs' own count, which the RTL
reproduces), compute cycles (the runs without their DMA instructions), DRAM stall cycles, useful MACs, utilization
``macs / (cycles * num_macs)`` and the same over compute cycles alone, the deviation of
``fetta model --arch fetta`` (the lowered program's static count) from the emulator, on-chip traffic (unified rows read by IA/IB, multicast
counted once, plus rows written back), DRAM traffic (the bytes the DMA instructions move, whole beats), re-layouts
(through the host, with their bytes, and on chip), batch pieces (``gen.compiler.batched``), the MACs
the TCU performs per useful MAC (lane padding, identity GEMMs, batch-free steps done per half),
runs and the max. relative error vs the float64 golden model. ``DRAM floor`` is the compulsory
traffic (inputs read once, results written once: ``gen.compiler.estimate.compulsory_bytes``) and
``DRAM-floor bound`` the highest end-to-end utilization any schedule could reach with it,
``min(1, (MACs / num_macs) / (floor / bytes_per_cycle))``. ``GEMMs`` counts the GEMM instructions and
``control`` the compute cycles in which no instruction issues (FETCH / DECODE / CHECK of every
instruction, the waits for a GEMM's drain of :mod:`gen.design.control`, the last drain), with its share
of the compute cycles; ``bound without it`` is the utilization of the compute cycles less those (what
prefetching and decoding instructions ahead could reach on this program, DRAM aside). ``--write-docs`` puts the table into
``docs/compiler.md`` between the ``layers-table`` markers; with ``--layers`` or ``--phases`` it replaces only
the rows it measured (the others stay as last measured). Layers that do not compile are listed
with the reason (never silently dropped).

``--causes`` compiles only (the same programs) and prints the host re-layouts of each layer and phase
by cause (``gen.compiler.relayout.RELAYOUT_CAUSES``); with ``--write-docs`` that table goes between the
``relayout-causes`` markers.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "compiler.md"
BEGIN, END = "<!-- layers-table:begin -->", "<!-- layers-table:end -->"
CAUSES_BEGIN, CAUSES_END = "<!-- relayout-causes:begin -->", "<!-- relayout-causes:end -->"


def causes_table(layers, phases, config) -> str:
    """Host re-layouts per layer and phase by cause (compilation only)."""
    from gen.compiler import compile_layer
    from gen.compiler.dma import hardware_cycles
    from gen.compiler.relayout import RELAYOUT_CAUSES
    from gen.workload.spec import load_spec

    keys = list(RELAYOUT_CAUSES)
    lines = ["| layer | phase | cycles (hardware count) | host re-layouts | on chip | " + " | ".join(keys) + " |",
             "|---|---|---|---|---|" + "---|" * len(keys)]
    total = dict.fromkeys(keys, 0)
    for name in layers:
        spec = load_spec(HERE / "layers" / f"{name}.json")
        if spec.format == "dense":
            continue
        for phase in phases:
            prog = compile_layer(spec, phase, config, dram="dma")   # as `fetta run` compiles it
            unknown = set(prog.relayout_causes) - set(keys)
            if unknown or sum(prog.relayout_causes.values()) != prog.relayouts:
                raise SystemExit(f"{spec.name} {phase}: causes {prog.relayout_causes} do not add up to "
                                 f"{prog.relayouts} host re-layouts")
            for k, n in prog.relayout_causes.items():
                total[k] += n
            lines.append(f"| {spec.name} | {phase} | {hardware_cycles(prog, config)} | {prog.relayouts} | "
                         f"{prog.onchip_relayouts} | "
                         + " | ".join(str(prog.relayout_causes.get(k, "")) for k in keys) + " |")
            print(lines[-1], flush=True)
    lines.append(f"| all | | | {sum(total.values())} | | " + " | ".join(str(total[k]) for k in keys) + " |")
    lines += ["", "Causes:", ""] + [f"- `{k}`: {v}" for k, v in RELAYOUT_CAUSES.items()]
    return "\n".join(lines)


def _row_key(line: str) -> tuple[str, str]:
    """(layer, phase) of a row of the layers table."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    return cells[0], cells[1]


def merged(old: str, new: str) -> str:
    """The table ``old`` with the rows of ``new`` (same header) in place of its rows of the same layer and
    phase; rows of layer-phases ``old`` lacks are appended in ``new``'s order."""
    head, rows = new.splitlines()[:2], new.splitlines()[2:]
    fresh = {_row_key(r): r for r in rows}
    kept = [fresh.pop(_row_key(r), r) for r in old.splitlines()[2:] if r.startswith("|")]
    return "\n".join(head + kept + [r for r in rows if _row_key(r) in fresh])


def _doc_table(begin: str, end: str) -> str:
    """The table now between ``begin`` and ``end`` in the docs."""
    text = DOC.read_text()
    return text[text.index(begin) + len(begin):text.index(end)].strip()


def _write_doc(begin: str, end: str, table: str) -> None:
    text = DOC.read_text()
    if begin not in text:
        raise SystemExit(f"{DOC} has no {begin} marker")
    text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: begin + "\n" + table + "\n" + end, text,
                  flags=re.S)
    DOC.write_text(text)


def measure(spec, phase, config):
    from gen.compiler import compile_layer
    from gen.compiler.estimate import compulsory_bytes
    from gen.design.control import issue_cycles
    from gen.design.isa import Geometry, Opcode, exec_cycles
    from gen.design.timing import dram_bytes_per_cycle, program_cycles, transfer_cycles
    from gen.compiler.dma import hardware_timeline, lower_dma
    from gen.toolflow.dmarun import execute_dma
    from sim.golden import compute, random_inputs

    t0 = time.perf_counter()
    prog = compile_layer(spec, phase, config, dram="dma")   # as `fetta run` compiles it
    model = hardware_timeline(prog, config)                   # what `fetta model --arch fetta` reports
    inputs = random_inputs(spec, 0)
    ex = execute_dma(lower_dma(prog, config), inputs, config)
    phases = ["fp", "bp", "wg"] if phase == "train" else [phase]
    gold = compute(spec, inputs, phases=phases)
    err = max(float(np.max(np.abs(ex.results[k] - g)) / np.max(np.abs(g))) for k, g in gold.items())
    floor = compulsory_bytes(spec, phase, config)
    ideal = prog.macs / config.macs                       # cycles with every MAC busy
    bound = min(1.0, ideal / transfer_cycles(floor, dram_bytes_per_cycle(config)))
    geo = Geometry.of(config)
    gemms = sum(1 for run in prog.runs for ins in run.program if ins.opcode == Opcode.GEMM)
    # cycles in which no instruction issues: FETCH / DECODE / CHECK and the waits for drains
    fixed = sum(program_cycles(run.words, config) - sum(
        issue_cycles(ins, geo) if ins.opcode == Opcode.GEMM else exec_cycles(ins, geo) for ins in run.program)
        for run in prog.runs)
    return dict(floor=floor, bound=bound, cycles=ex.cycles, compute=ex.compute_cycles, stall=ex.dram_stall_cycles, macs=prog.macs,
                util=prog.macs / (ex.cycles * config.macs), cutil=prog.macs / (ex.compute_cycles * config.macs),
                onchip=prog.onchip_bytes, dram=ex.timeline.dram_bytes, relayouts=prog.relayouts,
                relayout_bytes=prog.relayout_bytes, onchip_relayouts=prog.onchip_relayouts, pieces=prog.pieces,
                padded=prog.padded_macs / prog.macs, runs=len(prog.runs), err=err, transposes=prog.transposes,
                dataflows=", ".join(f"{k} {v}" for k, v in sorted(prog.dataflows().items())),
                model_dev=abs(model.cycles - ex.cycles) / ex.cycles, gemms=gemms, fixed=fixed,
                fixed_share=fixed / ex.compute_cycles, no_fixed=ideal / max(1, ex.compute_cycles - fixed),
                seconds=time.perf_counter() - t0)


def main(argv=None) -> int:
    from gen.design.config import FettaConfig, load_config
    from gen.errors import FettaError
    from gen.workload.spec import load_spec

    p = argparse.ArgumentParser(prog="python -m benchmarks layers")
    p.add_argument("--layers", default="atis_tt,atis_ttm_embedding,atis_dense,ucf_tr14,ucf_ht,ucf_bt")
    p.add_argument("--phases", default="fp,bp,wg,train")
    p.add_argument("--write-docs", action="store_true")
    p.add_argument("--causes", action="store_true", help="only the host re-layouts by cause (compilation only)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="configuration override (e.g. add_latency=4); the docs table is for the default")
    args = p.parse_args(argv)
    config = load_config(None, args.set)
    if args.write_docs and config != FettaConfig():
        p.error("--write-docs records the default configuration; drop --set")
    if args.causes:
        table = causes_table(args.layers.split(","), args.phases.split(","), config)
        print(table)
        if args.write_docs:
            _write_doc(CAUSES_BEGIN, CAUSES_END, table)
        return 0
    lines = ["| layer | phase | cycles | compute cycles | DRAM stall cycles | MACs | utilization | compute utilization | "
             "on-chip KiB | DRAM KiB | DRAM floor KiB | DRAM-floor bound | re-layouts host (KiB) / on chip | "
             "batch pieces | TCU MACs per useful MAC | dataflows (steps) | transposes | "
             "runs | GEMMs | control cycles (share) | bound without it | model vs emulator | max rel. err | "
             "compile + emulator s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    blank = " |" * 21
    for name in args.layers.split(","):
        spec = load_spec(HERE / "layers" / f"{name}.json")
        for phase in args.phases.split(","):
            try:
                r = measure(spec, phase, config)
            except FettaError as e:
                msg = str(e)
                if " does not fit" in msg:      # drop the mode lists of the step: keep where and why
                    msg = msg[:msg.find(" (")] + msg[msg.find(" does not fit"):]
                lines.append(f"| {spec.name} | {phase} | not compiled: {msg} |" + blank)
                print(lines[-1], flush=True)
                continue
            lines.append(f"| {spec.name} | {phase} | {r['cycles']} | {r['compute']} | {r['stall']} | {r['macs']} | "
                         f"{r['util']:.1%} | {r['cutil']:.1%} | {r['onchip'] / 1024:.0f} | {r['dram'] / 1024:.0f} | "
                         f"{r['floor'] / 1024:.0f} | {r['bound']:.1%} | "
                         f"{r['relayouts']} ({r['relayout_bytes'] / 1024:.0f}) / {r['onchip_relayouts']} | "
                         f"{r['pieces']} | {r['padded']:.2f} | {r['dataflows']} | {r['transposes']} | "
                         f"{r['runs']} | {r['gemms']} | {r['fixed']} ({r['fixed_share']:.0%}) | {r['no_fixed']:.1%} | "
                         f"{r['model_dev']:.1%} | "
                         f"{r['err']:.1e} | {r['seconds']:.1f} |")
            print(lines[-1], flush=True)
    table = "\n".join(lines)
    print(table)
    if args.write_docs:
        # a subset of the layers or phases replaces its own rows only (the others stay as last measured)
        full = (args.layers, args.phases) == (p.get_default("layers"), p.get_default("phases"))
        _write_doc(BEGIN, END, table if full else merged(_doc_table(BEGIN, END), table))
    return 0
