"""Address sequencers of the controller: the counters that walk an instruction's loops.

:class:`hdl.top.Fetta` starts one of them in the CHECK cycle of an instruction (``start``)
and leaves the execution state when it reports the end. Each holds the loop counters
and the temporal part of the row addresses (``base + temporal``); the top adds the
spatial offsets and routes the rows to the memory banks.

* :class:`GemmIssue`: the GEMM's tile loops on the issue side (IA / IB vectors and
  IB loads), with the stream flags the TCU needs;
* :class:`OutputSequencer`: the GEMM's output rows, one per beat of the reduction network;
* :class:`ChunkSequencer`: ``LOAD`` / ``STORE`` and ``VEC``: ``rows`` rows per cycle,
  ``K`` cycles, with the addresses delayed along the datapath's pipeline.

The inputs of :class:`ChunkSequencer` are quasi-static: the decoder's fields of the instruction,
held for its whole execution. :class:`GemmIssue` and :class:`OutputSequencer` sample theirs at
``start``: the controller decodes the next instruction while a GEMM issues and drains. Addresses are
:data:`gen.design.isa.ADDR_BITS` wide and wrap there; the decoder's checks guarantee
that every address an instruction uses fits.
"""

from __future__ import annotations

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.design.config import FettaConfig
from gen.design.isa import ADDR_BITS, BOUND_BITS, STRIDE_BITS
from hdl.pipe import delay, hold

__all__ = ["GemmIssue", "OutputSequencer", "ChunkSequencer", "tile_step_shape"]


def tile_step_shape(config: FettaConfig) -> range:
    """Shape of the per-tile constants ``loads`` and ``vec_delay`` (at most ``max(ce_rows, ce_cols)``)."""
    return range(max(config.ce_rows, config.ce_cols) + 1)


def _strides(op: str, levels: tuple[str, ...]) -> dict[str, In]:
    return {f"{op}_s{lv}": In(STRIDE_BITS) for lv in levels}


class GemmIssue(wiring.Component):
    """Issue side of a GEMM: which vector every cycle of a tile reads, and where.

    Tiles come in groups of ``q`` (:func:`gen.design.isa.interleave`: OS ``add_latency``, IS/WS
    1), ``l0`` inner, ``l1`` outer; groups start every ``period`` cycles
    (:func:`gen.design.isa.tile_period`). Two walkers, one per stream, each with its own tile
    counters:

    * the **IB walker** starts in the cycle after ``start``: per group, OS streams ``q * K`` IB
      vectors, IS/WS makes ``loads`` IB loads (the stationary tile, into the CEs' shadow);
    * the **IA walker** starts ``vec_delay`` cycles later (IS/WS; OS: together) and streams
      ``q * K`` IA vectors per group.

    Within a group, cycle ``c = k * q + i`` carries vector ``k`` of the group's tile ``i`` (OS:
    the PEs' accumulation loop of ``add_latency`` cycles, :class:`hdl.pe.PE`); a partial last
    group leaves the slots of missing tiles empty. In IS/WS the loads of tile ``i + 1`` overlap
    the vectors of tile ``i`` (they start with its first vector, the ``swap`` that retires the
    shadow tile: :class:`hdl.ce.CE`), so the period is ``max(K, loads)`` instead of ``loads``,
    then ``K`` (and at least ``add_latency``: the accumulation unit's read-modify-write of an
    ``ACC_L0`` tile's rows). The temporal address of operand ``x`` is ``x_base + l1 * x_sl1 + l0 * x_sl0 + k *
    x_sk`` (``k`` counts that operand's vectors or loads in the tile): the first ``q`` cycles of
    a group take the tiles' start addresses from the tile counters, later cycles the address of
    ``q`` cycles before plus ``x_sk`` (a delay line of ``q - 1`` registers).

    Ports
    -----
    start : In(1)
        Load the bases and start the first tile in the next cycle (the GEMM's CHECK cycle); the
        other inputs are sampled with it, so the controller decodes the next instruction while
        this one issues, and may start it in the cycle of ``done``.
    K, L0, L1 : In(BOUND_BITS); stationary : In(1); loads, vec_delay : In(tile_step_shape)
        Loop bounds and the dataflow's tile shape (decoder outputs).
    a_base, b_base : In(ADDR_BITS); a_sk, a_sl0, a_sl1, b_sk, b_sl0, b_sl1 : In(STRIDE_BITS)
    a_row, b_row : Out(ADDR_BITS)
        Temporal row address of this cycle's IA / IB access (registers).
    ia_go, ib_go, first, last, swap : Out(1); ib_index : Out(range(lanes)); a_bidx, b_bidx : Out(range(banks))
        This cycle's stream flags and the bank index of the temporal addresses, registered:
        they are valid **one cycle later**, with the memory's read data (the TCU's inputs
        of the same names, see :class:`hdl.tcu.TCU`).
    busy : Out(1)
        From the cycle after ``start`` to the cycle of ``done``: the GEMM issues (its IA walker
        runs or waits for its first vector).
    done : Out(1)
        The last cycle of the IA walker's last group (combinational, but a gate of registers: the
        controller's ``start`` depends on it, and fans out to every sequencer): the GEMM has issued
        (:func:`gen.design.control.issue_cycles` after ``start``); the IB walker ended no later.
    guard : Out(...)
        OS: cycles until a tile of depth 1 started now could end without its Psums meeting the
        last group's in the CEs' drain registers (a register: ``add_latency * (K - 1 + ce_rows) - 2``
        loaded at a group's first vector, counting down to 0; 0 in IS/WS). A next OS GEMM of depth
        ``K'`` may start when ``add_latency * (K' - 1) >= guard`` (:class:`gen.design.control.Clock`).
    guard_next : Out(...)
        The value ``guard`` takes in the next cycle (combinational, on registers only), for a
        comparison the controller registers.
    """

    def __init__(self, config: FettaConfig):
        self._rows = config.ce_rows
        self._min_loads = min(config.ce_rows, config.ce_cols)
        self._slots = config.add_latency
        steps = tile_step_shape(config)
        super().__init__({
            "start": In(1), "stationary": In(1), "loads": In(steps), "vec_delay": In(steps),
            "K": In(BOUND_BITS), "L0": In(BOUND_BITS), "L1": In(BOUND_BITS),
            "a_base": In(ADDR_BITS), "b_base": In(ADDR_BITS),
            **_strides("a", ("k", "l0", "l1")), **_strides("b", ("k", "l0", "l1")),
            "a_row": Out(ADDR_BITS), "b_row": Out(ADDR_BITS),
            "ia_go": Out(1), "ib_go": Out(1), "first": Out(1), "last": Out(1), "swap": Out(1),
            "ib_index": Out(range(config.lanes)),
            "a_bidx": Out(range(config.banks)), "b_bidx": Out(range(config.banks)), "done": Out(1), "busy": Out(1),
            "guard": Out(BOUND_BITS + config.add_latency.bit_length() + 1),
            "guard_next": Out(BOUND_BITS + config.add_latency.bit_length() + 1),
        })

    def _walker(self, m, h, now, op: str, start, window, done=None):
        """Tile counters and addresses of operand ``op``: ``window`` accesses at the start of every
        group of ``q`` tiles (``held_period_m1 + 1`` cycles) from the cycle after ``start``; drives
        ``done`` (if given) in the last cycle of the last group. ``now(key)`` is a held field, or
        the field being sampled in the cycle of :attr:`start`. Returns (access this cycle, cycle
        in the group, issuing)."""
        width = len(h["period_m1"])
        issuing = Signal(name=f"{op}_issuing")
        pcnt = Signal(width, name=f"{op}_pcnt")          # cycle within the group
        # flags of the next cycle's state, registered so that ``done`` (on which the controller's
        # start depends, the start fanning out to every sequencer) is a gate of registers:
        # pcnt == period_m1, pcnt < q, and the tile counters at the last tile (tiles left)
        at_end = Signal(name=f"{op}_at_end")
        in_head = Signal(name=f"{op}_in_head")
        final = Signal(name=f"{op}_final")
        l0 = Signal(BOUND_BITS, name=f"{op}_l0")
        l1 = Signal(BOUND_BITS, name=f"{op}_l1")
        more = Signal(name=f"{op}_more")                 # tiles left for the tile counters
        slot = Signal(name=f"{op}_slot")                 # this cycle's tile exists
        # start of the l1 iteration, of the next tile, and this cycle's row
        r_l1, r_t = Signal(ADDR_BITS, name=f"t{op}_l1"), Signal(ADDR_BITS, name=f"t{op}_t")
        row = getattr(self, f"{op}_row")
        go = Signal(name=f"{op}_go")
        m.d.comb += go.eq(issuing & slot & (pcnt < window))
        stride = {lv: h[f"{op}_s{lv}"] for lv in ("k", "l0", "l1")}
        # this cycle's access, q cycles later (the same tile's next vector): a delay line
        step = Signal(ADDR_BITS, name=f"{op}_step")
        m.d.comb += step.eq(row + stride["k"])
        later, later_slot = step, slot
        if self._slots > 1:
            lag_row = delay(m, step, self._slots - 1, f"{op}_lag")
            lag_slot = delay(m, slot, self._slots - 1, f"{op}_lag_slot")
            later = Mux(h["stationary"], step, lag_row)
            later_slot = Mux(h["stationary"], slot, lag_slot)
        # the tile counters step once per tile, in the first q cycles of a group (combinational
        # on the registers only: the controller's start may depend on done)
        n_more, n_t = Signal(name=f"{op}_n_more"), Signal(ADDR_BITS, name=f"{op}_n_t")
        tile_step = Signal(name=f"{op}_tile_step")
        l0_wrap = Signal(name=f"{op}_l0_wrap")
        nxt = r_l1 + stride["l1"]
        m.d.comb += [n_t.eq(r_t), tile_step.eq(in_head & more), l0_wrap.eq(l0 == h["L0_m1"]),
                     n_more.eq(more & ~(tile_step & final))]
        with m.If(tile_step):
            with m.If(l0_wrap):
                m.d.comb += n_t.eq(nxt)
            with m.Else():
                m.d.comb += n_t.eq(r_t + stride["l0"])
        last = Signal(name=f"{op}_last_cycle")
        m.d.comb += last.eq(issuing & at_end & ~n_more)
        if done is not None:
            m.d.comb += done.eq(last)
        with m.If(start):
            # the IA walker of IS/WS starts after the cycle of start, from the sampled base
            m.d.sync += [issuing.eq(1), pcnt.eq(0), l0.eq(0), l1.eq(0), more.eq(1), slot.eq(1),
                         r_l1.eq(now(f"{op}_base")), r_t.eq(now(f"{op}_base")), row.eq(now(f"{op}_base")),
                         at_end.eq(now("period_1")), in_head.eq(1), final.eq(now("single"))]
        with m.Elif(issuing):
            with m.If(tile_step):
                with m.If(l0_wrap):
                    m.d.sync += [l0.eq(0), l1.eq(l1 + 1), r_l1.eq(nxt),
                                 final.eq(n_more & h["L0_1"] & (l1 + 1 == h["L1_m1"]))]
                with m.Else():
                    m.d.sync += [l0.eq(l0 + 1), final.eq(more & (l0 + 1 == h["L0_m1"]) & (l1 == h["L1_m1"]))]
            # (pcnt + 1 == period_m1 and pcnt + 1 < q without an adder: compares with held values)
            m.d.sync += [more.eq(n_more), r_t.eq(n_t), pcnt.eq(pcnt + 1),
                         at_end.eq(Mux(at_end, h["period_1"], pcnt == h["period_m2"]))]
            # the next cycle's access: a tile's start in the first q cycles of a group, else lagged
            n_head = Signal(name=f"{op}_n_head")
            os_head = (~h["stationary"] & (pcnt < self._slots - 1)) if self._slots > 1 else Const(0)
            m.d.comb += n_head.eq(at_end | os_head)
            m.d.sync += in_head.eq(n_head)
            with m.If(n_head):
                m.d.sync += [row.eq(n_t), slot.eq(n_more)]
            with m.Else():
                m.d.sync += [row.eq(later), slot.eq(later_slot)]
            with m.If(at_end):
                m.d.sync += pcnt.eq(0)
            with m.If(last):
                m.d.sync += issuing.eq(0)
        return go, pcnt, issuing

    def elaborate(self, platform):
        m = Module()
        # the fields, sampled at start: the cycle of start may be the last one of the previous GEMM
        strides = [f"{op}_s{lv}" for op in "ab" for lv in ("k", "l0", "l1")]
        names = ("L0", "L1", "stationary", "a_base", "b_base", *strides)
        S = self._slots
        K, st, nload = self.K, self.stationary, self.loads
        # and the loop constants derived from them, computed from the decoder's registers in the
        # cycle of start and held, so no multiply or subtract sits between a counter and the next
        # cycle's state while the GEMM issues (the controller's former critical path):
        # q * K vectors per group; period max(K, loads, add_latency) (IS/WS) or q * max(K, ce_rows)
        # (OS: the Psum registers drain one row per cycle); the guard a group's first vector loads
        width = BOUND_BITS + S.bit_length()
        os_span = Mux(K > self._rows, K, self._rows)
        st_span = Mux(K > nload, K, nload)
        if S > self._min_loads:
            # the accumulation unit's read-modify-write: ACC_L0 tiles add to the same rows
            st_span = Mux(st_span > S, st_span, S)
        qk = Mux(st, K, K * S)[:width]
        period = Mux(st, st_span, os_span * S)
        derived = {
            "qk": qk,
            "b_window": Mux(st, nload, qk)[:width],
            "period_m1": (period - 1)[:width], "period_m2": (period - 2)[:width],
            "last_from": (qk - Mux(st, 1, S))[:width],
            "L0_m1": (self.L0 - 1)[:BOUND_BITS], "L1_m1": (self.L1 - 1)[:BOUND_BITS],
            "guard_init": (S * (K - 1) + S * self._rows - 2)[:len(self.guard)],
        }
        # and the walkers' flags for a first cycle: one-cycle groups, one tile along l0 / in all
        derived |= {"period_1": derived["period_m1"] == 0, "L0_1": self.L0 == 1,
                    "single": (self.L0 == 1) & (self.L1 == 1)}
        sources = {**{name: getattr(self, name) for name in names}, **derived}
        h = hold(m, self.start, sources, "held_")

        def now(key):
            return Mux(self.start, sources[key], h[key])
        st = h["stationary"]
        # tiles per group: 1 (IS/WS) or add_latency (OS, the PEs' accumulation loop)
        q = Signal(range(S + 1), name="q")
        m.d.comb += q.eq(Mux(st, 1, S))
        # IS/WS: the IA walker starts vec_delay cycles after the IB walker
        a_wait = Signal.like(self.vec_delay, name="a_wait")
        a_start = Signal(name="a_start")
        m.d.comb += a_start.eq((self.start & ~self.stationary) | (a_wait == 1))
        with m.If(self.start):
            m.d.sync += a_wait.eq(Mux(self.stationary, self.vec_delay, 0))
        with m.Elif(a_wait != 0):
            m.d.sync += a_wait.eq(a_wait - 1)
        a_go, a_pcnt, a_issuing = self._walker(m, h, now, "a", a_start, h["qk"], done=self.done)
        m.d.comb += self.busy.eq(a_issuing | (a_wait != 0))
        # OS: a group's tiles end q * (K - 1) cycles after its start and drain q * ce_rows rows;
        # guard = cycles until a next tile of depth 1 may end (the drain registers are free)
        group_start = a_go & (a_pcnt == 0)
        m.d.comb += self.guard_next.eq(self.guard)
        with m.If(group_start & ~st):
            m.d.comb += self.guard_next.eq(h["guard_init"])
        with m.Elif(group_start):
            m.d.comb += self.guard_next.eq(0)
        with m.Elif(self.guard != 0):
            m.d.comb += self.guard_next.eq(self.guard - 1)
        m.d.sync += self.guard.eq(self.guard_next)
        b_go, b_pcnt, _ = self._walker(m, h, now, "b", self.start, h["b_window"])
        m.d.sync += [self.ia_go.eq(a_go), self.ib_go.eq(b_go), self.first.eq(a_pcnt < q),
                     self.last.eq(a_pcnt >= h["last_from"]), self.swap.eq(a_pcnt == 0),
                     self.ib_index.eq(b_pcnt[:len(self.ib_index)]),
                     self.a_bidx.eq(self.a_row[:len(self.a_bidx)]), self.b_bidx.eq(self.b_row[:len(self.b_bidx)])]
        return m


class OutputSequencer(wiring.Component):
    """Output rows of a GEMM, in the order the reduction network delivers them.

    Every ``valid`` beat is one result row of every group: row ``r`` of tile
    ``(l1, l0)`` goes to ``o_base + l1 * o_sl1 + l0 * o_sl0 + r * o_sk`` (plus the group's
    spatial offset, added by the top). A tile has ``rows`` result rows
    (:func:`gen.design.isa.out_rows`). The tiles come in groups of up to ``q`` (OS:
    ``add_latency``, IS/WS: 1; :class:`GemmIssue`); a group delivers row 0 of each of its
    ``n`` tiles, then row 1 of each, and so on. Rows 0 take the tile's start from the tile
    counters; row ``r + 1`` of a tile is row ``r`` plus ``o_sk``, kept per tile in a slot
    register (none when ``add_latency`` is 1).

    Ports
    -----
    start : In(1)
        Restart at row 0 of the first tile (the GEMM's CHECK cycle); wins over ``valid``. The other
        inputs but ``valid`` are sampled with it and held until the next ``start``, so the
        controller may decode the next instruction while this GEMM drains.
    valid : In(1)
        A result row arrives (the reduction network's ``red_valid``).
    stationary : In(1)
        IS/WS: one tile per group.
    rows, L0, L1 : In(BOUND_BITS); o_base : In(ADDR_BITS); o_sk, o_sl0, o_sl1 : In(STRIDE_BITS)
    row : Out(ADDR_BITS)
        Temporal output row address of this cycle's beat (register).
    final : Out(1)
        This beat is the GEMM's last row (combinational on ``valid``).
    later_l0 : Out(1)
        This beat belongs to a tile with ``l0 > 0`` (for ``ACC_L0``; register).
    """

    def __init__(self, config: FettaConfig):
        self._slots = config.add_latency
        super().__init__({
            "start": In(1), "valid": In(1), "stationary": In(1), "rows": In(BOUND_BITS),
            "L0": In(BOUND_BITS), "L1": In(BOUND_BITS),
            "o_base": In(ADDR_BITS), **_strides("o", ("k", "l0", "l1")),
            "row": Out(ADDR_BITS), "final": Out(1), "later_l0": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        names = ("o_sk", "o_sl0", "o_sl1", "stationary")
        # sampled at start, the loop bounds as ``bound - 1`` (no subtract behind the counters' compares)
        held = hold(m, self.start, {**{name: getattr(self, name) for name in names},
                                    **{f"{b}_m1": (getattr(self, b) - 1)[:BOUND_BITS] for b in ("rows", "L0", "L1")}},
                    "held_")
        S = self._slots
        d_row = Signal(BOUND_BITS, name="d_row")
        to_l0 = Signal(BOUND_BITS, name="to_l0")
        to_l1 = Signal(BOUND_BITS, name="to_l1")
        more = Signal(name="to_more")                  # tiles left for the tile counters
        to_l1a = Signal(ADDR_BITS, name="to_l1a")      # start of the l1 iteration
        to_t = Signal(ADDR_BITS, name="to_t")          # start of the next tile
        to_r = self.row
        # the tile counters after this beat's step (a row-0 beat takes the next tile)
        n_more, n_t, n_l0nz = Signal(name="n_more"), Signal(ADDR_BITS, name="n_t"), Signal(name="n_l0nz")
        m.d.comb += [n_more.eq(more), n_t.eq(to_t), n_l0nz.eq(to_l0 != 0)]
        with m.If(d_row == 0):
            with m.If(to_l0 == held["L0_m1"]):
                nxt = to_l1a + held["o_sl1"]
                m.d.comb += [n_t.eq(nxt), n_l0nz.eq(0), n_more.eq(to_l1 != held["L1_m1"])]
            with m.Else():
                m.d.comb += [n_t.eq(to_t + held["o_sl0"]), n_l0nz.eq(1)]
        last_row = d_row == held["rows_m1"]
        step = Signal(ADDR_BITS, name="o_step")
        m.d.comb += step.eq(to_r + held["o_sk"])
        if S == 1:
            last_slot = Signal(name="last_slot")
            m.d.comb += last_slot.eq(1)
        else:
            slot = Signal(range(S), name="slot")            # tile of the group
            n = Signal(range(S + 1), name="n")              # tiles in the group (known after row 0)
            q = Mux(held["stationary"], 1, S)
            slot_row = [Signal(ADDR_BITS, name=f"slot_row{i}") for i in range(S)]
            slot_l0nz = [Signal(name=f"slot_l0nz{i}") for i in range(S)]
            last_slot = Signal(name="last_slot")
            # row 0: the group ends where the tiles or the slots end
            m.d.comb += last_slot.eq(Mux(d_row == 0, ~n_more | (slot == q - 1), slot == n - 1))
        m.d.comb += [self.final.eq(self.valid & last_row & last_slot & ~n_more)]
        with m.If(self.start):
            m.d.sync += [d_row.eq(0), to_l0.eq(0), to_l1.eq(0), more.eq(1), self.later_l0.eq(0),
                         to_l1a.eq(self.o_base), to_t.eq(self.o_base), to_r.eq(self.o_base)]
            if S > 1:
                m.d.sync += slot.eq(0)
        with m.Elif(self.valid):
            with m.If(d_row == 0):
                with m.If(to_l0 == held["L0_m1"]):
                    m.d.sync += [to_l0.eq(0), to_l1.eq(to_l1 + 1), to_l1a.eq(n_t)]
                with m.Else():
                    m.d.sync += to_l0.eq(to_l0 + 1)
                m.d.sync += [to_t.eq(n_t), more.eq(n_more)]
            if S == 1:
                # one tile per group: its next row, or the next tile's first
                with m.If(last_row):
                    m.d.sync += [d_row.eq(0), to_r.eq(n_t), self.later_l0.eq(n_l0nz)]
                with m.Else():
                    m.d.sync += [d_row.eq(d_row + 1), to_r.eq(step)]
            else:
                with m.Switch(slot):
                    for i in range(S):
                        with m.Case(i):
                            m.d.sync += slot_row[i].eq(step)
                            with m.If(d_row == 0):
                                m.d.sync += slot_l0nz[i].eq(self.later_l0)
                with m.If(d_row == 0):
                    m.d.sync += n.eq(slot + 1)
                with m.If(last_slot):
                    m.d.sync += slot.eq(0)
                    with m.If(last_row):
                        # the next group's first tile
                        m.d.sync += [d_row.eq(0), to_r.eq(n_t), self.later_l0.eq(n_l0nz)]
                    with m.Else():
                        # row r + 1 of the group's first tile (the only one: this beat's own step)
                        m.d.sync += d_row.eq(d_row + 1)
                        with m.If(slot == 0):
                            m.d.sync += to_r.eq(step)
                        with m.Else():
                            m.d.sync += [to_r.eq(slot_row[0]), self.later_l0.eq(slot_l0nz[0])]
                with m.Else():
                    m.d.sync += slot.eq(slot + 1)
                    with m.If(d_row == 0):
                        # row 0 of the next tile
                        m.d.sync += [to_r.eq(n_t), self.later_l0.eq(n_l0nz)]
                    with m.Else():
                        with m.Switch(slot):
                            for i in range(S - 1):
                                with m.Case(i):
                                    m.d.sync += [to_r.eq(slot_row[i + 1]), self.later_l0.eq(slot_l0nz[i + 1])]
        return m


class ChunkSequencer(wiring.Component):
    """``chunks`` cycles of ``rows`` rows each: the row walk of ``LOAD`` / ``STORE`` and ``VEC``.

    Row ``i = c * rows + j`` (chunk ``c``, ``j < rows``) of the instruction is unified row
    ``u_base + i * u_stride`` and accumulation row ``a_base + i * a_stride``; chunk ``c``
    is issued in the ``c``-th cycle after ``start``. The datapath behind it is a pipeline
    of ``stages`` registers, so the sequencer delays the chunk's addresses and flags with
    it: index ``s`` of ``valid``, ``last``, ``u_addr`` and ``a_addr`` is the chunk issued
    ``s`` cycles ago (``s = 0``: this cycle's; its row addresses are registers, one per row, loaded
    at ``start`` and stepped by ``rows * stride`` per chunk).

    Parameters
    ----------
    rows : int
        Rows per chunk, a power of two (``banks`` for a move, ``vec_rows`` for ``VEC``).
    stages : int
        Pipeline depth after the issue (1 for a move, 2 for ``VEC``).
    u_stages : int, optional
        Stages that carry the unified address (default ``stages``; ``VEC`` reads its unified
        operand at stage 1 and writes through the accumulation address, so it needs 1).

    Ports
    -----
    start : In(1)
        Load the bases (the instruction's CHECK cycle); chunk 0 is issued in the next cycle.
    chunks : In(BOUND_BITS); u_base, a_base : In(ADDR_BITS); u_stride, a_stride : In(STRIDE_BITS)
    valid, last : Out(1).array(stages + 1)
        A chunk is at stage ``s``; it is the instruction's last one.
    u_addr, a_addr : Out(ADDR_BITS).array(u_stages + 1, rows), Out(ADDR_BITS).array(stages + 1, rows)
        The unified / accumulation row address of row ``j`` of the chunk at stage ``s``.
    """

    def __init__(self, *, rows: int, stages: int, u_stages: int | None = None):
        if not isinstance(rows, int) or rows < 1 or rows & (rows - 1):
            raise ValueError(f"rows must be a power of two, not {rows!r}")
        if not isinstance(stages, int) or stages < 0:
            raise ValueError(f"stages must be a non-negative integer, not {stages!r}")
        u_stages = stages if u_stages is None else u_stages
        if not isinstance(u_stages, int) or not 0 <= u_stages <= stages:
            raise ValueError(f"u_stages must be an integer in 0..{stages}, not {u_stages!r}")
        self._rows, self._stages, self._u_stages = rows, stages, u_stages
        super().__init__({
            "start": In(1), "chunks": In(BOUND_BITS), "u_base": In(ADDR_BITS), "a_base": In(ADDR_BITS),
            "u_stride": In(STRIDE_BITS), "a_stride": In(STRIDE_BITS),
            "valid": Out(1).array(stages + 1), "last": Out(1).array(stages + 1),
            "u_addr": Out(ADDR_BITS).array(u_stages + 1, rows), "a_addr": Out(ADDR_BITS).array(stages + 1, rows),
        })

    @property
    def busy(self):
        """Chunks are being issued (``valid[0]``)."""
        return self.valid[0]

    def elaborate(self, platform):
        m = Module()
        rows, lr = self._rows, self._rows.bit_length() - 1
        busy = self.busy
        count = Signal(BOUND_BITS, name="count")
        # stage 0's row addresses are registers (the memories' address crossbars start from them):
        # loaded at start with base + j * stride, then advanced by rows * stride per chunk
        u_row = [Signal(ADDR_BITS, name=f"u_row{j}") for j in range(rows)]
        a_row = [Signal(ADDR_BITS, name=f"a_row{j}") for j in range(rows)]
        m.d.comb += self.last[0].eq(busy & (count == self.chunks - 1))
        for j in range(rows):
            m.d.comb += [self.u_addr[0][j].eq(u_row[j]), self.a_addr[0][j].eq(a_row[j])]
        for s in range(1, self._stages + 1):
            m.d.sync += [self.valid[s].eq(self.valid[s - 1]), self.last[s].eq(self.last[s - 1])]
            for j in range(rows):
                m.d.sync += self.a_addr[s][j].eq(self.a_addr[s - 1][j])
                if s <= self._u_stages:
                    m.d.sync += self.u_addr[s][j].eq(self.u_addr[s - 1][j])
        for rows_, base, stride in ((u_row, self.u_base, self.u_stride), (a_row, self.a_base, self.a_stride)):
            for j, row in enumerate(rows_):    # one adder per row: base + j * stride, or row + rows * stride
                with m.If(self.start | busy):
                    m.d.sync += row.eq(Mux(self.start, base, row) + Mux(self.start, j * stride, stride << lr))
        with m.If(self.start):
            m.d.sync += [busy.eq(1), count.eq(0)]
        with m.Elif(busy):
            m.d.sync += count.eq(count + 1)
            with m.If(self.last[0]):
                m.d.sync += busy.eq(0)
        return m
