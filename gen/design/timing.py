"""DRAM transfer timing: the one rule the compiler, the execution of programs and the model share.

A compiled program is a sequence of *runs* (:class:`gen.compiler.Run`). Each run has DRAM -> unified
memory writes of its operands, a compute part on one ping-pong half (its cycles are the emulator's
and the RTL's, cycle for cycle), and unified memory -> DRAM reads of its results. The transfers go
through one DMA channel of ``dram_bytes_per_cycle(config)`` bytes per cycle
(:func:`gen.design.isa.dram_rate` beats of the DMA port per cycle: LPDDR4 at 25.6 GB/s and 1 GHz is 25.6 B/cycle,
below the 32 B beat of the DMA engine's 256-bit AXI4 port; at 100 MHz the port is the bound), and overlap with
compute across the two halves as the hardware allows:

1. the runs compute in program order, one at a time; run ``i`` starts once its writes are done
   and run ``i - 1`` has finished;
2. the writes of run ``i`` may start once the DMA channel is free, every earlier run on the same
   half has had its results read back (the half is then free to overwrite), and the reads of run
   ``after`` are done (``RunTiming.after``: the latest run whose read-back data its writes carry,
   e.g. a tensor spilled by one run and written again for the next);
3. the reads of run ``i`` may start once run ``i`` has finished and the DMA channel is free;
4. the DMA channel moves one transfer at a time, ``ceil(bytes / bytes_per_cycle)`` cycles each,
   and of the transfers that may start it takes the one that can start first (a write on a tie,
   so compute is fed first); writes and reads each keep program order.

``cycles`` is the end-to-end time (the last read done); ``compute_cycles`` is the sum of the runs'
compute; ``dram_stall_cycles = cycles - compute_cycles`` is the time the arrays wait for DRAM.
``docs/compiler.md`` ("DRAM timing") states the same rule for the DMA engine.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

from gen.design.config import FettaConfig
from gen.design.control import Clock
from gen.design.isa import Geometry, Instr, Opcode, decode


@dataclass(frozen=True)
class RunTiming:
    """What the rule needs of one run: its half, bytes in, compute cycles, bytes out, and the
    latest earlier run whose reads its writes wait for (-1: none)."""

    half: int
    write_bytes: int
    compute_cycles: int
    read_bytes: int
    after: int = -1

    @classmethod
    def of_rows(cls, half: int, write_rows: int, compute_cycles: int, read_rows: int,
                config: FettaConfig, after: int = -1) -> "RunTiming":
        """A run that writes and reads whole unified-memory rows (``lanes`` stored elements each)."""
        row_bytes = config.lanes * config.elem_bits // 8
        return cls(half, write_rows * row_bytes, compute_cycles, read_rows * row_bytes, after)


@dataclass(frozen=True)
class Timeline:
    """End-to-end timing of a sequence of runs (see the module docstring)."""

    cycles: int
    compute_cycles: int
    dram_cycles: int
    dram_bytes: int

    @property
    def dram_stall_cycles(self) -> int:
        return self.cycles - self.compute_cycles


def program_cycles(words, config: FettaConfig) -> int:
    """Compute cycles of a program (instruction words, or :class:`gen.design.isa.Instr`) that runs to
    HALT without errors: the emulator's count (:class:`gen.design.control.Clock`), known before
    running since no instruction's timing depends on data."""
    prog = []
    for w in words:
        prog.append(w if isinstance(w, Instr) else decode(int(w)))
        if prog[-1].opcode == Opcode.HALT:
            return _cycles(tuple(prog), Geometry.of(config))
    raise ValueError("program has no HALT")


@functools.lru_cache(maxsize=1 << 12)
def _cycles(prog: tuple[Instr, ...], geo: Geometry) -> int:
    """:func:`program_cycles` of a program up to its HALT, kept: a compiler comparing variants times
    the same jobs again."""
    clock = Clock(geo)
    for ins in prog:
        c = clock.act(ins)
    return c + 1


def dram_bytes_per_cycle(config: FettaConfig) -> float:
    """Bytes per accelerator clock cycle between DRAM and the memories: the DRAM's bandwidth at
    ``freq_mhz``, at most one beat of the DMA engine's AXI4 data port per cycle, as the DMA engine
    meets it (:func:`gen.design.isa.dram_rate` beats of ``dma_bytes``)."""
    geo = Geometry.of(config)
    return geo.dram_num / geo.dram_den * (geo.dma_bytes or config.dma_data_bits // 8)


def transfer_cycles(nbytes: int, bytes_per_cycle: float) -> int:
    """Cycles of one DMA transfer of ``nbytes`` (0 for nothing to move)."""
    return math.ceil(nbytes / bytes_per_cycle) if nbytes > 0 else 0


def timeline(runs: Sequence[RunTiming], bytes_per_cycle: float) -> Timeline:
    """Schedule ``runs`` by the rule of the module docstring."""
    if bytes_per_cycle <= 0:
        raise ValueError(f"bytes_per_cycle must be positive, got {bytes_per_cycle!r}")
    n = len(runs)
    w_end, c_end, r_end = [0] * n, [0] * n, [0] * n
    dma = dma_busy = 0
    w = r = 0
    while r < n:
        ready_w = None
        if w < n:
            if not -1 <= runs[w].after < w:
                raise ValueError(f"run {w} waits for the reads of run {runs[w].after}, not an earlier run")
            prev = [j for j in range(w) if runs[j].half == runs[w].half] + \
                ([runs[w].after] if runs[w].after >= 0 else [])
            if not prev or max(prev) < r:
                ready_w = max([dma] + [r_end[j] for j in prev])
        ready_r = max(dma, c_end[r]) if r < w else None
        if ready_w is not None and (ready_r is None or ready_w <= ready_r):
            took = transfer_cycles(runs[w].write_bytes, bytes_per_cycle)
            w_end[w] = dma = ready_w + took
            c_end[w] = max(w_end[w], c_end[w - 1] if w else 0) + runs[w].compute_cycles
            w += 1
        else:
            took = transfer_cycles(runs[r].read_bytes, bytes_per_cycle)
            r_end[r] = dma = ready_r + took
            r += 1
        dma_busy += took
    total = max([0] + r_end + c_end)
    return Timeline(cycles=total, compute_cycles=sum(x.compute_cycles for x in runs), dram_cycles=dma_busy,
                    dram_bytes=sum(x.write_bytes + x.read_bytes for x in runs))


__all__ = ["RunTiming", "Timeline", "program_cycles", "dram_bytes_per_cycle", "transfer_cycles", "timeline"]
