"""Reference of the vector unit (``hdl/vector.py``): one ``VEC`` operation on bit patterns.

The RTL matches these numpy operations bit for bit; the emulator executes ``VEC`` with them.
``MUL`` and ``MAX`` are numpy float32 operations around :mod:`sim.bf16`'s flush and NaN rules;
``EXP``, ``RECIP`` and ``RSQRT`` are the integer algorithms of :mod:`hdl.vfunc` on the tables of
:mod:`gen.design.vtables` (``tests/test_vector.py`` measures them against float64 over every
bfloat16 input).
"""

from __future__ import annotations

import numpy as np

from gen.design.config import FettaConfig
from gen.design.isa import BF16_ONE, VecOp
from gen.design.vtables import (EXP_F_BITS, EXP_R_BITS, EXP_ROM, EXP_SHIFT, EXP_T_BITS, LOG2E_FIXED, RECIP_ROM,
                                RSQRT_ROM)
from sim import bf16 as fp

_QNAN = np.uint64(0x7FC00000)
_INF = np.uint64(0x7F800000)
_ONE = np.uint64(0x3F800000)
_EXP_T = np.array([e & ((1 << EXP_T_BITS) - 1) for e in EXP_ROM], np.int64)
_EXP_D = np.array([e >> EXP_T_BITS for e in EXP_ROM], np.int64)
_RECIP = np.array(RECIP_ROM, np.uint64)
_RSQRT = np.array(RSQRT_ROM, np.uint64)
#: ``|p| >= 2**EXP_BIG_E`` (unbiased) saturates ``EXP``: ``|p * log2(e)| >= 128`` after rounding or before
EXP_BIG_E = 7


def _fields(bits, wide: bool):
    """``(sign, biased exponent, fraction)`` of FP32 (``wide``) or bfloat16 bit patterns, as int64."""
    b = np.asarray(bits, np.uint64).astype(np.int64)
    fb = 23 if wide else 7
    return b >> (fb + 8) & 1, b >> fb & 0xFF, b & ((1 << fb) - 1)


def exp_bits(p_bits) -> np.ndarray:
    """``EXP`` of the FP32 product ``p = x * a`` (bit patterns -> FP32 bit patterns).

    ``u = p * log2(e)`` in fixed point (the 16-bit significand of ``p`` times :data:`LOG2E_FIXED`,
    rounded to :data:`EXP_F_BITS` fraction bits, ties away from zero), ``k = floor(u)``, ``f = u - k``;
    ``2**f`` from :data:`EXP_ROM` (``T[i] + (D[i] * r >> EXP_R_BITS)``, ``i`` / ``r`` the high / low bits
    of ``f``), biased exponent ``127 + k``. ``|u| >= 128`` or ``+-inf``: ``+inf`` / ``+0``; a biased
    exponent ``<= 0``: ``+0`` (FTZ); zero: ``1.0``; NaN: canonical NaN."""
    s, e, frac = _fields(p_bits, True)
    mp = (1 << 15) | (frac >> 8)                       # a bf16 x bf16 product has 16 significant bits
    shift = np.clip(EXP_SHIFT - 1 - e, 0, 63)
    ua = ((mp * LOG2E_FIXED >> shift) + 1) >> 1
    big = (e >= 127 + EXP_BIG_E) | (ua >= (128 << EXP_F_BITS))
    ua = np.where(big, 0, ua)
    u = np.where(s == 1, -ua, ua)
    k, f = u >> EXP_F_BITS, u & ((1 << EXP_F_BITS) - 1)
    i, r = f >> EXP_R_BITS, f & ((1 << EXP_R_BITS) - 1)
    mant = _EXP_T[i] + (_EXP_D[i] * r >> EXP_R_BITS)
    be = 127 + k
    o = np.where(be <= 0, 0, (np.maximum(be, 0) << 23) | (mant - (1 << 23))).astype(np.uint64)
    o = np.where(big | (e == 0xFF), np.where(s == 1, np.uint64(0), _INF), o)
    o = np.where(e == 0, _ONE, o)
    return np.where((e == 0xFF) & (frac != 0), _QNAN, o).astype(np.uint64)


def recip_bits(x_bits) -> np.ndarray:
    """``RECIP`` of bfloat16 bit patterns: the correctly rounded FP32 ``1 / x`` (:data:`RECIP_ROM`),
    DAZ / FTZ (``+-0`` and subnormals -> ``+-inf``, ``+-inf`` -> ``+-0``), canonical NaN."""
    s, e, m = _fields(x_bits, False)
    be = 254 - e - (m != 0)
    o = (s.astype(np.uint64) << 31) | np.where(be <= 0, 0, (np.maximum(be, 0) << 23)).astype(np.uint64) \
        | np.where(be <= 0, np.uint64(0), _RECIP[m])
    o = np.where(e == 0, (s.astype(np.uint64) << 31) | _INF, o)
    o = np.where(e == 0xFF, s.astype(np.uint64) << 31, o)
    return np.where((e == 0xFF) & (m != 0), _QNAN, o).astype(np.uint64)


def rsqrt_bits(x_bits) -> np.ndarray:
    """``RSQRT`` of bfloat16 bit patterns: the correctly rounded FP32 ``1 / sqrt(x)`` (:data:`RSQRT_ROM`),
    ``+-0`` (and subnormals) -> ``+-inf``, ``+inf`` -> ``+0``, ``x < 0`` and NaN -> canonical NaN."""
    s, e, m = _fields(x_bits, False)
    odd = e & 1
    be = ((381 - e) >> 1) - (odd & (m != 0))
    o = (be.astype(np.uint64) << 23) | _RSQRT[m + 128 * odd]
    o = np.where(e == 0xFF, np.uint64(0), o)
    o = np.where(e == 0, (s.astype(np.uint64) << 31) | _INF, o)
    bad = ((e == 0xFF) & (m != 0)) | ((s == 1) & (e != 0))
    return np.where(bad, _QNAN, o).astype(np.uint64)


def max_bits(x_bits, y_bits) -> np.ndarray:
    """``MAX``: ``max(y, widened x)`` of bit patterns, DAZ, ``-0 < +0``, canonical NaN if either is NaN."""
    xw = fp.f32_bits(fp.bf16_to_f32(fp.bf16_from_bits(np.asarray(x_bits, np.uint16)))).astype(np.uint64)
    yf = fp.f32_bits(fp.ftz32(fp.f32_from_bits(np.asarray(y_bits, np.uint32)))).astype(np.uint64)

    def key(b):          # sign-magnitude -> an unsigned order (-0 just below +0)
        return np.where(b >> np.uint64(31) == 1, ~b & np.uint64(0xFFFFFFFF), b | np.uint64(0x80000000))

    nan = ((xw & 0x7FFFFFFF) > 0x7F800000) | ((yf & 0x7FFFFFFF) > 0x7F800000)
    return np.where(nan, _QNAN, np.where(key(xw) > key(yf), xw, yf)).astype(np.uint64)


def vec_ref(config: FettaConfig, op: int, scalar: int, x_bits, y_bits):
    """Reference of one operation on bit patterns (numpy arrays of equal shape).

    Returns ``(o_bits, narrow_bits)`` as ``uint64`` arrays: FP32 / ``acc_bits`` integer
    results and their bfloat16 / ``int_width`` narrowing."""
    x_bits = np.asarray(x_bits, np.uint64)
    y_bits = np.asarray(y_bits, np.uint64)
    if config.datatype == "bf16":
        x = fp.bf16_from_bits(x_bits.astype(np.uint16))
        y = fp.f32_from_bits(y_bits.astype(np.uint32))
        a = fp.bf16_from_bits(np.full(x.shape, BF16_ONE if op == VecOp.ADD else scalar, np.uint16))
        if op in (VecOp.ADD, VecOp.AXPY):
            o = fp.f32_add(y, fp.bf16_mul(x, a))
        elif op == VecOp.SCALE:
            o = fp.bf16_mul(x, a)
        elif op == VecOp.RELU:
            yf = fp.ftz32(y)
            with np.errstate(invalid="ignore"):
                o = np.where(np.isnan(yf), yf, np.where(yf > 0, yf, np.float32(0))).astype(np.float32)
        elif op == VecOp.MUL:
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                o = fp.ftz32(fp.ftz32(y) * fp.bf16_to_f32(x))
        elif op in _BITS_OPS:
            args = {VecOp.MAX: (x_bits, y_bits), VecOp.EXP: (fp.f32_bits(fp.bf16_mul(x, a)),)}.get(op, (x_bits,))
            o = fp.f32_from_bits(_BITS_OPS[op](*args).astype(np.uint32))
        else:
            raise ValueError(f"unknown vector op {op}")
        ob = fp.f32_bits(o).astype(np.uint64)
        nb = fp.bf16_bits(fp.f32_to_bf16(o)).astype(np.uint64)
        return ob, nb
    EB, AB = config.elem_bits, config.acc_bits

    def signed(v, w):
        v = v.astype(object) & ((1 << w) - 1)
        return np.where(v >= (1 << (w - 1)), v - (1 << w), v)

    x = signed(x_bits, EB)
    y = signed(y_bits, AB)
    a = 1 if op == VecOp.ADD else (scalar - (1 << 16) if scalar & 0x8000 else scalar)
    if op in (VecOp.ADD, VecOp.AXPY):
        o = y + a * x
    elif op == VecOp.SCALE:
        o = a * x + 0 * y
    elif op == VecOp.RELU:
        o = np.where(y > 0, y, 0)
    elif op == VecOp.MUL:
        o = y * x
    elif op == VecOp.MAX:
        o = np.where(x > y, x, y)
    elif op in _BITS_OPS:
        o = 0 * y                                      # EXP, RECIP, RSQRT: not in the integer datatype
    else:
        raise ValueError(f"unknown vector op {op}")
    ob = np.vectorize(lambda v: int(v) & ((1 << AB) - 1), otypes=[object])(o).astype(np.uint64)
    nb = ob & np.uint64((1 << EB) - 1)
    return ob, nb


#: the ops computed on bit patterns (bfloat16 datatype)
_BITS_OPS = {VecOp.MAX: max_bits, VecOp.EXP: exp_bits, VecOp.RECIP: recip_bits, VecOp.RSQRT: rsqrt_bits}

__all__ = ["vec_ref", "exp_bits", "recip_bits", "rsqrt_bits", "max_bits"]
