"""TensorDash's zero-skipping scheduler (seed 001 section IV, Fig. 5 and 6; issue 18) as a block.

:class:`ZeroSkipScheduler` takes the *effectual* bits of a ``depth x lanes`` staging buffer (pair
``(step, lane)`` still to be multiplied: both operands non-zero, not yet taken) and picks, per lane,
one of its :func:`gen.design.zeroskip.options` in priority order: lanes decide one after the other (lane 0
first), each through a priority encoder over its candidates, and clear the pair they take before
the next lane looks (seed 001's hierarchical levels), so no pair is taken twice. ``advance`` counts
the leading rows left without an effectual pair, the rows the staging buffer drains and refills.
The reference is :func:`sim.zs_model.schedule` (``tests/test_zs_sched.py``: exhaustive for the
paper's 4 x 4 buffer, random for other shapes). Not yet in the datapath (issue 18).

Ports
-----
eff : In(depth * lanes)
    Bit ``step * lanes + lane``: that pair is effectual.
sel : Out(range(len(options))).array(lanes)
    The option lane ``i`` takes (its multiplexer select, seed 001's ``MS_i``); 0 when it takes none.
take : Out(lanes)
    Lane ``i`` takes a pair (else it idles this step).
left : Out(depth * lanes)
    The effectual bits after this step.
advance : Out(range(depth + 1))
    Leading rows of ``left`` with no effectual pair (seed 001's ``AS``); at least 1.

Latency: combinational (one step per cycle, as in seed 001); the datapath registers around it.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.design.zeroskip import options

__all__ = ["ZeroSkipScheduler", "zs_sched_from_config"]


class ZeroSkipScheduler(wiring.Component):
    """Zero-skipping scheduler of a ``lanes``-wide unit with a ``depth``-row staging buffer
    (module docstring); ``lookaside=False``: lookahead options only (the PE rows of an
    output-stationary CE, ``docs/zero_skip.md``)."""

    def __init__(self, lanes: int = 4, depth: int = 4, lookahead: int = 3, lookaside: bool = True):
        if lanes < 2 or depth < 2:
            raise ValueError(f"lanes and depth must be >= 2, got {lanes}, {depth}")
        self.lanes, self.depth, self.lookahead = lanes, depth, lookahead
        self.options = options(lanes, depth, lookahead, lookaside)
        super().__init__({"eff": In(depth * lanes), "sel": Out(range(len(self.options))).array(lanes),
                          "take": Out(lanes), "left": Out(depth * lanes), "advance": Out(range(depth + 1))})

    def elaborate(self, platform):
        m = Module()
        L, D = self.lanes, self.depth
        left = [[self.eff[s * L + lane] for lane in range(L)] for s in range(D)]
        for i in range(L):                                   # level i: lane i decides
            none_before = Const(1)
            picks = []
            for k, (s, d) in enumerate(self.options):
                p = Signal(name=f"lane{i}_opt{k}")
                m.d.comb += p.eq(left[s][(i + d) % L] & none_before)
                none_before = none_before & ~left[s][(i + d) % L]
                picks.append(p)
            m.d.comb += self.take[i].eq(~none_before)
            for b in range(len(self.sel[i])):                # encode the one-hot pick
                m.d.comb += self.sel[i][b].eq(Cat(*[p for k, p in enumerate(picks) if k >> b & 1]).any())
            nxt = [row[:] for row in left]
            for (s, d), p in zip(self.options, picks):
                lane = (i + d) % L
                bit = Signal(name=f"left{i}_s{s}_l{lane}")
                m.d.comb += bit.eq(left[s][lane] & ~p)
                nxt[s][lane] = bit
            left = nxt
        m.d.comb += self.left.eq(Cat(*[b for row in left for b in row]))
        rows_empty = [~Cat(*row).any() for row in left]
        # leading empty rows = the number of prefixes 0 .. s that are all empty
        prefixes = [Cat(*rows_empty[:s + 1]).all() for s in range(D)]
        adv = sum(p.as_unsigned() for p in prefixes)
        m.d.comb += self.advance.eq(adv)
        return m


def zs_sched_from_config(config) -> ZeroSkipScheduler:
    """The scheduler of ``config``: ``ce_cols`` lanes (a CE row's width), ``zero_skip_depth`` rows,
    ``zero_skip_lookahead`` steps of lookahead, lookaside where ``zero_skip_lookaside``."""
    return ZeroSkipScheduler(lanes=config.ce_cols, depth=config.zero_skip_depth, lookahead=config.zero_skip_lookahead,
                             lookaside=config.zero_skip_lookaside)
