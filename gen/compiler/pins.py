"""Pinned pieces: a chunked intermediate that a later step contracts over its cut stays on chip.

When a step is chunked along a mode ``m`` (:meth:`gen.compiler.chunk.Chunking.concatenated`) and a
level of it is a saved intermediate or a result that a later step contracts over ``m``
(:attr:`Compiler.pin_for <gen.compiler.compiler.Compiler>`, set by
:func:`gen.compiler.phases.compile_networks` ``pin``), its pieces are *pinned*: each stays where
it was computed, in its half, across later segments (:meth:`gen.compiler.allocate.Memory.pin`, which
also reserves the rows after it for the next piece of its size, so that a half's pieces lie back
to back). Only a level the host needs too (a chain's result) is read back. The later step then runs
on the pieces where they are (:meth:`Pinning.from_pins`): per half one GEMM over the half's pieces
as one tensor, with the matching rows of its other operand (a host slice, or the rows taken at the
pieces' indices), the partial sums carried in the accumulation unit from one half to the other.
Where it cannot (another layout wanted, no mapping at the rows), the pieces are read back after the
runs that made them, whose rows have held them since, and concatenated on the host
(:meth:`Pinning.unpinned`). HOOI: the prefix two TTM chains share never goes to DRAM
(``docs/hooi.md``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from gen.compiler.allocate import Piece, Tensor
from gen.compiler.program import Read, StepRecord, gemm_dataflows, gemm_transposes


class Pinning:
    """The pinned-piece methods of :class:`gen.compiler.compiler.Compiler` (a mixin, beside
    :class:`gen.compiler.chunk.Chunking`, whose :meth:`~gen.compiler.chunk.Chunking.concatenated`
    pins and whose ``_slice`` / ``_concat`` these use)."""

    def _pinnable(self, name: str, modes: Sequence[str], m: str) -> bool:
        """Pin the pieces of level ``name`` (modes ``modes``) cut along ``m``? When the later step that
        uses it contracts ``m`` (:attr:`Compiler.pin_for`) and the whole tensor takes at most the rows
        of one ping-pong half (its pieces alternate halves: about half of each)."""
        rows = math.prod(self.sizes[x] for x in modes if not x.startswith("_")) // self.L
        return m in self.pin_for.get(name, ()) and rows <= self.geo.unified_half_rows

    def _keep_piece(self, j: int, res: Tensor, pm: str, lo: int, hi: int, more: int, pin: list[bool],
                    host: list[bool], pinned: list[list[Piece]], parts: list[list[tuple[Tensor, str]]]) -> None:
        """Piece ``pm`` (``lo:hi``) of level ``j`` (``res``, just computed) of
        :meth:`~gen.compiler.chunk.Chunking.concatenated`: pinned where it is (``more``: pieces of
        the level still to come in this half), read back where the host needs it. A piece that is
        not on chip (cut again) unpins its level."""
        if pin[j] and res.name not in self.mem.onchip:
            self._unpin_level(j, pin, host, pinned, parts)
        if pin[j]:
            pinned[j].append(self.mem.pin(res, pm, lo, hi, more))
        if host[j]:
            self.mem.ensure_on_host(res)
        parts[j].append((res, pm))

    def _unpin_level(self, j: int, pin: list[bool], host: list[bool], pinned: list[list[Piece]],
                     parts: list[list[tuple[Tensor, str]]]) -> None:
        """Level ``j`` goes through the host after all: its pieces pinned so far are read back after
        the runs that made them (their rows have held them since)."""
        if not pin[j]:
            return
        pin[j] = False
        if not host[j]:
            host[j] = True
            parts[j][:] = [(self._read_back(p), p.pm) for p in pinned[j]]
        self.mem.unpin({p.name for p in pinned[j]})
        pinned[j].clear()

    def _read_back(self, p: Piece) -> Tensor:
        """Host copy of pinned piece ``p``: read back after the run that made it."""
        t = Tensor(p.name, p.modes)
        t.layout, t.on_host, t.read_run = p.layout, True, p.run
        t.dram_lane = p.layout.lane.split("@")[0]
        self.mem.runs[p.run].reads.append(Read(p.addr, p.name, p.layout))
        self.stats["dram_bytes"] += p.layout.rows * self.L * self.elem_bytes
        self.registry[p.name] = t
        return t

    def unpinned(self, t: Tensor) -> None:
        """``t``'s pinned pieces released: the host holds ``t`` from then on (read back after their
        runs and concatenated, unless it already does)."""
        pieces, t.pieces = t.pieces, []
        self.mem.unpin({p.name for p in pieces})
        if t.on_host:
            return
        c = self._concat(t.name, t.modes, t.piece_mode, [(self._read_back(p), p.pm) for p in pieces])
        t.on_host, t.read_run, t.dram_lane = True, c.read_run, c.dram_lane
        self.registry[t.name] = t

    def from_pins(self, label: str, s_idx: int, A: Tensor, B: Tensor, keep: set[str], out_name: str,
                  final: bool) -> Tensor | None:
        """A step over an operand whose pieces are pinned (:meth:`Chunking.concatenated
        <gen.compiler.chunk.Chunking.concatenated>`) that contracts the mode they were cut along:
        one run per unit of :meth:`_pin_units` (the pieces of one half, merged where they lie back to
        back, so that each GEMM contracts as long a mode as it can), in its half, on the pieces where
        they are, with the other operand's rows at their indices (a host slice), the partial sums
        held in the accumulation unit from run to run as in :meth:`Chunking.accumulated
        <gen.compiler.chunk.Chunking.accumulated>` (HOOI: the shared prefix of two TTM chains never
        leaves the chip, ``docs/hooi.md``). The pieces must be of one size and layout, and the plan
        must take them in that layout: None (nothing emitted) otherwise; :class:`~gen.compiler.program.CompileError` where
        a later unit does not fit or map at its rows."""
        pinned, other = (A, B) if A.pieces else (B, A)
        m = pinned.piece_mode
        if m in keep or m not in other.modes or other.pieces:
            return None
        units = self._pin_units(pinned.pieces)
        if units is None:
            return None
        size = len(units[0][3])
        common = f"{m}#{size}"
        self.sizes[common] = size
        if not other.on_host:
            self.mem.ensure_on_host(other)
        macs = round(math.prod(self.useful(x) for x in set(A.modes) | set(B.modes)))
        self.mem.live = self.mem.live | {A.name, B.name}
        nops = len(self.host_ops)
        plan = out = None
        for k, (half, addr, layout, idx, pm, vname) in enumerate(units):
            self.mem.close_segment(switch=self.mem.half != half)
            v = Tensor(vname, tuple(common if x == pm else x for x in pinned.pieces[0].modes))  # first's names
            v.layout = dataclasses.replace(layout, modes=tuple(common if x == pm else x for x in layout.modes))
            v.addr = addr
            self.mem.onchip[v.name] = v
            if idx == list(range(idx[0], idx[-1] + 1)):
                sl = self._slice(other, m, common, idx[0], idx[-1] + 1)
            else:
                sl = self._take(other, m, common, idx)
            if plan is None:
                mark = self.mem.mark()
                chosen = self._pinned_mapping(*((v, sl) if pinned is A else (sl, v)), v, keep)
                if chosen is None:
                    self.mem.rollback(mark)
                    self.mem.onchip.pop(v.name)
                    del self.host_ops[nops:]
                    return None
                plan, mp, stride, addrs = chosen
                pin_x = plan.X is v
            else:
                addrs = self._piece_rows(plan, *((v, sl) if pin_x else (sl, v)), not pin_x, pin_x)
            instrs = self._emit_piece(mp, addrs, stride, k > 0,
                                      f"step {s_idx} of {label}: the pinned pieces {vname} of {pinned.name}")
            self.steps.append(StepRecord(label, s_idx, A.modes, B.modes, tuple(plan.keep_modes),
                                         f"A={A.name} B={B.name} {vname} pinned", mp.grid, len(instrs),
                                         macs * size // self.sizes[m], mp.cycles, plan.lo.modes,
                                         gemm_dataflows(instrs), gemm_transposes(instrs)))
            out = addrs[2]
        self.stats["chunked_steps"] += 1
        self.stats["macs"] += macs
        self.mem.unpin({p.name for p in pinned.pieces})
        pinned.pieces = []
        res = Tensor(out_name, tuple(plan.keep_modes))
        res.layout, res.addr = plan.lo, out
        self.mem.onchip[res.name] = res
        self.registry[res.name] = res
        if final:
            self.mem.ensure_on_host(res)
        return res

    @staticmethod
    def _pin_units(pieces: Sequence[Piece]):
        """The runs of :meth:`from_pins`, in the order the pieces were made: ``(half, row, layout,
        indices of the cut mode, piece mode, name)``, the pieces of one half merged into one where
        they lie back to back in the order of the mode (the piece mode outermost in their layout:
        the merged piece is the same layout with that mode longer), else one per piece; None where
        the pieces differ in size or layout."""
        first = pieces[0]
        size = first.hi - first.lo

        def named(p: Piece):           # the piece's modes and layout with its mode named as the first's
            ren = tuple(first.pm if x == p.pm else x for x in p.layout.modes)
            return tuple(first.pm if x == p.pm else x for x in p.modes), dataclasses.replace(p.layout, modes=ren)

        if any(p.hi - p.lo != size or named(p) != named(first) for p in pieces[1:]):
            return None
        lay = first.layout
        halves = sorted({p.half for p in pieces}, key=lambda h: next(i for i, p in enumerate(pieces) if p.half == h))
        groups = [sorted((p for p in pieces if p.half == h), key=lambda p: p.lo) for h in halves]
        merge = (lay.modes[0] == first.pm and lay.rstride[0] * lay.ext[0] == lay.rows
                 and (not lay.sext or lay.sext[0] == lay.ext[0]) and len({len(g) for g in groups}) == 1
                 and all(b.addr == a.addr + lay.rows for g in groups for a, b in zip(g, g[1:])))
        if not merge:
            return [(p.half, p.addr, lay, list(range(p.lo, p.hi)), first.pm, p.name) for p in pieces]
        n = len(groups[0])
        big = dataclasses.replace(lay, ext=(lay.ext[0] * n, *lay.ext[1:]), rows=lay.rows * n,
                                  sext=(lay.sext[0] * n, *lay.sext[1:]) if lay.sext else lay.sext)
        return [(g[0].half, g[0].addr, big, [i for p in g for i in range(p.lo, p.hi)], first.pm,
                 f"{g[0].name}+{n - 1}") for g in groups]

    def _pinned_mapping(self, Xs: Tensor, Ys: Tensor, view: Tensor, keep: set[str]):
        """Piece 0 of :meth:`from_pins` placed: :meth:`~gen.compiler.chunk.Chunking._accum_mapping`
        among the plans that take the pinned piece ``view`` in its layout."""
        return self._accum_mapping(Xs, Ys, keep, held=view)

    def _take(self, t: Tensor, m: str, pm: str, idx: Sequence[int]) -> Tensor:
        """The host tensor of ``t`` at the indices ``idx`` of ``m``, as mode ``pm``."""
        self.dummies += 1
        st = Tensor(f"{t.name}[{pm}]~{self.dummies}", tuple(pm if x == m else x for x in t.modes))
        st.on_host = True
        st.read_run = t.read_run
        st.parent = t
        self.host_ops.append((t.read_run, "slice", (t.name, st.name, m, pm, tuple(idx), None)))
        self.stats["chunk_slices"] += 1
        return st


__all__ = ["Pinning"]
