"""cocotb bench for the emitted Verilog of ``fetta_dist_net`` / ``fetta_red_net``.

Input: env ``FETTA_NET_CASE``, a JSON file::

    {"latency": 1, "ctrl_port": "sel_vec" | "mode",
     "beats": [{"data": int, "valid": int, "ctrl": int, "bank": int, "transpose": int}, ...]}

(``data`` is the flat ``i_data`` port value, ``ctrl`` the value of ``ctrl_port``.)
The bench resets the design, drives one beat per clock cycle, then idle cycles (invalid,
with scrambled controls) until the pipeline has drained, and writes
``$FETTA_RUN_DIR/net_out.json``: ``{"outputs": [{"data": int, "valid": int}, ...]}``, the
outputs that belong to each beat, in order (sampled ``latency`` cycles after the beat).
The comparison with the Python model is done by the pytest caller.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge


@cocotb.test()
async def net_stream(dut):
    case = json.loads(Path(os.environ["FETTA_NET_CASE"]).read_text())
    lat = int(case["latency"])
    ctrl = getattr(dut, case["ctrl_port"])
    beats = case["beats"]
    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 1
    dut.i_valid.value = 0
    dut.i_data.value = 0
    ctrl.value = 0
    dut.bank_idx.value = 0
    dut.transpose.value = 0
    for _ in range(2):
        await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    outputs = []
    ones = (1 << len(ctrl)) - 1
    for c in range(len(beats) + lat - 1):
        if c < len(beats):
            b = beats[c]
            dut.i_data.value = int(b["data"])
            dut.i_valid.value = int(b["valid"])
            ctrl.value = int(b["ctrl"])
            dut.bank_idx.value = int(b["bank"])
            dut.transpose.value = int(b["transpose"])
        else:  # drain with bubbles whose controls must not leak into the beats in flight
            dut.i_valid.value = 0
            ctrl.value = ones if c % 2 else 0
            dut.transpose.value = c % 2
        await RisingEdge(dut.clk)
        await ReadOnly()
        if c >= lat - 1:
            outputs.append({"data": int(dut.o_data.value), "valid": int(dut.o_valid.value)})
        await FallingEdge(dut.clk)
    Path(os.environ["FETTA_RUN_DIR"], "net_out.json").write_text(json.dumps({"outputs": outputs}))
