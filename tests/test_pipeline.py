# amaranth: UnusedElaboratable=no
"""Batch pipelining of the fp / bp networks (gen/compiler/pipeline.py): the pieces' results equal the
golden model within the compiler's error bound (``tests/test_compiler.py``), ``execute()`` reproduces
the static timing, the useful MACs are the unpipelined program's, no frontier tensor is written
before the run that produced it has been read back, and the benchmark ATIS TT fp gets faster end to end."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from gen.compiler import CompileError, compile_layer
from gen.compiler.layout import split_modes
from gen.compiler.pipeline import PIECES, piece_counts
from gen.workload.network import phase_networks
from gen.workload.spec import load_spec, parse_spec
from tests.strategies import examples
from tests.test_compiler import CHUNK, DEFAULT, SMALL, SPECS, check_layer

ROOT = Path(__file__).resolve().parents[1]


def counts(spec, phase, config, pad=False) -> list[int]:
    """Piece counts every network of ``phase`` can be cut into."""
    nets = [split_modes(n, config.lanes, pad) for n in phase_networks(spec, phase)]
    return [p for p in PIECES if all(p in piece_counts(n, (p,)) for n in nets)]


def frontier_after_read(prog) -> None:
    """Every write of a prologue (frontier) tensor comes, by the DRAM timing rule, after the read that
    produced it: some run after the reading one and no later than the writing one uses the reading
    run's half (its writes wait for those reads, and writes keep program order)."""
    read_in = {}       # tensor -> the run after which the host has it (read back, or concatenated / sliced)
    for ri, kind, args in prog.host_ops:
        if kind in ("concat", "slice"):
            read_in[args[0] if kind == "concat" else args[1]] = ri
    for i, run in enumerate(prog.runs):
        for w in run.writes:
            if ".pre" in w.name:
                j = read_in[w.name]
                assert any(prog.runs[k].half == prog.runs[j].half for k in range(j + 1, i + 1)), (w.name, j, i)
        for r in run.reads:
            read_in[r.name] = i


def check_pipelined(spec, phase, config, pieces, seed=0, **kw):
    plain = compile_layer(spec, phase, config, pieces=1, **kw)
    prog, ex = check_layer(spec, phase, config, seed, pieces=pieces, pieces_by="networks", **kw)
    assert prog.pieces == pieces and plain.pieces == 1
    assert prog.macs == plain.macs                 # batch-free steps computed once
    assert prog.timeline(config) == ex.timeline     # execute() also checked the compute cycles per run
    frontier_after_read(prog)
    return prog, ex


@pytest.mark.parametrize("phase", ["fp", "bp"])
@pytest.mark.parametrize("fmt", ["tt", "tr", "ttm", "ht", "bt", "tucker"])
def test_formats_pipelined(fmt, phase):
    spec = parse_spec(dict(SPECS[fmt], batch=16))
    assert counts(spec, phase, DEFAULT) == [2, 4]
    for pieces in (2, 4):
        check_pipelined(spec, phase, DEFAULT, pieces)


@pytest.mark.parametrize("fmt", ["tt", "ht", "bt"])
def test_small_config_pipelined(fmt):
    """The 4-CE configuration with 4 KiB unified memory: pieces that close segments and chunk."""
    spec = parse_spec(dict(SPECS[fmt], batch=16))
    check_pipelined(spec, "fp", SMALL, 4)


def test_unsplit_batch_and_padding():
    """A batch not split by ``split_modes`` (``b`` itself is cut) and a padded one (30 -> 32: ``b~h``)."""
    spec = parse_spec(dict(SPECS["tt"], batch=4))
    assert counts(spec, "fp", DEFAULT) == [2, 4]
    check_pipelined(spec, "fp", DEFAULT, 4)
    spec = parse_spec(dict(SPECS["tt"], batch=30))
    assert counts(spec, "bp", DEFAULT, pad=True) == [2, 4, 8] and counts(spec, "bp", DEFAULT) == [2]
    check_pipelined(spec, "bp", DEFAULT, 2, pad=False)
    check_pipelined(spec, "bp", DEFAULT, 8, pad=True)


def test_padded_batch_piece_chunked_again():
    """A piece of a padded batch (62 -> 64) chunked again along its batch piece (``b~h@0:8@0:1``):
    the useful extent of a range within a range (``Compiler.useful``) keeps the MACs honest."""
    spec = parse_spec(dict(SPECS["ttm"], batch=62))
    prog, _ = check_pipelined(spec, "fp", CHUNK, 2, pad=True)
    assert any(m.count("@") == 2 for m in prog.sizes)


@st.composite
def pipe_spec(draw):
    fmt = draw(st.sampled_from(["tt", "tr", "ttm", "ht", "bt", "tucker"]))
    d = draw(st.integers(2, 3))
    spec = {"format": fmt, "in_modes": draw(st.lists(st.integers(2, 6), min_size=d, max_size=d)),
            "out_modes": draw(st.lists(st.integers(2, 6), min_size=d, max_size=d)),
            "ranks": draw(st.integers(1, 5)), "batch": draw(st.sampled_from([2, 4, 6, 8, 12, 16, 32]))}
    if fmt == "bt":
        spec["blocks"] = draw(st.integers(1, 2))
    return parse_spec(spec)


@settings(max_examples=examples(5, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=pipe_spec(), phase=st.sampled_from(["fp", "bp"]), pieces=st.sampled_from(PIECES),
       seed=st.integers(0, 99))
def test_random_specs_pipelined(spec, phase, pieces, seed):
    pads = [pad for pad in (False, True) if pieces in counts(spec, phase, DEFAULT, pad)]
    assume(pads)
    check_pipelined(spec, phase, DEFAULT, pieces, seed, pad=pads[-1])


@settings(max_examples=examples(4, 8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=pipe_spec(), phase=st.sampled_from(["wg", "train"]), pieces=st.sampled_from([2, 4]),
       seed=st.integers(0, 99))
def test_random_specs_phase_pieces(spec, phase, pieces, seed):
    """Whole-phase batch pieces (gen.compiler.batched) on random specs: carried sums and the steps
    deferred after them (3-core layers) within the bound of the golden model."""
    assume(spec.batch % pieces == 0)
    try:
        prog, _ = check_layer(spec, phase, DEFAULT, seed=seed, pieces=pieces, pieces_by="phase")
    except CompileError:
        assume(False)       # a piece that does not compile into one segment
    assert prog.pieces == pieces and {r.half for r in prog.runs} == {0, 1}
    # a deferred step runs once (by the last piece), the other batch steps once per piece
    deferred = [s for s in prog.steps if s.deferred]
    event(f"deferred steps: {bool(deferred)}")
    for st_ in deferred:
        assert sum(1 for s in prog.steps if s is st_) == 1


def test_default_keeps_the_fastest_and_wg_train_are_not_pipelined():
    spec = parse_spec(dict(SPECS["tt"], batch=16))
    best = compile_layer(spec, "fp", DEFAULT)
    cands = [compile_layer(spec, "fp", DEFAULT, pieces=p) for p in (1, 2, 4)]
    assert best.timeline(DEFAULT).cycles == min(c.timeline(DEFAULT).cycles for c in cands)
    for phase in ("wg", "train"):       # never pipelined network by network (whole-phase pieces may)
        with pytest.raises(CompileError):
            compile_layer(spec, phase, DEFAULT, pieces=2, pieces_by="networks")


def test_atis_tt_fp_is_faster_end_to_end():
    """The benchmark layer (``benchmarks/layers/atis_tt.json``): one run serialises all its DRAM
    transfers; the pipelined program overlaps them with compute."""
    spec = load_spec(ROOT / "benchmarks" / "layers" / "atis_tt.json")
    plain = compile_layer(spec, "fp", DEFAULT, pieces=1)
    prog, _ = check_layer(spec, "fp", DEFAULT, pieces_by="networks")
    assert prog.pieces > 1 and prog.macs == plain.macs
    assert prog.timeline(DEFAULT).cycles < plain.timeline(DEFAULT).cycles
    frontier_after_read(prog)
    # the pieces' cores and frontier tensors are written once per ping-pong half
    writes = Counter(w.name for run in prog.runs for w in run.writes)
    assert max(n for name, n in writes.items() if not name.startswith("X")) <= 2


@pytest.mark.sim
def test_rtl_icarus_pipelined():
    """Emulator == RTL (Icarus) on a pipelined program: the pieces' resident operands stay in the unified
    memory from one run to the next run on the same half."""
    from gen.toolflow.execute import rtl_check

    spec = parse_spec(dict(SPECS["tt"], batch=16))
    prog, ex = check_pipelined(spec, "fp", SMALL, 4)
    assert [w.name for w in prog.runs[-1].writes] == ["X[b~h@3:4]~4"]      # the cores stayed on chip
    assert rtl_check(ex, SMALL, "icarus")
