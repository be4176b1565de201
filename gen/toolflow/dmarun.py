"""Execute a compiled layer whose runs move their own data: :func:`gen.compiler.dma.lower_dma`'s jobs.

:func:`execute_dma` runs the jobs on the emulator against its ``dram``: before a job the host packs
the images its loads need that no run stored (inputs, host slices, derived tensors) into their DRAM
regions (and checks that the images the lowering left in a half, instead of loading them again,
are the host's); after a job it unpacks what the job's stores left in DRAM and does the host operations of
the runs whose data is then complete (those only results need, :func:`gen.compiler.dma.needed`,
after the last job: their inputs may come from late stores). The end-to-end cycles are the sum of the jobs' cycles: the
controller's own count of compute, DMA transfers and the waits between them
(:class:`gen.design.control.Clock`), with nothing added by a formula.

:func:`rtl_check_dma` replays the jobs on the RTL with the bench's AXI4 RAM preloaded with every
image the host packed (each region is packed once, before any DMA reads it, so preloading them all
is the same as the host writing each just in time) and compares each job's cycles and error, and
every byte the stores wrote, with the emulator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from gen.compiler.dma import DmaProgram, dma_timeline
from gen.design.config import FettaConfig
from gen.design.isa import ErrorCode, Geometry, assemble
from gen.design.timing import program_cycles
from gen.toolflow.execute import Derive, Execution, ExecutionError, HostStore, replay
from sim.emulator import DRAM_BYTES, Emulator


@dataclass
class DmaExecution(Execution):
    """An :class:`Execution` of DMA jobs: the DRAM image the host packed before the first job,
    the DRAM after the last, and which of its bytes the stores wrote (what the RTL must reproduce)."""

    dram_in: np.ndarray | None = None
    dram_out: np.ndarray | None = None
    stored: np.ndarray | None = None


def execute_dma(dprog: DmaProgram, inputs: Mapping[str, np.ndarray], config: FettaConfig, progress=None,
                derive: Derive | None = None) -> DmaExecution:
    """Run the jobs of ``dprog`` on the emulator (module docstring)."""
    prog = dprog.source
    geo = Geometry.of(config)
    emu = Emulator(config, dram_bytes=max(DRAM_BYTES, dprog.dram_bytes))
    dram_in = np.zeros(len(emu.dram), np.uint8)
    stored = np.zeros(len(emu.dram), bool)
    host = HostStore(prog, inputs, derive)
    # the stores the host operations after each run wait for (a late store feeds only results)
    pending = {i: 0 for i in range(len(prog.runs))}
    for job in dprog.jobs:
        for t in job.transfers:
            pending[t.run] += not t.load and not t.late
    ran, next_ops = set(), 0
    trace, jobs, tcu = [], [], 0
    for k, job in enumerate(dprog.jobs):
        for t in job.transfers:
            if t.load and t.host_packed:
                emu.write_dram(t.dram, host.pack(emu, t.name, t.layout))
                n = -(-t.layout.rows // geo.dma_rows) * geo.dma_bytes
                dram_in[t.dram:t.dram + n] = emu.dram[t.dram:t.dram + n]
        if job.run is not None:
            _check_resident(emu, host, prog, job, dprog.resident)
        words = assemble(job.program)
        emu.load_program(words)
        r = emu.run(half=job.half)
        if r.error != ErrorCode.NONE:
            raise ExecutionError(f"job {k} (run {job.run}) stopped with {r.error.name} at pc {r.pc}", field="program")
        tcu += r.macs
        if job.run is not None:
            ran.add(job.run)
        for t in job.transfers:
            if not t.load:
                bits, unknown = emu.read_dram(t.dram, t.layout.rows)
                host.unpack(emu, t.name, t.layout, bits, unknown, f"run {t.run} stores {t.name}")
                n = -(-t.layout.rows // geo.dma_rows) * geo.dma_bytes
                stored[t.dram:t.dram + n] = True
                pending[t.run] -= not t.late
        while next_ops < len(prog.runs) and next_ops in ran and pending[next_ops] == 0:
            host.ops(next_ops, dprog.final_ops)
            next_ops += 1
        trace.append((r.cycles, []))
        jobs.append({"uwrites": [], "prog": words, "half": job.half, "ureads": []})
        if progress is not None:
            progress()
    if [c for c, _ in trace] != [program_cycles(j["prog"], config) for j in jobs]:
        raise ExecutionError("emulator cycles differ from the static timing of the jobs", field="program")
    if next_ops != len(prog.runs):
        raise ExecutionError(f"the host operations after run {next_ops} never ran", field="program")
    host.do(sorted(dprog.final_ops))
    # every job's cycles equal its static count (checked above): the compiler's and the model's timeline
    timeline = dma_timeline(dprog, config)
    return DmaExecution(host.results(), timeline, tcu, len(dprog.jobs), trace, jobs,
                        dram_in=dram_in, dram_out=emu.dram.copy(), stored=stored & ~emu.dram_x)


def _check_resident(emu: Emulator, host: HostStore, prog, job, resident) -> None:
    """The writes of ``job``'s run that the lowering left in the half hold the host's image, every
    element known (the lowering's claim, checked before the run starts)."""
    for run, name in resident:
        if run != job.run:
            continue
        w = next(w for w in prog.runs[run].writes if w.name == name)
        rows = slice(w.addr, w.addr + w.layout.rows)
        if emu.unified_x[job.half][rows].any() or \
                not np.array_equal(emu.unified[job.half][rows], host.pack(emu, name, w.layout)):
            raise ExecutionError(f"run {run}'s {name} is not in its half as the DMA lowering assumed",
                                 field="program")


def rtl_check_dma(ex: DmaExecution, config: FettaConfig, sim: str, trace=None, stats: dict | None = None) -> bool:
    """Replay the jobs of ``ex`` on the RTL (module docstring); :class:`ExecutionError` on any
    difference. ``stats`` receives ``sim_cycles``. Returns ``True``."""
    out = replay(ex, config, sim, trace, stats, dram=ex.dram_in, what="job")
    got = np.asarray(out["dram"], np.uint8)[:len(ex.dram_out)]
    if not np.array_equal(got[ex.stored], ex.dram_out[ex.stored]):
        bad = int(np.flatnonzero(got[ex.stored] != ex.dram_out[ex.stored])[0])
        raise ExecutionError(f"RTL DRAM differs from the emulator's at byte {int(np.flatnonzero(ex.stored)[bad])}",
                             field="program")
    return True


__all__ = ["DmaExecution", "execute_dma", "rtl_check_dma"]
