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
from hdl.vector import VectorUnit, vec_rows
from sim.vector_ref import vec_ref
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
    assert lat == config.mul_latency + config.add_latency - 1

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


@pytest.mark.parametrize("latencies", [(1, 1), (2, 3), (1, 4)], ids=lambda x: f"M{x[0]}S{x[1]}")
def test_special_values_every_op(latencies):
    """Every operation on special values, back to back, at several multiplier / adder latencies."""
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


@settings(max_examples=25, deadline=None)
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
    for op, want in ((VecOp.ADD, r32(yv + xv)), (VecOp.AXPY, r32(yv + r32(av * xv))), (VecOp.SCALE, r32(av * xv)),
                     (VecOp.RELU, max(yv, 0.0) + 0.0)):
        o, _ = vec_ref(CFG, op, a, np.array([x], np.uint64), np.array([y], np.uint64))
        got = float(fp.f32_from_bits(np.uint32(o[0])))
        if np.isnan(want):
            assert np.isnan(got)
        else:
            assert got == want, (op, got, want)
    # RELU never yields -0
    o, _ = vec_ref(CFG, VecOp.RELU, 0, np.array([x], np.uint64), np.array([0x80000000], np.uint64))
    assert int(o[0]) == 0


def test_int_ref_examples():
    o, n = vec_ref(ICFG, VecOp.AXPY, 0xFFFE, np.array([3, 0xFFFF], np.uint64), np.array([10, 5], np.uint64))
    assert [int(v) for v in o] == [4, 7]                # 10 + (-2)*3, 5 + (-2)*(-1)
    o, _ = vec_ref(ICFG, VecOp.RELU, 0, np.array([0, 0], np.uint64), np.array([(1 << 48) - 4, 9], np.uint64))
    assert [int(v) for v in o] == [0, 9]


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
    return Instr(opcode=Opcode.VEC, mode=draw(st.sampled_from([0, 1, 2, 3, 4])), flags=draw(st.integers(0, 3)),
                 K=draw(st.sampled_from([0, 1, 2, 5, 12])), a_base=draw(addr), o_base=draw(addr),
                 w_base=draw(addr), a_sk=draw(st.integers(0, 9)), o_sk=draw(st.integers(0, 9)),
                 scalar=draw(st.integers(0, 0xFFFF)))


@settings(max_examples=2, database=None, deadline=None)
@given(st.lists(vec_instrs(), min_size=60, max_size=60))
def test_decoder_vec_matches_isa_check(batch):
    """The controller's VEC checks (RTL) give the error code of :func:`gen.design.isa.check`."""
    assert [int(isa_check(i, CGEO)) for i in batch] == decode_rtl([i.encode() for i in batch])
