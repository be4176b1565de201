"""Mapping one pairwise step (a loop nest) onto the address generators and the CE grid.

Every loop of a step is an :class:`Lp`: a trip count and a row stride per tensor (A, B, output).
:func:`map_gemm_all` fuses loops that walk memory as one (:func:`merge_loops`), then enumerates
the CE grids ``gm x gn x gk`` (products <= ``num_ces``), the loop each grid index splits, the
``K`` loop (largest contracted) and ``L0`` / ``L1`` (largest free loops); the loops left over are
*unrolled* into several instructions (free loops: separate instructions; contracted loops: an
``ACC`` chain, write-back on the last). Candidates are costed with the timing rules of
:mod:`gen.design.isa` (:func:`gen.design.isa.os_gemm_cycles`), screened with cheap bank
conditions (:func:`banks_ok`) and checked with :func:`gen.design.isa.check`, fastest first.
:func:`instantiate` turns a :class:`Mapping_` into instructions at real base addresses.

The stationary dataflows (``WS`` / ``WS_H``, FETTA Fig. 12) map the same loop nests differently:
the IB tile is ``loads`` rows of B held in the PEs (the loads walk one contracted lane block, or
with horizontal loads one block of the result's lane mode: the *load loop*, :attr:`Mapping_.ld`),
A's lane is the contracted mode the PE rows sum, and the ``K`` field streams IA vectors along a
free loop of A (B's stride 0), one result row each. ``L0`` may be a contracted loop whose tiles
add in the accumulation unit (``ACC_L0``). :func:`map_gemm_all` ``mode=`` chooses the family.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, replace
from typing import NamedTuple

from gen.compiler.program import CompileError
from gen.compiler.layout import ceil_to
from gen.design.control import issue_cycles, os_issue_cycles, repeat_cycles, stationary_issue_cycles
from gen.design.isa import (Dataflow, ErrorCode, Flag, Geometry, Instr, check, exec_cycles, gemm,
                            group_offsets, horizontal, os_gemm_cycles, out_rows, spatial_mask, stationary,
                            stationary_gemm_cycles, temporal_max)


#: the error of a step no mapping of which passes the ISA checks
NO_MAPPING = "no mapping of a step passes the ISA checks (accumulation unit too small?)"


class Lp(NamedTuple):
    """One loop level: trip count and row strides of A, B and the output (a named tuple: the
    mapping search makes millions of them)."""

    name: str
    trip: int
    a: int
    b: int
    o: int


ONE = Lp("1", 1, 0, 0, 0)


def merge_loops(loops: list[Lp]) -> list[Lp]:
    """Fuse loops ``x`` (outer) and ``y`` (inner) when ``x``'s strides are ``y.trip`` times ``y``'s
    in all three tensors: one address-generator level then walks both."""
    loops = [lp for lp in loops if lp.trip > 1]
    changed = True
    while changed:
        changed = False
        for x, y in itertools.permutations(loops, 2):
            if x.a == y.trip * y.a and x.b == y.trip * y.b and x.o == y.trip * y.o:
                loops = [lp for lp in loops if lp is not x and lp is not y]
                loops.append(Lp(f"{x.name}*{y.name}", x.trip * y.trip, y.a, y.b, y.o))
                changed = True
                break
    return loops


@dataclass
class Mapping_:
    """The chosen mapping of one step: an instruction template and the unrolled loops."""

    grid: tuple[int, int, int]
    K: Lp
    L0: Lp
    L1: Lp
    gm: Lp
    gn: Lp
    gk: Lp
    o_sk: int
    free_unroll: list[Lp]
    k_unroll: list[Lp]
    cycles: int
    instrs: int
    #: the transpose layers the operands are read through (:class:`gen.design.isa.Transpose` bits)
    tr: int = 0
    #: the dataflow (:class:`gen.design.isa.Dataflow`): ``OS``, or a stationary one whose ``K`` loop
    #: streams IA vectors and whose IB loads walk :attr:`ld`
    mode: int = Dataflow.OS
    #: stationary modes: the IB load loop (``b`` = the ``b_sk`` stride between loads)
    ld: Lp = Lp("1", 1, 0, 0, 0)
    #: stationary modes: ``L0`` is a contracted loop whose tiles add in the accumulation unit
    acc_l0: bool = False


def split_loop(lp: Lp, g: int) -> tuple[Lp, Lp]:
    """Split ``lp`` into a spatial index of ``g`` (inner, same strides) and the rest (outer)."""
    return (Lp(lp.name + "/s", g, lp.a, lp.b, lp.o),
            Lp(lp.name + "/t", lp.trip // g, lp.a * g, lp.b * g, lp.o * g))


def template(m: Mapping_) -> Instr:
    """The GEMM instruction of a mapping with all bases 0 (the unrolled loops move the bases)."""
    if stationary(m.mode):
        return gemm(K=m.K.trip, grid=m.grid, L0=m.L0.trip, L1=m.L1.trip, mode=m.mode, acc_l0=m.acc_l0,
                    a=(0, m.K.a, m.L0.a, m.L1.a, m.gm.a, m.gn.a, m.gk.a),
                    b=(0, m.ld.b, m.L0.b, m.L1.b, m.gm.b, m.gn.b, m.gk.b),
                    o=(0, m.K.o, m.L0.o, m.L1.o, m.gm.o, m.gn.o, 0), w_base=0, acc=False, wb=True, tr=m.tr)
    return gemm(K=m.K.trip, grid=m.grid, L0=m.L0.trip, L1=m.L1.trip,
                a=(0, m.K.a, m.L0.a, m.L1.a, m.gm.a, m.gn.a, m.gk.a),
                b=(0, m.K.b, m.L0.b, m.L1.b, m.gm.b, m.gn.b, m.gk.b),
                o=(0, m.o_sk, m.L0.o, m.L1.o, m.gm.o, m.gn.o, 0), w_base=0, acc=False, wb=True, tr=m.tr)


def map_cached(free: tuple[Lp, ...], ks: tuple[Lp, ...], o_sk: int, geo: Geometry, tr: int = 0,
               k_split: bool = True, mode: int = Dataflow.OS, ld_b: int = 0) -> tuple[Mapping_, ...]:
    """:func:`map_gemm_all`, memoized (plans of one step often share their loop nests, and so do the
    pieces of a chunked step: the key is the loops' trips and strides, not their mode names, so the
    mappings returned name their loops ``""``). The mappings are shared: callers must not modify
    them."""
    def bare(lps):
        return tuple(Lp("", lp.trip, lp.a, lp.b, lp.o) for lp in lps)
    found = _map_cached(bare(free), bare(ks), o_sk, geo, tr, k_split, mode, ld_b)
    if not found:
        raise CompileError(NO_MAPPING, field="accum_kb")
    return found


@functools.lru_cache(maxsize=1 << 13)
def _map_cached(free: tuple[Lp, ...], ks: tuple[Lp, ...], o_sk: int, geo: Geometry, tr: int, k_split: bool,
                mode: int, ld_b: int) -> tuple[Mapping_, ...]:
    """:func:`map_gemm_all` or ``()`` when no mapping passes (cached too)."""
    try:
        return tuple(map_gemm_all(list(free), list(ks), o_sk, geo, tr=tr, k_split=k_split, mode=mode, ld_b=ld_b))
    except CompileError:
        return ()


@functools.lru_cache(maxsize=1 << 14)
def _spatial_low(g: tuple[int, int, int], sm: int, sn: int, sk: int, banks: int) -> int | None:
    """Mask of the low bank bits the spatial offsets of one operand use, or None when two CEs
    read different rows of one bank."""
    offs = {im * sm + in_ * sn + ik * sk for im in range(g[0]) for in_ in range(g[1]) for ik in range(g[2])}
    banks_seen = {o % banks for o in offs}
    if len(banks_seen) != len(offs):
        return None
    return spatial_mask(banks_seen)


@functools.lru_cache(maxsize=1 << 14)
def _groups_ok(gm: int, gn: int, sm: int, sn: int, banks: int) -> bool:
    return len({(im * sm + in_ * sn) % banks for im in range(gm) for in_ in range(gn)}) == gm * gn


def banks_ok(m: Mapping_, banks: int) -> bool:
    """Necessary conditions of :func:`gen.design.isa.check` on a mapping, cheap: the spatial offsets of
    IA / IB are distinct banks (or the same row) in the low bank bits, every temporal and unrolled
    stride a multiple of their span; the output groups write distinct banks."""
    g = m.grid
    for op in ("a", "b"):
        low = _spatial_low(g, getattr(m.gm, op), getattr(m.gn, op), getattr(m.gk, op), banks)
        if low is None:
            return False
        for lp in (m.K, m.L0, m.L1, m.ld, *m.free_unroll, *m.k_unroll):
            if getattr(lp, op) & low:
                return False
    return _groups_ok(g[0], g[1], m.gm.o, m.gn.o, banks)


def _grids(E: int) -> list[tuple[int, int, int]]:
    """Every power-of-two grid ``(gm, gn, gk)`` of at most ``E`` CEs."""
    return [(1 << a, 1 << b, 1 << c) for a in range(E.bit_length()) for b in range(E.bit_length())
            for c in range(E.bit_length()) if (1 << (a + b + c)) <= E]


def _splits(free: list[Lp], ks: list[Lp], geo: Geometry, k_split: bool):
    """Every grid ``(gm, gn, gk)`` and choice of the loops its indices split: ``(grid, gm, gn, gk
    loops, contracted loops left, free loops left)``, the loops left largest first."""
    for gm, gn, gk in _grids(geo.ces):
        if gk > 1 and not k_split:
            continue
        gk_opts = [None] if gk == 1 else [i for i, lp in enumerate(ks) if lp.trip % gk == 0]
        gm_opts = [None] if gm == 1 else [i for i, lp in enumerate(free) if lp.trip % gm == 0]
        gn_opts = [None] if gn == 1 else [i for i, lp in enumerate(free) if lp.trip % gn == 0]
        for ik, im, in_ in itertools.product(gk_opts, gm_opts, gn_opts):
            if im is not None and im == in_:
                continue
            kl = list(ks)
            fl = list(free)
            gk_lp = gm_lp = gn_lp = ONE
            if ik is not None:
                gk_lp, kl[ik] = split_loop(kl[ik], gk)
            if im is not None:
                gm_lp, fl[im] = split_loop(fl[im], gm)
            if in_ is not None:
                gn_lp, fl[in_] = split_loop(fl[in_], gn)
            kl = sorted((lp for lp in kl if lp.trip > 1), key=lambda lp: -lp.trip)
            fl = sorted((lp for lp in fl if lp.trip > 1), key=lambda lp: -lp.trip)
            yield (gm, gn, gk), gm_lp, gn_lp, gk_lp, kl, fl


def _fields_fit(trips, strides) -> bool:
    """The loop bounds and strides fit their 16-bit instruction fields."""
    return max(trips) < 1 << 16 and max(strides) < 1 << 16 and min(strides) > -(1 << 16)


@functools.lru_cache(maxsize=1 << 14)
def _os_cycles(n: int, K: int, tiles: int, geo: Geometry) -> int:
    """Cycles of ``n`` output-stationary GEMMs of ``tiles`` tiles of depth ``K`` back to back."""
    return repeat_cycles(n, os_issue_cycles(K, tiles, geo), os_gemm_cycles(K, tiles, geo))


def _candidates(free: list[Lp], ks: list[Lp], o_sk: int, geo: Geometry, tr: int = 0,
                k_split: bool = True) -> list[Mapping_]:
    """Every grid, split loop and level assignment whose fields fit, with its cycles (unchecked);
    with ``k_split`` False only grids with ``gk = 1``."""
    cands: list[Mapping_] = []
    for (gm, gn, gk), gm_lp, gn_lp, gk_lp, kl, fl in _splits(free, ks, geo, k_split):
        K = kl[0] if kl else ONE
        k_unroll = kl[1:]
        for nlev in (2, 1, 0):
            levels = fl[:nlev] + [ONE] * (2 - min(nlev, len(fl)))
            L0, L1 = levels[0], levels[1]
            free_unroll = fl[min(nlev, len(fl)):]
            if not _fields_fit((K.trip, L0.trip, L1.trip),
                               (K.a, K.b, L0.a, L0.b, L0.o, L1.a, L1.b, L1.o, o_sk, gm_lp.a, gm_lp.b, gm_lp.o,
                                gn_lp.a, gn_lp.b, gn_lp.o, gk_lp.a, gk_lp.b)):
                continue
            n = math.prod(lp.trip for lp in free_unroll + k_unroll)
            # n OS GEMMs back to back, each overlapping the previous one's drain
            tiles = L0.trip * L1.trip
            cycles = _os_cycles(n, K.trip, tiles, geo)
            cands.append(Mapping_((gm, gn, gk), K, L0, L1, gm_lp, gn_lp, gk_lp, o_sk, free_unroll, k_unroll,
                                  cycles, n, tr))
    return cands


def _stationary_candidates(free: list[Lp], ks: list[Lp], geo: Geometry, mode: int, ld_b: int,
                           k_split: bool = True) -> list[Mapping_]:
    """:func:`_candidates` of a stationary dataflow ``mode``: the ``K`` field streams the largest free
    loop B does not walk (one IA vector and one result row per index), ``L0`` is the largest
    contracted loop left (its tiles add in the accumulation unit, ``ACC_L0``) or a free loop,
    ``L1`` a free loop; IB loads are ``ld_b`` rows apart."""
    ld = Lp("ld", geo.ce_cols if horizontal(mode) else geo.ce_rows, 0, ld_b, 0)
    cands: list[Mapping_] = []
    for grid, gm_lp, gn_lp, gk_lp, kl, fl in _splits(free, ks, geo, k_split):
        streams = [lp for lp in fl if lp.b == 0]
        K = streams[0] if streams else ONE
        rest = [lp for lp in fl if lp is not K]
        acc_l0 = bool(kl)            # L0 = the largest contracted loop, else two free tile levels
        for nlev in ((1, 0) if acc_l0 else (2, 1, 0)):
            lv = rest[:nlev] + [ONE] * (2 - min(nlev, len(rest)))
            L0, L1 = (kl[0], lv[0]) if acc_l0 else (lv[0], lv[1])
            free_unroll = rest[min(nlev, len(rest)):]
            k_unroll = kl[1:]
            if not _fields_fit((K.trip, L0.trip, L1.trip),
                               (K.a, K.o, ld.b, L0.a, L0.b, L0.o, L1.a, L1.b, L1.o, gm_lp.a, gm_lp.b, gm_lp.o,
                                gn_lp.a, gn_lp.b, gn_lp.o, gk_lp.a, gk_lp.b)):
                continue
            n = math.prod(lp.trip for lp in free_unroll + k_unroll)
            tiles, hz = L0.trip * L1.trip, horizontal(mode)
            cycles = repeat_cycles(n, stationary_issue_cycles(K.trip, tiles, geo, hz),
                                   stationary_gemm_cycles(K.trip, tiles, geo, hz))
            cands.append(Mapping_(grid, K, L0, L1, gm_lp, gn_lp, gk_lp, K.o, free_unroll, k_unroll,
                                  cycles, n, 0, mode, ld, acc_l0))
    return cands


def map_gemm_all(free: list[Lp], ks: list[Lp], o_sk: int, geo: Geometry, keep: int = 4,
                 tr: int = 0, k_split: bool = True, mode: int = Dataflow.OS, ld_b: int = 0) -> list[Mapping_]:
    """Mappings whose template (bases 0) passes :func:`check`, fastest first: every grid, split
    loop and level assignment is costed with the timing rules of :mod:`gen.design.isa` (cheap), then
    checked in order of cycles until ``keep`` pass (the caller tries them with real bases).

    ``tr``: operands read through their distribution network's transpose layer (a *transposed
    view*, :meth:`gen.compiler.planner.Planner.view`): the loop of stride 1 selects lanes, so only
    mappings that split it over the CE grid pass the checks (the temporal address of a transposed
    operand is a multiple of ``lanes``).
    ``k_split=False``: no grid splits a contracted loop over CEs (an engine without the reduction
    network's cross-CE sums, a capability set of :mod:`gen.compiler.capabilities`).
    ``mode``: a stationary dataflow (:func:`_stationary_candidates`; ``o_sk`` and ``tr`` unused) whose
    IB loads are ``ld_b`` rows apart."""
    if stationary(mode):
        cands = _stationary_candidates(merge_loops(free), merge_loops(ks), geo, mode, ld_b, k_split)
    else:
        cands = _candidates(merge_loops(free), merge_loops(ks), o_sk, geo, tr, k_split)
    order = sorted(range(len(cands)), key=lambda i: (cands[i].cycles, -math.prod(cands[i].grid), i))
    found: list[Mapping_] = []
    for m in (cands[i] for i in order):
        if not banks_ok(m, geo.banks):
            continue
        ins = template(m)
        if check(ins, geo) != ErrorCode.NONE:
            continue
        # the unrolled loops move the bases: each stride must stay in a half and keep the bank/XOR rule
        if any(max(lp.a, lp.b) >= geo.unified_half_rows
               or check(replace(ins, a_base=lp.a, b_base=lp.b), geo) != ErrorCode.NONE
               for lp in m.free_unroll + m.k_unroll):
            continue
        assert repeat_cycles(m.instrs, issue_cycles(ins, geo), exec_cycles(ins, geo)) == m.cycles, (m, ins)
        found.append(m)
        if len(found) >= keep:
            break
    if not found:
        raise CompileError(NO_MAPPING, field="accum_kb")
    return found


def acc_span(mp: Mapping_, geo: Geometry) -> int:
    """Accumulation-unit rows one instruction of ``mp`` writes (from its ``o_base``), rounded up to
    whole bank rows so that instructions ``span`` rows apart keep the same bank pattern."""
    ins = template(mp)
    return ceil_to(temporal_max(ins, "o", out_rows(ins, geo)) + max(group_offsets(ins)) + 1, geo.banks)


def free_instrs(mp: Mapping_) -> int:
    """Instructions (free-loop indices) of ``mp`` that write distinct results."""
    return math.prod(lp.trip for lp in mp.free_unroll)


def acc_rows(mp: Mapping_, geo: Geometry, acc_stride: int | None) -> int:
    """Accumulation-unit rows the instructions of ``mp`` occupy from ``acc_base`` with ``acc_stride``
    (:func:`instantiate`)."""
    if acc_stride is None:
        return acc_span(mp, geo) + sum((lp.trip - 1) * lp.o for lp in mp.free_unroll)
    return free_instrs(mp) * max(acc_stride, 1) if free_instrs(mp) > 1 else acc_span(mp, geo)


def instantiate(mp: Mapping_, a0: int, b0: int, w0: int, geo: Geometry, acc_stride: int | None = 0,
                carry: bool = False, acc_base: int = 0) -> list[Instr] | None:
    """The instructions of mapping ``mp`` with operands at rows ``a0`` / ``b0`` and the result at
    ``w0``: one per unrolled index (contracted ones chained with ``ACC``, write-back on the last),
    or None when one fails :func:`gen.design.isa.check` (the routing depends on the real banks).

    ``acc_stride``: accumulation-unit rows between the free-loop indices' results (0: every index
    reuses rows from ``acc_base``; :func:`acc_span` keeps them apart, so that they survive the step;
    None: each index at its result's row offset, so that the indices' rows interleave as the
    result's do in unified memory: distinct rows in no more than the result's span, where a free
    loop walks lane blocks or other low rows of the result);
    ``carry``: every instruction adds to the accumulation unit (a later piece of a step chunked
    over a contracted mode adds to the partial sums of the earlier pieces)."""
    tmpl = template(mp)
    fu, ku = mp.free_unroll, mp.k_unroll
    instrs = []
    kidxs = list(itertools.product(*(range(lp.trip) for lp in ku)))
    for f, fidx in enumerate(itertools.product(*(range(lp.trip) for lp in fu))):
        fa = sum(i * lp.a for i, lp in zip(fidx, fu))
        fb = sum(i * lp.b for i, lp in zip(fidx, fu))
        fo = sum(i * lp.o for i, lp in zip(fidx, fu))
        for n, kidx in enumerate(kidxs):
            ka = sum(i * lp.a for i, lp in zip(kidx, ku))
            kb = sum(i * lp.b for i, lp in zip(kidx, ku))
            ins = replace(tmpl, a_base=a0 + fa + ka, b_base=b0 + fb + kb, w_base=w0 + fo,
                          o_base=acc_base + (fo if acc_stride is None else f * acc_stride),
                          flags=int((Flag.ACC if n or carry else 0) | (Flag.WB if n == len(kidxs) - 1 else 0)
                                    | (tmpl.flags & Flag.ACC_L0)))
            if check(ins, geo) != ErrorCode.NONE:
                return None
            instrs.append(ins)
    return instrs


__all__ = ["Lp", "Mapping_", "merge_loops", "split_loop", "template", "map_gemm_all", "map_cached", "banks_ok",
           "instantiate", "acc_span", "acc_rows", "free_instrs"]
