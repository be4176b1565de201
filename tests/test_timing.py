"""The DRAM timing rule (gen/design/timing.py): hand-worked cases and properties."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gen.compiler import compile_layer
from gen.compiler.gemm import plan_gemm, read_y_rows
from gen.design.config import FettaConfig
from gen.design.timing import RunTiming, dram_bytes_per_cycle, timeline, transfer_cycles
from gen.toolflow.execute import execute, run_emulator
from gen.workload.spec import load_spec
from sim.golden import random_inputs
from tests.programs import compiled

ROOT = Path(__file__).resolve().parents[1]


def test_bandwidth_of_the_default_configuration():
    assert dram_bytes_per_cycle(FettaConfig()) == 25.6          # LPDDR4 25.6 GB/s at 1 GHz
    assert transfer_cycles(0, 25.6) == 0 and transfer_cycles(1, 25.6) == 1 and transfer_cycles(256, 25.6) == 10


def test_one_run_is_serial():
    t = timeline([RunTiming(0, 100, 50, 30)], 10)
    assert (t.cycles, t.compute_cycles, t.dram_stall_cycles, t.dram_cycles) == (10 + 50 + 3, 50, 13, 13)


def test_ping_pong_hides_transfers_behind_compute():
    # W0 [0,10) C0 [10,110) while W1 [10,20); R0 [110,113) C1 [110,210); R1 [210,213)
    runs = [RunTiming(0, 100, 100, 30), RunTiming(1, 100, 100, 30)]
    t = timeline(runs, 10)
    assert t.cycles == 213 and t.dram_stall_cycles == 13


def test_same_half_runs_do_not_overlap_writes():
    # run 1 reuses half 0: its writes wait for run 0's reads
    runs = [RunTiming(0, 100, 100, 30), RunTiming(0, 100, 100, 30)]
    assert timeline(runs, 10).cycles == (10 + 100 + 3) * 2


def test_writes_wait_for_the_reads_they_carry():
    # run 1 (other half) writes what run 0 reads back: W0 [0,10) C0 [10,110) R0 [110,113)
    # W1 [113,123) C1 [123,223) R1 [223,226) - no overlap, unlike test_ping_pong_hides_transfers
    runs = [RunTiming(0, 100, 100, 30), RunTiming(1, 100, 100, 30, after=0)]
    assert timeline(runs, 10).cycles == 226
    with pytest.raises(ValueError):
        timeline([RunTiming(0, 1, 1, 1, after=0)], 10)


def test_compiled_writes_wait_for_their_read_backs():
    """A program's spilled tensors are written again only after they were read back
    (``Program.write_deps``): every write names data the host has by then."""
    cfg = FettaConfig()
    prog = compile_layer(load_spec(ROOT / "examples" / "atis_tt.json"), "train", cfg, pieces=1)
    deps = prog.write_deps()
    assert any(d >= 0 for d in deps)
    for i, run in enumerate(prog.runs):
        for w in run.writes:
            reads = [j for j in range(i) for rd in prog.runs[j].reads if rd.name == w.name]
            assert deps[i] >= max(reads, default=-1)


def test_dram_bound_sequence_is_the_dma_time():
    runs = [RunTiming(i % 2, 1000, 1, 1000) for i in range(6)]
    t = timeline(runs, 10)
    assert t.dram_cycles == 6 * 200
    assert t.dram_cycles <= t.cycles <= t.dram_cycles + 6


runs_st = st.lists(st.builds(RunTiming, st.integers(0, 1), st.integers(0, 4000), st.integers(0, 500),
                             st.integers(0, 4000)), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(runs_st, st.sampled_from([1.0, 8.0, 25.6, 1e9]))
def test_bounds(runs, bpc):
    t = timeline(runs, bpc)
    assert t.compute_cycles == sum(r.compute_cycles for r in runs)
    assert t.dram_cycles == sum(transfer_cycles(r.write_bytes, bpc) + transfer_cycles(r.read_bytes, bpc) for r in runs)
    # never faster than either resource alone, never slower than doing everything in series
    assert t.cycles >= max(t.compute_cycles, t.dram_cycles)
    assert t.cycles <= t.compute_cycles + t.dram_cycles
    # the first write and the last read cannot overlap with any compute
    first, last = transfer_cycles(runs[0].write_bytes, bpc), transfer_cycles(runs[-1].read_bytes, bpc)
    assert t.cycles >= first + t.compute_cycles + last


@settings(max_examples=200, deadline=None)
@given(runs_st)
def test_same_half_everywhere_is_serial(runs):
    runs = [RunTiming(0, r.write_bytes, r.compute_cycles, r.read_bytes) for r in runs]
    t = timeline(runs, 8.0)
    assert t.cycles == t.compute_cycles + t.dram_cycles


# --- the rule applied to compiled programs and dense plans -------------------------------------
@pytest.mark.xdist_group("examples")
@pytest.mark.parametrize("name,phase", [("atis_tt", "fp"), ("atis_tt", "train"), ("ht", "wg"), ("tr13", "bp")])
def test_compiled_program_timing_is_the_executed_one(name, phase):
    """The compiler's static timeline (instruction timing + DRAM rule) equals the emulator's execution,
    and the DRAM bytes it times are the program's counted DRAM traffic."""
    cfg = FettaConfig()
    spec, prog = compiled(name, phase)
    ex = execute(prog, random_inputs(spec, 0), cfg)
    static = prog.timeline(cfg)
    assert static == ex.timeline
    assert ex.compute_cycles == sum(c for c, _ in ex.trace)
    assert static.dram_bytes == prog.dram_bytes > 0
    assert ex.cycles == ex.compute_cycles + ex.dram_stall_cycles
    assert ex.dram_stall_cycles > 0                    # inputs must arrive before the first run


def test_dense_plan_timeline_matches_the_emulator():
    cfg = FettaConfig()
    rng = np.random.default_rng(3)
    A = rng.standard_normal((100, 70)).astype(np.float32)
    B = rng.standard_normal((70, 90)).astype(np.float32)
    plan = plan_gemm(cfg, A, B)
    _, cycles, _ = run_emulator(cfg, plan)
    t = plan.timeline(cfg)
    assert t.compute_cycles == cycles
    row_bytes = cfg.lanes * cfg.elem_bits // 8
    assert t.dram_bytes == sum(len(r) for p in plan.passes for _, r in p.writes) * row_bytes + \
        sum(n for p in plan.passes for _, n in read_y_rows(p)) * row_bytes
    assert t.cycles > cycles


def test_bandwidth_is_dram_or_the_dma_port_whichever_is_lower():
    """25.6 GB/s at 1 GHz is 25.6 B/cycle, below the 256-bit DMA port's 32 B beat; at 100 MHz the
    same DRAM would give 256 B/cycle, so the port's beat is the bound."""
    assert dram_bytes_per_cycle(FettaConfig()) == pytest.approx(25.6)
    assert dram_bytes_per_cycle(FettaConfig(freq_mhz=100)) == 32
    assert dram_bytes_per_cycle(FettaConfig(freq_mhz=100, dma_data_bits=1024)) == 128
    assert dram_bytes_per_cycle(FettaConfig(freq_mhz=2000, dma_data_bits=1024)) == pytest.approx(12.8)
