"""The read-only tables of the vector unit's function operations (``VEC`` ``EXP``, ``RECIP``, ``RSQRT``).

One definition, shared by the RTL (:mod:`hdl.vfunc`, the ROM contents) and the bit-exact reference
(:mod:`sim.vector_ref`); ``tests/test_vector.py`` checks the operations built on them against
float64 over every bfloat16 input. Every entry is computed with exact integer arithmetic or 60-digit
:mod:`decimal` arithmetic, so the tables do not depend on the platform's ``libm``.

* :data:`RECIP_ROM` (128 x 23 bits): the FP32 fraction of ``1 / 1.m`` normalised to ``[1, 2)``
  (``1.0`` for ``m = 0``, else ``2 / 1.m``), rounded to nearest even: the correctly rounded FP32
  reciprocal of every bfloat16 significand.
* :data:`RSQRT_ROM` (256 x 23 bits, index ``m + 128 * (e & 1)`` with ``e`` the biased exponent):
  the FP32 fraction of ``1 / sqrt(1.m)`` (``e`` odd: even unbiased exponent) or ``1 / sqrt(2 * 1.m)``
  (``e`` even), normalised to ``[1, 2)`` and rounded to nearest even.
* :data:`EXP_ROM` (128 x 41 bits): ``2**f`` for the fraction ``f = (i + r / 2**EXP_R_BITS) / 128``
  of ``u = p * log2(e)``, linearly interpolated: ``T[i] + (D[i] * r >> EXP_R_BITS)`` with ``T[i]``
  (24 bits, the hidden one included, in units of ``2**-23``) ``2**(i/128)`` less half the chord's
  largest error on its segment, and ``D[i]`` (17 bits) the chord's rise ``2**((i+1)/128) - 2**(i/128)``;
  segment 0 keeps ``T[0] = 1`` (so ``exp(0) = 1`` exactly) and takes the slope that balances its
  error instead. The entry is ``T[i] | D[i] << 24``.
"""

from __future__ import annotations

import decimal
from math import isqrt

__all__ = ["RECIP_ROM", "RSQRT_ROM", "EXP_ROM", "EXP_F_BITS", "EXP_R_BITS", "EXP_INDEX_BITS", "LOG2E_FIXED",
           "LOG2E_BITS", "EXP_T_BITS", "EXP_SHIFT", "EXP_SAT_E", "EXP_SAT_MP", "exp_rom_split"]

#: fraction bits of ``u = p * log2(e)`` in fixed point (rounded to nearest, ties up)
EXP_F_BITS = 18
#: bits of ``f`` that index :data:`EXP_ROM`
EXP_INDEX_BITS = 7
#: the remaining bits of ``f``: the interpolation step ``r``
EXP_R_BITS = EXP_F_BITS - EXP_INDEX_BITS
#: fraction bits of :data:`LOG2E_FIXED`
LOG2E_BITS = 28
#: bits of the ``T`` part of an :data:`EXP_ROM` entry (``2**f`` in ``[1, 2)``, 23 fraction bits)
EXP_T_BITS = 24

_CTX = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_EVEN)


def _rne_div(num: int, den: int) -> int:
    """``num / den`` rounded to the nearest integer, ties to even (positive integers)."""
    q, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and q & 1):
        q += 1
    return q


def _rne_sqrt_ratio(num: int, den: int) -> int:
    """``sqrt(num / den)`` rounded to the nearest integer, ties to even (exact integer arithmetic)."""
    q = isqrt(num // den)                  # floor(sqrt(num / den))
    # compare (q + 1/2)**2 with num / den: 4 * num vs (2q + 1)**2 * den
    lhs, rhs = 4 * num, (2 * q + 1) ** 2 * den
    if lhs > rhs or (lhs == rhs and q & 1):
        q += 1
    return q


def _recip_rom() -> list[int]:
    out = []
    for m in range(128):
        sig = 128 + m                      # 1.m * 2**7
        # 1.0 for m = 0, else 2 / 1.m = 2**8 / sig in (1, 2): 2**23 * that, rounded
        v = 1 << 23 if m == 0 else _rne_div(1 << 31, sig)
        assert (1 << 23) <= v < (1 << 24)
        out.append(v - (1 << 23))
    return out


def _rsqrt_rom() -> list[int]:
    out = []
    for odd_e in (0, 1):
        for m in range(128):
            sig = 128 + m
            if odd_e:                      # even unbiased exponent: 1 / sqrt(1.m), times 2 unless m = 0
                v = 1 << 23 if m == 0 else _rne_sqrt_ratio(4 * 128 << 46, sig)
            else:                          # odd unbiased exponent: 2 / sqrt(2 * 1.m) = sqrt(2 / 1.m)
                v = _rne_sqrt_ratio(2 * 128 << 46, sig)
            assert (1 << 23) <= v < (1 << 24), (odd_e, m, v)
            out.append(v - (1 << 23))
    return out


def _exp_rom() -> list[int]:
    two, one = _CTX.create_decimal(2), _CTX.create_decimal(1)
    scale = _CTX.create_decimal(1 << 23)
    ln2 = two.ln(_CTX)

    def pow2(i: int):
        return _CTX.power(two, _CTX.divide(_CTX.create_decimal(i), _CTX.create_decimal(128)))

    out = []
    for i in range(128):
        lo, hi = pow2(i), pow2(i + 1)
        h = one / 128
        # the chord over-estimates the convex 2**f by at most h**2 / 8 * ln2**2 * 2**f: T is lowered
        # by half that; segment 0 keeps T = 1 (exp(0) = 1) and takes the slope that balances the
        # error of 1 + s*t - 2**t ~ (s - ln2) t - ln2**2 t**2 / 2 over [0, h]: s - ln2 = (sqrt(2) - 1) ln2**2 h
        slope = ln2 + (two.sqrt(_CTX) - 1) * ln2 * ln2 * h if i == 0 else (hi - lo) / h
        rise = int((slope * h * scale).to_integral_value(decimal.ROUND_HALF_EVEN))
        half_err = lo * ln2 * ln2 * h * h / 16 if i else 0 * one
        t = int(((lo - half_err) * scale).to_integral_value(decimal.ROUND_HALF_EVEN))
        r_max = (1 << EXP_R_BITS) - 1
        assert (1 << 23) <= t and t + ((rise * r_max) >> EXP_R_BITS) < (1 << 24) and rise < (1 << 17), i
        out.append(t | rise << EXP_T_BITS)
    return out


def exp_rom_split(entry: int) -> tuple[int, int]:
    """An :data:`EXP_ROM` entry as ``(T, D)``."""
    return entry & ((1 << EXP_T_BITS) - 1), entry >> EXP_T_BITS


#: ``log2(e)`` in fixed point, :data:`LOG2E_BITS` fraction bits (29 bits), rounded to nearest
LOG2E_FIXED = int((_CTX.divide(_CTX.create_decimal(1), _CTX.create_decimal(2).ln(_CTX))
                   * (1 << LOG2E_BITS)).to_integral_value(decimal.ROUND_HALF_EVEN))
RECIP_ROM: tuple[int, ...] = tuple(_recip_rom())
RSQRT_ROM: tuple[int, ...] = tuple(_rsqrt_rom())
EXP_ROM: tuple[int, ...] = tuple(_exp_rom())

#: ``u * 2**EXP_F_BITS = ((mp * LOG2E_FIXED >> (EXP_SHIFT - 1 - e)) + 1) >> 1`` for the 16-bit
#: significand ``mp`` and the biased exponent ``e`` of the product ``p`` (``EXP``)
EXP_SHIFT = 15 + LOG2E_BITS - EXP_F_BITS + 127
#: ``p`` with a biased exponent above this saturates ``EXP`` (``|p| >= 128``); at this exponent
#: (``64 <= |p| < 128``) the significands from :data:`EXP_SAT_MP` do (``|u| >= 128`` after rounding)
EXP_SAT_E = 127 + 6


def _exp_sat_mp() -> int:
    """The smallest significand ``mp`` at :data:`EXP_SAT_E` whose rounded ``|u|`` reaches 128 (``u``
    grows with ``mp``; below :data:`EXP_SAT_E` no ``|u|`` does: ``|p| < 64`` gives ``|u| < 93``)."""
    def ua(mp: int) -> int:
        return ((mp * LOG2E_FIXED >> (EXP_SHIFT - 1 - EXP_SAT_E)) + 1) >> 1
    lo, hi = 1 << 15, (1 << 16) - 1
    assert ua(hi) >= 128 << EXP_F_BITS
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if ua(mid) < 128 << EXP_F_BITS else (lo, mid)
    return lo


#: the smallest 16-bit significand of a product at :data:`EXP_SAT_E` whose ``EXP`` saturates
EXP_SAT_MP = _exp_sat_mp()
