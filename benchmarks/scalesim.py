"""The TPU baseline's GEMM timing against SCALE-Sim 3.0 (issue 15, deliverable 3).

    python -m benchmarks scalesim [--no-docs]

Runs SCALE-Sim (its own environment, ``make scalesim``) on the dense GEMMs of
:data:`sim.scalesim_ref.SHAPES`, weight- and output-stationary on a 16 x 16 array, and puts beside
each the engine's cycles: one GEMM instruction of that dataflow on the ``tpu`` capability set's
square array, and for OS the compute cycles of ``fetta model --arch tpu`` (the compiled program).
:mod:`sim.scalesim_ref` says what differs (SCALE-Sim runs folds back to back; this datapath overlaps
a fold's fill, drain and weight load with the next) and how the "folds overlapped" column removes
it. The table goes into ``docs/comparison.md`` between the ``scalesim`` markers;
``tests/test_scalesim.py`` keeps the agreement.
"""

from __future__ import annotations

import platform
from pathlib import Path

from benchmarks._docs import measure_and_publish

DOC = Path(__file__).resolve().parent.parent / "docs" / "comparison.md"
BEGIN, END = "<!-- scalesim:begin -->", "<!-- scalesim:end -->"


def table(version: str, rows, seconds: float) -> str:
    head = (f"SCALE-Sim {version} (CALC bandwidth, 16 x 16, `Total Cycles` of its compute report) against the "
            f"engine; {platform.machine()}, {seconds:.0f} s.\n\n"
            "| GEMM M x N x K | dataflow | folds | SCALE-Sim | SCALE-Sim, folds overlapped | engine, 1 instruction "
            "| `fetta model --arch tpu` (compute) | SCALE-Sim / ours (raw) | ours vs overlapped |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---|\n")
    lines = []
    for r in rows:
        diffs = f"rule {100 * r.overlapped_diff(r.rule):.1f} %"
        if r.tpu_model is not None:
            diffs += f", model {100 * r.overlapped_diff(r.tpu_model):.1f} %"
        lines.append(f"| {r.M} x {r.N} x {r.K} | {r.dataflow.upper()} | {r.folds:,} | {r.scalesim:,} | "
                     f"{r.scalesim_overlapped:,} | {r.rule:,} | "
                     f"{'-' if r.tpu_model is None else f'{r.tpu_model:,}'} | {r.raw_ratio:.3f} | {diffs} |")
    return head + "\n".join(lines)


def main(argv: list[str]) -> int:
    from sim.scalesim_ref import DATAFLOWS, SHAPES, compare

    return measure_and_publish(argv, "scalesim", __doc__, len(SHAPES) * len(DATAFLOWS),
                               lambda advance: compare(progress=advance),
                               lambda res, seconds: table(*res, seconds), DOC, BEGIN, END, "Comparison")
