"""Chunking a step that does not fit one ping-pong half: which modes to cut, into how many pieces,
and the compiler's methods that do it (:class:`Chunking`, a mixin of
:class:`gen.compiler.compiler.Compiler`).

A step whose operands and result do not fit one unified half even alone (or whose mappings do not
fit the accumulation unit) is cut along a mode ``m`` its result keeps (every piece ``m@lo:hi`` an
ordinary step on host slices of the operands holding ``m``, the host concatenating the pieces'
results: :meth:`Chunking.concatenated`), or along contracted modes with the partial sums kept in
the accumulation unit (:meth:`Chunking.accumulated`). The cuts are chosen from row estimates
(:func:`est_rows`), before any layout exists.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from gen.compiler.allocate import NoRoom, Piece, Tensor, addr_of
from gen.compiler.layout import ceil_to
from gen.compiler.mapping import acc_rows, acc_span, free_instrs, instantiate
from gen.compiler.program import CompileError, StepRecord, gemm_dataflows, gemm_transposes


def est_rows(modes: Sequence[str], sizes: Mapping[str, int], lanes: int, short_lanes: bool = True) -> int:
    """Rows of a tensor, every mode padded to ``lanes`` where it could be the lane (upper bound);
    ``short_lanes=False``: a mode shorter than a lane is not counted as a possible lane where a longer
    one exists (a chunk piece of one value would otherwise count 4x its rows)."""
    ms = [m for m in modes if not m.startswith("_")]
    if not ms:
        return 1
    cand = ms if short_lanes else [x for x in ms if sizes[x] >= lanes] or ms
    return max(math.prod(sizes[x] for x in ms if x != lane) * -(-sizes[lane] // lanes) for lane in cand) + \
        math.prod(sizes[x] for x in ms) // lanes   # slack for padding of a second (A-lane) mode


@dataclass(frozen=True)
class Fusable:
    """A later step of a network that consumes a step's result with an operand already at hand
    (``other``): when the step is chunked over a mode this one keeps, each piece runs it too, on
    chip (:meth:`Chunking.concatenated`)."""

    s_idx: int
    other: Tensor
    #: the result is this step's left operand
    lhs: bool
    out_modes: tuple[str, ...]
    out_name: str


def fusable_depth(tail: Sequence[Fusable], m: str) -> int:
    """How many leading steps of ``tail`` keep mode ``m`` (can run piece by piece along it)."""
    n = 0
    for f in tail:
        if m not in f.out_modes:
            break
        n += 1
    return n


def choose_chunk(a_modes: Sequence[str], b_modes: Sequence[str], out_modes: Sequence[str],
                 sizes: Mapping[str, int], budget: int, lanes: int,
                 candidates: Sequence[str] | None = None,
                 extra: Sequence[Sequence[str]] = (), short_lanes: bool = True) -> tuple[str, int] | None:
    """``(mode, piece size)`` to cut a step ``a x b -> out`` into pieces whose estimated rows fit
    ``budget``: the fewest pieces, then the largest mode (when no mode's pieces fit, the mode whose
    pieces come closest: they are cut again); None when no mode can be cut. The modes to cut are
    ``candidates`` (default: the modes of ``out``); ``extra``: the modes of more tensors each piece
    holds (the operands and results of fused steps, :class:`Fusable`).

    The low halves of split modes (``~l``, lane-sized) are cut only as a last resort: that leaves
    lanes of 1-2 values (padding) and multiplies the pieces. A piece at least a lane long is
    rounded up to whole lane blocks (in case ``mode`` becomes a lane)."""
    best = None
    cands = [m for m in (out_modes if candidates is None else candidates) if sizes[m] >= 2]
    lows = [m for m in cands if m.split("@")[0].endswith("~l")]
    for m in [m for m in cands if m not in lows] or lows:
        for c in range(2, sizes[m] + 1):
            piece = -(-sizes[m] // c)
            sz = dict(sizes)
            sz[m] = piece
            rows = sum(est_rows(t, sz, lanes, short_lanes) for t in (a_modes, b_modes, out_modes, *extra))
            if rows <= budget or c == sizes[m]:
                # fewest pieces that fit; among modes, the one that fits with fewest pieces; when no
                # cut of one mode fits (the pieces are cut again), the one leaving the fewest rows
                key = (rows > budget, rows if rows > budget else 0, c, -sizes[m])
                if best is None or key < best[0]:
                    best = (key, m, c)
                break
    if best is None:
        return None
    _, m, c = best
    S = sizes[m]
    piece = -(-S // c)
    if lanes <= piece and ceil_to(piece, lanes) < S:
        piece = ceil_to(piece, lanes)    # whole lane blocks if m becomes a lane
    return m, piece


def choose_cuts(a_modes: Sequence[str], b_modes: Sequence[str], out_modes: Sequence[str],
                candidates: Sequence[str], sizes: Mapping[str, int], budget: int,
                lanes: int) -> list[tuple[str, int]] | None:
    """Cuts ``[(mode, piece size)]`` of ``candidates`` (one after the other, :func:`choose_chunk`)
    until the pieces' estimated rows fit ``budget``; None if cutting all of them does not."""
    sz = dict(sizes)
    rest = list(candidates)
    cuts: list[tuple[str, int]] = []
    while est_rows(a_modes, sz, lanes) + est_rows(b_modes, sz, lanes) + est_rows(out_modes, sz, lanes) > budget:
        ch = choose_chunk(a_modes, b_modes, out_modes, sz, budget, lanes, rest)
        if ch is None:
            return None
        cuts.append(ch)
        sz[ch[0]] = ch[1]
        rest.remove(ch[0])
    return cuts or None


def chunk_rows(a_modes: Sequence[str], b_modes: Sequence[str], cuts: Sequence[tuple[str, int]],
               sizes: Mapping[str, int], lanes: int) -> int:
    """Estimated rows the host writes to run a step in the pieces of ``cuts`` (``(mode, piece)``):
    an operand holding a cut mode is written in slices (the last ones may be zero-padded to whole
    pieces), one holding none of them once per piece."""
    n = math.prod(-(-sizes[m] // piece) for m, piece in cuts)
    sz = dict(sizes)
    sz.update(dict(cuts))
    return sum(est_rows(t, sz, lanes) * n for t in (a_modes, b_modes))


class Chunking:
    """The chunking methods of :class:`gen.compiler.compiler.Compiler` (a mixin: they use its memory,
    planner, statistics and :meth:`step`)."""

    def chunked(self, label: str, s_idx: int, A: Tensor, B: Tensor, keep: set[str], out_name: str,
                final: bool, tail: Sequence[Fusable] = ()) -> Tensor:
        """Split a step that does not fit one half (or the accumulation unit) into pieces.

        Three ways. First, when later steps (``tail``) keep a mode of the result: over that mode,
        the most of them that keep it running piece by piece too (:meth:`concatenated`), so that
        their intermediates stay on chip instead of going through DRAM (a fused chain: the
        across-stage processing of seed 002). Else the one writing fewer rows from the host: over
        a mode the result keeps (:meth:`concatenated`), or over a contracted mode with the partial
        sums held in the accumulation unit across the pieces (:meth:`accumulated`; only when it is
        the unified memory, not the accumulation unit, that is too small)."""
        sizes = self.sizes
        budget = int(self.geo.unified_half_rows * self.piece_fraction)
        out_modes = [m for m in dict.fromkeys(A.modes + B.modes) if m in keep and not m.startswith("_")]
        kmodes = [m for m in dict.fromkeys(A.modes) if m in B.modes and m not in keep and not m.startswith("_")]
        for t in (A, B):
            if t.name in self.mem.onchip and not t.on_host:
                self.mem.ensure_on_host(t)
        depth = {m: fusable_depth(tail, m) for m in out_modes if sizes[m] >= 2}
        fallback = None
        for d in range(max(depth.values(), default=0), 0, -1):     # the longest fused chain that fits
            extra = [t for f in tail[:d] for t in (f.other.modes, f.out_modes)]
            ch = choose_chunk(A.modes, B.modes, out_modes, sizes, budget, self.L,
                              [m for m, dm in depth.items() if dm >= d], extra, short_lanes=False)
            if ch is not None:
                sz = dict(sizes)
                sz[ch[0]] = ch[1]
                alone = sum(est_rows(t, sz, self.L, False) for t in (A.modes, B.modes, out_modes))
                if alone + sum(est_rows(t, sz, self.L, False) for t in extra) <= budget:    # the fused pieces fit
                    return self.concatenated(label, s_idx, A, B, keep, out_name, *ch, tail[:d])
                if fallback is None and sum(est_rows(t, sz, self.L) for t in (A.modes, B.modes, out_modes)) > budget:
                    fallback = (ch, d)      # the step's own pieces do not fit: they are cut again either way
        if fallback is not None:
            return self.concatenated(label, s_idx, A, B, keep, out_name, *fallback[0], tail[:fallback[1]])
        free = choose_chunk(A.modes, B.modes, out_modes, sizes, budget, self.L)
        cuts = choose_cuts(A.modes, B.modes, out_modes, kmodes, sizes, budget, self.L)
        if cuts is not None and (free is None or chunk_rows(A.modes, B.modes, cuts, sizes, self.L)
                                 <= chunk_rows(A.modes, B.modes, [free], sizes, self.L)):
            res = self.accumulated(label, s_idx, A, B, keep, out_name, final, cuts)
            if res is not None:
                return res
        if free is None:
            raise CompileError(f"step {s_idx} of {label} ({A.modes} x {B.modes} -> {sorted(keep)}, sizes "
                               f"{ {m: sizes[m] for m in set(A.modes) | set(B.modes)} }) does not fit one unified "
                               f"half, has no free mode to chunk, and no contracted mode whose pieces fit with the "
                               f"partial sums in the accumulation unit", field="unified_kb")
        return self.concatenated(label, s_idx, A, B, keep, out_name, *free)

    def concatenated(self, label: str, s_idx: int, A: Tensor, B: Tensor, keep: set[str], out_name: str,
                     m: str, piece: int, tail: Sequence[Fusable] = ()) -> Tensor:
        """Chunk over mode ``m`` of the result: pieces ``m@lo:hi``, concatenated by the host.

        Operands holding ``m`` are host slices; the others are written again for every piece; each
        piece is an ordinary step (itself chunked again if it still does not fit), its result is
        read back, and the host concatenates the pieces along ``m``. Every piece therefore moves its
        operands and result through DRAM (counted in ``dram_bytes``).

        ``tail``: later steps that keep ``m`` (:class:`Fusable`), run on every piece's result right
        after it (their other operands sliced too where they hold ``m``): only the last one's
        pieces are read back (and those of an intermediate in ``Memory.keep``), and the result is
        that step's (named ``tail[-1].out_name``). The pieces share runs as long as they fit a half;
        with ``Compiler.run_per_piece`` every piece is a run of its own (the first compute starts
        after one piece's writes instead of a half's; the operands not cut are written per piece).
        A piece that does not fit a half is cut again (:meth:`chunked`); with ``Compiler.fuse_nested``
        its own pieces run the tail too, as far as they keep the mode of that cut, and only the rest
        of the tail runs here on the assembled piece (HOOI 32^4: the second TTM of a chain no longer
        writes its input back to DRAM and reads it again, ``docs/hooi.md``).
        """
        S = self.sizes[m]
        out_modes = [x for x in dict.fromkeys(A.modes + B.modes) if x in keep and not x.startswith("_")]
        self.stats["chunked_steps"] += 1
        # the result of every step run on the pieces: (name, modes); the last is returned, the
        # others are assembled too where they are kept (``Memory.keep``: saved for later)
        levels = [(out_name, out_modes)] + [(f.out_name, [x for x in f.out_modes if not x.startswith("_")])
                                            for f in tail]
        kept = [i == len(tail) or name in self.mem.keep or name in self.assemble
                for i, (name, _) in enumerate(levels)]
        # levels a later step contracts over ``m``: their pieces stay where they are (pinned), and
        # only those the host needs too (the chain's result) are read back
        pin = [k and self._pinnable(name, modes, m) for (name, modes), k in zip(levels, kept)]
        host = [k and (i == len(tail) or name in self.assemble or not pin[i])
                for i, ((name, _), k) in enumerate(zip(levels, kept))]
        pinned: list[list[Piece]] = [[] for _ in levels]
        parts: list[list[tuple[Tensor, str]]] = [[] for _ in levels]
        live = self.mem.live | {A.name, B.name}
        for lo in range(0, S, piece):
            hi = min(S, lo + piece)
            pm = f"{m}@{lo}:{hi}"     # unique per extent: mode sizes are global by name
            # pieces still to come in this piece's half (every other one with a run per piece)
            more = (-(-S // piece) - 1 - lo // piece) // (2 if self.run_per_piece else 1)
            self.sizes[pm] = hi - lo

            def ren(modes):
                return tuple(pm if x == m else x for x in modes)

            ops = [self._slice(t, m, pm, lo, hi) if m in t.modes else t for t in (A, B)]
            others = [self._slice(f.other, m, pm, lo, hi) if m in f.other.modes else f.other for f in tail]
            infos = [(set(o.modes), set(ren(f.out_modes)), o) for f, o in zip(tail, others)] + [None]
            pkeep = {pm if x == m else x for x in keep}
            names = [f"{out_name}[{pm}]"] + [f"{f.out_name}[{pm}]" for f in tail]
            # ``fuse_nested``: a piece cut again runs the chain on its own pieces as far as they keep
            # the mode cut (its levels kept here are read back and concatenated there)
            ptail = [Fusable(f.s_idx, o, f.lhs, ren(f.out_modes), n)
                     for f, o, n in zip(tail, others, names[1:])] if self.fuse_nested else []
            added = {n for n, k in zip(names, kept) if k} - self.assemble if ptail else set()
            self.assemble |= added
            self.mem.live = live | {o.name for o in others} if ptail else live
            res = self.step(label, s_idx, ops[0], ops[1], pkeep, names[0], infos[0], not tail, ptail)
            self.assemble -= added
            done = names.index(res.name)        # the levels the piece's own pieces ran
            for j in range(done):
                if kept[j]:                     # assembled on the host by the nested cut
                    self._unpin_level(j, pin, host, pinned, parts)
                    parts[j].append((self.registry[names[j]], pm))
            self._keep_piece(done, res, pm, lo, hi, more, pin, host, pinned, parts)
            for k, (f, o) in enumerate(zip(tail, others)):
                if k < done:
                    continue
                fkeep = set(ren(f.out_modes)) | {x for x in res.modes + o.modes if x.startswith("_")}
                self.mem.live = live | {res.name, o.name}
                lhs, rhs = (res, o) if f.lhs else (o, res)
                res = self.step(label, f.s_idx, lhs, rhs, fkeep, f"{f.out_name}[{pm}]", infos[k + 1],
                                k == len(tail) - 1)
                self._keep_piece(k + 1, res, pm, lo, hi, more, pin, host, pinned, parts)
            if self.run_per_piece and hi < S:
                self.mem.live = live
                self.mem.close_segment()
        out = None
        for j, ((name, modes), ps, k) in enumerate(zip(levels, parts, kept)):
            if not k:
                continue
            if host[j]:
                out = self._concat(name, modes, m, ps)
            else:
                out = Tensor(name, tuple(modes))
                self.registry[name] = out
            if pin[j]:
                out.pieces, out.piece_mode = pinned[j], m
        return out

    def _concat(self, name: str, modes: Sequence[str], m: str, parts: list[tuple[Tensor, str]]) -> Tensor:
        """The host tensor ``name`` concatenated from the pieces ``parts`` (read back) along ``m``."""
        out = Tensor(name, tuple(modes))
        out.on_host = True
        out.read_run = max(r.read_run for r, _ in parts)
        out.dram_lane = parts[0][0].dram_lane
        self.host_ops.append((out.read_run, "concat", (out.name, out.modes, m,
                                                        tuple((r.name, pm) for r, pm in parts))))
        self.registry[out.name] = out
        return out

    def accumulated(self, label: str, s_idx: int, A: Tensor, B: Tensor, keep: set[str], out_name: str,
                    final: bool, cuts: list[tuple[str, int]]) -> Tensor | None:
        """Chunk over contracted modes (``cuts``: mode, piece size): the partial sums stay in the
        accumulation unit.

        Every piece is a segment of its own (so the pieces alternate ping-pong halves and the host
        writes of one overlap the compute of the other) holding host slices of both operands (one
        range of every cut mode), zero-padded to whole pieces, so that every piece is the same step:
        piece 0 is planned, every piece runs its instructions at the same addresses, the later ones
        adding to the accumulation unit (``ACC``; each free-loop index keeps its own accumulation
        rows, :func:`gen.compiler.mapping.acc_span` apart, or interleaved at their result offsets
        where only that fits: :meth:`_accum_mapping`). The last piece's write-back leaves the result
        on chip like any step's. None when no mapping keeps its partial sums in the accumulation unit."""
        sizes = self.sizes
        names = {m: f"{m}#{piece}" for m, piece in cuts}   # one name per cut: the pieces are one step
        sizes.update({names[m]: piece for m, piece in cuts})
        ranges = list(itertools.product(*([(lo, min(sizes[m], lo + piece)) for lo in range(0, sizes[m], piece)]
                                          for m, piece in cuts)))
        macs = round(math.prod(self.useful(x) for x in set(A.modes) | set(B.modes)))
        self.mem.live = self.mem.live | {A.name, B.name}
        self.mem.close_segment()
        mark = self.mem.mark()
        nops = len(self.host_ops)
        slices = [self._slices(t, cuts, names, ranges[0]) for t in (A, B)]
        chosen = self._accum_mapping(slices[0], slices[1], keep)
        if chosen is None:
            self.mem.rollback(mark)
            del self.host_ops[nops:]
            return None
        plan, mp, stride, addrs = chosen
        self.stats["chunked_steps"] += 1
        self.stats["macs"] += macs
        roles = [slices.index(plan.X), slices.index(plan.Y)]
        full = math.prod(sizes[m] for m, _ in cuts)
        for p, rng in enumerate(ranges):
            if p:
                self.mem.close_segment()
                slices = [self._slices(t, cuts, names, rng) for t in (A, B)]
                # a fresh segment: the same rows as piece 0's, but in a half holding pins
                addrs = self._piece_rows(plan, slices[roles[0]], slices[roles[1]], True, True)
            instrs = self._emit_piece(mp, addrs, stride, p > 0, f"step {s_idx} of {label}: piece {p} of its chunks "
                                      f"over contracted modes (pinned rows in its half)")
            where = ",".join(f"{m}[{lo}:{hi}]" for (m, _), (lo, hi) in zip(cuts, rng))
            self.steps.append(StepRecord(label, s_idx, A.modes, B.modes, tuple(plan.keep_modes),
                                         f"A={(A, B)[roles[0]].name} B={(A, B)[roles[1]].name} {where}",
                                         mp.grid, len(instrs), macs * math.prod(hi - lo for lo, hi in rng) // full,
                                         mp.cycles, plan.lo.modes, gemm_dataflows(instrs), gemm_transposes(instrs)))
        out = Tensor(out_name, tuple(plan.keep_modes))
        out.layout, out.addr = plan.lo, addrs[2]
        self.mem.onchip[out.name] = out
        self.registry[out.name] = out
        if final:
            self.mem.ensure_on_host(out)
        return out

    def _piece_rows(self, plan, X: Tensor, Y: Tensor, write_x: bool, write_y: bool) -> tuple[int, int, int] | None:
        """A later piece of an accumulated step placed in the open segment: its operands written
        (``write_x`` / ``write_y``) in ``plan``'s layouts and its result allocated, as ``(X row, Y row,
        result row)``; None where they do not fit."""
        try:
            if write_x:
                self.prepare(X, plan.alpha, plan.xo)
            if write_y:
                self.prepare(Y, plan.beta, plan.yo)
        except NoRoom:
            return None
        out = self.mem.alloc(plan.lo.rows)
        return None if out is None else (addr_of(X), addr_of(Y), out)

    def _emit_piece(self, mp, addrs: tuple[int, int, int] | None, stride, carry: bool, what: str) -> list:
        """The instructions of a piece of an accumulated step at ``addrs`` (:meth:`_piece_rows`; None:
        it did not fit), added to the program; :class:`CompileError` naming ``what`` where they do not
        fit or map."""
        instrs = None if addrs is None else instantiate(mp, *addrs, self.geo, acc_stride=stride, carry=carry)
        if instrs is None:
            raise CompileError(f"{what} does not fit or map at its rows", field="program")
        self.mem.add_instrs(instrs)
        self._traffic(instrs)
        return instrs

    def _slices(self, t: Tensor, cuts, names, rng) -> Tensor:
        """The host slice of ``t`` at one range of every cut mode (see :meth:`accumulated`)."""
        for (m, _), (lo, hi) in zip(cuts, rng):
            t = self._slice(t, m, names[m], lo, hi)
        return t

    def _accum_mapping(self, As: Tensor, Bs: Tensor, keep: set[str], held: Tensor | None = None):
        """Place piece 0 of :meth:`accumulated` (slices ``As``, ``Bs``): the fastest plan and mapping
        whose results of all free-loop indices fit the accumulation unit, as ``(plan, mapping,
        accumulation stride, (X row, Y row, result row))``; None if there is none. The indices' rows
        sit side by side (``acc_span`` apart), or, where that does not fit, at their result offsets
        (stride None): a free loop over lane blocks or other low result rows interleaves with the
        others in no more rows than the result has (UCF TR-14 fp: a rank-5 lane of two blocks, whose
        16-CE mapping needed 9,568 rows side by side and 4,800 interleaved, of 8,192). ``held``: an
        operand on chip that the plan must take in its layout (:meth:`Pinning.from_pins
        <gen.compiler.pins.Pinning.from_pins>`)."""
        for _, plan in self.planner.scored_plans(As, Bs, keep, None):
            if held is not None and (plan.xo if plan.X is held else plan.yo) is not None:
                continue
            need = [o.rows for o in (plan.xo, plan.yo) if o is not None]
            if not self.mem.fits(need, [plan.lo.rows]):
                continue
            for mp in plan.mappings:
                # the free-loop indices' partial sums side by side (``acc_span`` apart), or interleaved
                # at their result offsets where that is what fits (lane blocks of a long lane)
                for stride in ([acc_span(mp, self.geo), None] if free_instrs(mp) > 1 else [0]):
                    if acc_rows(mp, self.geo, stride) > self.plan_geo.accum_rows:
                        continue
                    mark, modes = self.mem.mark(), (As.modes, Bs.modes)
                    self.prepare(plan.X, plan.alpha, plan.xo)
                    self.prepare(plan.Y, plan.beta, plan.yo)
                    addrs = (addr_of(plan.X), addr_of(plan.Y), self.mem.alloc(plan.lo.rows))
                    if addrs[2] is not None and instantiate(mp, *addrs, self.geo, acc_stride=stride) is not None:
                        return plan, mp, stride, addrs
                    self.mem.rollback(mark)
                    As.modes, Bs.modes = modes
        return None

    def _slice(self, t: Tensor, m: str, pm: str, lo: int, hi: int) -> Tensor:
        """The host slice ``lo:hi`` of ``t`` along ``m``, as mode ``pm``."""
        self.dummies += 1      # a fresh suffix: slice names never collide with piece results
        st = Tensor(f"{t.name}[{pm}]~{self.dummies}", tuple(pm if x == m else x for x in t.modes))
        st.on_host = True
        st.read_run = t.read_run
        st.parent = t
        self.host_ops.append((t.read_run, "slice", (t.name, st.name, m, pm, lo, hi)))
        self.stats["chunk_slices"] += 1
        return st


__all__ = ["Fusable", "fusable_depth", "est_rows", "choose_chunk", "choose_cuts", "chunk_rows", "Chunking"]
