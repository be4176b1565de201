"""Run SCALE-Sim 3.0 on dense GEMMs; executed by the Python of ``.venv-scalesim`` (``make scalesim``).

Reads a JSON object from standard input, ``{"rows": R, "cols": C, "gemms": [[M, N, K, "os" | "ws"], ...]}``,
runs each GEMM ``Y[M, N] = A[M, K] @ B[K, N]`` as a one-layer GEMM topology on an ``R x C`` array in
SCALE-Sim's ``CALC`` bandwidth mode (SRAMs large enough that nothing stalls), and prints one JSON
object: ``{"version": ..., "results": [{"M", "N", "K", "dataflow", "cycles", "cycles_with_prefetch",
"compute_util"}, ...]}``. ``cycles`` is SCALE-Sim's ``Total Cycles`` of ``COMPUTE_REPORT.csv``
(the compute of the array, without the DRAM prefetch). Only the standard library and ``scalesim``
are imported: this file runs outside the project's environment (``sim/scalesim_ref.py`` calls it).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

CONFIG = """[general]
run_name = gemm
[run_presets]
InterfaceBandwidth = CALC
UseRamulatorTrace = False
[architecture_presets]
ArrayHeight = {rows}
ArrayWidth = {cols}
ifmapsramszkB = 4096
filtersramszkB = 4096
ofmapsramszkB = 4096
IfmapOffset = 0
FilterOffset = 10000000
OfmapOffset = 20000000
Dataflow = {dataflow}
ReadRequestBuffer = 32
WriteRequestBuffer = 32
[layout]
IfmapCustomLayout = False
FilterCustomLayout = False
IfmapSRAMBankBandwidth = 10
IfmapSRAMBankNum = 10
IfmapSRAMBankPort = 2
FilterSRAMBankBandwidth = 10
FilterSRAMBankNum = 10
FilterSRAMBankPort = 2
[sparsity]
SparsitySupport = false
SparseRep = ellpack_block
OptimizedMapping = false
BlockSize = 8
RandomNumberGeneratorSeed = 40
"""


def run_one(rows: int, cols: int, M: int, N: int, K: int, dataflow: str) -> dict:
    from scalesim.scale_sim import scalesim

    with tempfile.TemporaryDirectory(prefix="scalesim-") as tmp:
        d = Path(tmp)
        (d / "gemm.cfg").write_text(CONFIG.format(rows=rows, cols=cols, dataflow=dataflow))
        (d / "gemm.csv").write_text(f"Layer, M, N, K,\ngemm, {M}, {N}, {K},\n")
        (d / "layout.csv").write_text("Layer name,\n")   # required by 3.0, unused without custom layouts
        sim = scalesim(save_disk_space=True, verbose=False, config=str(d / "gemm.cfg"),
                       topology=str(d / "gemm.csv"), layout=str(d / "layout.csv"), input_type_gemm=True)
        with contextlib.redirect_stdout(io.StringIO()):
            sim.run_scale(top_path=str(d))
        with open(d / "gemm" / "COMPUTE_REPORT.csv") as f:
            head, row = [[x.strip() for x in r] for r in list(csv.reader(f))[:2]]
    rec = dict(zip(head, row))
    return {"M": M, "N": N, "K": K, "dataflow": dataflow, "cycles": int(rec["Total Cycles"]),
            "cycles_with_prefetch": int(rec["Total Cycles (incl. prefetch)"]),
            "compute_util": float(rec["Compute Util %"]) / 100}


def main() -> int:
    job = json.load(sys.stdin)
    out = [run_one(job["rows"], job["cols"], *g) for g in job["gemms"]]
    json.dump({"version": version("scalesim"), "results": out}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
