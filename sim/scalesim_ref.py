"""SCALE-Sim 3.0 as an outside check of the TPU baseline's GEMM timing (issue 15).

SCALE-Sim (PyPI ``scalesim``) needs numpy < 2.3, so it lives in an environment of its own,
``.venv-scalesim`` (``make scalesim``; ``FETTA_SCALESIM_PYTHON`` names another interpreter), and
:func:`scalesim_cycles` runs ``sim/harness/scalesim_gemm.py`` there.

What is compared, for a dense GEMM ``Y[M, N] = A[M, K] @ B[K, N]`` on one ``R x C`` array
(``R = C = 16``, the ``tpu`` capability set of :mod:`gen.compiler.capabilities`):

* ``tpu_model``: the compute cycles of ``fetta model --arch tpu`` (the compiled program, the cycles
  the emulator counts; output-stationary, the dataflow the tpu baseline is timed with);
* ``rule``: one GEMM instruction of the dataflow on the square array, timed by the engine's rule
  (:func:`gen.design.isa.os_gemm_cycles`: ``ceil(M/R) * ceil(N/C)`` tiles of depth ``K``;
  :func:`gen.design.isa.stationary_gemm_cycles`: ``ceil(K/R) * ceil(N/C)`` weight tiles streaming
  ``M`` rows).

Both tools cut the GEMM into the same *folds* (tiles) and stream the same vectors per fold. They
differ in one documented point: SCALE-Sim runs folds back to back, each paying the array's fill
and drain (``R + C - 2`` cycles: the skewed inputs enter, the last output leaves) and, in WS, the
weight load (``R`` more), while this datapath overlaps them with the next fold (double-buffered
Psum registers, shadow weight registers, :func:`gen.design.isa.tile_period`) and pays them once per
instruction. :func:`fold_overhead` is that per-fold time, so ``scalesim - (folds - 1) *
fold_overhead`` is SCALE-Sim's count with the folds overlapped, the quantity both model the same way.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gen.compiler.capabilities import capabilities
from gen.compiler.estimate import model_compiled
from gen.design.config import FettaConfig
from gen.design.isa import Geometry, os_gemm_cycles, stationary_gemm_cycles
from gen.errors import FettaError
from gen.workload.spec import parse_spec

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "sim" / "harness" / "scalesim_gemm.py"
#: dense GEMMs (M, N, K) of the comparison: the issue's four and two more aspect ratios
SHAPES = ((256, 256, 256), (64, 64, 64), (32, 768, 768), (64, 128, 1024), (128, 512, 256), (512, 64, 128))
DATAFLOWS = ("os", "ws")


class ScaleSimError(FettaError):
    kind = "scalesim"


def scalesim_python() -> Path:
    """The interpreter that has ``scalesim`` (``FETTA_SCALESIM_PYTHON``, else ``.venv-scalesim``)."""
    env = os.environ.get("FETTA_SCALESIM_PYTHON")
    py = Path(env) if env else ROOT / ".venv-scalesim" / "bin" / "python"
    if not py.exists():
        raise ScaleSimError(f"no SCALE-Sim environment at {py}: run `make scalesim` (or set FETTA_SCALESIM_PYTHON)")
    return py


def scalesim_cycles(gemms, rows: int = 16, cols: int = 16) -> tuple[str, list[dict]]:
    """SCALE-Sim's version and its results for ``gemms`` (``(M, N, K, dataflow)`` each) on a
    ``rows x cols`` array (``sim/harness/scalesim_gemm.py`` says what each result holds)."""
    job = {"rows": rows, "cols": cols, "gemms": [list(g) for g in gemms]}
    # SCALE-Sim's own deprecation warnings (numpy) are not ours to turn into errors
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    proc = subprocess.run([str(scalesim_python()), str(HARNESS)], input=json.dumps(job), capture_output=True,
                          text=True, check=False, env=env)
    if proc.returncode != 0:
        raise ScaleSimError(f"SCALE-Sim failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    out = json.loads(proc.stdout)
    return out["version"], out["results"]


def folds(M: int, N: int, K: int, dataflow: str, rows: int, cols: int) -> int:
    """Tiles of the array over the GEMM: outputs (OS) or weights (WS) per ``rows x cols``."""
    if dataflow == "os":
        return math.ceil(M / rows) * math.ceil(N / cols)
    return math.ceil(K / rows) * math.ceil(N / cols)


def fold_overhead(dataflow: str, rows: int, cols: int) -> int:
    """Cycles SCALE-Sim spends per fold besides streaming (module docstring)."""
    return rows + cols - 2 + (rows if dataflow == "ws" else 0)


def rule_cycles(M: int, N: int, K: int, dataflow: str, geo: Geometry) -> int:
    """One GEMM instruction of ``dataflow`` on the array of ``geo``, by the engine's timing rule."""
    n = folds(M, N, K, dataflow, geo.ce_rows, geo.ce_cols)
    return os_gemm_cycles(K, n, geo) if dataflow == "os" else stationary_gemm_cycles(M, n, geo)


def tpu_model_cycles(M: int, N: int, K: int, config: FettaConfig) -> int:
    """Compute cycles of ``fetta model --arch tpu`` for the GEMM as a dense layer's fp
    (``X[M, K] @ W[K, N]``)."""
    spec = parse_spec({"name": f"gemm{M}x{N}x{K}", "format": "dense", "in_modes": [K],
                                "out_modes": [N], "batch": M})
    return int(model_compiled(spec, "fp", config, arch="tpu").compute_cycles)


@dataclass(frozen=True)
class Row:
    """One GEMM and dataflow: SCALE-Sim's cycles and the engine's."""

    M: int
    N: int
    K: int
    dataflow: str
    folds: int
    scalesim: int
    scalesim_overlapped: int
    rule: int
    tpu_model: int | None

    @property
    def raw_ratio(self) -> float:
        """SCALE-Sim's cycles over the engine's (the TPU model's where it has one)."""
        return self.scalesim / (self.tpu_model or self.rule)

    def overlapped_diff(self, ours: int) -> float:
        """Relative difference of ``ours`` from SCALE-Sim with the folds overlapped."""
        return abs(ours - self.scalesim_overlapped) / self.scalesim_overlapped


def compare(shapes=SHAPES, dataflows=DATAFLOWS, config: FettaConfig | None = None,
            progress=None) -> tuple[str, list[Row]]:
    """SCALE-Sim against the engine for every shape and dataflow (OS also against the compiled TPU
    model); returns SCALE-Sim's version and the rows."""
    base = config or FettaConfig()
    tpu = capabilities("tpu").config(base)
    geo = Geometry.of(tpu)
    gemms = [(M, N, K, df) for (M, N, K) in shapes for df in dataflows]
    ver, results = scalesim_cycles(gemms, geo.ce_rows, geo.ce_cols)
    rows = []
    for (M, N, K, df), res in zip(gemms, results):
        n = folds(M, N, K, df, geo.ce_rows, geo.ce_cols)
        rows.append(Row(M, N, K, df, n, res["cycles"],
                        res["cycles"] - (n - 1) * fold_overhead(df, geo.ce_rows, geo.ce_cols),
                        rule_cycles(M, N, K, df, geo),
                        tpu_model_cycles(M, N, K, base) if df == "os" else None))
        if progress:
            progress(1)
    return ver, rows


__all__ = ["SHAPES", "DATAFLOWS", "ScaleSimError", "Row", "scalesim_python", "scalesim_cycles", "folds",
           "fold_overhead", "rule_cycles", "tpu_model_cycles", "compare"]
