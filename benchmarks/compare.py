"""FETTA against the baselines and its own ablations, all on the one engine (issue 15).

``python -m benchmarks compare [--layers a,b] [--phases fp,bp,wg,train] [--archs ...] [--jobs N] [--write-docs]``
compiles every layer of ``benchmarks/layers/*.json`` and phase for each architecture and ablation of
:mod:`gen.compiler.capabilities` on the default configuration and reports, from the compiled program
(:func:`gen.compiler.estimate.model_compiled`: the cycles the emulator counts, DRAM time included;
``--dram dma``, the default, as ``fetta model``: each program lowered to runs that move their own data
and timed by the controller's own count; ``--dram rule``: the compiler's DRAM rule):
cycles, utilization, DRAM KiB, host / on-chip re-layouts, energy, and FETTA's speedup and energy
ratio over each. Utilization counts the useful MACs of FETTA's program (the CSSE path with the
training-aware WG), so a worse order shows as lower utilization, not as busy MACs. ``--write-docs``
puts the tables into ``docs/comparison.md`` and draws ``docs/img/comparison_main.png`` (geometric-mean
speedup per architecture and ablation; ``--tag T``: section ``compare:T`` and
``docs/img/comparison_T.png``). Layer-phases an architecture cannot compile are listed
with the reason.
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from benchmarks._docs import write_section

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "comparison.md"
PNG = HERE.parent / "docs" / "img" / "comparison_main.png"
LAYERS = "atis_tt,atis_ttm_embedding,ucf_tr14,ucf_ht,ucf_bt"


def _measure(job):
    """One (layer, phase, arch): the model of its compiled program, or the error."""
    from gen.compiler.estimate import model_compiled
    from gen.design.config import FettaConfig
    from gen.errors import FettaError
    from gen.workload.spec import load_spec

    layer, phase, arch, dram = job
    spec = load_spec(HERE / "layers" / f"{layer}.json")
    t0 = time.perf_counter()
    try:
        r = model_compiled(spec, phase, FettaConfig(), arch=arch, dram=dram)
    except FettaError as e:
        return job, {"error": str(e).split(" (")[0], "seconds": time.perf_counter() - t0}
    p = r.program
    return job, dict(cycles=r.cycles, compute=r.compute_cycles, stall=r.dram_stall_cycles, macs=p.macs,
                     dram=r.dram_bytes, energy=r.energy_pj, host=p.relayouts, onchip=p.onchip_relayouts,
                     transposes=p.transposes, seconds=time.perf_counter() - t0)


def _geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def main(argv=None) -> int:
    from gen.compiler.capabilities import ABLATIONS, ARCHS, NOT_MODELED
    from gen.design.config import FettaConfig

    p = argparse.ArgumentParser(prog="python -m benchmarks compare")
    p.add_argument("--layers", default=LAYERS, help=f"benchmark layers (default {LAYERS})")
    p.add_argument("--phases", default="fp,bp,wg,train")
    p.add_argument("--archs", default=",".join([*ARCHS, *ABLATIONS]),
                   help="architectures and ablations (default: all; fetta is always measured)")
    p.add_argument("--jobs", type=int, default=2, help="parallel compiles (default 2)")
    p.add_argument("--dram", default="dma", choices=("dma", "rule"),
                   help="timing as fetta model --dram (default dma: the hardware's own count)")
    p.add_argument("--write-docs", action="store_true")
    p.add_argument("--tag", default="main",
                   help="docs/comparison.md section (markers compare:TAG) the tables go to (default main)")
    args = p.parse_args(argv)
    archs = ["fetta"] + [a for a in args.archs.split(",") if a != "fetta"]
    layers, phases = args.layers.split(","), args.phases.split(",")
    jobs = [(la, ph, a, args.dram) for la in layers for ph in phases for a in archs]
    res = {}
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for n, (job, r) in enumerate(pool.map(_measure, jobs), 1):
            res[job[:3]] = r
            what = r.get("error") or f"{r['cycles']} cycles"
            print(f"[{n}/{len(jobs)} {time.perf_counter() - t0:.0f} s] {' '.join(job[:3])}: {what} "
                  f"({r['seconds']:.1f} s)", flush=True)
    cfg = FettaConfig()
    base = [a for a in archs if a in ARCHS and a != "fetta"]
    abl = [a for a in archs if a in ABLATIONS]
    tables = [_table(res, layers, phases, base, cfg, "baseline"), _table(res, layers, phases, abl, cfg, "ablation")]
    summary = _summary(res, layers, phases, archs)
    notes = "\n".join(f"- `{a}`: not modeled: {NOT_MODELED[a]}" for a in base if a in NOT_MODELED)
    timing = ("DRAM by DMA jobs, the controller's own count (`--dram dma`)" if args.dram == "dma"
              else "DRAM by the compiler's rule (`--dram rule`)")
    body = "\n\n".join([f"Timing: {timing}.", summary, tables[0], notes, tables[1]])
    print(body)
    if args.write_docs:
        write_section(DOC, f"<!-- compare:{args.tag}:begin -->", f"<!-- compare:{args.tag}:end -->", body,
                      "Comparison")
        _plot(res, layers, phases, archs, PNG.with_name(f"comparison_{args.tag}.png"))
    return 0


def _cell(r, ref, cfg):
    if "error" in r:
        return "not compiled"
    util = ref["macs"] / (r["cycles"] * cfg.macs)
    return (f"{r['cycles']:,} ({util:.0%}) {ref['cycles'] and r['cycles'] / ref['cycles']:.2f}x, "
            f"{r['energy'] / ref['energy']:.2f}x E, {r['dram'] / 1024:.0f} KiB, {r['host']}/{r['onchip']}")


def _table(res, layers, phases, archs, cfg, kind):
    head = "| layer | phase | fetta cycles (util.), DRAM KiB, re-layouts host/on chip | " + \
        " | ".join(archs) + " |"
    lines = [f"{kind}s: each cell is cycles (utilization of FETTA's useful MACs), FETTA's speedup over it, "
             "its energy over FETTA's, DRAM KiB, re-layouts through DRAM / on chip.", "", head,
             "|---|---|---|" + "---|" * len(archs)]
    for la in layers:
        for ph in phases:
            ref = res[(la, ph, "fetta")]
            if "error" in ref:
                lines.append(f"| {la} | {ph} | not compiled: {ref['error']} |" + " |" * len(archs))
                continue
            own = f"{ref['cycles']:,} ({ref['macs'] / (ref['cycles'] * cfg.macs):.0%}), " \
                  f"{ref['dram'] / 1024:.0f} KiB, {ref['host']}/{ref['onchip']}"
            lines.append(f"| {la} | {ph} | {own} | " + " | ".join(_cell(res[(la, ph, a)], ref, cfg) for a in archs)
                         + " |")
    return "\n".join(lines)


def _speedups(res, layers, phases, arch, key="cycles"):
    out = []
    for la in layers:
        for ph in phases:
            ref, r = res[(la, ph, "fetta")], res[(la, ph, arch)]
            if "error" not in ref and "error" not in r:
                out.append(r[key] / ref[key])
    return out


def _summary(res, layers, phases, archs):
    lines = ["| architecture / ablation | FETTA's speedup, geo. mean (min - max) | energy ratio, geo. mean | "
             "layer-phases | compile s |", "|---|---|---|---|---|"]
    for a in archs[1:]:
        s, e = _speedups(res, layers, phases, a), _speedups(res, layers, phases, a, "energy")
        secs = sum(res[(la, ph, a)]["seconds"] for la in layers for ph in phases)
        rng = f"{min(s):.2f} - {max(s):.2f}" if s else "-"
        lines.append(f"| {a} | {_geomean(s):.2f}x ({rng}) | {_geomean(e):.2f}x | {len(s)} | {secs:.0f} |")
    return "\n".join(lines)


def _plot(res, layers, phases, archs, png: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = archs[1:]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(others) * len(layers) / 2), 4))
    width = 0.8 / len(layers)
    for i, la in enumerate(layers):
        ys = [_geomean(_speedups(res, [la], phases, a)) for a in others]
        ax.bar([j + i * width for j in range(len(others))], ys, width, label=la)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(others))], others, rotation=30, ha="right")
    ax.set_ylabel("FETTA speedup (geo. mean over phases)")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    png.parent.mkdir(exist_ok=True)
    fig.savefig(png, dpi=120)
    print(f"written to {png}")
