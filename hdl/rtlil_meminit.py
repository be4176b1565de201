"""Memory initial contents written to RTLIL as one constant, not one netlist object per bit.

Amaranth 0.5.10's RTLIL backend (``ModuleEmitter.emit_memory``) builds the ``DATA`` of a memory's
``$meminit_v2`` cell as a :class:`amaranth.hdl._nir.Value` of one constant ``Net`` per bit and
then prints it bit by bit. The default accelerator's memories (instruction memory, SRAM banks,
accumulation buffers) hold 5.4 M bits: ~25 s of its ~225 s elaboration, ~40 % of the stand-alone
controller's. :func:`fast_meminit` swaps in :func:`_emit_memory` for the length of a conversion:
it writes the very same cell, with ``DATA`` formatted straight from the initial rows as the RTLIL
constant ``sigspec`` would print it (``<bits>'<MSB first>``). ``tests/test_rtlil_meminit.py``
checks the two give identical RTLIL text; the swap applies only to the pinned Amaranth version
whose method it replaces, and any other version keeps Amaranth's own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import amaranth
from amaranth.back import rtlil
from amaranth.hdl import _nir

#: The Amaranth release whose ``ModuleEmitter.emit_memory`` :func:`_emit_memory` reproduces.
AMARANTH_VERSION = "0.5.10"


def init_sigspec(init, width: int) -> str:
    """RTLIL constant of memory rows ``init`` (row 0 in the low bits), each ``width`` bits wide."""
    mask = (1 << width) - 1
    bits = "".join(format(row & mask, f"0{width}b") for row in reversed(init))
    return f"{len(bits)}'{bits}"


def _emit_memory(self, cell_idx, cell):
    """``ModuleEmitter.emit_memory`` of Amaranth 0.5.10 with ``DATA`` formatted directly."""
    if cell.width * cell.depth == 0:
        return _ORIGINAL(self, cell_idx, cell)
    memory_info = self.memories[cell_idx]
    self.builder.cell("$meminit_v2", ports={
        "ADDR": self.sigspec(),
        "DATA": init_sigspec(cell.init, cell.width),
        "EN": self.sigspec(_nir.Value.ones(cell.width)),
    }, parameters={
        "MEMID": memory_info.memid,
        "ABITS": 0,
        "WIDTH": cell.width,
        "WORDS": cell.depth,
        "PRIORITY": 0,
    }, src_loc=cell.src_loc)


_ORIGINAL = rtlil.ModuleEmitter.emit_memory


@contextlib.contextmanager
def fast_meminit(enable: bool = True) -> Iterator[bool]:
    """Use :func:`_emit_memory` inside the ``with`` block when ``enable`` and Amaranth is the pinned
    release; yields whether it does."""
    active = enable and amaranth.__version__ == AMARANTH_VERSION
    if active:
        rtlil.ModuleEmitter.emit_memory = _emit_memory
    try:
        yield active
    finally:
        rtlil.ModuleEmitter.emit_memory = _ORIGINAL
