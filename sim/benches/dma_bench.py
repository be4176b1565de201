"""cocotb bench for the emitted Verilog of ``fetta_dma`` (:class:`hdl.dma.AxiDma`) on an AXI RAM.

The DRAM is cocotbext-axi's ``AxiRam`` on the ``m_axi__*`` ports (optionally with random pauses
on every channel); the unified memory is a Python dict of beats that answers ``um_re`` with
``um_rdata`` in the next cycle and takes ``um_we`` writes.

Input: env ``FETTA_DMA_CASE``, a JSON file::

    {"seed": int, "pause": bool, "dram_bytes": int, "um": {row: beat, ...},
     "descs": [[store, dram address, first row, beats], ...]}

The DRAM starts with ``random.Random(seed).randbytes(dram_bytes)``. Output:
``$FETTA_RUN_DIR/dma_out.json``: ``{"cycles": [[cycles, error], ...], "um": {row: beat},
"dram": hex of the DRAM}``; ``cycles`` counts from the first busy cycle of a descriptor to its
``done``. The comparison with the expected data is done by the pytest caller.
"""

from __future__ import annotations

import itertools
import json
import os
import random
from pathlib import Path

import warnings

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiBus, AxiRam

# cocotbext-axi 0.1.28 (the newest) and cocotb-bus still call cocotb APIs that 2.x deprecates
# (``setimmediatevalue``, ``Edge``); the runs are made with warnings as errors, which is meant for this
# project's code, not for theirs: their deprecation warnings (and only theirs) are ignored
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotb(ext|_bus)\.")


def _pauses(rng: random.Random):
    return itertools.cycle([rng.random() < 0.3 for _ in range(997)])


@cocotb.test()
async def dma_descriptors(dut):
    case = json.loads(Path(os.environ["FETTA_DMA_CASE"]).read_text())
    rng = random.Random(case["seed"])
    Clock(dut.clk, 10, unit="ns").start()
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi", bus_separator="__"), dut.clk, dut.rst,
                 size=case["dram_bytes"])
    ram.write(0, random.Random(case["seed"]).randbytes(case["dram_bytes"]))
    if case["pause"]:
        for ch in ("aw", "w", "b", "ar", "r"):
            getattr(ram.write_if if ch in ("aw", "w", "b") else ram.read_if, f"{ch}_channel").set_pause_generator(
                _pauses(rng))
    um = {int(k): int(v) for k, v in case["um"].items()}
    dut.rst.value = 1
    dut.cmd_valid.value = 0
    dut.um_rdata.value = 0
    for _ in range(3):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    cycles = []
    todo = list(case["descs"])
    rdata_next, t, state, hs, limit = 0, 0, "idle", 0, 0
    while todo or state != "idle":
        await RisingEdge(dut.clk)                  # writable: this cycle's inputs
        t += 1
        dut.um_rdata.value = rdata_next            # the data of the read of the cycle before
        if state == "idle":
            store, dram, row, beats = todo.pop(0)
            dut.cmd_store.value, dut.cmd_dram.value = int(store), dram
            dut.cmd_row.value, dut.cmd_beats.value = row, beats
            dut.cmd_valid.value = 1
            state, limit = "offer", 50 * (beats + 50)
        elif state == "accepted":                  # the first busy cycle
            dut.cmd_valid.value = 0
            state = "run"
        await ReadOnly()                           # this cycle's outputs
        rdata_next = um.get(int(dut.um_raddr.value), 0) if int(dut.um_re.value) else 0
        if int(dut.um_we.value):
            um[int(dut.um_waddr.value)] = int(dut.um_wdata.value)
        if state == "offer" and int(dut.cmd_ready.value):
            state, hs = "accepted", t              # handshake at the coming edge
        elif state == "run" and int(dut.done.value):
            cycles.append([t - (hs + 1), int(dut.error.value)])
            state = "idle"
        assert state == "offer" or t - hs < limit, "descriptor did not finish"
    out = {"cycles": cycles, "um": {str(k): str(v) for k, v in um.items()},
           "dram": ram.read(0, case["dram_bytes"]).hex()}
    (Path(os.environ["FETTA_RUN_DIR"]) / "dma_out.json").write_text(json.dumps(out))
