"""Unified-memory allocation: segments on the ping-pong halves, placement, spills, rollback.

A *segment* is a run of steps on one half with a bump allocator (every block starts on a
multiple of ``banks`` rows). Intermediates stay on chip while they fit; when a step does not fit,
the segment closes: what is still needed (saved intermediates, live operands) is read back to the
host store (*spilled*, counted in ``dram_bytes``) and the next segment uses the other half.
Programs longer than ``imem_depth - 1`` instructions are split into several runs of the same half.
A step that fails half-way is undone with :meth:`Memory.mark` / :meth:`Memory.rollback`.
"""

from __future__ import annotations

from typing import Sequence

from gen.compiler.layout import Layout, ceil_to
from gen.compiler.program import Read, Run, Write
from gen.design.isa import Geometry, Instr, halt


class Tensor:
    """A tensor the compiler tracks: its modes, its layout and address on chip, its host copy."""

    def __init__(self, name: str, modes: tuple[str, ...]):
        self.name = name
        self.modes = modes           # logical modes (dummies included)
        self.layout: Layout | None = None
        self.addr: int | None = None  # on chip in the current segment
        self.on_host = False
        self.read_run = -1


def addr_of(t: Tensor) -> int:
    """The on-chip row address of ``t`` (which must be on chip)."""
    assert t.addr is not None
    return t.addr


class NoRoom(Exception):
    """A step's operands and result do not fit the current half (the segment closes, or the step is chunked)."""


class Memory:
    """The runs of a program and the tensors on chip, filled segment by segment.

    ``stats`` (the compiler's counters: ``dram_bytes`` is counted here) and ``host_ops`` are shared
    with the compiler; :meth:`rollback` restores them with the allocation state."""

    def __init__(self, geo: Geometry, elem_bytes: int, stats: dict[str, int], host_ops: list[tuple[int, str, tuple]]):
        self.geo = geo
        self.L = geo.lanes
        self.elem_bytes = elem_bytes
        self.stats = stats
        self.host_ops = host_ops
        self.runs: list[Run] = []
        self.half = 1
        self.top = 0
        self.onchip: dict[str, Tensor] = {}
        self.cur: Run | None = None
        #: tensors read back when a segment closes: saved intermediates and the live operands
        self.keep: set[str] = set()
        self.live: set[str] = set()
        self.new_segment()

    # --- segments -----------------------------------------------------------------
    def new_segment(self, switch: bool = True) -> None:
        self.half ^= switch
        self.top = 0
        self.onchip = {}
        self.cur = Run(self.half)
        self.runs.append(self.cur)

    def close_segment(self, switch: bool = True) -> None:
        """Spill what is still needed (saved intermediates, live operands) and switch halves
        (``switch=False``: the next segment uses the same half; by the DRAM timing rule its writes
        then wait for this segment's reads)."""
        for t in list(self.onchip.values()):
            if t.name in self.keep or t.name in self.live:
                self.ensure_on_host(t)
            t.addr = None
        self.new_segment(switch)

    def ensure_on_host(self, t: Tensor) -> None:
        """Read an on-chip tensor back (it then lives in the host store / DRAM model)."""
        if t.on_host:
            return
        assert t.addr is not None and t.layout is not None
        self.cur.reads.append(Read(t.addr, t.name, t.layout))
        self.stats["dram_bytes"] += t.layout.rows * self.L * self.elem_bytes
        t.on_host = True
        t.read_run = len(self.runs) - 1

    # --- allocation -----------------------------------------------------------------
    def alloc(self, rows: int) -> int | None:
        """Bump-allocate ``rows`` rows in the current half (None: no room)."""
        base = ceil_to(self.top, self.geo.banks)
        if base + rows > self.geo.unified_half_rows:
            return None
        self.top = base + rows
        return base

    def fits(self, rows: Sequence[int]) -> bool:
        """Would the bump allocator place blocks of ``rows`` in the current half?"""
        top = self.top
        for r in rows:
            top = ceil_to(top, self.geo.banks) + r
        return top <= self.geo.unified_half_rows

    def place(self, t: Tensor, layout: Layout) -> None:
        """Host-write ``t`` (from the host store) in ``layout``; :class:`NoRoom` if it does not fit."""
        addr = self.alloc(layout.rows)
        if addr is None:
            raise NoRoom
        if t.read_run == len(self.runs) - 1:
            # its host copy is read after the current run: write it before the next one (same half)
            self.runs.append(Run(self.half))
            self.cur = self.runs[-1]
        t.layout, t.addr = layout, addr
        self.onchip[t.name] = t
        self.cur.writes.append(Write(addr, t.name, layout))
        self.stats["dram_bytes"] += layout.rows * self.L * self.elem_bytes

    # --- program ------------------------------------------------------------------------
    def add_instrs(self, instrs: list[Instr]) -> None:
        """Append to the current run; a full instruction memory starts another run (same half)."""
        cap = self.geo.imem_depth - 1
        for ins in instrs:
            if len(self.cur.program) >= cap:
                self.runs.append(Run(self.half))   # same half: on-chip data stays
                self.cur = self.runs[-1]
            self.cur.program.append(ins)

    def finish(self) -> None:
        for r in self.runs:
            r.program.append(halt())

    # --- undo -----------------------------------------------------------------------------
    def mark(self) -> tuple:
        """The state :meth:`rollback` returns to."""
        return (len(self.runs), len(self.cur.writes), dict(self.stats), self.top, set(self.onchip),
                len(self.host_ops))

    def rollback(self, mark: tuple) -> None:
        """Drop the host writes of a failed attempt (they are neither executed nor counted)."""
        nruns, nwrites, stats, top, names, nops = mark
        for name in set(self.onchip) - names:     # placed by the failed attempt: never written
            self.onchip.pop(name).addr = None
        if len(self.runs) == nruns and self.cur is self.runs[-1]:
            del self.cur.writes[nwrites:]
            self.stats.update(stats)
            self.top = top
            del self.host_ops[nops:]


__all__ = ["Tensor", "addr_of", "NoRoom", "Memory"]
