"""The bfloat16 / FP32 reference ops (issue 2, item 7) against independent float64 oracles.

Double rounding through float64 is innocuous for + and x of float32 operands
(53 >= 2*24 + 2), so ``float32(float64(a) op float64(b))`` is an independent RNE oracle.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim import bf16 as R

rng = np.random.default_rng(1234)
N = 200_000


def random_f32_bits(n):
    return rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)


def random_bf16_bits(n):
    return rng.integers(0, 2 ** 16, n, dtype=np.uint32).astype(np.uint16)


def is_sub32(u):
    return ((u & 0x7F800000) == 0) & ((u & 0x7FFFFF) != 0)


def is_nan32(u):
    return ((u & 0x7F800000) == 0x7F800000) & ((u & 0x7FFFFF) != 0)


def oracle_ftz(x64):
    """float64 -> float32 (RNE), then flush and canonical NaN, all with numpy."""
    with np.errstate(over="ignore", invalid="ignore"):
        f = np.asarray(x64, np.float64).astype(np.float32)
    u = f.view(np.uint32).copy()
    u[is_sub32(u)] &= np.uint32(0x80000000)
    u[is_nan32(u)] = 0x7FC00000
    return u


def test_add_matches_float64_oracle():
    a = R.f32_from_bits(random_f32_bits(N))
    b = R.f32_from_bits(random_f32_bits(N))
    # add close pairs too, to exercise cancellation
    with np.errstate(invalid="ignore"):  # NaN operands stay NaN
        b[: N // 4] = np.nextafter(-a[: N // 4], np.float32(1), dtype=np.float32)
    a64 = R.ftz32(a).astype(np.float64)
    b64 = R.ftz32(b).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        want = oracle_ftz(a64 + b64)
    got = R.f32_bits(R.f32_add(a, b))
    assert np.array_equal(got, want)


def test_mul_matches_float64_oracle_and_is_exact():
    a = R.bf16_from_bits(random_bf16_bits(N))
    b = R.bf16_from_bits(random_bf16_bits(N))
    a64 = R.bf16_to_f32(a).astype(np.float64)
    b64 = R.bf16_to_f32(b).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        p64 = a64 * b64
        want = oracle_ftz(p64)
    got = R.f32_bits(R.bf16_mul(a, b))
    assert np.array_equal(got, want)
    # exactness: every finite, normal product equals the float64 product
    g = R.f32_from_bits(got).astype(np.float64)
    ok = np.isfinite(g) & (np.abs(g) >= 2.0 ** -126)
    assert ok.sum() > N // 4
    assert np.array_equal(g[ok], p64[ok])


def test_to_bf16_rne_and_ties():
    # 1 + 2^-8 is exactly half-way between 1 and 1 + 2^-7: ties to even -> 1
    # 1 + 3*2^-8 is half-way between 1 + 2^-7 and 1 + 2^-6: ties to even -> 1 + 2^-6
    x = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -(1 + 2 ** -8)], np.float32)
    got = R.f32_to_bf16(x).astype(np.float64)
    assert list(got) == [1.0, 1 + 2 ** -6, 1 + 2 ** -7, -1.0]
    # overflow: the largest float32 rounds up to infinity in bfloat16
    assert np.isinf(R.f32_to_bf16(np.array([np.finfo(np.float32).max], np.float32)).astype(np.float32))[0]
    # random: agrees with an oracle built on float64 arithmetic (round half to even on the top 16 bits)
    u = random_f32_bits(N)
    u = u[~is_nan32(u)]
    f = R.ftz32(R.f32_from_bits(u))
    lo = (R.f32_bits(f) & 0xFFFF0000).view(np.float32).astype(np.float64)      # truncated toward zero
    hi_bits = (R.f32_bits(f) & 0xFFFF0000) + 0x10000
    hi = hi_bits.astype(np.uint32).view(np.float32).astype(np.float64)          # next away from zero
    # past the largest finite bfloat16 the next value is 2^128 (unbounded exponent), i.e. overflow
    hi_dist = np.where(np.isinf(hi), np.sign(lo) * 2.0 ** 128, hi)
    x64 = f.astype(np.float64)
    d_lo, d_hi = np.abs(x64 - lo), np.abs(hi_dist - x64)
    even_lo = ((R.f32_bits(f) >> 16) & 1) == 0
    pick_lo = (d_lo < d_hi) | ((d_lo == d_hi) & even_lo)
    want = np.where(pick_lo, lo, hi)
    got = R.f32_to_bf16(f).astype(np.float64)
    finite = np.isfinite(x64)
    assert np.array_equal(got[finite], want[finite])
    assert np.isinf(want[finite]).sum() > 0  # the overflow boundary was exercised


def test_subnormals_flush_to_signed_zero():
    tiny = R.f32_from_bits(np.array([0x00000001, 0x80400000, 0x007FFFFF], np.uint32))
    assert list(R.f32_bits(R.ftz32(tiny))) == [0, 0x80000000, 0]
    # inputs are treated as zero (DAZ): tiny + 0 = 0, tiny * big = 0
    assert R.f32_bits(R.f32_add(tiny[:1], np.float32(0.0)))[0] == 0
    small = R.bf16_from_bits(np.array([0x0001, 0x8001], np.uint16))
    big = R.bf16_from_bits(np.array([0x7F00, 0x7F00], np.uint16))
    assert list(R.f32_bits(R.bf16_mul(small, big))) == [0, 0x80000000]
    # a product below 2^-126 is flushed (keeps its sign): 2^-64 * -2^-63 = -2^-127
    a = R.f32_to_bf16(np.array([2.0 ** -64], np.float32))
    b = R.f32_to_bf16(np.array([-(2.0 ** -63)], np.float32))
    assert R.f32_bits(R.bf16_mul(a, b))[0] == 0x80000000
    # a difference of normals that lands below 2^-126 is flushed
    x = np.float32(2.0 ** -126) * np.float32(1.5)
    y = np.float32(2.0 ** -126)
    assert R.f32_bits(R.f32_add(np.array([x]), np.array([-y])))[0] == 0


def test_nan_inf_and_signed_zero():
    inf, ninf, nan = np.float32(np.inf), np.float32(-np.inf), np.float32(np.nan)
    pairs = [(inf, ninf), (nan, np.float32(1)), (np.float32(1), R.f32_from_bits(np.uint32(0xFFC12345)))]
    for a, b in pairs:
        assert R.f32_bits(R.f32_add(np.array([a]), np.array([b])))[0] == 0x7FC00000
    assert R.f32_add(np.array([inf]), np.array([np.float32(1e30)]))[0] == inf
    zero_bf, inf_bf = R.f32_to_bf16(np.array([0.0], np.float32)), R.f32_to_bf16(np.array([np.inf], np.float32))
    assert R.f32_bits(R.bf16_mul(zero_bf, inf_bf))[0] == 0x7FC00000
    assert R.bf16_bits(R.f32_to_bf16(np.array([nan], np.float32)))[0] == 0x7FC0
    # signed zeros under round to nearest
    pz, nz = np.float32(0.0), np.float32(-0.0)
    assert R.f32_bits(R.f32_add(np.array([pz]), np.array([nz])))[0] == 0
    assert R.f32_bits(R.f32_add(np.array([nz]), np.array([nz])))[0] == 0x80000000
    assert R.f32_bits(R.f32_add(np.array([np.float32(3.0)]), np.array([np.float32(-3.0)])))[0] == 0
    neg = R.f32_to_bf16(np.array([-2.0], np.float32))
    assert R.f32_bits(R.bf16_mul(R.f32_to_bf16(np.array([0.0], np.float32)), neg))[0] == 0x80000000
    # overflow of a product and of a sum: RNE to infinity
    big = R.f32_to_bf16(np.array([2.0 ** 100], np.float32))
    assert np.isinf(R.bf16_mul(big, big))[0]
    m = np.float32(np.finfo(np.float32).max)
    assert R.f32_add(np.array([m]), np.array([m]))[0] == inf


@given(st.lists(st.floats(-4, 4, width=16), min_size=1, max_size=40))
def test_mac_chain_order(values):
    """bf16_dot is a sequential chain of bf16_mac in index order."""
    a = R.f32_to_bf16(np.array(values, np.float32))
    b = R.f32_to_bf16(np.array(values[::-1], np.float32))
    acc = np.zeros((), np.float32)
    for x, y in zip(a, b):
        acc = R.bf16_mac(acc, x, y)
    assert R.f32_bits(R.bf16_dot(a, b)) == R.f32_bits(acc)


def test_int_mac_wraps():
    assert R.int_mac(0, 2 ** 15 - 1, 2 ** 15 - 1, 48) == (2 ** 15 - 1) ** 2
    assert R.int_mac(2 ** 47 - 1, 1, 1, 48) == -(2 ** 47)
    assert list(R.wrap_int(np.array([2 ** 16, -1, 2 ** 15]), 16)) == [0, -1, -(2 ** 15)]


@pytest.mark.parametrize("x,exact", [(1.0, True), (1 + 2 ** -7, True), (1 + 2 ** -8, False)])
def test_is_bf16_exact(x, exact):
    assert R.is_bf16_exact(np.array([x], np.float32)) is exact
