"""cocotb self-test of the simulator plumbing (``tests/test_runner.py``).

DUT: an accumulator ``count <= count + inc`` (``fetta_selftest``).
Env: ``SELFTEST_INC`` (the increment), ``SELFTEST_EXPECT`` (expected count after 5 cycles).
Writes ``count.txt`` to ``FETTA_RUN_DIR``.
"""

import os
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly


@cocotb.test()
async def accumulate(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.inc.value = 0
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    dut.inc.value = int(os.environ["SELFTEST_INC"])
    await ClockCycles(dut.clk, 5)
    await ReadOnly()
    count = int(dut.count.value)
    Path(os.environ["FETTA_RUN_DIR"], "count.txt").write_text(str(count))
    assert count == int(os.environ["SELFTEST_EXPECT"]), count
