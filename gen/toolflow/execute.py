"""Execute compiled programs: on the instruction-level emulator, and replayed on the RTL.

* :func:`execute` runs a compiled :class:`gen.compiler.Program` of a tensorized layer on the emulator;
  the host store keeps logical arrays and packs them into each run's layouts;
* :func:`rtl_check` replays the runs of an :class:`Execution` on the emitted Verilog (cocotb) and
  checks every row read back and every run's cycle count against the emulator;
* :func:`run_emulator` / :func:`run_gemm` execute a dense :class:`gen.compiler.gemm.GemmPlan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from gen.compiler import Program
from gen.compiler.gemm import GemmPlan, assemble_y, read_y_rows
from gen.design.config import FettaConfig
from gen.design.isa import ErrorCode
from gen.design.timing import Timeline
from gen.errors import FettaError
from gen.workload.network import stacked_value, unstack_results
from sim.rtl import run_jobs_rtl, run_plan_rtl
from sim.emulator import Emulator


class ExecutionError(FettaError):
    """A program stopped with an error code, or the RTL differs from the emulator: the accelerator (or
    the compiler) is wrong, not the user's input, so the CLI exits with 1 (one line, no traceback)."""

    exit_code = 1


@dataclass
class Execution:
    """A program executed on the emulator: results, timing, and what the RTL must reproduce."""

    results: dict[str, np.ndarray]
    #: end-to-end timing: the emulator's compute cycles per run, DRAM transfers by :mod:`gen.design.timing`
    timeline: Timeline
    tcu_macs: int
    runs: int
    #: per run: (cycles, rows read as bit patterns) - what the RTL must reproduce
    trace: list[tuple[int, list[np.ndarray]]]
    jobs: list[dict]
    #: per run: accumulation rows read back as bit patterns (vector programs, :mod:`gen.toolflow.vecrun`)
    atrace: list[list[np.ndarray]] = field(default_factory=list)

    @property
    def cycles(self) -> int:
        """End-to-end cycles (compute and the DRAM stalls it could not hide)."""
        return self.timeline.cycles

    @property
    def compute_cycles(self) -> int:
        return self.timeline.compute_cycles

    @property
    def dram_stall_cycles(self) -> int:
        return self.timeline.dram_stall_cycles


def _host_ops(ops, store, sizes) -> None:
    """Host-side slicing / concatenation of chunked steps (``relayout`` needs no work: the host
    store keeps logical arrays, the next write packs them in the new layout)."""
    for kind, args in ops:
        if kind == "slice":
            src, dst, m, pm, lo, hi = args
            arr, modes = store[src]
            ax = modes.index(m)
            if hi is None:              # ``lo``: the indices taken (pieces merged, gen.compiler.chunk)
                store[dst] = (np.take(arr, lo, axis=ax), tuple(pm if x == m else x for x in modes))
                continue
            idx = tuple(slice(lo, hi) if i == ax else slice(None) for i in range(len(modes)))
            part = arr[idx]
            if sizes[pm] > hi - lo:     # the last piece of a step chunked over a contracted mode
                part = np.pad(part, [(0, sizes[pm] - (hi - lo) if i == ax else 0) for i in range(len(modes))])
            store[dst] = (part, tuple(pm if x == m else x for x in modes))
        elif kind == "eye":         # the identity of an on-chip re-layout (gen.compiler.relayout)
            name, modes, n = args
            store[name] = (np.eye(n, dtype=np.float32), tuple(modes))
        elif kind == "concat":
            dst, dmodes, m, parts = args
            arrs = []
            for name, pm in parts:
                arr, modes = store[name]
                arr = arr[tuple(0 if x.startswith("_") else slice(None) for x in modes)]
                modes = tuple(m if x == pm else x for x in modes if not x.startswith("_"))
                arrs.append(np.transpose(arr, [modes.index(x) for x in dmodes]))
            store[dst] = (np.concatenate(arrs, axis=dmodes.index(m)), tuple(dmodes))


def _assemble(parts, store, pieces: int) -> np.ndarray:
    """A result from the host tensors ``parts``: the terms of each batch piece summed (block terms,
    in float64), the pieces concatenated along the batch axis 0."""
    out = []
    per = len(parts) // pieces
    for p in range(pieces):
        total = None
        for name, modes, shape, output, crop in parts[p * per:(p + 1) * per]:
            arr, amodes = store[name]
            # drop dummy modes (size 1, index 0)
            arr = arr[tuple(0 if m.startswith("_") else slice(None) for m in amodes)]
            amodes = tuple(m for m in amodes if not m.startswith("_"))
            arr = np.transpose(arr, [amodes.index(m) for m in output]).astype(np.float64)
            arr = arr.reshape([p for _, p in crop])[tuple(slice(0, s) for s, _ in crop)].reshape(shape)
            total = arr if total is None else total + arr
        out.append(total)
    return out[0] if pieces == 1 else np.concatenate(out, axis=0)


#: a host computation of a derived tensor (:func:`gen.compiler.phases.compile_networks` ``derived``):
#: ``(name, result)`` -> the tensor (float32, bf16-exact), ``result`` the assembled source result
Derive = Callable[[str, np.ndarray], np.ndarray]


class HostStore:
    """The host's logical arrays of one program's execution: its inputs (padded, cut into batch
    pieces), what runs read back, and what the host operations after each run make of them."""

    def __init__(self, prog: Program, inputs: Mapping[str, np.ndarray], derive: Derive | None):
        self.prog, self.derive = prog, derive
        self.store: dict[str, tuple[np.ndarray, tuple[str, ...]]] = {}
        self.ops_after: dict[int, list] = {}
        for k, (r, kind, args) in enumerate(prog.host_ops):
            self.ops_after.setdefault(r, []).append((k, kind, args))
        derived = {args[0] for _, kind, args in prog.host_ops if kind == "derive"}
        if derived and derive is None:
            raise ExecutionError(f"the program derives {', '.join(sorted(derived))} on the host: pass derive",
                                 field="derive")
        for name in prog.input_modes:
            if name not in derived:
                self.load(name, stacked_value(inputs, prog.input_slices.get(name, (name,))[0]))
        self.ops(-1)

    def load(self, name: str, value: np.ndarray) -> None:
        prog = self.prog
        key, lo, hi = prog.input_slices.get(name, (name, None, None))
        arr = np.asarray(value, np.float32)[lo:hi]
        pads = prog.input_pads.get(name)
        if pads:
            arr = np.pad(arr.reshape([s for s, _ in pads]), [(0, p - s) for s, p in pads])
        modes = prog.input_modes[name]
        self.store[name] = (arr.reshape([prog.sizes[m] for m in modes]), modes)

    def ops(self, run: int, skip: frozenset[int] = frozenset()) -> None:
        """The host operations after run ``run`` (``-1``: before the first), in order, but those
        whose index in ``prog.host_ops`` is in ``skip``: a derived tensor may be sliced next."""
        self.do([k for k, _, _ in self.ops_after.get(run, ()) if k not in skip])

    def do(self, which) -> None:
        """The host operations with these indices in ``prog.host_ops``, in that order."""
        for k in which:
            _, kind, args = self.prog.host_ops[k]
            if kind == "derive":
                name, src = args
                self.load(name, self.derive(name, _assemble(self.prog.results[src], self.store, 1)))
            else:
                _host_ops([(kind, args)], self.store, self.prog.sizes)

    def pack(self, emu: Emulator, name: str, layout) -> np.ndarray:
        """Bit patterns of the rows of host tensor ``name`` in ``layout``."""
        arr, modes = self.store[name]
        return emu.to_elem_bits(layout.pack(arr, modes))

    def unpack(self, emu: Emulator, name: str, layout, bits: np.ndarray, unknown: np.ndarray, what: str) -> None:
        """Rows read back (bit patterns, and which elements are unknown) become host tensor ``name``."""
        self.store[name] = (layout.unpack(emu.from_elem_bits(bits), self.prog.sizes), layout.modes)
        if unknown.any():
            refuse_unknown(layout.unpack(unknown.astype(np.float32), self.prog.sizes), what)

    def results(self) -> dict[str, np.ndarray]:
        """The program's results by npz key (stacked block-term results split again)."""
        prog = self.prog
        return unstack_results({target: _assemble(parts, self.store, prog.result_pieces.get(target, 1))
                                for target, parts in prog.results.items()})


def execute(prog: Program, inputs: Mapping[str, np.ndarray], config: FettaConfig, progress=None,
            derive: Derive | None = None) -> Execution:
    """Run ``prog`` on the emulator; the host store starts with ``inputs`` (float32, bf16-exact).
    ``derive`` computes the tensors of the program's ``derive`` host operations when their source
    result has been read back (they are not taken from ``inputs``)."""
    emu = Emulator(config)
    host = HostStore(prog, inputs, derive)
    jobs = []
    trace = []
    tcu = 0
    for ri, run in enumerate(prog.runs):
        uw = []
        for w in run.writes:
            bits = host.pack(emu, w.name, w.layout)
            emu.write_unified(run.half, w.addr, bits)
            uw.append((run.half, w.addr, bits))
        emu.load_program(run.words)
        r = emu.run(half=run.half)
        if r.error != ErrorCode.NONE:
            raise ExecutionError(f"run {ri} stopped with {r.error.name} at pc {r.pc}", field="program")
        tcu += r.macs
        reads = []
        for rd in run.reads:
            rows = slice(rd.addr, rd.addr + rd.layout.rows)
            bits = emu.unified[run.half, rows].copy()
            reads.append(bits)
            host.unpack(emu, rd.name, rd.layout, bits, emu.unified_x[run.half, rows], f"run {ri} reads back {rd.name}")
        host.ops(ri)
        trace.append((r.cycles, reads))
        jobs.append({"uwrites": uw, "prog": run.words, "half": run.half,
                     "ureads": [(run.half, rd.addr, rd.layout.rows) for rd in run.reads]})
        if progress is not None:
            progress()
    measured = [c for c, _ in trace]
    if measured != [t.compute_cycles for t in prog.run_timings(config)]:
        raise ExecutionError("emulator cycles differ from the static program timing", field="program")
    return Execution(host.results(), prog.timeline(config, measured), tcu, len(prog.runs), trace, jobs)


def rtl_check(ex: Execution, config: FettaConfig, sim: str, trace=None, stats: dict | None = None) -> bool:
    """Replay the runs of an emulator :class:`Execution` on the RTL (``icarus``/``verilator``).

    The host writes are the emulator's (so the RTL sees the same operands); every row read
    back, every run's cycle count and error code must equal the emulator's, else
    :class:`ExecutionError`. ``trace``: write an FST waveform of the replay there. ``stats`` (optional)
    receives ``sim_cycles`` (every clock cycle simulated, host port included). Returns ``True``.
    """
    out = replay(ex, config, sim, trace, stats)
    for j, (_, reads) in enumerate(ex.trace):
        for key, rows in (("urd", reads), ("ard", ex.atrace[j] if ex.atrace else [])):
            got = out[f"j{j}_{key}"]
            want = np.concatenate(rows) if rows else np.zeros((0, config.lanes), np.uint64)
            if got.shape != want.shape or not np.array_equal(got.astype(np.uint64), want.astype(np.uint64)):
                raise ExecutionError(f"RTL run {j}: rows read back differ from the emulator", field="program")
    return True


def replay(ex: Execution, config: FettaConfig, sim: str, trace=None, stats: dict | None = None, dram=None,
           what: str = "run") -> dict:
    """Run the jobs of ``ex`` on the RTL (:func:`sim.rtl.run_jobs_rtl`, with ``dram`` preloaded) and check
    every job's error code and cycles against the emulator's (:class:`ExecutionError`); returns the
    simulation's output. ``stats`` receives ``sim_cycles``."""
    out, _ = run_jobs_rtl(config, ex.jobs, sim, trace=trace, dram=dram)
    if stats is not None:
        stats["sim_cycles"] = int(out["sim_cycles"])
    for j, (cycles, _) in enumerate(ex.trace):
        if int(out[f"j{j}_error"]) != 0:
            raise ExecutionError(f"RTL {what} {j} stopped with error code {int(out[f'j{j}_error'])}", field="program")
        if int(out[f"j{j}_cycles"]) != cycles:
            raise ExecutionError(f"RTL {what} {j}: {int(out[f'j{j}_cycles'])} cycles, emulator {cycles}",
                                 field="program")
    return out


def run_emulator(config: FettaConfig, plan: GemmPlan, progress=None):
    """Execute a plan on :class:`sim.emulator.Emulator`; returns ``(Y, cycles, tcu_macs)``."""
    emu = Emulator(config)
    cycles = 0
    tcu_macs = 0
    results, unknown = [], []
    for p in plan.passes:
        for addr, rows in p.writes:
            emu.write_unified(p.half, addr, emu.to_elem_bits(rows))
        emu.load_program(p.words)
        r = emu.run(half=p.half)
        if r.error != ErrorCode.NONE:
            raise ExecutionError(f"pass at m0={p.m0}, n0={p.n0} stopped with {r.error.name} at pc {r.pc}",
                              field="program")
        cycles += r.cycles
        tcu_macs += r.macs
        results.append([emu.from_elem_bits(emu.unified[p.half, a:a + n]) for a, n in read_y_rows(p)])
        unknown.append([emu.unified_x[p.half, a:a + n].astype(np.float32) for a, n in read_y_rows(p)])
        if progress is not None:
            progress()
    refuse_unknown(assemble_y(plan, unknown), "the GEMM's result Y")
    return assemble_y(plan, results), cycles, tcu_macs


def refuse_unknown(mask: np.ndarray, what: str) -> None:
    """Raise when ``mask`` (non-zero: unknown, :mod:`sim.unknown`) marks an element the host uses:
    it depends on a memory row the program never wrote, which silicon's SRAM holds with any content."""
    bad = int(np.count_nonzero(mask))
    if bad:
        raise ExecutionError(f"{what}: {bad} of {mask.size} elements depend on memory rows the program never wrote "
                             "(the emulator's zeros are not the silicon's)", field="program")


def run_gemm(config: FettaConfig, plan: GemmPlan, sim: str, advance=None, trace=None):
    """Run a dense GEMM plan on ``sim`` (``emulator``, ``icarus`` or ``verilator``): ``(Y, cycles, tcu_macs)``.
    ``trace``: an FST waveform of the RTL run (not for the emulator)."""
    if sim == "emulator":
        if trace is not None:
            raise ValueError("a waveform needs an RTL simulator")
        return run_emulator(config, plan, progress=advance)
    return run_plan_rtl(config, plan, sim, trace=trace)


__all__ = ["ExecutionError", "Execution", "HostStore", "execute", "rtl_check", "replay", "run_emulator", "run_gemm",
           "refuse_unknown"]
