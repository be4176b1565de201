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

from amaranth import Cat, Const, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.design.config import BF16_BITS, FP32_BITS, FettaConfig

from hdl.fp import F32_QNAN, FP32Add, FP32ToBF16


class AccumAdd(wiring.Component):
    """``o = Mux(acc, old + psum, psum)`` on one row, per lane.

    Ports
    -----
    old, psum : In(lanes * acc_bits)
        The stored accumulation row and the reduced Psum row (lane ``x`` at bits ``x * acc_bits``).
    acc : In(1)
        Add (1) or overwrite (0).
    o : Out(lanes * acc_bits)
        The new row; combinational (valid in the cycle of the inputs).
    """

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
    """Accumulator row -> unified-memory row: bfloat16 RNE, or the low ``int_width`` bits.

    Ports
    -----
    a : In(lanes * acc_bits)
    o : Out(lanes * elem_bits)
        Combinational (valid in the cycle of ``a``).
    """

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
    """Unified-memory row -> accumulator row: exact FP32 (subnormals flushed), or sign extension.

    Ports
    -----
    a : In(lanes * elem_bits)
    o : Out(lanes * acc_bits)
        Combinational (valid in the cycle of ``a``).
    """

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
                sign, exp, frac = src[BF16_BITS - 1], src[7:BF16_BITS - 1], src[0:7]
                sub = exp == 0
                nan = (exp == 0xFF) & (frac != 0)
                zero = Cat(Const(0, FP32_BITS - 1), sign)
                m.d.comb += dst.eq(Mux(nan, F32_QNAN, Mux(sub, zero, Cat(Const(0, FP32_BITS - BF16_BITS), src))))
            else:
                m.d.comb += dst.eq(src.as_signed())
        return m
