"""Unified-memory allocation: segments on the ping-pong halves, placement, spills, rollback.

A *segment* is a run of steps on one half. Blocks start on a multiple of ``banks`` rows, above the
highest block so far while there is room (a bump allocator), then first-fit in the rows of tensors
that are *dead*: not a live operand of the network, not saved for a later phase, not read back at
the end of the current run (the reads follow the run), and not batch-free (cores, identities and
core x core results stay, for the batch pieces that reuse them in place: ``Memory.protected``).
Instructions run in order, so a block may be reused by a *computed* result as soon as its tensor's
last reader has been emitted. Host writes happen before their run: they go above the highest block
only (rows no instruction of the segment touches). (Host writes into dead gaps at the start of a
new run on the same half were measured: fewer DRAM bytes, but the writes then wait for the earlier
runs instead of overlapping them, e.g. UCF BT fp 269k instead of 241k cycles end to end.) Intermediates stay on chip while they fit; when a step does not fit, the segment closes: what is still needed (saved intermediates, live operands) is read back to the
host store (*spilled*, counted in ``dram_bytes``) and the next segment uses the other half.
Programs longer than ``imem_depth - 1`` instructions are split into several runs of the same half.
A step that fails half-way is undone with :meth:`Memory.mark` / :meth:`Memory.rollback`.
*Pinned* blocks (:meth:`Memory.pin`: the pieces of a chunked intermediate that a later step
consumes where they are) keep their rows in their half across segments: no segment allocates them
until :meth:`Memory.unpin`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

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
        #: the lane of its DRAM image (:meth:`Memory.ensure_on_host`, first :meth:`Memory.place`)
        #: without chunk suffix; a host slice's comes from the tensor it is cut from (:attr:`parent`)
        self.dram_lane: str | None = None
        self.parent: Tensor | None = None
        #: pinned pieces (:meth:`gen.compiler.chunk.Chunking.concatenated`): the tensor is these
        #: pieces along :attr:`piece_mode`, each still on chip where it was computed, until a step
        #: consumes them (:meth:`gen.compiler.pins.Pinning.from_pins`)
        self.pieces: list[Piece] = []
        self.piece_mode: str | None = None

    def image_lane(self) -> str | None:
        """The lane of the DRAM image of this tensor (or of the tensor it is a slice of), if any."""
        t: Tensor | None = self
        while t is not None:
            if t.dram_lane is not None:
                return t.dram_lane
            t = t.parent
        return None


@dataclass(frozen=True)
class Piece:
    """A piece ``lo:hi`` (mode ``pm``) of a tensor cut along a mode, pinned on chip
    (:meth:`Memory.pin`): its rows hold it from the end of run ``run`` on, in half ``half``."""

    name: str
    modes: tuple[str, ...]
    layout: Layout
    addr: int
    half: int
    run: int
    pm: str
    lo: int
    hi: int


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
        #: tensors whose rows are never reused while on chip (set by the compiler: batch-free ones)
        self.protected: Callable[[Tensor], bool] = lambda t: False
        #: blocks allocated by the current step (their tensors may not be on chip yet)
        self.fresh: list[tuple[int, int]] = []
        #: inputs whose DRAM image lane a write set (undone by :meth:`rollback`)
        self.imaged: list[Tensor] = []
        #: per half, ``(row, rows, name)`` of pinned blocks: pieces kept on chip across segments for
        #: a later step (:meth:`pin`); no allocation in any segment of that half takes their rows
        self.pins: dict[int, list[tuple[int, int, str]]] = {0: [], 1: []}
        #: ``(half, rows) -> (row, end)``: rows reserved for the next pieces of a pinned tensor, right
        #: after the last one (:meth:`pin`): only a computed result of ``rows`` rows goes there, at ``row``
        self.prefer: dict[tuple[int, int], tuple[int, int]] = {}
        self.new_segment()

    # --- segments -----------------------------------------------------------------
    def new_segment(self, switch: bool = True) -> None:
        self.half ^= switch
        self.top = 0
        self.fresh = []
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
        if t.dram_lane is None:
            t.dram_lane = t.layout.lane.split("@")[0]

    def pin(self, t: Tensor, pm: str, lo: int, hi: int, more: int = 0) -> Piece:
        """Keep on-chip tensor ``t`` (piece ``lo:hi`` of a tensor, mode ``pm``) where it is, across
        segments, until :meth:`unpin`; reserve the rows after it for ``more`` pieces of its size in
        this half (where nothing else is yet), so that the pieces lie back to back."""
        assert t.addr is not None and t.layout is not None
        rows, key = t.layout.rows, (self.half, t.layout.rows)
        self.pins[self.half].append((t.addr, rows, t.name))
        step = ceil_to(rows, self.geo.banks)           # blocks start on a multiple of ``banks`` rows
        nxt, end = self.prefer.get(key, (None, None))
        if nxt != t.addr:
            end = t.addr + step * (1 + more)
            if end > self.geo.unified_half_rows or any(a < end and t.addr + rows < a + n for a, n in self.busy()):
                end = t.addr + step
        if t.addr + step < end:
            self.prefer[key] = (t.addr + step, end)
        else:
            self.prefer.pop(key, None)
        return Piece(t.name, t.modes, t.layout, t.addr, self.half, len(self.runs) - 1, pm, lo, hi)

    def unpin(self, names: set[str]) -> None:
        """Release the pinned blocks of ``names`` (and every reservation)."""
        for h in self.pins:
            self.pins[h] = [p for p in self.pins[h] if p[2] not in names]
        self.prefer.clear()

    def _held(self) -> list[tuple[int, int]]:
        """``(row, rows)`` of the current half's pinned blocks and reservations (:attr:`prefer`)."""
        return [(a, n) for a, n, _ in self.pins[self.half]] + \
            [(a, e - a) for (h, _), (a, e) in self.prefer.items() if h == self.half]

    # --- allocation -----------------------------------------------------------------
    def begin_step(self) -> None:
        """A new step: every block allocated so far belongs to a tensor on chip."""
        self.fresh = []

    def busy(self) -> list[tuple[int, int]]:
        """``(row, rows)`` of the blocks that may not be reused now (module docstring), sorted."""
        reads = {r.name for r in self.cur.reads}
        out = list(self.fresh) + self._held()
        for t in self.onchip.values():
            if t.addr is not None and t.layout is not None and (
                    t.name in self.keep or t.name in self.live or t.name in reads or self.protected(t)):
                out.append((t.addr, t.layout.rows))
        return sorted(out)

    def _find(self, rows: int, top: int, busy: list[tuple[int, int]], reuse: bool) -> int | None:
        """Where ``rows`` rows go: above ``top`` if they fit (past the pinned blocks there), else
        (``reuse``) the first gap between ``busy`` blocks."""
        B, half = self.geo.banks, self.geo.unified_half_rows
        base = ceil_to(top, B)
        for a, n in sorted(self._held()):
            if base < a + n and a < base + rows:
                base = ceil_to(a + n, B)
        if base + rows <= half:
            return base
        if not reuse:
            return None
        cand = 0
        for a, n in busy:
            if ceil_to(cand, B) + rows <= a:
                break
            cand = max(cand, a + n)
        base = ceil_to(cand, B)
        return base if base + rows <= half else None

    def alloc(self, rows: int, reuse: bool = True) -> int | None:
        """Allocate ``rows`` rows in the current half for a computed result (None: no room); dead
        tensors whose rows it takes leave the chip. ``reuse=False``: above the highest block only
        (a host write)."""
        busy = self.busy()
        key = (self.half, rows)
        base = self.prefer[key][0] if reuse and key in self.prefer else None
        if base is not None:        # the next piece of a pinned tensor: its reserved rows
            own = (base, self.prefer[key][1] - base)
            others = list(busy)
            others.remove(own)      # the reservation itself, once: a block at the same rows stays busy
            if any(a < base + rows and base < a + n for a, n in others):
                base = None
        if base is None:
            base = self._find(rows, self.top, busy, reuse)
        if base is None:
            return None
        self.top = max(self.top, base + rows)
        for t in list(self.onchip.values()):
            if t.addr is not None and t.layout is not None and t.addr < base + rows and base < t.addr + t.layout.rows:
                del self.onchip[t.name]
                t.addr = None
        self.fresh.append((base, rows))
        return base

    def fits(self, rows: Sequence[int], computed: Sequence[int] = ()) -> bool:
        """Would host writes of ``rows`` rows and then computed results of ``computed`` rows (in
        order) find room in the current half?"""
        top, busy = self.top, self.busy()
        for r, reuse in [(r, False) for r in rows] + [(r, True) for r in computed]:
            base = self._find(r, top, busy, reuse)
            if base is None:
                return False
            top = max(top, base + r)
            busy = sorted(busy + [(base, r)])
        return True

    def place(self, t: Tensor, layout: Layout) -> None:
        """Host-write ``t`` (from the host store) in ``layout``; :class:`NoRoom` if it does not fit."""
        addr = self.alloc(layout.rows, reuse=False)
        if addr is None:
            raise NoRoom
        if t.read_run == len(self.runs) - 1:
            # its host copy is read after the current run: write it before the next one (same half)
            self.runs.append(Run(self.half))
            self.cur = self.runs[-1]
        t.layout, t.addr = layout, addr
        root = t
        while root.parent is not None:
            root = root.parent
        if root.image_lane() is None:          # the first write of an input makes its DRAM image
            root.dram_lane = layout.lane.split("@")[0]
            self.imaged.append(root)
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
                len(self.host_ops), list(self.fresh), len(self.imaged))

    def rollback(self, mark: tuple) -> None:
        """Drop the host writes of a failed attempt (they are neither executed nor counted)."""
        nruns, nwrites, stats, top, names, nops, fresh, nimaged = mark
        for t in self.imaged[nimaged:]:
            t.dram_lane = None
        del self.imaged[nimaged:]
        for name in set(self.onchip) - names:     # placed by the failed attempt: never written
            self.onchip.pop(name).addr = None
        if len(self.runs) == nruns and self.cur is self.runs[-1]:
            del self.cur.writes[nwrites:]
            self.stats.update(stats)
            self.top = top
            self.fresh = fresh
            del self.host_ops[nops:]


__all__ = ["Tensor", "Piece", "addr_of", "NoRoom", "Memory"]
