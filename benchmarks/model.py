"""Benchmark of the CSSE and FETTA's analytical estimate on benchmarks/layers/*.json.

``python -m benchmarks.model [--out docs/img] [--quick]`` prints markdown tables
(search time, MACs of every sequence, the analytical estimate of the train step along each
sequence, the training-aware search) and writes a plot of the sequences compared on FETTA (the
paper's figure comparing contraction sequences). The architectures are compared on the compiled
engine by ``python -m benchmarks compare`` (docs/comparison.md), not here.
"""

from __future__ import annotations

import argparse
import glob
import time
from pathlib import Path

LAYERS = "benchmarks/layers"


def _paths(name, nets):
    from gen.search.baselines import baseline_path

    return {n.label: baseline_path(name, n) for n in nets}


def run(out_dir: Path, quick: bool = False) -> str:
    from gen.search.baselines import BASELINES, dense_layer_macs
    from gen.design.config import FettaConfig
    from gen.search import model_phase
    from gen.workload.network import phase_networks
    from gen.search import search, search_network, training_aware
    from gen.workload.spec import load_spec

    cfg = FettaConfig()
    files = sorted(glob.glob(f"{LAYERS}/*.json"))
    lines = []
    # --- search time and MACs --------------------------------------------------
    lines.append("| layer | phase | nodes (max) | networks | stage-1 s | CSSE MACs | dense / CSSE | "
                 + " | ".join(BASELINES[:-1]) + " |")
    lines.append("|---" * (7 + len(BASELINES) - 1) + "|")
    seq_rows = []
    for f in files:
        spec = load_spec(f)
        for phase in ("fp", "bp", "wg"):
            nets = phase_networks(spec, phase)
            t0 = time.perf_counter()
            cands = [search_network(n, 1)[0] for n in nets]
            dt = time.perf_counter() - t0
            macs = sum(c.macs for c in cands)
            from gen.workload.network import path_macs

            base = {b: sum(path_macs(n, p) for n, p in zip(nets, _paths(b, nets).values())) for b in BASELINES[:-1]}
            lines.append(f"| {spec.name} | {phase} | {max(len(n.inputs) for n in nets)} | {len(nets)} | {dt:.3f} | "
                         f"{macs:,} | {dense_layer_macs(spec, phase) / macs:.2f} | "
                         + " | ".join(f"{base[b]:,}" for b in BASELINES[:-1]) + " |")
        # --- sequences on FETTA (train step) ------------------------------------
        if spec.format != "dense":
            nets = phase_networks(spec, "train")
            row = {"layer": spec.name}
            for b in ("left_to_right", "ette", "btt", "tetrix"):
                r = model_phase(spec, "train", cfg, _paths(b, nets))
                row[b] = r
            row["csse_flops"] = model_phase(spec, "train", cfg)
            if not quick:
                found = search(spec, "train", metric="edp", top_k=8, config=cfg)
                row["csse_model"] = model_phase(spec, "train", cfg,
                                                {e["label"]: e["path"] for e in found["networks"]})
            seq_rows.append(row)
    lines.append("")
    lines.append("Train step on FETTA with each contraction sequence, analytical estimate (cycles / energy uJ / EDP pJ*us):")
    lines.append("")
    keys = ["left_to_right", "ette", "btt", "tetrix", "csse_flops"] + ([] if quick else ["csse_model"])
    lines.append("| layer | " + " | ".join(keys) + " |")
    lines.append("|---" * (1 + len(keys)) + "|")
    for row in seq_rows:
        lines.append(f"| {row['layer']} | " + " | ".join(
            f"{row[k].cycles:,} / {row[k].energy_pj / 1e6:.1f} / {row[k].edp:.3g}" for k in keys) + " |")
    # --- training-aware --------------------------------------------------------
    lines.append("")
    lines.append("Training-aware search (MACs per train step, without the SGD update):")
    lines.append("")
    lines.append("| layer | per-phase | per-phase + reuse | joint | gain vs per-phase | saved bytes | seconds |")
    lines.append("|---" * 7 + "|")
    for f in files:
        spec = load_spec(f)
        if spec.format in ("dense", "bt") or max(len(n.inputs) for n in phase_networks(spec, "wg")) > 10:
            continue  # the joint search runs a full subset DP per WG network and pair: small layers only
        t = training_aware(spec, top_k=4 if quick else 8)
        lines.append(f"| {spec.name} | {t['per_phase']['macs']:,} | {t['per_phase_with_reuse']['macs']:,} | "
                     f"{t['joint']['macs']:,} | {t['gain_vs_per_phase']}x | {t['joint']['saved_bytes']:,} | "
                     f"{t['seconds']} |")
    _plots(out_dir, seq_rows, keys)
    return "\n".join(lines)


def _plots(out_dir: Path, seq_rows, keys) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out_dir.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    x = np.arange(len(seq_rows))
    w = 0.8 / len(keys)
    for j, k in enumerate(keys):
        sp = [r["left_to_right"].cycles / r[k].cycles for r in seq_rows]
        ee = [r["left_to_right"].energy_pj / r[k].energy_pj for r in seq_rows]
        axes[0].bar(x + j * w, sp, w, label=k)
        axes[1].bar(x + j * w, ee, w, label=k)
    for ax, t in zip(axes, ("speedup over left-to-right", "energy efficiency over left-to-right")):
        ax.set_xticks(x + 0.4 - w / 2, [r["layer"] for r in seq_rows], rotation=20)
        ax.set_yscale("log")
        ax.set_title(t + " (train step, FETTA)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "model_sequences.png", dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks.model", description=__doc__)
    p.add_argument("--out", default="docs/img", help="folder for the plots")
    p.add_argument("--quick", action="store_true", help="skip stage-2 (EDP) search, smaller training-aware K")
    args = p.parse_args(argv)
    print(run(Path(args.out), args.quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
