"""Zero-skipping front end of an output-stationary CE (issue 18; ``docs/zero_skip.md``, "Projection").

In OS, PE row ``r`` accumulates its outputs over ``k``, multiplying its IA element ``A[m0 + r, k]``
by the IB vector ``B[k, n0 .. n0 + C]``. :class:`ZeroSkipRows` holds a staging buffer of ``depth``
slots, one ``(IA vector, IB vector)`` pair per ``k`` in stream order, refilled by the feeder with up
to ``refill`` of them per cycle, and gives every PE row, every cycle, the pair of its earliest
``k`` still to do among the first ``lookahead + 1`` slots whose IA element is non-zero and whose
IB vector is not all zero (:class:`hdl.zs_sched.ZeroSkipScheduler` with lookahead options only:
a neighbouring row computes other outputs). Each row thus multiplies its effectual pairs in
ascending ``k``, the dense order with the zero products left out, so its FP32 sum is the dense
one bit for bit (``docs/zero_skip.md``, "Bit-exactness"). The rows share the buffer: it drains
the leading slots no row needs any more (``advance``), so a row runs at most ``depth - 1`` values
of ``k`` ahead of the slowest. Cycles: :func:`sim.zs_model.run_stream` with ``refill``.

A bf16 operand is zero when its exponent field is 0 (zero, or a subnormal the multiplier flushes).

Ports
-----
in_a : In(width).array(refill * rows); in_b : In(width).array(refill * cols)
    The next ``refill`` pairs of the stream (pair ``j``: elements ``j * rows ..`` / ``j * cols ..``).
in_count : In(range(refill + 1))
    How many of them exist (the stream's end presents fewer).
in_take : Out(range(refill + 1))
    How many the buffer takes this cycle (its free slots); the feeder moves on by that many.
pe_a : Out(width).array(rows); pe_b : Out(width).array(rows * cols); pe_valid : Out(rows)
    Row ``r``'s IA element and IB vector this cycle (``pe_valid[r]`` 0: it idles).
advance : Out(range(depth + 1))
    Slots drained at the end of this cycle.
filled : Out(range(depth + 1))
    Slots holding a pair (the buffer's state, before this cycle's refill).

Latency: combinational from the pairs taken in a cycle to the PE operands of that cycle; the
buffer, its fill level and which pairs each row has done are registers.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.zs_sched import ZeroSkipScheduler
from hdl.zs_unit import nonzero

__all__ = ["ZeroSkipRows", "zs_rows_from_config"]


class ZeroSkipRows(wiring.Component):
    """Staging buffer and per-row schedule of an OS CE's ``rows`` PE rows (module docstring)."""

    def __init__(self, rows: int = 4, cols: int = 4, depth: int = 4, lookahead: int = 3, refill: int = 1,
                 width: int = 16, fmt: str = "bf16"):
        if fmt not in ("bf16", "int"):
            raise ValueError(f"fmt must be 'bf16' or 'int', got {fmt!r}")
        if fmt == "bf16" and width != 16:
            raise ValueError(f"bf16 operands are 16 bits, got width {width}")
        if not 1 <= refill <= depth:
            raise ValueError(f"refill must be 1 .. depth = {depth}, got {refill}")
        self.rows, self.cols, self.depth, self.refill, self.width, self.fmt = rows, cols, depth, refill, width, fmt
        self._sched = ZeroSkipScheduler(rows, depth, lookahead, lookaside=False)
        self.options = self._sched.options
        R, C, F = rows, cols, refill
        super().__init__({"in_a": In(width).array(F * R), "in_b": In(width).array(F * C),
                          "in_count": In(range(F + 1)), "in_take": Out(range(F + 1)),
                          "pe_a": Out(width).array(R), "pe_b": Out(width).array(R * C), "pe_valid": Out(R),
                          "advance": Out(range(depth + 1)), "filled": Out(range(depth + 1))})

    def elaborate(self, platform):
        m = Module()
        R, C, D, F, W = self.rows, self.cols, self.depth, self.refill, self.width
        m.submodules.sched = sched = self._sched
        buf_a = [[Signal(W, name=f"buf{s}_a{r}") for r in range(R)] for s in range(D)]
        buf_b = [[Signal(W, name=f"buf{s}_b{c}") for c in range(C)] for s in range(D)]
        filled = Signal(range(D + 1), name="fill")
        done = Signal(D * R, name="done")           # bit s * R + r: row r has multiplied slot s
        take = Signal(range(F + 1), name="take")
        m.d.comb += [take.eq(Mux(self.in_count < D - filled, self.in_count, D - filled)),
                     self.in_take.eq(take), self.filled.eq(filled)]
        # the window: the buffer's pairs, then the ones taken this cycle
        win_a = [[Signal(W, name=f"win{s}_a{r}") for r in range(R)] for s in range(D)]
        win_b = [[Signal(W, name=f"win{s}_b{c}") for c in range(C)] for s in range(D)]
        valid = Signal(D, name="valid")
        for s in range(D):
            m.d.comb += valid[s].eq(s < filled + take)
            for x, buf, inp, n in ((win_a, buf_a, self.in_a, R), (win_b, buf_b, self.in_b, C)):
                for e in range(n):
                    v = buf[s][e]
                    for j in range(min(F, s + 1)):  # new pair j lands in slot filled + j
                        v = Mux(filled == s - j, inp[j * n + e], v)
                    m.d.comb += x[s][e].eq(v)
        eff = Signal(D * R, name="eff")
        for s in range(D):
            any_b = Signal(name=f"b_nonzero{s}")
            m.d.comb += any_b.eq(sum(nonzero(b, self.fmt).as_unsigned() for b in win_b[s]) != 0)
            for r in range(R):
                m.d.comb += eff[s * R + r].eq(valid[s] & any_b & nonzero(win_a[s][r], self.fmt) & ~done[s * R + r])
        m.d.comb += sched.eff.eq(eff)
        for r in range(R):                          # option k is slot k (lookahead only)
            a, bs = win_a[0][r], list(win_b[0])
            for k, (s, _) in enumerate(self.options[1:], start=1):
                a = Mux(sched.sel[r] == k, win_a[s][r], a)
                bs = [Mux(sched.sel[r] == k, win_b[s][c], b) for c, b in enumerate(bs)]
            m.d.comb += [self.pe_a[r].eq(a), self.pe_valid[r].eq(sched.take[r])]
            m.d.comb += [self.pe_b[r * C + c].eq(b) for c, b in enumerate(bs)]
        adv = Signal(range(D + 1), name="adv")
        m.d.comb += [adv.eq(Mux(sched.advance < filled + take, sched.advance, filled + take)),
                     self.advance.eq(adv)]
        # the window less the drained slots becomes the buffer; done bits move with their slots
        # (a circular buffer instead, measured 2026-12-08: less logic with one pair per cycle,
        # more with four, the design point of docs/zero_skip.md)
        now = Signal(D * R, name="done_now")
        m.d.comb += now.eq(done | (eff & ~sched.left))
        m.d.sync += [filled.eq(filled + take - adv), done.eq(now >> (adv * R))]
        for s in range(D):
            for x, buf, n in ((win_a, buf_a, R), (win_b, buf_b, C)):
                for e in range(n):
                    v = x[s][e]
                    for q in range(1, D - s):
                        v = Mux(adv == q, x[s + q][e], v)
                    m.d.sync += buf[s][e].eq(v)
        return m


def zs_rows_from_config(config) -> ZeroSkipRows:
    """The front end of ``config``'s CE: ``ce_rows`` x ``ce_cols``, ``zero_skip_depth`` slots,
    ``zero_skip_lookahead``, ``zero_skip_refill`` pairs per cycle, operands of the datatype."""
    bf16 = config.datatype == "bf16"
    return ZeroSkipRows(rows=config.ce_rows, cols=config.ce_cols, depth=config.zero_skip_depth,
                        lookahead=config.zero_skip_lookahead, refill=config.zero_skip_refill,
                        width=config.elem_bits, fmt="bf16" if bf16 else "int")
