"""Output-transposed plans: a result written with the lane its consumer contracts.

The reduction network's transpose layer (:class:`gen.design.isa.Transpose` ``O``) writes, at the
same addresses, lane ``l`` of the result rows of ``lanes`` consecutive output groups into group
``l``'s row. When an output-stationary plan splits a mode ``s`` of exactly ``lanes`` over those
groups, its result can be stored with ``s`` as the lane (and the plan's lane at ``s``'s row stride):
a consumer contracting ``s`` then reads it as it lies (stationary, or with ``s`` split over CEs)
instead of having it re-laid out.
:class:`TransposedPlans` is mixed into :class:`gen.compiler.planner.Planner` (it uses the planner's
sizes, geometry and cross-CE setting).
"""

from __future__ import annotations

from gen.compiler.layout import Layout
from gen.compiler.mapping import map_cached
from gen.compiler.plans import Candidate, NextInfo, Plan
from gen.compiler.program import CompileError
from gen.design.isa import Dataflow, Transpose


class TransposedPlans:
    """The output-transposed half of :class:`gen.compiler.planner.Planner` (module docstring)."""

    def twin_wanted(self, cand: Candidate, next_info: NextInfo | None) -> bool:
        """Can an OS candidate have a :meth:`transposed_twins` twin whose lane the consumer contracts
        (tried whatever its estimate: its gain is the consumer's)?"""
        est, X, Y, alpha, beta, gm_m, gn_m, gk_m, penalty, mode = cand
        if not self.stationary or next_info is None or mode != Dataflow.OS or gk_m is not None or beta is None \
                or self.sizes.get(beta) != self.L:
            return False
        return self._consumer_lane(gn_m if gn_m is not None else gm_m, next_info)

    def _consumer_lane(self, s: str | None, next_info: NextInfo) -> bool:
        """Is ``s`` a ``lanes``-long mode the consumer contracts (a twin's lane)?"""
        return s is not None and self.sizes[s] == self.L and s in next_info[0] and s not in next_info[1]

    @staticmethod
    def split_twins(scored: list[tuple[int, Plan]]) -> tuple[list[tuple[int, Plan]], list[tuple[int, Plan]]]:
        """``scored`` (``Planner.scored_plans``) as its plans without an output transpose and the fastest
        output-transposed plan of each result lane, which ``Planner.best_plan`` weighs with its consumer
        only: its gain is the consumer's, which the scores do not see."""
        plain = [c for c in scored if not c[1].mappings[0].tr & Transpose.O]
        twins: dict[str, tuple[int, Plan]] = {}
        for score, plan in scored:
            if plan.mappings[0].tr & Transpose.O:
                twins.setdefault(plan.lo.lane, (score, plan))
        return plain, list(twins.values())

    def transposed_twins(self, lo: Layout, beta: str, gm_m, gn_m, free, ks, alpha: str, tr: int,
                         next_info: NextInfo | None):
        """The output-transposed twins of an OS plan with result layout ``lo``: ``(layout, mappings)``
        for a split mode ``s`` whose ``lanes`` values are the ``lanes`` consecutive
        output groups (``gn_m`` over exactly ``lanes`` CEs, or ``gm_m`` with ``gn = 1``; ``gk = 1``):
        the reduction network's transpose layer (:class:`Transpose` ``O``) writes, at the same
        addresses, lane ``l`` of the groups' rows into group ``l``'s row, so the result holds ``s``
        as its lane and ``beta`` at ``s``'s row stride (both exactly ``lanes`` long). A consumer
        that contracts ``s`` can then read the result as it lies (UCF BT bp's ``K`` = 8 last step,
        ``s`` split over two CEs). Only for a mode ``s`` the consumer contracts (``next_info``), with the
        stationary dataflows on: the case that gains."""
        L, sizes = self.L, self.sizes
        if not self.stationary or next_info is None or lo.lane != beta or sizes.get(beta) != L or lo.below \
                or lo.ext[-1] != L:
            return []
        out = []
        for s, on_n in ((gn_m, True), (gm_m, False)):
            if not self._consumer_lane(s, next_info) or s not in lo.modes or lo.ext[lo.modes.index(s)] != L:
                continue
            stride = lo.stride(s)
            try:
                maps = map_cached(tuple(free), tuple(ks), lo.stride(alpha), self.geo, tr | Transpose.O,
                                  self.k_split)
            except CompileError:
                continue
            maps = tuple(m for m in maps if m.grid[2] == 1 and (
                (m.grid[1] == L and m.gn.trip == L and m.gn.o == stride) if on_n else
                (m.grid[1] == 1 and m.grid[0] == L and m.gm.trip == L and m.gm.o == stride)))
            if maps and not self.out_transposes:
                self.mem.stats["twin_sites"] += 1
            elif maps:
                names = tuple(beta if m == s else s if m == beta else m for m in lo.modes)
                out.append((Layout(names, lo.ext, lo.rstride, lo.rows, lo.lanes, lo.sext, lo.below), maps))
        return out


__all__ = ["TransposedPlans"]
