"""Tensor contraction unit: E contraction engines and the spatial reduction (FETTA V-B).

This TCU runs the output-stationary dataflow of :mod:`gen.isa` (``GEMM``): every
CE is a ``ce_rows x ce_cols`` array of PEs; PE ``(i, j)`` of CE ``c`` multiplies
lane ``i`` of the CE's IA row with lane ``j`` of its IB row and accumulates in
FP32 (``bf16``) or in ``int_acc_width``-bit integers (``int16``). Psums are
double-buffered: the last step of a tile writes the final sums into ``buf``
while the next tile starts, and ``buf`` is drained one PE row per cycle.

The drained rows of aligned groups of ``2**log_gk`` CEs are summed by a
balanced tree of adjacent pairs (level ``l`` adds ``x[2j] + x[2j+1]``), the
adder-switch order of the reduction network; group ``g``'s result is on
``red[g]``.

Ports and timing
----------------
ia, ib : In(lanes * elem_bits).array(num_ces)
    Operand rows, sampled when ``step`` is high.
step, first, last : In(1)
    ``step``: a MAC step this cycle; ``first``: start from ``+0``; ``last``: also
    copy the sums into ``buf`` (visible next cycle).
drain_row : In(range(ce_rows)), log_gk : In(3)
red : Out(lanes * acc_bits).array(num_ces)
    Combinational: row ``drain_row`` of ``buf``, reduced over groups of ``2**log_gk`` CEs.
"""

from __future__ import annotations

from amaranth import Array, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.config import FettaConfig

from .fp import BF16Mul, FP32Add


class TCU(wiring.Component):
    def __init__(self, config: FettaConfig):
        from gen.gemm import check_config

        check_config(config)
        self._cfg = config
        E, L = config.num_ces, config.lanes
        super().__init__({
            "ia": In(L * config.elem_bits).array(E), "ib": In(L * config.elem_bits).array(E),
            "step": In(1), "first": In(1), "last": In(1),
            "drain_row": In(range(config.ce_rows)), "log_gk": In(3),
            "red": Out(L * config.acc_bits).array(E),
        })

    def _add(self, m, a, b, name):
        cfg = self._cfg
        if cfg.datatype == "bf16":
            m.submodules[name] = add = FP32Add()
            m.d.comb += [add.a.eq(a), add.b.eq(b)]
            return add.o
        s = Signal(cfg.acc_bits, name=name)
        m.d.comb += s.eq(a + b)
        return s

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        E, R, C = cfg.num_ces, cfg.ce_rows, cfg.ce_cols
        EB, AB = cfg.elem_bits, cfg.acc_bits
        rows = []   # rows[c][i] = Cat of buf[c][i][j]
        for c in range(E):
            ce_rows = []
            for i in range(R):
                row = []
                for j in range(C):
                    a = self.ia[c][i * EB:(i + 1) * EB]
                    b = self.ib[c][j * EB:(j + 1) * EB]
                    acc = Signal(AB, name=f"ce{c}_acc{i}_{j}")
                    buf = Signal(AB, name=f"ce{c}_buf{i}_{j}")
                    base = Mux(self.first, 0, acc)
                    if cfg.datatype == "bf16":
                        m.submodules[f"ce{c}_mul{i}_{j}"] = mul = BF16Mul()
                        m.d.comb += [mul.a.eq(a), mul.b.eq(b)]
                        total = self._add(m, base, mul.o, f"ce{c}_add{i}_{j}")
                    else:
                        prod = Signal(signed(2 * EB), name=f"ce{c}_prod{i}_{j}")
                        m.d.comb += prod.eq(a.as_signed() * b.as_signed())
                        total = Signal(AB, name=f"ce{c}_sum{i}_{j}")
                        m.d.comb += total.eq((base + prod)[:AB])
                    with m.If(self.step):
                        m.d.sync += acc.eq(total)
                        with m.If(self.last):
                            m.d.sync += buf.eq(total)
                    row.append(buf)
                ce_rows.append(Cat(*row))
            rows.append(Array(ce_rows))
        level = [Signal(C * AB, name=f"red_l0_{c}") for c in range(E)]
        for c in range(E):
            m.d.comb += level[c].eq(rows[c][self.drain_row])
        levels = [level]
        lv = 0
        while len(level) > 1:
            lv += 1
            nxt = []
            for j in range(len(level) // 2):
                s = Signal(C * AB, name=f"red_l{lv}_{j}")
                for x in range(C):
                    sl = slice(x * AB, (x + 1) * AB)
                    m.d.comb += s[sl].eq(self._add(m, level[2 * j][sl], level[2 * j + 1][sl], f"red{lv}_{j}_{x}"))
                nxt.append(s)
            level = nxt
            levels.append(level)
        for g in range(E):
            with m.Switch(self.log_gk):
                for l, lvl in enumerate(levels):
                    if g < len(lvl):
                        with m.Case(l):
                            m.d.comb += self.red[g].eq(lvl[g])
        return m
