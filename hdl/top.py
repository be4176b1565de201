"""The whole fetta accelerator: controller FSM, unified memory, TCU, accumulation unit, host port.

Registered as ``fetta`` in :data:`hdl.TOPS` (the default top of ``fetta verilog``).
It executes the instruction set of :mod:`gen.design.isa`; :mod:`sim.emulator` is its
bit- and cycle-exact reference. The host port and its rules are in :class:`Fetta`.

Timing (the rules of :mod:`gen.design.control`): 1 start cycle, then per instruction FETCH,
DECODE, CHECK and the execution cycles of :func:`gen.design.isa.exec_cycles`; the next FETCH
follows a GEMM's CHECK, so the next instruction is decoded while the GEMM issues and may start
when its issue ends (the issue side samples its fields at the start, :func:`_issue_context`;
:class:`hdl.drain.DrainQueue` holds the output side of two GEMMs).
GEMM pipeline: issue ``k`` (address) -> memory read (1 cycle) -> PE MAC (register)
-> on the tile's last step the Psum buffer -> drain one row per cycle through the
reduction tree while the accumulation row is read -> add and write (accumulation
unit, and the unified memory when ``WB``).

DMA: :class:`hdl.dma.AxiDma` moves DRAM (the ``m_axi_*`` AXI4 manager ports) to and from the
unified-memory half the run does not use, one beat of ``dma_rows`` rows (consecutive banks) per
cycle; a DMA load / store hands it its descriptor in CHECK, a DMA wait, HALT and a failing
instruction wait in CHECK until it is idle (:mod:`gen.design.control`).

Structure: :class:`hdl.controller.Decoder` checks the instruction; the sequencers of
:mod:`hdl.sequencer` walk its loops (:class:`~hdl.sequencer.GemmIssue`,
:class:`~hdl.drain.DrainQueue` for the output side, a :class:`~hdl.sequencer.ChunkSequencer` each
for MOVE and VEC); :class:`Fetta` builds the host port, the per-bank address and data
multiplexers of both memories, the accumulation path and the FSM, one method each.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.design.config import FettaConfig, check_accelerator
from gen.design.isa import (ADDR_BITS, BOUND_BITS, CYCLE_BITS, DRAM_ADDR_BITS, HOST_ADDR_BITS, INSTR_BITS, DmaMode,
                            LAYOUT, ErrorCode, Flag, Geometry, Opcode, dma_beat_bits, vec_tail)
from gen.errors import ConfigError

from hdl.accum import AccumAdd, Narrow, Widen
from hdl.axi import axi4_signature
from hdl.controller import NEXT_OUTPUTS, Decoder, flag
from hdl.dma import AxiDma
from hdl.drain import DrainQueue
from hdl.memory import AccumMemory, UnifiedMemory, check_memory_config
from hdl.pipe import delay, hold
from hdl.sequencer import ChunkSequencer, GemmIssue
from hdl.tcu import TCU
from hdl.vector import VectorUnit, vec_rows

#: sub-blocks :class:`Fetta` instantiates, by ``parts`` key (each called with the configuration)
PARTS = {"umem": UnifiedMemory, "amem": AccumMemory, "tcu": TCU, "vector": VectorUnit,
         "accadd": AccumAdd, "narrow": Narrow, "widen": Widen}


class _Banks:
    """Bank fields of row addresses and the per-bank multiplexers built on them.

    Row ``a`` lives in bank ``a % banks`` at index ``a // banks`` (:func:`hdl.memory.split`).
    Everything here is combinational.
    """

    def __init__(self, banks: int):
        self.count = banks
        self._lb = banks.bit_length() - 1

    def of(self, addr):
        """The bank of row address ``addr`` (a 1-bit zero when there is one bank)."""
        return addr[:self._lb] if self._lb else Const(0, 1)

    def index(self, addr):
        """The row index of ``addr`` within its bank."""
        return addr[self._lb:]

    def select(self, m, sig, bank, rows):
        """Drive ``sig`` with ``rows[bank]``; returns ``sig``."""
        with m.Switch(bank):
            for b in range(self.count):
                with m.Case(b):
                    m.d.comb += sig.eq(rows[b])
        return sig

    def first(self, m, b, rows):
        """Yield each ``(addr, *payload)`` of ``rows`` = ``[(cond, addr, *payload), ...]`` from inside
        ``m.If(cond & (bank of addr == b))``, last row first: the statements of the first row that
        names bank ``b`` win. A ``cond`` of None means always."""
        for cond, addr, *payload in reversed(rows):
            hit = self.of(addr) == b
            with m.If(hit if cond is None else cond & hit):
                yield (addr, *payload)

    def write(self, m, mem, b, addr, data):
        """Write ``data`` to row ``addr`` through bank ``b``'s write port of ``mem``."""
        m.d.comb += [mem.w_en[b].eq(1), mem.w_addr[b].eq(self.index(addr)), mem.w_data[b].eq(data)]


class _RunState:
    """The run's registers, named as in waveforms: ``busy``, ``half`` (the running ping-pong
    half), ``pc``, ``cycles``, ``done``, ``error``, ``host_err`` and ``pc_over`` (the pc ran past
    the instruction memory, from FETCH). The instruction word is the decoder's ``ins`` register."""

    def __init__(self, config: FettaConfig):
        self.busy = Signal(name="busy_r")
        self.half = Signal(name="half")
        self.pc = Signal(range(config.imem_depth + 1), name="pc_r")
        self.cycles = Signal(CYCLE_BITS, name="cycles_r")
        self.done = Signal(name="done_r")
        self.error = Signal(ErrorCode, name="error_r")
        self.host_err = Signal(name="host_err_r")
        self.pc_over = Signal(name="pc_over")


def _drive_fields(m, fields, comp) -> None:
    """Drive every input port of ``comp`` named like an instruction field with that field."""
    for name, member in comp.signature.members.items():
        if member.flow == In and name in fields:
            m.d.comb += getattr(comp, name).eq(fields[name])


def _issue_context(m, dec, F, gemm, lanes: int) -> dict:
    """The fields the issue side of a GEMM reads after its start, sampled in the cycle of
    ``gemm.start`` (the decoder moves on to the next instruction meanwhile): the per-CE row
    offsets (``a_off``, ``b_off``: the CE's offset, or with the operand's transpose its block's
    start, the offset rounded down to ``lanes``, chosen as they are sampled), ``active``, the
    operand transposes (``a_tr``, ``b_tr``), for the addresses from the next cycle; and the
    distribution networks' words and transposes (``net``: ``a_sel``, ``b_sel``, ``a_tr``, ``b_tr``)
    one cycle later, with the read data."""
    lr = lanes.bit_length() - 1
    offs = {op: [Mux(tr, Cat(Const(0, lr), off[lr:]), off) for off in dec_offs]
            for op, tr, dec_offs in (("a", F["tr"][0], dec.a_off), ("b", F["tr"][1], dec.b_off))}
    sources = {"a_off": offs["a"], "b_off": offs["b"], "active": dec.active, "a_tr": F["tr"][0],
               "b_tr": F["tr"][1], "a_sel": F["a_sel"], "b_sel": F["b_sel"]}
    ctx = hold(m, gemm.start, sources, "i_")
    ctx["net"] = {name: delay(m, ctx[name], 1, f"net_{name}") for name in ("a_sel", "b_sel", "a_tr", "b_tr")}
    return ctx


def _dma_engine(m, top, banks, umem, F):
    """The DMA engine of :class:`Fetta` ``top``: its descriptor from the decoded instruction
    (``cmd_valid`` is the FSM's), its AXI4 manager on the ``m_axi_*`` ports, its unified-memory
    port on the half other than the TCU's. A beat's ``R = dma_rows`` rows from row ``r`` (a multiple
    of ``R``) are in banks ``r mod banks + j``, ``j < R``, at index ``r // banks``: bank ``b`` takes
    part when ``b // R`` is the beat's bank group, with row ``j = b mod R`` of the beat. Read data
    returns one cycle after the address (the group registered with it)."""
    cfg, geo = top._cfg, top._geo
    R, RW = geo.dma_rows, cfg.lanes * cfg.elem_bits
    m.submodules.dma = dma = AxiDma(data_bits=R * RW, row_bits=RW, row_addr_bits=ADDR_BITS, burst=cfg.dma_burst,
                                    outstanding=cfg.dma_outstanding, addr_bits=DRAM_ADDR_BITS, len_bits=BOUND_BITS)
    m.d.comb += [dma.cmd_store.eq(F["mode"] == DmaMode.STORE), dma.cmd_dram.eq(F["a_sel"][:DRAM_ADDR_BITS]),
                 dma.cmd_row.eq(F["a_base"]), dma.cmd_beats.eq(F["K"]), top.dma_error.eq(dma.error),
                 top.dma_done.eq(dma.done), umem.dma_own.eq(dma.busy)]
    for name, mb in top._axi.members.items():
        port = getattr(top, f"m_axi_{name}")
        m.d.comb += port.eq(getattr(dma.m_axi, name)) if mb.flow == Out else getattr(dma.m_axi, name).eq(port)
    lr, groups = R.bit_length() - 1, banks.count // R
    beat = Signal(R * RW, name="dma_rbeat")
    if groups > 1:
        # the bank group of the beat read in the cycle before
        w_group, r_group = banks.of(dma.um_waddr)[lr:], banks.of(dma.um_raddr)[lr:]
        r_group_q = Signal.like(r_group, name="dma_rgroup_q")
        m.d.sync += r_group_q.eq(r_group)
        with m.Switch(r_group_q):
            for g in range(groups):
                with m.Case(g):
                    m.d.comb += beat.eq(Cat(*(umem.dma_rdata[g * R + j] for j in range(R))))
    else:
        m.d.comb += beat.eq(Cat(*umem.dma_rdata))
    m.d.comb += dma.um_rdata.eq(beat)
    for b in range(banks.count):
        mine = w_group == b // R if groups > 1 else Const(1, 1)
        j = b % R
        m.d.comb += [umem.dma_raddr[b].eq(banks.index(dma.um_raddr)),
                     umem.dma_we[b].eq(dma.um_we & mine), umem.dma_waddr[b].eq(banks.index(dma.um_waddr)),
                     umem.dma_wdata[b].eq(dma.um_wdata[j * RW:(j + 1) * RW])]
    return dma


def _accumulate(m, cfg, parts, banks, amem, tcu, out, g_addr):
    """The accumulation path of a GEMM: the read stage registers the reduction beat
    (``red[g]`` of each group, its output row ``g_addr[g]``, ``ACC`` / ``ACC_L0``, and the
    head context's write-back fields) while the old rows are read; then per group an
    :class:`~hdl.accum.AccumAdd` (``add_latency - 1`` cycles; the beat's fields ride along in
    registers ``w_*_d<i>``) and a :class:`~hdl.accum.Narrow` (combinational) give the new
    accumulation row and its unified-memory form, written at the end of the write stage
    (``add_latency - 1`` cycles after the read stage; the same cycle with one-cycle adders).

    Returns ``(w, new)``: the write stage's values (``valid``, ``addr`` and ``group_active``
    per group, ``wb``, ``w_off`` = ``w_base - o_base``) and per group ``(accumulation row,
    narrowed row)``.
    """
    E, AW = cfg.num_ces, cfg.lanes * cfg.acc_bits
    r = {"valid": Signal(name="w_valid"), "wb": Signal(name="w_wb"), "w_off": Signal(ADDR_BITS, name="w_off"),
         "group_active": Signal(E, name="w_group_active"),
         "addr": [Signal(ADDR_BITS, name=f"w_oaddr{g}") for g in range(E)]}
    w_acc = Signal(name="w_acc")
    w_psum = [Signal(AW, name=f"w_psum{g}") for g in range(E)]
    m.d.sync += [r["valid"].eq(out.valid), w_acc.eq(out.h_acc | (out.h_acc_l0 & out.later_l0)),
                 r["wb"].eq(out.h_wb), r["w_off"].eq(out.h_w_base - out.h_o_base),
                 r["group_active"].eq(out.h_group_active)]
    for g in range(E):
        m.d.sync += [w_psum[g].eq(tcu.red[g]), r["addr"][g].eq(g_addr[g])]
    new = []
    for g in range(E):
        m.submodules[f"accadd{g}"] = add = parts["accadd"](cfg)
        old = banks.select(m, Signal(AW, name=f"acc_old{g}"), banks.of(r["addr"][g]), amem.r_data)
        m.d.comb += [add.old.eq(old), add.psum.eq(w_psum[g]), add.acc.eq(w_acc)]
        m.submodules[f"narrow{g}"] = nar = parts["narrow"](cfg)
        m.d.comb += nar.a.eq(add.o)
        new.append((add.o, nar.o))
    S = cfg.add_latency - 1
    w = {key: delay(m, r[key], S, r[key].name) for key in ("valid", "wb", "w_off", "group_active")}
    w["addr"] = [delay(m, a, S, a.name) for a in r["addr"]]
    return w, new


def _write_ports(m, banks, mem, sources) -> None:
    """The write port of every bank of ``mem``: the first enabled source of ``sources`` =
    ``[(enable, rows), ...]`` owns all banks; of its ``rows`` = ``[(cond, addr, data), ...]``
    the first that names the bank is written (combinational, at the end of the cycle)."""
    for b in range(banks.count):
        for i, (enable, rows) in enumerate(sources):
            with (m.If if i == 0 else m.Elif)(enable):
                for addr, data in banks.first(m, b, rows):
                    banks.write(m, mem, b, addr, data)


class Fetta(wiring.Component):
    """The accelerator.

    Parameters
    ----------
    config : FettaConfig
    parts : dict, optional
        Replaces sub-blocks of :data:`PARTS` by factories of components with the same ports
        (:mod:`hdl.others` uses stubs to synthesize the controller on its own); by default the
        real blocks, and nothing else changes.

    Ports (all inputs sampled on the rising clock edge)
    ---------------------------------------------------
    host_sel : In(1)        0: unified memory, 1: accumulation unit
    host_half : In(1)       ping-pong half of a unified-memory access
    host_addr : In(HOST_ADDR_BITS)  row address (within the half for the unified memory)
    host_we, host_re : In(1)
    host_wdata : In(lanes * acc_bits)  (a unified row uses the low ``lanes * elem_bits`` bits)
    host_rdata : Out(...), host_rvalid : Out(1)   one cycle after ``host_re``
    instr, instr_push : In(INSTR_BITS), In(1)  append one word to the instruction memory
    instr_clear : In(1)     the next push goes to slot 0
    start : In(1)           run from pc 0 on half ``run_half``
    run_half : In(1)
    busy, done : Out(1)     ``done`` is set when a run ends (HALT or error) until the next start
    error : Out(ErrorCode)  :class:`gen.design.isa.ErrorCode` of the last run
    pc : Out(...)           the halting instruction (HALT or the faulting one)
    cycles : Out(CYCLE_BITS)  cycles the last run was busy (counts while running)
    host_err : Out(1)       sticky: a host access hit what the running program owns (it was dropped)
    dma_error : Out(1)      the last DMA transfer got an AXI4 response other than OKAY (held until
                            the next DMA load / store starts)
    dma_done : Out(1)       one-cycle pulse: a DMA transfer is complete (its last beat written to
                            the unified memory, or its last B response received)
    m_axi_<name>            the DMA engine's AXI4 manager (:func:`hdl.axi.axi4_signature`: IDs of
                            1 bit, :data:`~gen.design.isa.DRAM_ADDR_BITS`-bit byte addresses,
                            :func:`~gen.design.isa.dma_beat_bits` data bits), flattened

    While busy the host may access the unified half other than ``run_half``
    (ping-pong) except while a DMA transfer runs (it owns that half); accesses to the
    running half, to the accumulation unit and instruction pushes are dropped and set
    ``host_err``. Out-of-range host addresses are dropped too and set ``host_err``.
    """

    def __init__(self, config: FettaConfig, *, parts=None):

        check_accelerator(config)
        check_memory_config(config)
        vec_rows(config)
        self._cfg = config
        self._geo = Geometry.of(config)
        unknown = sorted(set(parts or {}) - set(PARTS))
        if unknown:
            raise ValueError(f"unknown parts {unknown} (known: {sorted(PARTS)})")
        self._parts = {**PARTS, **(parts or {})}
        AW = config.lanes * config.acc_bits
        beat = dma_beat_bits(config)
        if beat == 0:
            raise ConfigError(f"the DMA beat min(dma_data_bits, banks * lanes * elem_bits) must be a power of two "
                              f">= 8 and a power-of-two multiple of a row ({config.lanes * config.elem_bits} bits), "
                              f"got {min(config.dma_data_bits, config.banks * config.lanes * config.elem_bits)}",
                              field="dma_data_bits")
        self._axi = axi4_signature(DRAM_ADDR_BITS, beat)
        axi_ports = {f"m_axi_{name}": (Out if mb.flow == Out else In)(mb.shape)
                     for name, mb in self._axi.members.items()}
        super().__init__({
            "host_sel": In(1), "host_half": In(1), "host_addr": In(HOST_ADDR_BITS), "host_we": In(1),
            "host_re": In(1), "host_wdata": In(AW), "host_rdata": Out(AW), "host_rvalid": Out(1),
            "instr": In(INSTR_BITS), "instr_push": In(1), "instr_clear": In(1),
            "start": In(1), "run_half": In(1),
            "busy": Out(1), "done": Out(1), "error": Out(ErrorCode), "pc": Out(range(config.imem_depth + 1)),
            "cycles": Out(CYCLE_BITS), "host_err": Out(1), "dma_error": Out(1), "dma_done": Out(1), **axi_ports,
        })

    def elaborate(self, platform):
        m = Module()
        cfg, geo, P = self._cfg, self._geo, self._parts
        banks = _Banks(cfg.banks)
        m.submodules.umem = umem = P["umem"](cfg)
        m.submodules.amem = amem = P["amem"](cfg)
        m.submodules.tcu = tcu = P["tcu"](cfg)
        m.submodules.dec = dec = Decoder(cfg)
        im_w, im_r, imem_q = _imem(m, cfg)
        m.submodules.gemm = gemm = GemmIssue(cfg)
        m.submodules.out = out = DrainQueue(cfg)
        m.submodules.move = move = ChunkSequencer(rows=cfg.banks, stages=1)
        vw = vec_tail(geo)    # the VEC write stage
        m.submodules.vec = vec = ChunkSequencer(rows=geo.vec_rows, stages=vw, u_stages=1)
        m.submodules.vector = vu = P["vector"](cfg, lanes=geo.vec_rows * cfg.lanes, valid=False)

        run = _RunState(cfg)
        m.d.comb += [self.busy.eq(run.busy), self.pc.eq(run.pc), self.cycles.eq(run.cycles),
                     self.done.eq(run.done), self.error.eq(run.error), self.host_err.eq(run.host_err),
                     dec.word.eq(imem_q), dec.pc_overflow.eq(run.pc_over)]
        with m.If(run.busy):
            m.d.sync += run.cycles.eq(run.cycles + 1)
        # the decoder's outputs are registers loaded in DECODE, held for the whole instruction
        F = {name: getattr(dec, f"f_{name}") for name in LAYOUT}
        dma = _dma_engine(m, self, banks, umem, F)
        host_acc_we = self._host_port(m, run, banks, umem, amem, im_w, dma)

        is_store = F["opcode"] == Opcode.STORE
        issue = _issue_context(m, dec, F, gemm, self._cfg.lanes)
        self._tcu_inputs(m, dec, F, gemm, tcu, umem, issue)
        for seq in (move, vec):
            m.d.comb += [seq.chunks.eq(F["K"]), seq.u_base.eq(F["a_base"]), seq.a_base.eq(F["o_base"]),
                         seq.u_stride.eq(F["a_sk"]), seq.a_stride.eq(F["o_sk"])]
        self._unified_reads(m, banks, umem, issue, gemm, move, vec, is_store)

        self._drain_inputs(m, dec, F, out, tcu)
        g_addr = [Signal(ADDR_BITS, name=f"o_addr{g}") for g in range(cfg.num_ces)]
        for g in range(cfg.num_ces):
            m.d.comb += g_addr[g].eq(out.row + out.h_o_off[g])
        self._accum_reads(m, banks, amem, out, g_addr, move, vec, is_store)
        w, new = _accumulate(m, cfg, self._parts, banks, amem, tcu, out, g_addr)
        mv_narrow, mv_widen = self._move_converters(m, banks, umem, amem, move)
        self._vector(m, banks, umem, amem, vu, vec, F)

        wb = flag(F["flags"], Flag.WB)
        wb_addr = []          # unified write-back row of each group's output row
        for g in range(cfg.num_ces):
            wb_addr.append(Signal(ADDR_BITS, name=f"wb_addr{g}"))
            m.d.comb += wb_addr[g].eq(w["w_off"] + w["addr"][g])
        vec_w_addr = []       # VEC write-back rows
        for j, a in enumerate(vec.a_addr[vw]):
            vec_w_addr.append(Signal(ADDR_BITS, name=f"vec_w_addr{j}"))
            m.d.comb += vec_w_addr[j].eq(F["w_base"] + a - F["o_base"])
        # the write ports' sources by priority: a GEMM's write stage, a move's stage 1, a VEC's
        # stage vec_tail (a move or a VEC starts once the GEMMs have drained), then the host (accumulation
        # unit, while idle)
        E, AW, RW = cfg.num_ces, cfg.lanes * cfg.acc_bits, cfg.lanes * cfg.elem_bits
        acc_sources = [
            (w["valid"], [(w["group_active"][g], w["addr"][g], new[g][0]) for g in range(E)]),
            (move.valid[1] & ~is_store, [(None, a, d) for a, d in zip(move.a_addr[1], mv_widen)]),
            (vec.valid[vw], [(None, a, vu.o[j * AW:(j + 1) * AW]) for j, a in enumerate(vec.a_addr[vw])]),
            (host_acc_we, [(None, self.host_addr, self.host_wdata)]),
        ]
        unified_sources = [
            (w["valid"] & w["wb"], [(w["group_active"][g], wb_addr[g], new[g][1]) for g in range(E)]),
            (move.valid[1] & is_store, [(None, a, d) for a, d in zip(move.u_addr[1], mv_narrow)]),
            (vec.valid[vw] & wb, [(None, a, vu.o_narrow[j * RW:(j + 1) * RW]) for j, a in enumerate(vec_w_addr)]),
        ]
        _write_ports(m, banks, amem, acc_sources)
        _write_ports(m, banks, umem, unified_sources)

        self._fsm(m, run, dec, im_r, gemm, out, move, vec, dma)
        return m

    def _host_port(self, m, run, banks, umem, amem, im_w, dma):
        """The host port: instruction pushes, unified-memory accesses, accumulation-unit reads
        and ``host_err``. Returns the accumulation-unit write enable of the host (this cycle; it
        has the lowest priority at the bank's write port).

        A unified access goes through the unified memory's host port (the half other than the
        running one while busy); an accumulation read shares the banks' read ports (idle while
        not busy). Read data: ``host_rdata`` / ``host_rvalid`` one cycle after ``host_re``.
        """
        cfg, geo = self._cfg, self._geo
        n_instr = Signal(range(cfg.imem_depth + 1), name="n_instr")
        with m.If(self.instr_clear):
            m.d.sync += n_instr.eq(0)
        with m.Elif(self.instr_push):
            with m.If(run.busy | (n_instr == cfg.imem_depth)):
                m.d.sync += run.host_err.eq(1)
            with m.Else():
                m.d.comb += [im_w.en.eq(1), im_w.addr.eq(n_instr), im_w.data.eq(self.instr)]
                m.d.sync += n_instr.eq(n_instr + 1)
        u_ok = (self.host_addr < geo.unified_half_rows) & ~(run.busy & (self.host_half == run.half)) & ~dma.busy
        a_ok = (self.host_addr < geo.accum_rows) & ~run.busy
        with m.If((self.host_we | self.host_re) & Mux(self.host_sel, ~a_ok, ~u_ok)):
            m.d.sync += run.host_err.eq(1)
        RW = cfg.lanes * cfg.elem_bits
        m.d.comb += [umem.host_half.eq(self.host_half), umem.host_bank.eq(banks.of(self.host_addr)),
                     umem.host_addr.eq(banks.index(self.host_addr)), umem.host_wdata.eq(self.host_wdata[:RW]),
                     umem.host_we.eq(self.host_we & ~self.host_sel & u_ok),
                     umem.tcu_half.eq(Mux(run.busy, run.half, ~self.host_half))]
        host_re_q = Signal(name="host_re_q")
        host_sel_q = Signal(name="host_sel_q")
        host_bank_q = Signal(range(cfg.banks), name="host_abank_q")
        m.d.sync += [host_re_q.eq(self.host_re), host_sel_q.eq(self.host_sel),
                     host_bank_q.eq(banks.of(self.host_addr))]
        host_acc_data = banks.select(m, Signal(len(self.host_rdata), name="host_acc_data"), host_bank_q, amem.r_data)
        m.d.comb += [self.host_rvalid.eq(host_re_q),
                     self.host_rdata.eq(Mux(host_sel_q, host_acc_data, umem.host_rdata))]
        return self.host_we & self.host_sel & a_ok

    def _tcu_inputs(self, m, dec, F, gemm, tcu, umem, issue) -> None:
        """GEMM issue: the decoder's fields into :class:`~hdl.sequencer.GemmIssue`, its stream flags
        (one cycle after the addresses, with the read data) and the instruction's network words
        (``issue["net"]``, :func:`_issue_context`) into the TCU, the unified memory's IA / IB read
        data into the TCU's rows."""
        _drive_fields(m, F, gemm)
        m.d.comb += [gemm.stationary.eq(dec.stationary), gemm.loads.eq(dec.loads),
                     gemm.vec_delay.eq(dec.vec_delay)]
        for name in ("ia_go", "ib_go", "first", "last", "swap", "ib_index", "a_bidx", "b_bidx"):
            m.d.comb += getattr(tcu, name).eq(getattr(gemm, name))
        for name, sig in issue["net"].items():
            m.d.comb += getattr(tcu, name).eq(sig)
        for b in range(self._cfg.banks):
            m.d.comb += [tcu.ia_rows[b].eq(umem.ia_data[b]), tcu.ib_rows[b].eq(umem.ib_data[b])]

    def _unified_reads(self, m, banks, umem, issue, gemm, move, vec, is_store) -> None:
        """The unified memory's IA and IB read addresses, per bank: the first active CE whose
        IA / IB row (temporal row + the CE's offset) is in the bank, or with the operand's
        transpose layer (``tr``) whose block of ``lanes`` rows (from the offset rounded down to
        ``lanes``) covers the bank; a LOAD's or a VEC's rows take the IA port over. Data returns
        one cycle later (``umem.ia_data``, ``ib_data``). The GEMM's fields come from ``issue``
        (:func:`_issue_context`: the offsets held are the blocks' starts already)."""
        E, L = self._cfg.num_ces, self._cfg.lanes
        lr = L.bit_length() - 1
        addrs = {}
        for op in "ab":
            row, offs = getattr(gemm, f"{op}_row"), issue[f"{op}_off"]
            addrs[op] = [Signal(ADDR_BITS, name=f"i{op}_addr{c}") for c in range(E)]
            m.d.comb += [addrs[op][c].eq(row + offs[c]) for c in range(E)]
        for b in range(banks.count):
            ia_sel = Signal(ADDR_BITS, name=f"ia_sel{b}")
            ib_sel = Signal(ADDR_BITS, name=f"ib_sel{b}")
            for op, sel in (("a", ia_sel), ("b", ib_sel)):
                # a block starts at a multiple of lanes (the decoder's alignment check): its row in
                # bank b is the start with b mod lanes in the low bits
                cands = [(issue["active"][c], Mux(issue[f"{op}_tr"], Cat(Const(b % L, lr), addrs[op][c][lr:]),
                                                  addrs[op][c])) for c in range(E)]
                for addr, in banks.first(m, b, cands):
                    m.d.comb += sel.eq(addr)
            with m.If(move.busy & ~is_store):
                for addr, in banks.first(m, b, [(None, a) for a in move.u_addr[0]]):
                    m.d.comb += ia_sel.eq(addr)
            with m.If(vec.busy):
                for addr, in banks.first(m, b, [(None, a) for a in vec.u_addr[0]]):
                    m.d.comb += ia_sel.eq(addr)
            m.d.comb += [umem.ia_addr[b].eq(banks.index(ia_sel)), umem.ib_addr[b].eq(banks.index(ib_sel))]

    def _drain_inputs(self, m, dec, F, out, tcu) -> None:
        """The decoded GEMM's output-side fields into the :class:`~hdl.drain.DrainQueue`, the result
        rows of the reduction network, and the queue's held TCU settings into the TCU (they must
        not change while rows of a GEMM are in flight)."""
        _drive_fields(m, F, out)
        m.d.comb += [out.rows.eq(dec.out_rows), out.valid.eq(tcu.red_valid), out.stationary.eq(dec.stationary),
                     out.group_active.eq(dec.group_active), out.acc.eq(flag(F["flags"], Flag.ACC)),
                     out.acc_l0.eq(flag(F["flags"], Flag.ACC_L0)), out.wb.eq(flag(F["flags"], Flag.WB)),
                     out.wb_max.eq(dec.wb_max), out.ce_mode.eq(dec.ce_mode), out.active.eq(dec.active),
                     out.o_tr.eq(F["tr"][2])]
        # the overlap rule's operands as of the next cycle (the queue registers the rule)
        m.d.comb += [out.a_base_next.eq(dec.f_a_base_next), out.b_base_next.eq(dec.f_b_base_next),
                     out.red_mode_next.eq(dec.f_red_mode_next), out.log_gk_next.eq(dec.f_log_gk_next),
                     out.o_tr_next.eq(dec.f_tr_next[2]),
                     *(getattr(out, f"{name}_next").eq(getattr(dec, f"{name}_next"))
                       for name in NEXT_OUTPUTS)]
        for g in range(self._cfg.num_ces):
            m.d.comb += out.o_off[g].eq(dec.o_off[g])
        m.d.comb += [tcu.mode.eq(out.t_ce_mode), tcu.red_mode.eq(out.t_red_mode), tcu.log_gk.eq(out.t_log_gk),
                     tcu.active.eq(out.t_active), tcu.o_tr.eq(out.t_o_tr)]

    def _accum_reads(self, m, banks, amem, out, g_addr, move, vec, is_store) -> None:
        """The accumulation unit's read addresses, per bank, by priority: the output rows of a
        GEMM's reduction beat (``g_addr``, read-modify-write), a STORE's or a VEC's rows, else the
        host. Data returns one cycle later (``amem.r_data``)."""
        E = self._cfg.num_ces
        for b in range(banks.count):
            r_sel = Signal(ADDR_BITS, name=f"acc_rsel{b}")
            with m.If(out.valid):
                for addr, in banks.first(m, b, [(out.h_group_active[g], g_addr[g]) for g in range(E)]):
                    m.d.comb += r_sel.eq(addr)
            with m.Elif(move.busy & is_store):
                for addr, in banks.first(m, b, [(None, a) for a in move.a_addr[0]]):
                    m.d.comb += r_sel.eq(addr)
            with m.Elif(vec.busy):
                for addr, in banks.first(m, b, [(None, a) for a in vec.a_addr[0]]):
                    m.d.comb += r_sel.eq(addr)
            with m.Else():
                m.d.comb += r_sel.eq(self.host_addr)
            m.d.comb += amem.r_addr[b].eq(banks.index(r_sel))

    def _move_converters(self, m, banks, umem, amem, move):
        """The format converters of LOAD / STORE, one per row of a chunk, on the read data of the
        chunk at stage 1 (combinational): STORE narrows accumulation rows, LOAD widens unified
        rows. Returns ``(narrowed rows, widened rows)``, written at the end of stage 1."""
        cfg = self._cfg
        AW, RW = cfg.lanes * cfg.acc_bits, cfg.lanes * cfg.elem_bits
        narrowed, widened = [], []
        for j in range(banks.count):
            src = banks.select(m, Signal(AW, name=f"mv_acc_src{j}"), banks.of(move.a_addr[1][j]), amem.r_data)
            m.submodules[f"mv_narrow{j}"] = nar = self._parts["narrow"](cfg)
            m.d.comb += nar.a.eq(src)
            narrowed.append(nar.o)
            usrc = banks.select(m, Signal(RW, name=f"mv_u_src{j}"), banks.of(move.u_addr[1][j]), umem.ia_data)
            m.submodules[f"mv_widen{j}"] = wid = self._parts["widen"](cfg)
            m.d.comb += wid.a.eq(usrc)
            widened.append(wid.o)
        return narrowed, widened

    def _vector(self, m, banks, umem, amem, vu, vec, F) -> None:
        """The vector unit's operands: the chunk at stage 1 of the VEC sequencer, its unified rows
        (``x``) and accumulation rows (``y``) as read; the unit's result is valid at stage
        :func:`~gen.design.isa.vec_tail` (``vu.o``, ``vu.o_narrow``, ``vu.latency`` cycles later)."""
        cfg = self._cfg
        AW, RW = cfg.lanes * cfg.acc_bits, cfg.lanes * cfg.elem_bits
        m.d.comb += [vu.op.eq(F["mode"][:len(vu.op)]), vu.scalar.eq(F["scalar"])]
        for j in range(self._geo.vec_rows):
            vx = banks.select(m, Signal(RW, name=f"vec_x{j}"), banks.of(vec.u_addr[1][j]), umem.ia_data)
            vy = banks.select(m, Signal(AW, name=f"vec_y{j}"), banks.of(vec.a_addr[1][j]), amem.r_data)
            m.d.comb += [vu.x[j * RW:(j + 1) * RW].eq(vx), vu.y[j * AW:(j + 1) * AW].eq(vy)]

    def _fsm(self, m, run, dec, im_r, gemm, out, move, vec, dma) -> None:
        """The controller FSM: IDLE / HALTED wait for ``start``; per instruction FETCH (the word, read two
        cycles before; decoder stage 1a), DECODE (stage 1b), CHECK (the decoder's registered error code: end
        the run, or start the instruction's sequencers), then MOVE or VEC until the last row is written;
        after a GEMM's CHECK the next FETCH follows at once (the GEMM issues and drains meanwhile). CHECK
        waits as :mod:`gen.design.control` states: a GEMM that may overlap the GEMMs in flight for the
        last cycle of the previous one's issue and a free output context, anything else until every GEMM
        has written its last row. A DMA load / store starts the DMA engine once it is idle and the next
        FETCH follows; a DMA wait, HALT and a failing instruction also wait for it."""
        op = dec.f_opcode
        # the OS guard's test of the decoded GEMM, registered: both sides' values of the next cycle
        os_ok = Signal(name="os_ok")
        m.d.sync += os_ok.eq(dec.os_span_next >= gemm.guard_next)
        with m.FSM(name="ctrl") as fsm:   # imem_q holds in FETCH the word read 2 cycles before: pc + 1
            idle = fsm.ongoing("IDLE") | fsm.ongoing("HALTED") | fsm.ongoing("START")
            m.d.comb += [im_r.addr.eq(Mux(idle, 0, run.pc + 1)),
                         dec.fetch.eq(fsm.ongoing("FETCH"))]
            def wait_for_start():
                with m.If(self.start):
                    m.d.sync += [run.busy.eq(1), run.done.eq(0), run.error.eq(0), run.pc.eq(0), run.cycles.eq(0),
                                 run.half.eq(self.run_half), run.host_err.eq(0)]
                    m.next = "START"

            with m.State("IDLE"):
                wait_for_start()
            # a run ended (HALT or an error): behaves as IDLE, kept apart to show the end in waveforms
            with m.State("HALTED"):
                wait_for_start()
            with m.State("START"):
                m.next = "FETCH"
            with m.State("FETCH"):
                m.d.sync += run.pc_over.eq(run.pc == self._cfg.imem_depth)
                m.next = "DECODE"
            with m.State("DECODE"):
                m.d.comb += dec.load.eq(1)    # the decoder registers the word and its stage 1b
                m.next = "CHECK"
            with m.State("CHECK"):
                with m.If(dec.error != ErrorCode.NONE):
                    with m.If(out.idle & dma.cmd_ready):
                        m.d.sync += [run.error.eq(dec.error), run.busy.eq(0), run.done.eq(1)]
                        m.next = "HALTED"
                with m.Elif(op == Opcode.GEMM):
                    # the issue side is free from the last cycle of the previous GEMM's issue
                    with m.If((~gemm.busy | gemm.done) & (out.idle | out.overlap) & os_ok):
                        m.d.comb += [gemm.start.eq(1), out.start.eq(1)]
                        m.d.sync += run.pc.eq(run.pc + 1)
                        m.next = "FETCH"
                with m.Elif(op == Opcode.DMA):
                    with m.If(dma.cmd_ready):
                        m.d.comb += dma.cmd_valid.eq(dec.f_mode != DmaMode.WAIT)
                        m.d.sync += run.pc.eq(run.pc + 1)
                        m.next = "FETCH"
                with m.Elif(out.idle):
                    with m.If(op == Opcode.HALT):
                        with m.If(dma.cmd_ready):
                            m.d.sync += [run.busy.eq(0), run.done.eq(1)]
                            m.next = "HALTED"
                    with m.Elif((op == Opcode.LOAD) | (op == Opcode.STORE)):
                        m.d.comb += move.start.eq(1)
                        m.next = "MOVE"
                    with m.Elif(op == Opcode.VEC):
                        m.d.comb += vec.start.eq(1)
                        m.next = "VEC"
                    with m.Else():
                        m.d.sync += run.pc.eq(run.pc + 1)
                        m.next = "FETCH"
            # a move or a VEC ends its state when its last row is written
            for state, last in (("MOVE", move.last[1]), ("VEC", vec.last[vec_tail(self._geo)])):
                with m.State(state):
                    with m.If(last):
                        m.d.sync += run.pc.eq(run.pc + 1)
                        m.next = "FETCH"


def _imem(m: Module, cfg: FettaConfig):
    """The instruction memory (submodule ``imem``): its write port, its read port and the read
    port's output register ``imem_q`` (the word a FETCH sees was addressed two cycles before)."""
    m.submodules.imem = imem = Memory(shape=unsigned(INSTR_BITS), depth=cfg.imem_depth, init=[])
    im_r = imem.read_port()
    imem_q = Signal(INSTR_BITS, name="imem_q")
    m.d.sync += imem_q.eq(im_r.data)
    return imem.write_port(), im_r, imem_q


def build(config: FettaConfig) -> Fetta:
    """Factory for :data:`hdl.TOPS` (``fetta``)."""
    return Fetta(config)
