"""The instruction-level emulator against independent references.

* bf16 GEMMs of random shapes on every CE grid: equal, bit for bit, to the sequential
  MAC chain of ``sim.bf16`` plus the documented pairwise reduction tree, and within
  the FP32-accumulation / bf16-rounding bound of the float64 product;
* the integer mode: exact integer matmul;
* LOAD / STORE, accumulate, error paths (no state touched), cycle rules;
* ``fetta run --sim emulator`` on dense specs against the golden model.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gen.design.config import FettaConfig
from gen.compiler.gemm import plan_gemm
from gen.toolflow.execute import run_emulator
from gen.design.isa import ErrorCode, Geometry, Instr, check, gemm, halt, load, store
from sim import bf16 as fp
from gen.design.timing import program_cycles
from sim.emulator import Emulator

CFG = FettaConfig()
GRIDS = [(1, 1, 16), (4, 4, 1), (2, 2, 4), (16, 1, 1), (1, 16, 1), (2, 1, 2), (1, 1, 1)]


def reference(A, B, gk):
    """Sequential chain per k-chunk of ``Kp / gk``, then the adjacent-pairs tree, then RNE to bf16."""
    K = A.shape[1]
    Kp = -(-K // gk) * gk
    Ap = np.zeros((A.shape[0], Kp), np.float32)
    Ap[:, :K] = A
    Bp = np.zeros((Kp, B.shape[1]), np.float32)
    Bp[:K] = B
    Kc = Kp // gk
    parts = [fp.bf16_dot(Ap[:, None, j * Kc:(j + 1) * Kc], Bp[j * Kc:(j + 1) * Kc].T[None, :, :]) for j in range(gk)]
    while len(parts) > 1:
        parts = [fp.f32_add(parts[i], parts[i + 1]) for i in range(0, len(parts), 2)]
    return fp.f32_to_bf16(parts[0]).astype(np.float32)


def bf16_matrix(rng, shape, scale=1.0):
    return fp.round_to_bf16_f32(rng.standard_normal(shape) * scale)


def error_bound(A, B, K):
    """|Y_hw - Y| <= 2**-8 |Y| (bf16 RNE) + K * 2**-23 (|A| @ |B|) (FP32 accumulation, generous on K)."""
    Y = A.astype(np.float64) @ B
    return Y, 2.0 ** -8 * np.abs(Y) + K * 2.0 ** -23 * (np.abs(A).astype(np.float64) @ np.abs(B)) + 1e-30


@settings(max_examples=15)
@given(M=st.integers(1, 40), K=st.integers(1, 40), N=st.integers(1, 40), grid=st.sampled_from(GRIDS),
       seed=st.integers(0, 2 ** 16))
def test_gemm_bit_exact_and_bounded(M, K, N, grid, seed):
    rng = np.random.default_rng(seed)
    A, B = bf16_matrix(rng, (M, K)), bf16_matrix(rng, (K, N))
    plan = plan_gemm(CFG, A, B, grid=grid)
    Y, cycles, tcu_macs = run_emulator(CFG, plan)
    assert np.array_equal(fp.f32_bits(Y), fp.f32_bits(reference(A, B, grid[2])))
    Yr, bound = error_bound(A, B, K)
    assert np.all(np.abs(Y - Yr) <= bound)
    assert cycles == sum(program_cycles(p.words, CFG) for p in plan.passes)
    assert tcu_macs >= M * N * K


def test_default_grid_256_utilization():
    rng = np.random.default_rng(1)
    A, B = bf16_matrix(rng, (256, 256)), bf16_matrix(rng, (256, 256))
    plan = plan_gemm(CFG, A, B)
    Y, cycles, _ = run_emulator(CFG, plan)
    assert len(plan.passes) > 1          # does not fit one half: ping-pong passes
    assert plan.macs / (cycles * CFG.macs) >= 0.9
    assert np.array_equal(fp.f32_bits(Y), fp.f32_bits(reference(A, B, plan.grid[2])))


def test_special_values_propagate():
    A = np.array([[np.inf, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]], np.float32)
    B = np.array([[0.0], [1.0], [np.nan], [2.0 ** 126]], np.float32)
    plan = plan_gemm(CFG, A, fp.round_to_bf16_f32(B), grid=(1, 1, 1))
    Y, _, _ = run_emulator(CFG, plan)
    assert np.isnan(Y[0, 0]) and np.isnan(Y[1, 0])     # inf * 0 and NaN give the canonical NaN
    assert np.array_equal(fp.f32_bits(Y), fp.f32_bits(reference(A, fp.round_to_bf16_f32(B), 1)))


def test_int16_mode_exact():
    cfg = FettaConfig(datatype="int16")
    rng = np.random.default_rng(3)
    A = rng.integers(-2 ** 15, 2 ** 15, (9, 33))
    B = rng.integers(-2 ** 15, 2 ** 15, (33, 7))
    for grid in ((2, 2, 4), (1, 1, 16)):
        Y, _, _ = run_emulator(cfg, plan_gemm(cfg, A, B, grid=grid))
        want = ((A @ B) + 2 ** 15) % 2 ** 16 - 2 ** 15     # write-back keeps the low int_width bits
        assert np.array_equal(Y, want)


def _emu_with_data(cfg=CFG, seed=0):
    emu = Emulator(cfg)
    rng = np.random.default_rng(seed)
    emu.unified[0] = emu.to_elem_bits(bf16_matrix(rng, emu.unified[0].shape))
    emu.accum[:] = fp.f32_bits(rng.standard_normal(emu.accum.shape).astype(np.float32))
    return emu


def test_load_store_accumulate():
    emu = _emu_with_data()
    g = Geometry.of(CFG)
    u0 = emu.unified[0].copy()
    emu.load_program([load(src=32, dst=64, chunks=2).encode(),
                      gemm(K=3, a=(0, 1), b=(100, 1), o=(64, 1), acc=True).encode(),
                      store(src=64, dst=1000, chunks=2, src_stride=1, dst_stride=3).encode(), halt().encode()])
    r = emu.run(0)
    assert r.error == ErrorCode.NONE and r.pc == 3
    widened = fp.bf16_to_f32(emu.from_elem_bits(u0[32:64]).astype(fp.BF16))
    A = emu.from_elem_bits(u0[0:3]).T                   # [4 m, 3 k]
    B = emu.from_elem_bits(u0[100:103])                 # [3 k, 4 n]
    tile = fp.bf16_dot(A[:, None, :], B.T[None, :, :])
    expect = widened.copy()
    expect[:4] = fp.f32_add(widened[:4], tile)
    got = emu.from_acc_bits(emu.accum[64:96])
    assert np.array_equal(fp.f32_bits(got), fp.f32_bits(expect))
    stored = emu.from_elem_bits(emu.unified[0][1000:1000 + 3 * 32:3])
    assert np.array_equal(fp.bf16_bits(stored.astype(fp.BF16)), fp.bf16_bits(fp.f32_to_bf16(expect)))
    assert r.cycles == program_cycles(emu.imem[:4], CFG)
    assert g.banks == 16


@pytest.mark.parametrize("bad, code", [
    (Instr(opcode=9), ErrorCode.ILLEGAL_OPCODE),
    (gemm(K=2, grid=(4, 1, 1), a=(0, 1, 0, 0, 16), b=(64, 1), o=(0, 1, 0, 0, 1)), ErrorCode.BANK_CONFLICT),
    (gemm(K=8, a=(32767 - 4, 1), b=(0, 1), o=(0, 1)), ErrorCode.UNIFIED_RANGE),
    (store(src=8190, dst=0, chunks=1), ErrorCode.ACCUM_RANGE),
])
def test_errors_halt_without_side_effects(bad, code):
    emu = _emu_with_data()
    good = gemm(K=2, a=(0, 1), b=(8, 1), o=(0, 1), wb=True, w_base=200)
    emu.load_program([good.encode(), bad.encode(), gemm(K=1, o=(300, 1)).encode(), halt().encode()])
    ref = _emu_with_data()
    ref.load_program([good.encode(), halt().encode()])
    ref.run(0)
    r = emu.run(0)
    assert r.error == code and r.pc == 1
    # the good instruction ran, nothing of the bad one or after it
    assert np.array_equal(emu.unified, ref.unified) and np.array_equal(emu.accum, ref.accum)


def test_pc_overflow():
    emu = Emulator(CFG.replace(imem_depth=4))
    r = emu.run(0)
    assert r.error == ErrorCode.PC_OVERFLOW and r.pc == 4


@pytest.mark.parametrize("phase", ["fp", "train"])
def test_fetta_run_emulator_cli(tmp_path, phase):
    spec = tmp_path / "d.json"
    spec.write_text(json.dumps({"name": "d", "format": "dense", "in_modes": [6, 7], "out_modes": [18],
                                "batch": 10}))
    out = tmp_path / "r.npz"
    p = subprocess.run([sys.executable, "-m", "gen", "run", "--spec", str(spec), "--phase", phase,
                        "--sim", "emulator", "--out", str(out), "--json"], capture_output=True, text=True, check=True)
    res = json.loads(p.stdout)
    for key in ("cycles", "macs", "utilization", "max_rel_err"):
        assert key in res
    assert res["macs"] == (3 if phase == "train" else 1) * 10 * 42 * 18
    assert 0 < res["utilization"] <= 1
    assert res["max_rel_err"] < 2 ** -7
    from sim.golden import golden, read_npz

    _, arrays = read_npz(out)
    from gen.workload.spec import load_spec

    ref = golden(load_spec(spec), 0)
    keys = ["Y"] if phase == "fp" else ["Y", "dX", "dcore_0"]
    for k in keys:
        Yr = ref[k]
        assert arrays[k].shape == Yr.shape
        assert np.max(np.abs(arrays[k] - Yr)) <= 2 ** -7 * np.max(np.abs(Yr))
    assert np.array_equal(arrays["X"], ref["X"])


def test_accumulation_read_modify_write_hazard():
    """The accumulation unit adds in ``add_latency - 1`` cycles after reading a row
    (:class:`hdl.accum.AccumAdd`): output-stationary ``ACC_L0`` tiles of one group add to one row in
    consecutive cycles, so with pipelined adders those rows are unknown in the emulator (the RTL
    reads the old value); with one-cycle adders they are known. A stationary ``ACC_L0`` GEMM with
    ``K`` shorter than ``add_latency`` is stretched to a period of ``add_latency``
    (:func:`gen.design.isa.tile_period`), so its rows stay known, the same sums at both latencies."""
    os_acc = gemm(K=3, L0=2, a=(0, 1, 8), b=(64, 1, 8), o=(0, 1), acc_l0=True)
    ws_acc = gemm(K=2, L0=3, mode=1, a=(0, 1, 4), b=(64, 1, 4), o=(16, 1), acc_l0=True)
    ws_sums = {}
    for add_latency in (1, 3):
        cfg = FettaConfig(add_latency=add_latency)
        emu = Emulator(cfg)
        rng = np.random.default_rng(3)
        emu.write_unified(0, 0, emu.to_elem_bits(fp.round_to_bf16_f32(rng.standard_normal((128, cfg.lanes)))))
        emu.write_accum(0, np.zeros((32, cfg.lanes), np.uint64))
        for ins in (os_acc, ws_acc):
            assert ins.L0 > 1 and ins.o_sl0 == 0 and check(ins, emu.geo) == ErrorCode.NONE
        emu.load_program([i.encode() for i in (os_acc, ws_acc, halt())])
        assert emu.run(0).error == 0
        os_rows = emu.accum_x[0:cfg.ce_rows]
        assert os_rows.all() == (add_latency > 1) and os_rows.any() == (add_latency > 1)
        assert not emu.accum_x[16:18].any()
        ws_sums[add_latency] = emu.accum[16:18].copy()
    assert np.array_equal(ws_sums[1], ws_sums[3]) and np.any(ws_sums[1] != 0)
