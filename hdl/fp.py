"""Combinational bfloat16 / FP32 arithmetic, bit-exact with :mod:`sim.bf16`.

The three blocks implement the numerics decided in ``sim/bf16.py``:
round to nearest, ties to even; subnormal inputs treated as signed zero (DAZ)
and subnormal results flushed to signed zero (FTZ); every NaN result is the
canonical quiet NaN (``0x7FC00000`` / ``0x7FC0``); IEEE rules for infinities
and signed zeros (``x + (-x) = +0``, ``(-0) + (-0) = -0``).

:class:`BF16Mul` and :class:`FP32Add` take a ``stages`` argument: the number of
pipeline registers inside the block (0: combinational). Each register is a named
stage register (``<cut>_<value>``) at one of the block's cut points, chosen so
that the stages have similar logic depth; the block's user adds the output
register (the PE's product and accumulator registers, a network level's
register, the memory write), so a configuration's ``mul_latency`` /
``add_latency`` is ``stages + 1``. Results do not depend on ``stages``.
:class:`FP32ToBF16` is combinational.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.design.config import BF16_BITS, FP32_BITS

__all__ = ["BF16Mul", "FP32Add", "FP32ToBF16", "F32_QNAN", "BF16_QNAN", "ADD_CUTS", "MUL_CUTS"]

#: canonical quiet NaN of FP32
F32_QNAN = 0x7FC00000
#: canonical quiet NaN of bfloat16
BF16_QNAN = 0x7FC0

#: cut points of :class:`FP32Add` in datapath order
ADD_CUT_NAMES = ("swap", "align", "add", "lzc", "norm", "round")
#: ``stages`` -> the cut points that get a register (balanced by logic depth: the alignment
#: shift, the 28-bit add, the leading-zero count and normalising shift, the rounding increment)
ADD_CUTS = {0: (), 1: ("add",), 2: ("align", "lzc"), 3: ("align", "lzc", "norm"),
            4: ("align", "add", "lzc", "norm"), 5: ("swap", "align", "add", "lzc", "norm"),
            6: ADD_CUT_NAMES}
#: ``stages`` -> cut points of :class:`BF16Mul` (after the significand product)
MUL_CUTS = {0: (), 1: ("product",)}


def _check_stages(stages, table, block):
    if not isinstance(stages, int) or isinstance(stages, bool):
        raise TypeError(f"{block}: stages must be an integer, not {stages!r}")
    if stages not in table:
        raise ValueError(f"{block}: stages must be between 0 and {max(table)}, not {stages!r}")


def _stage(m: Module, cuts, name: str, **values):
    """The ``values`` after cut point ``name``: registered copies ``{name}_{key}`` when the cut is
    in ``cuts``, else the values themselves."""
    if name not in cuts:
        return values
    out = {}
    for key, value in values.items():
        reg = Signal(Value.cast(value).shape(), name=f"{name}_{key}")
        m.d.sync += reg.eq(value)
        out[key] = reg
    return out


class BF16Mul(wiring.Component):
    """bfloat16 x bfloat16 -> FP32 product.

    The product of two 8-bit significands has at most 16 significant bits, so
    it is exact in FP32: no rounding logic is needed, only overflow to
    infinity (biased exponent >= 255) and flush of results below ``2**-126``
    (biased exponent <= 0, always exactly representable as a subnormal, then
    flushed as the reference does).

    Parameters
    ----------
    stages : int
        Inner pipeline registers, 0 (combinational) or 1 (cut ``product``: after the 8x8
        significand multiply and the exponent add, with the sign and the special-case flags).

    Ports
    -----
    a, b : In(16)
        bfloat16 operands (bit patterns).
    o : Out(32)
        FP32 product, valid :attr:`latency` (= ``stages``) cycles after ``a``, ``b``; one
        operand pair per cycle.

    Logic depth: one 8x8 unsigned multiplier in parallel with a 9-bit exponent
    adder, then a 1-bit normalisation mux and the special-case muxes.
    """

    def __init__(self, *, stages: int = 0):
        _check_stages(stages, MUL_CUTS, "BF16Mul")
        self._stages = stages
        super().__init__({"a": In(BF16_BITS), "b": In(BF16_BITS), "o": Out(FP32_BITS)})

    @property
    def latency(self) -> int:
        """Cycles from ``a``, ``b`` to ``o``."""
        return self._stages

    def elaborate(self, platform):
        m = Module()
        cuts = MUL_CUTS[self._stages]
        sa, ea, fa = self.a[15], self.a[7:15], self.a[0:7]
        sb, eb, fb = self.b[15], self.b[7:15], self.b[0:7]
        # DAZ: exponent 0 means zero whatever the fraction says.
        a_zero, b_zero = ea == 0, eb == 0
        a_inf, b_inf = (ea == 0xFF) & (fa == 0), (eb == 0xFF) & (fb == 0)
        a_nan, b_nan = (ea == 0xFF) & (fa != 0), (eb == 0xFF) & (fb != 0)
        nan = Signal(name="nan")
        inf = Signal(name="inf")
        zero = Signal(name="zero")
        m.d.comb += [nan.eq(a_nan | b_nan | (a_zero & b_inf) | (a_inf & b_zero)),
                     inf.eq(a_inf | b_inf), zero.eq(a_zero | b_zero)]
        prod = Signal(16, name="prod")  # 1.fa * 1.fb in [1, 4), 14 fraction bits
        m.d.comb += prod.eq(Cat(fa, Const(1, 1)) * Cat(fb, Const(1, 1)))
        # biased result exponent before normalisation, signed: ea + eb - 127 in [-125, 383]
        exp0 = Signal(range(-256, 512), name="exp0")
        m.d.comb += exp0.eq(ea + eb - 127)
        # the exponent for both normalisations and its range checks, before the cut
        exp1 = Signal(range(-256, 512), name="exp1")
        m.d.comb += exp1.eq(exp0 + 1)
        v = _stage(m, cuts, "product", sign=sa ^ sb, nan=nan, inf=inf, zero=zero, prod=prod,
                   exp0=exp0[:8], exp1=exp1[:8], under0=exp0 <= 0, under1=exp1 <= 0,
                   over0=exp0 >= 0xFF, over1=exp1 >= 0xFF)

        carry = v["prod"][15]
        exp = Mux(carry, v["exp1"], v["exp0"])
        under = Mux(carry, v["under1"], v["under0"])
        over = Mux(carry, v["over1"], v["over0"])
        frac = Signal(23, name="frac")
        m.d.comb += frac.eq(Mux(carry, Cat(Const(0, 8), v["prod"][0:15]), Cat(Const(0, 9), v["prod"][0:14])))
        sign = v["sign"]
        with m.If(v["nan"]):
            m.d.comb += self.o.eq(F32_QNAN)
        with m.Elif(v["inf"]):
            m.d.comb += self.o.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
        with m.Elif(v["zero"] | under):
            m.d.comb += self.o.eq(Cat(Const(0, 31), sign))
        with m.Elif(over):
            m.d.comb += self.o.eq(Cat(Const(0, 23), Const(0xFF, 8), sign))
        with m.Else():
            m.d.comb += self.o.eq(Cat(frac, exp, sign))
        return m


def _leading_zeros(m: Module, value, name: str):
    """Leading-zero count of ``value`` (its width if all zero) as a balanced tree.

    The value is padded with ones on the right to a power of two; each node merges its halves
    into ``count_h`` if the high half has a one, else ``half + count_l`` (the ``half`` bit is set
    by concatenation, no adder). Depth ``log2(width)`` multiplexer levels instead of a
    ``width``-deep priority chain. A node's all-zero flag is built only where a parent selects
    on it, so no gate is left unread."""
    width = len(value)
    size = 1 << max(0, (width - 1).bit_length())
    bits = [value[i] for i in reversed(range(width))] + [1] * (size - width)   # MSB first

    def node(lo: int, n: int, need_zero: bool, tag: str):
        if n == 1:
            bit = bits[lo]
            zero = (Const(0, 1) if isinstance(bit, int) else ~bit) if need_zero else None
            return zero, Const(0, 0)
        zh, ch = node(lo, n // 2, True, tag + "h")
        zl, cl = node(lo + n // 2, n // 2, need_zero, tag + "l")
        count = Signal((n - 1).bit_length(), name=f"{name}_c{tag}")
        m.d.comb += count.eq(Mux(zh, Cat(cl, Const(1, 1)), Cat(ch, Const(0, 1))))
        zero = None
        if need_zero:
            zero = Signal(name=f"{name}_z{tag}")
            m.d.comb += zero.eq(zh & zl)
        return zero, count

    # with padding the ones below the value stop the count at `width`; without, test all-zero
    zero, count = node(0, size, size == width, "")
    lz = Signal(range(width + 1), name=name)
    m.d.comb += lz.eq(count if size > width else Mux(zero, width, count))
    return lz


def _add_specials(m: Module, a, b):
    """The special cases of ``a + b`` in priority order (NaN, infinities, zero operands): a flag
    and the result it gives, decided from the operands so that it can ride along the pipeline."""
    def unpack(x):
        e, f = x[23:31], x[0:23]
        return x[31], e == 0, (e == 0xFF) & (f == 0), (e == 0xFF) & (f != 0)

    sa, a_zero, a_inf, a_nan = unpack(a)
    sb, b_zero, b_inf, b_nan = unpack(b)
    special = Signal(name="special")
    special_value = Signal(32, name="special_value")
    m.d.comb += special.eq(1)
    with m.If(a_nan | b_nan | (a_inf & b_inf & (sa != sb))):
        m.d.comb += special_value.eq(F32_QNAN)
    with m.Elif(a_inf):
        m.d.comb += special_value.eq(Cat(Const(0, 23), Const(0xFF, 8), sa))
    with m.Elif(b_inf):
        m.d.comb += special_value.eq(Cat(Const(0, 23), Const(0xFF, 8), sb))
    with m.Elif(a_zero & b_zero):
        m.d.comb += special_value.eq(Cat(Const(0, 31), sa & sb))
    with m.Elif(b_zero):
        m.d.comb += special_value.eq(a)
    with m.Elif(a_zero):
        m.d.comb += special_value.eq(b)
    with m.Else():
        m.d.comb += special.eq(0)
    return special, special_value


class FP32Add(wiring.Component):
    """FP32 + FP32 -> FP32, round to nearest even.

    Classic guard/round/sticky datapath: operands are ordered by magnitude,
    the smaller significand is aligned right into a 27-bit field whose last
    bit is the sticky OR of everything shifted out, the 28-bit sum or
    difference is normalised (one right shift on carry, or a left shift by
    the leading-zero count after cancellation) and rounded ties-to-even.
    Cancellation by more than one bit only happens when the exponents differ
    by at most one, where the difference is exact, so three extra bits are
    enough for correct rounding. Results below ``2**-126`` are exact and are
    flushed to a zero of the result's sign; exact cancellation gives ``+0``.
    The special cases (NaN, infinities, zero operands) are resolved up front
    into a flag and a 32-bit value that ride along the pipeline.

    Parameters
    ----------
    stages : int
        Inner pipeline registers, 0 .. 6, at the cut points of :data:`ADD_CUTS`
        (``swap``: after the magnitude compare and swap; ``align``: after the alignment shift
        and sticky; ``add``: after the 28-bit add/subtract; ``lzc``: after the leading-zero
        count; ``norm``: after the normalising shift; ``round``: after the rounding increment).

    Ports
    -----
    a, b : In(32)
        FP32 operands (bit patterns).
    o : Out(32)
        FP32 sum, valid :attr:`latency` (= ``stages``) cycles after ``a``, ``b``; one
        operand pair per cycle.

    Logic depth (combinational: the critical path of the PE): 31-bit magnitude compare and
    swap, 8-bit exponent subtract, 27-bit barrel shift right (the sticky bit from a
    mask built in parallel), 28-bit add/subtract, 27-bit leading-zero count (a
    5-level tree), 27-bit barrel shift left, 24-bit rounding increment, special-case
    muxes; ``docs/synthesis.md`` has the ECP5 Fmax per stage count.
    """

    def __init__(self, *, stages: int = 0):
        _check_stages(stages, ADD_CUTS, "FP32Add")
        self._stages = stages
        super().__init__({"a": In(FP32_BITS), "b": In(FP32_BITS), "o": Out(FP32_BITS)})

    @property
    def latency(self) -> int:
        """Cycles from ``a``, ``b`` to ``o``."""
        return self._stages

    def elaborate(self, platform):
        m = Module()
        cuts = ADD_CUTS[self._stages]

        sa, ea, fa = self.a[31], self.a[23:31], self.a[0:23]
        sb, eb, fb = self.b[31], self.b[23:31], self.b[0:23]
        special, special_value = _add_specials(m, self.a, self.b)

        # order by magnitude (exponent, fraction): x is the larger one
        swap = Signal(name="swap")
        m.d.comb += swap.eq(Cat(fb, eb) > Cat(fa, ea))
        sx, ex, fx = Signal(name="sx"), Signal(8, name="ex"), Signal(23, name="fx")
        sy, fy = Signal(name="sy"), Signal(23, name="fy")
        m.d.comb += [
            sx.eq(Mux(swap, sb, sa)), ex.eq(Mux(swap, eb, ea)), fx.eq(Mux(swap, fb, fa)),
            sy.eq(Mux(swap, sa, sb)), fy.eq(Mux(swap, fa, fb)),
        ]
        # the alignment shift of both orders in parallel with the compare, then picked by it
        shifts = []
        for tag, (e_hi, e_lo) in (("ab", (ea, eb)), ("ba", (eb, ea))):
            diff = Signal(9, name=f"exp_diff_{tag}")
            m.d.comb += diff.eq(e_hi - e_lo)
            clamped = Signal(range(28), name=f"align_shift_{tag}")
            m.d.comb += clamped.eq(Mux(diff > 27, 27, diff[:5]))
            shifts.append(clamped)
        shamt = Signal(range(28), name="align_shift")
        m.d.comb += shamt.eq(Mux(swap, shifts[1], shifts[0]))
        v = _stage(m, cuts, "swap", special=special, special_value=special_value, sx=sx, ex=ex,
                   subtract=sx ^ sy, fx=fx, fy=fy, shamt=shamt)

        # significands with hidden bit and three extra bits (guard, round, sticky)
        mx = Cat(Const(0, 3), v["fx"], Const(1, 1))
        my = Signal(27, name="my")
        m.d.comb += my.eq(Cat(Const(0, 3), v["fy"], Const(1, 1)))
        my_shifted = Signal(27, name="my_shifted")
        sticky = Signal(name="align_sticky")
        # sticky: a bit below the shift amount is set (mask in parallel with the shifter)
        shifted_out = Signal(27, name="align_mask")
        m.d.comb += [
            my_shifted.eq(my >> v["shamt"]),
            shifted_out.eq(~(Const((1 << 27) - 1, 27) << v["shamt"])[0:27]),
            sticky.eq((my & shifted_out) != 0),
        ]
        my_aligned = Signal(27, name="my_aligned")
        m.d.comb += my_aligned.eq(my_shifted | sticky)
        v = _stage(m, cuts, "align", special=v["special"], special_value=v["special_value"], sx=v["sx"],
                   ex=v["ex"], subtract=v["subtract"], mx=mx, my=my_aligned)

        raw = Signal(28, name="raw_sum")
        m.d.comb += raw.eq(Mux(v["subtract"], v["mx"] - v["my"], v["mx"] + v["my"]))
        v = _stage(m, cuts, "add", special=v["special"], special_value=v["special_value"], sx=v["sx"],
                   ex=v["ex"], raw=raw)

        lz = _leading_zeros(m, v["raw"][0:27], "lzc")
        v = _stage(m, cuts, "lzc", special=v["special"], special_value=v["special_value"], sx=v["sx"],
                   ex=v["ex"], raw=v["raw"], lz=lz)

        # normalise to a 27-bit value with the leading one at bit 26
        raw = v["raw"]
        norm = Signal(27, name="norm")
        norm_exp = Signal(range(-32, 512), name="norm_exp")
        with m.If(raw[27]):
            m.d.comb += [norm.eq(Cat(raw[1] | raw[0], raw[2:28])), norm_exp.eq(v["ex"] + 1)]
        with m.Else():
            m.d.comb += [norm.eq((raw[0:27] << v["lz"])[0:27]), norm_exp.eq(v["ex"] - v["lz"])]
        cancel = Signal(name="cancel")
        m.d.comb += cancel.eq(raw == 0)
        # the result exponent without and with a rounding carry, and its range checks
        norm_exp1 = Signal(range(-32, 512), name="norm_exp1")
        m.d.comb += norm_exp1.eq(norm_exp + 1)
        v = _stage(m, cuts, "norm", special=v["special"], special_value=v["special_value"], sx=v["sx"],
                   cancel=cancel, norm=norm, exp0=norm_exp[:8], exp1=norm_exp1[:8], under0=norm_exp <= 0,
                   under1=norm_exp1 <= 0, over0=norm_exp >= 0xFF, over1=norm_exp1 >= 0xFF)

        # round to nearest, ties to even
        norm = v["norm"]
        lsb, guard, rnd, stk = norm[3], norm[2], norm[1], norm[0]
        round_up = Signal(name="round_up")
        m.d.comb += round_up.eq(guard & (rnd | stk | lsb))
        rounded = Signal(25, name="rounded")  # 1.f plus a possible carry out
        m.d.comb += rounded.eq(norm[3:27] + round_up)
        carry = rounded[24]
        res_frac = Signal(23, name="res_frac")
        m.d.comb += res_frac.eq(Mux(carry, rounded[1:24], rounded[0:23]))
        v = _stage(m, cuts, "round", special=v["special"], special_value=v["special_value"], sx=v["sx"],
                   cancel=v["cancel"], res_frac=res_frac, res_exp=Mux(carry, v["exp1"], v["exp0"]),
                   under=Mux(carry, v["under1"], v["under0"]), over=Mux(carry, v["over1"], v["over0"]))

        sx = v["sx"]
        with m.If(v["special"]):
            m.d.comb += self.o.eq(v["special_value"])
        with m.Elif(v["cancel"]):
            m.d.comb += self.o.eq(0)  # exact cancellation is +0 under RNE
        with m.Elif(v["under"]):
            m.d.comb += self.o.eq(Cat(Const(0, 31), sx))  # FTZ keeps the sign
        with m.Elif(v["over"]):
            m.d.comb += self.o.eq(Cat(Const(0, 23), Const(0xFF, 8), sx))
        with m.Else():
            m.d.comb += self.o.eq(Cat(v["res_frac"], v["res_exp"], sx))
        return m


class FP32ToBF16(wiring.Component):
    """FP32 -> bfloat16, round to nearest even, combinational.

    Subnormal inputs are flushed to signed zero first; NaN gives ``0x7FC0``;
    rounding past the largest finite value carries into the exponent and gives
    infinity, as IEEE.

    Ports
    -----
    a : In(32)
        FP32 operand (bit pattern).
    o : Out(16)
        bfloat16 result, valid in the same cycle (no registers).

    Logic depth: a 16-bit compare with ``0x8000`` and a 15-bit increment.
    """

    def __init__(self):
        super().__init__({"a": In(FP32_BITS), "o": Out(BF16_BITS)})

    def elaborate(self, platform):
        m = Module()
        e, f = self.a[23:31], self.a[0:23]
        upper, lower = self.a[16:32], self.a[0:16]
        round_up = Signal(name="round_up")
        m.d.comb += round_up.eq((lower > 0x8000) | ((lower == 0x8000) & upper[0]))
        rounded = Signal(15, name="rounded")  # magnitude; a carry into the exponent is intended
        m.d.comb += rounded.eq(upper[0:15] + round_up)
        with m.If((e == 0xFF) & (f != 0)):
            m.d.comb += self.o.eq(BF16_QNAN)
        with m.Elif(e == 0xFF):
            m.d.comb += self.o.eq(upper)
        with m.Elif(e == 0):
            m.d.comb += self.o.eq(Cat(Const(0, 15), self.a[31]))
        with m.Else():
            m.d.comb += self.o.eq(Cat(rounded, self.a[31]))
        return m
