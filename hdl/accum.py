"""Accumulation unit adders and format converters (FETTA V-C2).

Per bank, ``lanes`` adders combine a reduced Psum row with the stored row
(``old + psum``, old first: the order the emulator uses), and converters move
rows between the formats of the two memories:

* :class:`AccumAdd`: ``new = acc ? old + psum : psum`` (FP32, or integers that
  wrap at ``acc_bits``);
* :class:`Narrow`: accumulator row -> unified row (FP32 -> bfloat16 RNE via
  :class:`hdl.fp.FP32ToBF16`, or the low ``int_width`` bits);
* :class:`Widen`: unified row -> accumulator row (bfloat16 -> FP32 with
  subnormals flushed, or sign extension).

All three are combinational; the top registers around them.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.design.config import FettaConfig

from hdl.fp import FP32Add, FP32ToBF16


class AccumAdd(wiring.Component):
    """``o = Mux(acc, old + psum, psum)`` on one row. Combinational."""

    def __init__(self, config: FettaConfig):
        self._cfg = config
        w = config.lanes * config.acc_bits
        super().__init__({"old": In(w), "psum": In(w), "acc": In(1), "o": Out(w)})

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        AB = cfg.acc_bits
        for x in range(cfg.lanes):
            sl = slice(x * AB, (x + 1) * AB)
            if cfg.datatype == "bf16":
                m.submodules[f"add{x}"] = add = FP32Add()
                m.d.comb += [add.a.eq(self.old[sl]), add.b.eq(self.psum[sl])]
                total = add.o
            else:
                total = (self.old[sl] + self.psum[sl])[:AB]
            m.d.comb += self.o[sl].eq(Mux(self.acc, total, self.psum[sl]))
        return m


class Narrow(wiring.Component):
    """Accumulator row -> unified-memory row. Combinational."""

    def __init__(self, config: FettaConfig):
        self._cfg = config
        super().__init__({"a": In(config.lanes * config.acc_bits), "o": Out(config.lanes * config.elem_bits)})

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        AB, EB = cfg.acc_bits, cfg.elem_bits
        for x in range(cfg.lanes):
            src = self.a[x * AB:(x + 1) * AB]
            dst = self.o[x * EB:(x + 1) * EB]
            if cfg.datatype == "bf16":
                m.submodules[f"cvt{x}"] = cvt = FP32ToBF16()
                m.d.comb += [cvt.a.eq(src), dst.eq(cvt.o)]
            else:
                m.d.comb += dst.eq(src[:EB])
        return m


class Widen(wiring.Component):
    """Unified-memory row -> accumulator row. Combinational."""

    def __init__(self, config: FettaConfig):
        self._cfg = config
        super().__init__({"a": In(config.lanes * config.elem_bits), "o": Out(config.lanes * config.acc_bits)})

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        AB, EB = cfg.acc_bits, cfg.elem_bits
        for x in range(cfg.lanes):
            src = self.a[x * EB:(x + 1) * EB]
            dst = self.o[x * AB:(x + 1) * AB]
            if cfg.datatype == "bf16":
                # bf16 -> FP32 is exact; DAZ: a zero exponent means a signed zero, NaN -> canonical NaN
                sub = src[7:15] == 0
                nan = (src[7:15] == 0xFF) & (src[0:7] != 0)
                m.d.comb += dst.eq(Mux(nan, 0x7FC00000, Mux(sub, Cat(Signal(31), src[15]), Cat(Signal(16), src))))
            else:
                m.d.comb += dst.eq(src.as_signed())
        return m
