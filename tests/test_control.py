"""The controller's instruction timing (gen/design/control.py): hand-worked cases and properties.

The RTL follows the same rule cycle for cycle (tests/test_system.py, ``overlap_jobs``)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gen.design.control import (Clock, issue_cycles, os_drain_guard, os_issue_cycles, overlaps, repeat_cycles,
                                stationary_issue_cycles)
from gen.design.config import FettaConfig
from gen.design.isa import (OVERHEAD, START_CYCLES, Dataflow, Geometry, exec_cycles, gemm, halt, horizontal, load,
                            stationary, sync)
from gen.design.timing import program_cycles

GEO = Geometry.of(FettaConfig())


def run(prog, geo=GEO):
    clock = Clock(geo)
    acts = [clock.act(ins) for ins in prog]
    return acts, acts[-1] + 1


def test_a_gemm_then_halt():
    g = gemm(K=8, L0=2)                        # OS, 2 tiles of 8 vectors
    assert issue_cycles(g, GEO) == 16 and exec_cycles(g, GEO) == 16 + 12
    acts, total = run([g, halt()])
    # CHECK of the GEMM in cycle 3; HALT fetched in 4, waits for the last write (31) and acts in 32
    assert acts == [START_CYCLES + OVERHEAD - 1, 3 + 28 + 1] and total == 33


def test_back_to_back_gemms_overlap_the_drain():
    g = gemm(K=8, L0=2)
    acts, _ = run([g, g, g, halt()])
    assert acts[1] - acts[0] == acts[2] - acts[1] == 16       # fetch, decode and drain hidden
    assert program_cycles([i.encode() for i in (g, g, g, halt())], FettaConfig()) == acts[-1] + 1


def test_third_short_gemm_waits_for_a_free_output_context():
    geo = Geometry.of(FettaConfig(mul_latency=2, add_latency=3))
    g = gemm(K=1)                              # issue 12 (a group of 3 tile slots, 4 rows each), end 32
    a, b = issue_cycles(g, geo), exec_cycles(g, geo) + 1
    assert (a, b) == (12, 33)
    acts, _ = run([g, g, g, g, halt()], geo)
    assert [x - acts[0] for x in acts[:4]] == [0, a, b, a + b]


def test_what_waits_for_the_drain():
    g = gemm(K=8, L0=2, a=(0, 1), b=(64, 1), o=(0, 1), wb=True, w_base=200)
    end = lambda acts: acts[0] + exec_cycles(g, GEO)           # noqa: E731
    nxt = lambda acts: acts[0] + issue_cycles(g, GEO)         # noqa: E731
    for after in (sync(), load(src=0, dst=0, chunks=1), gemm(K=8, mode=Dataflow.WS),
                  gemm(K=8, grid=(1, 1, 2), b=(64, 1, 0, 0, 0, 0, 1)),
                  gemm(K=8, a=(203, 1), b=(64, 1), o=(32, 1))):              # reads a written-back row
        acts, _ = run([g, after, halt()])
        assert acts[1] == end(acts) + 1, after
    for after in (gemm(K=8, a=(100, 1), b=(64, 1), o=(32, 1)),                # reads below the write-back
                  gemm(K=8, a=(216, 1), b=(64, 1), o=(32, 1))):                     # above it
        acts, _ = run([g, after, halt()])
        assert acts[1] == nxt(acts), after
    assert not overlaps(g, gemm(K=8, a=(0, 1), b=(200, 1)), GEO)
    assert overlaps(replace(g, flags=0), gemm(K=8, a=(0, 1), b=(200, 1)), GEO)


@settings(max_examples=60, deadline=None)
@given(K=st.integers(1, 20), tiles=st.integers(1, 9), mode=st.sampled_from(list(Dataflow)), n=st.integers(1, 12),
       lat=st.sampled_from([(1, 1), (2, 3), (2, 5)]))
def test_repeat_cycles_is_the_clock(K, tiles, mode, n, lat):
    """The compiler's closed form for a mapping's ``n`` GEMMs, and the issue times from loop bounds,
    equal the controller's count."""
    geo = Geometry.of(FettaConfig(mul_latency=lat[0], add_latency=lat[1]))
    g = gemm(K=K, L0=tiles, mode=mode, a=(0, 1, K), b=(0, 1, K), o=(0, 1, K))
    issue = issue_cycles(g, geo)
    if stationary(mode):
        assert issue == stationary_issue_cycles(K, tiles, geo, horizontal(mode))
    else:
        assert issue == os_issue_cycles(K, tiles, geo)
    acts, total = run([g] * n + [halt()], geo)
    assert acts[-2] + exec_cycles(g, geo) == START_CYCLES - 1 + repeat_cycles(n, issue, exec_cycles(g, geo))
    assert total == acts[-2] + exec_cycles(g, geo) + 2
    # never slower than the controller that drained every GEMM before the next FETCH
    assert issue < exec_cycles(g, geo)
    assert total <= START_CYCLES + (n + 1) * OVERHEAD + n * exec_cycles(g, geo)


def test_a_shorter_os_gemm_waits_for_the_drain_registers():
    """OS: the first tile of a GEMM of depth 1 would end 1 cycle after it starts; the last tile of
    a GEMM of depth 8 still drains its 4 rows then (``os_drain_guard``). A stationary GEMM has none."""
    long, short = gemm(K=8), gemm(K=1, o=(32, 1))
    acts, _ = run([long, short, halt()])
    assert acts[0] + issue_cycles(long, GEO) == 11
    assert acts[1] == acts[0] + os_drain_guard(long, GEO) == 3 + 1 + 7 + 4 - 1
    acts, _ = run([long, gemm(K=4, o=(32, 1)), halt()])          # K' - 1 = 3 cycles earlier: no wait
    assert acts[1] == 11
    ws = gemm(K=8, mode=Dataflow.WS)
    acts, _ = run([ws, gemm(K=1, mode=Dataflow.WS, o=(32, 1)), halt()])
    assert acts[1] == acts[0] + issue_cycles(ws, GEO)
