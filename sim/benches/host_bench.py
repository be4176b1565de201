"""cocotb bench of the host player (:mod:`sim.host_player`): drives the clock of ``fetta_host`` and
waits for ``finished``; the player itself reads the job file and writes the results.

Env: ``FETTA_HOST_LIMIT`` (cycles before the bench gives up). Writes ``sim_cycles.txt`` (every
clock cycle simulated, host port included) to ``FETTA_RUN_DIR``.
"""

import os
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, First, RisingEdge

CLOCK_NS = 10


@cocotb.test()
async def play(dut):
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    limit = int(os.environ["FETTA_HOST_LIMIT"])
    await First(RisingEdge(dut.finished), ClockCycles(dut.clk, limit))
    assert int(dut.finished.value) == 1, f"the host player did not finish in {limit} cycles"
    cycles = int(get_sim_time("ns")) // CLOCK_NS
    Path(os.environ["FETTA_RUN_DIR"], "sim_cycles.txt").write_text(str(cycles))
