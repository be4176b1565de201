"""bfloat16 / FP32 reference operations: the arithmetic the RTL must match bit for bit.

Decisions (also in ``docs/numerics.md``; the PE and adder RTL implement exactly these):

* **Rounding**: round to nearest, ties to even, everywhere (FP32 -> BF16 and FP32 add).
* **Subnormals**: flushed to zero, on inputs (DAZ) and on results (FTZ), keeping
  the sign. A value is subnormal when its exponent field is 0 and its mantissa is not.
  Flushing is applied *after* IEEE rounding of the result; for this datapath that is
  unambiguous: a bf16 x bf16 product has at most 16 significant bits so it is exact
  whenever it is >= 2**-126, and an FP32 sum that lands below 2**-126 is always exact.
* **Products** are exact in FP32 (8-bit x 8-bit significands) except for overflow to
  infinity and underflow (flushed). Multiply and add are *not* fused: the MAC is
  ``acc + (a * b)`` with the product first rounded (only over/underflow can change it).
* **NaN**: any NaN result is the canonical quiet NaN ``0x7FC00000`` (FP32) /
  ``0x7FC0`` (BF16); NaN inputs propagate as that canonical NaN. ``inf - inf`` and
  ``0 * inf`` give it too.
* **Infinity**: overflow rounds to +-inf (RNE), as IEEE.
* **Signed zero**: as IEEE with RNE: ``x + (-x) = +0``, ``(-0) + (-0) = -0``,
  ``+0 * -y = -0``; a flushed value keeps its sign.

numpy's float32 and ml_dtypes' bfloat16 are the oracles: these functions only
add the flush and NaN canonicalisation around them, nothing is rounded by hand.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16
F32_QNAN = np.uint32(0x7FC00000)
BF16_QNAN = np.uint16(0x7FC0)
SMALLEST_NORMAL = np.float32(2.0 ** -126)


# --- bit views -----------------------------------------------------------------------
def f32_bits(x) -> np.ndarray:
    """FP32 values -> their uint32 bit patterns."""
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def f32_from_bits(u) -> np.ndarray:
    return np.asarray(u, dtype=np.uint32).view(np.float32)


def bf16_bits(x) -> np.ndarray:
    """bfloat16 values -> uint16 bit patterns."""
    return np.asarray(x, dtype=BF16).view(np.uint16)


def bf16_from_bits(u) -> np.ndarray:
    return np.asarray(u, dtype=np.uint16).view(BF16)


# --- flushing and NaN ----------------------------------------------------------------
def ftz32(x) -> np.ndarray:
    """Flush FP32 subnormals to signed zero and canonicalise NaNs."""
    u = f32_bits(x).copy()
    sub = ((u & 0x7F800000) == 0) & ((u & 0x007FFFFF) != 0)
    u[sub] &= np.uint32(0x80000000)
    nan = ((u & 0x7F800000) == 0x7F800000) & ((u & 0x007FFFFF) != 0)
    u[nan] = F32_QNAN
    return u.view(np.float32)


def ftz16(x) -> np.ndarray:
    """Flush bfloat16 subnormals to signed zero and canonicalise NaNs."""
    u = bf16_bits(x).copy()
    sub = ((u & 0x7F80) == 0) & ((u & 0x007F) != 0)
    u[sub] &= np.uint16(0x8000)
    nan = ((u & 0x7F80) == 0x7F80) & ((u & 0x007F) != 0)
    u[nan] = BF16_QNAN
    return u.view(BF16)


# --- the operations ------------------------------------------------------------------
def f32_to_bf16(x) -> np.ndarray:
    """FP32 -> BF16, round to nearest even; subnormal inputs flushed first."""
    return ftz16(ftz32(x).astype(BF16))


def bf16_to_f32(x) -> np.ndarray:
    """BF16 -> FP32 (exact widening; subnormals flushed)."""
    return ftz32(ftz16(x).astype(np.float32))


def bf16_mul(a, b) -> np.ndarray:
    """BF16 x BF16 -> FP32 (exact except overflow; DAZ/FTZ)."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return ftz32(bf16_to_f32(a) * bf16_to_f32(b))


def f32_add(a, b) -> np.ndarray:
    """FP32 + FP32, IEEE round to nearest even; DAZ/FTZ, canonical NaN."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return ftz32(ftz32(a) + ftz32(b))


def bf16_mac(acc, a, b) -> np.ndarray:
    """One PE step: ``acc + a * b`` with the product rounded first (not fused)."""
    return f32_add(acc, bf16_mul(a, b))


def bf16_dot(a, b, acc=None, axis: int = -1) -> np.ndarray:
    """Sequential MAC chain along ``axis`` (index 0 first): the PE accumulation order."""
    a = np.moveaxis(np.asarray(a, dtype=BF16), axis, 0)
    b = np.moveaxis(np.asarray(b, dtype=BF16), axis, 0)
    shape = np.broadcast_shapes(a.shape[1:], b.shape[1:])
    out = np.zeros(shape, np.float32) if acc is None else np.array(np.broadcast_to(acc, shape), np.float32)
    for k in range(a.shape[0]):
        out = bf16_mac(out, a[k], b[k])
    return out


# --- integer mode --------------------------------------------------------------------
def wrap_int(x, width: int) -> np.ndarray:
    """Two's-complement wrap of Python/numpy integers to ``width`` bits (object-safe)."""
    x = np.asarray(x, dtype=object)
    m = 1 << width
    h = 1 << (width - 1)
    return np.vectorize(lambda v: ((int(v) + h) % m) - h, otypes=[object])(x)


def int_mac(acc, a, b, acc_width: int) -> np.ndarray:
    """Integer mode: ``acc + a * b`` wrapped to ``acc_width`` bits."""
    return wrap_int(np.asarray(acc, dtype=object) + np.asarray(a, dtype=object) * np.asarray(b, dtype=object),
                    acc_width)


def is_bf16_exact(x) -> bool:
    """True when every FP32 value of ``x`` is exactly a bfloat16 value."""
    x = np.asarray(x, dtype=np.float32)
    return bool(np.all((f32_bits(x) & 0xFFFF) == 0))


def round_to_bf16_f32(x) -> np.ndarray:
    """Round any float array to bfloat16, returned as float32 (for drawing inputs)."""
    return f32_to_bf16(np.asarray(x, dtype=np.float32)).astype(np.float32)


__all__ = ["BF16", "f32_bits", "f32_from_bits", "bf16_bits", "bf16_from_bits", "ftz32", "ftz16",
           "f32_to_bf16", "bf16_to_f32", "bf16_mul", "f32_add", "bf16_mac", "bf16_dot",
           "wrap_int", "int_mac", "is_bf16_exact", "round_to_bf16_f32"]
