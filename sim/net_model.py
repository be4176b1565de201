"""Simulation helpers for the networks: element adders, port packing, the cocotb bench driver.

The network semantics themselves are in :mod:`gen.design.netsem`.
"""

from __future__ import annotations

from typing import Callable

from gen.design.netsem import Data, int_adder
from sim.bf16 import f32_add, f32_bits, f32_from_bits
import hdl
from sim import runner

# --- element arithmetic on raw bit patterns ------------------------------------------
def f32_adder() -> Callable[[int, int], int]:
    """FP32 addition on raw uint32 patterns, bit-exact with :func:`sim.bf16.f32_add`."""
    import numpy as np

    def add(a: int, b: int) -> int:
        return int(f32_bits(f32_add(f32_from_bits(np.uint32(a)), f32_from_bits(np.uint32(b)))))

    return add


def adder_for(datatype: str, acc_width: int) -> Callable[[int, int], int]:
    return f32_adder() if datatype == "bf16" else int_adder(acc_width)


# --- packing for the RTL's flat ports -------------------------------------------------
def pack_rows(data: Data, width: int) -> int:
    """Rows -> the flat ``ArrayLayout(ArrayLayout(width, L), N)`` port value."""
    out, pos = 0, 0
    mask = (1 << width) - 1
    for row in data:
        for v in row:
            out |= (int(v) & mask) << pos
            pos += width
    return out


def unpack_rows(value: int, ports: int, lanes: int, width: int) -> Data:
    mask = (1 << width) - 1
    return [[(value >> ((p * lanes + l) * width)) & mask for l in range(lanes)] for p in range(ports)]


def run_net_bench(top: str, config, beats, *, latency: int, ctrl_port: str, sim: str, workdir) -> list[dict]:
    """Emit ``top`` for ``config``, build it (cached per Verilog text and simulator), stream
    ``beats`` = ``(flat data, valid bits, control port value, bank_idx, transpose)`` through
    ``sim.benches.net_bench`` and return its outputs (``{"data", "valid"}`` per beat)."""
    import json
    from pathlib import Path

    build = runner.build(hdl.to_verilog(top, config), hdl.module_name(top), sim)
    case = Path(workdir) / f"{top}-{sim}.json"
    case.write_text(json.dumps({"latency": latency, "ctrl_port": ctrl_port, "beats": [
        {"data": d, "valid": v, "ctrl": c, "bank": b, "transpose": t} for d, v, c, b, t in beats]}))
    run_dir = runner.run(build, "sim.benches.net_bench", env={"FETTA_NET_CASE": str(case)})
    return json.loads((run_dir / "net_out.json").read_text())["outputs"]


__all__ = ["f32_adder", "adder_for", "pack_rows", "unpack_rows", 
           "run_net_bench"]
