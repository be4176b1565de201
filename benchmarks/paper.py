"""FETTA against prior TNN inference accelerators: the seed's figures beside what this engine measures.

    python -m benchmarks paper [--no-docs]

Seed 000 (section VII, "comparison with TNN inference accelerators") reports FETTA's speedup and
energy efficiency over TIE (TTM), ETTE (TT), FDHT (HT) and Tetrix (every format). Those works run
fixed contraction orders (Tetrix: its own search) on their own hardware; none is available to run
here. What this engine can measure is the part of the gain that comes from the contraction order:
the forward pass (inference) of the benchmark layer of the format each work targets, compiled for
the default FETTA design with the CSSE's order and with the work's order (``fetta model --path``),
same hardware, same timing rules. The table goes into ``docs/comparison.md`` between the ``paper``
markers.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks._docs import measure_and_publish

DOC = Path(__file__).resolve().parent.parent / "docs" / "comparison.md"
BEGIN, END = "<!-- paper:begin -->", "<!-- paper:end -->"
LAYERS = Path(__file__).resolve().parent / "layers"

#: (work, seed 000's speedup, its energy efficiency, our path name, the order's source, layers)
WORKS = (
    ("TIE [28]", "4.04x", "1.75x", "ette", "Scheme-1: the input absorbs the cores in ascending index (seed 000 II-C)",
     ("atis_ttm_embedding",)),
    ("ETTE [27]", "1.6x", "not given", "ette", "Scheme-1, ETTE's TT order (seeds 000 II-C, 002)", ("atis_tt",)),
    ("FDHT [29]", "2.66x", "2.06x", "ette", "Scheme-1 as a stand-in (FDHT's own HT order is not in the seed text)",
     ("ucf_ht",)),
    ("Tetrix [30]", "1.14-3.27x", "0.89-2.52x", "tetrix", "Tetrix's search (input absorbs every node)",
     ("atis_tt", "atis_ttm_embedding", "ucf_tr14", "ucf_ht", "ucf_bt")),
)


def measure(progress=None) -> list[tuple]:
    from gen.compiler.estimate import model_compiled
    from gen.design.config import FettaConfig
    from gen.workload.spec import load_spec

    cfg = FettaConfig()
    cache: dict = {}

    def compiled(layer: str, path: str):
        if (layer, path) not in cache:
            cache[layer, path] = model_compiled(load_spec(LAYERS / f"{layer}.json"), "fp", cfg, path=path)
        return cache[layer, path]

    rows = []
    for work, speed, energy, path, source, layers in WORKS:
        for layer in layers:
            ours, theirs = compiled(layer, "optimal"), compiled(layer, path)
            rows.append((work, speed, energy, path, source, layer, ours, theirs))
            if progress:
                progress(1)
    return rows


def table(rows, seconds: float) -> str:
    head = (f"Forward pass on the default design, compiled programs (`fetta model --phase fp --path NAME`), "
            f"{seconds:.0f} s on this machine.\n\n"
            "| work | seed 000: FETTA's speedup / energy eff. | order used here | layer | FETTA (CSSE) cycles, "
            "MACs | with the work's order: cycles, MACs | speedup / energy eff. here |\n"
            "|---|---|---|---|---|---|---|\n")
    lines = []
    for work, speed, energy, path, source, layer, ours, theirs in rows:
        lines.append(f"| {work} | {speed} / {energy} | `{path}`: {source} | {layer} | {ours.cycles:,}, "
                     f"{ours.macs / 1e6:.2f} M | {theirs.cycles:,}, {theirs.macs / 1e6:.2f} M | "
                     f"{theirs.cycles / ours.cycles:.2f}x / {theirs.energy_pj / ours.energy_pj:.2f}x |")
    return head + "\n".join(lines)


def main(argv: list[str]) -> int:
    return measure_and_publish(argv, "paper", __doc__, sum(len(w[-1]) for w in WORKS), measure, table,
                               DOC, BEGIN, END, "Comparison")
