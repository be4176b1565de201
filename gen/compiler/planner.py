"""Planning one pairwise step: roles, lane modes, CE-grid splits and mode orders.

The OS dataflow reads IA rows as ``ce_rows`` values of m and IB rows as ``ce_cols`` values of n
and writes result rows of n: so the lane of A must be an m-mode, the lane of B an n-mode, and the
result's lane is B's lane. A :class:`Plan` fixes which operand is A (``X``) and which is B (``Y``),
their lane modes (``alpha`` / ``beta``; a size-1 *dummy lane* ``_<n>`` for an operand with no free
mode) and the mode orders of host-written operands and of the result: the modes the grid splits sit
just above the lane (lowest row strides, so that their spatial offsets are the low bank bits), and
the modes the *next* step contracts just before them (they merge into one address-generator loop
there). A lane longer than ``lanes`` (rank 5 on 4 lanes: two blocks) has its blocks at row stride 1,
which no split mode may share: each plan is also tried with those blocks above the split modes
(:meth:`Layout.make` ``below``). A tensor on chip whose lane cannot serve the plan is re-laid out
(a penalty in the plan's score).

The stationary dataflows (:mod:`gen.compiler.stationary`, mixed into :class:`Planner`) read an
on-chip operand whose lane is a contracted mode as it lies, where OS would need a re-layout; an OS
plan's output-transposed twin (:mod:`gen.compiler.transposed`) writes its result with such a lane.

:class:`Planner` enumerates candidate plans with a cheap estimate (:meth:`Planner.candidates`),
maps the most promising with :func:`gen.compiler.mapping.map_gemm_all`
(:meth:`Planner.scored_plans`) and picks the one whose cycles plus the best cycles of the consumer
step reading its result are fewest (:meth:`Planner.best_plan`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Callable, Sequence

from gen.compiler.allocate import Memory, Tensor
from gen.compiler.layout import Layout, ceil_to
from gen.compiler.mapping import Lp, map_cached
from gen.compiler.plans import Candidate, NextInfo, Plan
from gen.compiler.program import CompileError
from gen.compiler.relayout import eye_layout, onchip_layout, onchip_obstacle, primed
from gen.compiler.stationary import StationaryPlans
from gen.compiler.transposed import TransposedPlans
from gen.design.config import FettaConfig
from gen.design.isa import Dataflow, Geometry, Transpose
from gen.design.timing import dram_bytes_per_cycle, transfer_cycles
from gen.workload.grouping import group_modes


def pad_store_cycles(config: FettaConfig, sizes: dict[str, int], keep: set[str], lanes) -> int:
    """DRAM cycles of the padding of a result of modes ``keep`` whose ``lanes`` (those among ``keep``)
    are padded to a multiple of ``config.lanes``: what storing it moves beyond its elements, added to a
    network's last step's estimate with :attr:`Planner.store_pad` (UCF BT train: dX's 5-long lane padded
    to 8 stores 2.8 instead of 1.8 MiB; the faster plan's compute is hidden in a DRAM-bound program)."""
    padded = set(lanes) & keep
    rest = math.prod(sizes[m] for m in keep - padded)
    extra = rest * (math.prod(ceil_to(sizes[m], config.lanes) for m in padded) - math.prod(sizes[m] for m in padded))
    return transfer_cycles(extra * config.elem_bits // 8, dram_bytes_per_cycle(config)) if extra > 0 else 0


class Planner(StationaryPlans, TransposedPlans):
    """Plans the steps of one compilation (``sizes`` and ``mem`` are the compiler's, shared)."""

    def __init__(self, config: FettaConfig, geo: Geometry, align: int, sizes: dict[str, int], mem: Memory,
                 dummy: Callable[[], str], relayout: str = "auto", views: bool = True, keep_lanes: bool = False,
                 k_split: bool = True, stationary: bool = True, lookahead: int = 3,
                 out_transposes: bool = True, store_pad: bool = False):
        self.config = config
        #: a network's last step weighs the DRAM cycles of its result's lane padding (:func:`pad_store_cycles`)
        self.store_pad = store_pad
        #: OS plans may have output-transposed twins (off: ``stats["twin_sites"]`` counts them)
        self.out_transposes = out_transposes
        #: plans of a step weighed with the best plan of its consumer (:meth:`best_plan`)
        self.lookahead = lookahead
        #: stationary dataflows may read an on-chip operand whose lane is a contracted mode
        self.stationary = stationary
        #: contracted modes may be split over the CE grid (sums across CEs in the reduction network)
        self.k_split = k_split
        #: a tensor the host holds keeps the lane of its DRAM image where a step allows it; another
        #: lane costs a transpose through DRAM (:meth:`Program.host_transposes` counts them)
        self.keep_lanes = keep_lanes
        #: read on-chip tensors through their transposed view (:meth:`view`) where a plan wants its lane
        self.views = views
        self.geo = geo
        #: the compiler's re-layout policy (``gen.compiler.compiler.RELAYOUT_POLICIES``)
        self.relayout = relayout
        #: (layout, lane) -> :meth:`relayout_cycles`
        self._relayouts: dict[tuple, int] = {}
        self.L = config.lanes
        self.align = align
        self.sizes = sizes
        self.mem = mem
        self.dummy = dummy

    def view(self, t: Tensor) -> Layout | None:
        """The *transposed view* of ``t`` on chip: its lane ``l`` and its row mode ``r`` of stride 1
        exchanged, as the distribution network's transpose layer reads it (:class:`Transpose`): a
        block of ``lanes`` rows (the values of ``r``) is read as columns, and the CE's spatial offset
        (``l``, stride 1) picks the column. Both must be exactly ``lanes`` long; ``l`` can then only be
        split over the CE grid (the temporal address stays a multiple of ``lanes``). None when ``t``
        has no such pair."""
        lay = t.layout
        if not self.views or t.name not in self.mem.onchip or lay is None or len(lay.modes) < 2:
            return None
        lane = lay.lane
        row = next((m for i, m in enumerate(lay.modes[:-1]) if lay.rstride[i] == 1 and lay.ext[i] == self.L), None)
        if row is None or self.sizes.get(lane) != self.L or self.sizes.get(row) != self.L:
            return None
        i, j = lay.modes.index(row), len(lay.modes) - 1

        def swap(xs):
            xs = list(xs)
            xs[i], xs[j] = xs[j], xs[i]
            return tuple(xs)
        return Layout(swap(lay.modes), swap(lay.ext), swap(lay.rstride), lay.rows, lay.lanes, swap(lay.sext))

    def read_as(self, t: Tensor, lane: str) -> tuple[Layout | None, bool]:
        """How a plan reads ``t`` (on chip) with ``lane``: ``(its layout, False)`` when that is its lane,
        ``(its transposed view, True)`` when that is the view's lane, else ``(None, False)``."""
        if t.name not in self.mem.onchip or t.layout is None:
            return None, False
        if t.layout.lane == lane:
            return t.layout, False
        v = self.view(t)
        return (v, True) if v is not None and v.lane == lane else (None, False)

    def lane_choices(self, t: Tensor, allowed: Sequence[str]) -> list[str]:
        """Lane modes worth trying for ``t``: its lane (or its transposed view's) if on chip and
        allowed, else the best three."""
        if t.layout is not None and t.name in self.mem.onchip:
            own = [m for m in (t.layout.lane, getattr(self.view(t), "lane", None)) if m in allowed]
            if own:
                return own
        elif self.keep_lanes and t.image_lane() is not None:
            own = [m for m in allowed if m.split("@")[0] == t.image_lane()]
            if own:
                return own
        if not allowed:
            return []
        # prefer little padding, then large extents
        return sorted(allowed, key=lambda m: (ceil_to(self.sizes[m], self.L) - self.sizes[m],
                                              self.sizes[m] != self.L, -self.sizes[m], m))[:3]

    def inner(self, t: Tensor) -> list[str]:
        """The two row modes of an on-chip tensor with the smallest strides (the only ones a grid
        can split: the spatial offsets must be the low bank bits), and the lane of its transposed
        view (:meth:`view`), which a grid must split."""
        lay = t.layout
        rows = sorted((lay.rstride[i], m) for i, m in enumerate(lay.modes[:-1]) if lay.ext[i] > 1)
        return [m for _, m in rows[:2]] + ([lay.lane] if self.view(t) is not None else [])

    def pow2(self, m: str) -> int:
        s = self.sizes[m]
        return min(s & -s, self.geo.ces)

    def splittable(self, m: str, X: Tensor, Y: Tensor) -> bool:
        """Can a grid index split mode ``m`` of a step ``X x Y``: an even extent, and one of the two
        lowest row modes (:meth:`inner`) of every on-chip operand holding it."""
        if self.sizes[m] < 2 or self.sizes[m] % 2:
            return False
        return all(m in self.inner(t) for t in (X, Y) if t.name in self.mem.onchip and m in t.modes)

    def grids(self, gms, gns, gks):
        """Every choice of the modes the grid indices split (``gm`` != ``gn``), with the CEs the
        split would occupy if realised: ``(gm, gn, gk, CEs)``."""
        for gm_m, gn_m, gk_m in itertools.product(gms, gns, gks):
            if gm_m is not None and gm_m == gn_m:
                continue
            g = 1
            for m in (gk_m, gm_m, gn_m):
                if m is not None:
                    g = min(self.geo.ces, g * self.pow2(m))
            yield gm_m, gn_m, gk_m, g

    def _penalty(self, X: Tensor, Y: Tensor, alpha, beta, keep: set[str], next_info: NextInfo | None,
                 stationary: bool = False) -> int:
        """Re-layout cycles a plan implies: now (an on-chip operand with another lane) and later
        (the result's lane is contracted or shared in the consumer). A stationary plan reads X as it
        is, and Y too when its lane is X's (``WS_H``)."""
        penalty = 0
        for t, lane in ((X, alpha), (Y, beta)):
            if stationary and t.layout is not None and t.name in self.mem.onchip and t.layout.lane == alpha:
                continue
            if t.name in self.mem.onchip and (lane is None or self.read_as(t, lane)[0] is None):
                penalty += self.relayout_cycles(t, lane)                # re-layout now
            elif (self.keep_lanes and t.name not in self.mem.onchip and t.image_lane() is not None
                  and (lane or "").split("@")[0] != t.image_lane()):
                # a transpose through DRAM: read the image and write it back
                nbytes = math.prod(self.sizes[m] for m in t.modes) * self.config.elem_bits // 8
                penalty += 2 * transfer_cycles(nbytes, dram_bytes_per_cycle(self.config))
        if next_info is not None and beta is not None:
            other, nkeep = next_info[0], next_info[1]
            if beta in other or beta not in nkeep:                    # re-layout later
                penalty += 4 * -(-math.prod(self.sizes[m] for m in keep) // (self.L * self.geo.banks))
        return penalty

    def host_relayout_cycles(self, t: Tensor) -> int:
        """The DRAM time of re-laying out ``t`` through the host: write it again (an input the host
        has), or read it back and write it again."""
        return (1 if t.on_host else 2) * transfer_cycles(t.layout.rows * self.L * self.config.elem_bits // 8,
                                                         dram_bytes_per_cycle(self.config))

    def identity_mappings(self, t: Tensor, lane: str, want: Layout):
        """The identity GEMM (:mod:`gen.compiler.relayout`) that re-lays out ``t`` (on chip) into
        ``want``: ``(layout it writes, identity's layout, its mappings, fastest first)``, or None when
        the TCU cannot do it in one GEMM (or the policy is ``host``)."""
        got = None if self.relayout == "host" else onchip_layout(t.layout, lane, want, self.sizes, self.L,
                                                                  self.align)
        if got is None:
            return None
        old, e_lay = t.layout.lane, eye_layout(lane, self.sizes, self.L)
        keep = [m for m in t.layout.modes if m != lane] + [primed(lane)]
        free, ks = self.loops(t.layout, e_lay, got, old, primed(lane), keep, [lane])
        try:
            return got, e_lay, map_cached(tuple(free), tuple(ks), got.stride(old), self.geo, 0, self.k_split)
        except CompileError:
            return None

    def identity_obstacle(self, t: Tensor, lane: str, want: Layout) -> str:
        """Why :meth:`identity_mappings` gives None (a key of :data:`~gen.compiler.relayout.RELAYOUT_CAUSES`)."""
        if self.relayout == "host":
            return "host-policy"
        return onchip_obstacle(t.layout, lane, want, self.sizes, self.L, self.align) or "no-mapping"

    def relayout_cycles(self, t: Tensor, lane: str | None) -> int:
        """Estimated cycles to give ``t`` (on chip) the lane ``lane``: the fewer of the identity GEMM's
        (with the other modes in their order; the plan's order may differ) and
        :meth:`host_relayout_cycles` (policy ``auto``; ``onchip``: the GEMM's where it can)."""
        key = (t.layout, lane, t.on_host)
        if key not in self._relayouts:
            cost = self.host_relayout_cycles(t)
            gemm = None if lane is None else self.identity_mappings(
                t, lane, self.operand_layout(t, tuple(m for m in t.layout.modes if m != lane) + (lane,)))
            if gemm is not None:
                onchip = gemm[2][0].cycles
                cost = onchip if self.relayout == "onchip" else min(cost, onchip)
            self._relayouts[key] = cost
        return self._relayouts[key]

    def candidates(self, A: Tensor, B: Tensor, keep: set[str], next_info: NextInfo | None):
        """Candidate plans of a step, cheapest estimate first, and the contracted modes.

        The estimate is the padded MACs over the MACs per cycle of the grid the split modes
        would give (assuming it is realised), plus the re-layout penalty."""
        sizes = self.sizes
        L = self.L
        kmodes = sorted(group_modes(A.modes, B.modes, keep).contracted)
        kprod = math.prod(sizes[m] for m in kmodes)
        out = []
        for X, Y in ((A, B), (B, A)):
            groups = group_modes(X.modes, Y.modes, keep)
            xm, yn, batch = list(groups.m), list(groups.n), list(groups.batch)

            def ok(m: str) -> bool:
                return self.splittable(m, X, Y)

            for alpha in self.lane_choices(X, xm) or [None]:
                for beta in self.lane_choices(Y, yn) or [None]:
                    gms = [None] + [m for m in xm + batch if m != alpha and ok(m)]
                    gns = [None] + [m for m in yn + batch if m != beta and ok(m)]
                    gks = [None] + [m for m in kmodes if ok(m) and self.k_split]
                    union = set(X.modes) | set(Y.modes)
                    padded = math.prod(ceil_to(sizes[m], L) if m in (alpha, beta) else sizes[m] for m in union)
                    padded *= (L if alpha is None else 1) * (L if beta is None else 1)
                    penalty = self._penalty(X, Y, alpha, beta, keep, next_info)
                    if next_info is None and self.store_pad:     # a network's result: stored, padding too
                        penalty += pad_store_cycles(self.config, self.sizes, keep, (alpha, beta))
                    for gm_m, gn_m, gk_m, g in self.grids(gms, gns, gks):
                        gk = min(self.pow2(gk_m), g) if gk_m else 1
                        k_eff = min(1.0, (kprod / gk) / self.geo.ce_rows)
                        est = padded / (self.config.macs * g / self.geo.ces * k_eff) + penalty
                        out.append(Candidate(est, X, Y, alpha, beta, gm_m, gn_m, gk_m, penalty))
        if self.stationary:
            out += self.stationary_candidates(A, B, keep, next_info, kmodes)
        out.sort(key=lambda p: p[0])
        return out, kmodes

    @staticmethod
    def orders(X: Tensor, Y: Tensor, alpha: str, beta: str, gm_m, gn_m, gk_m, kmodes, keep_modes,
               next_info: NextInfo | None, ce_order: bool = True):
        """Mode orders (lane last) of the operands (host-written ones) and of the result for a plan.

        The split modes sit just above an operand's lane. ``ce_order``: in the order of the CE index
        ``c = (im * gn + in) * gk + ik`` (the ``gk`` mode lowest), so that the spatial offsets of a
        two-way split are an identity the butterfly always routes (e.g. ``gm`` and ``gk`` of 4 over
        16 CEs); else the reverse (``gk`` highest): a different bank pattern, and a different loop
        order for the address generators, which some steps prefer."""
        kord = [m for m in kmodes if m != gk_m] + ([gk_m] if gk_m else [])

        def order(t_modes, lane, inner_pref):
            inner = [m for m in dict.fromkeys(inner_pref) if m is not None and m in t_modes and m != lane]
            rest = [m for m in t_modes if m != lane and m not in inner]
            head = sorted(m for m in rest if m not in kmodes)
            tail = [m for m in kord if m in rest]
            return tuple(head + tail + inner + [lane])

        xpref, ypref = ((gm_m, gn_m, gk_m), (gm_m, gn_m, gk_m)) if ce_order else ((gk_m, gn_m, gm_m), (gk_m, gm_m, gn_m))
        xo = order(tuple(X.modes) + ((alpha,) if alpha not in X.modes else ()), alpha, xpref)
        yo = order(tuple(Y.modes) + ((beta,) if beta not in Y.modes else ()), beta, ypref)
        next_k: set[str] = set()
        first = gn_m
        if next_info is not None:
            other, nkeep = next_info[0], next_info[1]
            next_k = {m for m in keep_modes if m in other and m not in nkeep}
            # innermost: a split mode the consumer keeps free (it can split it over gm/gn there)
            if gn_m in next_k and gm_m is not None and gm_m not in next_k:
                first = gm_m
        inner = [m for m in (alpha, gn_m if first == gm_m else gm_m, first) if m is not None and m != beta]
        inner = list(dict.fromkeys(inner))
        rest = [m for m in keep_modes if m != beta and m not in inner]
        head = sorted(m for m in rest if m not in next_k)
        tail = sorted(m for m in rest if m in next_k)
        oo = tuple(head + tail + inner + [beta])
        return xo, yo, oo

    def best_plan(self, A: Tensor, B: Tensor, keep: set[str], next_info: NextInfo | None,
                  lookahead: int | None = None) -> Plan | None:
        """The plan of a step: of the ``lookahead`` (default :attr:`lookahead`) fastest
        (:meth:`scored_plans`), the one whose cycles plus the best cycles of the consumer step
        reading its result (in the layout the plan gives it, the consumer's other operand as it is
        now) are fewest; the output-transposed plans (:meth:`transposed_twins`) only here, where their
        gain, the consumer's, is weighed."""
        lookahead = self.lookahead if lookahead is None else lookahead
        scored = self.scored_plans(A, B, keep, next_info)
        plain, twins = self.split_twins(scored)
        if not plain:
            return None
        if next_info is None or lookahead <= 1:
            return plain[0][1]
        other_modes, nkeep, other = next_info
        if other is None or other.name in (A.name, B.name):
            other = Tensor("?other", tuple(sorted(other_modes)))
        best = None
        for score, plan in plain[:lookahead] + twins:
            t = Tensor("?out", tuple(plan.keep_modes))
            t.layout = plan.lo
            self.mem.onchip[t.name] = t
            try:
                nxt = self.scored_plans(t, other, set(nkeep) | {m for m in t.modes if m.startswith("_")},
                                        None, tries=4)
            finally:
                del self.mem.onchip[t.name]
            total = score + (nxt[0][0] if nxt else 10 * score)
            if best is None or total < best[0]:
                best = (total, plan)
        return best[1]

    def scored_plans(self, A: Tensor, B: Tensor, keep: set[str], next_info: NextInfo | None, tries: int = 6,
                     max_tries: int = 24) -> list[tuple[int, Plan]]:
        """Evaluate plans with :func:`gen.compiler.mapping.map_gemm_all`: ``[(cycles + re-layout
        penalties, plan)]``, fastest first.

        Plans are tried cheapest estimate first (and the unsplit fallback): at least ``tries`` of
        them, then more while a plan's estimate (which assumes its grid split is realised) is
        below half the best cycles found, up to ``max_tries``. Many equal estimates can be plans whose
        split the bank rule does not allow (the mapping then falls back to a small grid), so
        stopping after a fixed count could miss a slightly worse estimate that is realisable."""
        plans, kmodes = self.candidates(A, B, keep, next_info)
        dummies: dict[str, str] = {}
        scored = []
        seen = set()
        first = plans[:tries] + [p for p in plans if p[5:8] == (None, None, None)][:1]
        if self.out_transposes:
            first += [p for p in plans[tries:] if self.twin_wanted(p, next_info)][:2]
        best = math.inf
        for n, cand in enumerate(first + plans[tries:]):
            est, X, Y, alpha, beta, gm_m, gn_m, gk_m, penalty, mode = cand
            if n >= len(first) and (2 * est >= best or n >= max_tries):
                break
            if mode != Dataflow.OS:
                scored += self._stationary_plans(cand, kmodes, keep, next_info, seen)
                if scored:
                    best = min(best, min(c[0] for c in scored))
                continue
            if alpha is None:
                if X.name not in dummies:
                    dummies[X.name] = self.dummy()
                alpha = dummies[X.name]
            if beta is None:
                if Y.name not in dummies:
                    dummies[Y.name] = self.dummy()
                beta = dummies[Y.name]
            keep_modes = [m for m in dict.fromkeys(X.modes + Y.modes) if m in keep] + \
                [m for m in (alpha, beta) if m not in X.modes + Y.modes]
            (vx, tx), (vy, ty) = self.read_as(X, alpha), self.read_as(Y, beta)
            fixed_x, fixed_y = vx is not None, vy is not None
            tr = (Transpose.A if tx else 0) | (Transpose.B if ty else 0)
            splits = {m for m in (gm_m, gn_m, gk_m) if m is not None}
            long_lane = any(m is not None and self.sizes.get(m, 0) > self.L for m in (alpha, beta))
            for ce_order, high in itertools.product((True, False), (False, True) if long_lane and splits else (False,)):
                xo, yo, oo = self.orders(X, Y, alpha, beta, gm_m, gn_m, gk_m, kmodes, keep_modes, next_info,
                                         ce_order)
                # ``high``: the blocks of a lane longer than ``lanes`` above the split modes (and the result's
                # A-lane), which keep the lowest row strides (:meth:`Layout.make` ``below``)
                bx, by, bo = (self.below(xo, splits), self.below(yo, splits), self.below(oo, splits | {alpha})) \
                    if high else (0, 0, 0)
                key = (X.name, alpha, beta, None if fixed_x else (xo, bx), None if fixed_y else (yo, by), oo, bo)
                if key in seen:
                    continue
                seen.add(key)
                la = vx if fixed_x else self.operand_layout(X, xo, below=bx)
                lb = vy if fixed_y else self.operand_layout(Y, yo, below=by)
                lo = Layout.make(oo, self.sizes, self.L, padded=(alpha,), align=self.align, below=bo)
                free, ks = self.loops(la, lb, lo, alpha, beta, keep_modes, kmodes)
                try:
                    mappings = map_cached(tuple(free), tuple(ks), lo.stride(alpha), self.geo, tr, self.k_split)
                except CompileError:
                    continue
                best = min(best, mappings[0].cycles + penalty)
                plan = Plan(X, Y, alpha, beta, None if fixed_x else la, None if fixed_y else lb, lo, keep_modes,
                            kmodes, mappings)
                scored.append((mappings[0].cycles + penalty, len(scored), plan))
                # a twin's lane is one its consumer contracts as it lies: no re-layout later
                for lo_t, maps_t in self.transposed_twins(lo, beta, gm_m, gn_m, free, ks, alpha, tr, next_info):
                    scored.append((maps_t[0].cycles + self._penalty(X, Y, alpha, beta, keep, None), len(scored),
                                   replace(plan, lo=lo_t, mappings=maps_t)))
        scored.sort(key=lambda c: c[:2])
        return [(c[0], c[2]) for c in scored]

    def operand_layout(self, t: Tensor, order: tuple[str, ...], padded: tuple[str, ...] = (),
                       below: int = 0) -> Layout:
        """The layout an operand is written or re-laid out in: ``order``, ``padded`` row modes zero
        padded to whole lanes, and for a tensor on chip (an on-chip re-layout,
        :mod:`gen.compiler.relayout`) its old lane padded too, as the identity GEMM writes it (the
        loops walk the real extent; the padding is rows only); ``below``: row modes under the lane's
        blocks (:meth:`Layout.make`)."""
        pad = (t.layout.lane,) if t.name in self.mem.onchip and t.layout is not None else ()
        return Layout.make(order, self.sizes, self.L, padded=padded + pad, align=self.align, below=below)

    @staticmethod
    def below(order: Sequence[str], inner: set[str]) -> int:
        """How many of the row modes just above the lane of ``order`` are in ``inner`` (the modes a
        plan splits over the CE grid, which :meth:`orders` puts there)."""
        n = 0
        for m in reversed(order[:-1]):
            if m not in inner:
                break
            n += 1
        return n

    def loops(self, la: Layout, lb: Layout, lo: Layout, alpha: str, beta: str, keep_modes, kmodes):
        """The loops of a step in the layouts of a plan: free (kept) modes and contracted ones."""
        sizes = self.sizes
        L = self.L
        free: list[Lp] = []
        ks: list[Lp] = []
        for m in keep_modes:
            if m == alpha:
                free.append(Lp(m, lo.ext[lo.modes.index(m)] // L, la.stride(m), 0, L * lo.stride(m)))
            elif m == beta:
                free.append(Lp(m, lb.ext[-1] // L, 0, lb.stride(m), lo.stride(m)))
            else:
                free.append(Lp(m, sizes[m], la.stride(m), lb.stride(m), lo.stride(m)))
        for m in kmodes:
            ks.append(Lp(m, sizes[m], la.stride(m), lb.stride(m), 0))
        return free, ks


__all__ = ["Planner", "Plan", "Candidate", "NextInfo"]
