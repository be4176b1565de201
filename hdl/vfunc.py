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
and exponent sum into the registers ``a_*`` (``M`` of each, named ``a_<v><lane>_d<n>``); with
``M >= 2`` the first of them is the cut ``a_cmp`` (``a_cmp_<value><lane>``) after the compares, the
exponents and the product, before the operations' result multiplexers;
the RECIP / RSQRT ROMs are read synchronously, their address (``x``'s fraction) delayed ``M - 1``
cycles, so their data arrives with ``p1``. Stage B (from ``a_*``, the ROM data and ``p``) rounds MUL,
computes EXP and merges the ROM fractions; its ``S - 1`` registers sit at the cut points of
:data:`FUNC_CUTS` first (named ``<cut>_<value><lane>``: ``b_part`` after the two partial products
of EXP's ``log2(e)`` product and MUL's normalisation, ``b_scale`` after their sum, ``b_shift`` after
EXP's shift (its rounding is one carry chain with the sign after it; its saturation is decided on
``p`` itself: :data:`~gen.design.vtables.EXP_SAT_MP`) and MUL's rounding, ``b_sign`` after EXP's
rounding and sign and MUL's exponent and special cases, ``b_rom`` after EXP's ROM read, ``b_interp``
after its interpolation product, EXP's special results and the result multiplexer's one-hot selects
``b_interp_sel_<result>``), the rest at the end (``b_o<lane>_d<n>``).
``o`` is valid **M + S - 1 cycles** after ``x`` / ``y`` / ``op`` (``p``: ``S - 1`` cycles after it),
one operand set per cycle; results do not depend on ``M``, ``S``.

Logic depth: stage A, a 24 x 8-bit multiplier (MUL; two 12 x 8-bit halves before the cut
``a_cmp``, added after it) beside a 15-bit compare (MAX) and, after it or after the cut ``a_cmp``,
the result multiplexers; stage B without cuts (``S = 1``), for EXP, a 16 x 29-bit constant
multiplier, a 45-bit shifter, a 26-bit add (rounding and sign), the ROM and a 17 x 11-bit multiplier
with its 24-bit add (the unit's longest path with EXP in use); with four or more registers in stage
B (``S >= 5``) each piece is one carry chain or multiplier, with five (``S >= 6``) the ROM read and
the product after it are apart, and with six (``S = 7``) the ``log2(e)`` product's two halves and
their sum (measured Fmax: ``docs/synthesis.md``).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.design.isa import VecOp
from gen.design.vtables import (EXP_F_BITS, EXP_INDEX_BITS, EXP_R_BITS, EXP_ROM, EXP_SAT_E, EXP_SAT_MP, EXP_SHIFT,
                                EXP_T_BITS, LOG2E_FIXED, RECIP_ROM, RSQRT_ROM)

from hdl.fp import F32_QNAN
from hdl.pipe import decode, delay, stage

__all__ = ["VectorFunc", "FUNC_OPS", "FUNC_CUTS"]

#: the operations :class:`VectorFunc` computes
FUNC_OPS = (VecOp.MUL, VecOp.MAX, VecOp.EXP, VecOp.RECIP, VecOp.RSQRT)
#: stage B's cut points in datapath order
FUNC_CUT_NAMES = ("b_part", "b_scale", "b_shift", "b_sign", "b_rom", "b_interp")
#: registers in stage B (``add_latency - 1``) -> the cut points that get one (balanced by logic
#: depth); registers beyond six go after the result mux
FUNC_CUTS = {0: (), 1: ("b_shift",), 2: ("b_scale", "b_sign"), 3: ("b_scale", "b_shift", "b_interp"),
             4: ("b_scale", "b_shift", "b_sign", "b_interp"), 5: FUNC_CUT_NAMES[1:], 6: FUNC_CUT_NAMES}

_INF = 0x7F800000
_ONE = 0x3F800000
#: EXP's ``log2(e)`` product as two partial products (``b_part``): the constant's low bits and the rest
_LOG2E_SPLIT = 15
_LOG2E_LO, _LOG2E_HI = LOG2E_FIXED & ((1 << _LOG2E_SPLIT) - 1), LOG2E_FIXED >> _LOG2E_SPLIT


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
        cuts = FUNC_CUTS[min(S - 1, len(FUNC_CUT_NAMES))]
        a_cuts = ("a_cmp",) if M >= 2 else ()
        a_op = stage(m, a_cuts, "a_cmp", op=self.op)["op"]
        ops = {"p1": delay(m, a_op, M - len(a_cuts), "b_op")}
        for cut in FUNC_CUT_NAMES[:-1]:     # the operation code at every cut point, shared by the lanes
            ops[cut] = stage(m, cuts, cut, op=ops[list(ops)[-1]])["op"]
        # the result multiplexer's one-hot selects, decoded before the last cut
        sel = decode(m, ops[FUNC_CUT_NAMES[-2]], {"mul": (VecOp.MUL,), "exp": (VecOp.EXP,),
                                                  "word": (VecOp.MAX, VecOp.RECIP, VecOp.RSQRT)}, "b_dec_")
        sel = stage(m, cuts, FUNC_CUT_NAMES[-1], **{f"sel_{k}": v for k, v in sel.items()})
        # stage A's one-hot operation flags, decoded once before the cut a_cmp, which registers them per lane
        a_sel = decode(m, self.op, {"mul": (VecOp.MUL,), "max": (VecOp.MAX,), "recip": (VecOp.RECIP,),
                                    "rsqrt": (VecOp.RSQRT,)}, "a_dec_")
        for i in range(self.lanes):
            x, y = self.x[16 * i:16 * (i + 1)], self.y[32 * i:32 * (i + 1)]
            a = self._stage_a(m, x, y, a_sel, a_cuts, i)
            rd = {}
            for name, addr in (("recip", x[0:7]), ("rsqrt", x[0:8])):
                port = roms[name].read_port()            # synchronous: the data arrives with p1
                m.d.comb += port.addr.eq(delay(m, addr, M - 1, f"a_{name}_addr{i}"))
                rd[name] = port.data
            frac = Mux(ops["p1"] == VecOp.RECIP, rd["recip"], rd["rsqrt"])
            word = Signal(32, name=f"b_word{i}")        # MAX, RECIP and RSQRT's result, MUL's special one
            m.d.comb += word.eq(a["word"] | Mux(a["rom"], frac, 0))
            v = self._stage_b(m, cuts, a, word, self.p[32 * i:32 * (i + 1)], roms["exp"].read_port(domain="comb"), i)
            res = Signal(32, name=f"b_res{i}")
            m.d.comb += res.eq(Mux(sel["sel_mul"], Mux(v["spec"], v["word"], v["mul"]), 0)
                               | Mux(sel["sel_exp"], v["exp"], 0) | Mux(sel["sel_word"], v["word"], 0))
            m.d.comb += self.o[32 * i:32 * (i + 1)].eq(delay(m, res, S - 1 - len(cuts), f"b_o{i}"))
        return m

    @staticmethod
    def _stage_b(m: Module, cuts, a: dict, word, p, port, i: int) -> dict:
        """Stage B of lane ``i`` through the cut points in ``cuts``: ``word`` / ``spec`` (kept),
        ``mul`` (MUL's rounded product), ``exp`` (EXP of ``p``; ``port``: a combinational read port
        of the ``2**f`` ROM)."""
        keep = {"word": word, "spec": a["spec"]}
        s, e, frac = p[31], p[23:31], p[0:23]
        # saturation (|u| >= 128) from p itself: its exponent, and at EXP_SAT_E its significand
        sat = (e > EXP_SAT_E) | ((e == EXP_SAT_E) & (frac[8:23] >= EXP_SAT_MP - (1 << 15)))
        exp_flags = {"nan": (e == 0xFF) & (frac != 0), "sat": sat, "zero": e == 0, "s": s}
        sig = Cat(frac[8:23], Const(1, 1))
        part_lo = Signal(16 + _LOG2E_SPLIT, name=f"b_exp_part_lo{i}")
        part_hi = Signal(16 + _LOG2E_HI.bit_length(), name=f"b_exp_part_hi{i}")
        sh = Signal(8, name=f"b_exp_sh{i}")
        m.d.comb += [part_lo.eq(sig * _LOG2E_LO), part_hi.eq(sig * _LOG2E_HI), sh.eq(EXP_SHIFT - 1 - e)]
        v = _cut(m, cuts, "b_part", i, **keep, **exp_flags, part_lo=part_lo, part_hi=part_hi, sh=sh,
                 **_mul_norm(m, a, i))
        scaled = Signal(16 + LOG2E_FIXED.bit_length(), name=f"b_exp_scaled{i}")
        m.d.comb += scaled.eq(v["part_lo"] + (v["part_hi"] << _LOG2E_SPLIT))
        keep = {k: v[k] for k in ("word", "spec", "nan", "sat", "zero", "s", "sh", "sig", "eb", "sign")}
        v = _cut(m, cuts, "b_scale", i, **keep, scaled=scaled)
        # u's magnitude with one more fraction bit (below 2**26 unless saturated)
        ux = Signal(27, name=f"b_exp_ux{i}")
        m.d.comb += ux.eq(v["scaled"] >> v["sh"])
        exp_flags = {k: v[k] for k in ("nan", "zero", "sat", "s")}
        mul = {f"mul_{k}": x for k, x in _mul_round(m, v, i).items()}
        v = _cut(m, cuts, "b_shift", i, word=v["word"], spec=v["spec"], **exp_flags, ux=ux, **mul)
        # u = +-((ux + 1) >> 1), rounding and sign in one carry chain: with y = ux >> 1 and r = ux & 1,
        # y + r, or -(y + r) = ~y + (1 - r)
        s_all = v["s"].replicate(26)
        u = Signal(26, name=f"b_exp_u{i}")
        m.d.comb += u.eq((v["ux"][1:27] ^ s_all) + (v["ux"][0] ^ v["s"]))
        keep = {k: v[k] for k in ("word", "spec", "nan", "zero", "sat", "s")}
        keep["mul"] = _mul_pack(m, {k[4:]: x for k, x in v.items() if k.startswith("mul_")}, i)
        v = _cut(m, cuts, "b_sign", i, **keep, u=u)
        f, k = v["u"][0:EXP_F_BITS], v["u"][EXP_F_BITS:26].as_signed()
        m.d.comb += port.addr.eq(f[EXP_R_BITS:])
        be = Signal(signed(10), name=f"b_exp_be{i}")
        m.d.comb += be.eq(127 + k)
        keep = {k: v[k] for k in ("word", "spec", "mul", "nan", "zero", "sat", "s")}
        v = _cut(m, cuts, "b_rom", i, **keep, t=port.data[0:EXP_T_BITS], d=port.data[EXP_T_BITS:],
                 r=f[0:EXP_R_BITS], be=be)
        dprod = Signal(len(v["d"]) + EXP_R_BITS, name=f"b_exp_dprod{i}")
        m.d.comb += dprod.eq(v["d"] * v["r"])
        # EXP's special results are chosen before the cut, so after it only the interpolation's add
        # and one multiplexer remain
        special = Signal(32, name=f"b_exp_special{i}")
        is_special = Signal(name=f"b_exp_is_special{i}")
        m.d.comb += is_special.eq(1)
        with m.If(v["nan"]):
            m.d.comb += special.eq(F32_QNAN)
        with m.Elif(v["sat"]):
            m.d.comb += special.eq(Mux(v["s"], 0, _INF))
        with m.Elif(v["zero"]):
            m.d.comb += special.eq(_ONE)
        with m.Elif(v["be"] <= 0):
            m.d.comb += special.eq(0)
        with m.Else():
            m.d.comb += is_special.eq(0)
        keep = {k: v[k] for k in ("word", "spec", "mul")}
        v = _cut(m, cuts, "b_interp", i, **keep, t=v["t"], dprod=dprod, be=v["be"][0:8], special=special,
                 is_special=is_special)
        mant = Signal(EXP_T_BITS, name=f"b_exp_mant{i}")
        m.d.comb += mant.eq(v["t"] + (v["dprod"] >> EXP_R_BITS))
        out = Signal(32, name=f"b_exp{i}")
        m.d.comb += out.eq(Mux(v["is_special"], v["special"], Cat(mant[0:23], v["be"], Const(0, 1))))
        return {"word": v["word"], "spec": v["spec"], "mul": v["mul"], "exp": out}

    def _stage_a(self, m: Module, x, y, sel, cuts, i: int) -> dict:
        """Stage A of lane ``i``: the registers ``a_*`` (``M`` deep) of every op; with ``M >= 2`` the
        first of them is the cut ``a_cmp`` (``cuts``; ``sel``: the operation's one-hot flags, which the cut
        registers per lane).

        ``word``: MAX's result; RECIP / RSQRT's sign and exponent or special result (``rom``: or
        the ROM fraction into it); MUL's special result (``spec``). ``prod`` / ``exp`` / ``sign``:
        MUL's 32-bit significand product, the biased exponent of ``prod[30]`` as leading bit, the sign."""
        xs, xe, xf = x[15], x[7:15], x[0:7]
        ys, ye, yf = y[31], y[23:31], y[0:23]
        xc, yc = _classes(m, xs, xe, xf, f"a_x{i}"), _classes(m, ys, ye, yf, f"a_y{i}")
        # before the cut: the compares, exponents and the significand product
        xm = Mux(xc["zero"], 0, Cat(Const(0, 16), x[0:15]))          # MAX: magnitudes (DAZ), x widened
        ym = Mux(yc["zero"], 0, y[0:31])
        # |x| > |y| and |x| < |y| from a 15-bit compare of x with y's high bits (x widened has 16 zero
        # low bits): beside it the zero classes and y's low bits, not 31-bit compares after the zero masks
        hi_gt, hi_lt = Signal(name=f"a_max_hgt{i}"), Signal(name=f"a_max_hlt{i}")
        m.d.comb += [hi_gt.eq(x[0:15] > y[16:31]), hi_lt.eq(x[0:15] < y[16:31])]
        y_lo = y[0:16] != 0
        mag_gt = ~xc["zero"] & (yc["zero"] | hi_gt)
        mag_lt = ~yc["zero"] & (xc["zero"] | hi_lt | (~hi_gt & y_lo))
        x_gt = Signal(name=f"a_max_xgt{i}")
        m.d.comb += x_gt.eq(Mux(xs != ys, ys, Mux(xs, mag_lt, mag_gt)))
        rbe = Signal(signed(10), name=f"a_recip_be{i}")
        sbe = Signal(8, name=f"a_rsqrt_be{i}")
        m.d.comb += [rbe.eq(254 - xe - (xf != 0)), sbe.eq(((381 - xe) >> 1) - (xe[0] & (xf != 0)))]
        # ``rbe <= 0`` as constant compares on the exponent, not through the subtraction's carry chain
        r_small = Signal(name=f"a_recip_small{i}")
        m.d.comb += r_small.eq((xe[1:] == 0x7F) | ((xe == 0xFD) & (xf != 0)))
        # MUL's 24 x 8-bit significand product as two 12 x 8-bit halves (one DSP each), added after the cut
        ym_sig, xm_sig = Cat(yf, Const(1, 1)), Cat(xf, Const(1, 1))
        prod_lo, prod_hi = Signal(20, name=f"a_prod_lo{i}"), Signal(20, name=f"a_prod_hi{i}")
        exp = Signal(signed(11), name=f"a_exp{i}")
        m.d.comb += [prod_lo.eq(ym_sig[0:12] * xm_sig), prod_hi.eq(ym_sig[12:24] * xm_sig), exp.eq(ye + xe - 127)]
        v = _cut(m, cuts, "a_cmp", i, xs=xs, ys=ys, **{f"x{k}": b for k, b in xc.items()},
                 **{f"y{k}": b for k, b in yc.items()}, xm=xm, ym=ym, x_gt=x_gt, rbe=rbe, r_small=r_small,
                 sbe=sbe, prod_lo=prod_lo, prod_hi=prod_hi, exp=exp,
                 **{f"is_{k}": flag for k, flag in sel.items()})
        prod = Signal(32, name=f"a_prod{i}")
        m.d.comb += prod.eq(v["prod_lo"] + (v["prod_hi"] << 12))
        xc, yc = {k: v[f"x{k}"] for k in xc}, {k: v[f"y{k}"] for k in yc}
        xs = v["xs"]
        word, rom, spec = Signal(32, name=f"a_word{i}"), Signal(name=f"a_rom{i}"), Signal(name=f"a_spec{i}")
        sign_zero, sign_inf = Cat(Const(0, 31), xs), Cat(Const(_INF, 31), xs)
        # the operation as one-hot flags registered per lane with the cut (no shared decode fans out after it)
        with m.If(v["is_mul"]):
            self._mul_special(m, xc, yc, xs ^ v["ys"], word, spec)
        with m.Elif(v["is_max"]):
            with m.If(xc["nan"] | yc["nan"]):
                m.d.comb += word.eq(F32_QNAN)
            with m.Else():
                m.d.comb += word.eq(Mux(v["x_gt"], Cat(v["xm"], xs), Cat(v["ym"], v["ys"])))
        with m.Elif(v["is_recip"]):
            with m.If(xc["nan"]):
                m.d.comb += word.eq(F32_QNAN)
            with m.Elif(xc["inf"] | (~xc["zero"] & v["r_small"])):
                m.d.comb += word.eq(sign_zero)
            with m.Elif(xc["zero"]):
                m.d.comb += word.eq(sign_inf)
            with m.Else():
                m.d.comb += [word.eq(Cat(Const(0, 23), v["rbe"][0:8], xs)), rom.eq(1)]
        with m.Elif(v["is_rsqrt"]):
            with m.If(xc["nan"] | (xs & ~xc["zero"])):
                m.d.comb += word.eq(F32_QNAN)
            with m.Elif(xc["zero"]):
                m.d.comb += word.eq(sign_inf)
            with m.Elif(~xc["inf"]):
                m.d.comb += [word.eq(Cat(Const(0, 23), v["sbe"])), rom.eq(1)]
        vals = {"word": word, "rom": rom, "spec": spec, "prod": prod, "exp": v["exp"], "sign": xs ^ v["ys"]}
        return {k: delay(m, x_, self._M - len(cuts), f"a_{k}{i}") for k, x_ in vals.items()}

    @staticmethod
    def _mul_special(m: Module, xc, yc, sign, word, spec) -> None:
        """MUL's special results: NaN (either NaN, ``0 * inf``), signed inf, signed zero (DAZ)."""
        with m.If(xc["nan"] | yc["nan"] | (xc["inf"] & yc["zero"]) | (xc["zero"] & yc["inf"])):
            m.d.comb += [word.eq(F32_QNAN), spec.eq(1)]
        with m.Elif(xc["inf"] | yc["inf"]):
            m.d.comb += [word.eq(Cat(Const(_INF, 31), sign)), spec.eq(1)]
        with m.Elif(xc["zero"] | yc["zero"]):
            m.d.comb += [word.eq(Cat(Const(0, 31), sign)), spec.eq(1)]


def _cut(m: Module, cuts, name: str, lane: int, **values) -> dict:
    """:func:`hdl.pipe.stage` with the lane in the register names (``{name}_{key}{lane}``)."""
    out = stage(m, cuts, name, **{f"{k}{lane}": v for k, v in values.items()})
    return {k: out[f"{k}{lane}"] for k in values}


def _mul_norm(m: Module, a: dict, i: int) -> dict:
    """MUL: the significand product normalised (``sig``, leading one at bit 31), its biased
    exponent before rounding (``eb``) and the sign."""
    prod, carry = a["prod"], a["prod"][31]
    sig = Signal(32, name=f"b_mul_sig{i}")
    eb = Signal(signed(12), name=f"b_mul_eb{i}")
    m.d.comb += [sig.eq(Mux(carry, prod, prod << 1)), eb.eq(a["exp"] + carry)]
    return {"sig": sig, "eb": eb, "sign": a["sign"]}


def _mul_round(m: Module, v: dict, i: int) -> dict:
    """MUL, first half of the rounding: the significand rounded to nearest even (``rnd``, 25 bits:
    a carry out of bit 23 bumps the exponent), the exponent's range before the bump as flags, and
    the case that rounds up to ``2**-126`` (:func:`_mul_pack` finishes)."""
    sig, eb = v["sig"], v["eb"]
    kept = sig[8:32]
    up = sig[7] & ((sig[0:7] != 0) | kept[0])
    rnd = Signal(25, name=f"b_mul_rnd{i}")
    m.d.comb += rnd.eq(kept + up)
    # below 2**-126 IEEE rounds on the subnormal grid: from [2**-127, 2**-126) only up to 2**-126
    return {"rnd": rnd, "e8": eb[0:8], "sign": v["sign"], "tiny": eb <= 0,
            "tiny_up": (eb == 0) & (sig[9:32] == (1 << 23) - 1) & sig[8], "big": eb >= 0xFF, "top": eb == 0xFE}


def _mul_pack(m: Module, v: dict, i: int):
    """MUL, second half: the exponent bump of a rounding carry, flush below ``2**-126``, overflow to
    ``+-inf`` (``eb + carry >= 255`` as the flags ``big`` / ``top``: no carry chain), the word."""
    carry, sign = v["rnd"][24], v["sign"]
    ef = Signal(8, name=f"b_mul_ef{i}")
    m.d.comb += ef.eq(v["e8"] + carry)
    out = Signal(32, name=f"b_mul{i}")
    with m.If(v["tiny"]):
        m.d.comb += out.eq(Cat(Const(0, 23), v["tiny_up"], Const(0, 7), sign))
    with m.Elif(v["big"] | (v["top"] & carry)):
        m.d.comb += out.eq(Cat(Const(_INF, 31), sign))
    with m.Else():
        m.d.comb += out.eq(Cat(Mux(carry, 0, v["rnd"][0:23]), ef, sign))
    return out
