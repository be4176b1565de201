"""The whole fetta accelerator: controller FSM, unified memory, TCU, accumulation unit, host port.

Registered as ``fetta`` in :data:`hdl.TOPS` (the default top of ``fetta verilog``).
It executes the instruction set of :mod:`gen.design.isa`; :mod:`sim.emulator` is its
bit- and cycle-exact reference.

Host port (all inputs sampled on the rising clock edge)
-------------------------------------------------------
host_sel : In(1)        0: unified memory, 1: accumulation unit
host_half : In(1)       ping-pong half of a unified-memory access
host_addr : In(32)      row address (within the half for the unified memory)
host_we, host_re : In(1)
host_wdata : In(lanes * acc_bits)  (a unified row uses the low ``lanes * elem_bits`` bits)
host_rdata : Out(...), host_rvalid : Out(1)   one cycle after ``host_re``
instr, instr_push : In(INSTR_BITS), In(1)  append one word to the instruction memory
instr_clear : In(1)     the next push goes to slot 0
start : In(1)           run from pc 0 on half ``run_half``
run_half : In(1)
busy, done : Out(1)     ``done`` is set when a run ends (HALT or error) until the next start
error : Out(3)          :class:`gen.design.isa.ErrorCode` of the last run
pc : Out(...)           the halting instruction (HALT or the faulting one)
cycles : Out(32)        cycles the last run was busy (counts while running)
host_err : Out(1)       sticky: a host access hit what the running program owns (it was dropped)

While busy the host may access the unified half other than ``run_half``
(ping-pong); accesses to the running half, to the accumulation unit and
instruction pushes are dropped and set ``host_err``. Out-of-range host addresses
are dropped too and set ``host_err``.

Timing (the rules of :mod:`gen.design.isa`): 1 start cycle, then per instruction FETCH,
DECODE, CHECK and the execution cycles of :func:`gen.design.isa.exec_cycles`.
GEMM pipeline: issue ``k`` (address) -> memory read (1 cycle) -> PE MAC (register)
-> on the tile's last step the Psum buffer -> drain one row per cycle through the
reduction tree while the accumulation row is read -> add and write (accumulation
unit, and the unified memory when ``WB``).
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from gen.design.config import FettaConfig, check_accelerator
from gen.design.isa import INSTR_BITS, ErrorCode, Flag, Geometry, Opcode

from hdl.accum import AccumAdd, Narrow, Widen
from hdl.controller import Decoder
from hdl.memory import AccumMemory, UnifiedMemory, check_memory_config
from hdl.tcu import TCU
from hdl.vector import VectorUnit, vec_rows

ADDR = 24


#: sub-blocks :class:`Fetta` instantiates, by ``parts`` key (each called with the configuration)
PARTS = {"umem": UnifiedMemory, "amem": AccumMemory, "tcu": TCU, "vector": VectorUnit,
         "accadd": AccumAdd, "narrow": Narrow, "widen": Widen}


class Fetta(wiring.Component):
    """The accelerator (ports above). ``parts`` replaces sub-blocks of :data:`PARTS` by
    factories of components with the same ports (:mod:`hdl.others` uses stubs to synthesize
    the controller on its own); by default the real blocks, and nothing else changes."""

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
        super().__init__({
            "host_sel": In(1), "host_half": In(1), "host_addr": In(32), "host_we": In(1), "host_re": In(1),
            "host_wdata": In(AW), "host_rdata": Out(AW), "host_rvalid": Out(1),
            "instr": In(INSTR_BITS), "instr_push": In(1), "instr_clear": In(1),
            "start": In(1), "run_half": In(1),
            "busy": Out(1), "done": Out(1), "error": Out(3), "pc": Out(range(config.imem_depth + 1)),
            "cycles": Out(32), "host_err": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, geo = self._cfg, self._geo
        E, B, R, L = cfg.num_ces, cfg.banks, cfg.ce_rows, cfg.lanes
        lb = B.bit_length() - 1
        RW, AW = L * cfg.elem_bits, L * cfg.acc_bits

        P = self._parts
        m.submodules.umem = umem = P["umem"](cfg)
        m.submodules.amem = amem = P["amem"](cfg)
        m.submodules.tcu = tcu = P["tcu"](cfg)
        m.submodules.dec = dec = Decoder(cfg)
        imem = Memory(shape=unsigned(INSTR_BITS), depth=cfg.imem_depth, init=[])
        m.submodules.imem = imem
        im_w = imem.write_port()
        im_r = imem.read_port()

        def bank(a):
            return a[:lb] if lb else Const(0, 1)

        def index(a):
            return a[lb:]

        # --- run state --------------------------------------------------------------
        busy = Signal(name="busy_r")
        half = Signal(name="half")
        pc = Signal(range(cfg.imem_depth + 1), name="pc_r")
        cycles = Signal(32, name="cycles_r")
        done = Signal(name="done_r")
        error = Signal(3, name="error_r")
        host_err = Signal(name="host_err_r")
        ins = Signal(INSTR_BITS, name="ins")
        pc_over = Signal(name="pc_over")
        m.d.comb += [self.busy.eq(busy), self.pc.eq(pc), self.cycles.eq(cycles), self.done.eq(done),
                     self.error.eq(error), self.host_err.eq(host_err),
                     dec.word.eq(ins), dec.pc_overflow.eq(pc_over)]
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)

        # --- host port ---------------------------------------------------------------
        n_instr = Signal(range(cfg.imem_depth + 1), name="n_instr")
        with m.If(self.instr_clear):
            m.d.sync += n_instr.eq(0)
        with m.Elif(self.instr_push):
            with m.If(busy | (n_instr == cfg.imem_depth)):
                m.d.sync += host_err.eq(1)
            with m.Else():
                m.d.comb += [im_w.en.eq(1), im_w.addr.eq(n_instr), im_w.data.eq(self.instr)]
                m.d.sync += n_instr.eq(n_instr + 1)
        u_ok = (self.host_addr < geo.unified_half_rows) & ~(busy & (self.host_half == half))
        a_ok = (self.host_addr < geo.accum_rows) & ~busy
        access = self.host_we | self.host_re
        with m.If(access & Mux(self.host_sel, ~a_ok, ~u_ok)):
            m.d.sync += host_err.eq(1)
        m.d.comb += [umem.host_half.eq(self.host_half), umem.host_bank.eq(bank(self.host_addr)),
                     umem.host_addr.eq(index(self.host_addr)), umem.host_wdata.eq(self.host_wdata[:RW]),
                     umem.host_we.eq(self.host_we & ~self.host_sel & u_ok),
                     umem.host_re.eq(self.host_re & ~self.host_sel & u_ok),
                     umem.tcu_half.eq(Mux(busy, half, ~self.host_half))]
        host_re_q = Signal(name="host_re_q")
        host_sel_q = Signal(name="host_sel_q")
        host_bank_q = Signal(range(B), name="host_abank_q")
        m.d.sync += [host_re_q.eq(self.host_re), host_sel_q.eq(self.host_sel),
                     host_bank_q.eq(bank(self.host_addr))]
        acc_rd = [amem.r_data[b] for b in range(B)]
        host_acc_data = Signal(AW, name="host_acc_data")
        with m.Switch(host_bank_q):
            for b in range(B):
                with m.Case(b):
                    m.d.comb += host_acc_data.eq(acc_rd[b])
        m.d.comb += [self.host_rvalid.eq(host_re_q),
                     self.host_rdata.eq(Mux(host_sel_q, host_acc_data, umem.host_rdata))]
        host_acc_we = self.host_we & self.host_sel & a_ok

        # --- decoded fields ---------------------------------------------------------
        F = {name[2:]: getattr(dec, name) for name in dir(dec) if name.startswith("f_")}
        K, L0, L1 = F["K"], F["L0"], F["L1"]
        period = Signal(17, name="period")
        m.d.comb += period.eq(Mux(K > R, K, R))
        # offsets latched at CHECK (the decoder is combinational on `ins`, which stays put)
        a_off = [dec.a_off[c][:ADDR] for c in range(E)]
        b_off = [dec.b_off[c][:ADDR] for c in range(E)]
        o_off = [dec.o_off[c][:ADDR] for c in range(E)]
        active = dec.active
        gactive = dec.group_active

        # --- GEMM issue side ----------------------------------------------------------
        # OS: K vectors of IA and IB per tile. IS/WS: `nload` IB loads, then (from
        # `vdelay`) K IA vectors; one counter `pcnt` per tile of `period` cycles.
        st = dec.stationary
        nload = Signal(8, name="nload")
        vdelay = Signal(8, name="vdelay")
        m.d.comb += [nload.eq(Mux(dec.horizontal, cfg.ce_cols, R)), vdelay.eq(Mux(dec.horizontal, cfg.ce_cols, 1))]
        with m.If(st):
            m.d.comb += period.eq(Mux(nload > vdelay + K, nload, vdelay + K))
        issuing = Signal(name="issuing")
        pcnt = Signal(17, name="pcnt")
        l0 = Signal(16, name="l0")
        l1 = Signal(16, name="l1")
        ta_l1, ta_t, ta_k = (Signal(ADDR, name=n) for n in ("ta_l1", "ta_t", "ta_k"))
        tb_l1, tb_t, tb_k = (Signal(ADDR, name=n) for n in ("tb_l1", "tb_t", "tb_k"))
        a_go = Signal(name="a_go")
        b_go = Signal(name="b_go")
        vidx = Signal(17, name="vidx")
        m.d.comb += [vidx.eq(pcnt - vdelay),
                     a_go.eq(issuing & Mux(st, (pcnt >= vdelay) & (pcnt < vdelay + K), pcnt < K)),
                     b_go.eq(issuing & Mux(st, pcnt < nload, pcnt < K))]
        s1_a, s1_b, s1_first, s1_last, s1_swap = (Signal(name=f"s1_{x}") for x in ("a", "b", "first", "last", "swap"))
        s1_index = Signal(range(L), name="s1_index")
        s1_abank = Signal(range(B), name="s1_abank")
        s1_bbank = Signal(range(B), name="s1_bbank")
        m.d.sync += [s1_a.eq(a_go), s1_b.eq(b_go), s1_first.eq(pcnt == 0), s1_last.eq(pcnt == K - 1),
                     s1_swap.eq(vidx == 0), s1_index.eq(pcnt[:max(1, (L - 1).bit_length())]),
                     s1_abank.eq(bank(ta_k)), s1_bbank.eq(bank(tb_k))]
        m.d.comb += [tcu.ia_go.eq(s1_a), tcu.ib_go.eq(s1_b), tcu.first.eq(s1_first), tcu.last.eq(s1_last),
                     tcu.swap.eq(s1_swap), tcu.ib_index.eq(s1_index),
                     tcu.a_bidx.eq(s1_abank), tcu.b_bidx.eq(s1_bbank),
                     tcu.a_sel.eq(F["a_sel"]), tcu.b_sel.eq(F["b_sel"]), tcu.red_mode.eq(F["red_mode"]),
                     tcu.mode.eq(dec.ce_mode), tcu.log_gk.eq(F["log_gk"]), tcu.active.eq(active)]
        for b in range(B):
            m.d.comb += [tcu.ia_rows[b].eq(umem.ia_data[b]), tcu.ib_rows[b].eq(umem.ib_data[b])]

        a_addr = [Signal(ADDR, name=f"ia_addr{c}") for c in range(E)]
        b_addr = [Signal(ADDR, name=f"ib_addr{c}") for c in range(E)]
        for c in range(E):
            m.d.comb += [a_addr[c].eq(ta_k + a_off[c]), b_addr[c].eq(tb_k + b_off[c])]

        # --- MOVE (LOAD / STORE) side ----------------------------------------------------
        moving = Signal(name="moving")
        mcnt = Signal(16, name="mcnt")
        mu_base = Signal(ADDR, name="mu_base")
        ma_base = Signal(ADDR, name="ma_base")
        is_store = F["opcode"] == Opcode.STORE
        mu = [Signal(ADDR, name=f"mu{j}") for j in range(B)]
        ma = [Signal(ADDR, name=f"ma{j}") for j in range(B)]
        for j in range(B):
            m.d.comb += [mu[j].eq(mu_base + j * F["a_sk"]), ma[j].eq(ma_base + j * F["o_sk"])]
        mv_w = Signal(name="mv_w")           # write stage of a move
        mv_last = Signal(name="mv_last")
        mu_q = [Signal(ADDR, name=f"mu_q{j}") for j in range(B)]
        ma_q = [Signal(ADDR, name=f"ma_q{j}") for j in range(B)]
        m.d.sync += [mv_w.eq(moving), mv_last.eq(moving & (mcnt == K - 1))]
        for j in range(B):
            m.d.sync += [mu_q[j].eq(mu[j]), ma_q[j].eq(ma[j])]

        # --- VEC side: V rows per cycle (hdl.vector); read (v0) -> multiply (v1) -> write (v2)
        V = geo.vec_rows
        lv = V.bit_length() - 1
        vecing = Signal(name="vecing")
        vcnt = Signal(16, name="vcnt")
        vu_base = Signal(ADDR, name="vu_base")
        va_base = Signal(ADDR, name="va_base")
        vu = [Signal(ADDR, name=f"vu{j}") for j in range(V)]
        va = [Signal(ADDR, name=f"va{j}") for j in range(V)]
        for j in range(V):
            m.d.comb += [vu[j].eq(vu_base + j * F["a_sk"]), va[j].eq(va_base + j * F["o_sk"])]
        v1, v1_last, v2, v2_last = (Signal(name=n) for n in ("v1", "v1_last", "v2", "v2_last"))
        vu_q = [Signal(ADDR, name=f"vu_q{j}") for j in range(V)]
        va_q = [Signal(ADDR, name=f"va_q{j}") for j in range(V)]
        va_q2 = [Signal(ADDR, name=f"va_q2_{j}") for j in range(V)]
        m.d.sync += [v1.eq(vecing), v1_last.eq(vecing & (vcnt == K - 1)), v2.eq(v1), v2_last.eq(v1_last)]
        for j in range(V):
            m.d.sync += [vu_q[j].eq(vu[j]), va_q[j].eq(va[j]), va_q2[j].eq(va_q[j])]
        m.submodules.vector = vu_unit = P["vector"](cfg, lanes=V * L)
        m.d.comb += [vu_unit.op.eq(F["mode"][:2]), vu_unit.scalar.eq(F["scalar"]), vu_unit.valid.eq(v1)]
        for j in range(V):
            vx = Signal(RW, name=f"vec_x{j}")
            vy = Signal(AW, name=f"vec_y{j}")
            with m.Switch(bank(vu_q[j])):
                for b in range(B):
                    with m.Case(b):
                        m.d.comb += vx.eq(umem.ia_data[b])
            with m.Switch(bank(va_q[j])):
                for b in range(B):
                    with m.Case(b):
                        m.d.comb += vy.eq(acc_rd[b])
            m.d.comb += [vu_unit.x[j * RW:(j + 1) * RW].eq(vx), vu_unit.y[j * AW:(j + 1) * AW].eq(vy)]

        # unified IA/IB read addresses per bank: the first CE (or move row) naming the bank
        for b in range(B):
            ia_sel = Signal(ADDR, name=f"ia_sel{b}")
            ib_sel = Signal(ADDR, name=f"ib_sel{b}")
            for c in reversed(range(E)):
                with m.If(active[c] & (bank(a_addr[c]) == b)):
                    m.d.comb += ia_sel.eq(a_addr[c])
                with m.If(active[c] & (bank(b_addr[c]) == b)):
                    m.d.comb += ib_sel.eq(b_addr[c])
            with m.If(moving & ~is_store):
                for j in reversed(range(B)):
                    with m.If(bank(mu[j]) == b):
                        m.d.comb += ia_sel.eq(mu[j])
            with m.If(vecing):
                for j in reversed(range(V)):
                    with m.If(bank(vu[j]) == b):
                        m.d.comb += ia_sel.eq(vu[j])
            m.d.comb += [umem.ia_addr[b].eq(index(ia_sel)), umem.ib_addr[b].eq(index(ib_sel))]

        # --- reduction output -> accumulation ----------------------------------------
        # every valid beat of the reduction network is one result row per group, in order
        d_active = Signal(name="d_active")
        d_row = Signal(16, name="d_row")
        nrows = Signal(16, name="nrows")
        to_l0 = Signal(16, name="to_l0")
        to_l1 = Signal(16, name="to_l1")
        to_l1a, to_t, to_r = (Signal(ADDR, name=n) for n in ("to_l1a", "to_t", "to_r"))
        d_final = Signal(name="d_final")
        m.d.comb += [nrows.eq(Mux(st, K, R)), d_active.eq(tcu.red_valid),
                     d_final.eq(d_active & (d_row == nrows - 1) & (to_l0 == L0 - 1) & (to_l1 == L1 - 1))]
        with m.If(d_active):
            m.d.sync += [d_row.eq(d_row + 1), to_r.eq(to_r + F["o_sk"])]
            with m.If(d_row == nrows - 1):
                m.d.sync += d_row.eq(0)
                with m.If(to_l0 == L0 - 1):
                    m.d.sync += [to_l0.eq(0), to_l1.eq(to_l1 + 1), to_l1a.eq(to_l1a + F["o_sl1"]),
                                 to_t.eq(to_l1a + F["o_sl1"]), to_r.eq(to_l1a + F["o_sl1"])]
                with m.Else():
                    m.d.sync += [to_l0.eq(to_l0 + 1), to_t.eq(to_t + F["o_sl0"]), to_r.eq(to_t + F["o_sl0"])]

        g_addr = [Signal(ADDR, name=f"o_addr{g}") for g in range(E)]
        for g in range(E):
            m.d.comb += g_addr[g].eq(to_r + o_off[g])
        # write stage registers
        w_valid = Signal(name="w_valid")
        w_final = Signal(name="w_final")
        w_acc = Signal(name="w_acc")
        m.d.sync += w_acc.eq(F["flags"][0] | (F["flags"][2] & (to_l0 != 0)))
        w_psum = [Signal(AW, name=f"w_psum{g}") for g in range(E)]
        w_addr = [Signal(ADDR, name=f"w_oaddr{g}") for g in range(E)]
        m.d.sync += [w_valid.eq(d_active), w_final.eq(d_final)]
        for g in range(E):
            m.d.sync += [w_psum[g].eq(tcu.red[g]), w_addr[g].eq(g_addr[g])]
        # accumulation reads: drain rows, STORE sources or the host
        for b in range(B):
            r_sel = Signal(ADDR, name=f"acc_rsel{b}")
            with m.If(d_active):
                for g in reversed(range(E)):
                    with m.If(gactive[g] & (bank(g_addr[g]) == b)):
                        m.d.comb += r_sel.eq(g_addr[g])
            with m.Elif(moving & is_store):
                for j in reversed(range(B)):
                    with m.If(bank(ma[j]) == b):
                        m.d.comb += r_sel.eq(ma[j])
            with m.Elif(vecing):
                for j in reversed(range(V)):
                    with m.If(bank(va[j]) == b):
                        m.d.comb += r_sel.eq(va[j])
            with m.Else():
                m.d.comb += r_sel.eq(self.host_addr[:ADDR])
            m.d.comb += amem.r_addr[b].eq(index(r_sel))

        acc_flag = F["flags"][0]
        wb_flag = F["flags"][1]
        new = []
        for g in range(E):
            m.submodules[f"accadd{g}"] = add = P["accadd"](cfg)
            old = Signal(AW, name=f"acc_old{g}")
            with m.Switch(bank(w_addr[g])):
                for b in range(B):
                    with m.Case(b):
                        m.d.comb += old.eq(acc_rd[b])
            m.d.comb += [add.old.eq(old), add.psum.eq(w_psum[g]), add.acc.eq(w_acc)]
            m.submodules[f"narrow{g}"] = nar = P["narrow"](cfg)
            m.d.comb += nar.a.eq(add.o)
            new.append((add.o, nar.o))
        # STORE: accumulation rows -> narrow -> unified; LOAD: unified -> widen -> accumulation
        mv_narrow = []
        mv_widen = []
        for j in range(B):
            src = Signal(AW, name=f"mv_acc_src{j}")
            with m.Switch(bank(ma_q[j])):
                for b in range(B):
                    with m.Case(b):
                        m.d.comb += src.eq(acc_rd[b])
            m.submodules[f"mv_narrow{j}"] = nar = P["narrow"](cfg)
            m.d.comb += nar.a.eq(src)
            mv_narrow.append(nar.o)
            usrc = Signal(RW, name=f"mv_u_src{j}")
            with m.Switch(bank(mu_q[j])):
                for b in range(B):
                    with m.Case(b):
                        m.d.comb += usrc.eq(umem.ia_data[b])
            m.submodules[f"mv_widen{j}"] = wid = P["widen"](cfg)
            m.d.comb += wid.a.eq(usrc)
            mv_widen.append(wid.o)

        for b in range(B):
            # accumulation-unit write port
            with m.If(w_valid):
                for g in reversed(range(E)):
                    with m.If(gactive[g] & (bank(w_addr[g]) == b)):
                        m.d.comb += [amem.w_en[b].eq(1), amem.w_addr[b].eq(index(w_addr[g])),
                                     amem.w_data[b].eq(new[g][0])]
            with m.Elif(mv_w & ~is_store):
                for j in reversed(range(B)):
                    with m.If(bank(ma_q[j]) == b):
                        m.d.comb += [amem.w_en[b].eq(1), amem.w_addr[b].eq(index(ma_q[j])),
                                     amem.w_data[b].eq(mv_widen[j])]
            with m.Elif(v2):
                for j in reversed(range(V)):
                    with m.If(bank(va_q2[j]) == b):
                        m.d.comb += [amem.w_en[b].eq(1), amem.w_addr[b].eq(index(va_q2[j])),
                                     amem.w_data[b].eq(vu_unit.o[j * AW:(j + 1) * AW])]
            with m.Elif(host_acc_we & (bank(self.host_addr) == b)):
                m.d.comb += [amem.w_en[b].eq(1), amem.w_addr[b].eq(index(self.host_addr)),
                             amem.w_data[b].eq(self.host_wdata)]
            # unified write port of the running half: write-back or STORE
            with m.If(w_valid & wb_flag):
                for g in reversed(range(E)):
                    wa = Signal(ADDR, name=f"wb_addr{g}_{b}")
                    m.d.comb += wa.eq(F["w_base"] + w_addr[g] - F["o_base"])
                    with m.If(gactive[g] & (bank(wa) == b)):
                        m.d.comb += [umem.w_en[b].eq(1), umem.w_addr[b].eq(index(wa)), umem.w_data[b].eq(new[g][1])]
            with m.Elif(mv_w & is_store):
                for j in reversed(range(B)):
                    with m.If(bank(mu_q[j]) == b):
                        m.d.comb += [umem.w_en[b].eq(1), umem.w_addr[b].eq(index(mu_q[j])),
                                     umem.w_data[b].eq(mv_narrow[j])]
            with m.Elif(v2 & wb_flag):
                for j in reversed(range(V)):
                    vw = Signal(ADDR, name=f"vec_w_addr{j}_{b}")
                    m.d.comb += vw.eq(F["w_base"] + va_q2[j] - F["o_base"])
                    with m.If(bank(vw) == b):
                        m.d.comb += [umem.w_en[b].eq(1), umem.w_addr[b].eq(index(vw)),
                                     umem.w_data[b].eq(vu_unit.o_narrow[j * RW:(j + 1) * RW])]

        # --- the FSM ------------------------------------------------------------------
        m.d.comb += [im_r.addr.eq(pc)]
        with m.FSM(name="ctrl"):
            def wait_for_start():
                with m.If(self.start):
                    m.d.sync += [busy.eq(1), done.eq(0), error.eq(0), pc.eq(0), cycles.eq(0), half.eq(self.run_half),
                                 host_err.eq(0)]
                    m.next = "START"

            with m.State("IDLE"):
                wait_for_start()
            # a run ended (HALT or an error): behaves as IDLE, kept apart to show the end in waveforms
            with m.State("HALTED"):
                wait_for_start()
            with m.State("START"):
                m.next = "FETCH"
            with m.State("FETCH"):
                m.d.sync += pc_over.eq(pc == cfg.imem_depth)
                m.next = "DECODE"
            with m.State("DECODE"):
                m.d.sync += ins.eq(im_r.data)
                m.next = "CHECK"
            with m.State("CHECK"):
                op = F["opcode"]
                with m.If(dec.error != ErrorCode.NONE):
                    m.d.sync += [error.eq(dec.error), busy.eq(0), done.eq(1)]
                    m.next = "HALTED"
                with m.Elif(op == Opcode.HALT):
                    m.d.sync += [busy.eq(0), done.eq(1)]
                    m.next = "HALTED"
                with m.Elif(op == Opcode.GEMM):
                    m.d.sync += [issuing.eq(1), pcnt.eq(0), l0.eq(0), l1.eq(0), d_row.eq(0),
                                 ta_l1.eq(F["a_base"]), ta_t.eq(F["a_base"]), ta_k.eq(F["a_base"]),
                                 tb_l1.eq(F["b_base"]), tb_t.eq(F["b_base"]), tb_k.eq(F["b_base"]),
                                 to_l0.eq(0), to_l1.eq(0), to_l1a.eq(F["o_base"]), to_t.eq(F["o_base"]),
                                 to_r.eq(F["o_base"])]
                    m.next = "GEMM"
                with m.Elif((op == Opcode.LOAD) | (op == Opcode.STORE)):
                    m.d.sync += [moving.eq(1), mcnt.eq(0), mu_base.eq(F["a_base"]), ma_base.eq(F["o_base"])]
                    m.next = "MOVE"
                with m.Elif(op == Opcode.VEC):
                    m.d.sync += [vecing.eq(1), vcnt.eq(0), vu_base.eq(F["a_base"]), va_base.eq(F["o_base"])]
                    m.next = "VEC"
                with m.Else():
                    m.d.sync += pc.eq(pc + 1)
                    m.next = "FETCH"
            with m.State("GEMM"):
                with m.If(issuing):
                    m.d.sync += pcnt.eq(pcnt + 1)
                    with m.If(a_go):
                        m.d.sync += ta_k.eq(ta_k + F["a_sk"])
                    with m.If(b_go):
                        m.d.sync += tb_k.eq(tb_k + F["b_sk"])
                    with m.If(pcnt == period - 1):
                        m.d.sync += pcnt.eq(0)
                        with m.If(l0 == L0 - 1):
                            m.d.sync += [l0.eq(0), l1.eq(l1 + 1),
                                         ta_l1.eq(ta_l1 + F["a_sl1"]), ta_t.eq(ta_l1 + F["a_sl1"]),
                                         ta_k.eq(ta_l1 + F["a_sl1"]),
                                         tb_l1.eq(tb_l1 + F["b_sl1"]), tb_t.eq(tb_l1 + F["b_sl1"]),
                                         tb_k.eq(tb_l1 + F["b_sl1"])]
                            with m.If(l1 == L1 - 1):
                                m.d.sync += issuing.eq(0)
                        with m.Else():
                            m.d.sync += [l0.eq(l0 + 1), ta_t.eq(ta_t + F["a_sl0"]), ta_k.eq(ta_t + F["a_sl0"]),
                                         tb_t.eq(tb_t + F["b_sl0"]), tb_k.eq(tb_t + F["b_sl0"])]
                with m.If(w_final):
                    m.d.sync += pc.eq(pc + 1)
                    m.next = "FETCH"
            with m.State("MOVE"):
                with m.If(moving):
                    m.d.sync += [mcnt.eq(mcnt + 1), mu_base.eq(mu_base + (F["a_sk"] << lb)),
                                 ma_base.eq(ma_base + (F["o_sk"] << lb))]
                    with m.If(mcnt == K - 1):
                        m.d.sync += moving.eq(0)
                with m.If(mv_last):
                    m.d.sync += pc.eq(pc + 1)
                    m.next = "FETCH"
            with m.State("VEC"):
                with m.If(vecing):
                    m.d.sync += [vcnt.eq(vcnt + 1), vu_base.eq(vu_base + (F["a_sk"] << lv)),
                                 va_base.eq(va_base + (F["o_sk"] << lv))]
                    with m.If(vcnt == K - 1):
                        m.d.sync += vecing.eq(0)
                with m.If(v2_last):
                    m.d.sync += pc.eq(pc + 1)
                    m.next = "FETCH"
        return m


def build(config: FettaConfig) -> Fetta:
    """Factory for :data:`hdl.TOPS` (``fetta``)."""
    return Fetta(config)
