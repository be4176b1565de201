"""Zero skipping (issue 18) projected onto the 256^3 GEMM of the default design.

    python -m benchmarks sparsity [--size M N K] [--seed S] [--no-docs]

A projection, not a measurement: the zero-skipping front end is not in the CE yet. The GEMM is
mapped by the tiler (``gen.compiler.gemm.plan_gemm``, the program ``fetta run`` executes), and each
output tile's rows are scheduled by the reference scheduler (``sim.zs_gemm.project_gemm``: a
staging buffer per CE, one lookahead-only schedule per PE row, the buffer refilled with ``f``
vectors per cycle); dense cycles are the passes' static count, which the emulator and the RTL
reproduce. Rows: random zeros in IA (the operand the rows scan), in IB, in both, and IA from a ReLU
(``relu(X W)``, Gaussian ``X``, ``W``). Columns: the effectual MACs (both operands non-zero), the
ideal speedup (effectual MACs only, capped by the buffer depth), and the projected speedup for
buffer depths 4 (seed 001's), 6 and 8 (a row may take any slot), at refill 1 (today's distribution
networks: one IA and one IB vector per CE per cycle), 2, 4 and unlimited, with every CE in lock step
(one ``GEMM`` drives them all), and with the CEs decoupled; then the grids of the 16 CEs at the
refill the unified memory allows; then the area of the front end that exists as a block
(``hdl/zs_rows.py``, ``fetta synth``) against the CE's. Writes the tables into ``docs/zero_skip.md``
and the plot ``docs/img/zero_skip_projection.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import time
from pathlib import Path

import numpy as np

from benchmarks._docs import publish

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "zero_skip.md"
PNG = HERE.parent / "docs" / "img" / "zero_skip_projection.png"
BEGIN, END = "<!-- sparsity-benchmark:begin -->", "<!-- sparsity-benchmark:end -->"
#: (column label, buffer depth, refill per cycle, which cycles)
COLUMNS = [("D4 f1", 4, 1, "lockstep"), ("D4 f2", 4, 2, "lockstep"), ("D4 f-inf", 4, None, "lockstep"),
           ("D6 f4", 6, 4, "lockstep"), ("D6 f-inf", 6, None, "lockstep"), ("D8 f4", 8, 4, "lockstep"),
           ("D8 f-inf", 8, None, "lockstep"), ("D8 f-inf, CEs decoupled", 8, None, "decoupled")]
#: buffer depth of the grid comparison
GRID_DEPTH = 8
#: front-end settings whose area is measured: (depth, lookahead, refill)
AREAS = ((4, 3, 1), (8, 7, 1), (8, 7, 4))
ZEROS = (0.0, 0.5, 0.75, 0.9)
#: grids of the 16 CEs compared at the refill the unified memory allows (``sim.zs_gemm.feed_limit``)
GRIDS = ((1, 16, 1), (2, 8, 1), (4, 4, 1))


def operands(kind: str, zeros: float, size, rng) -> tuple[np.ndarray, np.ndarray]:
    """``A [M, K]``, ``B [K, N]`` with ``zeros`` of random zeros in ``kind`` (``IA``, ``IB``, ``both``)
    or IA from a ReLU (``relu``)."""
    M, N, K = size
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    if kind == "relu":
        A = np.maximum(A @ rng.standard_normal((K, K)).astype(np.float32), 0)
    if kind in ("IA", "both"):
        A[rng.random(A.shape) < zeros] = 0
    if kind in ("IB", "both"):
        B[rng.random(B.shape) < zeros] = 0
    return A, B


def cases():
    return ([("IA", z) for z in ZEROS] + [("IB", z) for z in ZEROS[1::2]] + [("both", z) for z in ZEROS[1::2]]
            + [("relu", None)])


def measure(size, seed: int, advance=lambda n: None) -> list[dict]:
    from gen.design.config import FettaConfig
    from sim.zs_gemm import project_gemm

    base = FettaConfig()
    rows = []
    for kind, zeros in cases():
        A, B = operands(kind, zeros or 0.0, size, np.random.default_rng(seed))
        row = {"kind": kind, "zeros": zeros}
        for label, depth, refill, which in COLUMNS:
            cfg = dataclasses.replace(base, zero_skip_depth=depth, zero_skip_lookahead=depth - 1)
            p = project_gemm(cfg, A, B, refill)
            row[label] = p.speedup(which)
        row.update(dense=p.dense, grid=p.grid, effectual=p.effectual / p.macs, ideal=p.ideal(4), ideal8=p.ideal(8))
        rows.append(row)
        advance(1)
    return rows


def measure_grids(size, seed: int, advance=lambda n: None) -> list[dict]:
    """Per grid of :data:`GRIDS`: dense cycles, the refill the memory allows, and the speedup at
    depth :data:`GRID_DEPTH` with that refill for 50 % and 90 % zeros in IA."""
    from gen.design.config import FettaConfig
    from sim.zs_gemm import feed_limit, project_gemm

    cfg = dataclasses.replace(FettaConfig(), zero_skip_depth=GRID_DEPTH, zero_skip_lookahead=GRID_DEPTH - 1)
    out = []
    for grid in GRIDS:
        row = {"grid": grid, "refill": feed_limit(cfg, grid)}
        for z in (0.5, 0.9):
            A, B = operands("IA", z, size, np.random.default_rng(seed))
            p = project_gemm(cfg, A, B, row["refill"], grid=grid)
            row["dense"], row[z] = p.dense, p.speedup()
        out.append(row)
        advance(1)
    return out


def measure_area(advance=lambda n: None) -> dict:
    """``fetta synth --top`` of the CE and of the OS front end (``hdl/zs_rows.py``) at :data:`AREAS`."""
    from gen.design.config import FettaConfig
    from gen.toolflow.synth import synth_block

    base = FettaConfig()
    out = {"ce": synth_block("ce", base)}
    advance(1)
    for depth, look, refill in AREAS:
        cfg = dataclasses.replace(base, zero_skip_depth=depth, zero_skip_lookahead=look, zero_skip_refill=refill)
        out[(depth, look, refill)] = synth_block("zs_rows", cfg)
        advance(1)
    return out


def render_area(area: dict) -> list[str]:
    ce = area["ce"]
    lines = ["", f"Area of the OS front end (`fetta synth --top zs_rows`, Yosys {ce.yosys}) against the CE's "
             f"({ce.area_ge:,.0f} GE, {ce.flip_flops:,} flip-flops, `fetta synth --top ce`); goal: at most 10 % of the CE:",
             "", "| depth | lookahead | pairs per cycle | cells | flip-flops | area (GE) | of the CE |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for depth, look, refill in AREAS:
        r = area[(depth, look, refill)]
        lines.append(f"| {depth} | {look} | {refill} | {r.cells:,} | {r.flip_flops:,} | {r.area_ge:,.0f} | "
                     f"{r.area_ge / ce.area_ge:.1%} |")
    return lines


def render(rows: list[dict], grids: list[dict], area: dict, size, seed: int, seconds: float) -> str:
    M, N, K = size
    head = ("| zeros in | zeros | effectual MACs | ideal D4 / D8 | " + " | ".join(c[0] for c in COLUMNS) + " |\n"
            "|---|---:|---:|---:|" + "---:|" * len(COLUMNS))
    lines = [f"Projected speedup of zero skipping on the {M}x{K} @ {K}x{N} GEMM of the default design "
             f"(grid {rows[0]['grid']}, {rows[0]['dense']:,} dense cycles, the passes' static count), "
             f"`python -m benchmarks sparsity` (seed {seed}), {seconds:.0f} s on {platform.machine()}; "
             f"D: staging-buffer depth (each row may take any of its D slots: lookahead D - 1), f: vectors "
             f"per cycle refilling it; CEs in lock step unless said.", "", head]
    for r in rows:
        z = "ReLU" if r["kind"] == "relu" else f"{r['zeros']:.0%}"
        where = "IA (ReLU of X W)" if r["kind"] == "relu" else r["kind"]
        lines.append(f"| {where} | {z} | {r['effectual']:.1%} | {r['ideal']:.2f}x / {r['ideal8']:.2f}x | "
                     + " | ".join(f"{r[c[0]]:.2f}x" for c in COLUMNS) + " |")
    lines += ["", "The same GEMM on other grids of the 16 CEs, at the refill the unified memory's two read "
              f"ports allow (`sim.zs_gemm.feed_limit`, bank conflicts aside), depth {GRID_DEPTH}, CEs in lock step:", "",
              "| grid (gm, gn, gk) | dense cycles | distinct IA + IB vectors per k | refill allowed | "
              "50 % zeros in IA | 90 % zeros in IA |", "|---|---:|---:|---:|---:|---:|"]
    for g in grids:
        gm, gn, gk = g["grid"]
        lines.append(f"| {g['grid']} | {g['dense']:,} | {gm * gk} + {gn * gk} | {g['refill']} | "
                     f"{g[0.5]:.2f}x | {g[0.9]:.2f}x |")
    return "\n".join(lines + render_area(area))


def plot(rows: list[dict], png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ia = [r for r in rows if r["kind"] == "IA"]
    xs = [100 * r["zeros"] for r in ia]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, [r["ideal"] for r in ia], "k--", label="ideal, depth 4")
    ax.plot(xs, [r["ideal8"] for r in ia], "k:", label="ideal, depth 8")
    for label, *_ in COLUMNS[:-1]:
        ax.plot(xs, [r[label] for r in ia], marker="o", label=label)
    ax.axhline(1.7, color="grey", linewidth=0.6)
    ax.axhline(3.0, color="grey", linewidth=0.6)
    ax.set_xlabel("random zeros in IA (%)")
    ax.set_ylabel("projected speedup vs dense")
    ax.set_title("Zero skipping on the 256^3 GEMM (projection)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    png.parent.mkdir(exist_ok=True)
    fig.savefig(png, dpi=120)
    print(f"written to {png}")


def main(argv=None) -> int:
    from gen.progress import progress

    p = argparse.ArgumentParser(prog="python -m benchmarks sparsity", description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, nargs=3, default=(256, 256, 256), metavar=("M", "N", "K"))
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-docs", action="store_true", help="print the table only")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    with progress(len(cases()) + len(GRIDS) + 1 + len(AREAS), "sparsity", True) as advance:
        rows = measure(tuple(args.size), args.seed, advance)
        grids = measure_grids(tuple(args.size), args.seed, advance)
        area = measure_area(advance)
    publish(render(rows, grids, area, args.size, args.seed, time.perf_counter() - t0), args.no_docs, DOC, BEGIN,
            END, "Zero skipping")
    if not args.no_docs:
        plot(rows, PNG)
    return 0
