"""Accumulation unit adders and format converters (FETTA V-C2).

Per bank, ``lanes`` adders combine a reduced Psum row with the stored row
(``old + psum``, old first: the order the emulator uses), and converters move
rows between the formats of the two memories:

* :class:`AccumAdd`: ``new = acc ? old + psum : psum`` (FP32, or integers that
  wrap at ``acc_bits``), ``add_latency - 1`` cycles;
* :class:`Narrow`: accumulator row -> unified row (FP32 -> bfloat16 RNE via
  :class:`hdl.fp.FP32ToBF16`, or the low ``int_width`` bits);
* :class:`Widen`: unified row -> accumulator row (bfloat16 -> FP32 with
  subnormals flushed, or sign extension).

The converters are combinational; the top registers around them.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.design.config import BF16_BITS, FP32_BITS, FettaConfig

from hdl.fp import F32_QNAN, FP32Add, FP32ToBF16
from hdl.pipe import delay


class AccumAdd(wiring.Component):
    """``o = Mux(acc, old + psum, psum)`` on one row, per lane, pipelined like every FP32 adder of the
    design: ``add_latency - 1`` inner registers (:class:`hdl.fp.FP32Add` ``stages``; the
    accumulation memory's write is the last register, as the PE's accumulator is for its adder).
    ``acc`` and ``psum`` ride along in registers named ``acc_d<i>`` / ``psum<x>_d<i>`` (an overwrite
    keeps the same latency as an add); the integer datatype adds in one cycle and delays the sum.

    Ports
    -----
    old, psum : In(lanes * acc_bits)
        The stored accumulation row and the reduced Psum row (lane ``x`` at bits ``x * acc_bits``).
    acc : In(1)
        Add (1) or overwrite (0).
    o : Out(lanes * acc_bits)
        The new row, :attr:`latency` cycles after the inputs (0: combinational).

    A read-modify-write of one row therefore needs ``add_latency`` cycles between two adds to the
    same row (:func:`gen.design.isa.tile_period` keeps the stationary dataflows' ``ACC_L0`` tiles that
    far apart; the emulator marks a result unknown where a program breaks the rule).
    """

    def __init__(self, config: FettaConfig):
        self._cfg = config
        w = config.lanes * config.acc_bits
        super().__init__({"old": In(w), "psum": In(w), "acc": In(1), "o": Out(w)})

    @property
    def latency(self) -> int:
        """Cycles from the inputs to ``o``: ``add_latency - 1``."""
        return self._cfg.add_latency - 1

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        AB, S = cfg.acc_bits, self.latency
        acc = delay(m, self.acc, S, "acc")
        for x in range(cfg.lanes):
            sl = slice(x * AB, (x + 1) * AB)
            if cfg.datatype == "bf16":
                m.submodules[f"add{x}"] = add = FP32Add(stages=S)
                m.d.comb += [add.a.eq(self.old[sl]), add.b.eq(self.psum[sl])]
                m.d.comb += self.o[sl].eq(Mux(acc, add.o, delay(m, self.psum[sl], S, f"psum{x}")))
            else:
                total = Mux(self.acc, self.old[sl] + self.psum[sl], self.psum[sl])[:AB]
                m.d.comb += self.o[sl].eq(delay(m, total, S, f"sum{x}"))
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
