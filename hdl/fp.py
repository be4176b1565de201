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

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.design.config import BF16_BITS, FP32_BITS

from hdl.pipe import stage
from hdl.share import shared_instance

__all__ = ["BF16Mul", "FP32Add", "FP32ToBF16", "F32_QNAN", "BF16_QNAN", "ADD_CUTS", "MUL_CUTS"]

#: canonical quiet NaN of FP32
F32_QNAN = 0x7FC00000
#: canonical quiet NaN of bfloat16
BF16_QNAN = 0x7FC0

#: cut points of :class:`FP32Add` in datapath order
ADD_CUT_NAMES = ("compare", "align", "add", "lzc", "norm", "round")
#: ``stages`` -> the cut points that get a register (balanced by logic depth: the alignment
#: shift, the 28-bit add, the leading-zero count and normalising shift, the rounding increment)
ADD_CUTS = {0: (), 1: ("add",), 2: ("align", "lzc"), 3: ("align", "lzc", "norm"),
            4: ("align", "add", "lzc", "norm"), 5: ("compare", "align", "add", "lzc", "norm"),
            6: ADD_CUT_NAMES}
#: ``stages`` -> cut points of :class:`BF16Mul` (``sums``: two partial sums of the LUT multiplier;
#: ``product``: the 16-bit significand product and the exponent)
MUL_CUTS = {0: (), 1: ("sums",), 2: ("sums", "product")}


def _check_stages(stages, table, block):
    if not isinstance(stages, int) or isinstance(stages, bool):
        raise TypeError(f"{block}: stages must be an integer, not {stages!r}")
    if stages not in table:
        raise ValueError(f"{block}: stages must be between 0 and {max(table)}, not {stages!r}")


def _ge_const(x, c: int):
    """``x >= c`` for an unsigned value ``x`` and a constant ``c`` as AND/OR logic (MSB first),
    not a subtractor: a compare against a constant needs no carry chain, so it does not add one
    behind the adder that computes ``x``."""
    n = len(x)
    if c <= 0:
        return Const(1, 1)
    if c >= 1 << n:
        return Const(0, 1)
    rest = _ge_const(x[:n - 1], c & ((1 << (n - 1)) - 1))
    return x[n - 1] & rest if c >> (n - 1) else x[n - 1] | rest


def _le_const(x, c: int):
    """``x <= c`` for an unsigned value ``x`` and a constant ``c`` (:func:`_ge_const`)."""
    return ~_ge_const(x, c + 1)


def _product_sums(m: Module, ma, mb):
    """The 8x8 significand product ``ma * mb`` in LUTs and carry chains up to two partial sums
    ``sum0 + (sum1 << 4)``: four radix-4 rows ``ma * mb[2j:2j+2]``, each a 4:1 multiplexer of
    ``0, ma, 2 ma, 3 ma`` (``3 ma`` one 9-bit carry chain on ``ma``, beside the selects), added in
    pairs (two 10-bit carry chains). Every add starts its chain at the first bit where both
    operands can be non-zero: the bits below are the lower operand's, wired past the chain rather
    than left to synthesis (one logic level fewer in the PE's first multiplier stage on the ECP5)."""
    ma3 = Signal(10, name="ma3")   # bit 0 is ma's: the carry chain starts at bit 1
    m.d.comb += ma3.eq(Cat(ma[0], ma[1:] + ma))
    rows = []
    for j in range(4):
        lo, hi = mb[2 * j], mb[2 * j + 1]
        row = Signal(10, name=f"row{j}")
        m.d.comb += row.eq(Mux(hi, Mux(lo, ma3, ma << 1), Mux(lo, ma, 0)))
        rows.append(row)
    sums = {}
    for k in range(2):
        total = Signal(12, name=f"sum{k}")   # the low two bits are the lower row's
        m.d.comb += total.eq(Cat(rows[2 * k][:2], rows[2 * k][2:] + rows[2 * k + 1]))
        sums[f"sum{k}"] = total
    return sums


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
        Inner pipeline registers, 0 .. 2, at the cut points of :data:`MUL_CUTS` (``sums``: after
        the radix-4 rows and their pairwise sums, with the exponent sum, the sign and the operand
        classes; ``product``: after the last add of the significand product, with the exponents
        and range checks of both normalisations and the special-case flags). Combinational
        (``stages`` = 0), the 8x8 significand product is a ``*`` that Yosys maps to one ECP5
        ``MULT18X18D``; pipelined, it is built in LUTs and carry chains (:func:`_product_sums`):
        the DSP's combinational delay (~4 ns plus the route to the DSP row) would bound a stage
        near 115 MHz.

    Ports
    -----
    a, b : In(16)
        bfloat16 operands (bit patterns).
    o : Out(32)
        FP32 product, valid :attr:`latency` (= ``stages``) cycles after ``a``, ``b``; one
        operand pair per cycle.

    Logic depth: one 8x8 unsigned multiplier (pipelined: a 9-bit, a 10-bit and a 12-bit carry
    chain behind the radix-4 row multiplexers) in parallel with a 9-bit exponent adder, then a
    1-bit normalisation mux and the special-case masks.
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
        if (shared := shared_instance(platform, self, BF16Mul, stages=self._stages)) is not None:
            return shared
        m = Module()
        cuts = MUL_CUTS[self._stages]
        sa, ea, fa = self.a[15], self.a[7:15], self.a[0:7]
        sb, eb, fb = self.b[15], self.b[7:15], self.b[0:7]
        # operand classes (DAZ: exponent 0 means zero whatever the fraction says); the special
        # flags are decided from them after the first cut, beside the last product add
        classes = {"a_emax": ea == 0xFF, "a_frac": fa != 0, "a_zero": ea == 0,
                   "b_emax": eb == 0xFF, "b_frac": fb != 0, "b_zero": eb == 0}
        # sum of the biased exponents (one 9-bit carry chain); the result exponent is
        # esum - 127 (product in [1, 2)) or esum - 126 (in [2, 4))
        esum = Signal(9, name="esum")
        m.d.comb += esum.eq(ea + eb)
        v = {"sign": sa ^ sb, "esum": esum, **classes}
        prod = Signal(16, name="prod")  # 1.fa * 1.fb in [1, 4), 14 fraction bits
        ma, mb = Cat(fa, Const(1, 1)), Cat(fb, Const(1, 1))
        if not cuts:
            m.d.comb += prod.eq(ma * mb)  # the ECP5 maps it to a DSP (MULT18X18D), combinationally
        else:
            v = stage(m, cuts, "sums", **v, **_product_sums(m, ma, mb))
            m.d.comb += prod.eq(Cat(v["sum0"][:4], v["sum0"][4:] + v["sum1"]))   # the low four bits are sum0's
        a_inf, b_inf = v["a_emax"] & ~v["a_frac"], v["b_emax"] & ~v["b_frac"]
        a_nan, b_nan = v["a_emax"] & v["a_frac"], v["b_emax"] & v["b_frac"]
        nan, inf, zero = Signal(name="nan"), Signal(name="inf"), Signal(name="zero")
        m.d.comb += [nan.eq(a_nan | b_nan | (v["a_zero"] & b_inf) | (a_inf & v["b_zero"])),
                     inf.eq(a_inf | b_inf), zero.eq(v["a_zero"] | v["b_zero"])]
        # the exponents for both normalisations from esum in parallel, their range checks
        # constant compares on esum (no chained adders)
        esum = v["esum"]
        exp0, exp1 = Signal(8, name="exp0"), Signal(8, name="exp1")
        m.d.comb += [exp0.eq(esum - 127), exp1.eq(esum - 126)]
        v = stage(m, cuts, "product", sign=v["sign"], nan=nan, inf=inf, zero=zero, prod=prod,
                   exp0=exp0, exp1=exp1, under0=_le_const(esum, 127), under1=_le_const(esum, 126),
                   over0=_ge_const(esum, 127 + 0xFF), over1=_ge_const(esum, 126 + 0xFF))

        carry = v["prod"][15]
        exp = Mux(carry, v["exp1"], v["exp0"])
        under = Mux(carry, v["under1"], v["under0"])
        over = Mux(carry, v["over1"], v["over0"])
        frac = Signal(23, name="frac")
        m.d.comb += frac.eq(Mux(carry, Cat(Const(0, 8), v["prod"][0:15]), Cat(Const(0, 9), v["prod"][0:14])))
        # the special cases (NaN, then infinity, then zero or underflow, then overflow) as AND / OR
        # masks rather than a priority of constant words: a register behind a constant-word choice
        # becomes a flip-flop with a synchronous reset, whose slice-wide reset net the FPGA router
        # then has to reach (the CE's M3S7 path ended on it)
        nan, inf = v["nan"], v["inf"]
        flush = ~nan & ~inf & (v["zero"] | under)          # +-0
        ones = nan | inf | (~flush & over)                # exponent all ones
        normal = ~nan & ~inf & ~flush & ~over
        m.d.comb += self.o.eq(Cat(
            (frac & normal.replicate(23)) | Cat(Const(0, 22), nan),  # the quiet NaN's fraction bit
            (exp & normal.replicate(8)) | ones.replicate(8),
            v["sign"] & ~nan))
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


def _add_classes(a, b):
    """Per operand: sign, exponent all ones, fraction non-zero, exponent zero (a zero, DAZ)."""
    out = {}
    for tag, x in (("a", a), ("b", b)):
        e, f = x[23:31], x[0:23]
        out.update({f"{tag}_sign": x[31], f"{tag}_emax": e == 0xFF, f"{tag}_frac": f != 0, f"{tag}_zero": e == 0})
    return out


def _add_specials(m: Module, c):
    """The special cases of ``a + b`` that the datapath does not give, from the operand classes
    ``c`` (:func:`_add_classes`), as four flags that ride along the pipeline: ``special``, and
    with it ``nan`` (the canonical NaN), else ``inf`` (an infinity of sign ``sign``), else a zero
    of sign ``sign`` (both operands zero). One zero operand is no special case: the datapath
    shifts the smaller operand's significand out entirely and returns the larger operand
    unchanged."""
    sa, sb = c["a_sign"], c["b_sign"]
    a_inf, b_inf = c["a_emax"] & ~c["a_frac"], c["b_emax"] & ~c["b_frac"]
    a_nan, b_nan = c["a_emax"] & c["a_frac"], c["b_emax"] & c["b_frac"]
    nan, inf, sign = Signal(name="special_nan"), Signal(name="special_inf"), Signal(name="special_sign")
    special = Signal(name="special")
    m.d.comb += [nan.eq(a_nan | b_nan | (a_inf & b_inf & (sa != sb))), inf.eq(a_inf | b_inf),
                 sign.eq(Mux(a_inf, sa, Mux(b_inf, sb, sa & sb))),
                 special.eq(c["a_emax"] | c["b_emax"] | (c["a_zero"] & c["b_zero"]))]
    return {"special": special, "special_nan": nan, "special_inf": inf, "special_sign": sign}


def _specials(v):
    """The special-case flags of stage values ``v`` (:func:`_add_specials`), to pass on."""
    return {k: v[k] for k in ("special", "special_nan", "special_inf", "special_sign")}


def _add_compare(m: Module, cuts, a, b):
    """Stage ``compare``: the operand classes and, from the exponents alone (two 9-bit
    subtractions), the larger exponent, the alignment shift and the operand order: the significand
    of the operand with the larger exponent is ``fx``, the other one ``fy``. With equal exponents
    the order can be wrong (``fy > fx``); the align stage finds that from ``fx`` and ``fy`` (the
    shift is 0 then) and the add stage subtracts the other way round (``reverse``), so no
    magnitude compare of the whole operands sits behind the PE's addend multiplexer."""
    ea, fa = a[23:31], a[0:23]
    eb, fb = b[23:31], b[0:23]
    classes = _add_classes(a, b)
    diffs = []
    for tag, (e_hi, e_lo) in (("ab", (ea, eb)), ("ba", (eb, ea))):
        diff = Signal(9, name=f"exp_diff_{tag}")
        m.d.comb += diff.eq(e_hi - e_lo)
        diffs.append(diff)
    b_larger = Signal(name="b_larger")  # eb > ea: the subtraction ea - eb borrowed
    m.d.comb += b_larger.eq(diffs[0][8])
    # the shift amount |ea - eb| (no clamp: any amount >= 27 shifts everything out)
    shamt = Signal(8, name="align_shift")
    m.d.comb += shamt.eq(Mux(b_larger, diffs[1][:8], diffs[0][:8]))
    ex, fx, fy = Signal(8, name="ex"), Signal(23, name="fx"), Signal(23, name="fy")
    m.d.comb += [ex.eq(Mux(b_larger, eb, ea)), fx.eq(Mux(b_larger, fb, fa)), fy.eq(Mux(b_larger, fa, fb))]
    return stage(m, cuts, "compare", **classes, b_larger=b_larger, fx=fx, fy=fy, ex=ex, shamt=shamt)


def _add_align(m: Module, cuts, v):
    """Stage ``align``: the 27-bit alignment shift of ``fy`` (hidden bit and three extra bits) and
    its sticky bit (a multiplexer on the shift amount over prefix ORs of ``fy``, in parallel with
    the shifter); beside them the larger exponent plus one, the operand order at equal exponents
    (``reverse``: a 23-bit compare of ``fy`` and ``fx``) and the special-case flags."""
    my = Signal(27, name="my")
    m.d.comb += my.eq(Cat(Const(0, 3), v["fy"], Const(1, 1)))
    # a zero operand (exponent 0, DAZ) is the smaller one (both zero is a special case) and adds
    # nothing: it is shifted out entirely, without a sticky bit
    y_zero = v["a_zero"] | v["b_zero"]
    my_shifted = Signal(27, name="my_shifted")
    # below[k]: a one among my's k lowest bits (the bits a shift by k drops), from fy alone, so
    # the sticky bit is one multiplexer level set behind the shift amount, like the shifter's
    below = Signal(32, name="align_below")
    m.d.comb += below.eq(Cat(Const(0, 4), *(v["fy"][:k - 3].any() for k in range(4, 27)), Const(0b11111, 5)))
    sticky = Signal(name="align_sticky")
    m.d.comb += [
        my_shifted.eq(Mux(y_zero, 0, my >> v["shamt"])),
        sticky.eq((v["shamt"][5:8].any() | below.bit_select(v["shamt"][0:5], 1)) & ~y_zero),
    ]
    # the exponent of a carry out of the add; the normalisation works from it
    e1 = Signal(8, name="ex_plus1")  # wraps only for ex = 255, a special case
    m.d.comb += e1.eq(v["ex"] + 1)
    # equal exponents (shift 0: then fx is a's significand, fy b's) and b's significand larger
    reverse = Signal(name="reverse")
    m.d.comb += reverse.eq((v["shamt"] == 0) & (v["fy"] > v["fx"]))
    return stage(m, cuts, "align", **_add_specials(m, v), ex=v["ex"], e1=e1, reverse=reverse,
                  a_sign=v["a_sign"], b_sign=v["b_sign"], b_larger=v["b_larger"],
                  subtract=v["a_sign"] ^ v["b_sign"], fx=v["fx"], my=my_shifted, sticky=sticky)


def _add_sum(m: Module, cuts, v):
    """Stages ``add`` (the 28-bit add or subtract: one carry chain; a subtraction inverts one
    operand, ``fy`` if not ``reverse``, and sets the carry-in; beside it the sign of the operand
    with the larger magnitude) and ``lzc`` (the leading-zero count of
    the sum, the exact cancellation flag)."""
    sub, rev = v["subtract"], v["reverse"]
    sx = Signal(name="sx")  # the sign of the operand with the larger magnitude
    m.d.comb += sx.eq(Mux(v["b_larger"] | rev, v["b_sign"], v["a_sign"]))
    mx = Cat(Const(0, 3), v["fx"], Const(1, 1), Const(0, 1))
    my = Cat(v["my"][0] | v["sticky"], v["my"][1:27], Const(0, 1))
    raw = Signal(28, name="raw_sum")  # the larger magnitude minus the smaller: no wrap
    m.d.comb += raw.eq((mx ^ (sub & rev).replicate(28)) + (my ^ (sub & ~rev).replicate(28)) + sub)
    v = stage(m, cuts, "add", **_specials(v), sx=sx, ex=v["ex"], e1=v["e1"], raw=raw)
    lz = _leading_zeros(m, v["raw"][0:27], "lzc")
    cancel = Signal(name="cancel")
    m.d.comb += cancel.eq(v["raw"] == 0)
    return stage(m, cuts, "lzc", **_specials(v), sx=v["sx"], cancel=cancel, ex=v["ex"], e1=v["e1"], raw=v["raw"],
                  lz=lz)


def _add_normalise(m: Module, cuts, v):
    """Stage ``norm``: the normalising shift (one right on a carry out, else left by the
    leading-zero count) and the result exponent without (``exp0``) and with (``exp1``) a rounding
    carry: ``ex + 1`` and ``ex + 2`` after a carry out, else ``ex - lz`` and ``ex + 1 - lz``, each one
    carry chain from the stage's inputs (``ex`` and ``e1 = ex + 1`` come from the align stage). The
    range checks compare the inputs directly (``ex - lz <= 0`` is ``ex <= lz``), so no check waits
    for a subtraction."""
    raw, ex, e1, lz = v["raw"], v["ex"], v["e1"], v["lz"]
    carry_out = raw[27]
    norm = Signal(27, name="norm")  # the leading one at bit 26
    m.d.comb += norm.eq(Mux(carry_out, Cat(raw[1] | raw[0], raw[2:28]), (raw[0:27] << lz)[0:27]))
    dec0, dec1, inc1 = Signal(8, name="norm_dec0"), Signal(8, name="norm_dec1"), Signal(8, name="norm_inc1")
    m.d.comb += [dec0.eq(ex - lz), dec1.eq(e1 - lz), inc1.eq(e1 + 1)]
    under0, under1 = Signal(name="norm_under0"), Signal(name="norm_under1")
    m.d.comb += [under0.eq(ex <= lz), under1.eq(ex < lz)]
    lz0, lz1 = lz == 0, lz == 1
    return stage(m, cuts, "norm", **_specials(v), sx=v["sx"], cancel=v["cancel"], norm=norm,
                  exp0=Mux(carry_out, e1, dec0), exp1=Mux(carry_out, inc1, dec1),
                  under0=~carry_out & under0, under1=~carry_out & under1,
                  over0=Mux(carry_out, _ge_const(ex, 0xFE), lz0 & (ex == 0xFF)),
                  over1=Mux(carry_out, _ge_const(ex, 0xFD), (lz0 & _ge_const(ex, 0xFE)) | (lz1 & (ex == 0xFF))))


def _add_round(m: Module, cuts, v):
    """Stage ``round``: round to nearest, ties to even (a 23-bit increment of the fraction), then the
    result: NaN, the other special results, exact cancellation (``+0``), flush to zero, overflow, or
    the rounded number. The result is chosen before the stage's register, so the adder's output is a
    register when ``round`` is a cut (no decode fans out after it into the adder's consumers), and
    the choice adds one LUT after the increment: a carry out of the significand leaves a zero
    fraction, so only the exponent depends on it, chosen between the two exponent fields decided
    beforehand (with and without the carry: their flush and overflow checks, the special results);
    the carry is an AND of the significand's bits beside the increment."""
    norm = v["norm"]
    lsb, guard, rnd, stk = norm[3], norm[2], norm[1], norm[0]
    round_up = Signal(name="round_up")
    m.d.comb += round_up.eq(guard & (rnd | stk | lsb))
    rounded = Signal(23, name="rounded")  # the fraction after rounding (0 after a carry out)
    m.d.comb += rounded.eq(norm[3:26] + round_up)
    carry = Signal(name="round_carry")
    m.d.comb += carry.eq(round_up & norm[3:27].all())
    sp, cancel, sx = v["special"], v["cancel"], v["sx"]
    nan, sp_other = Signal(name="round_nan"), Signal(name="round_sp")
    m.d.comb += [nan.eq(sp & v["special_nan"]), sp_other.eq(sp & ~v["special_nan"])]
    exps = []
    for c in (0, 1):     # the exponent field without / with the rounding carry
        under, over = v[f"under{c}"], v[f"over{c}"]
        normal, big = Signal(name=f"round_normal{c}"), Signal(name=f"round_big{c}")
        field = Signal(8, name=f"round_exp{c}")
        m.d.comb += [normal.eq(~(sp | cancel | under | over)),
                     # 0xFF: NaN, a special infinity, an overflow
                     big.eq(nan | (sp_other & v["special_inf"]) | (~sp & ~cancel & ~under & over)),
                     field.eq((v[f"exp{c}"] & normal.replicate(8)) | big.replicate(8))]
        exps.append(field)
    keep = Signal(name="round_keep")      # the rounded fraction is the result's (without a carry)
    m.d.comb += keep.eq(~(sp | cancel | v["under0"] | v["over0"]))
    res = Signal(FP32_BITS, name="result")
    # one 32-bit OR at the top (the NaN's quiet bit), so the output is one value, not three port slices
    m.d.comb += res.eq(Cat(rounded & keep.replicate(23), Mux(carry, exps[1], exps[0]),
                           Mux(sp_other, v["special_sign"], ~sp & ~cancel & sx)) | Cat(Const(0, 22), nan))
    return stage(m, cuts, "round", res=res)


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
    The special cases (NaN, infinities, both operands zero) are resolved up front
    into four flags that ride along the pipeline; one zero operand (DAZ) goes
    through the datapath, shifted out entirely, so the other operand is the sum.

    Parameters
    ----------
    stages : int
        Inner pipeline registers, 0 .. 6, at the cut points of :data:`ADD_CUTS`
        (``compare``: after the exponent difference, the operand order by exponent and the
        operand classes; ``align``: after the alignment shift and sticky;
        ``add``: after the 28-bit add/subtract; ``lzc``: after the leading-zero count; ``norm``:
        after the normalising shift and the exponent; ``round``: after the rounding increment and
        the result's choice, so at six stages ``o`` is a register).

    Ports
    -----
    a, b : In(32)
        FP32 operands (bit patterns).
    o : Out(32)
        FP32 sum, valid :attr:`latency` (= ``stages``) cycles after ``a``, ``b``; one
        operand pair per cycle.

    Logic depth (combinational: the critical path of the PE): 9-bit exponent subtractions and
    the order multiplexers, 27-bit barrel shift right (beside it the sticky bit, a 32:1
    multiplexer on the shift amount over prefix ORs of the fraction, and the 23-bit significand
    compare at equal exponents), 28-bit add/subtract,
    27-bit leading-zero count (a 5-level tree), 27-bit barrel shift left (beside it the 8-bit
    exponent subtractions and compares), 23-bit rounding increment with the result's choice one
    LUT behind it; ``docs/synthesis.md`` has the ECP5 Fmax per stage count.
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
        if (shared := shared_instance(platform, self, FP32Add, stages=self._stages)) is not None:
            return shared
        m = Module()
        cuts = ADD_CUTS[self._stages]
        v = _add_compare(m, cuts, self.a, self.b)
        v = _add_align(m, cuts, v)
        v = _add_sum(m, cuts, v)
        v = _add_normalise(m, cuts, v)
        v = _add_round(m, cuts, v)
        m.d.comb += self.o.eq(v["res"])
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
        if (shared := shared_instance(platform, self, FP32ToBF16)) is not None:
            return shared
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
