"""Controller decode stage: instruction fields, per-CE address offsets and the static checks.

:class:`Decoder` is a two-stage pipeline over the controller's FETCH and DECODE cycles, read in CHECK. The top
reads the instruction memory two cycles ahead (the address is the next ``pc`` while the previous
instruction runs) through the memory's output register, so the word is a register in FETCH. Stage 1a
(FETCH) works on that word: it splits it (layout :data:`gen.design.isa.LAYOUT`), computes the spatial
address offset of every CE (IA, IB) and of every reduction group (output), and every product of a loop
bound and a stride that the range checks add up, and registers them with the word (``f_word``,
``f_t_<term>``, ``f_<offset>``). Stage 1b (DECODE) works on those registers: the dataflow outputs, the
largest row each access range reaches (the sums of the products), a GEMM's bank-conflict and routing
checks (they need only the fields and the offsets) and from them the error code of
:func:`gen.design.isa.check`, in the same order of precedence (the range comparisons and the priority
chain), registered with the word. In CHECK every output is a register: the FSM decides from the
registered error code whether it starts the instruction, with no decoder logic in front. During
execution every output is a register, so the address generators start from registers (no decoder logic on
the address path), no stage has the memory's output or a multiplier in front of an adder tree, and the
stages cost no cycle.

Because every address is ``base + temporal + spatial`` with unsigned strides, these checks made once
per instruction are exact: an instruction that passes never leaves its range
and never needs two rows of one bank in one cycle, so the FSM
(:class:`hdl.top.Fetta`) executes it without further checks, and one that fails
changes no state.

The bank index of each port is the low ``log2(banks)`` bits of its address; the
distribution crossbar in the top selects, per CE, the bank its address names
(the role of ``sel_vec XOR bank index`` in the butterfly of FETTA V-D).

The sums the checks compare (largest addresses, row counts) are held in signals as wide
as their expressions, so they never wrap; the ones that can go negative (a zero loop
bound) only matter after the ``BAD_SHAPE`` check that such a bound fails first.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.design.config import FettaConfig
from gen.design.isa import (ADDR_BITS, BOUND_BITS, CE_MODE, DRAM_ADDR_BITS, INSTR_BITS, LAYOUT, LOG_GRID_BITS,
                            STRIDE_BITS, CEMode, Dataflow, DmaMode, ErrorCode, Flag, Geometry, Opcode, VecOp)

from hdl.pipe import hold
from hdl.red_net import MODE_BITS, SwitchMode
from hdl.sequencer import tile_step_shape

__all__ = ["Decoder", "flag", "offset_bits", "NEXT_FIELDS", "NEXT_OUTPUTS"]

#: fields and outputs the decoder also gives as of the next cycle (``f_<field>_next``,
#: ``<output>_next``): what the drain queue's overlap rule registers (:class:`hdl.drain.DrainQueue`)
NEXT_FIELDS = ("a_base", "b_base", "red_mode", "log_gk", "tr")
NEXT_OUTPUTS = ("a_max", "b_max", "ce_mode", "active")

#: largest value of a ``log_g*`` field: a grid side is at most ``2**MAX_LOG_GRID``
MAX_LOG_GRID = (1 << LOG_GRID_BITS) - 1


def flag(flags: Value, which: Flag) -> Value:
    """The bit of the ``flags`` field that holds the one-bit flag ``which``."""
    return flags[int(which).bit_length() - 1]


def offset_bits(config: FettaConfig) -> int:
    """Width of a spatial row offset ``im * sm + in * sn + ik * sr`` (``im, in, ik < num_ces``:
    three products, two carries)."""
    return max(1, (config.num_ces - 1).bit_length()) + STRIDE_BITS + 2


def _exact(m: Module, name: str, expr) -> Signal:
    """``expr`` in a named signal as wide as the expression, so that it never wraps."""
    sig = Signal(unsigned(Value.cast(expr).shape().width), name=name)
    m.d.comb += sig.eq(expr)
    return sig


def _capped(m: Module, name: str, terms, limit: int) -> Signal:
    """The sum of the non-negative ``terms`` where it is below ``limit``, else a value at least
    ``limit`` (in a named signal): with ``k`` the bits of ``limit``, the sum of the terms' low ``k``
    bits, and above it one bit set when a term has a higher bit set. So the carry chain of a range
    check spans the range's bits, not those of the products of 16-bit fields."""
    k = limit.bit_length()
    values = [Value.cast(t) for t in terms]
    low = sum(v[:k] for v in values)[:k + (len(values) - 1).bit_length()]
    high = Cat(*(v[k:] for v in values if len(v) > k)).any()
    return _exact(m, name, Cat(low, high))


def _at_least(value, limit: int) -> Value:
    """``value >= limit``; for a power of two the OR of ``value``'s bits from that one up, which
    Yosys (0.23) would otherwise build as a carry chain as long as ``value``."""
    if limit & (limit - 1) == 0:
        return Value.cast(value)[limit.bit_length() - 1:].any()
    return value >= limit


def _next_values(m: Module, dec, w: dict, loaded: dict) -> Signal:
    """Drive the decoder's ``*_next`` outputs: in a ``load`` cycle what it loads (the fields ``w`` of
    the fetched word, the outputs' values ``loaded``), else the registers. Returns the register
    ``os_span`` (``add_latency * (K - 1)``, loaded from ``os_span_next``)."""
    os_span = Signal.like(dec.os_span_next, name="os_span")
    nxt = {**{f"f_{name}": w[name] for name in NEXT_FIELDS}, **{name: loaded[name] for name in NEXT_OUTPUTS}}
    m.d.comb += [getattr(dec, f"{name}_next").eq(Mux(dec.load, v, getattr(dec, name))) for name, v in nxt.items()]
    m.d.comb += dec.os_span_next.eq(Mux(dec.load, (w["K"] - 1) * dec._cfg.add_latency, os_span))
    return os_span


class Decoder(wiring.Component):
    """Two-stage instruction decoder and checker (module docstring).

    Parameters
    ----------
    config : FettaConfig

    Ports
    -----
    word : In(INSTR_BITS)
        The instruction, from the instruction memory's output register (the top's FETCH cycle).
    fetch : In(1)
        Register ``word`` and everything stage 1a computes from it (the top's FETCH state).
    load : In(1)
        Register the fetched word and everything stage 1b computes from stage 1a's registers (the
        top's DECODE state, the cycle after ``fetch``).
    pc_overflow : In(1)
        The program counter ran past the instruction memory (a register of the top, read with ``load``).
    f_<name> : Out(bits)
        One output per field of :data:`gen.design.isa.LAYOUT`, of the registered word.
    a_off, b_off : Out(offset bits).array(num_ces)
        Spatial IA / IB row offset of CE ``c`` (exact: ``log2(num_ces) + STRIDE_BITS + 2`` bits).
    o_off : Out(offset bits).array(num_ces)
        Spatial output row offset of reduction group ``g``.
    active, group_active : Out(num_ces)
        CE ``c`` / group ``g`` takes part in the GEMM.
    stationary, horizontal : Out(1); ce_mode : Out(CEMode)
        The dataflow of the ``mode`` field (IS/WS; IB loaded from the left; the CEs' mapping).
    loads, vec_delay : Out(tile_step_shape)
        IS/WS: IB loads per tile and the cycle of a tile's first IA vector
        (:func:`gen.design.isa.loads`, :func:`gen.design.isa.vec_delay`).
    out_rows : Out(BOUND_BITS)
        Result rows a CE emits per tile (:func:`gen.design.isa.out_rows`).
    f_<field>_next, <output>_next : Out
        For the fields :data:`NEXT_FIELDS` and the outputs :data:`NEXT_OUTPUTS`: the value the
        register holds in the next cycle (combinational: what a ``load`` cycle loads, else the
        register), for comparisons the controller registers; the register itself in the top's CHECK.
    os_span_next : Out(signed)
        Likewise, ``add_latency * (K - 1)`` of the word, what the OS guard of the GEMM issue is
        compared with (:class:`hdl.sequencer.GemmIssue` ``guard_next``; negative for ``K = 0``).
    a_max, b_max, wb_max : Out(ADDR_BITS)
        A GEMM's last unified row read for IA / IB and written back (:func:`gen.design.isa.read_max`,
        ``w_base`` + :func:`gen.design.isa.out_max`); exact for an instruction that passes its checks.
    error : Out(ErrorCode)
        :func:`gen.design.isa.check` of the word (``PC_OVERFLOW`` first, from ``pc_overflow`` in the
        ``load`` cycle).

    Latency: every output but the ``*_next`` ones is a register loaded with ``load`` from the word of
    the last ``fetch`` (valid from the cycle after ``load``, the top's CHECK, held until the next ``load``).
    """

    def __init__(self, config: FettaConfig):
        self._cfg = config
        self._geo = Geometry.of(config)
        E = config.num_ces
        off = offset_bits(config)
        steps = tile_step_shape(config)
        members = {"word": In(INSTR_BITS), "fetch": In(1), "load": In(1), "pc_overflow": In(1),
                   "error": Out(ErrorCode),
                   "a_off": Out(off).array(E), "b_off": Out(off).array(E),
                   "o_off": Out(off).array(E), "active": Out(E), "group_active": Out(E),
                   "stationary": Out(1), "horizontal": Out(1), "ce_mode": Out(CEMode),
                   "loads": Out(steps), "vec_delay": Out(steps), "out_rows": Out(BOUND_BITS),
                   "a_max": Out(ADDR_BITS), "b_max": Out(ADDR_BITS), "wb_max": Out(ADDR_BITS),
                   "os_span_next": Out(signed(LAYOUT["K"][1] + config.add_latency.bit_length() + 1))}
        for name, (_, bits) in LAYOUT.items():
            members[f"f_{name}"] = Out(bits)
        members.update({f"f_{name}_next": Out(LAYOUT[name][1]) for name in NEXT_FIELDS})
        members.update({f"{name}_next": members[name] for name in NEXT_OUTPUTS})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        ins = Signal(INSTR_BITS, name="ins")
        raw, f = {}, {}
        for name, (pos, bits) in LAYOUT.items():
            raw[name] = self.word[pos:pos + bits]
            f[name] = getattr(self, f"f_{name}")
            m.d.comb += f[name].eq(ins[pos:pos + bits])
        # stage 1a (FETCH): on the word as it leaves the instruction memory, registered with it
        grid_r = _grid(m, raw, "r_")
        flow_r = self._dataflow(m, raw, "r_", ("stationary", "loads", "out_rows"))
        early = {**self._offsets(m, raw, grid_r), **_products(self._cfg, self._geo, raw, grid_r, flow_r)}
        fetched = hold(m, self.fetch, {"word": self.word, **early}, "f_")
        # stage 1b (DECODE): on the fetched word and stage 1a's registers, registered with the word
        fw = fetched["word"]
        w = {name: fw[pos:pos + bits] for name, (pos, bits) in LAYOUT.items()}
        grid_d = _grid(m, w, "d_", ())
        flow_d = self._dataflow(m, w, "d_")
        offs_d = {k: fetched[k] for k in ("a_off", "b_off", "o_off", "active", "group_active")}
        max_d = _maxima(m, self._cfg, self._geo, w, {k: v for k, v in fetched.items() if k.startswith("t_")})
        static_d = self._gemm_static(m, w, flow_d, offs_d)
        # ... and the error code (:func:`gen.design.isa.check`), from the fields, the sums and the
        # checks of this cycle: CHECK sees it as a register
        bare = {k.removeprefix("d_"): v for src in (grid_d, max_d, static_d) for k, v in src.items()}
        error = self._error(m, w, bare)
        maxima = {name: Signal.like(max_d[f"d_{name}"], name=name) for name in ("a_max", "b_max", "o_wb_max")}
        loaded = {**flow_d, **offs_d, "a_max": max_d["d_a_max"], "b_max": max_d["d_b_max"]}
        os_span = _next_values(m, self, w, loaded)
        loads = [ins.eq(fw), self.error.eq(error), os_span.eq(self.os_span_next),
                 *(sig.eq(max_d[f"d_{name}"]) for name, sig in maxima.items())]
        for name, sig in {**flow_d, **offs_d}.items():
            out = getattr(self, name)
            if isinstance(sig, list):
                loads += [o.eq(x) for o, x in zip(out, sig)]
            else:
                loads.append(out.eq(sig))
        with m.If(self.load):
            m.d.sync += loads
        m.d.comb += [self.a_max.eq(maxima["a_max"]), self.b_max.eq(maxima["b_max"]),
                     self.wb_max.eq(maxima["o_wb_max"])]
        return m

    def _error(self, m, f, d) -> Signal:
        """Stage 1b's error code, combinational on the fetched fields ``f`` and stage 1b's grid,
        maxima and static checks ``d`` (keys without ``d_``): the checks of every opcode and their
        priority, as :func:`gen.design.isa.check` orders them."""
        codes = {Opcode.GEMM: self._gemm_checks(m, f, d), Opcode.VEC: self._vec_checks(m, f, d),
                 Opcode.LOAD: self._move_checks(m, f, d), Opcode.DMA: self._dma_checks(m, f, d)}
        op = f["opcode"]
        err = Signal(ErrorCode, name="d_error")
        with m.If(self.pc_overflow):
            m.d.comb += err.eq(ErrorCode.PC_OVERFLOW)
        with m.Elif(op > max(Opcode)):
            m.d.comb += err.eq(ErrorCode.ILLEGAL_OPCODE)
        with m.Elif(op == Opcode.GEMM):
            m.d.comb += err.eq(codes[Opcode.GEMM])
        with m.Elif(op == Opcode.VEC):
            m.d.comb += err.eq(codes[Opcode.VEC])
        with m.Elif((op == Opcode.LOAD) | (op == Opcode.STORE)):
            m.d.comb += err.eq(codes[Opcode.LOAD])
        with m.Elif(op == Opcode.DMA):
            m.d.comb += err.eq(codes[Opcode.DMA])
        return err

    def _offsets(self, m, f, grid) -> dict:
        """Stage 1a: ``a_off``, ``b_off``, ``o_off`` (lists), ``active`` and ``group_active``
        (combinational on the fields ``f`` and the grid of :func:`_grid` with prefix ``r_``).

        CE ``c = (im * gn + in) * gk + ik`` reads ``im * x_sm + in * x_sn + ik * x_sr`` past
        the temporal address of operand ``x``; group ``g = im * gn + in`` writes
        ``im * o_sm + in * o_sn`` past the temporal output row. No multiplier: bit ``i`` of the
        constant ``c`` belongs to ``ik``, ``in`` or ``im`` by the grid alone, so the offset is the
        sum of one shifted stride per set bit (:func:`_bit_terms`), and CE ``c``'s offset is that of
        ``c`` without its top bit plus one term: one adder per CE and operand."""
        E = self._cfg.num_ces
        lgn, lgk = f["log_gn"], f["log_gk"]
        out = {"a_off": [Signal.like(self.a_off[c], name=f"r_a_off{c}") for c in range(E)],
               "b_off": [Signal.like(self.b_off[c], name=f"r_b_off{c}") for c in range(E)],
               "o_off": [Signal.like(self.o_off[c], name=f"r_o_off{c}") for c in range(E)],
               "active": Signal(E, name="r_active"), "group_active": Signal(E, name="r_group_active")}
        terms = {op: _bit_terms(m, self._cfg, f"{op}_t", lgk, lgn, f[f"{op}_sr"], f[f"{op}_sn"], f[f"{op}_sm"])
                 for op in ("a", "b")}
        terms["o"] = _bit_terms(m, self._cfg, "o_t", Const(0, lgk.shape()), lgn, Const(0, 1), f["o_sn"], f["o_sm"])
        for c in range(E):
            # c < 2**s is s >= bit_length(c)
            m.d.comb += [out["active"][c].eq(grid["r_log_ces"] >= c.bit_length() if c else 1),
                         out["group_active"][c].eq(grid["r_log_groups"] >= c.bit_length() if c else 1)]
            top = c.bit_length() - 1
            for op in ("a", "b", "o"):
                m.d.comb += out[f"{op}_off"][c].eq(out[f"{op}_off"][c - (1 << top)] + terms[op][top] if c else 0)
        return out

    def _dataflow(self, m, f, prefix: str, names=("stationary", "horizontal", "ce_mode", "loads", "vec_delay",
                                                  "out_rows")) -> dict[str, Signal]:
        """Of ``stationary``, ``horizontal``, ``ce_mode``, ``loads``, ``vec_delay`` and ``out_rows`` of the
        ``mode`` field, those in ``names`` (combinational; signal names start with ``prefix``). Stage 1b
        registers them into the outputs; stage 1a uses the loop bounds ``loads`` and ``out_rows``."""
        cfg = self._cfg
        mode = f["mode"]
        out = {name: Signal.like(getattr(self, name), name=f"{prefix}{name}")
               for name in ("stationary", "horizontal", "ce_mode", "loads", "vec_delay", "out_rows")}
        m.d.comb += [out["stationary"].eq((mode == Dataflow.WS) | (mode == Dataflow.IS) | (mode == Dataflow.WS_H)
                                          | (mode == Dataflow.IS_H)),
                     out["horizontal"].eq((mode == Dataflow.WS_H) | (mode == Dataflow.IS_H))]
        if "ce_mode" in names:
            with m.Switch(mode):
                for dv, cv in CE_MODE.items():
                    with m.Case(int(dv)):
                        m.d.comb += out["ce_mode"].eq(CEMode(cv))
        m.d.comb += [out["loads"].eq(Mux(out["horizontal"], cfg.ce_cols, cfg.ce_rows)),
                     out["out_rows"].eq(Mux(out["stationary"], f["K"], cfg.ce_rows))]
        if "vec_delay" in names:
            m.d.comb += out["vec_delay"].eq(Mux(out["horizontal"], cfg.ce_cols, 1))
        out = {k: v for k, v in out.items() if k in names}
        return out

    def _dist_ok(self, m, f, op: str, offs, active) -> Value:
        """The distribution network of operand ``op`` (``"a"`` or ``"b"``) delivers to every active
        CE the bank its address names, for every bank index the temporal address can take
        (:func:`gen.design.isa._dist_ok`): every switch on the CEs' paths set as the path needs
        (``num_ces * (net_ports - 1)`` one-bit checks at most). ``offs``: the operand's per-CE
        offsets, ``active``: the CEs taking part."""
        E, N = self._cfg.num_ces, self._cfg.net_ports
        n = N.bit_length() - 1
        omask = Signal(n, name=f"{op}_omask")
        acc = Const(0, n)
        for c in range(E):
            acc = acc | Mux(active[c], offs[c][:n], 0)
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
        # CE c's path from bank b: level n-1-k sets bit k of the source, at the switch whose index
        # has c's bits from k up and the source's bits below k. With every lower level right,
        # those are (off_c ^ b)'s; over the bank indices b that occur (low bits 0) they are
        # off_c's bits in low and any bits outside it. So the route holds iff every such switch
        # j flips bit k by c_k ^ off_c[k]: 2**k CEs per switch (c >> k == j >> k), no tracing.
        for k in range(n):
            level = sel[(n - 1 - k) * N:(n - k) * N]
            for j in range(N):
                for c in range(E):
                    if c >> k != j >> k:
                        continue
                    off = offs[c][:n]
                    hit = ((off ^ j) & low)[:k] == 0 if k else Const(1)
                    bad.append(active[c] & hit & (level[j] != (off[k] ^ ((c >> k) & 1))))
        return ~Cat(*bad).any()

    def _red_ok(self, m, f, active, group_active) -> Value:
        """The reduction network sums exactly the CEs of group ``g`` into port ``g * gk``
        (:func:`gen.design.isa._red_ok`): the set of CEs on every node, level by level."""
        E, N = self._cfg.num_ces, self._cfg.net_ports
        n = N.bit_length() - 1
        rm = f["red_mode"]
        cur = [Mux(active[p], Const(1 << p, N), 0) if p < E else Const(0, N) for p in range(N)]
        for s_ in range(n):
            nxt = [None] * N
            for p in range(N // 2):
                lo = ((p >> s_) << (s_ + 1)) | (p & ((1 << s_) - 1))
                hi = lo | (1 << s_)
                at = MODE_BITS * (s_ * N // 2 + p)
                a_, b_ = cur[lo], cur[hi]
                ml = Signal(N, name=f"redchk{s_}_{lo}")
                mh = Signal(N, name=f"redchk{s_}_{hi}")
                with m.Switch(rm[at:at + MODE_BITS]):
                    with m.Case(SwitchMode.PASS):
                        m.d.comb += [ml.eq(a_), mh.eq(b_)]
                    with m.Case(SwitchMode.SWAP):
                        m.d.comb += [ml.eq(b_), mh.eq(a_)]
                    with m.Case(SwitchMode.ADD_LEFT):
                        m.d.comb += [ml.eq(a_ | b_), mh.eq(0)]
                    with m.Case(SwitchMode.ADD_RIGHT):
                        m.d.comb += [ml.eq(0), mh.eq(a_ | b_)]
                nxt[lo], nxt[hi] = ml, mh
            cur = nxt
        bad = []
        for lg in range(E.bit_length()):
            size = 1 << lg
            for g in range(E // size):
                want = ((1 << size) - 1) << (g * size)
                bad.append((f["log_gk"] == lg) & group_active[g] & (cur[g * size] != want))
        return ~Cat(*bad).any()

    def _gemm_static(self, m, f, flow, offs) -> dict[str, Value]:
        """Stage 1b: the GEMM checks that need no maxima, on the fetched fields ``f``, the dataflow
        ``flow`` of :meth:`_dataflow` and stage 1a's registers ``offs`` (offsets, ``active``,
        ``group_active``): ``conflict`` (two active ports need one bank in one cycle; output rows
        that do not advance) and ``route_good`` (the networks route every active CE and operand
        blocks of a transposed operand are lane-aligned), for :meth:`_error` in the same cycle."""
        E, L = self._cfg.num_ces, self._cfg.lanes
        tr = {op: f["tr"][i] for i, op in enumerate(("a", "b", "o"))}
        active, group_active = offs["active"], offs["group_active"]
        aligned = [~tr[op] | ((f[f"{op}_base"] | f[f"{op}_sk"] | f[f"{op}_sl0"] | f[f"{op}_sl1"])[:L.bit_length() - 1] == 0)
                   for op in ("a", "b")] if L > 1 else []
        route_good = (self._dist_ok(m, f, "a", offs["a_off"], active) & self._dist_ok(m, f, "b", offs["b_off"], active)
                      & self._red_ok(m, f, active, group_active) & Cat(*aligned, Const(1)).all())
        blocks = {}
        for op in ("a", "b"):
            blocks[op] = [Signal.like(off, name=f"{op}_blk{c}") for c, off in enumerate(offs[f"{op}_off"])]
            for c, off in enumerate(offs[f"{op}_off"]):
                lb = L.bit_length() - 1
                m.d.comb += blocks[op][c].eq(Mux(tr[op], off >> lb << lb, off))
        conflict = (_conflict(self._cfg, blocks["a"], active, False) | _conflict(self._cfg, blocks["b"], active, False)
                    | _conflict(self._cfg, offs["o_off"], group_active, True)
                    | ((flow["out_rows"] > 1) & (f["o_sk"] == 0)))
        return {"gemm_conflict": conflict, "gemm_route_good": route_good}

    def _gemm_checks(self, m, f, d) -> Signal:
        """Stage 1b: the error code of a GEMM (:func:`gen.design.isa.check`), combinational on the
        fetched fields and stage 1b's grid, maxima and checks ``d`` (:meth:`_gemm_static`)."""
        E, geo = self._cfg.num_ces, self._geo
        L = self._cfg.lanes
        tr = {op: f["tr"][i] for i, op in enumerate(("a", "b", "o"))}
        # gk != 1, groups < L and ces > E on the grid's logarithms (:func:`_grid`)
        o_tr_bad = tr["o"] & ((f["log_gk"] != 0) | (d["log_groups"] < (L - 1).bit_length())) if L > 1 else Const(0)
        HALF, ACC = geo.unified_half_rows, geo.accum_rows
        err = Signal(ErrorCode, name="gemm_error")
        with m.If((f["mode"] > max(Dataflow)) | (d["log_ces"] >= E.bit_length()) | (f["K"] == 0) | (f["L0"] == 0)
                  | (f["L1"] == 0) | o_tr_bad):
            m.d.comb += err.eq(ErrorCode.BAD_SHAPE)
        with m.Elif(_at_least(d["a_max"], HALF) | _at_least(d["b_max"], HALF)):
            m.d.comb += err.eq(ErrorCode.UNIFIED_RANGE)
        with m.Elif(_at_least(d["o_acc_max"], ACC)):
            m.d.comb += err.eq(ErrorCode.ACCUM_RANGE)
        with m.Elif(flag(f["flags"], Flag.WB) & _at_least(d["o_wb_max"], HALF)):
            m.d.comb += err.eq(ErrorCode.UNIFIED_RANGE)
        with m.Elif(d["gemm_conflict"]):
            m.d.comb += err.eq(ErrorCode.BANK_CONFLICT)
        with m.Elif(~d["gemm_route_good"]):
            m.d.comb += err.eq(ErrorCode.ROUTE)
        return err

    def _move_checks(self, m, f, mx) -> Signal:
        """Stage 1b: the error code of a LOAD / STORE: ``K * banks`` rows, one chunk of ``banks``
        rows per cycle."""
        geo, lb = self._geo, self._cfg.banks.bit_length() - 1
        u_max, c_max = mx["move_u_max"], mx["move_acc_max"]
        is_store = f["opcode"] == Opcode.STORE
        # j * s (j < banks) hits distinct banks iff s is odd; reads of one row (s = 0) may share
        u_even = (f["a_sk"][0] == 0) if lb else Const(0)
        c_even = (f["o_sk"][0] == 0) if lb else Const(0)
        u_conf = Signal(name="move_u_conflict")
        c_conf = Signal(name="move_acc_conflict")
        m.d.comb += [u_conf.eq(u_even & (is_store | (f["a_sk"] != 0))),
                     c_conf.eq(c_even & (~is_store | (f["o_sk"] != 0)))]
        err = Signal(ErrorCode, name="move_error")
        with m.If(f["K"] == 0):
            m.d.comb += err.eq(ErrorCode.BAD_SHAPE)
        with m.Elif(_at_least(u_max, geo.unified_half_rows)):
            m.d.comb += err.eq(ErrorCode.UNIFIED_RANGE)
        with m.Elif(_at_least(c_max, geo.accum_rows)):
            m.d.comb += err.eq(ErrorCode.ACCUM_RANGE)
        with m.Elif(u_conf | c_conf):
            m.d.comb += err.eq(ErrorCode.BANK_CONFLICT)
        return err

    def _dma_checks(self, m, f, mx) -> Signal:
        """Stage 1b: the error code of a DMA instruction (:func:`gen.design.isa._check_dma`)."""
        geo = self._geo
        err = Signal(ErrorCode, name="dma_error")
        wait = f["mode"] == DmaMode.WAIT
        if not geo.dma_rows:
            # no DMA engine: every load / store is BAD_SHAPE (the top refuses such a configuration)
            m.d.comb += err.eq(Mux(wait, ErrorCode.NONE, ErrorCode.BAD_SHAPE))
            return err
        lr, lby = geo.dma_rows.bit_length() - 1, geo.dma_bytes.bit_length() - 1
        misaligned = Cat(f["a_sel"][:lby], f["a_base"][:lr], Const(0, 1)).any()
        bad = Signal(name="dma_bad_shape")
        m.d.comb += bad.eq((f["mode"] > max(DmaMode))
                           | (~wait & ((f["K"] == 0) | misaligned | (mx["dma_dram_end"] > (1 << DRAM_ADDR_BITS)))))
        with m.If(bad):
            m.d.comb += err.eq(ErrorCode.BAD_SHAPE)
        with m.Elif(~wait & (mx["dma_u_end"] > geo.unified_half_rows)):
            m.d.comb += err.eq(ErrorCode.UNIFIED_RANGE)
        return err

    def _vec_checks(self, m, f, mx) -> Signal:
        """Stage 1b: the error code of a VEC (:func:`gen.design.isa._check_vec`): ``K * V`` rows,
        ``V = vec_rows`` per cycle."""
        geo, lb = self._geo, self._cfg.banks.bit_length() - 1
        V = geo.vec_rows
        lv = max(V, 1).bit_length() - 1
        v_umax, v_amax, v_wmax = mx["vec_u_max"], mx["vec_acc_max"], mx["vec_w_max"]

        def v_conf(s_, writes):
            # j * s (j < V, V | banks) hits V distinct banks iff s mod 2**(lb - lv + 1) != 0
            if lv == 0:
                return Const(0)
            hit = s_[:lb - lv + 1] == 0
            return hit if writes else hit & (s_ != 0)

        v_wb = flag(f["flags"], Flag.WB)
        v_hazard = Signal(name="vec_hazard")
        m.d.comb += v_hazard.eq((((f["K"] << lv) > 1) & (f["o_sk"] == 0))
                                | (v_wb & ~((f["w_base"] == f["a_base"]) & (f["o_sk"] == f["a_sk"]))
                                   & (f["w_base"] <= v_umax) & (f["a_base"] <= v_wmax)))
        HALF, ACC = geo.unified_half_rows, geo.accum_rows
        err = Signal(ErrorCode, name="vec_error")
        with m.If((f["mode"] > max(VecOp)) | (f["K"] == 0) | Const(int(V == 0), 1)):
            m.d.comb += err.eq(ErrorCode.BAD_SHAPE)
        with m.Elif(_at_least(v_umax, HALF)):
            m.d.comb += err.eq(ErrorCode.UNIFIED_RANGE)
        with m.Elif(_at_least(v_amax, ACC)):
            m.d.comb += err.eq(ErrorCode.ACCUM_RANGE)
        with m.Elif(v_wb & _at_least(v_wmax, HALF)):
            m.d.comb += err.eq(ErrorCode.UNIFIED_RANGE)
        with m.Elif(v_conf(f["a_sk"], False) | v_conf(f["o_sk"], True) | v_hazard):
            m.d.comb += err.eq(ErrorCode.BANK_CONFLICT)
        return err


def _grid(m: Module, f, prefix: str, names=("gm", "gn", "gk")) -> dict[str, Signal]:
    """Of the CE grid of the fields ``log_gm``, ``log_gn``, ``log_gk``: the sides ``gm``, ``gn``,
    ``gk`` in ``names``, and the base-2 logarithms of the number of CEs and of reduction groups,
    ``log_ces`` and ``log_groups`` (combinational; keys and signal names start with ``prefix``).
    The checks compare the logarithms: ``2**s > E`` is ``s >= E.bit_length()``, a compare of
    a few bits instead of a carry chain as wide as ``2**s``."""
    out = {}
    for name in names:
        out[prefix + name] = Signal(range((1 << MAX_LOG_GRID) + 1), name=prefix + name)
        m.d.comb += out[prefix + name].eq(Const(1) << f[f"log_{name}"])
    for name, s_ in (("log_ces", f["log_gm"] + f["log_gn"] + f["log_gk"]), ("log_groups", f["log_gm"] + f["log_gn"])):
        out[prefix + name] = Signal(range(3 * MAX_LOG_GRID + 1), name=prefix + name)
        m.d.comb += out[prefix + name].eq(s_)
    return out


def _bit_terms(m: Module, cfg: FettaConfig, name: str, lgk, lgn, sr, sn, sm) -> list[Signal]:
    """Term ``i`` of the offsets: what bit ``i`` of a CE index adds, ``sr << i`` in the
    ``ik`` bits (``i < log_gk``), ``sn << (i - log_gk)`` in the ``in`` bits, else
    ``sm << (i - log_gk - log_gn)``."""
    out = []
    for i in range(max(1, (cfg.num_ces - 1).bit_length())):
        t = Signal(offset_bits(cfg), name=f"{name}{i}")
        m.d.comb += t.eq(Mux(lgk > i, sr << i, Mux(lgk + lgn > i, (sn << i) >> lgk, (sm << i) >> (lgk + lgn))))
        out.append(t)
    return out


def _conflict(cfg: FettaConfig, offs, act, writes: bool) -> Value:
    """Two active ports need one bank in one cycle: different rows of it, or (``writes``) any."""
    E, lb = cfg.num_ces, cfg.banks.bit_length() - 1
    bits = []
    for c in range(E):
        for d in range(c + 1, E):
            same_bank = offs[c][:lb] == offs[d][:lb] if lb else Const(1)
            clash = same_bank if writes else (same_bank & (offs[c] != offs[d]))
            bits.append(act[c] & act[d] & clash)
    return Cat(*bits).any() if bits else Const(0)


def _products(cfg: FettaConfig, geo: Geometry, f, grid, flow) -> dict[str, Value]:
    """Stage 1a: every product of a loop bound and a stride that :func:`_maxima` adds up
    (``t_<operand>_<loop>``; combinational on the fields ``f``, the grid and the dataflow of
    the same word). Products of a zero loop bound go negative; they only matter after the
    ``BAD_SHAPE`` check that such a bound fails first."""
    gm, gn, gk = grid["r_gm"], grid["r_gn"], grid["r_gk"]
    kb = {"a": f["K"], "b": Mux(flow["stationary"], flow["loads"], f["K"]), "o": flow["out_rows"]}
    out = {}
    for op in ("a", "b", "o"):
        out[f"t_{op}_k"] = (kb[op] - 1) * f[f"{op}_sk"]
        out[f"t_{op}_l0"] = (f["L0"] - 1) * f[f"{op}_sl0"]
        out[f"t_{op}_l1"] = (f["L1"] - 1) * f[f"{op}_sl1"]
        out[f"t_{op}_m"] = (gm - 1) * f[f"{op}_sm"]
        out[f"t_{op}_n"] = (gn - 1) * f[f"{op}_sn"]
        if op != "o":
            out[f"t_{op}_r"] = (gk - 1) * f[f"{op}_sr"]
    lb = cfg.banks.bit_length() - 1
    lv = max(geo.vec_rows, 1).bit_length() - 1
    for kind, shift in (("move", lb), ("vec", lv)):
        rows_m1 = (f["K"] << shift) - 1
        # one row per K (one bank, one vector row): the A product is GEMM's own ``t_a_k``; built
        # twice, Yosys merges the two multipliers in some netlists and not in others
        out[f"t_{kind}_a"] = out["t_a_k"] if shift == 0 else rows_m1 * f["a_sk"]
        out[f"t_{kind}_o"] = rows_m1 * f["o_sk"]
    return out

def _maxima(m: Module, cfg: FettaConfig, geo: Geometry, f, t) -> dict[str, Signal]:
    """Stage 1b: the largest row each access of the instruction reaches, for the range checks
    of every opcode: sums of the fields and stage 1a's products ``t`` (:func:`_products`), for the
    error code of the same cycle (``a_max``, ``b_max``, ``o_wb_max`` registered as outputs too)."""
    L = cfg.lanes
    HALF, ACC = geo.unified_half_rows, geo.accum_rows
    tr = {op: f["tr"][i] for i, op in enumerate(("a", "b", "o"))}

    def tmax(op):
        return [t[f"t_{op}_k"], t[f"t_{op}_l0"], t[f"t_{op}_l1"]]

    def last(op):
        # a transposed operand reads whole blocks of lanes rows
        span = _capped(m, f"d_{op}_span", [t[f"t_{op}_m"], t[f"t_{op}_n"], t[f"t_{op}_r"]], HALF)
        return span | Mux(tr[op], L - 1, 0)

    # exact below the limit each is checked against, else at least that limit (:func:`_capped`)
    out = {}
    out["d_a_max"] = _capped(m, "d_a_max", [f["a_base"], *tmax("a"), last("a")], HALF)
    out["d_b_max"] = _capped(m, "d_b_max", [f["b_base"], *tmax("b"), last("b")], HALF)
    o_max = _capped(m, "d_o_max", [*tmax("o"), t["t_o_m"], t["t_o_n"]], max(HALF, ACC))
    out["d_o_acc_max"] = _capped(m, "d_o_acc_max", [f["o_base"], o_max], ACC)
    out["d_o_wb_max"] = _capped(m, "d_o_wb_max", [f["w_base"], o_max], HALF)
    out["d_move_u_max"] = _capped(m, "d_move_u_max", [f["a_base"], t["t_move_a"]], HALF)
    out["d_move_acc_max"] = _capped(m, "d_move_acc_max", [f["o_base"], t["t_move_o"]], ACC)
    out["d_vec_u_max"] = _capped(m, "d_vec_u_max", [f["a_base"], t["t_vec_a"]], HALF)
    out["d_vec_acc_max"] = _capped(m, "d_vec_acc_max", [f["o_base"], t["t_vec_o"]], ACC)
    out["d_vec_w_max"] = _capped(m, "d_vec_w_max", [f["w_base"], t["t_vec_o"]], HALF)
    if geo.dma_rows:
        # DMA: the DRAM byte and the unified row past the transfer's end
        lr, lby = geo.dma_rows.bit_length() - 1, geo.dma_bytes.bit_length() - 1
        out["d_dma_dram_end"] = _exact(m, "d_dma_dram_end", f["a_sel"] + (f["K"] << lby))
        out["d_dma_u_end"] = _exact(m, "d_dma_u_end", f["a_base"] + (f["K"] << lr))
    return out
