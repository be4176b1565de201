"""The SRAM macro wrapper (:class:`hdl.memory.Sram`): a memory without read-during-write forwarding,
and the forwarding as explicit registers, equal to a transparent memory cycle for cycle."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.memory import Sram


@pytest.mark.parametrize("reads", [1, 2])
def test_sram_reads_the_row_written_in_the_same_cycle(reads):
    """Random writes and reads over 8 rows (so that a read often hits the row written in its cycle):
    every read port returns the row as a transparent memory would, one cycle after its address."""
    dut = Sram(width=16, depth=8, reads=reads)
    rng = np.random.default_rng(reads)
    steps = [(int(rng.integers(0, 2)), int(rng.integers(0, 8)), int(rng.integers(0, 1 << 16)),
              [int(rng.integers(0, 8)) for _ in range(reads)]) for _ in range(400)]
    assert sum(1 for en, wa, _, ras in steps if en and wa in ras) >= 20

    async def bench(ctx):
        model = [0] * 8                  # Amaranth's memory starts at zero, as the model
        for en, wa, wd, ras in steps:
            ctx.set(dut.w_en, en)
            ctx.set(dut.w_addr, wa)
            ctx.set(dut.w_data, wd)
            for i, ra in enumerate(ras):
                ctx.set(dut.r_addr[i], ra)
            await ctx.tick()
            if en:
                model[wa] = wd
            got = [ctx.get(dut.r_data[i]) for i in range(reads)]
            assert got == [model[ra] for ra in ras]

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("reads", [1, 2])
def test_sram_maps_to_block_ram_without_collision_logic(tmp_path, reads):
    """On ECP5 every read port is one ``DP16KD`` (512 rows of 36 bits; the write port is the other
    port of each), and the only flip-flops are the forwarding's: the written row and one hit flag per
    read port. Yosys adds no read-write collision logic of its own (the macro's ``no_rw_check``), which
    it would otherwise put in front of each read (a register of the written row and one of the
    address compare per port, on the address path)."""
    from amaranth.back import verilog

    from gen.toolflow.synth import find_yosys, parse_stat

    (tmp_path / "sram.v").write_text(verilog.convert(Sram(width=36, depth=512, reads=reads), name="sram"))
    run = subprocess.run([find_yosys()[0], "-q", "-p", "read_verilog -sv sram.v; synth_ecp5 -top sram; "
                          "tee -q -o stat.txt stat"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    cells, _ = parse_stat((tmp_path / "stat.txt").read_text())
    assert cells["DP16KD"] == reads
    assert cells["TRELLIS_FF"] == 36 + reads
