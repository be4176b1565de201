"""Host-side API of the RTL simulations: run instruction jobs or a GEMM plan on the emitted Verilog.

The cocotb code that plays the host inside the simulator is :mod:`sim.benches.system_bench`; this module
writes its job file, builds the design (cached, :mod:`sim.runner`), runs the bench and reads the rows
and cycle counts back. Nothing here imports cocotb.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

import hdl
from gen.compiler.gemm import GemmPlan, assemble_y, read_y_rows
from gen.design.isa import Geometry, Opcode, decode, gemm_macs
from gen.errors import FettaError
from sim.emulator import Emulator
from sim.runner import build, elaborate, run

#: the cocotb module that plays the host (:mod:`sim.benches.system_bench`)
BENCH = "sim.benches.system_bench"


class RtlError(FettaError):
    """A run on the RTL stopped with an error code (the design is wrong, not the input: exit code 1)."""

    exit_code = 1


def write_jobs(path, config, jobs) -> None:
    """``jobs``: dicts with keys ``uwrites`` [(half, addr, rows_bits)], ``awrites`` [(addr, rows_bits)],
    ``prog`` [words], ``half``, ``ureads`` [(half, addr, n)], ``areads`` [(addr, n)], ``limit``."""
    L = config.lanes
    d = {"meta": np.array([L, config.elem_bits, config.acc_bits, len(jobs)])}
    for j, job in enumerate(jobs):
        p = f"j{j}_"
        ua, uh, ud = [], [], []
        for half, addr, rows in job.get("uwrites", []):
            rows = np.asarray(rows, np.uint64).reshape(-1, L)
            ua += list(range(addr, addr + len(rows)))
            uh += [half] * len(rows)
            ud.append(rows)
        d[p + "uaddr"] = np.array(ua, np.int64)
        d[p + "uhalf"] = np.array(uh, np.int64)
        d[p + "udata"] = np.concatenate(ud) if ud else np.zeros((0, L), np.uint64)
        aa, ad = [], []
        for addr, rows in job.get("awrites", []):
            rows = np.asarray(rows, np.uint64).reshape(-1, L)
            aa += list(range(addr, addr + len(rows)))
            ad.append(rows)
        d[p + "aaddr"] = np.array(aa, np.int64)
        d[p + "adata"] = np.concatenate(ad) if ad else np.zeros((0, L), np.uint64)
        d[p + "prog"] = np.array([format(int(w), "x") for w in job["prog"]])
        d[p + "half"] = np.array(job.get("half", 0))
        d[p + "limit"] = np.array(job.get("limit", 1_000_000))
        ur, urh = [], []
        for half, addr, n in job.get("ureads", []):
            ur += list(range(addr, addr + n))
            urh += [half] * n
        d[p + "ur"] = np.array(ur, np.int64)
        d[p + "urhalf"] = np.array(urh, np.int64)
        ar = []
        for addr, n in job.get("areads", []):
            ar += list(range(addr, addr + n))
        d[p + "ar"] = np.array(ar, np.int64)
    np.savez(path, **d)


def run_jobs_rtl(config, jobs, sim: str, verilog: str | None = None, trace: str | Path | None = None):
    """Build (cached) the accelerator for ``config``, run ``jobs`` on ``sim``; returns the output dict
    and the :class:`sim.runner.SimBuild`. ``verilog``: the design's text when the caller already
    elaborated it (else :func:`sim.runner.elaborate`). ``trace``: write an FST waveform of every
    signal of the design over the whole simulation to this file (a build with tracing, cached
    apart from the plain one)."""
    text = verilog if verilog is not None else elaborate("fetta", config)
    sb = build(text, hdl.module_name("fetta"), sim, waves=trace is not None)
    with tempfile.TemporaryDirectory() as tmp:
        inp = Path(tmp) / "jobs.npz"
        write_jobs(inp, config, jobs)
        rd = run(sb, BENCH, env={"FETTA_BENCH_IN": str(inp)}, waves_file=trace)
    with np.load(rd / "out.npz") as z:
        return {k: z[k] for k in z.files}, sb


def plan_jobs(config, plan):
    """One job per pass of a :class:`gen.compiler.gemm.GemmPlan` (operands as bit patterns)."""
    emu = Emulator(config)
    jobs = []
    for p in plan.passes:
        jobs.append({"uwrites": [(p.half, a, emu.to_elem_bits(rows)) for a, rows in p.writes],
                     "prog": p.words, "half": p.half,
                     "ureads": [(p.half, a, n) for a, n in read_y_rows(p)]})
    return jobs


def run_plan_rtl(config, plan: GemmPlan, sim: str, verilog: str | None = None, stats: dict | None = None,
                 trace: str | Path | None = None):
    """``(Y, cycles, tcu_macs)`` of a GEMM plan executed on the RTL (as :func:`gen.compiler.gemm.run_emulator`).
    ``stats`` (optional) receives ``sim_cycles``: every clock cycle simulated, host transfers included.
    ``trace``: an FST waveform of the run (:func:`run_jobs_rtl`)."""
    emu = Emulator(config)
    out, _ = run_jobs_rtl(config, plan_jobs(config, plan), sim, verilog, trace)
    if stats is not None:
        stats["sim_cycles"] = int(out["sim_cycles"])
    cycles = 0
    results = []
    geo = Geometry.of(config)
    tcu_macs = 0
    for j, p in enumerate(plan.passes):
        if int(out[f"j{j}_error"]) != 0:
            raise RtlError(f"pass {j} stopped with error code {int(out[f'j{j}_error'])}", field="program")
        cycles += int(out[f"j{j}_cycles"])
        rows = out[f"j{j}_urd"]
        chunks, pos = [], 0
        for _, n in read_y_rows(p):
            chunks.append(emu.from_elem_bits(rows[pos:pos + n]))
            pos += n
        results.append(chunks)
        tcu_macs += sum(gemm_macs(decode(w), geo) for w in p.words if decode(w).opcode == Opcode.GEMM)
    return assemble_y(plan, results), cycles, tcu_macs


__all__ = ["BENCH", "RtlError", "write_jobs", "run_jobs_rtl", "plan_jobs", "run_plan_rtl"]
