"""TensorDash's zero-skipping scheduler (issue 18): the reference model's properties, the block
(hdl/zs_sched.py) against it (exhaustive on seed 001's 4 x 4 buffer, random on other shapes), and
the speedups the model gives on random sparsity."""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from gen.design.config import FettaConfig, load_config
from gen.errors import ConfigError
from hdl.zs_sched import ZeroSkipScheduler, zs_sched_from_config
from hdl.zs_unit import ZeroSkipUnit
from sim.zs_model import options, run_stream, schedule

PAPER = options(4, 4, 3)


def test_options_are_seed_001_fig5():
    """(+0,i), lookahead (+1,i) (+2,i) (+3,i), lookaside (+1,i+1) (+1,i-1) (+2,i+2) (+3,i+3)."""
    assert PAPER == [(0, 0), (1, 0), (2, 0), (3, 0), (1, 1), (1, -1), (2, 2), (3, 3)]
    with pytest.raises(ValueError):
        options(4, 4, 4)
    # an output-stationary PE row: lookahead only (a neighbouring row computes other outputs), even
    # where lookaside options would wrap onto the row itself
    assert options(4, 8, 7, lookaside=False) == [(s, 0) for s in range(8)]
    assert options(1, 6, 3) != options(1, 6, 3, lookaside=False) == [(s, 0) for s in range(4)]


def _bits(x: int, depth: int, lanes: int) -> list[list[bool]]:
    return [[bool(x >> (s * lanes + lane) & 1) for lane in range(lanes)] for s in range(depth)]


@settings(max_examples=300, deadline=None)
@given(x=st.integers(0, (1 << 16) - 1))
def test_model_properties(x):
    eff = _bits(x, 4, 4)
    sel, left, adv = schedule(eff, PAPER)
    taken = [(s, lane) for s in range(4) for lane in range(4) if eff[s][lane] and not left[s][lane]]
    picks = [((PAPER[k][0], (i + PAPER[k][1]) % 4)) for i, k in enumerate(sel) if k is not None]
    assert sorted(picks) == sorted(taken) and len(set(picks)) == len(picks)   # each pair at most once
    assert all(eff[s][lane] for s, lane in picks)                            # only effectual pairs
    assert not any(left[0]) and adv >= 1                                     # row 0 always drains
    assert all(not any(left[s]) for s in range(adv)) and (adv == 4 or any(left[adv]))


def test_model_dense_and_empty():
    sel, left, adv = schedule(_bits((1 << 16) - 1, 4, 4), PAPER)
    assert sel == [0, 0, 0, 0] and adv == 1                  # dense: no slowdown
    assert schedule(_bits(0, 4, 4), PAPER)[2] == 4           # nothing effectual: the whole buffer drains


def _rtl(dut: ZeroSkipScheduler, patterns):
    out = []

    async def tb(ctx):
        for x in patterns:
            ctx.set(dut.eff, x)
            out.append(([ctx.get(dut.sel[i]) for i in range(dut.lanes)], ctx.get(dut.take), ctx.get(dut.left),
                        ctx.get(dut.advance)))

    sim = Simulator(dut)
    sim.add_testbench(tb)
    sim.run()
    return out


def _check(dut: ZeroSkipScheduler, patterns):
    L, D = dut.lanes, dut.depth
    for x, (sel, take, left, adv) in zip(patterns, _rtl(dut, patterns)):
        msel, mleft, madv = schedule(_bits(x, D, L), dut.options)
        assert sel == [k or 0 for k in msel], x
        assert take == sum(1 << i for i, k in enumerate(msel) if k is not None), x
        assert left == sum(1 << (s * L + lane) for s in range(D) for lane in range(L) if mleft[s][lane]), x
        assert adv == madv, x


def test_rtl_exhaustive_paper_configuration():
    """Every one of the 65,536 patterns of the 4-deep, 4-lane buffer (lookahead 3)."""
    _check(ZeroSkipScheduler(4, 4, 3), range(1 << 16))


@settings(max_examples=20, deadline=None)
@given(lanes=st.integers(2, 8), depth=st.integers(2, 6), data=st.data())
def test_rtl_other_shapes(lanes, depth, data):
    lookahead = data.draw(st.integers(1, depth - 1))
    rng = random.Random(data.draw(st.integers(0, 1 << 16)))
    n = depth * lanes
    pats = [0, (1 << n) - 1] + [rng.getrandbits(n) & rng.getrandbits(n) for _ in range(200)]
    _check(ZeroSkipScheduler(lanes, depth, lookahead), pats)


@settings(max_examples=20, deadline=None)
@given(depth=st.integers(2, 8), data=st.data())
def test_rtl_lookahead_only(depth, data):
    """The block with lookahead options only (an OS CE's PE rows) equals the model."""
    look = data.draw(st.integers(1, depth - 1))
    dut = ZeroSkipScheduler(4, depth, look, lookaside=False)
    assert dut.options == [(s, 0) for s in range(look + 1)]
    _check(dut, [data.draw(st.integers(0, (1 << (4 * depth)) - 1)) for _ in range(16)])


@pytest.mark.parametrize("zeros, low", [(0.0, 1.0), (0.5, 1.7), (0.9, 3.0)])
def test_stream_speedups_reach_the_issue_goals(zeros, low):
    """Random zeros in one operand, one 4-lane unit, 4-deep buffer: no slowdown at 0 %, >= 1.7x at
    50 %, >= 3x at 90 % (issue 18's goals for the GEMM; the buffer depth caps it at 4x)."""
    rng = random.Random(7)
    rows = [[rng.random() >= zeros for _ in range(4)] for _ in range(4096)]
    speedup = len(rows) / run_stream(rows, PAPER, 4)
    assert low <= speedup <= 4.0
    if zeros == 0.0:
        assert speedup == 1.0


def test_config_fields():
    dut = zs_sched_from_config(FettaConfig())
    dut._MustUse__silence = True          # constructed to read its parameters
    assert (dut.lanes, dut.depth, dut.lookahead, dut.options) == (4, 4, 3, PAPER)
    for field, value in (("zero_skip_depth", 1), ("zero_skip_depth", 9), ("zero_skip_lookahead", 0),
                         ("zero_skip_lookahead", 4), ("zero_skip_refill", 0), ("zero_skip_refill", 5)):
        with pytest.raises(ConfigError) as exc:
            FettaConfig(**{field: value})
        assert exc.value.field == field
    from hdl.zs_rows import zs_rows_from_config

    rows = zs_rows_from_config(FettaConfig(zero_skip_depth=8, zero_skip_lookahead=7, zero_skip_refill=4))
    rows._MustUse__silence = rows._sched._MustUse__silence = True       # constructed to read its parameters
    assert (rows.rows, rows.cols, rows.depth, rows.refill) == (4, 4, 8, 4)
    assert rows.options == [(s, 0) for s in range(8)]
    off = load_config(None, ["zero_skip_lookaside=false"])
    sched = zs_sched_from_config(off)
    sched._MustUse__silence = True
    assert off.zero_skip_lookaside is False and sched.options == [(0, 0), (1, 0), (2, 0), (3, 0)]
    with pytest.raises(ConfigError) as exc:
        load_config(None, ["zero_skip_lookaside=sometimes"])
    assert exc.value.field == "zero_skip_lookaside"


def _unit_run(unit: ZeroSkipUnit, a_rows, b_rows):
    """Feed a stream through the unit; returns the (row, lane) pairs each cycle multiplied (found by
    their operands, which are unique per pair here) and the cycles."""
    L, D = unit.lanes, unit.depth
    n = len(a_rows)
    where = {(a_rows[r][ln], b_rows[r][ln]): (r, ln) for r in range(n) for ln in range(L)}
    got, cycles = [], 0

    async def tb(ctx):
        nonlocal cycles
        pos = 0
        while pos < n:
            ctx.set(unit.win_valid, sum(1 << k for k in range(D) if pos + k < n))
            for s in range(D):
                r = pos + s
                for ln in range(L):
                    ctx.set(unit.win_a[s * L + ln], a_rows[r][ln] if r < n else 0)
                    ctx.set(unit.win_b[s * L + ln], b_rows[r][ln] if r < n else 0)
            for ln in range(L):
                if ctx.get(unit.mul_valid[ln]):
                    got.append(where[(ctx.get(unit.mul_a[ln]), ctx.get(unit.mul_b[ln]))])
            adv = ctx.get(unit.advance)
            assert adv >= 1
            await ctx.tick()
            cycles += 1
            pos += adv

    sim = Simulator(unit)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return got, cycles


@settings(max_examples=10, deadline=None)
@given(zeros=st.sampled_from([0.0, 0.3, 0.6, 0.9]), seed=st.integers(0, 1 << 16))
def test_unit_multiplies_every_effectual_pair_once(zeros, seed):
    """The unit (window + taken state + scheduler + multiplexers) against the stream model: every pair
    with two non-zero operands multiplied exactly once, no other, in run_stream's number of steps."""
    rng = random.Random(seed)
    n, L = 64, 4
    # distinct non-zero operands per pair (so a product's pair is known); zeros on the A side
    a_rows = [[0 if rng.random() < zeros else 2 * (r * L + ln) + 1 for ln in range(L)] for r in range(n)]
    b_rows = [[1000 + r * L + ln for ln in range(L)] for r in range(n)]
    unit = ZeroSkipUnit(4, 4, 3, width=16, fmt="int")
    got, cycles = _unit_run(unit, a_rows, b_rows)
    want = [(r, ln) for r in range(n) for ln in range(L) if a_rows[r][ln]]
    assert sorted(got) == want
    eff = [[bool(a_rows[r][ln]) for ln in range(L)] for r in range(n)]
    assert cycles == run_stream(eff, PAPER, 4)


def test_unit_bf16_zero_test():
    """bf16: +0, -0 and subnormals (flushed by the multiplier) are skipped, 1.0 and -2.0 are not."""
    unit = ZeroSkipUnit(4, 2, 1, width=16, fmt="bf16")
    one, mtwo, mzero, sub = 0x3F80, 0xC000, 0x8000, 0x0001
    a = [[one, mzero, sub, mtwo], [0, 0, 0, 0]]
    b = [[one, one, one, one], [0, 0, 0, 0]]
    out = []

    async def tb(ctx):
        ctx.set(unit.win_valid, 0b01)
        for s in range(2):
            for ln in range(4):
                ctx.set(unit.win_a[s * 4 + ln], a[s][ln])
                ctx.set(unit.win_b[s * 4 + ln], b[s][ln])
        out.append(ctx.get(unit.mul_valid))

    sim = Simulator(unit)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert out == [0b1001]


# --- the stream's refill rate and the projection onto the GEMM tiler (sim/zs_gemm.py) ---------------

@settings(max_examples=200, deadline=None)
@given(lanes=st.integers(1, 5), depth=st.integers(2, 6), data=st.data())
def test_stream_refill(lanes, depth, data):
    """A refill of ``depth`` rows per step is the unlimited one; one row per step takes a step per
    row whatever the zeros."""
    look = data.draw(st.integers(1, depth - 1))
    n = data.draw(st.integers(1, 40))
    rows = [[data.draw(st.booleans()) for _ in range(lanes)] for _ in range(n)]
    opts = options(lanes, depth, look)
    free = run_stream(rows, opts, depth)
    assert run_stream(rows, opts, depth, depth) == free
    assert run_stream(rows, opts, depth, 1) == n
    assert n >= run_stream(rows, opts, depth, 2) >= -(-n // 2)
    with pytest.raises(ValueError):
        run_stream(rows, opts, depth, 0)


def test_feed_limit():
    from sim.zs_gemm import feed_limit

    cfg = FettaConfig()
    assert [feed_limit(cfg, g) for g in ((1, 16, 1), (2, 8, 1), (4, 4, 1), (1, 1, 16))] == [1, 2, 4, 1]


def _operands(zeros: float, size=(64, 64, 128), seed=3):
    import numpy as np

    M, N, K = size
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(np.float32)
    A[rng.random(A.shape) < zeros] = 0
    return A, rng.standard_normal((K, N)).astype(np.float32)


def test_projection_dense_and_empty():
    """Dense operands: exactly the passes' static cycle count (no slowdown at 0 %). All-zero IA with
    unlimited refill: every tile drains its buffer each cycle, ``max(ceil(Kc / depth), R)`` cycles."""
    import numpy as np

    from gen.compiler.gemm import plan_gemm
    from gen.design.timing import program_cycles
    from sim.zs_gemm import project_gemm

    cfg = FettaConfig()
    A, B = _operands(0.0)
    plan = plan_gemm(cfg, A, B)
    dense = sum(program_cycles(p.words, cfg) for p in plan.passes)
    for refill in (1, 2, None):
        p = project_gemm(cfg, A, B, refill)
        assert p.dense == p.lockstep == p.decoupled == dense and p.ideal(4) == 1.0
    p = project_gemm(cfg, np.zeros_like(A), B, None)
    gm, gn, gk = plan.grid
    Kc, R, D = plan.Kp // gk, cfg.ce_rows, cfg.zero_skip_depth
    want = 0
    for ps in plan.passes:
        tiles = (ps.Mc // (R * gm)) * (ps.Nc // (cfg.ce_cols * gn))
        want += (program_cycles(ps.words, cfg) - ((tiles - 1) * max(Kc, R) + Kc)
                 + (tiles - 1) * max(-(-Kc // D), R) + -(-Kc // D))
    assert p.lockstep == p.decoupled == want and p.effectual == 0 and p.ideal(D) == D


def test_projection_bounds_and_goals():
    """Half the IA values zero: lock step never beats decoupled CEs; today's one vector per cycle
    leaves no speedup at all; a 4 x 4 grid at the refill the
    memory allows with an 8-deep buffer comes to the issue's goals: 1.69-1.71x at 50 % over seeds
    3-6 (goal 1.7x: at it, not above), 3.8x at 90 % (goal 3x)."""
    from dataclasses import replace

    from sim.zs_gemm import feed_limit, project_gemm

    cfg = FettaConfig()
    A, B = _operands(0.5, (128, 128, 256))
    tiler = project_gemm(cfg, A, B, None)                    # K over the CEs: each its own IA values
    assert tiler.grid == (1, 1, 16) and tiler.lockstep > tiler.decoupled
    one = project_gemm(cfg, A, B, 1, grid=(1, 16, 1))
    assert one.lockstep == one.decoupled == one.dense
    free = project_gemm(cfg, A, B, None, grid=(1, 16, 1))
    assert free.grid == (1, 16, 1) and free.lockstep == free.decoupled      # the CEs share the IA rows
    assert 1.5 < free.speedup() <= free.ideal(cfg.zero_skip_depth)
    deep = replace(cfg, zero_skip_depth=8, zero_skip_lookahead=7)
    for zeros, goal in ((0.5, 1.65), (0.9, 3.0)):
        A, B = _operands(zeros, (128, 128, 256))
        p = project_gemm(deep, A, B, feed_limit(deep, (4, 4, 1)), grid=(4, 4, 1))
        assert p.grid == (4, 4, 1) and goal <= p.speedup() <= p.ideal(8), (zeros, p.speedup())


# --- the OS CE's front end (hdl/zs_rows.py) -------------------------------------------------------

def _rows_run(dut, a_rows, b_rows):
    """Feed the stream ``a_rows`` [n][R], ``b_rows`` [n][C] through ``dut`` (as many pairs per cycle
    as it takes); per row the ``(IA, IB vector)`` pairs it was given, in order, and the cycles."""
    from hdl.zs_rows import ZeroSkipRows  # noqa: F401  (the type of ``dut``)

    R, C, F = dut.rows, dut.cols, dut.refill
    n = len(a_rows)
    got = [[] for _ in range(R)]
    cycles = [0]

    async def tb(ctx):
        fed = pos = 0
        while pos < n:
            cnt = min(F, n - fed)
            ctx.set(dut.in_count, cnt)
            for j in range(cnt):
                for r in range(R):
                    ctx.set(dut.in_a[j * R + r], a_rows[fed + j][r])
                for c in range(C):
                    ctx.set(dut.in_b[j * C + c], b_rows[fed + j][c])
            for r in range(R):
                if ctx.get(dut.pe_valid[r]):
                    got[r].append((ctx.get(dut.pe_a[r]), [ctx.get(dut.pe_b[r * C + c]) for c in range(C)]))
            fed += ctx.get(dut.in_take)
            pos += ctx.get(dut.advance)
            cycles[0] += 1
            await ctx.tick()
            assert cycles[0] <= 2 * n + 4, "no progress"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return got, cycles[0]


@settings(max_examples=25, deadline=None)
@given(depth=st.integers(2, 8), data=st.data())
def test_zs_rows_against_the_model(depth, data):
    """Every PE row gets exactly its effectual pairs (IA element non-zero, IB vector not all zero),
    in ascending k (the dense order: the same FP32 sum), with the right IB vector, in the cycles of
    ``run_stream`` with the block's refill; dense streams take one cycle per k."""
    from hdl.zs_rows import ZeroSkipRows

    look = data.draw(st.integers(1, depth - 1))
    refill = data.draw(st.integers(1, depth))
    R, C = data.draw(st.sampled_from([(4, 4), (2, 4), (4, 2)]))
    dut = ZeroSkipRows(R, C, depth, look, refill, width=16, fmt="int")
    n = data.draw(st.integers(1, 24))
    za, zb = data.draw(st.sampled_from([0.0, 0.5, 0.9, 1.0])), data.draw(st.sampled_from([0.0, 0.5, 0.9]))
    rng = random.Random(data.draw(st.integers(0, 2 ** 16)))
    a_rows = [[(k * R + r + 1) if rng.random() >= za else 0 for r in range(R)] for k in range(n)]
    b_rows = [[rng.randrange(1, 1 << 16) if rng.random() >= zb else 0 for _ in range(C)] for k in range(n)]
    got, cycles = _rows_run(dut, a_rows, b_rows)
    for r in range(R):
        want = [(a_rows[k][r], b_rows[k]) for k in range(n) if a_rows[k][r] and any(b_rows[k])]
        assert got[r] == want, r
    eff = [[bool(a_rows[k][r] and any(b_rows[k])) for r in range(R)] for k in range(n)]
    assert cycles == run_stream(eff, dut.options, depth, refill)
    if refill == 1:
        assert cycles == n


def test_zs_rows_bf16_zero_test():
    """bf16: an IA element of +0, -0 or a subnormal is skipped; an IB vector counts as zero only when
    all its elements are."""
    from hdl.zs_rows import ZeroSkipRows

    one, mzero, sub = 0x3F80, 0x8000, 0x0001
    dut = ZeroSkipRows(2, 2, 2, 1, 1)
    a_rows = [[one, mzero], [sub, one], [one, one]]
    b_rows = [[one, 0], [one, one], [0, mzero]]
    got, _ = _rows_run(dut, a_rows, b_rows)
    assert got == [[(one, [one, 0])], [(one, [one, one])]]
