"""The vector unit's operations beyond the multiply-add (bfloat16 datatype): ``MUL``, ``MAX``,
``EXP``, ``RECIP`` and ``RSQRT`` of :class:`gen.design.isa.VecOp`, bit-exact with
:mod:`sim.vector_ref` (the tables are :mod:`gen.design.vtables`).

Per lane (``x`` bfloat16, ``y`` FP32, ``p`` the FP32 product ``x * a`` of the unit's multiplier):

* ``MUL``: ``y * x``, the exact 24 x 8-bit significand product rounded once to FP32 (RNE), DAZ;
  results below ``2**-126`` after IEEE rounding flush to signed zero (a product that IEEE rounds
  up to ``2**-126`` from below is kept, as numpy's float32 product then ``ftz32``), overflow to
  ``+-inf``, canonical NaN (``0 * inf`` too).
* ``MAX``: ``max(y, x)`` with ``x`` widened, DAZ, ``-0 < +0``, canonical NaN if either is NaN.
* ``EXP``: ``exp(p)``: ``u = p * log2(e)`` in fixed point (the product's 16-bit significand times
  a 29-bit ``log2(e)``, shifted by its exponent, :data:`~gen.design.vtables.EXP_F_BITS` = 18 fraction
  bits, rounded), ``k = floor(u)``, ``2**(u - k)`` from a 128-entry ROM with linear interpolation
  (one 17 x 11-bit product), exponent ``127 + k``; ``|u| >= 128`` and ``+-inf`` give ``+inf`` /
  ``+0``, a result below ``2**-126`` gives ``+0``, NaN the canonical NaN.
* ``RECIP``, ``RSQRT``: the correctly rounded FP32 ``1 / x``, ``1 / sqrt(x)`` from a ROM on the 7-bit
  fraction (and, for RSQRT, the exponent's parity): 128 / 256 x 23 bits; the exponent is
  computed. Specials: ``1/+-0 = +-inf``, ``1/+-inf = +-0``, results below ``2**-126`` flushed
  (``RECIP`` of ``|x| > 2**126``); ``rsqrt(+-0) = +-inf``,
  ``rsqrt(+inf) = +0``, ``rsqrt(x < 0)`` and NaN the canonical NaN.

Timing (``M = mul_latency``, ``S = add_latency``), the vector unit's: stage A is the ``M`` cycles
from the operands to the unit's product register ``p1``, stage B the ``S - 1`` cycles after it.
Stage A computes MAX, the specials and exponents of RECIP / RSQRT and MUL's significand product
and exponent sum, combinationally, into the registers ``a_*`` (``M`` of each, named ``a_<v><lane>_d<n>``);
the RECIP / RSQRT ROMs are read synchronously, their address (``x``'s fraction) delayed ``M - 1``
cycles, so their data arrives with ``p1``. Stage B (from ``a_*``, the ROM data and ``p``) rounds MUL,
computes EXP (its ROM is read combinationally) and merges the ROM fractions, then ``S - 1``
registers ``b_o<lane>_d<n>``; ``o`` is valid **M + S - 1 cycles** after ``x`` / ``y`` / ``op``
(``p``: ``S - 1`` cycles after it), one operand set per cycle.

Logic depth: stage A, a 24 x 8-bit multiplier (MUL) beside a 31-bit compare (MAX); stage B, for EXP,
a 16 x 29-bit constant multiplier, a 45-bit shifter, a 26-bit negation, the ROM and a 17 x 11-bit
multiplier with its 24-bit add (deeper than the FP32 adder: the unit's longest path with EXP in use).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.design.isa import VecOp
from gen.design.vtables import (EXP_F_BITS, EXP_INDEX_BITS, EXP_R_BITS, EXP_ROM, EXP_T_BITS, LOG2E_BITS, LOG2E_FIXED,
                                RECIP_ROM, RSQRT_ROM)

from hdl.fp import F32_QNAN
from hdl.pipe import delay

__all__ = ["VectorFunc", "FUNC_OPS"]

#: the operations :class:`VectorFunc` computes
FUNC_OPS = (VecOp.MUL, VecOp.MAX, VecOp.EXP, VecOp.RECIP, VecOp.RSQRT)

_INF = 0x7F800000
_ONE = 0x3F800000
#: ``u * 2**EXP_F_BITS = (significand * LOG2E_FIXED) >> (_EXP_SHIFT - e)`` (``sim.vector_ref.EXP_SHIFT``)
_EXP_SHIFT = 15 + LOG2E_BITS - EXP_F_BITS + 127
#: ``p`` with a biased exponent of at least this saturates EXP (``|p| >= 128``)
_EXP_BIG = 127 + 7


def _classes(m: Module, s, e, f, name: str) -> dict:
    """Operand classes of a float (DAZ: a zero exponent is a zero)."""
    out = {k: Signal(name=f"{name}_{k}") for k in ("nan", "inf", "zero")}
    m.d.comb += [out["nan"].eq((e == 0xFF) & (f != 0)), out["inf"].eq((e == 0xFF) & (f == 0)), out["zero"].eq(e == 0)]
    return out


class VectorFunc(wiring.Component):
    """MUL, MAX, EXP, RECIP and RSQRT on ``lanes`` lanes (module docstring: results, timing).

    Parameters
    ----------
    lanes : int
    mul_latency, add_latency : int
        ``M`` and ``S`` of the configuration (stage A: ``M`` cycles, stage B: ``S - 1``).

    Ports
    -----
    op : In(VecOp)                with ``x`` and ``y``
    x : In(lanes * 16)            bfloat16, lane ``i`` at bits ``[16i, 16i + 16)``
    y : In(lanes * 32)            FP32
    p : In(lanes * 32)            FP32 ``x * a`` of the unit's multiplier, ``M`` cycles after ``x``
    o : Out(lanes * 32)           FP32 result of ``op`` (0 for the other ops), ``M + S - 1`` cycles after ``x``
    """

    def __init__(self, *, lanes: int, mul_latency: int, add_latency: int):
        self.lanes, self._M, self._S = lanes, mul_latency, add_latency
        super().__init__({"op": In(VecOp), "x": In(lanes * 16), "y": In(lanes * 32), "p": In(lanes * 32),
                          "o": Out(lanes * 32)})

    @property
    def latency(self) -> int:
        """Cycles from ``x`` / ``y`` / ``op`` to ``o``."""
        return self._M + self._S - 1

    def elaborate(self, platform):
        m = Module()
        M, S = self._M, self._S
        roms = {"recip": Memory(shape=unsigned(23), depth=128, init=RECIP_ROM),
                "rsqrt": Memory(shape=unsigned(23), depth=256, init=RSQRT_ROM),
                "exp": Memory(shape=unsigned(len(f"{max(EXP_ROM):b}")), depth=1 << EXP_INDEX_BITS, init=EXP_ROM)}
        for name, rom in roms.items():
            m.submodules[f"{name}_rom"] = rom
        b_op = delay(m, self.op, M, "b_op")
        for i in range(self.lanes):
            x, y = self.x[16 * i:16 * (i + 1)], self.y[32 * i:32 * (i + 1)]
            a = self._stage_a(m, x, y, i)
            rd = {}
            for name, addr in (("recip", x[0:7]), ("rsqrt", x[0:8])):
                port = roms[name].read_port()            # synchronous: the data arrives with p1
                m.d.comb += port.addr.eq(delay(m, addr, M - 1, f"a_{name}_addr{i}"))
                rd[name] = port.data
            res = Signal(32, name=f"b_res{i}")
            mul = self._mul_round(m, a, i)
            exp = self._exp(m, roms["exp"].read_port(domain="comb"), self.p[32 * i:32 * (i + 1)], i)
            with m.Switch(b_op):
                with m.Case(VecOp.MUL):
                    m.d.comb += res.eq(Mux(a["spec"], a["word"], mul))
                with m.Case(VecOp.EXP):
                    m.d.comb += res.eq(exp)
                with m.Case(VecOp.MAX, VecOp.RECIP, VecOp.RSQRT):
                    frac = Mux(b_op == VecOp.RECIP, rd["recip"], rd["rsqrt"])
                    m.d.comb += res.eq(a["word"] | Mux(a["rom"], frac, 0))
            m.d.comb += self.o[32 * i:32 * (i + 1)].eq(delay(m, res, S - 1, f"b_o{i}"))
        return m

    def _stage_a(self, m: Module, x, y, i: int) -> dict:
        """Stage A of lane ``i``: the registers ``a_*`` (``M`` deep) of every op.

        ``word``: MAX's result; RECIP / RSQRT's sign and exponent or special result (``rom``: or
        the ROM fraction into it); MUL's special result (``spec``). ``prod`` / ``exp`` / ``sign``:
        MUL's 32-bit significand product, the biased exponent of ``prod[30]`` as leading bit, the sign."""
        xs, xe, xf = x[15], x[7:15], x[0:7]
        ys, ye, yf = y[31], y[23:31], y[0:23]
        xc, yc = _classes(m, xs, xe, xf, f"a_x{i}"), _classes(m, ys, ye, yf, f"a_y{i}")
        op = self.op
        word, rom, spec = Signal(32, name=f"a_word{i}"), Signal(name=f"a_rom{i}"), Signal(name=f"a_spec{i}")
        sign_zero, sign_inf = Cat(Const(0, 31), xs), Cat(Const(_INF, 31), xs)
        with m.Switch(op):
            with m.Case(VecOp.MUL):
                self._mul_special(m, xc, yc, xs ^ ys, word, spec)
            with m.Case(VecOp.MAX):
                self._max(m, x, y, xc, yc, word, i)
            with m.Case(VecOp.RECIP):
                be = Signal(signed(10), name=f"a_recip_be{i}")
                m.d.comb += be.eq(254 - xe - (xf != 0))
                with m.If(xc["nan"]):
                    m.d.comb += word.eq(F32_QNAN)
                with m.Elif(xc["inf"] | (~xc["zero"] & (be <= 0))):
                    m.d.comb += word.eq(sign_zero)
                with m.Elif(xc["zero"]):
                    m.d.comb += word.eq(sign_inf)
                with m.Else():
                    m.d.comb += [word.eq(Cat(Const(0, 23), be[0:8], xs)), rom.eq(1)]
            with m.Case(VecOp.RSQRT):
                be = Signal(8, name=f"a_rsqrt_be{i}")
                m.d.comb += be.eq(((381 - xe) >> 1) - (xe[0] & (xf != 0)))
                with m.If(xc["nan"] | (xs & ~xc["zero"])):
                    m.d.comb += word.eq(F32_QNAN)
                with m.Elif(xc["zero"]):
                    m.d.comb += word.eq(sign_inf)
                with m.Elif(~xc["inf"]):
                    m.d.comb += [word.eq(Cat(Const(0, 23), be)), rom.eq(1)]
        prod = Signal(32, name=f"a_prod{i}")
        exp = Signal(signed(11), name=f"a_exp{i}")
        m.d.comb += [prod.eq(Cat(yf, Const(1, 1)) * Cat(xf, Const(1, 1))), exp.eq(ye + xe - 127)]
        vals = {"word": word, "rom": rom, "spec": spec, "prod": prod, "exp": exp, "sign": xs ^ ys}
        return {k: delay(m, v, self._M, f"a_{k}{i}") for k, v in vals.items()}

    @staticmethod
    def _mul_special(m: Module, xc, yc, sign, word, spec) -> None:
        """MUL's special results: NaN (either NaN, ``0 * inf``), signed inf, signed zero (DAZ)."""
        with m.If(xc["nan"] | yc["nan"] | (xc["inf"] & yc["zero"]) | (xc["zero"] & yc["inf"])):
            m.d.comb += [word.eq(F32_QNAN), spec.eq(1)]
        with m.Elif(xc["inf"] | yc["inf"]):
            m.d.comb += [word.eq(Cat(Const(_INF, 31), sign)), spec.eq(1)]
        with m.Elif(xc["zero"] | yc["zero"]):
            m.d.comb += [word.eq(Cat(Const(0, 31), sign)), spec.eq(1)]

    @staticmethod
    def _max(m: Module, x, y, xc, yc, word, i: int) -> None:
        """MAX: the larger of widened ``x`` and ``y`` as sign-magnitude numbers (DAZ, ``-0 < +0``)."""
        xm = Mux(xc["zero"], 0, Cat(Const(0, 16), x[0:15]))
        ym = Mux(yc["zero"], 0, y[0:31])
        xs, ys = x[15], y[31]
        x_gt = Signal(name=f"a_max_xgt{i}")
        m.d.comb += x_gt.eq(Mux(xs != ys, ys, Mux(xs, xm < ym, xm > ym)))
        with m.If(xc["nan"] | yc["nan"]):
            m.d.comb += word.eq(F32_QNAN)
        with m.Else():
            m.d.comb += word.eq(Mux(x_gt, Cat(xm, xs), Cat(ym, ys)))

    @staticmethod
    def _mul_round(m: Module, a: dict, i: int):
        """Stage B of MUL: normalise the significand product, round to nearest even, flush / overflow."""
        prod, sign = a["prod"], a["sign"]
        carry = prod[31]
        sig = Signal(32, name=f"b_mul_sig{i}")
        eb = Signal(signed(12), name=f"b_mul_eb{i}")             # biased exponent before rounding
        m.d.comb += [sig.eq(Mux(carry, prod, prod << 1)), eb.eq(a["exp"] + carry)]
        kept = sig[8:32]
        up = sig[7] & ((sig[0:7] != 0) | kept[0])
        rnd = Signal(25, name=f"b_mul_rnd{i}")
        ef = Signal(signed(13), name=f"b_mul_ef{i}")
        m.d.comb += [rnd.eq(kept + up), ef.eq(eb + rnd[24])]
        # below 2**-126 IEEE rounds on the subnormal grid: from [2**-127, 2**-126) only up to 2**-126
        tiny_up = (eb == 0) & (sig[9:32] == (1 << 23) - 1) & sig[8]
        out = Signal(32, name=f"b_mul{i}")
        with m.If(eb <= 0):
            m.d.comb += out.eq(Cat(Const(0, 23), tiny_up, Const(0, 7), sign))
        with m.Elif(ef >= 0xFF):
            m.d.comb += out.eq(Cat(Const(_INF, 31), sign))
        with m.Else():
            m.d.comb += out.eq(Cat(Mux(rnd[24], 0, rnd[0:23]), ef[0:8], sign))
        return out

    @staticmethod
    def _exp(m: Module, port, p, i: int):
        """Stage B of EXP on the product ``p`` (``port``: a combinational read port of the 2**f ROM)."""
        s, e, frac = p[31], p[23:31], p[0:23]
        scaled = Signal(16 + LOG2E_FIXED.bit_length(), name=f"b_exp_scaled{i}")
        sh = Signal(8, name=f"b_exp_sh{i}")
        ua = Signal(27, name=f"b_exp_ua{i}")
        m.d.comb += [scaled.eq(Cat(frac[8:23], Const(1, 1)) * LOG2E_FIXED), sh.eq(_EXP_SHIFT - 1 - e),
                     ua.eq(((scaled >> sh) + 1) >> 1)]
        big = (e >= _EXP_BIG) | ua[25] | ua[26]
        u = Signal(26, name=f"b_exp_u{i}")
        m.d.comb += u.eq(Mux(s, -ua, ua))
        f, k = u[0:EXP_F_BITS], u[EXP_F_BITS:26].as_signed()
        m.d.comb += port.addr.eq(f[EXP_R_BITS:])
        t, d = port.data[0:EXP_T_BITS], port.data[EXP_T_BITS:]
        mant = Signal(EXP_T_BITS, name=f"b_exp_mant{i}")
        be = Signal(signed(10), name=f"b_exp_be{i}")
        m.d.comb += [mant.eq(t + ((d * f[0:EXP_R_BITS]) >> EXP_R_BITS)), be.eq(127 + k)]
        out = Signal(32, name=f"b_exp{i}")
        with m.If((e == 0xFF) & (frac != 0)):
            m.d.comb += out.eq(F32_QNAN)
        with m.Elif(big | (e == 0xFF)):
            m.d.comb += out.eq(Mux(s, 0, _INF))
        with m.Elif(e == 0):
            m.d.comb += out.eq(_ONE)
        with m.Elif(be <= 0):
            m.d.comb += out.eq(0)
        with m.Else():
            m.d.comb += out.eq(Cat(mant[0:23], be[0:8], Const(0, 1)))
        return out
