"""Whole training steps of the tensorized transformer (issue 19, seed 003) on the accelerator.

    python -m benchmarks train [--steps N] [--no-docs]

* **One step of seed 003's 2-encoder ATIS model** (``examples/atis_transformer.json``: TTM embedding
  1000 x 768 rank 30, 12 TT layers 768 x 768 rank 12, 12 heads, sequence 32, batch 1) on the
  emulator of the default design (16 CEs of 4 x 4 PEs, 256 bf16 MACs, DRAM 25.6 B/cycle): cycles end
  to end, compute cycles, DRAM stalls, DRAM bytes, utilization (useful MACs / (cycles x 256)), by
  kind (the contractions as DMA jobs, ``fetta train``'s default); time per sample at 100 MHz and at 1 GHz and per epoch of ATIS's 4,478 training sentences,
  beside seed 003's FPGA (Table V: 191 s per epoch, FP32, 100 MHz, U50). The elementwise and
  row-wise work (softmax, layer norm, GELU, their backward, the residual sums, the SGD update) runs on
  the vector unit (kind ``vector``); only the loss (the cross-entropy of ``classes`` logits) is the
  host's, counted in ``host_elements``.
* **Across-stage lookahead** (ETTE, seed 002; issue 19 deliverable 5): the token embedding's FP and WG
  programs and an ATIS TT layer's FP and train programs compiled with chunk pieces fused through the
  later stages that keep the chunked mode (``fuse=True``: an intermediate too large for a ping-pong
  half is consumed piece by piece on chip) and without (``fuse=False``: every chunked step's pieces
  go through DRAM before the next step): cycles, DRAM bytes, runs.
* **Loss curve** of the tiny model (``examples/atis_transformer_tiny.json``) over ``N`` steps (100 by
  default) on the accelerator and in JAX float64 (the reference of ``tests/test_train.py``), plotted
  to ``docs/img/train_loss.png``.

The tables go into ``docs/training.md`` between the ``train-benchmark`` markers.
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks._docs import publish

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "training.md"
PLOT = ROOT / "docs" / "img" / "train_loss.png"
BEGIN, END = "<!-- train-benchmark:begin -->", "<!-- train-benchmark:end -->"
#: seed 003 Table V: FPGA (U50, FP32, 100 MHz) latency per epoch, s; ATIS training sentences
PAPER_EPOCH_S = 191.0


def full_step(config):
    from gen.toolflow.train import run_training
    from gen.workload.transformer import load_model

    model = load_model(ROOT / "examples" / "atis_transformer.json")
    t0 = time.perf_counter()
    r = run_training(model, config, 1, seed=0)
    return model, r, time.perf_counter() - t0


def step_table(model, r, seconds: float, config, r100, config100) -> str:
    from gen.design.timing import dram_bytes_per_cycle
    from gen.toolflow.train import KINDS

    s = r.summary()
    cyc = s["cycles"]
    lines = [f"One step of `{model.name}` (batch 1, sequence {model.seq}) on the emulator of the default design "
             f"({config.macs} MACs, DRAM {config.dram_gbps} GB/s at {config.freq_mhz:g} MHz: "
             f"{dram_bytes_per_cycle(config):g} B/cycle); the contractions run as DMA jobs (the controller's own "
             f"cycle count; runs: jobs), the vector unit's runs through the host port timed by the DRAM rule; "
             f"{seconds:.0f} s on {platform.machine()} ({platform.python_version()}), "
             f"{time.strftime('%Y-%m-%d')}.", "",
             "| kind | cycles | share | compute cycles | DRAM stall cycles | MACs | utilization | DRAM KiB | runs |",
             "|---|---|---|---|---|---|---|---|---|"]
    for k in KINDS:
        c = s["by_kind"][k]
        util = f"{c['macs'] / (c['cycles'] * config.macs):.1%}" if c["macs"] else "-"
        lines.append(f"| {k} | {c['cycles']:,} | {c['cycles'] / cyc:.1%} | {c['compute_cycles']:,} | "
                     f"{c['dram_stall_cycles']:,} | {c['macs']:,} | {util} | "
                     f"{c['dram_bytes'] / 1024:,.0f} | {c['runs']} |")
    lines.append(f"| **step** | **{cyc:,}** | 100% | {s['compute_cycles']:,} | {s['dram_stall_cycles']:,} | "
                 f"{s['macs']:,} | **{s['utilization']:.1%}** | {s['dram_bytes'] / 1024:,.0f} | {s['runs']} |")
    per_sample_paper = PAPER_EPOCH_S / model.train_samples
    c100 = r100.cycles
    vops = s["vector_ops"]
    lines += ["", f"On the host: the loss, {s['host_elements']:,} elements (the cross-entropy of the logits); "
                  f"the vector unit's lanes combined {s['by_kind']['vector']['lane_ops']:,} elements. Its cycles by "
                  "operation (end to end): " + ", ".join(f"{k} {v:,} ({v / cyc:.1%})" for k, v in
                                                          sorted(vops.items(), key=lambda kv: -kv[1])) + ".", "",
              f"Time per sample: at 1 GHz with the cycles above; at 100 MHz with the cycles of the same step on a "
                  f"design clocked at 100 MHz with the same {config.dram_gbps} GB/s DRAM behind a "
                  f"{config100.dma_data_bits}-bit DMA port ({dram_bytes_per_cycle(config100):g} B/cycle, "
                  f"{dram_bytes_per_cycle(config100) * 0.1:g} GB/s: the port is the bound): {c100:,} cycles, "
                  f"{r100.utilization:.1%} utilization.", "",
              "| | per sample, 100 MHz | per sample, 1 GHz | per epoch (4,478), 100 MHz | vs seed 003 FPGA at 100 MHz |",
              "|---|---|---|---|---|"]
    t100 = c100 / 100e6
    lines.append(f"| this step | {t100 * 1e3:.2f} ms | {cyc / 1e9 * 1e3:.3f} ms | "
                 f"{t100 * model.train_samples:.1f} s | {per_sample_paper / t100:.2f}x faster |")
    lines.append(f"| seed 003 FPGA (Table V, FP32, 100 MHz) | {per_sample_paper * 1e3:.2f} ms | | "
                 f"{PAPER_EPOCH_S:.0f} s | 1 |")
    return "\n".join(lines)


def lookahead_table(model, config) -> str:
    from gen.compiler import compile_layer
    from gen.compiler.phases import compile_networks, fastest_paths
    from gen.workload.transformer import embedding_networks

    fp, wg = embedding_networks(model.embedding)
    rows = []
    for name, nets in (("embedding fp", [fp]), ("embedding wg", wg)):
        paths = fastest_paths(nets, config)
        rows.append((name, *(compile_networks(nets, config, paths=paths, fuse=f) for f in (False, True))))
    for ph in ("fp", "train"):
        rows.append((f"TT layer {ph}", *(compile_layer(model.linear, ph, config, fuse=f) for f in (False, True))))
    lines = ["", "Across-stage lookahead (chunk pieces fused through the later stages, ETTE) on the ATIS model's "
                 "programs, default design, timed by the DRAM rule:", "",
             "| program | chunked steps | cycles without / with | DRAM KiB without / with | runs without / with |",
             "|---|---|---|---|---|"]
    for name, off, on in rows:
        a, b = off.timeline(config), on.timeline(config)
        lines.append(f"| {name} | {off.chunked_steps} / {on.chunked_steps} | {a.cycles:,} / {b.cycles:,} | "
                     f"{a.dram_bytes / 1024:,.0f} / {b.dram_bytes / 1024:,.0f} | {len(off.runs)} / {len(on.runs)} |")
    return "\n".join(lines)


def loss_curve(steps: int, config):
    from gen.toolflow.train import init_params, run_training, synthetic_data
    from gen.workload.transformer import load_model
    from tests import jax_transformer as ref

    model = load_model(ROOT / "examples" / "atis_transformer_tiny.json")
    r = run_training(model, config, steps, seed=0)
    want, _ = ref.train(model, init_params(model, 0), synthetic_data(model, 0), steps)
    return model, r, want


def curve_table(model, r, want, steps: int) -> str:
    w = min(16, steps)
    acc, f64 = np.asarray(r.losses), np.asarray(want)
    return "\n".join([
        "", f"Tiny model (`{model.name}`), {steps} SGD steps, lr {model.lr}, {model.samples} synthetic samples "
            f"(`docs/img/train_loss.png`):", "",
        "| | mean loss, first 16 steps | last 16 steps | max abs. difference per step |", "|---|---|---|---|",
        f"| accelerator (bf16 operands, FP32 sums) | {acc[:w].mean():.4f} | {acc[-w:].mean():.4f} | "
        f"{np.max(np.abs(acc - f64)):.4f} |",
        f"| JAX float64 | {f64[:w].mean():.4f} | {f64[-w:].mean():.4f} | |",
        f"", f"Per step on the accelerator: {r.step_cycles[0]:,} cycles, utilization {r.utilization:.1%} "
             f"(64-wide layers cannot fill 256 MACs)."])


def plot(model, r, want, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    steps = np.arange(1, len(r.losses) + 1)
    k = 8
    smooth = lambda v: np.convolve(v, np.ones(k) / k, mode="valid")  # noqa: E731
    ax.plot(steps, r.losses, color="tab:blue", alpha=0.25, lw=0.8)
    ax.plot(steps, want, color="tab:orange", alpha=0.25, lw=0.8)
    ax.plot(steps[k - 1:], smooth(r.losses), color="tab:blue", label="accelerator (emulator, bf16)")
    ax.plot(steps[k - 1:], smooth(want), color="tab:orange", ls="--", label="JAX float64")
    ax.set_xlabel("step (batch 1)")
    ax.set_ylabel(f"cross-entropy (mean of {k})")
    ax.set_title(f"{model.name}: training loss")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"plot written to {path}")


def main(argv: list[str]) -> int:
    from gen.design.config import FettaConfig

    p = argparse.ArgumentParser(prog="python -m benchmarks train", description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=100, help="steps of the tiny model's loss curve (default 100)")
    p.add_argument("--no-docs", action="store_true", help="print the tables only (no docs, no plot)")
    args = p.parse_args(argv)
    config = FettaConfig()
    model, r, seconds = full_step(config)
    # 100 MHz (seed 003's clock): the DMA port's beat bounds the transfers, so take the widest one
    config100 = replace(config, freq_mhz=100, dma_data_bits=1024)
    _, r100, _ = full_step(config100)
    table = step_table(model, r, seconds, config, r100, config100) + "\n" + lookahead_table(model, config)
    tiny, rt, want = loss_curve(args.steps, config)
    table += "\n" + curve_table(tiny, rt, want, args.steps)
    if not args.no_docs:
        plot(tiny, rt, want, PLOT)
    return publish(table, args.no_docs, DOC, BEGIN, END, "Training a tensorized transformer")
