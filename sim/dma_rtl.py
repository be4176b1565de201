"""Running descriptors on the emitted Verilog of the DMA engine (``fetta_dma``, :class:`hdl.dma.AxiDma`)
against cocotbext-axi's ``AxiRam`` (``sim/benches/dma_bench.py``), and what they must do.

Used by ``tests/test_dma.py`` and ``python -m benchmarks dma``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import hdl
from gen.design.config import FettaConfig
from sim import runner

__all__ = ["expected_effect", "run_dma_rtl"]


def expected_effect(descs, data_bits: int, row_bits: int, dram: bytearray, um: dict[int, int]):
    """What ``descs`` do, in order, to ``dram`` and ``um`` (in place)."""
    bb, rpb = data_bits // 8, data_bits // row_bits
    for store, addr, row, beats in descs:
        if addr % bb:
            continue
        for i in range(beats):
            if store:
                dram[addr + i * bb:addr + (i + 1) * bb] = um.get(row + i * rpb, 0).to_bytes(bb, "little")
            else:
                um[row + i * rpb] = int.from_bytes(dram[addr + i * bb:addr + (i + 1) * bb], "little")


def run_dma_rtl(cfg: FettaConfig, descs, sim: str, workdir: Path, *, pause: bool, seed: int = 1,
                dram_bytes: int = 1 << 16):
    """``descs`` on the emitted Verilog of ``fetta_dma`` with cocotbext-axi's AxiRam
    (sim/benches/dma_bench.py); returns (cycles per descriptor, unified memory, DRAM, expected
    unified memory, expected DRAM)."""
    rpb = cfg.dma_data_bits // (cfg.lanes * cfg.elem_bits)
    rng = random.Random(seed + 1)
    um = {r: rng.getrandbits(cfg.dma_data_bits) for r in range(0, 1 << 10, rpb)}
    case = workdir / f"dma-{sim}.json"
    case.write_text(json.dumps({"seed": seed, "pause": pause, "dram_bytes": dram_bytes,
                                "um": {str(k): str(v) for k, v in um.items()},
                                "descs": [list(d) for d in descs]}))
    build = runner.build(runner.elaborate("dma", cfg), hdl.module_name("dma"), sim)
    out = json.loads((runner.run(build, "sim.benches.dma_bench", env={"FETTA_DMA_CASE": str(case)})
                      / "dma_out.json").read_text())
    dram = bytearray(random.Random(seed).randbytes(dram_bytes))
    expected_effect(descs, cfg.dma_data_bits, cfg.lanes * cfg.elem_bits, dram, um)
    got_um = {int(k): int(v) for k, v in out["um"].items()}
    return out["cycles"], got_um, bytes.fromhex(out["dram"]), um, bytes(dram)
