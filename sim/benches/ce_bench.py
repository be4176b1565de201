"""cocotb bench of the contraction engine (emitted Verilog of ``hdl.ce.CE``), Icarus or Verilator.

Inputs (environment): ``FETTA_CE_JOBS`` names a JSON file holding a list of
programs from :func:`sim.ce_model.program_to_json`. Each program is run in
turn on the same design (idle cycles in between): a :class:`CEDriver` drives
the per-cycle stimulus, a :class:`CEMonitor` samples every valid Psum vector,
and a :class:`Scoreboard` checks each vector in order against the model's
expectation (value bits, emission cycle, drained row). Psums that a program
feeds back into ``psum_in`` (the K-tile chain of IS/WS) are taken from what
the monitor saw, not from the model, so an RTL error cannot be masked.

Output: ``$FETTA_RUN_DIR/ce_out.json``: per program, the captured vectors,
the simulated cycles and the wall-clock seconds of the run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge


def pack(lanes, width):
    v = 0
    for i, x in enumerate(lanes):
        v |= (int(x) & ((1 << width) - 1)) << (i * width)
    return v


def unpack(value, width, n):
    mask = (1 << width) - 1
    return [(value >> (i * width)) & mask for i in range(n)]


class Scoreboard:
    """In-order checker: the k-th captured vector must equal the k-th expected one."""

    def __init__(self, prog):
        self.expected = prog["expected"]
        self.check_row = prog["mode"].startswith("OS")
        self.errors: list[str] = []
        self.seen = 0

    def __call__(self, cycle, row, lanes):
        j = self.seen
        self.seen += 1
        if j >= len(self.expected):
            self.errors.append(f"unexpected Psum vector #{j} in cycle {cycle}")
            return
        w_cycle, w_row, w_lanes = self.expected[j]
        if cycle != w_cycle or (self.check_row and row != w_row) or lanes != w_lanes:
            self.errors.append(f"vector #{j}: got cycle {cycle} row {row} {[hex(x) for x in lanes]}, "
                               f"expected cycle {w_cycle} row {w_row} {[hex(x) for x in w_lanes]}")

    def final(self):
        if self.seen != len(self.expected):
            self.errors.append(f"{self.seen} Psum vectors, expected {len(self.expected)}")
        return self.errors


class CEMonitor:
    """Samples the Psum port after every clock edge; records valid vectors and overruns."""

    def __init__(self, dut, cols, aw, callback):
        self.dut, self.cols, self.aw, self.callback = dut, cols, aw, callback
        self.vectors: list[list[int]] = []
        self.overruns: list[int] = []

    async def run(self, cycles):
        dut = self.dut
        for t in range(cycles):
            await ReadOnly()
            if int(dut.psum__valid.value):
                lanes = unpack(int(dut.psum__data.value), self.aw, self.cols)
                row = int(dut.psum__row.value) if hasattr(dut, "psum__row") else 0
                self.vectors.append(lanes)
                self.callback(t, row, lanes)
            if int(dut.overrun.value):
                self.overruns.append(t)
            await RisingEdge(dut.clk)


class CEDriver:
    """Drives one program's stimulus, one cycle per clock; fed-back Psums come from the monitor."""

    def __init__(self, dut, prog, ew, aw, monitor):
        self.dut, self.prog, self.ew, self.aw, self.monitor = dut, prog, ew, aw, monitor

    def idle(self):
        dut = self.dut
        for name in ("ia__valid", "ia__first", "ia__last", "ia__swap", "ib__valid"):
            getattr(dut, name).value = 0

    async def run(self):
        dut, prog = self.dut, self.prog
        rows, lanes_ib = prog["rows"], max(prog["rows"], prog["cols"])
        for t, cyc in enumerate(prog["inputs"]):
            ia = cyc["ia"]
            dut.ia__valid.value = int(ia is not None)
            dut.ia__data.value = pack(ia if ia is not None else [0] * rows, self.ew)
            dut.ia__first.value = cyc["first"]
            dut.ia__last.value = cyc["last"]
            dut.ia__swap.value = cyc["swap"]
            dut.ib__valid.value = cyc["ib_valid"]
            if lanes_ib > 1:
                dut.ib__index.value = cyc["ib_index"]
            dut.ib__data.value = pack(cyc["ib"], self.ew)
            kind, ref = cyc["psum_in"]
            if kind == "out":
                if ref >= len(self.monitor.vectors):
                    raise AssertionError(f"cycle {t}: Psum vector #{ref} to feed back was not emitted yet")
                ref = self.monitor.vectors[ref]
            dut.psum_in.value = pack(ref, self.aw)
            await RisingEdge(dut.clk)
        self.idle()


@cocotb.test()
async def ce_programs(dut):
    jobs = json.loads(Path(os.environ["FETTA_CE_JOBS"]).read_text())
    ew = int(os.environ.get("FETTA_CE_EW", "16"))
    aw = int(os.environ.get("FETTA_CE_AW", "32"))
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    for name in ("ia__valid", "ia__first", "ia__last", "ia__swap", "ib__valid"):
        getattr(dut, name).value = 0
    for _ in range(3):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    results, errors = [], []
    for n, prog in enumerate(jobs):
        board = Scoreboard(prog)
        monitor = CEMonitor(dut, prog["cols"], aw, board)
        driver = CEDriver(dut, prog, ew, aw, monitor)
        dut.mode.value = prog["mode_value"]  # a cycle before the first vector: the CE registers its decode
        await RisingEdge(dut.clk)
        t0 = time.perf_counter()
        mon = cocotb.start_soon(monitor.run(prog["cycles"] + 4))
        await driver.run()
        await mon
        seconds = time.perf_counter() - t0
        errs = board.final() + [f"drain overrun in cycle {t}" for t in monitor.overruns]
        errors += [f"program {n} ({prog['mode']} {prog['shape']}): {e}" for e in errs[:5]]
        results.append({"mode": prog["mode"], "shape": prog["shape"], "cycles": prog["cycles"],
                        "seconds": seconds, "vectors": monitor.vectors})
    Path(os.environ["FETTA_RUN_DIR"], "ce_out.json").write_text(json.dumps(results))
    assert not errors, "\n".join(errors[:20])
