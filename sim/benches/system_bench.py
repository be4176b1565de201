"""cocotb system bench of the whole accelerator (``fetta_fetta``) (the cocotb side; the host-side API is :mod:`sim.rtl`).

The bench plays the host: for every *job* of the input file it writes rows into
the unified memory (and the accumulation unit), pushes the instruction words,
starts the run on a ping-pong half, waits for ``done``, and reads rows back.

Input (``FETTA_BENCH_IN``, an npz written by :func:`sim.rtl.write_jobs`), per job ``j``:
``j{j}_uaddr/_uhalf/_udata`` unified rows to write (bit patterns ``[n, lanes]``),
``j{j}_aaddr/_adata`` accumulation rows to write, ``j{j}_prog`` instruction words
(as hex strings), ``j{j}_half`` the run half, ``j{j}_ur/_urhalf`` unified rows and
``j{j}_ar`` accumulation rows to read after the run.

Output (``$FETTA_RUN_DIR/out.npz``): ``j{j}_urd``, ``j{j}_ard`` rows read,
``j{j}_cycles``, ``j{j}_error``, ``j{j}_pc``, ``j{j}_host_err``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

CLOCK_NS = 10


def _pack(rows: np.ndarray, bits: int) -> list[int]:
    out = []
    for r in np.asarray(rows, np.uint64):
        v = 0
        for i, x in enumerate(r):
            v |= int(x) << (i * bits)
        out.append(v)
    return out


def _unpack(vals: list[int], lanes: int, bits: int) -> np.ndarray:
    mask = (1 << bits) - 1
    return np.array([[(v >> (i * bits)) & mask for i in range(lanes)] for v in vals], np.uint64).reshape(-1, lanes)


try:
    import cocotb
    from cocotb.clock import Clock
    from cocotb.triggers import ReadOnly, RisingEdge
except ImportError:   # imported on the host side without cocotb's simulator context
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def run_jobs(dut):
        src = np.load(os.environ["FETTA_BENCH_IN"])
        lanes, ebits, abits, njobs = (int(x) for x in src["meta"])
        cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
        for name in ("host_we", "host_re", "instr_push", "instr_clear", "start", "host_sel", "host_half",
                     "run_half", "host_addr", "host_wdata", "instr"):
            getattr(dut, name).value = 0
        dut.rst.value = 1
        await RisingEdge(dut.clk)
        await RisingEdge(dut.clk)
        dut.rst.value = 0
        out = {}

        async def write_rows(sel, half, addrs, rows, bits):
            dut.host_sel.value = sel
            dut.host_half.value = half
            for a, v in zip(addrs, _pack(rows, bits)):
                dut.host_addr.value = int(a)
                dut.host_wdata.value = v
                dut.host_we.value = 1
                await RisingEdge(dut.clk)
            dut.host_we.value = 0

        async def read_rows(sel, half, addrs, bits):
            dut.host_sel.value = sel
            dut.host_half.value = half
            vals = []
            for a in addrs:
                dut.host_addr.value = int(a)
                dut.host_re.value = 1
                await RisingEdge(dut.clk)
                dut.host_re.value = 0
                await ReadOnly()
                assert int(dut.host_rvalid.value) == 1
                vals.append(int(dut.host_rdata.value))
                await RisingEdge(dut.clk)
            return _unpack(vals, lanes, bits)

        for j in range(njobs):
            p = f"j{j}_"
            uaddr = src[p + "uaddr"]
            if len(uaddr):
                for h in (0, 1):
                    sel = src[p + "uhalf"] == h
                    await write_rows(0, h, uaddr[sel], src[p + "udata"][sel], ebits)
            if len(src[p + "aaddr"]):
                await write_rows(1, 0, src[p + "aaddr"], src[p + "adata"], abits)
            dut.instr_clear.value = 1
            await RisingEdge(dut.clk)
            dut.instr_clear.value = 0
            for w in src[p + "prog"]:
                dut.instr.value = int(str(w), 16)
                dut.instr_push.value = 1
                await RisingEdge(dut.clk)
            dut.instr_push.value = 0
            dut.run_half.value = int(src[p + "half"])
            dut.start.value = 1
            await RisingEdge(dut.clk)
            dut.start.value = 0
            await RisingEdge(dut.clk)
            limit = int(src[p + "limit"])
            n = 0
            while True:
                await ReadOnly()
                if int(dut.done.value) == 1:
                    break
                await RisingEdge(dut.clk)
                n += 1
                assert n < limit, f"job {j}: no done after {limit} cycles"
            out[p + "cycles"] = int(dut.cycles.value)
            out[p + "error"] = int(dut.error.value)
            out[p + "pc"] = int(dut.pc.value)
            out[p + "host_err"] = int(dut.host_err.value)
            await RisingEdge(dut.clk)
            ur = src[p + "ur"]
            urh = src[p + "urhalf"]
            rows = [await read_rows(0, int(h), [a], ebits) for a, h in zip(ur, urh)]
            out[p + "urd"] = np.concatenate(rows) if rows else np.zeros((0, lanes), np.uint64)
            out[p + "ard"] = await read_rows(1, 0, src[p + "ar"], abits) if len(src[p + "ar"]) else \
                np.zeros((0, lanes), np.uint64)
        from cocotb.simtime import get_sim_time
        out["sim_cycles"] = int(get_sim_time("ns")) // CLOCK_NS     # every cycle simulated (host port included)
        np.savez(Path(os.environ["FETTA_RUN_DIR"]) / "out.npz", **out)
