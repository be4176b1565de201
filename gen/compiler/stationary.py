"""Stationary plans of a pairwise step: the dataflow switch (FETTA II-C observation 2, Fig. 12).

When an on-chip operand's lane is a *contracted* mode ``kappa``, an output-stationary step needs it
re-laid out. A stationary mapping reads it as it lies: it streams as IA, its lane summed over the PE
rows, while the other operand B is held in the PEs. With vertical loads (``WS``) B's rows walk
``kappa`` and B's lane is the result's; with horizontal loads (``WS_H``) B's lane is ``kappa`` too and
the loads walk a ``lanes``-long free row mode of B, which becomes the result's lane. Both on-chip
layouts stay as they are. :class:`StationaryPlans` is mixed into
:class:`gen.compiler.planner.Planner` (it uses the planner's sizes, memory, lane choices, mode
orders and re-layout penalties).
"""

from __future__ import annotations

import math

from gen.compiler.allocate import Tensor
from gen.compiler.layout import Layout, ceil_to
from gen.compiler.mapping import Lp, map_cached
from gen.compiler.plans import Candidate, NextInfo, Plan
from gen.compiler.program import CompileError
from gen.design.isa import Dataflow
from gen.workload.grouping import group_modes


class StationaryPlans:
    """The stationary half of :class:`gen.compiler.planner.Planner` (module docstring)."""

    def stationary_candidates(self, A: Tensor, B: Tensor, keep: set[str], next_info: NextInfo | None,
                              kmodes: list[str]) -> list[Candidate]:
        """Stationary plans of a step (module docstring): X on chip with a contracted lane ``kappa``
        streams; B = Y is held in the PEs. ``WS`` when Y's lane can be a free mode ``beta`` (Y holds
        ``kappa`` as a row mode: exactly ``lanes`` long when Y is on chip, else written with it padded
        to ``lanes`` zero rows); ``WS_H`` when Y is on chip with lane ``kappa`` and has a free row mode
        ``beta`` of exactly ``lanes`` (the loads walk it). The estimate is that of :meth:`candidates`,
        the streamed extent (X's free modes) in place of ``K``."""
        sizes, L = self.sizes, self.L
        out = []
        for X, Y in ((A, B), (B, A)):
            if X.name not in self.mem.onchip or X.layout is None or X.layout.lane not in kmodes:
                continue
            kappa = X.layout.lane
            if sizes[kappa] > L:        # the PE rows sum one lane block
                continue
            groups = group_modes(X.modes, Y.modes, keep)
            xm, yn, batch = list(groups.m), list(groups.n), list(groups.batch)
            y_on = Y.name in self.mem.onchip and Y.layout is not None
            if y_on and Y.layout.lane == kappa:
                mode = Dataflow.WS_H
                betas = [m for m in yn if sizes[m] == L and m in Y.layout.modes[:-1]]
            elif y_on and sizes[kappa] != L:
                continue
            else:
                mode = Dataflow.WS
                betas = self.lane_choices(Y, yn)

            def ok(m: str) -> bool:
                return self.splittable(m, X, Y)

            stream = math.prod(sizes[m] for m in xm)
            k_eff = min(1.0, stream / L)
            union = set(X.modes) | set(Y.modes)
            for beta in betas:
                padded = math.prod(ceil_to(sizes[m], L) if m in (kappa, beta) else sizes[m] for m in union)
                penalty = self._penalty(X, Y, kappa, beta, keep, next_info, stationary=True)
                gms = [None] + [m for m in xm + batch if ok(m)]
                gns = [None] + [m for m in yn + batch if m != beta and ok(m)]
                gks = [None] + [m for m in kmodes if m != kappa and ok(m) and self.k_split]
                for gm_m, gn_m, gk_m, g in self.grids(gms, gns, gks):
                    est = padded / (self.config.macs * g / self.geo.ces * k_eff) + penalty
                    out.append(Candidate(est, X, Y, kappa, beta, gm_m, gn_m, gk_m, penalty, mode))
        return out

    def _stationary_plans(self, cand: Candidate, kmodes: list[str], keep: set[str], next_info: NextInfo | None,
                          seen: set) -> list[tuple[int, int, Plan]]:
        """:meth:`scored_plans` of one stationary candidate (both mode orders of a host-written Y)."""
        est, X, Y, kappa, beta, gm_m, gn_m, gk_m, penalty, mode = cand
        keep_modes = [m for m in dict.fromkeys(X.modes + Y.modes) if m in keep]
        y_fixed = Y.name in self.mem.onchip and Y.layout is not None and \
            (Y.layout.lane == beta if mode == Dataflow.WS else True)
        out = []
        for ce_order in (True, False):
            _, yo, oo = self.orders(X, Y, kappa, beta, gm_m, gn_m, gk_m, kmodes, keep_modes, next_info, ce_order)
            oo = tuple(m for m in oo if m != kappa)
            key = ("stationary", mode, X.name, kappa, beta, None if y_fixed else yo, oo)
            if key in seen:
                continue
            seen.add(key)
            # written, or re-laid out, with kappa's rows padded to whole loads
            lb = Y.layout if y_fixed else self.operand_layout(Y, yo, padded=(kappa,))
            lo = Layout.make(oo, self.sizes, self.L, align=self.align)
            free, ks, ld_b = self.stationary_loops(X.layout, lb, lo, kappa, beta, mode, keep_modes, kmodes)
            try:
                mappings = map_cached(tuple(free), tuple(ks), 0, self.geo, 0, self.k_split, int(mode), ld_b)
            except CompileError:
                continue
            out.append((mappings[0].cycles + penalty, -1,
                        Plan(X, Y, kappa, beta, None, None if y_fixed else lb, lo, keep_modes, kmodes, mappings,
                             mode)))
        return out

    def stationary_loops(self, la: Layout, lb: Layout, lo: Layout, kappa: str, beta: str, mode: int, keep_modes,
                         kmodes):
        """The loops of a stationary plan (``kappa`` is summed in the PE rows, not a loop) and the
        stride between IB loads: rows of ``kappa`` in B (``WS``) or of ``beta`` (``WS_H``)."""
        L = self.L
        free: list[Lp] = []
        for m in keep_modes:
            if m == beta and mode == Dataflow.WS:
                free.append(Lp(m, lb.ext[-1] // L, 0, lb.stride(m), lo.stride(m)))
            elif m != beta:
                free.append(Lp(m, self.sizes[m], la.stride(m), lb.stride(m), lo.stride(m)))
        ks = [Lp(m, self.sizes[m], la.stride(m), lb.stride(m), 0) for m in kmodes if m != kappa]
        return free, ks, lb.stride(kappa if mode == Dataflow.WS else beta)


__all__ = ["StationaryPlans"]
