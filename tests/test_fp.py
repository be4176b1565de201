# amaranth: UnusedElaboratable=no
"""hdl/fp.py against sim/bf16.py, bit for bit, in the Amaranth simulator.

Each block sees >= 100,000 operand pairs (random bit patterns, nearby values
for cancellation, exponent boundaries, rounding ties, special values); the
vectors are split over several tests so that pytest-xdist spreads them.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator
from hypothesis import given
from hypothesis import strategies as st

from hdl.fp import ADD_CUTS, MUL_CUTS, BF16Mul, FP32Add, FP32ToBF16
from sim.bf16 import bf16_bits, bf16_from_bits, bf16_mul, f32_add, f32_bits, f32_from_bits, f32_to_bf16

# --- reference ------------------------------------------------------------------------


def ref_mul(a, b):
    return f32_bits(bf16_mul(bf16_from_bits(np.asarray(a, np.uint16)), bf16_from_bits(np.asarray(b, np.uint16))))


def ref_add(a, b):
    return f32_bits(f32_add(f32_from_bits(np.asarray(a, np.uint32)), f32_from_bits(np.asarray(b, np.uint32))))


def ref_cvt(a):
    return bf16_bits(f32_to_bf16(f32_from_bits(np.asarray(a, np.uint32))))


# --- driving the combinational blocks -------------------------------------------------


def simulate(dut, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Apply every vector to ``dut`` and return ``o`` for each: combinational blocks vector by
    vector, pipelined ones (``dut.latency`` > 0) one vector per clock cycle, back to back, reading
    vector ``i``'s result ``latency`` cycles after it was presented."""
    names = list(inputs)
    columns = [[int(v) for v in inputs[n]] for n in names]     # Python ints: rows wider than 64 bits too
    out: list[int] = []
    ports = [getattr(dut, n) for n in names]
    lat = getattr(dut, "latency", 0)
    n = len(columns[0])

    async def tb(ctx):
        for t in range(n + lat):
            for port, col in zip(ports, columns):
                ctx.set(port, col[t] if t < n else 0)
            if t >= lat:
                out.append(ctx.get(dut.o))
            if lat:
                await ctx.tick()

    sim = Simulator(dut)
    if lat:
        sim.add_clock(1e-9)
    sim.add_testbench(tb)
    sim.run()
    return np.array(out, dtype=np.uint64 if all(v < 1 << 64 for v in out) else object)


def check(got, want, inputs):
    want = np.asarray(want).astype(np.uint64)
    bad = np.nonzero(got != want)[0]
    if len(bad):
        i = bad[0]
        args = ", ".join(f"{k}=0x{int(v[i]):x}" for k, v in inputs.items())
        pytest.fail(f"{len(bad)} mismatches; first: {args}: rtl 0x{int(got[i]):x} != ref 0x{int(want[i]):x}")


# --- operand generators -------------------------------------------------------------

F32_SPECIAL = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                        0xFFFFFFFF, 0x00000001, 0x807FFFFF, 0x00400000, 0x00800000, 0x80800000, 0x00800001,
                        0x7F7FFFFF, 0xFF7FFFFF, 0x7F7FFFFE, 0x3F800000, 0xBF800000, 0x3F800001, 0x4B800000,
                        0x33800000, 0x34000000, 0x7F000000, 0x00FFFFFF, 0x01000000], dtype=np.uint32)
BF16_SPECIAL = np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFFFF, 0x0001, 0x807F,
                         0x0080, 0x8080, 0x0081, 0x7F7F, 0xFF7F, 0x3F80, 0xBF80, 0x3F81, 0x3FFF, 0x4000,
                         0x1F80, 0x2000, 0x5F80, 0x5FFF, 0x6000, 0x2080, 0x1FFF], dtype=np.uint16)


def f32_pairs(rng, n):
    """``n`` FP32 operand pairs: a mix of the interesting kinds."""
    q = n // 6
    a, b = [], []
    # 1. uniform random bit patterns (many NaN/inf/subnormal/huge exponents)
    a.append(rng.integers(0, 2**32, q, dtype=np.uint64)); b.append(rng.integers(0, 2**32, q, dtype=np.uint64))
    # 2. moderate values with close exponents (aligned adds, carries)
    e = rng.integers(100, 155, q)
    x = (rng.integers(0, 2, q) << 31) | (e << 23) | rng.integers(0, 2**23, q)
    y = (rng.integers(0, 2, q) << 31) | ((e + rng.integers(-3, 4, q)) << 23) | rng.integers(0, 2**23, q)
    a.append(x); b.append(y)
    # 3. cancellation: b is -a nudged by a few ulps (massive normalising shifts)
    x = rng.integers(0x00800000, 0x7F800000, q)
    y = (x + rng.integers(-40, 41, q)) ^ 0x80000000
    a.append(x); b.append(y)
    # 4. far-apart exponents (sticky bit, x + tiny), both signs
    x = rng.integers(0, 2**32, q) & 0xBFFFFFFF | 0x20000000
    y = (rng.integers(0, 2, q) << 31) | (((x >> 23) & 0xFF) - rng.integers(20, 30, q)).clip(1, 254) << 23 \
        | rng.integers(0, 2**23, q)
    a.append(x); b.append(y)
    # 5. near underflow and overflow boundaries
    lo = (rng.integers(0, 2, q) << 31) | (rng.integers(0, 4, q) << 23) | rng.integers(0, 2**23, q)
    lo2 = (rng.integers(0, 2, q) << 31) | (rng.integers(0, 4, q) << 23) | rng.integers(0, 2**23, q)
    hi = (rng.integers(0, 2, q) << 31) | (rng.integers(250, 256, q) << 23) | rng.integers(0, 2**23, q)
    half = q // 2
    a.append(np.concatenate([lo[:half], hi[half:]])); b.append(np.concatenate([lo2[:half], hi[:q - half]]))
    # 6. few-bit fractions: exact ties at the rounding position are common
    r = n - 5 * q
    x = (rng.integers(0, 2, r) << 31) | (rng.integers(120, 136, r) << 23) | (rng.integers(0, 8, r) << 20)
    y = (rng.integers(0, 2, r) << 31) | (rng.integers(120, 136, r) << 23) | (rng.integers(0, 8, r) << 20)
    a.append(x); b.append(y)
    a = np.concatenate(a).astype(np.uint32)
    b = np.concatenate(b).astype(np.uint32)
    # sprinkle special values in both positions
    k = n // 20
    a[rng.integers(0, n, k)] = rng.choice(F32_SPECIAL, k)
    b[rng.integers(0, n, k)] = rng.choice(F32_SPECIAL, k)
    return a, b


def bf16_pairs(rng, n):
    q = n // 3
    a = [rng.integers(0, 2**16, q)]
    b = [rng.integers(0, 2**16, q)]
    # exponent sums around the FP32 underflow (ea + eb ~ 127) and overflow (~ 381) limits
    ea = rng.integers(1, 255, q)
    target = np.where(rng.integers(0, 2, q) == 1, 127, 381) + rng.integers(-3, 4, q)
    eb = (target - ea).clip(1, 254)
    a.append((rng.integers(0, 2, q) << 15) | (ea << 7) | rng.integers(0, 128, q))
    b.append((rng.integers(0, 2, q) << 15) | (eb << 7) | rng.integers(0, 128, q))
    r = n - 2 * q
    a.append(rng.integers(0, 2**16, r)); b.append(rng.choice(BF16_SPECIAL, r))
    a = np.concatenate(a).astype(np.uint16)
    b = np.concatenate(b).astype(np.uint16)
    k = n // 20
    a[rng.integers(0, n, k)] = rng.choice(BF16_SPECIAL, k)
    return a, b


def f32_singles(rng, n):
    q = n // 3
    x = [rng.integers(0, 2**32, q)]
    # ties and near-ties at the bf16 rounding point
    base = rng.integers(0, 2**16, q) << 16
    x.append(base | rng.choice(np.array([0x8000, 0x7FFF, 0x8001, 0x0000, 0xFFFF]), q))
    r = n - 2 * q
    # top of the range (rounding into infinity) and bottom (subnormals)
    top = (rng.integers(0, 2, r) << 31) | (rng.integers(253, 256, r) << 23) | rng.integers(0, 2**23, r)
    x.append(top)
    x = np.concatenate(x).astype(np.uint32)
    x[rng.integers(0, n, n // 20)] = rng.choice(F32_SPECIAL, n // 20)
    return x


# --- tests ------------------------------------------------------------------------------

ADD_CHUNKS = 8
ADD_PER_CHUNK = 13_000  # 104,000 pairs in all


@pytest.mark.parametrize("chunk", [0] + [pytest.param(c, marks=pytest.mark.slow) for c in range(1, ADD_CHUNKS)])
def test_fp32_add_random(chunk):
    """13,000 random pairs per chunk (~12 s of Amaranth simulation each): ``make test`` runs the
    first, ``make test-full`` all eight."""
    a, b = f32_pairs(np.random.default_rng(1000 + chunk), ADD_PER_CHUNK)
    got = simulate(FP32Add(), {"a": a, "b": b})
    check(got, ref_add(a, b), {"a": a, "b": b})


@pytest.mark.parametrize("chunk", range(2))
def test_bf16_mul_random(chunk):
    a, b = bf16_pairs(np.random.default_rng(2000 + chunk), 51_000)  # 102,000 pairs
    got = simulate(BF16Mul(), {"a": a, "b": b})
    check(got, ref_mul(a, b), {"a": a, "b": b})


@pytest.mark.parametrize("stages", range(1, max(ADD_CUTS) + 1))
def test_fp32_add_pipelined(stages):
    """Every inner stage count: the same results, one pair per cycle (random pairs, near
    cancellation, far exponents, ties and every pair of special values)."""
    a, b = f32_pairs(np.random.default_rng(4000 + stages), 6_000)
    sa, sb = np.meshgrid(F32_SPECIAL, F32_SPECIAL)
    a, b = np.concatenate([a, sa.ravel()]), np.concatenate([b, sb.ravel()])
    dut = FP32Add(stages=stages)
    assert dut.latency == stages
    check(simulate(dut, {"a": a, "b": b}), ref_add(a, b), {"a": a, "b": b})


@pytest.mark.parametrize("stages", range(1, max(MUL_CUTS) + 1))
def test_bf16_mul_pipelined(stages):
    """Every inner stage count (the LUT multiplier's partial sums): the same results."""
    a, b = bf16_pairs(np.random.default_rng(4100 + stages), 10_000)
    sa, sb = np.meshgrid(BF16_SPECIAL, BF16_SPECIAL)
    a, b = np.concatenate([a, sa.ravel()]), np.concatenate([b, sb.ravel()])
    dut = BF16Mul(stages=stages)
    assert dut.latency == stages
    check(simulate(dut, {"a": a, "b": b}), ref_mul(a, b), {"a": a, "b": b})


def test_stage_arguments():
    with pytest.raises(ValueError, match="between 0 and 6"):
        FP32Add(stages=7)
    with pytest.raises(ValueError, match="between 0 and 2"):
        BF16Mul(stages=3)
    with pytest.raises(TypeError, match="integer"):
        FP32Add(stages=1.5)


def test_fp32_to_bf16_random():
    x = f32_singles(np.random.default_rng(3000), 102_000)
    got = simulate(FP32ToBF16(), {"a": x})
    check(got, ref_cvt(x), {"a": x})


def test_special_values_exhaustive():
    """Every pair of special values, in both operand orders."""
    a, b = np.meshgrid(F32_SPECIAL, F32_SPECIAL)
    a, b = a.ravel(), b.ravel()
    check(simulate(FP32Add(), {"a": a, "b": b}), ref_add(a, b), {"a": a, "b": b})
    a16, b16 = np.meshgrid(BF16_SPECIAL, BF16_SPECIAL)
    a16, b16 = a16.ravel(), b16.ravel()
    check(simulate(BF16Mul(), {"a": a16, "b": b16}), ref_mul(a16, b16), {"a": a16, "b": b16})
    check(simulate(FP32ToBF16(), {"a": F32_SPECIAL}), ref_cvt(F32_SPECIAL), {"a": F32_SPECIAL})


def test_documented_cases():
    """Hand-picked cases whose expected bits are written out (not taken from the reference)."""
    add = [
        (0x3F800000, 0xBF800000, 0x00000000),  # 1 + -1 = +0
        (0x80000000, 0x80000000, 0x80000000),  # -0 + -0 = -0
        (0x80000000, 0x00000000, 0x00000000),  # -0 + +0 = +0
        (0x7F800000, 0xFF800000, 0x7FC00000),  # inf - inf = qNaN
        (0x7F7FFFFF, 0x7F7FFFFF, 0x7F800000),  # overflow -> inf
        (0x00800001, 0x80800000, 0x00000000),  # result subnormal -> flushed, sign of the larger
        (0x80800001, 0x00800000, 0x80000000),
        (0x3F800000, 0x33800000, 0x3F800000),  # 1 + 2^-24: tie, to even (stays 1)
        (0x3F800001, 0x33800000, 0x3F800002),  # odd + half ulp: tie, to even (up)
        (0x00000001, 0x3F800000, 0x3F800000),  # subnormal input is zero (DAZ)
    ]
    a, b, want = (np.array(c, dtype=np.uint32) for c in zip(*add))
    check(simulate(FP32Add(), {"a": a, "b": b}), want, {"a": a, "b": b})
    mul = [
        (0x3F80, 0xBF80, 0xBF800000),  # 1 * -1
        (0x0000, 0xFF80, 0x7FC00000),  # 0 * -inf = qNaN
        (0x8000, 0x3F80, 0x80000000),  # -0 * 1 = -0
        (0x7F7F, 0x7F7F, 0x7F800000),  # overflow
        (0x0080, 0x0080, 0x00000000),  # underflow flushed
        (0x0001, 0x3F80, 0x00000000),  # subnormal input
        (0x3FC0, 0x3FC0, 0x40100000),  # 1.5 * 1.5 = 2.25
    ]
    a, b, want = (np.array(c, dtype=np.uint32) for c in zip(*mul))
    check(simulate(BF16Mul(), {"a": a, "b": b}), want, {"a": a, "b": b})
    cvt = [(0x3F808000, 0x3F80), (0x3F818000, 0x3F82), (0x3F808001, 0x3F81), (0x7F7FFFFF, 0x7F80),
           (0x7F800001, 0x7FC0), (0x807FFFFF, 0x8000)]
    a, want = (np.array(c, dtype=np.uint32) for c in zip(*cvt))
    check(simulate(FP32ToBF16(), {"a": a}), want, {"a": a})


@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)), min_size=1, max_size=64))
def test_fp32_add_hypothesis(pairs):
    a = np.array([p[0] for p in pairs], np.uint32)
    b = np.array([p[1] for p in pairs], np.uint32)
    check(simulate(FP32Add(), {"a": a, "b": b}), ref_add(a, b), {"a": a, "b": b})
