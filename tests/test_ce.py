# amaranth: UnusedElaboratable=no
"""Contraction engine: model vs RTL (Amaranth simulator, then cocotb on Icarus and Verilator); its lint is in test_lint.py."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from gen.design.config import FettaConfig
from gen.errors import ConfigError
from hdl.ce import CE, CEMode
from sim.bf16 import bf16_dot, round_to_bf16_f32
from sim.ce_model import ce_cycles, ce_gemm, ce_program, ce_result, fp32_error_bound
from tests.strategies import covering

# --- driving the CE in the Amaranth simulator ------------------------------------------


def run_amaranth(dut: CE, prog, *, extra_cycles: int = 4):
    """Drive ``prog`` cycle by cycle; return the Psum vectors as ``(cycle, row, lanes)``."""
    got: list[tuple[int, int, list[int]]] = []
    overruns = []

    async def tb(ctx):
        ctx.set(dut.mode, prog.mode)
        await ctx.tick()  # the CE decodes the mode into registers: it comes a cycle early
        for t in range(prog.cycles + extra_cycles):
            cyc = prog.inputs[t] if t < prog.cycles else None
            if cyc is not None:
                ia = cyc["ia"]
                ctx.set(dut.ia.valid, ia is not None)
                for r in range(dut.rows):
                    ctx.set(dut.ia.data[r], ia[r] if ia is not None else 0)
                for k in ("first", "last", "swap"):
                    ctx.set(getattr(dut.ia, k), cyc[k])
                ctx.set(dut.ib.valid, cyc["ib_valid"])
                ctx.set(dut.ib.index, cyc["ib_index"])
                for i, v in enumerate(cyc["ib"]):
                    ctx.set(dut.ib.data[i], v)
                kind, ref = cyc["psum_in"]
                lanes = ref if kind == "const" else got[ref][2]
                for c in range(dut.cols):
                    ctx.set(dut.psum_in[c], lanes[c])
            else:
                ctx.set(dut.ia.valid, 0)
                ctx.set(dut.ib.valid, 0)
            if ctx.get(dut.psum.valid):
                got.append((t, ctx.get(dut.psum.row), [ctx.get(dut.psum.data[c]) for c in range(dut.cols)]))
            if ctx.get(dut.overrun):
                overruns.append(t)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(tb)
    sim.run()
    assert not overruns, f"drain overrun at cycles {overruns[:5]}"
    return got


def check_against_model(prog, got):
    want = prog.expected
    assert len(got) == len(want), f"{len(got)} Psum vectors, expected {len(want)}"
    for j, (g, w) in enumerate(zip(got, want)):
        assert g[0] == w[0], f"vector {j}: emitted in cycle {g[0]}, expected {w[0]}"
        if prog.mode.output_stationary:
            assert g[1] == w[1], f"vector {j}: row {g[1]}, expected {w[1]}"
        assert g[2] == w[2], f"vector {j} (cycle {g[0]}): {[hex(x) for x in g[2]]} != {[hex(x) for x in w[2]]}"


def bf16_operands(rng, shape, special=0.0):
    x = round_to_bf16_f32(rng.standard_normal(shape) * np.exp2(rng.integers(-4, 5, shape)))
    if special:
        mask = rng.random(shape) < special
        x[mask] = rng.choice(np.array([0.0, -0.0, np.inf, -np.inf, 1e-40, 3e38], np.float32), mask.sum())
    return x


# --- model ---------------------------------------------------------------------------


@given(st.sampled_from(list(CEMode)), st.integers(1, 9), st.integers(1, 9), st.integers(1, 9),
       st.integers(1, 5), st.integers(1, 5), st.booleans(), st.integers(0, 2**32 - 1))
def test_model_matches_sequential_dot(mode, M, N, K, R, C, with_acc, seed):
    """Without an accumulator every mapping reduces to the sequential bf16 chain over k."""
    rng = np.random.default_rng(seed)
    A, B = bf16_operands(rng, (M, K)), bf16_operands(rng, (K, N))
    acc = bf16_operands(rng, (M, N)) if with_acc else None
    got, cycles = ce_gemm(mode, A, B, acc, rows=R, cols=C)
    assert cycles == ce_cycles(mode, M, N, K, rows=R, cols=C)
    chain = bf16_dot(A.T[:, :, None], B[:, None, :], axis=0, acc=None if mode.output_stationary else acc)
    if mode.output_stationary and acc is not None:
        from sim.bf16 import f32_add
        chain = f32_add(acc, chain)
    assert np.array_equal(got.view(np.uint32), chain.view(np.uint32))
    ref = A.astype(np.float64) @ B.astype(np.float64) + (0 if acc is None else acc)
    assert np.all(np.abs(got - ref) <= fp32_error_bound(A, B, acc))


def test_model_integer_exact():
    rng = np.random.default_rng(5)
    A = rng.integers(-2**15, 2**15, (7, 11))
    B = rng.integers(-2**15, 2**15, (11, 6))
    for mode in CEMode:
        C, _ = ce_gemm(mode, A, B, datatype="int16")
        assert np.array_equal(C.astype(np.int64), A @ B)
    # wrap-around of a narrow accumulator is modulo 2**acc_width
    C, _ = ce_gemm(CEMode.OS_AB, A, B, datatype="int16", int_acc_width=32)
    want = ((A @ B) + 2**31) % 2**32 - 2**31
    assert np.array_equal(C.astype(np.int64), want)


def test_model_utilization_large_gemm():
    for mode in CEMode:
        prog = ce_program(mode, np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))
        assert prog.utilization >= 0.95, (mode, prog.utilization)


# --- RTL in the Amaranth simulator -----------------------------------------------------


@pytest.mark.parametrize("mode", list(CEMode), ids=lambda m: m.name)
def test_ce_amaranth_bf16(mode):
    rng = np.random.default_rng(100 + mode.value)
    dut = CE(rows=4, cols=4)
    for M, N, K in [(6, 5, 9), (4, 4, 4), (1, 3, 2)]:
        A = bf16_operands(rng, (M, K), special=0.05)
        B = bf16_operands(rng, (K, N), special=0.05)
        acc = bf16_operands(rng, (M, N)) if M != 4 else None
        prog = ce_program(mode, A, B, acc)
        got = run_amaranth(dut, prog)
        check_against_model(prog, got)


@pytest.mark.parametrize("shape", [(3, 5), (1, 1), (5, 2)])
def test_ce_amaranth_shapes(shape):
    """Non-square arrays, every mapping, int16 mode (fast), exact."""
    R, C = shape
    rng = np.random.default_rng(R * 10 + C)
    dut = CE(rows=R, cols=C, datatype="int16")
    for mode in CEMode:
        A = rng.integers(-2**15, 2**15, (7, 6))
        B = rng.integers(-2**15, 2**15, (6, 5))
        prog = ce_program(mode, A, B, rows=R, cols=C, datatype="int16")
        got = run_amaranth(dut, prog)
        check_against_model(prog, got)
        Cres = ce_result(prog, [v for _, _, v in got])
        assert np.array_equal(Cres.astype(np.int64), A @ B)


@pytest.mark.parametrize("ml,al,datatype", covering([(1, 1), (1, 2), (2, 3), (3, 7)], ["int16", "bf16"]))
def test_ce_amaranth_latencies(ml, al, datatype):
    """Pipelined PEs: every mapping, cycle and bit exact with the model at other multiplier and
    adder latencies (OS interleaves ``add_latency`` tiles; the skew is ``add_latency`` per row)."""
    rng = np.random.default_rng(7 * ml + al)
    dut = CE(rows=3, cols=2, datatype=datatype, mul_latency=ml, add_latency=al)
    kw = dict(rows=3, cols=2, datatype=datatype, mul_latency=ml, add_latency=al)
    for mode in CEMode:
        for M, N, K in [(7, 5, 6), (2, 9, 1)]:
            if datatype == "int16":
                A, B = rng.integers(-2**15, 2**15, (M, K)), rng.integers(-2**15, 2**15, (K, N))
            else:
                A, B = bf16_operands(rng, (M, K), special=0.05), bf16_operands(rng, (K, N), special=0.05)
            prog = ce_program(mode, A, B, **kw)
            assert prog.cycles == ce_cycles(mode, M, N, K, rows=3, cols=2, mul_latency=ml, add_latency=al)
            got = run_amaranth(dut, prog)
            check_against_model(prog, got)
            Cres = ce_result(prog, [v for _, _, v in got])
            if datatype == "int16":
                assert np.array_equal(Cres.astype(np.int64), A @ B)
            else:
                model, _ = ce_gemm(mode, A, B, **kw)
                assert np.array_equal(Cres.view(np.uint32), model.view(np.uint32))


# --- parameters and errors ---------------------------------------------------------------


def test_bad_parameters():
    with pytest.raises(ValueError, match="rows must be >= 1"):
        CE(rows=0)
    with pytest.raises(ValueError, match="datatype"):
        CE(datatype="fp8")
    with pytest.raises(ConfigError, match="ce_cols"):
        FettaConfig(ce_cols=0)


def test_verilog_any_parameters():
    for R, C, dt in [(1, 1, "bf16"), (2, 3, "int16"), (4, 4, "bf16")]:
        text = verilog.convert(CE(rows=R, cols=C, datatype=dt), name="fetta_ce")
        assert "module fetta_ce" in text


# --- cocotb on the emitted Verilog (Icarus and Verilator) ---------------------------------

SIMS = ["icarus", "verilator"]


def _build(sim, datatype, rows=4, cols=4):
    from sim.runner import build

    config = FettaConfig(datatype=datatype, ce_rows=rows, ce_cols=cols)
    import hdl

    return build(hdl.to_verilog("ce", config), "fetta_ce", sim), config


def _run_jobs(simbuild, config, progs, tmp_path):
    from sim.ce_model import program_to_json
    from sim.runner import run

    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps([program_to_json(p) for p in progs]))
    run_dir = run(simbuild, "sim.benches.ce_bench",
                  env={"FETTA_CE_JOBS": str(jobs), "FETTA_CE_EW": str(config.elem_bits),
                       "FETTA_CE_AW": str(config.acc_bits)})
    return json.loads((run_dir / "ce_out.json").read_text())


def random_shapes(rng, n, hi=64):
    return [tuple(int(x) for x in rng.integers(1, hi + 1, 3)) for _ in range(n)]


@pytest.mark.sim
@pytest.mark.parametrize("sim", SIMS)
def test_ce_cocotb_bf16(sim, tmp_path):
    """Every mapping on random shapes (M, N, K up to 64, mostly not multiples of 4), bit-exact
    with the model, and within the FP32 accumulation bound of float64 numpy."""
    rng = np.random.default_rng({"icarus": 11, "verilator": 12}[sim])
    simbuild, config = _build(sim, "bf16")
    progs, operands = [], []
    for mode in CEMode:
        M, N, K = random_shapes(rng, 1, hi=int(os.environ.get("FETTA_CE_MAX", 24)))[0]
        if mode == CEMode.WS_H:
            M, N, K = 64, 7, 61  # one case at the top of the range
        A, B = bf16_operands(rng, (M, K)), bf16_operands(rng, (K, N))
        acc = bf16_operands(rng, (M, N)) if mode.value % 2 else None
        progs.append(ce_program(mode, A, B, acc))
        operands.append((A, B, acc))
    out = _run_jobs(simbuild, config, progs, tmp_path)
    for prog, res, (A, B, acc) in zip(progs, out, operands):
        C = ce_result(prog, res["vectors"])
        model, _ = ce_gemm(prog.mode, A, B, acc)
        assert np.array_equal(C.view(np.uint32), model.view(np.uint32)), prog.mode
        ref = A.astype(np.float64) @ B.astype(np.float64) + (0 if acc is None else acc)
        err = np.abs(C.astype(np.float64) - ref)
        assert np.all(err <= fp32_error_bound(A, B, acc)), (prog.mode, float(err.max()))


@pytest.mark.sim
@pytest.mark.parametrize("sim", SIMS)
def test_ce_cocotb_int16(sim, tmp_path):
    """Integer mode: every mapping, random shapes, exact against numpy int64."""
    rng = np.random.default_rng({"icarus": 21, "verilator": 22}[sim])
    simbuild, config = _build(sim, "int16")
    progs, operands = [], []
    for mode in CEMode:
        M, N, K = random_shapes(rng, 1, hi=int(os.environ.get("FETTA_CE_MAX", 24)))[0]
        A = rng.integers(-2**15, 2**15, (M, K))
        B = rng.integers(-2**15, 2**15, (K, N))
        progs.append(ce_program(mode, A, B, datatype="int16"))
        operands.append((A, B))
    out = _run_jobs(simbuild, config, progs, tmp_path)
    for prog, res, (A, B) in zip(progs, out, operands):
        C = ce_result(prog, res["vectors"])
        assert np.array_equal(C.astype(np.int64), A @ B), prog.mode


@pytest.mark.sim
def test_ce_cocotb_special_values(tmp_path):
    """Infinities, NaN, signed zeros and subnormals through every mapping (Icarus), bit-exact."""
    rng = np.random.default_rng(31)
    simbuild, config = _build("icarus", "bf16")
    progs = []
    for mode in CEMode:
        A = bf16_operands(rng, (6, 7), special=0.15)
        B = bf16_operands(rng, (7, 5), special=0.15)
        acc = np.where(rng.random((6, 5)) < 0.5, np.float32(-0.0), np.float32(0.0))
        progs.append(ce_program(mode, A, B, acc))
    _run_jobs(simbuild, config, progs, tmp_path)  # the scoreboard checks every vector


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("sim", SIMS)
def test_ce_cocotb_full_range(sim, tmp_path):
    """Slow: two random shapes per mapping with M, N, K up to 64, and a 3x5 array."""
    rng = np.random.default_rng({"icarus": 41, "verilator": 42}[sim])
    for rows, cols in [(4, 4), (3, 5)]:
        simbuild, config = _build(sim, "bf16", rows, cols)
        progs = []
        for mode in CEMode:
            for M, N, K in random_shapes(rng, 2):
                A, B = bf16_operands(rng, (M, K)), bf16_operands(rng, (K, N))
                progs.append(ce_program(mode, A, B, rows=rows, cols=cols))
        _run_jobs(simbuild, config, progs, tmp_path)

