"""A zero-skipping dot-product lane group: TensorDash's PE front end (seed 001 Fig. 5; issue 18).

:class:`ZeroSkipUnit` sits between a feeder and ``lanes`` multipliers. The feeder presents a
*window* of the next ``depth`` rows of the dense schedule (row ``s``, lane ``l``: the operand pair
``(a, b)`` that lane ``l`` multiplies at step ``+s`` without zero skipping; ``win_valid[s]``: the
row exists). The unit keeps which pairs of the window it has already sent (``taken``, the staging
buffer's state), marks as effectual the pairs with both operands non-zero, not yet taken, in valid
rows (a bf16 operand counts as zero when its exponent field is 0: zero, or a subnormal that the
multiplier flushes to zero), and lets :class:`hdl.zs_sched.ZeroSkipScheduler` pick one per lane; every lane's multiplexer
then delivers its pair. ``advance`` tells the feeder how many rows to drop from the front of the
window (the staging buffer drains them and is refilled with the rows that follow); ``taken``
shifts with it. Results are the same products as the dense schedule's minus the ineffectual ones
(a zero operand), so a dot product accumulated from them is the same sum in another order.

Ports
-----
win_a, win_b : In(width).array(depth * lanes)
    Operands of the window, element ``step * lanes + lane``.
win_valid : In(depth)
    Row ``step`` of the window exists (the stream's end leaves the last rows empty).
mul_a, mul_b : Out(width).array(lanes); mul_valid : Out(lanes)
    The pair each multiplier gets this cycle (``mul_valid`` 0: it idles).
advance : Out(range(depth + 1))
    Rows the feeder drops from the window at the end of this cycle (0 only while no row is valid).

Latency: combinational from the window to the multiplier operands (one step per cycle); the
``taken`` state is a register updated at the end of the cycle.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.zs_sched import ZeroSkipScheduler

__all__ = ["ZeroSkipUnit", "zs_unit_from_config", "nonzero"]


def nonzero(x, fmt: str):
    """Is operand ``x`` non-zero for the multiplier: bf16, its exponent field is not 0 (zeros and
    the subnormals the multiplier flushes to zero give a zero product); int, any bit set."""
    return x[7:15].any() if fmt == "bf16" else x.any()


class ZeroSkipUnit(wiring.Component):
    """Zero-skipping front end of ``lanes`` multipliers (module docstring)."""

    def __init__(self, lanes: int = 4, depth: int = 4, lookahead: int = 3, width: int = 16, fmt: str = "bf16",
                 lookaside: bool = True):
        if fmt not in ("bf16", "int"):
            raise ValueError(f"fmt must be 'bf16' or 'int', got {fmt!r}")
        if fmt == "bf16" and width != 16:
            raise ValueError(f"bf16 operands are 16 bits, got width {width}")
        self.lanes, self.depth, self.width, self.fmt = lanes, depth, width, fmt
        self._sched = ZeroSkipScheduler(lanes, depth, lookahead, lookaside)
        n = depth * lanes
        super().__init__({"win_a": In(width).array(n), "win_b": In(width).array(n), "win_valid": In(depth),
                          "mul_a": Out(width).array(lanes), "mul_b": Out(width).array(lanes),
                          "mul_valid": Out(lanes), "advance": Out(range(depth + 1))})

    def elaborate(self, platform):
        m = Module()
        L, D = self.lanes, self.depth
        m.submodules.sched = sched = self._sched
        taken = Signal(D * L, name="taken")
        eff = Signal(D * L, name="eff")
        for s in range(D):
            for lane in range(L):
                k = s * L + lane
                m.d.comb += eff[k].eq(self.win_valid[s] & nonzero(self.win_a[k], self.fmt) & nonzero(self.win_b[k], self.fmt)
                                      & ~taken[k])
        m.d.comb += sched.eff.eq(eff)
        for i in range(L):
            a, b = self.win_a[i], self.win_b[i]            # option 0: the dense pair (+0, i)
            for k, (s, d) in enumerate(sched.options[1:], start=1):
                src = s * L + (i + d) % L
                a = Mux(sched.sel[i] == k, self.win_a[src], a)
                b = Mux(sched.sel[i] == k, self.win_b[src], b)
            m.d.comb += [self.mul_a[i].eq(a), self.mul_b[i].eq(b), self.mul_valid[i].eq(sched.take[i])]
        adv = Signal(range(D + 1), name="adv")
        m.d.comb += [adv.eq(Mux(self.win_valid[0], sched.advance, 0)), self.advance.eq(adv)]
        # taken now or before; the rows kept move to the front, a new row starts with nothing taken
        now = Signal(D * L, name="taken_now")
        m.d.comb += now.eq(taken | (eff & ~sched.left))
        m.d.sync += taken.eq(now >> (adv * L))
        return m


def zs_unit_from_config(config) -> ZeroSkipUnit:
    """The unit of ``config``: ``ce_cols`` lanes, ``zero_skip_depth`` rows, ``zero_skip_lookahead``,
    ``zero_skip_lookaside``, operands of the datatype (bf16, or ``int_width``-bit integers)."""
    bf16 = config.datatype == "bf16"
    return ZeroSkipUnit(lanes=config.ce_cols, depth=config.zero_skip_depth, lookahead=config.zero_skip_lookahead,
                        width=config.elem_bits, fmt="bf16" if bf16 else "int", lookaside=config.zero_skip_lookaside)
