"""DMA engine: tensors between DRAM (an AXI4 subordinate) and the unified memory (issue 17).

:class:`AxiDma` moves one descriptor at a time: ``beats`` data beats of ``data_bits`` between the
DRAM byte address ``dram`` and the unified-memory rows from ``row`` on (``rows_per_beat =
data_bits / row_bits`` consecutive rows per beat, which sit in different banks: the integration
writes or reads them in one cycle). A descriptor is cut into incrementing AXI4 bursts of at most
``burst`` beats that never cross a 4 KiB boundary; up to ``outstanding`` bursts are in flight, so
a subordinate of latency below ``outstanding * burst`` cycles is read or written at one beat per
cycle.

* **load** (DRAM -> unified memory): AR bursts while fewer than ``outstanding`` are in flight;
  every R beat is written to the unified memory one cycle later (``um_we``; ``rready`` is always
  high: the memory takes a beat every cycle).
* **store** (unified memory -> DRAM): AW bursts as for loads; the rows are read ahead
  (``um_re``, data ``um_rdata`` one cycle later) into a 4-beat FIFO that feeds W, so W carries a
  beat every cycle the subordinate takes one; the burst lengths go from AW to W through a FIFO of
  ``max(2, outstanding)`` entries at the AW handshake (no W beat precedes its burst's AW, which some
  interconnects require); the descriptor ends with the last B response.

Ports
-----
cmd_valid : In(1); cmd_ready : Out(1)
    Descriptor handshake; ``cmd_ready`` is high while no descriptor runs.
cmd_store : In(1); cmd_dram : In(addr_bits); cmd_row : In(row_addr_bits); cmd_beats : In(len_bits)
    The descriptor: direction (1: store), DRAM byte address (a multiple of ``data_bits / 8``),
    first unified-memory row, beats.
busy : Out(1)
    A descriptor runs (from the cycle after its handshake to its ``done``).
done : Out(1)
    One-cycle pulse: the descriptor is complete (loads: the last beat written; stores: the last
    B response received).
error : Out(1)
    A response other than OKAY or with an ID other than 0 (the only one issued), or a misaligned
    ``cmd_dram`` (nothing moves then); held until the next descriptor is accepted.
um_we : Out(1); um_waddr : Out(row_addr_bits); um_wdata : Out(data_bits)
    Unified-memory write of one beat (registers: the cycle after its R beat).
um_re : Out(1); um_raddr : Out(row_addr_bits); um_rdata : In(data_bits)
    Unified-memory read of one beat; ``um_rdata`` is the data of the read of the cycle before.
m_axi : Out(:func:`hdl.axi.axi4_signature`)
    The AXI4 manager (IDs 0, ``AxSIZE`` = the full data width, incrementing bursts).

Latency, with a subordinate that is always ready, returns read data ``L`` cycles after the AR
handshake and answers B the cycle after a burst's last W beat, counted from the first busy cycle
to ``done``: a load of ``n`` beats takes ``n + L + 2`` cycles, a store ``n + 4``
(``tests/test_dma.py``): long transfers run at one beat per cycle.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from gen.design.isa import ADDR_BITS
from gen.errors import ConfigError
from hdl.axi import BOUNDARY, BURST_INCR, MAX_BURST, RESP_OKAY, axi4_signature

__all__ = ["AxiDma", "dma_from_config", "W_FIFO_DEPTH"]

#: beats of the store path's read-ahead FIFO (a UM read is in flight one cycle)
W_FIFO_DEPTH = 4


def _log2(x: int, what: str) -> int:
    if x < 1 or x & (x - 1):
        raise ValueError(f"{what} must be a power of two, got {x}")
    return x.bit_length() - 1


class AxiDma(wiring.Component):
    """DMA engine with an AXI4 manager (module docstring)."""

    def __init__(self, *, data_bits: int, row_bits: int, row_addr_bits: int, burst: int = 16,
                 outstanding: int = 4, addr_bits: int = 32, len_bits: int = 20):
        if data_bits % row_bits or _log2(data_bits // row_bits, "data_bits / row_bits") < 0:
            raise ValueError(f"data_bits ({data_bits}) must be a power-of-two multiple of row_bits ({row_bits})")
        if not 1 <= burst <= MAX_BURST:
            raise ValueError(f"burst must be 1 .. {MAX_BURST}, got {burst}")
        if outstanding < 1:
            raise ValueError(f"outstanding must be >= 1, got {outstanding}")
        self.data_bits, self.row_bits, self.burst, self.outstanding = data_bits, row_bits, burst, outstanding
        self.rows_per_beat = data_bits // row_bits
        self._beat_log = _log2(data_bits // 8, "data_bits / 8")
        if BOUNDARY >> self._beat_log < 1:
            raise ValueError(f"data_bits ({data_bits}) above {8 * BOUNDARY}")
        super().__init__({
            "cmd_valid": In(1), "cmd_ready": Out(1), "cmd_store": In(1), "cmd_dram": In(addr_bits),
            "cmd_row": In(row_addr_bits), "cmd_beats": In(len_bits),
            "busy": Out(1), "done": Out(1), "error": Out(1),
            "um_we": Out(1), "um_waddr": Out(row_addr_bits), "um_wdata": Out(data_bits),
            "um_re": Out(1), "um_raddr": Out(row_addr_bits), "um_rdata": In(data_bits),
            "m_axi": Out(axi4_signature(addr_bits, data_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        axi, burst, lg = self.m_axi, self.burst, self._beat_log
        addr_bits, len_bits = len(self.cmd_dram), len(self.cmd_beats)

        active = Signal(name="active")
        store = Signal(name="store")
        err = Signal(name="err")
        m.d.comb += [self.busy.eq(active), self.cmd_ready.eq(~active), self.error.eq(err)]

        # --- address issuer: the AR (load) or AW (store) register, one burst at a time ---------
        a_addr = Signal(addr_bits, name="a_addr")           # DRAM address of the next burst
        a_left = Signal(len_bits, name="a_left")             # beats not yet in a burst
        x_addr = Signal(addr_bits, name="x_addr")            # the burst on the address channel
        x_len = Signal(range(burst + 1), name="x_len")
        x_valid = Signal(name="x_valid")
        inflight = Signal(range(self.outstanding + 1), name="inflight")   # bursts issued, not complete
        to_4k = Signal(range((BOUNDARY >> lg) + 1), name="to_4k")
        lim = Signal(range(burst + 1), name="lim")
        nxt = Signal(range(burst + 1), name="nxt")
        m.d.comb += [to_4k.eq((BOUNDARY - a_addr[:12]) >> lg),
                     lim.eq(Mux(a_left < burst, a_left, burst)),
                     nxt.eq(Mux(to_4k < lim, to_4k, lim))]
        x_fire = x_valid & Mux(store, axi.awready, axi.arready)
        can_issue = active & (a_left != 0) & (inflight < self.outstanding)
        issued = Signal(name="issued")
        m.d.comb += issued.eq((~x_valid | x_fire) & can_issue)
        with m.If(~x_valid | x_fire):
            m.d.sync += x_valid.eq(can_issue)
            with m.If(can_issue):
                m.d.sync += [x_addr.eq(a_addr), x_len.eq(nxt), a_addr.eq(a_addr + (nxt << lg)),
                             a_left.eq(a_left - nxt)]
        completed = Signal(name="completed")                  # a burst's last R beat / its B response
        m.d.sync += inflight.eq(inflight + issued - completed)
        for ch, on in (("ar", ~store), ("aw", store)):
            m.d.comb += [getattr(axi, f"{ch}addr").eq(x_addr), getattr(axi, f"{ch}len").eq(x_len - 1),
                         getattr(axi, f"{ch}size").eq(lg), getattr(axi, f"{ch}burst").eq(BURST_INCR),
                         getattr(axi, f"{ch}valid").eq(x_valid & on)]

        # --- load: R beats into the unified memory -------------------------------------------
        w_row = Signal.like(self.cmd_row, name="w_row")
        r_fire = axi.rvalid & axi.rready
        m.d.comb += axi.rready.eq(active & ~store)
        m.d.sync += [self.um_we.eq(r_fire), self.um_waddr.eq(w_row), self.um_wdata.eq(axi.rdata)]
        with m.If(r_fire):
            m.d.sync += w_row.eq(w_row + self.rows_per_beat)
            with m.If((axi.rresp != RESP_OKAY) | (axi.rid != 0)):
                m.d.sync += err.eq(1)

        # --- store: unified memory -> read-ahead FIFO -> W; burst lengths AW -> W -------------
        m.submodules.wbuf = wbuf = fifo.SyncFIFO(width=self.data_bits, depth=W_FIFO_DEPTH)
        m.submodules.lenq = lenq = fifo.SyncFIFO(width=len(x_len), depth=max(2, self.outstanding))
        rd_row = Signal.like(self.cmd_row, name="rd_row")
        rd_left = Signal(len_bits, name="rd_left")
        re_d1 = Signal(name="um_re_d1")
        m.d.comb += [self.um_re.eq(active & store & (rd_left != 0) & (wbuf.level + re_d1 < W_FIFO_DEPTH)),
                     self.um_raddr.eq(rd_row),
                     wbuf.w_en.eq(re_d1), wbuf.w_data.eq(self.um_rdata),
                     lenq.w_en.eq(x_fire & store), lenq.w_data.eq(x_len)]
        m.d.sync += re_d1.eq(self.um_re)
        with m.If(self.um_re):
            m.d.sync += [rd_row.eq(rd_row + self.rows_per_beat), rd_left.eq(rd_left - 1)]
        w_cnt = Signal(range(burst + 1), name="w_cnt")       # beats left of the burst on W (0: next)
        cnt = Mux(w_cnt == 0, lenq.r_data, w_cnt)
        m.d.comb += [axi.wvalid.eq(active & store & wbuf.r_rdy & ((w_cnt != 0) | lenq.r_rdy)),
                     axi.wdata.eq(wbuf.r_data), axi.wstrb.eq(-1), axi.wlast.eq(cnt == 1)]
        w_fire = axi.wvalid & axi.wready
        m.d.comb += wbuf.r_en.eq(w_fire)
        with m.If(w_fire):
            m.d.comb += lenq.r_en.eq(w_cnt == 0)
            m.d.sync += w_cnt.eq(cnt - 1)
        m.d.comb += axi.bready.eq(active & store)
        b_fire = axi.bvalid & axi.bready
        with m.If(b_fire & ((axi.bresp != RESP_OKAY) | (axi.bid != 0))):
            m.d.sync += err.eq(1)
        m.d.comb += completed.eq(Mux(store, b_fire, r_fire & axi.rlast))

        # --- descriptors ----------------------------------------------------------------------
        finish = active & (a_left == 0) & ~x_valid & (inflight == 0)
        m.d.sync += self.done.eq(finish)
        with m.If(finish):
            m.d.sync += active.eq(0)
        with m.If(self.cmd_valid & self.cmd_ready):
            aligned = self.cmd_dram[:lg] == 0 if lg else 1
            m.d.sync += [active.eq(1), store.eq(self.cmd_store), a_addr.eq(self.cmd_dram),
                         a_left.eq(Mux(aligned, self.cmd_beats, 0)), w_row.eq(self.cmd_row),
                         rd_row.eq(self.cmd_row), rd_left.eq(Mux(aligned, self.cmd_beats, 0)),
                         err.eq(~aligned), w_cnt.eq(0)]
        return m


def dma_from_config(config) -> AxiDma:
    """The DMA engine of ``config``: ``dma_data_bits``-wide AXI4, ``dma_burst`` beats per burst,
    ``dma_outstanding`` bursts in flight, rows of the unified memory (``lanes`` elements)."""
    row = config.lanes * config.elem_bits
    beat = config.dma_data_bits
    if beat % row or (beat // row) & (beat // row - 1):
        raise ConfigError(f"must be a power-of-two multiple of a unified-memory row ({row} bits) for the DMA "
                          f"engine, got {beat}", field="dma_data_bits")
    return AxiDma(data_bits=config.dma_data_bits, row_bits=config.lanes * config.elem_bits,
                  row_addr_bits=ADDR_BITS, burst=config.dma_burst, outstanding=config.dma_outstanding)
