"""DMA lowering: a compiled :class:`~gen.compiler.Program` as runs that move their own data.

A compiled program is a list of runs whose operands the host writes into unified memory before
they start and whose results it reads after they end (:mod:`gen.compiler.program`); its DRAM time
is the rule of :mod:`gen.design.timing`. :func:`lower_dma` turns it into *jobs* that do the moving
themselves with ``DMA`` instructions (``docs/accelerator.md``, "DMA instructions"), so the cycles of
the whole layer are the hardware's own count (the emulator's ``Clock``, equal to the RTL's):

* every host write of run ``i`` (half ``h``) becomes a DMA **load** from a DRAM region into half
  ``h``, issued by an earlier job on half ``1 - h`` (a DMA only reaches the half its run does not
  use); every host read becomes a DMA **store** to a DRAM region, issued by a later job on half
  ``1 - h``. Where the neighbouring run is on the same half, a *DMA-only* job (its program only
  DMA instructions and HALT) on the other half does the moving;
* a store goes to the first job on the other half after its run; a load to the first job on the
  other half after every earlier run on its half, after the stores of those runs (the half is
  overwritten) and strictly after the job that stores the data the host needs for it
  (:meth:`Program.each_write_deps`: read back, sliced, concatenated or derived between jobs). The
  loads of one run go either all after the latest data any of them needs, or in groups, each after
  the data it needs (an input does not wait for a spill the same run reloads): the lowering keeps
  whichever gives fewer cycles;
* inside a job the stores come first, then the loads, in program order; each DMA instruction is
  put before the first instruction of the run at which the engine is idle again
  (:class:`gen.design.control.Clock`), so compute never waits for a busy engine, and the rest
  before the HALT (which waits for the last transfer). Jobs longer than the instruction memory
  move DMA instructions into DMA-only jobs on the same half right after them;
* DRAM: each host-written image gets its own region, each read-back tensor too; a write of a
  tensor in the layout the chip stored it in is loaded straight from that read-back region (a
  spill comes back without the host). Regions are ``dma_bytes`` aligned;
* a store that no load needs, directly or through host operations (a result, :func:`needed`),
  is *late*: it goes in a job that computes, on the other half, before its rows are written again
  (:meth:`_Placer.place_late`), instead of a DMA-only job; the host operations that only results
  need wait for the last job;
* a write whose image is still in its half, at its rows, from an earlier load (the same tensor in
  the same layout, with no read-back or host operation of that name since, and no run on the half
  writing any of its rows: :func:`unified_writes`) is not loaded again (``DmaProgram.resident``):
  the pieces of a chunked step on one half keep the factors they share.

Rows move in whole beats of ``dma_rows`` rows, so a tensor's last beat may carry up to
``dma_rows - 1`` rows past its end: blocks start on a multiple of ``banks`` rows
(:mod:`gen.compiler.allocate`), a multiple of ``dma_rows``, so those rows belong to no tensor.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Sequence

from gen.compiler.layout import Layout, ceil_to
from gen.compiler.program import CompileError, Program, Run
from gen.design.config import FettaConfig
from gen.design.control import Clock, dma_cycles
from gen.design.timing import Timeline, program_cycles
from gen.design.isa import (BOUND_BITS, OVERHEAD, Flag, Geometry, Instr, Opcode, dma_load, dma_store, dram_rate, halt,
                            out_max)


@dataclass(frozen=True)
class Transfer:
    """One tensor moved by DMA: a host write (``load``) or read (``store``) of run ``run``."""

    load: bool
    run: int
    name: str
    layout: Layout
    row: int
    dram: int
    #: the host packs the image into ``dram`` before the job (a load not fed by a read-back region)
    host_packed: bool = False
    #: a store no load needs (a result): it may wait for a job that computes (module docstring)
    late: bool = False


@dataclass
class Job:
    """One start of the accelerator: run ``run``'s program (``None``: DMA only) on ``half`` with the
    DMA instructions of ``transfers`` (stores first, then loads)."""

    half: int
    run: int | None
    transfers: list[Transfer] = field(default_factory=list)
    program: list[Instr] = field(default_factory=list)


@dataclass
class DmaProgram:
    """A :class:`Program` lowered to jobs (module docstring)."""

    source: Program
    jobs: list[Job]
    #: DRAM bytes the regions take (from address 0)
    dram_bytes: int
    #: (run, name) of the host writes not loaded: the image is still in the half (module docstring)
    resident: list[tuple[int, str]] = field(default_factory=list)
    #: indices into ``source.host_ops`` of the operations only results need: the host does them
    #: after the last job (their inputs may be ``late`` stores)
    final_ops: frozenset[int] = frozenset()


def _region(layout: Layout, geo: Geometry, row_bytes: int) -> int:
    return ceil_to(layout.rows, geo.dma_rows) * row_bytes


def _instrs(group: list[Transfer], geo: Geometry, row_bytes: int) -> list[Instr]:
    """DMA instructions of transfers that lie back to back in rows and in DRAM (:func:`_groups`):
    whole beats, at most ``2**BOUND_BITS - 1`` per instruction."""
    t = group[0]
    beats = sum(-(-x.layout.rows // geo.dma_rows) for x in group)
    most = (1 << BOUND_BITS) - 1
    out = []
    for b in range(0, beats, most):
        n = min(most, beats - b)
        row, dram = t.row + b * geo.dma_rows, t.dram + b * geo.dma_rows * row_bytes
        out.append(dma_load(dram=dram, row=row, beats=n) if t.load else dma_store(row=row, dram=dram, beats=n))
    return out


def _groups(transfers: list[Transfer], geo: Geometry, row_bytes: int) -> list[list[Transfer]]:
    """``transfers`` in order, those that continue the previous one in the same direction (its
    next beat's row and DRAM byte) joined: one DMA instruction moves them."""
    out: list[list[Transfer]] = []
    for t in transfers:
        if out:
            p = out[-1][-1]
            rows = ceil_to(p.layout.rows, geo.dma_rows)
            if p.load == t.load and t.row == p.row + rows and t.dram == p.dram + rows * row_bytes:
                out[-1].append(t)
                continue
        out.append([t])
    return out


class _Placer:
    """Where each run's loads and stores go (module docstring)."""

    def __init__(self, prog: Program, depth: int, writes: list[list[tuple[int, int]]]):
        self.prog, self.depth, self.writes = prog, depth, writes
        self.jobs: list[Job] = []
        self.run_job: dict[int, int] = {}
        self.store_job: dict[int, int] = {}
        self.compute: dict[int, int] = {}
        # what :meth:`place_loads` needs of the runs before, kept as it goes (runs come in order and a
        # job's index does not change while loads are placed): per half, the bound its runs so far set
        # and the first run not in it yet; ``after[j]``: one past the latest store job of runs 0 .. j
        self._half_lo = [0, 0]
        self._half_next = [0, 0]
        self._after: list[int] = []

    def _first_job(self, half: int, after: int, n: int = 0) -> int:
        """Index of the first job on ``half`` from index ``after`` on with room in the instruction
        memory for ``n`` more transfers (a new DMA-only job if none)."""
        for k in range(max(after, 0), len(self.jobs)):
            if self._fits(k, half, n):
                return k
        self.jobs.append(Job(half, None))
        return len(self.jobs) - 1

    def _fits(self, k: int, half: int, n: int) -> bool:
        job = self.jobs[k]
        body = 0 if job.run is None else len(self.prog.runs[job.run].program) - 1
        return job.half == half and body + len(job.transfers) + n <= self.depth - 1

    def place_store(self, j: int, transfers: list[Transfer]) -> int:
        """The job of run ``j``'s stores (placed on first use in the first job on the other half after
        the run with room for them); the run's own job when it reads nothing back."""
        if j in self.store_job:
            return self.store_job[j]
        if not transfers:
            return self.run_job[j]
        k = self._first_job(1 - self.prog.runs[j].half, self.run_job[j] + 1, len(transfers))
        self.jobs[k].transfers += transfers
        self.store_job[j] = k
        return k

    def place_late(self, j: int, transfers: list[Transfer], geo: Geometry, config: FettaConfig) -> None:
        """Run ``j``'s late stores, placed after every load (runs in descending order: a job put in
        shifts only later runs' jobs), one tensor at a time, the largest first. Candidates for a
        tensor: the jobs on the other half after the run until one loads into its rows (its stores go
        before its loads) or a run on the half writes them (:func:`unified_writes`). Of those that
        compute, the one whose compute leaves the most room beside its DMA work so far (the stores
        of one run can so go to different jobs); else the first candidate; else a new DMA-only job
        right after the run (shared by the run's other stores that find no candidate)."""
        h = self.prog.runs[j].half
        extra: int | None = None          # the DMA-only job put in for this run, if any
        for t in sorted(transfers, key=lambda t: (-t.layout.rows, t.name)):
            window = self._late_window(j, _rows(t))
            computing = [k for k in window if self.jobs[k].run is not None]
            if computing:
                k = max(computing, key=lambda q: (self._room_cycles(q, geo, config), -q))
            elif window:
                k = window[0]
            elif extra is not None:
                k = extra
            else:
                k = extra = self.run_job[j] + 1
                self.jobs.insert(k, Job(1 - h, None))
            self.jobs[k].transfers.append(t)

    def _late_window(self, j: int, rows: tuple[int, int]) -> list[int]:
        """The jobs that may store ``rows`` of run ``j``'s half (:meth:`place_late`), with room for
        one more transfer."""
        h = self.prog.runs[j].half
        window = []
        for k in range(self.run_job[j] + 1, len(self.jobs)):
            job = self.jobs[k]
            if job.half == h:
                if job.run is not None and _overlap(self.writes[job.run], [rows]):
                    break
                continue
            if self._fits(k, 1 - h, 1):
                window.append(k)
            if _overlap([_rows(u) for u in job.transfers if u.load], [rows]):
                break
        return window

    def _room_cycles(self, k: int, geo: Geometry, config: FettaConfig) -> float:
        """Compute cycles of job ``k``'s run less the DMA cycles of its transfers so far (at the
        configured rate, fixed costs left out): how much more DMA work it hides."""
        job = self.jobs[k]
        if job.run not in self.compute:
            self.compute[job.run] = program_cycles(self.prog.runs[job.run].program, config)
        beats = sum(-(-t.layout.rows // geo.dma_rows) for t in job.transfers)
        return self.compute[job.run] - beats / float(dram_rate(config))

    def place_loads(self, i: int, transfers: list[Transfer], after: int, sources: set[int],
                    stores: list[list[Transfer]]) -> None:
        """Run ``i``'s loads: in the first job on the other half after every earlier run on its half
        and their stores, after the stores of ``sources`` (read-back regions it loads from) and
        strictly after the stores of runs ``0 .. after`` (the host works on their data between jobs);
        where that is a DMA-only job, in the first job after it that computes, if one comes before
        run ``i`` (a DMA-only job's transfers are all stall; moving them never lengthens the jobs)."""
        h = self.prog.runs[i].half
        for j in range(self._half_next[h], i):
            if self.prog.runs[j].half == h:         # the half is overwritten: after that run, its reads
                self._half_lo[h] = max(self._half_lo[h], self.run_job[j] + 1, self.place_store(j, stores[j]))
        self._half_next[h] = max(self._half_next[h], i)
        lo = self._half_lo[h]
        for j in sources:
            lo = max(lo, self.place_store(j, stores[j]))
        while len(self._after) <= after:
            j = len(self._after)
            self._after.append(max(self._after[-1] if j else 0, self.place_store(j, stores[j]) + 1))
        if after >= 0:
            lo = max(lo, self._after[after])
        if transfers:
            k = self._first_job(1 - h, lo, len(transfers))
            if self.jobs[k].run is None:      # a DMA-only job: a later one that computes hides them
                k = next((q for q in range(k + 1, len(self.jobs))
                          if self.jobs[q].run is not None and self._fits(q, 1 - h, len(transfers))), k)
            self.jobs[k].transfers += transfers


def lower_dma(prog: Program, config: FettaConfig, early: bool | None = None, resident: bool = True,
              late: bool | None = None) -> DmaProgram:
    """The jobs of ``prog`` with DMA instructions in place of the host's writes and reads. ``early``
    chooses the placement of a run's loads and ``late`` that of the stores no load needs
    (:func:`_lower`); ``None``: of both, the one with fewer cycles (``False`` on a tie).
    ``resident=False`` loads every host write, also an image still in its half (module docstring;
    for comparison)."""
    mixed = any(len(set(deps)) > 1 for deps in prog.each_write_deps())
    earlies = [early] if early is not None else [False, True] if mixed else [False]
    lates = [late] if late is not None else [False, True]
    if len(earlies) * len(lates) == 1:
        return _lower(prog, config, earlies[0], lates[0], resident=resident)
    chosen = prog.__dict__.setdefault("_dma_choice", {})    # a program is lowered for timing, then to run
    key = (repr(config), early, resident, late)
    if key in chosen:
        return _lower(prog, config, *chosen[key], resident=resident)
    lowered = {(e, lt): _lower(prog, config, e, lt, resident=resident) for e in earlies for lt in lates}
    chosen[key] = min(lowered, key=lambda k: (dma_timeline(lowered[k], config).cycles, k))
    return lowered[chosen[key]]


def _lower(prog: Program, config: FettaConfig, early: bool, late: bool = True, *, resident: bool = True) -> DmaProgram:
    """:func:`lower_dma` with one placement of the loads and the stores. ``early``: a run's loads
    go in groups by the run after which the host has their data, each as early as that allows
    (inputs do not wait for a spill the same run reloads); else all of them after the latest such
    run. ``late``: the stores no load needs wait for a job that computes (module docstring); else
    they go with the run's other stores. Either can lengthen the job it fills, which is why
    :func:`lower_dma` tries them (ATIS TT train: 15,213 cycles with neither, 14,319 with early
    loads, 14,145 with both; 13,777 since the late stores of one run can go to different jobs)."""
    geo = Geometry.of(config)
    prog = _room(prog, geo)
    row_bytes = geo.lanes * config.elem_bits // 8
    top = 0

    def region(layout: Layout) -> int:
        nonlocal top
        addr, top = top, top + _region(layout, geo, row_bytes)
        return addr

    stores: list[list[Transfer]] = []
    need, final_ops = needed(prog)
    for i, run in enumerate(prog.runs):
        for rd in run.reads:
            if rd.addr % geo.dma_rows:
                raise CompileError(f"run {i} reads {rd.name} from row {rd.addr}, not a multiple of "
                                   f"dma_rows={geo.dma_rows}", field="program")
        stores.append([Transfer(False, i, rd.name, rd.layout, rd.addr, region(rd.layout),
                                late=late and rd.name not in need) for rd in run.reads])
    early_stores = [[t for t in ts if not t.late] for ts in stores]      # those placed with their run's
    writes = [unified_writes(run.program, geo) for run in prog.runs]      # each run's rows of its half
    placer = _Placer(prog, geo.imem_depth, writes)
    deps = prog.each_write_deps()
    latest: dict[str, Transfer] = {}       # name -> its newest read-back region
    renamed = _host_written(prog)
    halves = _Residency(prog, writes)
    kept: list[tuple[int, str]] = []
    for i, run in enumerate(prog.runs):
        # the loads by the run after which the host has their data: each group as early as it can go
        groups: dict[int, tuple[list[Transfer], set[int]]] = {}
        for w, dep in zip(run.writes, deps[i] if early else [max([-1] + deps[i])] * len(run.writes)):
            if w.addr % geo.dma_rows:
                raise CompileError(f"run {i} writes {w.name} at row {w.addr}, not a multiple of "
                                   f"dma_rows={geo.dma_rows}", field="program")
            if resident and halves.holds(run.half, w):
                kept.append((i, w.name))
                continue
            halves.load(run.half, w)
            loads, sources = groups.setdefault(dep, ([], set()))
            src = latest.get(w.name)
            if src is not None and src.layout == w.layout and renamed.get(w.name, -2) < src.run:
                loads.append(Transfer(True, i, w.name, w.layout, w.addr, src.dram))
                sources.add(src.run)
            else:
                loads.append(Transfer(True, i, w.name, w.layout, w.addr, region(w.layout), host_packed=True))
        for dep in sorted(groups) or [-1]:
            loads, sources = groups.get(dep, ([], set()))
            placer.place_loads(i, loads, dep, sources, early_stores)
        placer.jobs.append(Job(run.half, i))
        placer.run_job[i] = len(placer.jobs) - 1
        for t in stores[i]:
            latest[t.name] = t
        halves.ran(i)
    for j in range(len(prog.runs)):
        placer.place_store(j, early_stores[j])
    for j in reversed(range(len(prog.runs))):
        placer.place_late(j, [t for t in stores[j] if t.late], geo, config)
    jobs = _programs([j for j in placer.jobs if j.run is not None or j.transfers], prog, geo, row_bytes)
    return DmaProgram(prog, jobs, top, kept, frozenset(final_ops if late else ()))


def needed(prog: Program) -> tuple[set[str], list[int]]:
    """The names whose read-back a later load may need: those written by a run, and the inputs of
    the host operations making a needed name (slices, concatenations, derived tensors from the
    parts of their source result); and the indices of the host operations making none of them."""
    def inputs(kind: str, args: tuple) -> list[str]:
        if kind == "slice":
            return [args[0]]
        if kind == "concat":
            return [name for name, _ in args[3]]
        if kind == "derive":
            return [part[0] for part in prog.results[args[1]]]
        return []

    need = {w.name for run in prog.runs for w in run.writes}
    for _, kind, args in reversed(prog.host_ops):      # an operation's inputs come before it
        if _made(kind, args) in need:
            need |= set(inputs(kind, args))
    final = [k for k, (_, kind, args) in enumerate(prog.host_ops)
             if kind in ("slice", "concat", "derive") and _made(kind, args) not in need]
    return need, final


def _made(kind: str, args: tuple) -> str | None:
    """The host tensor a host operation makes (``None``: a re-layout, which changes no value)."""
    return args[1] if kind == "slice" else args[0] if kind in ("concat", "derive", "eye") else None


def _overlap(spans: list[tuple[int, int]], others: list[tuple[int, int]]) -> bool:
    """Any of the row spans ``[lo, hi)`` of ``spans`` meets one of ``others``."""
    return any(lo < b and a < hi for lo, hi in spans for a, b in others)


def _rows(t: Transfer) -> tuple[int, int]:
    """The rows ``[lo, hi)`` a transfer moves."""
    return t.row, t.row + t.layout.rows


class _Residency:
    """Which host images each half still holds (module docstring): per half, the loaded images by
    ``(name, layout, row)`` with the version of the name's host value they hold. A read-back of a
    name or a host operation making it is a new version; a run's writes to its half's rows drop the
    images they touch."""

    def __init__(self, prog: Program, writes: list[list[tuple[int, int]]]):
        self.prog, self.writes = prog, writes
        self.held: list[dict[tuple[str, Layout, int], int]] = [{}, {}]
        self.version: dict[str, int] = {}
        self.ops: dict[int, list[str]] = {}
        for r, kind, args in prog.host_ops:
            if _made(kind, args) is not None:
                self.ops.setdefault(r, []).append(_made(kind, args))

    def holds(self, half: int, w) -> bool:
        return self.held[half].get((w.name, w.layout, w.addr)) == self.version.get(w.name, 0)

    def load(self, half: int, w) -> None:
        self._drop(half, [(w.addr, w.addr + w.layout.rows)])
        self.held[half][(w.name, w.layout, w.addr)] = self.version.get(w.name, 0)

    def ran(self, i: int) -> None:
        run = self.prog.runs[i]
        self._drop(run.half, self.writes[i])
        for name in [rd.name for rd in run.reads] + self.ops.get(i, []):
            self.version[name] = self.version.get(name, 0) + 1

    def _drop(self, half: int, spans: list[tuple[int, int]]) -> None:
        held = self.held[half]
        for key in [k for k in held if _overlap(spans, [(k[2], k[2] + k[1].rows)])]:
            del held[key]


def unified_writes(program: list[Instr], geo: Geometry) -> list[tuple[int, int]]:
    """Row spans ``[lo, hi)`` of its half that ``program`` may write (a superset: strides are
    unsigned, so a span runs from the base to the largest address): ``STORE`` destinations, ``VEC``
    and ``GEMM`` write-backs (a transposed write-back permutes values, not rows)."""
    spans = []
    for ins in program:
        if ins.opcode == Opcode.STORE:
            spans.append((ins.a_base, ins.a_base + (ins.K * geo.banks - 1) * ins.a_sk + 1))
        elif ins.opcode == Opcode.VEC and ins.flags & Flag.WB:
            spans.append((ins.w_base, ins.w_base + (ins.K * geo.vec_rows - 1) * ins.o_sk + 1))
        elif ins.opcode == Opcode.GEMM and ins.flags & Flag.WB:
            spans.append((ins.w_base, ins.w_base + out_max(ins, geo) + 1))
    return spans


def dma_timeline(dprog: DmaProgram, config: FettaConfig) -> Timeline:
    """The jobs of ``dprog``, timed: ``cycles`` the sum of their static cycle counts
    (:func:`gen.design.timing.program_cycles`, which the emulator and the RTL reproduce),
    ``compute_cycles`` those of the source program's runs without DMA instructions, ``dram_cycles``
    the DMA engine's busy cycles, ``dram_bytes`` the bytes the DMA instructions move (whole beats)."""
    return _kept(dprog, "_timeline", config, lambda: _dma_timeline(dprog, config))  # lower_dma's choice, its caller


def _dma_timeline(dprog: DmaProgram, config: FettaConfig) -> Timeline:
    geo = Geometry.of(config)
    dmas = [ins for job in dprog.jobs for ins in job.program if ins.opcode == Opcode.DMA and ins.K]
    src = dprog.source                  # every lowering of it asks for its compute cycles
    compute = _kept(src, "_compute_cycles", config, lambda: sum(program_cycles(r.program, config) for r in src.runs))
    return Timeline(cycles=sum(program_cycles(job.program, config) for job in dprog.jobs),
                    compute_cycles=compute,
                    dram_cycles=sum(dma_cycles(ins, geo) for ins in dmas),
                    dram_bytes=sum(ins.K for ins in dmas) * geo.dma_bytes)


def _kept(obj, name: str, config: FettaConfig, make):
    """``make()``, kept on ``obj`` (a program, a lowered program) per configuration: a compiler
    comparing variants asks for the same timing more than once."""
    memo = obj.__dict__.setdefault(name, {})
    key = repr(config)
    if key not in memo:
        memo[key] = make()
    return memo[key]


def hardware_timeline(prog: Program, config: FettaConfig) -> Timeline:
    """``prog`` lowered to DMA jobs (:func:`lower_dma`), timed (:func:`dma_timeline`): what the
    emulator counts for them (:func:`gen.toolflow.dmarun.execute_dma`) and the RTL reproduces. Kept
    on the program per configuration (a compiler comparing variants asks more than once)."""
    return _kept(prog, "_hardware_timeline", config, lambda: dma_timeline(lower_dma(prog, config), config))


def hardware_cycles(prog: Program, config: FettaConfig) -> int:
    """End-to-end cycles of ``prog`` lowered to DMA jobs (:func:`hardware_timeline`)."""
    return hardware_timeline(prog, config).cycles


def dma_room(geo: Geometry) -> int:
    """Instruction slots a run keeps free for DMA instructions (:func:`_room`)."""
    return max(1, geo.imem_depth // 32)


def _room(prog: Program, geo: Geometry) -> Program:
    """``prog`` with every run longer than ``imem_depth - 1 - dma_room`` instructions before its HALT
    cut into runs of the same half that are not (as :meth:`gen.compiler.allocate.Memory.add_instrs`
    cuts a program at the instruction memory's size: on-chip data stays), so that every run has room
    for the DMA instructions of its neighbours. Its writes go with the first part, its reads and the
    host operations after it with the last."""
    cap = geo.imem_depth - 1 - dma_room(geo)
    runs, last = [], {}
    for i, run in enumerate(prog.runs):
        body = run.program[:-1]
        parts = [body[k:k + cap] for k in range(0, len(body), cap)] or [[]]
        for k, part in enumerate(parts):
            runs.append(Run(run.half, run.writes if k == 0 else [], part + [halt()],
                            run.reads if k == len(parts) - 1 else []))
        last[i] = len(runs) - 1
    if len(runs) == len(prog.runs):
        return prog
    ops = [(last.get(r, r), kind, args) for r, kind, args in prog.host_ops]
    return dataclasses.replace(prog, runs=runs, host_ops=ops)


def _host_written(prog: Program) -> dict[str, int]:
    """Per name, the last run after which a host operation makes a tensor of that name: the host
    replaces the value a run up to that one read back, so a later write of the name is then not
    that read-back image."""
    out: dict[str, int] = {}
    for r, kind, args in prog.host_ops:
        name = _made(kind, args)
        if name is not None:
            out[name] = max(out.get(name, -1), r)
    return out


def _programs(jobs: list[Job], prog: Program, geo: Geometry, row_bytes: int) -> list[Job]:
    """Each job's program: its run's instructions with the DMA instructions put in (module
    docstring); a job over the instruction memory keeps the transfers that fit and hands the others,
    whole, to DMA-only jobs on its half right after it."""
    out = []
    for job in jobs:
        job.transfers.sort(key=lambda t: t.load)           # stores first, in placement order
        groups = _groups(job.transfers, geo, row_bytes)
        dmas = [(ins, g) for g in groups for ins in _instrs(g, geo, row_bytes)]
        body = [] if job.run is None else [ins for ins in prog.runs[job.run].program if ins.opcode != Opcode.HALT]
        room = geo.imem_depth - 1 - len(body)
        if room < 0:
            raise CompileError(f"run {job.run} has {len(body)} instructions before HALT, over imem_depth - 1",
                               field="program")
        keep, rest = [], []
        for g in groups:
            n = sum(x is g for _, x in dmas)
            if not rest and n <= room:
                keep.append(g)
                room -= n
            else:
                rest.append(g)
        if rest and not keep and job.run is None:
            raise CompileError(f"a transfer of {rest[0][0].name} needs more than imem_depth - 1 DMA instructions",
                               field="program")
        mine = [(i, g) for i, g in dmas if any(g is k for k in keep)]
        out.append(Job(job.half, job.run, [t for g in keep for t in g], _interleave(body, mine, geo)))
        if rest:
            out += _programs([Job(job.half, None, [t for g in rest for t in g])], prog, geo, row_bytes)
    return out


def _interleave(body: list[Instr], dmas: list[tuple[Instr, list[Transfer]]], geo: Geometry) -> list[Instr]:
    """:func:`_place` of the job's instructions (a new list)."""
    return list(_place(tuple(body), tuple(ins for ins, _ in dmas), geo))


@functools.lru_cache(maxsize=1 << 12)
def _place(body: tuple[Instr, ...], todo: tuple[Instr, ...], geo: Geometry) -> tuple[Instr, ...]:
    """``body`` with the DMA instructions ``todo`` put in, in order. A DMA instruction goes either before the first
    instruction whose CHECK finds the engine idle (compute never waits) or one instruction earlier
    (it waits in CHECK for the engine, and the transfer starts the cycle the engine is free),
    whichever ends the job sooner with the later ones placed the first way; the rest before HALT.

    The controller's clock is simulated from the last placement on, not from the start (the cycles
    before it do not depend on later placements): one greedy pass and one for the earlier slot per
    DMA instruction (the compile time of a large layer went mostly here). Kept per job: the
    lowerings :func:`lower_dma` compares and the variants of a layer share most of their jobs."""
    fixed: list[int] = []
    base, at_i = Clock(geo), 0          # the clock after body[:at_i] and todo[:len(fixed)]
    for k in range(len(todo)):
        at, cycles = _greedy(body, todo, k, base, at_i)
        best = (cycles, -at)
        if at > at_i:
            best = min(best, (_greedy(body, todo, k, base, at_i, at - 1)[1], -(at - 1)))
        p = -best[1]
        for ins in body[at_i:p]:
            base.act(ins)
        base.act(todo[k])
        fixed.append(p)
        at_i = p
    return tuple(_build(body, todo, fixed))


def _greedy(body: Sequence[Instr], todo: Sequence[Instr], k: int, start: Clock, i0: int,
            first: int | None = None) -> tuple[int, int]:
    """From ``start`` (the clock after ``body[:i0]`` and ``todo[:k]``): ``todo[k]`` at ``first``
    (index into ``body``; ``None``: before the first instruction whose CHECK finds the engine idle),
    the later ones each before the first such instruction; returns ``todo[k]``'s position and the
    job's cycles (HALT's CHECK + 1)."""
    clock = start.copy()
    at = None
    for i in range(i0, len(body) + 1):
        while k < len(todo) and (i == first if at is None and first is not None else
                                 i == len(body) or clock.dma_idle <= clock.fetch + OVERHEAD - 1):
            at = i if at is None else at
            clock.act(todo[k])
            k += 1
        if i < len(body):
            clock.act(body[i])
    return at, clock.act(halt()) + 1


def _build(body: Sequence[Instr], todo: Sequence[Instr], pos: list[int]) -> list[Instr]:
    out: list[Instr] = []
    k = 0
    for i in range(len(body) + 1):
        while k < len(todo) and pos[k] == i:
            out.append(todo[k])
            k += 1
        if i < len(body):
            out.append(body[i])
    return out + [halt()]


__all__ = ["dma_timeline", "hardware_timeline", "Transfer", "Job", "DmaProgram", "lower_dma", "hardware_cycles", "dma_room",
           "unified_writes", "needed"]
