# amaranth: UnusedElaboratable=no
"""DMA instructions (issue 17): the ``DMA`` opcode, its checks and timing, the emulator's DRAM, and the
accelerator's DMA engine on the RTL against the emulator, bit and cycle exact (Icarus: a small
configuration; Verilator: the default design), with the bandwidth of long transfers.

The RTL runs go through the host player (:mod:`sim.host_player`), whose AXI4 RAM is always ready and
answers reads ``dram_latency`` cycles after AR: the DRAM :func:`gen.design.control.dma_cycles` counts.
"""

from __future__ import annotations

import numpy as np
import pytest

from gen.design.config import FettaConfig
from gen.design.control import Clock, dma_cycles
from gen.design.isa import (ErrorCode, Geometry, Instr, Opcode, check, decode, dma_load, dma_store, dma_wait, gemm,
                            halt, nop, vec)
from gen.errors import ConfigError
from sim import bf16 as fp
from sim.emulator import DramRangeError, Emulator
from tests.test_dma import run_descriptors
from tests.test_system import emulate_jobs

#: the small configuration of tests/test_system.py with a 128-bit DMA (2 rows per beat), bursts of 4,
#: 2 in flight and a read latency that makes the engine wait for bursts (gaps between them)
SMALL = FettaConfig(num_ces=4, net_ports=4, banks=4, unified_kb=4, accum_kb=2, imem_depth=16, dma_data_bits=128,
                    dma_burst=4, dma_outstanding=2, dram_latency=6)


def test_encoding_and_checks():
    geo = Geometry.of(SMALL)
    assert (geo.dma_rows, geo.dma_bytes) == (2, 16)
    ins = dma_load(dram=0x1230, row=6, beats=5)
    assert decode(ins.encode()) == ins and ins.opcode == Opcode.DMA
    assert check(ins, geo) == ErrorCode.NONE
    assert check(dma_store(row=6, dram=0x1230, beats=5), geo) == ErrorCode.NONE
    assert check(dma_wait(), geo) == ErrorCode.NONE
    bad = {
        "mode": (Instr(opcode=Opcode.DMA, mode=3, K=1), ErrorCode.BAD_SHAPE),
        "beats": (dma_load(dram=0, row=0, beats=0), ErrorCode.BAD_SHAPE),
        "dram alignment": (dma_load(dram=8, row=0, beats=1), ErrorCode.BAD_SHAPE),
        "row alignment": (dma_store(row=1, dram=0, beats=1), ErrorCode.BAD_SHAPE),
        "past 4 GiB": (dma_load(dram=(1 << 32) - 16, row=0, beats=2), ErrorCode.BAD_SHAPE),
        "range": (dma_load(dram=0, row=geo.unified_half_rows - 2, beats=2), ErrorCode.UNIFIED_RANGE),
    }
    for what, (ins, code) in bad.items():
        assert check(ins, geo) == code, what
    assert check(dma_load(dram=(1 << 32) - 16, row=geo.unified_half_rows - 2, beats=1), geo) == ErrorCode.NONE


def test_rows_per_beat_and_unbuildable_configs():
    """The beat is at most a row per bank; a configuration without a power-of-two beat cannot be built."""
    assert Geometry.of(FettaConfig()).dma_rows == 4
    assert Geometry.of(FettaConfig(lanes=2, num_ces=4, net_ports=4, banks=4, ce_rows=2, ce_cols=2)).dma_rows == 4
    from hdl.top import Fetta
    with pytest.raises(ConfigError) as exc:
        Fetta(FettaConfig(datatype="int16", int_width=12, int_acc_width=24, unified_kb=384))    # 48-bit rows
    assert exc.value.field == "dma_data_bits"


@pytest.mark.parametrize("params", [dict(data_bits=64, burst=4, outstanding=2), dict(data_bits=256, burst=16,
                                                                                   outstanding=4),
                                    dict(data_bits=64, burst=2, outstanding=1)], ids=["64-4-2", "256-16-4", "64-2-1"])
def test_dma_cycles_is_the_engines(params):
    """:func:`dma_cycles` against :class:`hdl.dma.AxiDma` in Amaranth's simulator (an always-ready
    subordinate): read latencies 1 .. 12, 4 KiB crossings, loads and stores, with and without gaps."""
    bb = params["data_bits"] // 8
    geo = Geometry(banks=4, lanes=2, ces=4, ce_rows=2, ce_cols=2, unified_half_rows=1024, accum_rows=64,
                   imem_depth=16, dma_rows=params["data_bits"] // 32, dma_bytes=bb, dma_burst=params["burst"],
                   dma_outstanding=params["outstanding"])
    for L in (1, 5, 12):
        for addr, n in ((0, 1), (0, 9), (4096 - 3 * bb, 13), (0, 40)):
            for store in (False, True):
                _, took = run_descriptors(dict(params, row_bits=32, row_addr_bits=12), [(store, addr, 0, n)],
                                          latency=L)
                ins = (dma_store if store else dma_load)(dram=addr, row=0, beats=n)
                assert took[0][0] == dma_cycles(ins, Geometry(**{**geo.__dict__, "dram_latency": L})), \
                    (L, addr, n, store)
    for num, den in ((4, 5), (1, 3), (5, 7)):           # a DRAM slower than one beat per cycle
        for L, addr, n in ((1, 0, 9), (12, 4096 - 3 * bb, 13), (5, 0, 40)):
            for store in (False, True):
                _, took = run_descriptors(dict(params, row_bits=32, row_addr_bits=12), [(store, addr, 0, n)],
                                          latency=L, rate=(num, den))
                ins = (dma_store if store else dma_load)(dram=addr, row=0, beats=n)
                g = Geometry(**{**geo.__dict__, "dram_latency": L, "dram_num": num, "dram_den": den})
                assert took[0][0] == dma_cycles(ins, g), (num, den, L, addr, n, store)
                assert took[0][0] >= n * den / num
    if params["outstanding"] * params["burst"] > 12 + 2:
        g = Geometry(**{**geo.__dict__, "dram_latency": 12})
        assert dma_cycles(dma_load(dram=0, row=0, beats=100), g) == 100 + 12 + 2
        assert dma_cycles(dma_store(row=0, dram=0, beats=100), g) == 100 + 4


def test_clock_overlaps_dma_with_compute():
    """A DMA load / store acts in CHECK and the next FETCH follows; a second one, a wait and HALT act
    once the engine is idle; GEMMs and VECs run meanwhile."""
    geo = Geometry.of(FettaConfig(freq_mhz=100.0))         # 25.6 GB/s at 100 MHz: a beat every cycle
    assert (geo.dram_num, geo.dram_den) == (1, 1)
    n, L = 64, geo.dram_latency
    clock = Clock(geo)
    c0 = clock.act(dma_load(dram=0, row=0, beats=n))
    assert c0 == 3
    c1 = clock.act(vec(op="relu", chunks=4))
    assert c1 == c0 + 3                                    # no wait for the DMA
    c2 = clock.act(dma_store(row=0, dram=0, beats=n))
    assert c2 == c0 + 1 + n + L + 2                        # the load's done cycle
    c3 = clock.act(dma_wait())
    assert c3 == c2 + 1 + n + 4
    assert clock.act(halt()) == c3 + 3
    clock = Clock(geo)
    clock.act(dma_load(dram=0, row=0, beats=n))
    assert clock.act(halt()) == 3 + 1 + n + L + 2          # HALT waits for the engine
    paced = Geometry.of(FettaConfig())                       # 25.6 GB/s at 1 GHz, 32-byte beats: 4/5
    assert (paced.dram_num, paced.dram_den) == (4, 5)
    clock = Clock(paced)
    clock.act(dma_load(dram=0, row=0, beats=n))
    assert clock.act(halt()) == 3 + 1 + dma_cycles(dma_load(dram=0, row=0, beats=n), paced) > 3 + n * 5 // 4


def test_emulator_moves_bytes_both_ways():
    for cfg in (FettaConfig(), FettaConfig(datatype="int16", int_width=4, int_acc_width=8, lanes=2, banks=2,
                                           net_ports=2, num_ces=2, ce_rows=2, ce_cols=2, vector_lanes=2)):
        emu = Emulator(cfg)
        g = emu.geo
        rng = np.random.default_rng(1)
        emu.dram[:4096] = rng.integers(0, 256, 4096)
        row = 2 * g.dma_rows
        emu.load_program([w.encode() for w in (dma_load(dram=64, row=row, beats=10), dma_wait(),
                                               dma_store(row=row, dram=8192, beats=10), halt())])
        r = emu.run(0)
        assert r.error == ErrorCode.NONE
        nb = 10 * g.dma_bytes
        assert (emu.dram[8192:8192 + nb] == emu.dram[64:64 + nb]).all()
        assert not emu.unified[0].any()                    # the run's own half is untouched
        # lane 0 of the first row is the beat's lowest bits, little-endian
        first = int.from_bytes(emu.dram[64:64 + 8].tobytes(), "little") & ((1 << cfg.elem_bits) - 1)
        assert int(emu.unified[1, row, 0]) == first
    emu = Emulator(FettaConfig(), dram_bytes=64)
    emu.load_program([dma_load(dram=64, row=0, beats=1).encode(), halt().encode()])
    with pytest.raises(DramRangeError):
        emu.run(0)


# --------------------------------------------------------------------------- RTL == emulator
def dma_jobs(cfg, seed: int = 0):
    """Jobs that DMA operands into the half the run does not use while a GEMM computes on the run's
    half, compute on the moved data in the next run, DMA the results out, and fail DMA checks."""
    emu = Emulator(cfg)
    geo = emu.geo
    R, nb, P = geo.dma_rows, geo.dma_bytes, cfg.net_ports
    rng = np.random.default_rng(seed)

    def rows(n):
        return emu.to_elem_bits(fp.round_to_bf16_f32(rng.standard_normal((n, cfg.lanes))))

    mm = gemm(K=4, a=(0, 1), b=(16, 1), o=(0, 1), wb=True, w_base=64, ports=P)
    cross = 4096 - 3 * nb                               # a transfer across a 4 KiB boundary
    jobs = [
        # half 0 computes on host-written rows while the DMA fills rows 0 .. 47 of half 1
        {"uwrites": [(0, 0, rows(24))], "half": 0,
         "prog": [w.encode() for w in (dma_load(dram=0, row=0, beats=16 // R * 2), mm,
                                        dma_load(dram=cross, row=32, beats=16 // R), nop(), dma_wait(), halt())],
         "ureads": [(0, 64, 4), (1, 0, 48)]},
        # half 1 computes on the rows the DMA moved; the DMA stores half 0's results and loads more
        {"half": 1,
         "prog": [w.encode() for w in (dma_store(row=64, dram=8192, beats=4 // R), mm,
                                        dma_load(dram=nb * 4, row=96, beats=8), halt())],
         "ureads": [(1, 64, 4), (0, 96, 8 * R)], "areads": [(0, 4)]},
        # half 0: store half 1's results, then a DMA instruction that fails (waits for the store first)
        {"half": 0,
         "prog": [w.encode() for w in (dma_store(row=64, dram=12288, beats=4 // R),
                                        Instr(opcode=Opcode.DMA, mode=3, K=1), halt())]},
        {"half": 0, "prog": [w.encode() for w in (dma_store(row=1, dram=0, beats=1), halt())]},
        {"half": 1, "prog": [w.encode() for w in (dma_load(dram=0, row=geo.unified_half_rows - R, beats=2),
                                                   halt())]},
    ]
    dram = rng.integers(0, 256, 8192, dtype=np.uint8)
    return jobs, dram


def compare(cfg, sim):
    from sim.rtl import run_jobs_rtl
    from sim import toolchain

    if not toolchain.available(sim):
        pytest.skip(f"{sim} not available")
    jobs, dram = dma_jobs(cfg)
    want = emulate_jobs(cfg, jobs, dram)
    got, _ = run_jobs_rtl(cfg, jobs, sim, dram=dram)
    for j in range(len(jobs)):
        p = f"j{j}_"
        for key in ("cycles", "error", "pc"):
            assert int(got[p + key]) == int(want[p + key]), (j, key, int(got[p + key]), int(want[p + key]))
        assert int(got[p + "host_err"]) == 0 and int(got[p + "dma_error"]) == 0
        for key in ("urd", "ard"):
            assert np.array_equal(got[p + key], want[p + key]), (j, key)
    assert [int(want[f"j{j}_error"]) for j in range(len(jobs))] == [0, 0, ErrorCode.BAD_SHAPE, ErrorCode.BAD_SHAPE,
                                                                  ErrorCode.UNIFIED_RANGE]
    assert np.array_equal(got["dram"][:len(want["dram"])], want["dram"][:len(got["dram"])])
    assert want["dram"][8192:].any() and want["dram"][12288:].any()
    return got, want


@pytest.mark.sim
def test_dma_instructions_match_emulator_icarus():
    compare(SMALL, "icarus")


@pytest.mark.sim
@pytest.mark.slow
def test_dma_instructions_match_emulator_verilator():
    """The default design on Verilator (one ~3 min build, cached; its DRAM paced at 25.6 GB/s: 4/5 of a
    beat per cycle), then the bandwidth of long transfers: 2048 beats (64 KiB) each way in one run,
    every cycle of the run counted, against the configured DRAM bandwidth."""
    compare(FettaConfig(), "verilator")
    from sim.rtl import run_jobs_rtl

    cfg = FettaConfig()
    n = 2048
    prog = [w.encode() for w in (dma_load(dram=0, row=0, beats=n), dma_wait(), halt())]
    prog2 = [w.encode() for w in (dma_store(row=0, dram=1 << 16, beats=n), dma_wait(), halt())]
    dram = np.random.default_rng(3).integers(0, 256, 1 << 16, dtype=np.uint8)
    got, _ = run_jobs_rtl(cfg, [{"half": 1, "prog": prog}, {"half": 1, "prog": prog2}], "verilator", dram=dram)
    want = emulate_jobs(cfg, [{"half": 1, "prog": prog}, {"half": 1, "prog": prog2}], dram)
    geo = Geometry.of(cfg)
    assert (geo.dram_num, geo.dram_den) == (4, 5)
    for j in range(2):
        assert int(got[f"j{j}_cycles"]) == int(want[f"j{j}_cycles"])
        assert n / int(got[f"j{j}_cycles"]) >= 0.90 * geo.dram_num / geo.dram_den
    assert np.array_equal(got["dram"][1 << 16:2 << 16], dram)


@pytest.mark.sim
def test_bench_dram_grows_past_one_mib_icarus():
    """A program whose DRAM reaches past the bench's default 1 MiB gets a bench DRAM of the next power
    of two (2 MiB here): a load from above 1 MiB and a store to the top of it, RTL == emulator."""
    from sim.rtl import run_jobs_rtl

    nb = Geometry.of(SMALL).dma_bytes
    size = (2 << 20) - nb                               # not a power of two: the bench rounds up
    src, dst = (1 << 20) + 4096, size - 3 * nb
    prog = [w.encode() for w in (dma_load(dram=src, row=0, beats=3), dma_store(row=0, dram=dst, beats=3), halt())]
    jobs = [{"half": 0, "prog": prog}]
    dram = np.random.default_rng(5).integers(0, 256, size, dtype=np.uint8)
    want = emulate_jobs(SMALL, jobs, dram)
    got, _ = run_jobs_rtl(SMALL, jobs, "icarus", dram=dram)
    assert int(got["j0_error"]) == 0 and int(got["j0_cycles"]) == int(want["j0_cycles"])
    assert len(got["dram"]) == 2 << 20
    assert np.array_equal(got["dram"][dst:dst + 3 * nb], dram[src:src + 3 * nb])
    assert np.array_equal(got["dram"][:size], want["dram"][:size])
