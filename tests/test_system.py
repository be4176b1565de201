# amaranth: UnusedElaboratable=no
"""System bench: the emitted Verilog of the whole accelerator against the emulator.

One cocotb run executes a list of host jobs (write memories, push a program, start,
wait for done, read back). The same jobs run on :class:`sim.emulator.Emulator`;
every row read back, the cycle count, the error code and the halting pc must be
equal. The jobs cover every CE grid shape (multicast of IA / IB, spatial reduction
over 1, 2 and 4 CEs), both ping-pong halves, LOAD / STORE / accumulate / write-back
and the error paths (state must be untouched by the faulting instruction).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from gen.design.config import FettaConfig
from gen.compiler.gemm import plan_gemm
from gen.design.isa import Instr, check, halt, load, nop, store, sync, vec
from gen.design.isa import gemm as _gemm
from sim import bf16 as fp
from sim.rtl import plan_jobs, run_jobs_rtl, run_plan_rtl
from sim.emulator import DRAM_BYTES, Emulator

SMALL = FettaConfig(num_ces=4, net_ports=4, banks=4, unified_kb=4, accum_kb=2, imem_depth=16)
#: two stage-count settings of the timing rules: one-cycle arithmetic, and a 2-cycle multiplier
#: with 3-cycle adders (OS interleaves 3 tiles, every PE row and network level takes 3 cycles)
ONE_CYCLE = SMALL.replace(mul_latency=1, add_latency=1)
PIPELINED = SMALL.replace(mul_latency=2, add_latency=3)
#: adders deeper than a stationary tile's loads (4): the stationary period stretches to add_latency
#: for the accumulation unit's read-modify-write (gen.design.isa.tile_period)
DEEP = SMALL.replace(mul_latency=2, add_latency=6)


def emulate_jobs(config, jobs, dram=None):
    """The emulator's outputs for ``jobs`` as :func:`sim.rtl.run_jobs_rtl` gives the RTL's (``dram``:
    the DRAM's first bytes before the jobs; then ``out["dram"]`` is the DRAM after them)."""
    emu = Emulator(config, dram_bytes=max(DRAM_BYTES, 0 if dram is None else len(dram)))
    if dram is not None:
        emu.dram[:len(dram)] = dram
    out = {}
    for j, job in enumerate(jobs):
        p = f"j{j}_"
        for half, addr, rows in job.get("uwrites", []):
            emu.write_unified(half, addr, rows)
        for addr, rows in job.get("awrites", []):
            emu.write_accum(addr, rows)
        # like the RTL: a push overwrites slots from 0, later slots keep older words
        emu.load_program(job["prog"])
        r = emu.run(job.get("half", 0))
        out[p + "cycles"], out[p + "error"], out[p + "pc"] = r.cycles, int(r.error), r.pc
        ur = [emu.unified[h, a:a + n] for h, a, n in job.get("ureads", [])]
        out[p + "urd"] = np.concatenate(ur) if ur else np.zeros((0, config.lanes), np.uint64)
        ar = [emu.accum[a:a + n] for a, n in job.get("areads", [])]
        out[p + "ard"] = np.concatenate(ar) if ar else np.zeros((0, config.lanes), np.uint64)
    if dram is not None:
        out["dram"] = emu.dram
    return out


def random_rows(emu, rng, n):
    return emu.to_elem_bits(fp.round_to_bf16_f32(rng.standard_normal((n, emu.geo.lanes))))


def build_jobs(config, seed):
    import functools
    gemm = functools.partial(_gemm, ports=config.net_ports)
    rng = np.random.default_rng(seed)
    emu = Emulator(config)
    jobs = []
    # GEMM plans on every grid shape of 4 CEs, random sizes, both halves
    for grid in [(1, 1, 4), (2, 2, 1), (4, 1, 1), (1, 4, 1), (2, 1, 2), (1, 2, 2), (1, 1, 1)]:
        M, K, N = (int(x) for x in rng.integers(1, 13, 3))
        A = fp.round_to_bf16_f32(rng.standard_normal((M, K)))
        B = fp.round_to_bf16_f32(rng.standard_normal((K, N)))
        jobs += plan_jobs(config, plan_gemm(config, A, B, grid=grid))
    assert emu.geo.unified_half_rows == 256 and emu.geo.accum_rows == 128
    # a hand-written program: LOAD a bias, GEMM with ACC and WB, STORE, NOP/SYNC
    half_rows = emu.geo.unified_half_rows
    bias = emu.to_elem_bits(fp.round_to_bf16_f32(rng.standard_normal((8, 4))))
    prog = [load(src=120, dst=16, chunks=2),
            gemm(K=5, grid=(2, 2, 1), L0=2, a=(0, 2, 0, 0, 1), b=(20, 4, 2, 0, 0, 1), o=(16, 4, 2, 0, 18, 1),
                 acc=True, wb=True, w_base=150),
            nop(), sync(),
            store(src=16, dst=200, chunks=3, src_stride=1, dst_stride=1), halt()]
    jobs.append({"uwrites": [(1, 0, random_rows(emu, rng, 60)), (1, 120, bias)],
                 "awrites": [(0, emu.to_elem_bits(np.zeros((64, 4))))],
                 "prog": [i.encode() for i in prog], "half": 1,
                 "ureads": [(1, 150, 60), (1, 200, 12)], "areads": [(0, 64)]})
    jobs += mode_jobs(config, emu, rng)
    jobs += tile_order_jobs(config, emu, rng)
    jobs += overlap_jobs(config, emu, rng)
    # VEC: every operation, WB (in place and elsewhere), strided rows, special values
    jobs.append(vec_job(config, emu, rng))
    # error paths: the faulting instruction and everything after it leave no trace
    good = gemm(K=3, a=(0, 1), b=(8, 1), o=(0, 1), wb=True, w_base=100)
    bads = [Instr(opcode=13),
            gemm(K=2, grid=(2, 1, 1), a=(0, 1, 0, 0, 4), b=(16, 1), o=(0, 1, 0, 0, 1)),      # bank conflict
            gemm(K=2, grid=(1, 2, 1), a=(0, 1), b=(16, 1, 0, 0, 0, 0), o=(0, 1)),           # two writers, one row
            gemm(K=4, a=(half_rows - 3, 1), b=(0, 1), o=(0, 1)),                            # unified range
            store(src=0, dst=0, chunks=2, dst_stride=2),                                   # bank conflict
            load(src=0, dst=emu.geo.accum_rows - 4, chunks=2),                              # accumulation range
            gemm(K=1, grid=(1, 1, 2), a=(0, 1, 0, 0, 0, 0, 1), b=(8, 2, 0, 0, 0, 0, 1), o=(0, 1)),  # route (carry)
            gemm(K=1, grid=(2, 2, 2)),                                                      # 8 CEs > 4
            vec(op="add", x=0, y=0, chunks=2, wb=True, w_base=4),                           # VEC WB hazard
            Instr(opcode=6, mode=15)]                                                       # VEC bad op
    for bad in bads:
        jobs.append({"uwrites": [(0, 0, random_rows(emu, rng, 24))],
                     "prog": [good.encode(), bad.encode(), gemm(K=1, o=(40, 1), wb=True, w_base=120).encode(),
                              halt().encode()],
                     "ureads": [(0, 100, 28)], "areads": [(0, 48)]})
    # no HALT: the pc runs off the instruction memory
    jobs.append({"prog": [nop().encode()] * config.imem_depth, "half": 0})
    return jobs


def mode_jobs(config, emu, rng):
    """Every dataflow (CE modes 0..5) x every setting of the three transpose layers (``tr`` 0..7) on
    4 CEs: IB tile loads (V / H), K vectors, K tiling over l0. Grid 1x2x2 (reduction over 2 CEs)
    without the reduction network's transpose, 2x2x1 (4 groups, as it needs) with it; the offsets of
    a transposed operand pick lanes of one block of rows."""
    import functools
    gemm = functools.partial(_gemm, ports=config.net_ports)
    jobs = []
    for md in range(6):
        for tr in range(8):
            if tr & 4:
                grid, a, b, o = (2, 2, 1), (0, 4, 8, 0, 1, 0, 0), (64, 4, 16, 0, 0, 1, 0), (0, 4, 0, 0, 2, 1)
            else:
                grid, a, b, o = (1, 2, 2), (0, 4, 8, 0, 0, 0, 1), (64, 4, 16, 0, 0, 2, 1), (0, 2, 0, 0, 0, 1)
            # output stationary with ACC_L0: the group's interleaved tiles would add to one row in
            # consecutive cycles, which a pipelined accumulation unit cannot (the emulator makes those
            # rows unknown: test_emulator.py); OS_BA and pipelined OS write two tiles of rows instead
            acc_l0 = md != 5 and not (md == 0 and config.add_latency > 1)
            if not acc_l0:
                o = o[:2] + (10,) + o[3:]
            # stationary: K = 2 < add_latency (M2S3) on odd tr, the period stretched to add_latency
            K = 2 if md not in (0, 5) and tr & 1 else 5
            prog = [gemm(K=K, grid=grid, mode=md, L0=2, a=a, b=b, o=o, acc_l0=acc_l0, wb=True, w_base=150, tr=tr),
                    halt()]
            assert check(prog[0], emu.geo) == 0, (md, tr, check(prog[0], emu.geo))
            jobs.append({"uwrites": [(0, 0, random_rows(emu, rng, 100))], "prog": [i.encode() for i in prog],
                         "ureads": [(0, 150, 24)], "areads": [(0, 24)]})
    return jobs


def tile_order_jobs(config, emu, rng):
    """Tile loops in every dataflow: ``L0 x L1`` of 2 x 3, 5 x 1 and 1 x 4 tiles (full and partial
    groups of interleaved OS tiles, l1 steps inside a group), K = 2 (shorter than the drain) and
    7, one program of back-to-back GEMMs, ACC on the second."""
    import functools
    gemm = functools.partial(_gemm, ports=config.net_ports)
    jobs = []
    for md in range(6):
        prog = []
        for n, (L0, L1, K) in enumerate([(2, 3, 2), (5, 1, 7), (1, 4, 3)]):
            # A rows step with l1, B rows with l0, disjoint output tiles of up to 8 rows
            prog.append(gemm(K=K, mode=md, L0=L0, L1=L1, a=(0, 1, 0, 9), b=(60, 1, 9, 0),
                             o=((0, 48, 88)[n], 1, 8, 8 * L0), acc=n == 1, wb=n == 2, w_base=200))
            assert check(prog[-1], emu.geo) == 0, (md, L0, L1, check(prog[-1], emu.geo))
        prog.append(halt())
        jobs.append({"uwrites": [(0, 0, random_rows(emu, rng, 120))],
                     "awrites": [(0, emu.to_elem_bits(rng.standard_normal((128, emu.geo.lanes))))],
                     "prog": [i.encode() for i in prog], "ureads": [(0, 200, 32)], "areads": [(0, 128)]})
    return jobs


def overlap_jobs(config, emu, rng):
    """GEMMs that start while the previous one drains (:mod:`gen.design.control`): runs of one-tile
    GEMMs shorter than the drain (a third waits for a free output context), three in a row adding
    to the same rows, a write-back read by the next GEMM (the hazard: it waits), a change of
    dataflow, of grid and of the reduction transpose (they wait), in every dataflow."""
    import functools
    gemm = functools.partial(_gemm, ports=config.net_ports)
    jobs = []
    for md in range(6):
        # the last three add to the same rows back to back (the accumulation unit's read-modify-write
        # of a row, add_latency cycles, against the overlap rule's spacing)
        prog = [gemm(K=1, mode=md, a=(4 * i, 1), b=(60 + 4 * i, 1), o=(8 * min(i, 2), 1), acc=True) for i in range(5)]
        prog += [gemm(K=2, mode=md, a=(0, 1), b=(60, 1), o=(24, 1), wb=True, w_base=100),
                 gemm(K=2, mode=md, a=(100, 1), b=(60, 1), o=(32, 1)),                  # reads the write-back
                 gemm(K=2, mode=md, a=(8, 1), b=(70, 1), o=(40, 1), wb=True, w_base=110),
                 gemm(K=3, mode=md, a=(20, 1), b=(64, 1), o=(48, 1)),                   # disjoint: overlaps
                 gemm(K=2, mode=(md + 1) % 6, a=(0, 1), b=(60, 1), o=(56, 1)),
                 gemm(K=3, grid=(1, 2, 2), mode=md, a=(0, 4, 8, 0, 0, 0, 1), b=(64, 4, 16, 0, 0, 2, 1),
                      o=(64, 2, 0, 0, 0, 1)),
                 gemm(K=3, grid=(2, 2, 1), mode=md, a=(0, 4, 8, 0, 1, 0, 0), b=(64, 4, 16, 0, 0, 1, 0),
                      o=(80, 4, 0, 0, 2, 1), tr=4, wb=True, w_base=130),
                 gemm(K=1, grid=(2, 2, 1), mode=md, a=(130, 4, 0, 0, 1, 0, 0), b=(64, 4, 16, 0, 0, 1, 0),
                      o=(96, 4, 0, 0, 2, 1), tr=4),
                 halt()]
        for ins in prog[:-1]:
            assert check(ins, emu.geo) == 0, (md, ins, check(ins, emu.geo))
        jobs.append({"uwrites": [(0, 0, random_rows(emu, rng, 150))],
                     "awrites": [(0, emu.to_elem_bits(rng.standard_normal((128, emu.geo.lanes))))],
                     "prog": [i.encode() for i in prog], "ureads": [(0, 100, 48)], "areads": [(0, 128)]})
    return jobs


def test_transposes_emulator():
    """The emulator's transpose layers against numpy on the same rows: a transposed operand gives
    each CE a column of its block, the reduction network's transpose swaps groups and lanes."""
    emu = Emulator(SMALL)
    rng = np.random.default_rng(5)
    rows = random_rows(emu, rng, 100)
    emu.unified[0, :100] = rows
    a, b, o = (0, 4, 8, 0, 1, 0, 0), (64, 4, 16, 0, 0, 1, 0), (0, 4, 0, 0, 2, 1)
    outs = {}
    for tr in (0, 1, 2, 4):
        emu.load_program([i.encode() for i in (_gemm(K=4, grid=(2, 2, 1), a=a, b=b, o=o, ports=4, tr=tr), halt())])
        assert emu.run(0).error == 0
        outs[tr] = fp.f32_from_bits(emu.accum[:16].astype(np.uint32)).astype(np.float64)
    f = fp.bf16_to_f32(fp.bf16_from_bits(rows.astype(np.uint16))).astype(np.float64)
    # CE (im, in): IA rows 4k + im (OS: lanes = m), IB rows 64 + 4k + in (lanes = n); transposed: lane im
    # (in) of the rows 4k + i (64 + 4k + i); result row r of group 2 im + in at accumulation row 4r + 2im + in
    blocks = f[:96].reshape(24, 4, 4)                                      # [block, row in block, lane]
    for im in range(2):
        for in_ in range(2):
            g = 2 * im + in_
            A = {False: f[[4 * k + im for k in range(4)]], True: blocks[0:4, :, im]}
            B = {False: f[[64 + 4 * k + in_ for k in range(4)]], True: blocks[16:20, :, in_]}
            for tr in (0, 1, 2):
                a, b = A[tr == 1], B[tr == 2]
                want = a.T @ b                                             # [m lanes, n lanes]
                bound = np.abs(a).T @ np.abs(b) * 2.0 ** -21               # 4 FP32 roundings of the chain
                got = outs[tr][[4 * r + g for r in range(4)]]
                assert np.all(np.abs(got - want) <= bound), (tr, im, in_)
    # reduction transpose: group h*4 + l gets lane l of the rows of groups 0..3
    for r in range(4):
        np.testing.assert_array_equal(outs[4][[4 * r + g for g in range(4)]], outs[0][[4 * r + g for g in range(4)]].T)


SPECIAL16 = [0x0000, 0x8000, 0x0001, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F7F, 0xFF7F, 0x0080]
SPECIAL32 = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F7FFFFF,
             0xFF7FFFFF, 0x00800000]


def vec_job(config, emu, rng):
    """A program of VEC instructions (ADD, AXPY with WB, SCALE, RELU with WB, in-place AXPY+WB,
    strided ADD; MUL, EXP, RECIP, RSQRT, with and without WB, and a MAX reduction over rows as a
    LOAD and a tree of two VEC MAX) on random rows sprinkled with special values."""
    bf = lambda v: int(fp.bf16_bits(fp.f32_to_bf16(np.float32(v))))   # noqa: E731
    x = random_rows(emu, rng, 80)
    y = fp.f32_bits(rng.standard_normal((100, config.lanes)).astype(np.float32)).astype(np.uint64)
    mask = rng.random(x.shape) < 0.2
    x[mask] = rng.choice(SPECIAL16, mask.sum())
    mask = rng.random(y.shape) < 0.2
    y[mask] = rng.choice(SPECIAL32, mask.sum())
    prog = [vec(op="add", x=0, y=0, chunks=2),
            vec(op="axpy", x=8, y=8, chunks=2, scalar=bf(-0.01), wb=True, w_base=100),
            vec(op="scale", x=16, y=16, chunks=1, scalar=bf(3.0)),
            vec(op="relu", x=0, y=20, chunks=2, wb=True, w_base=120),
            vec(op="axpy", x=40, y=40, chunks=2, scalar=0xFF80, wb=True, w_base=40),
            vec(op="add", x=50, y=60, chunks=2, x_stride=3, y_stride=5),
            vec(op="mul", x=60, y=64, chunks=2, wb=True, w_base=160),
            vec(op="exp", x=0, y=76, chunks=2, scalar=bf(-0.5)),
            vec(op="exp", x=20, y=84, chunks=1, scalar=bf(1.0), wb=True, w_base=176),
            vec(op="recip", x=24, y=88, chunks=1, wb=True, w_base=180),
            vec(op="rsqrt", x=28, y=92, chunks=2, x_stride=3, y_stride=1, wb=True, w_base=184),
            # the maximum of the 16 unified rows 64..79, row by row, into accumulation rows 100..103:
            # rows 64..71 widened into 100..107, max with rows 72..79 (WB to 192..199), then the
            # upper half of that (196..199) into 100..103
            load(src=64, dst=100, chunks=2),
            vec(op="max", x=72, y=100, chunks=2, wb=True, w_base=192),
            vec(op="max", x=196, y=100, chunks=1),
            halt()]
    return {"uwrites": [(0, 0, x)], "awrites": [(0, y)], "prog": [i.encode() for i in prog],
            "ureads": [(0, 0, 200)], "areads": [(0, 108)]}


def compare(rtl, emu, njobs):
    for j in range(njobs):
        p = f"j{j}_"
        assert len(emu[p + "urd"]) == sum(1 for _ in rtl[p + "urd"])
        for key in ("cycles", "error", "pc"):
            assert int(rtl[p + key]) == int(emu[p + key]), (j, key, rtl[p + key], emu[p + key])
        assert int(rtl[p + "host_err"]) == 0
        for key in ("urd", "ard"):
            assert np.array_equal(np.asarray(rtl[p + key], np.uint64), np.asarray(emu[p + key], np.uint64)), (j, key)


@pytest.mark.sim
@pytest.mark.parametrize("config", [ONE_CYCLE, PIPELINED, pytest.param(DEEP, marks=pytest.mark.slow)],
                         ids=["M1S1", "M2S3", "M2S6"])
@pytest.mark.parametrize("sim", [pytest.param("icarus", marks=pytest.mark.slow), "verilator"])
def test_system_matches_emulator(sim, config):
    """Every dataflow, grid, transpose, move, VEC and error path: RTL == emulator, bit and cycle
    exact, at two multiplier / adder latency settings. ``make test`` runs it on Verilator (~30 s
    builds, shared with the other tests of these designs, and seconds of runs); on Icarus (~250
    cycles/s on these designs: 2-3 min each) it is in ``make test-full``, like a third setting
    (M2S6) whose adders are deeper than a stationary tile's loads."""
    jobs = build_jobs(config, seed=7)
    emu = emulate_jobs(config, jobs)
    errors = [int(emu[f"j{j}_error"]) for j in range(len(jobs))]
    assert sorted(set(errors)) == [0, 1, 2, 3, 4, 5, 6, 7]     # every error code is exercised
    rtl, _ = run_jobs_rtl(config, jobs, sim)
    compare(rtl, emu, len(jobs))


@pytest.mark.sim
@pytest.mark.parametrize("config", [ONE_CYCLE, pytest.param(PIPELINED, marks=pytest.mark.slow)], ids=["M1S1", "M2S3"])
def test_vec_ops_match_emulator_icarus(config):
    """The VEC program of :func:`vec_job` alone (every :class:`~gen.design.isa.VecOp`, issue 19): RTL ==
    emulator on Icarus, bit and cycle exact, at both latency settings."""
    emu = Emulator(config)
    jobs = [vec_job(config, emu, np.random.default_rng(19))]
    want = emulate_jobs(config, jobs)
    assert int(want["j0_error"]) == 0
    rtl, _ = run_jobs_rtl(config, jobs, "icarus")
    compare(rtl, want, len(jobs))


@pytest.mark.sim
def test_constant_ce_output_icarus():
    """Regression: a CE whose output never changes during a whole simulation (here CE 3 only sees
    zero padding columns) must still reach the accumulation unit. Under cocotb's default
    ``iverilog -g2012`` the combinational ``always @*`` blocks Yosys emits are never evaluated
    when none of their inputs changes, so the reduction output stayed X; ``sim/runner.py``
    builds Icarus models with ``-g2005``, where the initializers Yosys adds trigger them."""
    rng = np.random.default_rng(3)
    A = fp.round_to_bf16_f32(rng.standard_normal((10, 7)))
    B = fp.round_to_bf16_f32(rng.standard_normal((7, 9)))
    jobs = plan_jobs(SMALL, plan_gemm(SMALL, A, B, grid=(1, 4, 1)))
    rtl, _ = run_jobs_rtl(SMALL, jobs, "icarus")
    compare(rtl, emulate_jobs(SMALL, jobs), len(jobs))


@pytest.mark.sim
@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=pytest.mark.slow)])
def test_fetta_run_rtl_cli(tmp_path, sim):
    """``fetta run --sim icarus|verilator`` on a small configuration: golden bound and emulator equality."""
    spec = tmp_path / "d.json"
    spec.write_text(json.dumps({"name": "d", "format": "dense", "in_modes": [10], "out_modes": [9], "batch": 7}))
    cfg = ["--set", "num_ces=4", "--set", "net_ports=4", "--set", "banks=4", "--set", "unified_kb=4",
           "--set", "accum_kb=2", "--set", "imem_depth=16"]
    res = {}
    for s in (sim, "emulator"):
        p = subprocess.run([sys.executable, "-m", "gen", "run", "--spec", str(spec), "--phase", "fp", "--sim", s,
                            "--out", str(tmp_path / f"{s}.npz"), "--json", *cfg],
                           capture_output=True, text=True, timeout=1200)
        assert p.returncode == 0, p.stderr[-3000:]
        res[s] = json.loads(p.stdout)
    assert res[sim]["cycles"] == res["emulator"]["cycles"]
    assert res[sim]["max_rel_err"] == res["emulator"]["max_rel_err"] < 2 ** -7
    a, b = np.load(tmp_path / f"{sim}.npz"), np.load(tmp_path / "emulator.npz")
    assert np.array_equal(a["Y"].view(np.uint32), b["Y"].view(np.uint32))


@pytest.mark.sim
@pytest.mark.xdist_group("default-verilator")
def test_default_config_every_grid_verilator():
    """The default accelerator (16 CEs) in Verilator: GEMMs of random sizes on all 15 grids of 16 CEs
    (multicast of IA to 1..16 CEs, of IB to 1..16, spatial reduction over 1, 2, 4, 8 and 16 CEs)
    and the CE modes 1..5 (both halves: the 256^3 run of the test above): every row read back, the cycles, error and pc equal the
    emulator's."""
    from gen.compiler.gemm import _grids

    cfg = FettaConfig()
    rng = np.random.default_rng(16)
    jobs = []
    for grid in _grids(cfg.num_ces):
        M, K, N = (int(x) for x in rng.integers(1, 41, 3))
        A = fp.round_to_bf16_f32(rng.standard_normal((M, K)))
        B = fp.round_to_bf16_f32(rng.standard_normal((K, N)))
        jobs += plan_jobs(cfg, plan_gemm(cfg, A, B, grid=grid))
    jobs += mode_jobs(cfg, Emulator(cfg), rng)
    emu = emulate_jobs(cfg, jobs)
    assert all(int(emu[f"j{j}_error"]) == 0 for j in range(len(jobs)))
    rtl, _ = run_jobs_rtl(cfg, jobs, "verilator")
    compare(rtl, emu, len(jobs))


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_default_config_256(sim):
    """The default accelerator (16 CEs, 256 MACs) on a 256 x 256 x 256 GEMM."""
    from gen.toolflow.execute import run_emulator

    cfg = FettaConfig()
    rng = np.random.default_rng(5)
    A = fp.round_to_bf16_f32(rng.standard_normal((256, 256)))
    B = fp.round_to_bf16_f32(rng.standard_normal((256, 256)))
    plan = plan_gemm(cfg, A, B)
    Ye, ce, _ = run_emulator(cfg, plan)
    Yr, cr, _ = run_plan_rtl(cfg, plan, sim)
    assert cr == ce
    assert np.array_equal(Yr.view(np.uint32), Ye.view(np.uint32))
    assert plan.macs / (ce * cfg.macs) >= 0.9


def _dense_sizes(sim, n, seed=2026):
    """Random (batch, K, N) up to 256 each; on Icarus (~30 cycles/s on the default design) the
    product is capped so a run stays within minutes. Verilator also gets the full 256^3."""
    rng = np.random.default_rng(seed)
    sizes = []
    while len(sizes) < n:
        M, K, N = (int(x) for x in rng.integers(1, 257, 3))
        if sim == "verilator" or M * K * N <= 2 ** 16:
            sizes.append((M, K, N))
    return sizes + ([(256, 256, 256)] if sim == "verilator" else [])


@pytest.mark.sim
@pytest.mark.xdist_group("default-verilator")
@pytest.mark.parametrize("sim", [pytest.param("icarus", marks=pytest.mark.slow), "verilator"])
def test_fetta_run_dense_random_default_config(tmp_path, sim):
    """``fetta run`` of dense specs of random sizes on the default accelerator (16 CEs, 256 MACs;
    Verilator also 256^3), compiled as two-tensor networks and run as DMA jobs (the default since
    2026-11-28): the RTL equals the emulator bit for bit (cycles included; the run itself checks
    every job) and every output is within the bf16-rounding + FP32-accumulation bound of the float64
    golden model. Costs ~65 s of elaboration (cached on disk) + ~3 min Verilator build + ~3 min of
    compiling and runs (7 min in all on 2026-11-28, the build cached); on
    Icarus 7 min (the default design's 256 MACs at ~35 clock cycles/s), so that one is in
    ``make test-full`` (``make test`` runs Icarus on the small designs of the other tests)."""
    from gen.workload.spec import load_spec
    from sim.golden import golden, read_npz

    for M, K, N in _dense_sizes(sim, 2):
        spec = tmp_path / f"d{M}x{K}x{N}.json"
        spec.write_text(json.dumps({"name": "d", "format": "dense", "in_modes": [K], "out_modes": [N], "batch": M}))
        res, arrays = {}, {}
        for s in (sim, "emulator"):
            out = tmp_path / f"{s}-{M}x{K}x{N}.npz"
            p = subprocess.run([sys.executable, "-m", "gen", "run", "--spec", str(spec), "--phase", "fp",
                                "--sim", s, "--out", str(out), "--json"], capture_output=True, text=True, timeout=3600)
            assert p.returncode == 0, p.stderr[-3000:]
            res[s] = json.loads(p.stdout)
            arrays[s] = read_npz(out)[1]
        assert res[sim]["cycles"] == res["emulator"]["cycles"], (M, K, N)
        Y = arrays[sim]["Y"]
        assert np.array_equal(Y.view(np.uint32), arrays["emulator"]["Y"].view(np.uint32)), (M, K, N)
        X, W = arrays[sim]["X"].astype(np.float64), arrays[sim]["core_0"].astype(np.float64)
        Yg = golden(load_spec(spec), 0)["Y"]
        bound = 2.0 ** -8 * np.abs(Yg) + K * 2.0 ** -23 * (np.abs(X) @ np.abs(W)) + 1e-30
        assert np.all(np.abs(Y - Yg) <= bound), (M, K, N)
