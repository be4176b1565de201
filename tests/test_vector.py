# amaranth: UnusedElaboratable=no
"""The vector unit (hdl/vector.py) in the Amaranth simulator against :func:`sim.vector_ref.vec_ref`,
and :func:`vec_ref` itself against a float64 reading of the documented op sequence."""

import numpy as np
import pytest
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from gen.design.config import FettaConfig
from gen.errors import ConfigError
from gen.design.isa import Instr, Opcode
from gen.design.isa import check as isa_check
from tests.test_controller import GEO as CGEO
from tests.test_controller import decode_rtl
from gen.design.isa import BF16_ONE, VecOp
from gen.design.vtables import EXP_SAT_E, EXP_SAT_MP
from hdl.vector import VectorUnit, vec_rows
from sim.vector_ref import exp_bits, vec_ref
from tests.strategies import examples
from sim import bf16 as fp

LANES = 8
CFG = FettaConfig(vector_lanes=LANES)
ICFG = FettaConfig(datatype="int16", vector_lanes=LANES)

#: special bfloat16 / FP32 patterns: zeros, subnormals, inf, NaNs, max, min normal, one
SPECIAL16 = [0x0000, 0x8000, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F7F, 0xFF7F, 0x0080, 0x8080,
             0x3F80, 0xBF80]
SPECIAL32 = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFA00001,
             0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x80800000, 0x3F800000, 0x33800000]


def run_unit(config, batches):
    """``batches``: list of (op, scalar, x_bits[LANES], y_bits[LANES]); one per cycle, back to back."""
    dut = VectorUnit(config, lanes=LANES)
    EB, AB = config.elem_bits, config.acc_bits
    out = []

    lat = dut.latency
    # the multiplier, the adder less its last register, the result register with pipelined multipliers
    assert lat == config.mul_latency + config.add_latency - 1 + (config.mul_latency >= 2)

    async def tb(ctx):
        for t in range(len(batches) + lat):
            if t < len(batches):
                op, a, xs, ys = batches[t]
                ctx.set(dut.op, op)
                ctx.set(dut.scalar, a)
                ctx.set(dut.valid, 1)
                ctx.set(dut.x, sum(int(v) << (EB * k) for k, v in enumerate(xs)))
                ctx.set(dut.y, sum(int(v) << (AB * k) for k, v in enumerate(ys)))
            else:
                ctx.set(dut.valid, 0)
            await ctx.tick()
            # results of batch i are valid ``latency`` cycles after its operands
            i = t + 1 - lat
            if 0 <= i < len(batches):
                assert ctx.get(dut.o_valid) == 1
                o, n = ctx.get(dut.o), ctx.get(dut.o_narrow)
                out.append(([(o >> (AB * k)) & ((1 << AB) - 1) for k in range(LANES)],
                            [(n >> (EB * k)) & ((1 << EB) - 1) for k in range(LANES)]))
        assert ctx.get(dut.o_valid) == 0

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    return out


def check(config, batches):
    got = run_unit(config, batches)
    for (op, a, xs, ys), (o, n) in zip(batches, got):
        ro, rn = vec_ref(config, op, a, np.array(xs, np.uint64), np.array(ys, np.uint64))
        assert [int(v) for v in ro] == o, (VecOp(op).name, hex(a), [hex(v) for v in xs], [hex(v) for v in ys])
        assert [int(v) for v in rn] == n, (VecOp(op).name, "narrow")


@pytest.mark.parametrize("latencies", [(1, 1), (2, 2), (2, 3), (1, 4), (1, 5), (1, 6), (2, 7)], ids=lambda x: f"M{x[0]}S{x[1]}")
def test_special_values_every_op(latencies):
    """Every operation on special values, back to back, at several multiplier / adder latencies
    (every count of :data:`hdl.vfunc.FUNC_CUTS`)."""
    rng = np.random.default_rng(1)
    batches = []
    for op in VecOp:
        for a in (BF16_ONE, 0xBC24, 0x0000, 0x8000, 0x7F80, 0x7FC0, 0x0001, 0x7F7F):
            for _ in range(3):
                xs = rng.choice(SPECIAL16, LANES)
                ys = rng.choice(SPECIAL32, LANES)
                batches.append((int(op), a, xs, ys))
    ml, al = latencies
    check(CFG.replace(mul_latency=ml, add_latency=al), batches)
    check(ICFG.replace(mul_latency=ml, add_latency=al),
          [(op, a, xs, [int(y) & 0xFFFF for y in ys]) for op, a, xs, ys in batches])


bf16_pat = st.integers(0, 0xFFFF)
f32_pat = st.one_of(st.integers(0, 0xFFFFFFFF), st.sampled_from(SPECIAL32))


@settings(max_examples=examples(10, 25), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(list(VecOp)), st.one_of(bf16_pat, st.sampled_from(SPECIAL16)),
                          st.lists(st.one_of(bf16_pat, st.sampled_from(SPECIAL16)), min_size=LANES, max_size=LANES),
                          st.lists(f32_pat, min_size=LANES, max_size=LANES)), min_size=1, max_size=4))
def test_random_bf16(batches):
    check(CFG, [(int(op), a, xs, ys) for op, a, xs, ys in batches])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(list(VecOp)), st.integers(0, 0xFFFF),
                          st.lists(st.integers(0, 0xFFFF), min_size=LANES, max_size=LANES),
                          st.lists(st.integers(0, (1 << 32) - 1), min_size=LANES, max_size=LANES)),
                min_size=1, max_size=4))
def test_random_int(batches):
    check(ICFG, [(int(op), a, xs, ys) for op, a, xs, ys in batches])


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF), st.integers(0, 0xFFFFFFFF))
def test_ref_against_float64(a, x, y):
    """Finite, normal operands: the reference ops are the correctly rounded FP32 results."""
    xv = float(fp.bf16_to_f32(fp.bf16_from_bits(np.uint16(x))))
    av = float(fp.bf16_to_f32(fp.bf16_from_bits(np.uint16(a))))
    yv = float(fp.ftz32(fp.f32_from_bits(np.uint32(y))))
    if not all(np.isfinite(v) for v in (xv, av, yv)):
        return
    def r32(v):
        with np.errstate(over="ignore"):
            return float(fp.ftz32(np.float32(v)))
    # MUL: the 24 x 8-bit product is exact in float64, so r32 is the one IEEE rounding, then the flush
    for op, want in ((VecOp.ADD, r32(yv + xv)), (VecOp.AXPY, r32(yv + r32(av * xv))), (VecOp.SCALE, r32(av * xv)),
                     (VecOp.RELU, max(yv, 0.0) + 0.0), (VecOp.MUL, r32(yv * xv)), (VecOp.MAX, max(yv, xv))):
        o, _ = vec_ref(CFG, op, a, np.array([x], np.uint64), np.array([y], np.uint64))
        got = float(fp.f32_from_bits(np.uint32(o[0])))
        if np.isnan(want):
            assert np.isnan(got)
        else:
            assert got == want, (op, got, want)
    # RELU never yields -0
    o, _ = vec_ref(CFG, VecOp.RELU, 0, np.array([x], np.uint64), np.array([0x80000000], np.uint64))
    assert int(o[0]) == 0


def _bf16_correct(v):
    """float64 ``v`` correctly rounded to bfloat16 (RNE), flushed below ``2**-126``, ``+-inf`` at ``2**128``."""
    v = np.asarray(v, np.float64)
    m, e = np.frexp(v)                                 # v = m * 2**e, 0.5 <= |m| < 1: 8 bits of m kept
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.ldexp(np.rint(np.ldexp(m, 8)), e - 8)   # np.rint: ties to even
        r = np.where(np.abs(r) < 2.0 ** -126, 0.0 * r, r)
        return np.where(np.abs(r) >= 2.0 ** 128, np.copysign(np.inf, r), r)


ALL16 = np.arange(1 << 16, dtype=np.uint64)


def _widened(bits16):
    return fp.bf16_to_f32(fp.bf16_from_bits(np.asarray(bits16, np.uint16))).astype(np.float64)


def _as_f64(bits32):
    return fp.f32_from_bits(np.asarray(bits32, np.uint32)).astype(np.float64)


def _same(got, want):
    """Equal values with equal signs of zero, or both NaN."""
    return (np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want)))


def test_recip_rsqrt_exhaustive_against_float64():
    """RECIP and RSQRT over all 65,536 bfloat16 inputs: ``o`` is the correctly rounded FP32 result
    (RECIP: numpy's IEEE float32 division, then FTZ, bit for bit; RSQRT: within 0.5 FP32 ulp of
    float64) and ``o_narrow`` the correctly rounded bfloat16 of the float64 value (0.5 ulp)."""
    x = _widened(ALL16)
    ro, rn = vec_ref(CFG, VecOp.RECIP, 0, ALL16, np.zeros_like(ALL16))
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        want = fp.ftz32(np.float32(1) / x.astype(np.float32))
        assert np.array_equal(ro, fp.f32_bits(want).astype(np.uint64))
        assert _same(_widened(rn), _bf16_correct(1 / x)).all()
    so, sn = vec_ref(CFG, VecOp.RSQRT, 0, ALL16, np.zeros_like(ALL16))
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = 1 / np.sqrt(x)
    got = _as_f64(so)
    assert _same(got[~np.isfinite(exact) | (exact == 0)], exact[~np.isfinite(exact) | (exact == 0)]).all()
    fin = np.isfinite(exact) & (exact != 0)
    ulp32 = np.ldexp(1.0, np.frexp(exact[fin])[1] - 24)
    assert (np.abs(got[fin] - exact[fin]) <= 0.5 * ulp32).all()
    assert _same(_widened(sn), _bf16_correct(exact)).all()
    # RSQRT: negative numbers (not -0) and NaN give the canonical NaN
    assert set(int(v) for v in so[np.isnan(x) | (x < 0)]) == {0x7FC00000}


#: measured largest relative error of EXP's FP32 result against float64 (2**-17.96, see below)
EXP_REL_BOUND = 2.0 ** -17.9


def test_exp_exhaustive_against_float64():
    """EXP over all 65,536 bfloat16 ``x`` (``a = 1``): ``o_narrow`` is the correctly rounded bfloat16
    of float64 ``exp(x)`` (FTZ below ``2**-126``, ``+inf`` from ``2**128``) for every input; ``o`` is
    within :data:`EXP_REL_BOUND` relative (measured 3.77e-6 = 2**-18.02); NaN -> canonical NaN."""
    x = _widened(ALL16)
    o, n = vec_ref(CFG, VecOp.EXP, BF16_ONE, ALL16, np.zeros_like(ALL16))
    with np.errstate(over="ignore"):
        exact = np.exp(x)
    assert _same(_widened(n), _bf16_correct(exact)).all()
    got = _as_f64(o)
    normal = (exact >= 2.0 ** -126) & (exact < 2.0 ** 128)
    assert (np.abs(got[normal] - exact[normal]) <= EXP_REL_BOUND * exact[normal]).all()
    assert (got[exact < 2.0 ** -126] == 0).all() and np.isinf(got[np.isfinite(x) & (exact > 2.0 ** 128)]).all()
    assert set(int(v) for v in o[np.isnan(x)]) == {0x7FC00000}
    assert int(o[0]) == 0x3F800000 == int(o[0x8000])      # exp(+-0) = 1 exactly


def test_exp_of_every_product_against_float64():
    """EXP of every FP32 ``p`` with a 16-bit significand (a superset of the products ``x * a``):
    within :data:`EXP_REL_BOUND` of float64 where the result is a normal number (measured
    3.93e-6 = 2**-17.96), ``+0`` below ``2**-126``, ``+inf`` above ``2**128``."""
    sig = np.arange(1 << 15, dtype=np.uint64) << np.uint64(8)
    worst = 0.0
    for s in (0, 1):
        for e in range(0, 256):
            pb = (np.uint64(s) << np.uint64(31)) | (np.uint64(e) << np.uint64(23)) | sig
            got = _as_f64(exp_bits(pb))
            p = _as_f64(fp.f32_bits(fp.ftz32(fp.f32_from_bits(pb.astype(np.uint32)))))
            with np.errstate(over="ignore"):
                exact = np.exp(p)
            normal = (exact >= 2.0 ** -126) & (exact < 2.0 ** 128)
            if normal.any():
                worst = max(worst, float(np.max(np.abs(got[normal] - exact[normal]) / exact[normal])))
            assert (got[exact < 2.0 ** -126 * (1 - 1e-5)] == 0).all(), (s, e)
            assert np.isinf(got[exact > 2.0 ** 128 * (1 + 1e-5)]).all(), (s, e)
            assert _same(got[np.isnan(p)], np.full(int(np.isnan(p).sum()), np.nan)).all()
    assert 2.0 ** -18.5 < worst <= EXP_REL_BOUND


def test_exp_saturation_threshold():
    """The RTL tests EXP's saturation (``|u| >= 128`` after rounding) on ``p`` itself:
    ``e > EXP_SAT_E``, or ``e == EXP_SAT_E`` and the significand at least ``EXP_SAT_MP``. The
    reference, which tests the rounded ``|u|``, agrees on every 16-bit significand at every exponent,
    and the RTL on bfloat16 products next to the threshold (``x * a`` one significand step either side)."""
    sig = np.arange(1 << 15, 1 << 16, dtype=np.uint64)
    for e in range(120, 140):
        pb = (np.uint64(e) << np.uint64(23)) | ((sig - np.uint64(1 << 15)) << np.uint64(8))
        got = exp_bits(pb)
        want_sat = (e > EXP_SAT_E) | ((e == EXP_SAT_E) & (sig >= EXP_SAT_MP))
        assert ((got == 0x7F800000) == want_sat).all(), e
    # x * a with the product's significand X * A straddling EXP_SAT_MP at EXP_SAT_E: a = 1.A * 2**3,
    # x = 1.X * 2**3 (|p| = 64 .. 128 when X * A >= 2**15)
    pairs = []
    for A in range(128, 256):
        X = -(-EXP_SAT_MP // A)                      # the first significand at or above the threshold
        if X < 256 and (X - 1) * A >= 1 << 15:
            pairs.append((A, X - 1, X))
    assert {x * A >= EXP_SAT_MP for A, lo, hi in pairs for x in (lo, hi)} == {False, True}
    batches = []
    for A, lo, hi in pairs[:LANES]:
        a = (130 << 7) | (A - 128)
        xs = [(s << 15) | (130 << 7) | (x - 128) for x in (lo, hi) for s in (0, 1)]
        xs = (xs * LANES)[:LANES]
        batches.append((int(VecOp.EXP), a, xs, [0] * LANES))
    check(CFG.replace(mul_latency=2, add_latency=7), batches)
    check(CFG, batches)


def test_max_when_y_has_the_high_bits_of_x():
    """MAX compares ``x`` with ``y``'s high 16 bits and tests ``y``'s low bits beside them: ``y`` equal
    to ``x`` widened, a low bit above it, and the next bfloat16 step either side, both signs, zeros."""
    xs_all = [0x3F80, 0xBF80, 0x4049, 0xC049, 0x0080, 0x8080, 0x7F7F, 0x0000, 0x8000]
    batches = []
    for x in xs_all:
        wide = x << 16
        ys = [wide, wide | 1, wide | 0x8000, wide + (1 << 16), wide - (1 << 16), wide ^ (1 << 31),
              (wide ^ (1 << 31)) | 1, 0x00000001]
        batches.append((int(VecOp.MAX), BF16_ONE, [x] * LANES, [y & 0xFFFFFFFF for y in ys][:LANES]))
    for latencies in ((1, 1), (2, 7)):
        check(CFG.replace(mul_latency=latencies[0], add_latency=latencies[1]), batches)


def test_mul_rounds_up_to_the_smallest_normal():
    """MUL rounds once on IEEE's subnormal grid, then flushes: ``(2**-125 - 2**-149) * 0.5`` is a tie
    that rounds up to ``2**-126`` (kept), just below it the result flushes to ``+-0``; overflow to inf."""
    x_half = 0x3F00
    x_low = 0x3F7F                                     # 1 - 2**-8
    cases = [(0x00FFFFFF, x_half, 0x00800000), (0x80FFFFFF, x_half, 0x80800000), (0x00FFFFFE, x_half, 0x00000000),
             (0x00808080, x_low, 0x00800000), (0x0080807F, x_low, 0x00000000), (0x00808081, x_low, 0x00800000),
             (0x7F7FFFFF, 0x4000, 0x7F800000), (0xFF7FFFFF, 0x3F80, 0xFF7FFFFF)]
    for y, x, want in cases:
        o, _ = vec_ref(CFG, VecOp.MUL, 0, np.array([x], np.uint64), np.array([y], np.uint64))
        assert int(o[0]) == want, (hex(y), hex(x), hex(int(o[0])))
    batches = [(int(VecOp.MUL), 0, [x for _, x, _ in cases] + [x_half] * (LANES - len(cases)),
                [y for y, _, _ in cases] + [0x00FFFFFF] * (LANES - len(cases)))]
    check(CFG, batches)


@pytest.mark.parametrize("latencies", [(1, 1), pytest.param((2, 3), marks=pytest.mark.slow), (2, 7)],
                         ids=lambda x: f"M{x[0]}S{x[1]}")     # every latency: test_special_values_every_op
def test_rom_ops_cover_every_entry(latencies):
    """RTL == reference for RECIP and RSQRT on every ROM entry (all fractions at odd and even
    exponents, the range ends), EXP on all ``x`` of ``2**-4 <= |x| < 128`` (every segment of its
    table) and MAX / MUL beside them, back to back with the ops interleaved."""
    xs = [(e << 7) | m for e in (1, 2, 126, 127, 128, 253, 254) for m in range(128)] + SPECIAL16
    ex = [(s << 15) | (e << 7) | m for s in (0, 1) for e in range(123, 134) for m in range(128)]
    rng = np.random.default_rng(5)
    batches = []
    for k in range(0, len(ex), LANES):
        for op, pool in ((VecOp.EXP, ex), (VecOp.RECIP, xs), (VecOp.RSQRT, xs), (VecOp.MAX, xs), (VecOp.MUL, xs)):
            lane = [pool[(k + j) % len(pool)] for j in range(LANES)]
            ys = rng.choice(SPECIAL32 + [int(v) for v in rng.integers(0, 1 << 32, 8)], LANES)
            batches.append((int(op), BF16_ONE, lane, ys))
    ml, al = latencies
    check(CFG.replace(mul_latency=ml, add_latency=al), batches)


def test_int_ref_examples():
    o, n = vec_ref(ICFG, VecOp.AXPY, 0xFFFE, np.array([3, 0xFFFF], np.uint64), np.array([10, 5], np.uint64))
    assert [int(v) for v in o] == [4, 7]                # 10 + (-2)*3, 5 + (-2)*(-1)
    o, _ = vec_ref(ICFG, VecOp.RELU, 0, np.array([0, 0], np.uint64), np.array([(1 << 48) - 4, 9], np.uint64))
    assert [int(v) for v in o] == [0, 9]
    o, _ = vec_ref(ICFG, VecOp.MUL, 0, np.array([3, 0xFFFF], np.uint64), np.array([10, 5], np.uint64))
    assert [int(v) for v in o] == [30, (1 << ICFG.acc_bits) - 5]
    o, _ = vec_ref(ICFG, VecOp.MAX, 0, np.array([3, 0xFFFF], np.uint64), np.array([10, (1 << ICFG.acc_bits) - 7],
                                                                                   np.uint64))
    assert [int(v) for v in o] == [10, (1 << ICFG.acc_bits) - 1]
    for op in (VecOp.EXP, VecOp.RECIP, VecOp.RSQRT):     # not in the integer datatype: 0
        o, _ = vec_ref(ICFG, op, 0, np.array([3], np.uint64), np.array([10], np.uint64))
        assert int(o[0]) == 0


def test_vec_rows_and_config_errors():
    assert vec_rows(FettaConfig()) == 16
    assert vec_rows(FettaConfig(banks=4, net_ports=4, num_ces=4)) == 4
    assert vec_rows(FettaConfig(vector_lanes=8)) == 2
    with pytest.raises(ConfigError) as e:
        vec_rows(FettaConfig(vector_lanes=12))
    assert e.value.field == "vector_lanes"
    with pytest.raises(ConfigError):
        VectorUnit(FettaConfig(), lanes=0)


@st.composite
def vec_instrs(draw):
    addr = st.one_of(st.integers(0, 40), st.integers(CGEO.accum_rows - 20, CGEO.unified_half_rows + 5))
    return Instr(opcode=Opcode.VEC, mode=draw(st.sampled_from([*range(10), 15])), flags=draw(st.integers(0, 3)),
                 K=draw(st.sampled_from([0, 1, 2, 5, 12])), a_base=draw(addr), o_base=draw(addr),
                 w_base=draw(addr), a_sk=draw(st.integers(0, 9)), o_sk=draw(st.integers(0, 9)),
                 scalar=draw(st.integers(0, 0xFFFF)))


@settings(max_examples=2, database=None, deadline=None)
@given(st.lists(vec_instrs(), min_size=60, max_size=60))
def test_decoder_vec_matches_isa_check(batch):
    """The controller's VEC checks (RTL) give the error code of :func:`gen.design.isa.check`."""
    assert [int(isa_check(i, CGEO)) for i in batch] == decode_rtl([i.encode() for i in batch])
