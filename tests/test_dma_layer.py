"""Compiled layers whose runs move their own data with DMA instructions (gen.compiler.dma).

The lowered jobs must compute exactly what the host-port execution computes (every result bit equal),
keep the hardware's rules (a DMA only reaches the half its run does not use, a job fits the
instruction memory, every host read becomes one transfer, every host write one transfer unless its
image is still in the half), and the RTL must equal the
emulator job for job (cycles, errors) and byte for byte in the DRAM the stores write.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gen.compiler import compile_layer
from gen.compiler import dma
from gen.compiler.dma import dma_timeline, lower_dma, needed, unified_writes
from gen.compiler.layout import Layout
from gen.compiler.program import Program, Read, Run, Write
from gen.design.config import FettaConfig
from gen.design.isa import Geometry, Opcode, decode, dram_rate, halt, nop, store
from gen.design.timing import program_cycles
from gen.toolflow import dmarun
from gen.toolflow.dmarun import execute_dma, rtl_check_dma
from gen.toolflow.execute import ExecutionError, execute
from gen.toolflow.hooi import compile_hooi, low_rank_tensor, run_hooi
from gen.workload.spec import parse_spec
from sim.emulator import Emulator
from sim.golden import random_inputs
from tests.strategies import examples, specs

#: 4 CEs, a 16-word instruction memory (programs split into many runs, DMA-only jobs for overflow)
SMALL = FettaConfig(num_ces=4, net_ports=4, banks=4, unified_kb=4, accum_kb=2, imem_depth=16)
#: a 128-bit DMA port: 2 rows per beat, bursts of 4, 2 in flight
NARROW = SMALL.replace(dma_data_bits=128, dma_burst=4, dma_outstanding=2, dram_latency=6, imem_depth=64)
TT = {"format": "tt", "in_modes": [4, 6], "out_modes": [6, 4], "ranks": 4, "batch": 8}
BT = {"format": "bt", "in_modes": [4, 6], "out_modes": [6, 4], "ranks": 3, "blocks": 2, "batch": 8}
DENSE = {"format": "dense", "in_modes": [24], "out_modes": [20], "batch": 12}


def lowered(spec, phase, config, early=None, late=None, **kw):
    """Compile, execute through the host port and lowered to DMA jobs (``early`` / ``late``: the
    placement of the loads and of the stores no load needs, ``lower_dma``'s); check what every
    lowering must keep (module docstring) and return ``(program, dma program, dma execution)``."""
    inputs = random_inputs(spec, 3)
    prog = compile_layer(spec, phase, config, **kw)
    host = execute(prog, inputs, config)
    dprog = lower_dma(prog, config, early, late=late)
    ex = execute_dma(dprog, inputs, config)
    assert set(ex.results) == set(host.results)
    for key, want in host.results.items():
        assert np.array_equal(ex.results[key], want), key
    src = dprog.source          # the program with its full runs cut to leave room for DMA instructions
    assert [ins for r in src.runs for ins in r.program if ins.opcode != Opcode.HALT] == \
        [ins for r in prog.runs for ins in r.program if ins.opcode != Opcode.HALT]
    prog = src
    loads = [(t.run, t.name) for j in dprog.jobs for t in j.transfers if t.load]
    stores = [(t.run, t.name) for j in dprog.jobs for t in j.transfers if not t.load]
    # every host write is loaded, or its image is still in the half (the results above check it)
    assert sorted(loads + dprog.resident) == sorted((i, w.name) for i, r in enumerate(prog.runs) for w in r.writes)
    assert sorted(stores) == sorted((i, rd.name) for i, r in enumerate(prog.runs) for rd in r.reads)
    where = {j.run: k for k, j in enumerate(dprog.jobs) if j.run is not None}
    assert sorted(where) == list(range(len(prog.runs)))
    for k, job in enumerate(dprog.jobs):
        assert len(job.program) <= config.imem_depth and job.program[-1].opcode == Opcode.HALT
        dmas = sum(ins.opcode == Opcode.DMA for ins in job.program)
        if job.run is None:
            assert dmas == len(job.program) - 1
        else:
            body = [i for i in job.program if i.opcode != Opcode.DMA]
            assert body == prog.runs[job.run].program
        for t in job.transfers:
            assert prog.runs[t.run].half == 1 - job.half     # the other half only
            assert (k < where[t.run]) if t.load else (k > where[t.run])
    assert ex.cycles == sum(program_cycles(j["prog"], config) for j in ex.jobs)
    assert ex.compute_cycles == sum(program_cycles(r.words, config) for r in prog.runs) <= ex.cycles
    return prog, dprog, ex


@settings(max_examples=examples(3, 15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs(formats=("tt", "tr", "ttm", "ht", "bt", "tucker"), max_mode=6, max_rank=4, max_batch=8),
       phase=st.sampled_from(["fp", "bp", "wg"]), config=st.sampled_from([SMALL, NARROW]))
def test_random_layers_emulator(spec, phase, config):
    """Random layers of every tensorized format and phase, on two DMA port widths: the loads and
    the stores no load needs placed both ways, and the default (the faster of the four)."""
    for early in (False, True, None):
        lowered(spec, phase, config, early, late=early)


def test_pipelined_spills_come_back_from_their_region():
    """A pipelined program: batch pieces on alternating halves, each job storing the previous
    piece's results and loading the next piece's operands while it computes; tensors read back
    and written again in the same layout are loaded from their read-back region (no host copy)."""
    prog, dprog, ex = lowered(parse_spec(dict(TT, batch=16)), "fp", SMALL, pieces=4)
    assert prog.pieces == 4
    overlapped = [j for j in dprog.jobs if j.run is not None and j.transfers]
    assert len(overlapped) >= len(prog.runs) - 1
    assert ex.dram_stall_cycles < sum(program_cycles(j["prog"], SMALL) for j in ex.jobs if j["prog"])


def test_host_data_needs_a_later_job():
    """A step chunked over a mode: the host slices and concatenates what runs stored, so the loads
    of those tensors sit in a job after the one that stores their source; and a tensor read back
    and written again in the same layout is loaded from its read-back region, not re-packed."""
    prog, dprog, _ = lowered(parse_spec(dict(TT, batch=32)), "fp", SMALL)
    assert {k for _, k, _ in prog.host_ops} == {"slice", "concat"} and max(prog.write_deps()) >= 0
    # placed early, a run's inputs do not wait for the host-made tensors it also writes: they go
    # in an earlier job than those; the default lowering is the faster of the two placements
    prog, dprog, _ = lowered(parse_spec(dict(TT, batch=32)), "fp", SMALL, early=True)
    mixed = [i for i, deps in enumerate(prog.each_write_deps()) if len(set(deps)) > 1]
    assert mixed
    job_of = {(t.run, t.name): k for k, j in enumerate(dprog.jobs) for t in j.transfers if t.load}
    deps = prog.each_write_deps()
    for i in mixed:
        ws = prog.runs[i].writes
        early_job = max(job_of[i, w.name] for w, d in zip(ws, deps[i]) if d < max(deps[i]))
        late_job = min(job_of[i, w.name] for w, d in zip(ws, deps[i]) if d == max(deps[i]))
        assert early_job <= late_job
    assert any(job_of[i, w.name] < job_of[i, v.name] for i in mixed for w in prog.runs[i].writes
               for v in prog.runs[i].writes)
    late = lower_dma(prog, SMALL, early=False)
    best = lower_dma(prog, SMALL)
    assert dma_timeline(best, SMALL).cycles == min(dma_timeline(d, SMALL).cycles for d in (late, dprog))
    prog, dprog, _ = lowered(parse_spec(dict(TT, format="tr", ranks=3)), "wg", SMALL)
    assert any(not t.host_packed for j in dprog.jobs for t in j.transfers if t.load)


def test_a_missing_load_is_caught():
    """Dropping one DMA load leaves its rows unknown: the execution refuses the results (the
    emulator's unknown-data check), it does not return stale numbers."""
    spec = parse_spec(TT)
    prog = compile_layer(spec, "fp", SMALL)
    dprog = lower_dma(prog, SMALL)
    job = next(j for j in dprog.jobs if any(t.load for t in j.transfers))
    drop = next(i for i, ins in enumerate(job.program) if ins.opcode == Opcode.DMA)
    job.program = job.program[:drop] + job.program[drop + 1:]
    with pytest.raises(ExecutionError):
        execute_dma(dprog, random_inputs(spec, 0), SMALL)


class _Spy(Emulator):
    """An emulator that records, per run, the rows of its half whose content (or known-ness) changed
    and the rows :func:`unified_writes` says the run's program may write."""

    seen: list = []

    def load_program(self, words, at: int = 0) -> None:
        self._words = list(words)
        super().load_program(words, at)

    def run(self, half: int = 0):
        before, known = self.unified[half].copy(), self.unified_x[half].copy()
        r = super().run(half)
        changed = np.flatnonzero((self.unified[half] != before).any(axis=1) | (self.unified_x[half] != known).any(axis=1))
        body = [ins for ins in map(decode, self._words) if ins.opcode != Opcode.DMA]
        _Spy.seen.append((changed, unified_writes(body, self.geo)))
        return r


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs(formats=("tt", "tr", "ttm", "ht", "bt", "tucker"), max_mode=6, max_rank=4, max_batch=8),
       phase=st.sampled_from(["fp", "bp", "wg", "train"]))
def test_unified_writes_cover_every_row_a_run_changes(spec, phase):
    """What decides that an image is still in its half: every row of its half whose content a
    run changes (write-backs, ``STORE``, ``VEC``) lies in one of the spans :func:`unified_writes`
    gives for the run's program."""
    prog = compile_layer(spec, phase, SMALL)
    _Spy.seen = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dmarun, "Emulator", _Spy)
        execute_dma(lower_dma(prog, SMALL), random_inputs(spec, 1), SMALL)
    assert any(len(changed) for changed, _ in _Spy.seen)
    for changed, spans in _Spy.seen:
        inside = np.zeros(len(changed), bool)
        for lo, hi in spans:
            inside |= (changed >= lo) & (changed < hi)
        assert inside.all(), (changed[~inside][:8], spans)


def test_shared_operands_stay_in_their_half():
    """HOOI's TTM chains run in pieces on alternating halves, every piece reading the same factors:
    a factor still in its half (same rows, same layout, no new value since) is not loaded again.
    The results are bit-equal to loading every write (the execution checks each kept image against
    the host's before the run), in fewer cycles and exactly the kept images' beats fewer DRAM bytes."""
    shape, ranks = (16, 12, 16), (4, 3, 4)
    T = low_rank_tensor(shape, ranks, 0.5, seed=1)
    compiled = compile_hooi(shape, ranks, SMALL)
    prog = compiled[1]
    every = lower_dma(prog, SMALL, resident=False)
    kept = lower_dma(prog, SMALL)
    assert not every.resident and {n for _, n in kept.resident} >= {"U1", "U2", "V0", "V1"}
    runs = {key: run_hooi(T, ranks, 2, SMALL, compiled=compiled, lowered=d) for key, d in (("every", every), ("kept", kept))}
    assert runs["every"].fits == runs["kept"].fits
    assert np.array_equal(runs["every"].core, runs["kept"].core)
    a, b = runs["every"].iterations[0], runs["kept"].iterations[0]
    geo = Geometry.of(SMALL)
    beats = sum(-(-w.layout.rows // geo.dma_rows) for i, name in kept.resident
                for w in kept.source.runs[i].writes if w.name == name)
    assert a.dram_bytes - b.dram_bytes == beats * geo.dma_bytes > 0
    assert b.cycles < a.cycles


def test_results_wait_for_a_job_that_computes():
    """A store no load needs (a result, directly or through the host's concatenation) goes in a
    job that computes instead of a DMA-only job between runs; the host operations that only
    results need wait for the last job. Results bit-equal (``lowered``), fewer cycles."""
    spec = parse_spec(dict(TT, batch=16))
    _, every, ex_every = lowered(spec, "train", SMALL, late=False)
    prog, dprog, ex = lowered(spec, "train", SMALL, late=True)
    late = [(j.run, t.name) for j in dprog.jobs for t in j.transfers if t.late]
    assert late and any(run is not None for run, _ in late)
    assert not any(t.late for j in every.jobs for t in j.transfers)
    assert ex.cycles < ex_every.cycles
    prog, dprog, _ = lowered(parse_spec(dict(TT, batch=32)), "fp", SMALL, late=True)
    kinds = [prog.host_ops[k][1] for k in dprog.final_ops]
    assert kinds == ["concat"]          # the result's pieces, joined after the last job
    need, _ = needed(prog)
    assert all(t.name not in need for j in dprog.jobs for t in j.transfers if t.late)


def test_late_stores_of_one_run_go_to_the_jobs_with_room():
    """A run's late stores are placed one tensor at a time: two results that one later job's
    compute hides one at a time, but not both, go to two jobs (no stall), not both to the first."""
    config = SMALL.replace(imem_depth=64)
    geo = Geometry.of(config)
    sizes = {"a": 64, "b": 4}
    lay = Layout.make(("a", "b"), sizes, geo.lanes)
    one = -(-lay.rows // geo.dma_rows) / float(dram_rate(config))     # cycles of one store
    body = [nop()] * 10
    compute = program_cycles([*body, halt()], config)
    assert one < compute < 2 * one
    runs = [Run(0, [], [halt()], [Read(0, "P", lay), Read(lay.rows, "Q", lay)]),
            Run(1, [], [*body, halt()]), Run(0, [], [halt()]), Run(1, [], [*body, halt()])]
    dprog = lower_dma(Program(runs, [], {}, sizes, 0, []), config, late=True)
    assert sorted(job.run for job in dprog.jobs for t in job.transfers) == [1, 3]
    assert all(job.run is not None for job in dprog.jobs)       # no DMA-only job
    for job in dprog.jobs:      # each store hidden by its job's compute
        assert program_cycles(job.program, config) - program_cycles(runs[job.run].program, config) <= 3


def _kept_x(run1=(), ops=(), program=(), layout=None) -> tuple[Program, bool]:
    """Three runs on halves 0, 1, 0, the first and the last writing ``X`` at row 0: the middle
    run reads back ``run1``, the host does ``ops`` after it, the first run's program is ``program``
    and the last run's ``X`` has ``layout``. Returns the program and whether the lowering keeps
    the last run's ``X`` in its half."""
    sizes = {"a": 8, "b": 4}
    ab = Layout.make(("a", "b"), sizes, 4)
    runs = [Run(0, [Write(0, "X", ab)], [*program, halt()]), Run(1, [], [halt()], list(run1)),
            Run(0, [Write(0, "X", layout or ab)], [halt()])]
    prog = Program(runs, list(ops), {}, sizes, 0, [], input_modes={"X": ("a", "b")})
    return prog, (2, "X") in lower_dma(prog, SMALL).resident


def test_what_keeps_an_image_in_its_half():
    """An image stays only while nothing could have changed it: the same name, layout and rows,
    no read-back or host operation making the name, no run writing its rows."""
    sizes = {"a": 8, "b": 4}
    assert _kept_x()[1]
    assert not _kept_x(program=[store(src=0, dst=4, chunks=1)])[1]          # rows 4..7 of X written
    assert _kept_x(program=[store(src=0, dst=8, chunks=1)])[1]              # the rows after it
    assert not _kept_x(run1=[Read(0, "X", Layout.make(("a", "b"), sizes, 4))])[1]     # a new value
    assert not _kept_x(ops=[(1, "eye", ("X", ("a", "b")))])[1]
    assert not _kept_x(layout=Layout.make(("b", "a"), sizes, 4))[1]


def test_a_kept_image_that_changed_is_caught(monkeypatch):
    """The execution checks the lowering's claim before the run: with the rows a run writes
    ignored, the lowering keeps an ``X`` that a ``STORE`` overwrote, and the execution stops."""
    monkeypatch.setattr(dma, "unified_writes", lambda program, geo: [])
    prog, kept = _kept_x(program=[store(src=0, dst=4, chunks=1)])
    assert kept
    with pytest.raises(ExecutionError, match="not in its half"):
        execute_dma(lower_dma(prog, SMALL), {"X": np.ones((8, 4), np.float32)}, SMALL)


def test_cli_dma_json(tmp_path, capsys):
    """``fetta run`` and ``fetta model`` time a tensorized layer by DMA jobs unless told ``--dram rule``,
    and report the same cycles, compute cycles and DRAM bytes in either mode."""
    from gen.cli import main

    p = tmp_path / "s.json"
    p.write_text(json.dumps(TT))
    assert main(["run", "--spec", str(p), "--phase", "fp", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["dram"] == "dma" and res["jobs"] >= res["runs"] + 1
    assert res["cycles"] >= res["compute_cycles"] and res["rule_cycles"] > 0 and res["max_rel_err"] < 0.05
    assert main(["run", "--spec", str(p), "--phase", "fp", "--dram", "rule", "--json"]) == 0
    rule = json.loads(capsys.readouterr().out)
    assert rule["dram"] == "rule" and "jobs" not in rule
    # the model reports the cycles the run counted: one timing source, in both modes
    for run, flags in ((res, []), (rule, ["--dram", "rule"])):
        assert main(["model", "--spec", str(p), "--phase", "fp", *flags, "--json"]) == 0
        model = json.loads(capsys.readouterr().out)
        assert model["dram"] == run["dram"]
        for key in ("cycles", "compute_cycles", "dram_stall_cycles", "dram_bytes"):
            assert model[key] == run[key], key
    assert main(["model", "--spec", str(p), "--phase", "fp", "--dram", "dma", "--analytical"]) == 2
    # odd sizes: the DMA moves whole beats, more bytes than the host port's rows (688 -> 736 here)
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"format": "tt", "in_modes": [3, 5], "out_modes": [5, 3], "ranks": 3, "batch": 3}))
    assert main(["run", "--spec", str(odd), "--phase", "fp", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert main(["model", "--spec", str(odd), "--phase", "fp", "--json"]) == 0
    model = json.loads(capsys.readouterr().out)
    assert run["dram_bytes"] == model["dram_bytes"] and run["cycles"] == model["cycles"]
    dense = tmp_path / "d.json"
    dense.write_text(json.dumps({"format": "dense", "in_modes": [8], "out_modes": [8], "batch": 4}))
    # a dense layer by default: compiled as a two-tensor network, run as DMA jobs, timed by them (as --dram dma)
    assert main(["run", "--spec", str(dense), "--phase", "train", "--json"]) == 0
    dma = json.loads(capsys.readouterr().out)
    assert dma["format"] == "dense" and dma["dram"] == "dma" and dma["jobs"] > 0 and dma["max_rel_err"] < 1e-2
    assert main(["run", "--spec", str(dense), "--phase", "train", "--dram", "dma", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cycles"] == dma["cycles"]
    assert main(["model", "--spec", str(dense), "--phase", "train", "--json"]) == 0
    model = json.loads(capsys.readouterr().out)
    assert model["dram"] == "dma" and model["cycles"] == dma["cycles"]
    assert main(["run", "--spec", str(dense), "--pieces", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pieces"] == 2
    # --dram rule: the GEMM tiler through the host port with the DRAM rule (its own passes: no --pieces);
    # the model's rule says the same
    assert main(["run", "--spec", str(dense), "--dram", "rule", "--pieces", "2"]) == 2
    assert main(["run", "--spec", str(dense), "--dram", "rule", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert "passes" in run and "jobs" not in run
    assert main(["model", "--spec", str(dense), "--phase", "fp", "--dram", "rule", "--json"]) == 0
    model = json.loads(capsys.readouterr().out)
    assert model["dram"] == "rule" and model["cycles"] == run["cycles"]


@pytest.mark.sim
@pytest.mark.parametrize("phase, config, kw, layer", [
    ("train", SMALL, {}, TT), pytest.param("fp", NARROW, {"pieces": 4}, TT, marks=pytest.mark.slow),
    ("wg", SMALL, {}, BT), pytest.param("train", SMALL, {}, DENSE, marks=pytest.mark.slow)])
def test_rtl_icarus(phase, config, kw, layer):
    """RTL (Icarus) == emulator on DMA jobs: every job's cycles and error, and every byte the stores
    wrote to the bench's AXI4 RAM (a 256-bit port, and a 128-bit one with gaps between bursts; a
    block-term layer's stacked networks, whose stacked core gradients the host splits; a dense layer
    compiled as a two-tensor network, as ``fetta run --dram dma`` runs it)."""
    spec = parse_spec(dict(layer, batch=16) if kw else layer)
    for ph in (["fp", "bp", "wg"] if phase == "train" else [phase]):
        prog, _, ex = lowered(spec, ph, config, **kw)
        assert ex.stored.any()
        if spec.format == "bt":
            assert all("+" in name for name in prog.results)       # every network stacked
        assert rtl_check_dma(ex, config, "icarus")


#: rank 5 on 4 lanes: lane modes of two blocks, and an input too large for a half of SMALL
TR5 = {"format": "tr", "in_modes": [6, 4], "out_modes": [5, 2], "ranks": 5, "batch": 8}


@pytest.mark.sim
@pytest.mark.slow
def test_rtl_icarus_lane_blocks_and_interleaved_partial_sums(monkeypatch):
    """A tensor-ring layer of rank 5: lanes of two blocks laid out above the modes the CE grid splits
    (``Layout.make(below=...)``), and a step chunked over contracted modes whose free-loop indices'
    partial sums interleave in the accumulation unit at their result offsets
    (``gen.compiler.mapping.instantiate(acc_stride=None)``): the DMA jobs compute what the host port
    does bit for bit, within the float64 golden model's bound, and the RTL (Icarus) equals the
    emulator job for job."""
    import gen.compiler.chunk as chunk
    from sim.golden import compute
    from tests.test_compiler import bound

    strides = []
    real = chunk.instantiate

    def spy(*args, **kw):
        strides.append(kw.get("acc_stride", 0))
        return real(*args, **kw)

    monkeypatch.setattr(chunk, "instantiate", spy)
    spec = parse_spec(TR5)
    prog, _, ex = lowered(spec, "fp", SMALL, dram="dma")
    assert None in strides, "no step interleaved its partial sums"
    assert any(w.layout.below for r in prog.runs for w in r.writes), "no lane's blocks above split modes"
    inputs = random_inputs(spec, 3)
    gold = compute(spec, inputs, phases=["fp"])
    bnd = bound(spec, inputs, ["fp"], prog)
    for key, ref in gold.items():
        assert np.all(np.abs(ex.results[key] - ref) <= bnd[key] + 1e-30), key
    assert rtl_check_dma(ex, SMALL, "icarus")


def test_compiler_chooses_by_the_hardware_count():
    """``compile_layer(dram="dma")`` keeps the variant the DMA jobs run fastest (within the 2 % band in
    which the fewest DRAM bytes win), never one slower than the rule's choice lowered."""
    from gen.compiler.dma import hardware_cycles

    spec = parse_spec(dict(TT, batch=16))
    for phase in ("fp", "train"):
        rule = compile_layer(spec, phase, SMALL)
        hw = compile_layer(spec, phase, SMALL, dram="dma")
        assert hardware_cycles(hw, SMALL) <= 1.02 * hardware_cycles(rule, SMALL)
        ex = execute_dma(lower_dma(hw, SMALL), random_inputs(spec, 1), SMALL)
        assert ex.cycles == hardware_cycles(hw, SMALL)           # the count it chose by is the emulator's


def test_dram_rate():
    """The DRAM's bandwidth in DMA beats per cycle: 25.6 GB/s at 1 GHz over 32-byte beats is 4/5;
    never above one beat per cycle; rounded down to a denominator of at most 64."""
    from fractions import Fraction

    from gen.design.isa import dram_rate

    assert dram_rate(FettaConfig()) == Fraction(4, 5)
    assert dram_rate(FettaConfig(freq_mhz=100.0)) == 1
    slow = dram_rate(FettaConfig(dram_gbps=10.0, freq_mhz=1000.0))      # 10 / 32 = 5/16
    assert slow == Fraction(5, 16)
    odd = dram_rate(FettaConfig(dram_gbps=25.6, freq_mhz=1100.0))       # 0.7272.. -> at most that
    assert odd <= Fraction(256, 11) / 32 and odd.denominator <= 64 and Fraction(256, 11) / 32 - odd < Fraction(1, 64)
