"""Unknown elements in the emulator's memories (:mod:`sim.unknown`): never written, or computed from an
unknown one. The oracle is the arithmetic itself: memories that start as NaN (an SRAM macro powers up
with any content) turn exactly the unknown elements into NaN, because every operation of the ISA
propagates a NaN operand (``0 * NaN`` is NaN) and no result reads an operand it does not depend on."""

from __future__ import annotations

import numpy as np
import pytest

from gen.compiler import compile_layer
from gen.design.config import FettaConfig
from gen.design.isa import DmaMode, Instr, Opcode, gemm, halt, vec
from gen.toolflow.execute import ExecutionError, execute
from gen.workload.spec import parse_spec
from sim.emulator import Emulator
from sim.golden import random_inputs
from tests.test_compiler import SPECS
from tests.test_system import SMALL, build_jobs

BF16_NAN, F32_NAN = 0x7FC1, 0x7FC00001      # quiet NaNs with a payload


def _values(emu: Emulator) -> tuple[np.ndarray, np.ndarray]:
    return emu.from_elem_bits(emu.unified), emu.from_acc_bits(emu.accum)


@pytest.mark.parametrize("seed", [0, 1])
def test_unknown_elements_are_those_a_nan_memory_poisons(seed):
    """Every job of the system test (each dataflow x transpose layer, overlapping GEMMs, tile orders,
    LOAD / STORE, every VEC operation, error paths), a tenth of the rows it writes left out: the unknown
    elements of both memories after them are exactly the NaNs of a run whose memories started as NaN
    (elements the data itself makes NaN, e.g. RSQRT of a negative number, left out)."""
    rng = np.random.default_rng(seed)
    unknown_results = 0
    for job in build_jobs(SMALL, seed):
        clean, poisoned = Emulator(SMALL), Emulator(SMALL)     # each job from power-up
        poisoned.unified[:], poisoned.accum[:] = BF16_NAN, F32_NAN
        # a tenth of the rows the jobs write left out: their instructions read rows nothing wrote
        uwrites = [(half, addr + i, rows[i:i + 1]) for half, addr, rows in job.get("uwrites", [])
                   for i in range(len(rows)) if rng.random() >= 0.1]
        for emu in (clean, poisoned):
            for half, addr, rows in uwrites:
                emu.write_unified(half, addr, rows)
            for addr, rows in job.get("awrites", []):
                emu.write_accum(addr, rows)
            emu.load_program(job["prog"])
            emu.run(job.get("half", 0))
        for got_x, nan_clean, nan_poisoned in zip((clean.unified_x, clean.accum_x), _values(clean),
                                                  _values(poisoned)):
            data = ~np.isnan(nan_clean)
            assert np.array_equal(got_x[data], np.isnan(nan_poisoned)[data])
        results = [clean.unified_x[h, a:a + n] for h, a, n in job.get("ureads", [])]
        results += [clean.accum_x[a:a + n] for a, n in job.get("areads", [])]
        unknown_results += any(r.any() for r in results)
    # in most jobs the rows read back as results hold unknown elements computed from the rows left out
    assert unknown_results >= len(build_jobs(SMALL, seed)) // 2, unknown_results


def test_unknown_follows_the_operands_an_instruction_reads():
    emu = Emulator(SMALL)
    emu.write_unified(0, 0, emu.to_elem_bits(np.ones((8, SMALL.lanes), np.float32)))   # rows 0..7 known
    emu.load_program([gemm(K=2, a=(0, 1), b=(4, 1), o=(0, 1)).encode(),         # known operands
                      gemm(K=2, a=(6, 1), b=(4, 1), o=(8, 1)).encode(),         # A rows 6, 7: known
                      gemm(K=3, a=(6, 1), b=(2, 1), o=(16, 1)).encode(),        # A row 8: never written
                      vec(op="relu", x=8, y=0, chunks=1).encode(),              # RELU does not read x
                      halt().encode()])
    assert emu.run(0).error == 0
    acc = emu.accum_x
    assert not acc[0:4].any() and not acc[8:12].any() and acc[16:20].all() and acc[20:].all()
    emu.load_program([vec(op="add", x=8, y=8, chunks=1).encode(), halt().encode()])   # ADD reads x
    assert emu.run(0).error == 0
    assert acc[8:12].all() and not acc[0:4].any()


def test_dma_carries_unknown_bytes_through_dram():
    emu = Emulator(SMALL)
    g = emu.geo
    emu.write_unified(1, 0, emu.to_elem_bits(np.ones((g.dma_rows, SMALL.lanes), np.float32)))
    dma = [Instr(opcode=Opcode.DMA, mode=DmaMode.STORE, K=2, a_base=0, a_sel=64),      # one known beat, one not
           Instr(opcode=Opcode.DMA, mode=DmaMode.LOAD, K=2, a_base=4 * g.dma_rows, a_sel=64), halt()]
    emu.load_program([i.encode() for i in dma])
    assert emu.run(0).error == 0
    assert not emu.dram_x[64:64 + g.dma_bytes].any() and emu.dram_x[64 + g.dma_bytes:64 + 2 * g.dma_bytes].all()
    loaded = emu.unified_x[1, 4 * g.dma_rows:6 * g.dma_rows]
    assert not loaded[:g.dma_rows].any() and loaded[g.dma_rows:].all()


def test_execute_refuses_a_result_that_depends_on_an_unwritten_row():
    """A compiled program with one host write left out: the result reads rows nothing wrote, which the
    emulator's zeros would hide and silicon would not."""
    config = FettaConfig()
    spec = parse_spec(SPECS["tt"])
    prog = compile_layer(spec, "fp", config)
    inputs = random_inputs(spec, 0)
    execute(prog, inputs, config)
    dropped = next(run for run in prog.runs if run.writes)
    dropped.writes.pop()
    with pytest.raises(ExecutionError, match="never wrote"):
        execute(prog, inputs, config)
