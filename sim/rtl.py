"""Host-side API of the RTL simulations: run instruction jobs or a GEMM plan on the emitted Verilog.

A *job* is a dict: ``uwrites`` [(half, addr, rows_bits)] unified rows to write (bit patterns
``[n, lanes]``), ``awrites`` [(addr, rows_bits)] accumulation rows, ``prog`` [instruction words],
``half`` (the run's ping-pong half), ``ureads`` [(half, addr, n)] and ``areads`` [(addr, n)] rows to
read after the run, ``limit`` (cycles the run may take). The DRAM of the DMA instructions is the
bench's AXI4 RAM (:func:`sim.host_player.axi_ram_verilog`), one for all the jobs of a call. The host of the simulation is played in
Verilog (:mod:`sim.host_player`: the accelerator's host port driven from a command file, no Python
on the simulated clock); this module writes the command file, builds the design with the player
(cached, :mod:`sim.runner`), runs it and reads the rows and cycle counts back. Verilator runs are
stand-alone executables (:func:`sim.runner.build_native`: the C++ main of ``sim/harness/``, no cocotb);
Icarus runs are clocked by the cocotb bench :mod:`sim.benches.host_bench`. Nothing here imports cocotb.
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
from sim.host_player import DEFAULT_LIMIT, DRAM_BYTES, TOP, player_verilog, read_dram, read_output, write_dram, write_script
from sim.runner import build, build_native, elaborate, run, run_native

#: the cocotb module that clocks the host player (:mod:`sim.benches.host_bench`)
BENCH = "sim.benches.host_bench"


class RtlError(FettaError):
    """A run on the RTL stopped with an error code (the design is wrong, not the input: exit code 1)."""

    exit_code = 1


def run_jobs_rtl(config, jobs, sim: str, verilog: str | None = None, trace: str | Path | None = None,
                 dram=None):
    """Build (cached) the accelerator for ``config`` with the host player, run ``jobs`` on ``sim``;
    returns the output dict (per job ``j{j}_cycles``, ``_error``, ``_pc``, ``_host_err``, ``_urd``,
    ``_ard``; ``sim_cycles``: every clock cycle simulated, host port included) and the
    :class:`sim.runner.SimBuild`. ``verilog``: the design's text when the caller already elaborated
    it (else :func:`sim.runner.elaborate`). ``trace``: write an FST waveform of every signal of the
    design over the whole simulation to this file (a build with tracing, cached apart from the plain
    one). ``dram``: the bench's DRAM before the first job (``uint8`` bytes; else zeros): the bench's
    DRAM has :data:`sim.host_player.DRAM_BYTES` bytes, or the next power of two above ``len(dram)``
    (another build); then ``out["dram"]`` is the DRAM after the last job (all of it)."""
    text = verilog if verilog is not None else elaborate("fetta", config)
    geo = Geometry.of(config)
    size = DRAM_BYTES if dram is None else max(DRAM_BYTES, 1 << (len(dram) - 1).bit_length())
    bench = text + player_verilog(text, config.dram_latency, (geo.dram_num, geo.dram_den), size)
    beat_bytes = geo.dma_bytes
    waves = trace is not None
    sb = build_native(bench, TOP, waves=waves) if sim == "verilator" else build(bench, TOP, sim, waves=waves)
    with tempfile.TemporaryDirectory() as tmp:
        script, result = Path(tmp) / "jobs.txt", Path(tmp) / "out.txt"
        commands = write_script(script, config, jobs)
        limit = 2 * commands + sum(job.get("limit", DEFAULT_LIMIT) for job in jobs) + 16
        plusargs = [f"+host_in={script}", f"+host_out={result}"]
        if dram is not None:
            write_dram(Path(tmp) / "dram_in.hex", np.asarray(dram, np.uint8), beat_bytes)
            plusargs += [f"+dram_in={Path(tmp) / 'dram_in.hex'}", f"+dram_out={Path(tmp) / 'dram_out.hex'}"]
        if sim == "verilator":
            sim_cycles = run_native(sb, plusargs, limit, waves_file=trace)
        else:
            rd = run(sb, BENCH, env={"FETTA_HOST_LIMIT": str(limit)}, waves_file=trace, plusargs=plusargs)
            sim_cycles = int((rd / "sim_cycles.txt").read_text())
        out = read_output(result, config, jobs)
        if dram is not None:
            out["dram"] = read_dram(Path(tmp) / "dram_out.hex", beat_bytes)
    out["sim_cycles"] = sim_cycles
    return out, sb


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


__all__ = ["BENCH", "DEFAULT_LIMIT", "RtlError", "run_jobs_rtl", "plan_jobs", "run_plan_rtl"]
