"""Controller decode stage: instruction fields, per-CE address offsets and the static checks.

:class:`Decoder` is combinational on a registered instruction word. It splits the
word (layout :data:`gen.design.isa.LAYOUT`), computes the spatial address offset of every
CE (IA, IB) and of every reduction group (output), and the error code of
:func:`gen.design.isa.check`, in the same order of precedence. Because every address
is ``base + temporal + spatial`` with unsigned strides, these checks made once
per instruction are exact: an instruction that passes never leaves its range
and never needs two rows of one bank in one cycle, so the FSM
(:class:`hdl.top.Fetta`) executes it without further checks, and one that fails
changes no state.

The bank index of each port is the low ``log2(banks)`` bits of its address; the
distribution crossbar in the top selects, per CE, the bank its address names
(the role of ``sel_vec XOR bank index`` in the butterfly of FETTA V-D).

Ports
-----
word : In(INSTR_BITS)
pc_overflow : In(1)
fields : Out(...) one output per field of :data:`gen.design.isa.LAYOUT` (``f_<name>``)
a_off, b_off : Out(ADDR_BITS + 1).array(num_ces)
o_off : Out(ADDR_BITS + 1).array(num_ces) (groups)
active : Out(num_ces) CE ``c`` takes part; group_active : Out(num_ces)
error : Out(3) :class:`gen.design.isa.ErrorCode`, valid in the same cycle.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.design.config import FettaConfig
from gen.design.isa import CE_MODE, INSTR_BITS, LAYOUT, Dataflow, ErrorCode, Flag, Geometry, Opcode

OFF_BITS = 40


class Decoder(wiring.Component):
    def __init__(self, config: FettaConfig):
        self._cfg = config
        self._geo = Geometry.of(config)
        E = config.num_ces
        members = {"word": In(INSTR_BITS), "pc_overflow": In(1), "error": Out(3),
                   "a_off": Out(OFF_BITS).array(E), "b_off": Out(OFF_BITS).array(E),
                   "o_off": Out(OFF_BITS).array(E), "active": Out(E), "group_active": Out(E),
                   "stationary": Out(1), "horizontal": Out(1), "ce_mode": Out(3)}
        for name, (_, bits) in LAYOUT.items():
            members[f"f_{name}"] = Out(bits)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg, geo = self._cfg, self._geo
        E, B = cfg.num_ces, cfg.banks
        lb = B.bit_length() - 1
        f = {}
        for name, (pos, bits) in LAYOUT.items():
            m.d.comb += getattr(self, f"f_{name}").eq(self.word[pos:pos + bits])
            f[name] = getattr(self, f"f_{name}")
        lgm, lgn, lgk = f["log_gm"], f["log_gn"], f["log_gk"]
        gm, gn, gk = Signal(9, name="gm"), Signal(9, name="gn"), Signal(9, name="gk")
        m.d.comb += [gm.eq(Const(1, 9) << lgm), gn.eq(Const(1, 9) << lgn), gk.eq(Const(1, 9) << lgk)]
        ces = Signal(24, name="ces")
        m.d.comb += ces.eq((Const(1, 24) << (lgm + lgn + lgk)))
        groups = Signal(24, name="groups")
        m.d.comb += groups.eq(Const(1, 24) << (lgm + lgn))

        # spatial offsets of every CE / group (c = (im * gn + in) * gk + ik)
        for c in range(E):
            im = Signal(8, name=f"im{c}")
            in_ = Signal(8, name=f"in{c}")
            ik = Signal(8, name=f"ik{c}")
            cc = Const(c, 8)
            m.d.comb += [im.eq(cc >> (lgn + lgk)), in_.eq((cc >> lgk) & (gn - 1)), ik.eq(cc & (gk - 1)),
                         self.active[c].eq(cc < ces)]
            for op, off in (("a", self.a_off[c]), ("b", self.b_off[c])):
                m.d.comb += off.eq(im * f[f"{op}_sm"] + in_ * f[f"{op}_sn"] + ik * f[f"{op}_sr"])
            gim = Signal(8, name=f"gim{c}")
            gin = Signal(8, name=f"gin{c}")
            m.d.comb += [gim.eq(cc >> lgn), gin.eq(cc & (gn - 1)), self.group_active[c].eq(cc < groups)]
            m.d.comb += self.o_off[c].eq(gim * f["o_sm"] + gin * f["o_sn"])

        mode = f["mode"]
        m.d.comb += [self.stationary.eq((mode == Dataflow.WS) | (mode == Dataflow.IS) | (mode == Dataflow.WS_H)
                                        | (mode == Dataflow.IS_H)),
                     self.horizontal.eq((mode == Dataflow.WS_H) | (mode == Dataflow.IS_H))]
        with m.Switch(mode):
            for dv, cv in CE_MODE.items():
                with m.Case(int(dv)):
                    m.d.comb += self.ce_mode.eq(cv)
        nload = Signal(8, name="nload")
        m.d.comb += nload.eq(Mux(self.horizontal, cfg.ce_cols, cfg.ce_rows))
        orows = Signal(17, name="out_rows")
        m.d.comb += orows.eq(Mux(self.stationary, f["K"], cfg.ce_rows))

        # --- routing check (gen.design.isa.route_ok): distribution sources for every bank index
        N = cfg.net_ports
        n = N.bit_length() - 1

        def dist_ok(op):
            offs = [self.a_off[c] if op == "a" else self.b_off[c] for c in range(E)]
            omask = Signal(n, name=f"{op}_omask")
            acc = Const(0, n)
            for c in range(E):
                acc = acc | Mux(self.active[c], offs[c][:n], 0)
            m.d.comb += omask.eq(acc)
            # low = 2**bitlen(omask) - 1: smear the ones downwards
            low = Signal(n, name=f"{op}_low")
            sm = omask
            for i in range(n):
                sm = sm | (sm >> (1 << i) if (1 << i) < n else sm)
            m.d.comb += low.eq(sm)
            tb = f[f"{op}_base"] | f[f"{op}_sk"] | f[f"{op}_sl0"] | f[f"{op}_sl1"]
            bad = [(tb[:n] & low) != 0]
            sel = f[f"{op}_sel"]
            for b in range(N):
                # only bank indices that are multiples of low + 1 occur
                relevant = Signal(name=f"{op}_rel{b}")
                m.d.comb += relevant.eq((Const(b, n) & low) == 0)
                for c in range(E):
                    node = Const(c, n)
                    for s_ in reversed(range(n)):
                        k = n - 1 - s_
                        ctl = sel[s_ * N:(s_ + 1) * N].bit_select(node, 1) ^ ((b >> k) & 1)
                        node = node ^ (ctl << k)
                    src = Signal(n, name=f"{op}_src{b}_{c}")
                    m.d.comb += src.eq(node)
                    bad.append(relevant & self.active[c] & (src != (offs[c][:n] ^ b)))
            return ~Cat(*bad).any()

        def red_ok():
            rm = f["red_mode"]
            cur = [Mux(self.active[p], Const(1 << p, N), 0) if p < E else Const(0, N) for p in range(N)]
            for s_ in range(n):
                nxt = [None] * N
                for p in range(N // 2):
                    lo = ((p >> s_) << (s_ + 1)) | (p & ((1 << s_) - 1))
                    hi = lo | (1 << s_)
                    md = rm[2 * (s_ * N // 2 + p):2 * (s_ * N // 2 + p) + 2]
                    a_, b_ = cur[lo], cur[hi]
                    ml = Signal(N, name=f"redchk{s_}_{lo}")
                    mh = Signal(N, name=f"redchk{s_}_{hi}")
                    with m.Switch(md):
                        with m.Case(0):
                            m.d.comb += [ml.eq(a_), mh.eq(b_)]
                        with m.Case(1):
                            m.d.comb += [ml.eq(b_), mh.eq(a_)]
                        with m.Case(2):
                            m.d.comb += [ml.eq(a_ | b_), mh.eq(0)]
                        with m.Case(3):
                            m.d.comb += [ml.eq(0), mh.eq(a_ | b_)]
                    nxt[lo], nxt[hi] = ml, mh
                cur = nxt
            bad = []
            for lg in range(E.bit_length()):
                size = 1 << lg
                for g in range(E // size):
                    want = ((1 << size) - 1) << (g * size)
                    bad.append((lgk == lg) & self.group_active[g] & (cur[g * size] != want))
            return ~Cat(*bad).any()

        route_good = Signal(name="route_good")
        m.d.comb += route_good.eq(dist_ok("a") & dist_ok("b") & red_ok())

        def conflict(offs, act, writes):
            bits = []
            for c in range(E):
                for d in range(c + 1, E):
                    same_bank = offs[c][:lb] == offs[d][:lb] if lb else Const(1)
                    clash = same_bank if writes else (same_bank & (offs[c] != offs[d]))
                    bits.append(act[c] & act[d] & clash)
            return Cat(*bits).any() if bits else Const(0)

        def tmax(op, kb):
            return ((kb - 1) * f[f"{op}_sk"] + (f["L0"] - 1) * f[f"{op}_sl0"] + (f["L1"] - 1) * f[f"{op}_sl1"])

        def smax(op):
            return (gm - 1) * f[f"{op}_sm"] + (gn - 1) * f[f"{op}_sn"] + (gk - 1) * f[f"{op}_sr"]

        a_max = Signal(OFF_BITS + 8, name="a_max")
        b_max = Signal(OFF_BITS + 8, name="b_max")
        o_max = Signal(OFF_BITS + 8, name="o_max")
        m.d.comb += [a_max.eq(f["a_base"] + tmax("a", f["K"]) + smax("a")),
                     b_max.eq(f["b_base"] + tmax("b", Mux(self.stationary, nload, f["K"])) + smax("b")),
                     o_max.eq(tmax("o", orows) + (gm - 1) * f["o_sm"] + (gn - 1) * f["o_sn"])]
        HALF, ACC = geo.unified_half_rows, geo.accum_rows

        # LOAD / STORE: rows = K * banks, one chunk of `banks` rows per cycle
        rows_m1 = Signal(24, name="move_rows_m1")
        m.d.comb += rows_m1.eq((f["K"] << lb) - 1)
        u_max = Signal(OFF_BITS + 8, name="move_u_max")
        c_max = Signal(OFF_BITS + 8, name="move_acc_max")
        m.d.comb += [u_max.eq(f["a_base"] + rows_m1 * f["a_sk"]), c_max.eq(f["o_base"] + rows_m1 * f["o_sk"])]
        is_store = f["opcode"] == Opcode.STORE
        # j * s (j < banks) hits distinct banks iff s is odd; reads of one row (s = 0) may share
        u_even = (f["a_sk"][0] == 0) if lb else Const(0)
        c_even = (f["o_sk"][0] == 0) if lb else Const(0)
        u_conf = Signal(name="move_u_conflict")
        c_conf = Signal(name="move_acc_conflict")
        m.d.comb += [u_conf.eq(u_even & (is_store | (f["a_sk"] != 0))),
                     c_conf.eq(c_even & (~is_store | (f["o_sk"] != 0)))]

        # VEC (gen.design.isa._check_vec): rows = K * V, V = vec_rows rows per cycle
        V = geo.vec_rows
        lv = max(V, 1).bit_length() - 1
        v_rows_m1 = Signal(24, name="vec_rows_m1")
        m.d.comb += v_rows_m1.eq((f["K"] << lv) - 1)
        v_umax = Signal(OFF_BITS + 8, name="vec_u_max")
        v_amax = Signal(OFF_BITS + 8, name="vec_acc_max")
        v_wmax = Signal(OFF_BITS + 8, name="vec_w_max")
        m.d.comb += [v_umax.eq(f["a_base"] + v_rows_m1 * f["a_sk"]), v_amax.eq(f["o_base"] + v_rows_m1 * f["o_sk"]),
                     v_wmax.eq(f["w_base"] + v_rows_m1 * f["o_sk"])]

        def v_conf(s_, writes):
            # j * s (j < V, V | banks) hits V distinct banks iff s mod 2**(lb - lv + 1) != 0
            if lv == 0:
                return Const(0)
            hit = s_[:lb - lv + 1] == 0
            return hit if writes else hit & (s_ != 0)

        v_wb = f["flags"][1]
        v_hazard = Signal(name="vec_hazard")
        m.d.comb += v_hazard.eq((((f["K"] << lv) > 1) & (f["o_sk"] == 0))
                                | (v_wb & ~((f["w_base"] == f["a_base"]) & (f["o_sk"] == f["a_sk"]))
                                   & (f["w_base"] <= v_umax) & (f["a_base"] <= v_wmax)))

        err = self.error
        with m.If(self.pc_overflow):
            m.d.comb += err.eq(ErrorCode.PC_OVERFLOW)
        with m.Elif(f["opcode"] > max(Opcode)):
            m.d.comb += err.eq(ErrorCode.ILLEGAL_OPCODE)
        with m.Elif(f["opcode"] == Opcode.GEMM):
            with m.If((f["mode"] > max(Dataflow)) | (ces > E) | (f["K"] == 0) | (f["L0"] == 0) | (f["L1"] == 0)):
                m.d.comb += err.eq(ErrorCode.BAD_SHAPE)
            with m.Elif((a_max >= HALF) | (b_max >= HALF)):
                m.d.comb += err.eq(ErrorCode.UNIFIED_RANGE)
            with m.Elif(f["o_base"] + o_max >= ACC):
                m.d.comb += err.eq(ErrorCode.ACCUM_RANGE)
            with m.Elif(f["flags"][1] & (f["w_base"] + o_max >= HALF)):
                m.d.comb += err.eq(ErrorCode.UNIFIED_RANGE)
            with m.Elif(conflict(self.a_off, self.active, False) | conflict(self.b_off, self.active, False)
                        | conflict(self.o_off, self.group_active, True)
                        | ((orows > 1) & (f["o_sk"] == 0))):
                m.d.comb += err.eq(ErrorCode.BANK_CONFLICT)
            with m.Elif(~route_good):
                m.d.comb += err.eq(ErrorCode.ROUTE)
        with m.Elif(f["opcode"] == Opcode.VEC):
            with m.If((f["mode"] > 3) | (f["K"] == 0) | Const(int(V == 0), 1)):
                m.d.comb += err.eq(ErrorCode.BAD_SHAPE)
            with m.Elif(v_umax >= HALF):
                m.d.comb += err.eq(ErrorCode.UNIFIED_RANGE)
            with m.Elif(v_amax >= ACC):
                m.d.comb += err.eq(ErrorCode.ACCUM_RANGE)
            with m.Elif(v_wb & (v_wmax >= HALF)):
                m.d.comb += err.eq(ErrorCode.UNIFIED_RANGE)
            with m.Elif(v_conf(f["a_sk"], False) | v_conf(f["o_sk"], True) | v_hazard):
                m.d.comb += err.eq(ErrorCode.BANK_CONFLICT)
        with m.Elif((f["opcode"] == Opcode.LOAD) | is_store):
            with m.If(f["K"] == 0):
                m.d.comb += err.eq(ErrorCode.BAD_SHAPE)
            with m.Elif(u_max >= HALF):
                m.d.comb += err.eq(ErrorCode.UNIFIED_RANGE)
            with m.Elif(c_max >= ACC):
                m.d.comb += err.eq(ErrorCode.ACCUM_RANGE)
            with m.Elif(u_conf | c_conf):
                m.d.comb += err.eq(ErrorCode.BANK_CONFLICT)
        assert Flag.WB == 2
        return m
