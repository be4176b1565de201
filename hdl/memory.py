"""Unified memory (ping-pong halves) and accumulation-unit banks (FETTA V-C).

Both memories are ``banks`` SRAM banks whose rows hold ``lanes`` elements. Row
address ``a`` (within a half for the unified memory) lives in bank ``a % banks``
at index ``a // banks``; :func:`split` gives the two fields.

:class:`UnifiedMemory` holds, per bank, two half memories. The contraction
side (ports ``ia``, ``ib``, ``w``) works on half ``tcu_half``; the host port
works on ``host_half``. The two owners never share a physical memory, which is
what lets the host load one half while the TCU computes on the other.

All read ports are synchronous: data is valid one cycle after the address. Every bank half is an
:class:`Sram`: a macro without read-during-write forwarding, and the forwarding as explicit logic.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.design.config import FettaConfig
from gen.design.isa import ADDR_BITS
from gen.errors import ConfigError

from hdl.pipe import hold


def log2(x: int) -> int:
    return x.bit_length() - 1


def split(addr, banks: int):
    """``(bank, index)`` fields of a row address (``banks`` is a power of two)."""
    lb = log2(banks)
    return addr[:lb], addr[lb:]


class Sram(wiring.Component):
    """One SRAM macro as an SRAM compiler delivers it, and its read-during-write forwarding outside it.

    ``depth`` rows of ``width`` bits (an Amaranth ``Memory``, which Yosys maps to a macro or block
    RAM), one write port and ``reads`` synchronous read ports that are **not** transparent: a macro
    has no read-during-write forwarding. The forwarding the memories' users rely on (a read of the
    row written in the same cycle returns the new data) is explicit logic here: per read port a
    register of whether its address hit the write, and one register of the written data.

    Ports
    -----
    w_en : In(1); w_addr : In(index bits); w_data : In(width)
        The write port, written at the end of the cycle.
    r_addr : In(index bits).array(reads); r_data : Out(width).array(reads)
        Read ports: ``r_data[i]`` is row ``r_addr[i]`` one cycle later, the row written in the cycle
        of the address included.
    """

    def __init__(self, width: int, depth: int, reads: int = 1):
        self._width, self._depth, self._reads = width, depth, reads
        ib = max(1, (depth - 1).bit_length())
        super().__init__({"w_en": In(1), "w_addr": In(unsigned(ib)), "w_data": In(width),
                          "r_addr": In(unsigned(ib)).array(reads), "r_data": Out(width).array(reads)})

    def elaborate(self, platform):
        m = Module()
        # no_rw_check: what the macro returns for a read of the row written in the same cycle does not
        # matter (the forwarding below replaces it), so Yosys adds no collision logic of its own
        # (on ECP5 it otherwise registers every write and compares addresses in front of each read)
        m.submodules.macro = mem = Memory(shape=unsigned(self._width), depth=self._depth, init=[],
                                          attrs={"no_rw_check": 1})
        wp = mem.write_port()
        m.d.comb += [wp.addr.eq(self.w_addr), wp.data.eq(self.w_data), wp.en.eq(self.w_en)]
        written = hold(m, self.w_en, {"data": self.w_data}, "fwd_")["data"]
        for i in range(self._reads):
            rp = mem.read_port(transparent_for=())
            hit = Signal(name=f"fwd_hit{i}")
            m.d.comb += rp.addr.eq(self.r_addr[i])
            m.d.sync += hit.eq(self.w_en & (self.w_addr == self.r_addr[i]))
            m.d.comb += self.r_data[i].eq(Mux(hit, written, rp.data))
        return m


class UnifiedMemory(wiring.Component):
    """``banks`` banks x 2 halves of ``rows_per_half`` rows of ``lanes * elem_bits`` bits.

    Parameters
    ----------
    config : FettaConfig
        ``banks``, ``lanes``, ``elem_bits`` and ``unified_kb`` set the geometry.

    Members (per bank ``b``: arrays of ``banks``)
    -------
    tcu_half : In(1)
        The half the contraction side uses.
    ia_addr, ib_addr : In(index bits).array(banks)
        Read indices of the IA and IB ports of the TCU's half; ``ia_data`` and
        ``ib_data`` are valid one cycle later.
    w_en, w_addr, w_data : write port of the TCU's half (write-back, ``STORE``).
    host_half, host_addr, host_we, host_wdata : the host's half; ``host_addr``
        is a row index inside bank ``host_bank``.
    host_rdata : Out(row)
        Row ``host_addr`` of bank ``host_bank`` of half ``host_half``, one cycle later (the
        read port reads every cycle; the top registers whether the host asked).
    dma_own : In(1)
        The DMA engine owns the half other than ``tcu_half`` (every bank's host read and write
        ports of that half: the top drops the host's accesses meanwhile).
    dma_raddr, dma_rdata : In(index bits).array(banks), Out(row).array(banks)
        DMA read of that half, per bank; data one cycle later.
    dma_we, dma_waddr, dma_wdata : DMA write port of that half, per bank.
    """

    def __init__(self, config: FettaConfig):
        self._banks = config.banks
        self._rows = config.unified_rows_per_bank // 2
        self._width = config.lanes * config.elem_bits
        ib = max(1, (self._rows - 1).bit_length())
        B = self._banks
        super().__init__({
            "tcu_half": In(1),
            "ia_addr": In(unsigned(ib)).array(B), "ia_data": Out(self._width).array(B),
            "ib_addr": In(unsigned(ib)).array(B), "ib_data": Out(self._width).array(B),
            "w_en": In(1).array(B), "w_addr": In(unsigned(ib)).array(B), "w_data": In(self._width).array(B),
            "host_half": In(1), "host_bank": In(range(B)), "host_addr": In(unsigned(ib)),
            "host_we": In(1), "host_wdata": In(self._width), "host_rdata": Out(self._width),
            "dma_own": In(1), "dma_raddr": In(unsigned(ib)).array(B), "dma_rdata": Out(self._width).array(B),
            "dma_we": In(1).array(B), "dma_waddr": In(unsigned(ib)).array(B), "dma_wdata": In(self._width).array(B),
        })

    @property
    def index_bits(self) -> int:
        return len(self.ia_addr[0])

    def elaborate(self, platform):
        m = Module()
        B = self._banks
        host_bank_q = Signal(range(B), name="host_bank_q")
        host_half_q = Signal(name="host_half_q")
        m.d.sync += [host_bank_q.eq(self.host_bank), host_half_q.eq(self.host_half)]
        host_reads = []
        for b in range(B):
            halves = []
            for h in range(2):
                # read port 0: IA (or the DMA's / host's read of the other half), 1: IB
                m.submodules[f"bank{b}_half{h}"] = mem = Sram(self._width, self._rows, reads=2)
                tcu = self.tcu_half == h
                dma = self.dma_own
                host_here = (self.host_half == h) & (self.host_bank == b)
                # the TCU owns its half; the host gets the other (or both when the TCU idles,
                # which the top guarantees by holding tcu_half != host_half while busy), unless
                # the DMA engine owns it
                m.d.comb += [
                    mem.r_addr[0].eq(Mux(tcu, self.ia_addr[b], Mux(dma, self.dma_raddr[b], self.host_addr))),
                    mem.r_addr[1].eq(self.ib_addr[b]),
                    mem.w_addr.eq(Mux(tcu, self.w_addr[b], Mux(dma, self.dma_waddr[b], self.host_addr))),
                    mem.w_data.eq(Mux(tcu, self.w_data[b], Mux(dma, self.dma_wdata[b], self.host_wdata))),
                    mem.w_en.eq(Mux(tcu, self.w_en[b], Mux(dma, self.dma_we[b], host_here & self.host_we))),
                ]
                halves.append(mem.r_data)
            tcu_q = Signal(name=f"tcu_half_q{b}")
            m.d.sync += tcu_q.eq(self.tcu_half)
            m.d.comb += [
                self.ia_data[b].eq(Mux(tcu_q, halves[1][0], halves[0][0])),
                self.ib_data[b].eq(Mux(tcu_q, halves[1][1], halves[0][1])),
                self.dma_rdata[b].eq(Mux(tcu_q, halves[0][0], halves[1][0])),
            ]
            host_reads.append(Mux(host_half_q, halves[1][0], halves[0][0]))
        with m.Switch(host_bank_q):
            for b in range(B):
                with m.Case(b):
                    m.d.comb += self.host_rdata.eq(host_reads[b])
        return m


class AccumMemory(wiring.Component):
    """The accumulation unit's storage: ``banks`` banks of ``accum_rows_per_bank`` rows of
    ``lanes * acc_bits`` bits, one read port (forwarding the bank's write, :class:`Sram`, so a
    read-modify-write of the row written in the same cycle sees the new value) and one
    write port per bank. The adders are :class:`hdl.accum.AccumAdd` (gathered with this memory
    in :class:`hdl.others.AccumUnit`).

    Members
    -------
    r_addr : In(index bits).array(banks); r_data : Out(row).array(banks), one cycle later.
    w_en, w_addr, w_data : per-bank write port.
    """

    def __init__(self, config: FettaConfig):
        self._banks = config.banks
        self._rows = config.accum_rows_per_bank
        self._width = config.lanes * config.acc_bits
        ib = max(1, (self._rows - 1).bit_length())
        B = self._banks
        super().__init__({
            "r_addr": In(unsigned(ib)).array(B), "r_data": Out(self._width).array(B),
            "w_en": In(1).array(B), "w_addr": In(unsigned(ib)).array(B), "w_data": In(self._width).array(B),
        })

    def elaborate(self, platform):
        m = Module()
        for b in range(self._banks):
            m.submodules[f"bank{b}"] = mem = Sram(self._width, self._rows)
            m.d.comb += [mem.r_addr[0].eq(self.r_addr[b]), self.r_data[b].eq(mem.r_data[0]),
                         mem.w_addr.eq(self.w_addr[b]), mem.w_data.eq(self.w_data[b]), mem.w_en.eq(self.w_en[b])]
        return m


def check_memory_config(config: FettaConfig) -> None:
    """Geometry rules of the memories (beyond :meth:`FettaConfig.validate`)."""
    half = config.unified_rows_per_bank // 2
    if half * 2 != config.unified_rows_per_bank:
        raise ConfigError(f"{config.unified_kb} KiB gives an odd number of rows per bank "
                          f"({config.unified_rows_per_bank}); ping-pong needs two equal halves", field="unified_kb")
    if half * config.banks > (1 << ADDR_BITS) or config.accum_rows_per_bank * config.banks > (1 << ADDR_BITS):
        raise ConfigError(f"capacity exceeds the {ADDR_BITS}-bit row addresses of the ISA", field="unified_kb")
