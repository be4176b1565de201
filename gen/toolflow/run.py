"""The ``fetta run`` flow as a library: execute a layer's phases on the emulator or the RTL.

Every format is compiled by :mod:`gen.compiler` and executed by :mod:`gen.toolflow.execute`
(:func:`run_compiled_layer`; replayed on the RTL for ``icarus`` / ``verilator``); ``dense`` layers
can also run one GEMM per phase, tiled by :mod:`gen.compiler.gemm` through the host port
(:func:`run_dense`, ``fetta run --dram rule``). The CLI (:mod:`gen.cli.run`) and the demo call these
functions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gen.compiler import compile_layer
from gen.compiler.gemm import plan_gemm
from gen.compiler.dma import lower_dma
from gen.compiler.program import gemm_dataflows
from gen.progress import progress
from gen.toolflow.dmarun import execute_dma, rtl_check_dma
from gen.toolflow.execute import ExecutionError, execute, rtl_check, run_gemm

SIMS = ("emulator", "icarus", "verilator")
#: how compiled runs get their tensors from and back to DRAM (:func:`run_compiled_layer`)
DRAM_MODES = ("rule", "dma")
#: phase -> (result key, operands from the inputs)
PHASES = {
    "fp": ("Y", lambda a: (a["X"], a["core_0"])),
    "bp": ("dX", lambda a: (a["dY"], a["core_0"].T)),
    "wg": ("dcore_0", lambda a: (a["X"].T, a["dY"])),
}


def phases_of(phase: str) -> list[str]:
    """The phases one ``--phase`` value runs (``train``: FP, BP and WG)."""
    return ["fp", "bp", "wg"] if phase == "train" else [phase]


def max_rel_err(results: dict, golden: dict) -> float:
    """``max |R - G| / max |G|`` over the golden model's result keys."""
    return max(float(np.max(np.abs(results[k] - ref)) / max(float(np.max(np.abs(ref))), np.finfo(np.float64).tiny))
               for k, ref in golden.items())


def trace_files(trace, phases) -> dict:
    """Waveform file per phase of a dense run: ``trace`` itself for one phase, else
    ``<stem>.<phase><suffix>`` beside it (each phase is one simulation); ``{}`` without ``trace``."""
    if trace is None:
        return {}
    trace = Path(trace)
    if len(phases) == 1:
        return {phases[0]: trace}
    return {ph: trace.with_name(f"{trace.stem}.{ph}{trace.suffix}") for ph in phases}


def run_plan(config, plan, sim: str, advance=None, trace=None, what: str = ""):
    """A dense GEMM plan on ``sim``: ``(Y, timeline, tcu_macs)``, the timeline end to end
    (:meth:`GemmPlan.timeline`) once ``sim``'s compute cycles are found equal to the plan's static
    timing (:class:`ExecutionError` otherwise; ``what`` prefixes its message)."""
    Y, c, tm = run_gemm(config, plan, sim, advance=advance, trace=trace)
    t = plan.timeline(config)
    if t.compute_cycles != c:
        raise ExecutionError(f"{what}{sim} ran {c} compute cycles, the plan's static timing says "
                             f"{t.compute_cycles}", field="program")
    return Y, t, tm


def run_dense(config, inputs, phases, sim: str, show_progress: bool = False, trace=None) -> dict:
    """The GEMM of each phase of a ``dense`` layer, tiled by :mod:`gen.compiler.gemm`, executed on ``sim``:
    ``results`` (npz key -> float32 array), ``cycles`` (end to end: compute and the DRAM stalls of
    :meth:`GemmPlan.timeline`), ``compute_cycles``, ``dram_stall_cycles``, ``dram_bytes``, ``macs``,
    ``tcu_macs``, ``passes``, ``grids``, ``dataflows`` (passes per dataflow). ``trace``: FST waveform(s)
    of the RTL runs (:func:`trace_files`)."""
    traces = trace_files(trace, phases)
    r = {"results": {}, "cycles": 0, "compute_cycles": 0, "dram_stall_cycles": 0, "dram_bytes": 0, "macs": 0,
         "tcu_macs": 0, "passes": 0, "grids": [], "dataflows": {}}
    for phase in phases:
        key, operands = PHASES[phase]
        plan = plan_gemm(config, *operands(inputs))
        with progress(len(plan.passes), f"{phase} on {sim}", enabled=show_progress) as bar:
            Y, t, tm = run_plan(config, plan, sim, advance=bar, trace=traces.get(phase), what=f"{phase}: ")
        r["results"][key] = Y.astype(np.float32)
        r["cycles"] += t.cycles
        r["compute_cycles"] += t.compute_cycles
        r["dram_stall_cycles"] += t.dram_stall_cycles
        r["dram_bytes"] += t.dram_bytes
        for p in plan.passes:
            for df in gemm_dataflows(p.program):
                r["dataflows"][df] = r["dataflows"].get(df, 0) + 1
        r["macs"] += plan.macs
        r["tcu_macs"] += tm
        r["passes"] += len(plan.passes)
        r["grids"].append(list(plan.grid))
    return r


def run_compiled_layer(spec, phase: str, config, inputs, sim: str, show_progress: bool = False, trace=None,
                       dram: str = "rule", **compile_opts):
    """Tensorized formats: ``(program, emulator execution, rtl)``; on ``icarus``/``verilator`` the
    runs are replayed on the RTL (:func:`gen.toolflow.execute.rtl_check` raises on any difference, ``rtl``
    is then True), on ``emulator`` ``rtl`` is None. ``trace``: an FST waveform of the whole replay (every
    run, one simulation). ``dram``: ``"rule"`` (the host writes and reads each run's tensors; DRAM time by
    :mod:`gen.design.timing`) or ``"dma"`` (the runs move them with DMA instructions,
    :mod:`gen.compiler.dma`; the compiler chooses between its variants by that count, and the execution
    is a :class:`gen.toolflow.dmarun.DmaExecution` whose cycles are the jobs' own). ``compile_opts``: :func:`gen.compiler.compile_layer`'s (``pieces``, ``relayout``)."""
    if dram not in DRAM_MODES:
        raise ValueError(f"dram must be one of {DRAM_MODES}, got {dram!r}")
    prog = compile_layer(spec, phase, config, dram=dram, **compile_opts)
    dprog = lower_dma(prog, config) if dram == "dma" else None
    count = len(dprog.jobs) if dprog else len(prog.runs)
    with progress(count, f"{phase} on emulator{' (DMA)' if dprog else ''}", enabled=show_progress) as bar:
        return (prog, *execute_program(prog, inputs, config, sim, dprog, progress=bar, trace=trace))


def execute_program(prog, inputs, config, sim: str, dprog=None, progress=None, trace=None):
    """``(execution, rtl)`` of a compiled ``prog`` on ``inputs``: its DMA jobs ``dprog``
    (:func:`gen.compiler.dma.lower_dma` of it; :func:`gen.toolflow.dmarun.execute_dma`) or, without
    them, its runs through the host port (:func:`gen.toolflow.execute.execute`); on ``icarus`` /
    ``verilator`` replayed on the RTL (``rtl`` True; a difference raises), on ``emulator`` ``rtl`` is None."""
    if dprog is not None:
        ex = execute_dma(dprog, inputs, config, progress=progress)
        return ex, rtl_check_dma(ex, config, sim, trace=trace) if sim != "emulator" else None
    ex = execute(prog, inputs, config, progress=progress)
    return ex, rtl_check(ex, config, sim, trace=trace) if sim != "emulator" else None


__all__ = ["SIMS", "DRAM_MODES", "PHASES", "phases_of", "max_rel_err", "trace_files", "run_plan", "run_dense", "run_compiled_layer",
           "execute_program"]
