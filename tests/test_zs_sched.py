"""TensorDash's zero-skipping scheduler (issue 18): the reference model's properties, the block
(hdl/zs_sched.py) against it (exhaustive on seed 001's 4 x 4 buffer, random on other shapes), and
the speedups the model gives on random sparsity."""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from gen.design.config import FettaConfig
from gen.errors import ConfigError
from hdl.zs_sched import ZeroSkipScheduler, zs_sched_from_config
from sim.zs_model import options, run_stream, schedule

PAPER = options(4, 4, 3)


def test_options_are_seed_001_fig5():
    """(+0,i), lookahead (+1,i) (+2,i) (+3,i), lookaside (+1,i+1) (+1,i-1) (+2,i+2) (+3,i+3)."""
    assert PAPER == [(0, 0), (1, 0), (2, 0), (3, 0), (1, 1), (1, -1), (2, 2), (3, 3)]
    with pytest.raises(ValueError):
        options(4, 4, 4)


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
    for field, value in (("zs_depth", 1), ("zs_depth", 9), ("zs_lookahead", 0), ("zs_lookahead", 4)):
        with pytest.raises(ConfigError) as exc:
            FettaConfig(**{field: value})
        assert exc.value.field == field
