"""The output side of the GEMMs in flight: one drains while the next one issues.

A GEMM's result rows leave the reduction network up to :func:`gen.design.isa.gemm_latency` cycles
after its last vector. The controller (:class:`hdl.top.Fetta`) fetches and starts the next
instruction meanwhile (:mod:`gen.design.control`), so the fields the output rows still need are
taken, when a GEMM starts, into one of two *contexts*; the result rows go to the oldest (the head).
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.design.config import FettaConfig
from gen.design.isa import ADDR_BITS, BOUND_BITS, LOG_GRID_BITS, STRIDE_BITS, CEMode

from hdl.controller import offset_bits
from hdl.pipe import delay, hold
from hdl.red_net import mode_word_bits
from hdl.sequencer import OutputSequencer

__all__ = ["DrainQueue"]

#: fields of a context the write side reads from the head (besides ``o_off``, a list per group)
_HEAD = ("group_active", "acc", "acc_l0", "wb", "w_base", "o_base")
#: the TCU's settings that matter while rows drain: the same for every GEMM in flight
_TCU = ("ce_mode", "red_mode", "log_gk", "active", "o_tr")


class DrainQueue(wiring.Component):
    """Two output contexts of GEMMs in flight (module docstring).

    Ports
    -----
    start : In(1)
        A GEMM starts (its CHECK cycle): its fields below are taken into the free context, which
        becomes the head when the other one has drained. Only when :attr:`overlap` or :attr:`idle`.
    rows, L0, L1, o_base, o_sk, o_sl0, o_sl1, stationary : In
        The :class:`~hdl.sequencer.OutputSequencer`'s fields.
    o_off : In(offset_bits).array(num_ces); group_active : In(num_ces); acc, acc_l0, wb : In(1);
    w_base, wb_max : In(ADDR_BITS)
        The output offsets per group, the flags and the write-back range ``[w_base, wb_max]``.
    ce_mode, red_mode, log_gk, active, o_tr : In
        The TCU's settings of the GEMM (the decoder's; ``o_tr`` the ``tr`` bit of the reduction network).
    a_base_next, a_max_next, b_base_next, b_max_next : In(ADDR_BITS); <setting>_next : In
        The unified rows the decoded GEMM reads (for the write-back hazard) and its TCU settings, as
        of the next cycle (the decoder's ``*_next``: :attr:`overlap` is registered).
    valid : In(1)
        A result row arrives (the reduction network's ``red_valid``): it belongs to the head.
    row, later_l0 : Out
        The head's :class:`~hdl.sequencer.OutputSequencer` outputs; the head's final row ends it
        (the other context is the head from the next cycle).
    h_<field> : Out
        The head's ``o_off``, ``group_active``, ``acc``, ``acc_l0``, ``wb``, ``w_base``, ``o_base``.
    t_<setting> : Out
        The TCU settings of the last GEMM started (registers, from the cycle after ``start``).
    idle : Out(1)
        No GEMM in flight: every context has written its final row (from the cycle after the write).
    overlap : Out(1)
        The decoded GEMM may start now: at most one GEMM in flight, with the same TCU settings, and it
        does not write back (``WB``) into a unified row the decoded GEMM reads
        (:func:`gen.design.control.overlaps`). The settings and the hazard are a register, computed
        in the cycle before from the ``*_next`` inputs and the contexts (the controller's DECODE or
        CHECK: no ``start`` in the cycle before a CHECK, so the contexts are those of the CHECK);
        the tail's busy flag is the combinational term.

    Latency: a context is busy from the cycle after ``start`` to the cycle of its final row's write,
    ``add_latency`` cycles after the row arrives (the accumulation unit's read stage, then its
    adder's ``add_latency - 1`` registers, :class:`hdl.accum.AccumAdd`).
    """

    def __init__(self, config: FettaConfig):
        self._cfg = config
        E = config.num_ces
        self._shapes = {
            "rows": BOUND_BITS, "L0": BOUND_BITS, "L1": BOUND_BITS, "o_base": ADDR_BITS, "o_sk": STRIDE_BITS,
            "o_sl0": STRIDE_BITS, "o_sl1": STRIDE_BITS, "stationary": 1,
            "group_active": E, "acc": 1, "acc_l0": 1, "wb": 1, "w_base": ADDR_BITS, "wb_max": ADDR_BITS,
            "ce_mode": CEMode, "red_mode": mode_word_bits(config.net_ports), "log_gk": LOG_GRID_BITS,
            "active": E, "o_tr": 1,
        }
        off = offset_bits(config)
        members = {"start": In(1), "valid": In(1), "o_off": In(off).array(E),
                   **{f"{name}_next": In(ADDR_BITS) for name in ("a_base", "a_max", "b_base", "b_max")},
                   "row": Out(ADDR_BITS), "later_l0": Out(1), "idle": Out(1), "overlap": Out(1),
                   "h_o_off": Out(off).array(E)}
        members.update({name: In(shape) for name, shape in self._shapes.items()})
        members.update({f"h_{name}": Out(self._shapes[name]) for name in _HEAD})
        members.update({f"t_{name}": Out(self._shapes[name]) for name in _TCU})
        members.update({f"{name}_next": In(self._shapes[name]) for name in _TCU})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        E = self._cfg.num_ces
        head = Signal(name="head")          # the context the result rows go to
        tail = Signal(name="tail")          # the context the next GEMM takes
        busy = Signal(2, name="ctx_busy")
        w_final = Signal(name="w_final")    # the write stage holds a context's final row
        w_ctx = Signal(name="w_ctx")
        seqs, held = [], []
        for i in range(2):
            m.submodules[f"out{i}"] = seq = OutputSequencer(self._cfg)
            seqs.append(seq)
            go = self.start & (tail == i)
            m.d.comb += [seq.start.eq(go), seq.valid.eq(self.valid & (head == i))]
            for name in ("rows", "L0", "L1", "o_base", "o_sk", "o_sl0", "o_sl1", "stationary"):
                m.d.comb += getattr(seq, name).eq(getattr(self, name))
            fields = {name: getattr(self, name) for name in (*_HEAD, "wb_max")}
            held.append(hold(m, go, {**fields, "o_off": list(self.o_off)}, f"c{i}_"))
        t = hold(m, self.start, {name: getattr(self, name) for name in _TCU}, "t_")
        m.d.comb += [getattr(self, f"t_{name}").eq(t[name]) for name in _TCU]

        final = Signal(name="final")
        m.d.comb += [self.row.eq(Mux(head, seqs[1].row, seqs[0].row)),
                     final.eq(Mux(head, seqs[1].final, seqs[0].final)),
                     self.later_l0.eq(Mux(head, seqs[1].later_l0, seqs[0].later_l0))]
        m.d.comb += [getattr(self, f"h_{name}").eq(Mux(head, held[1][name], held[0][name])) for name in _HEAD]
        m.d.comb += [self.h_o_off[g].eq(Mux(head, held[1]["o_off"][g], held[0]["o_off"][g])) for g in range(E)]

        # the write stage: add_latency - 1 cycles after the read stage (:class:`hdl.accum.AccumAdd`)
        S = self._cfg.add_latency - 1
        m.d.sync += [w_final.eq(delay(m, final, S, "final")), w_ctx.eq(delay(m, head, S, "head"))]
        with m.If(final):
            m.d.sync += head.eq(~head)
        with m.If(self.start):
            m.d.sync += tail.eq(~tail)
        for i in range(2):
            with m.If(self.start & (tail == i)):
                m.d.sync += busy[i].eq(1)
            with m.Elif(w_final & (w_ctx == i)):
                m.d.sync += busy[i].eq(0)

        # the overlap rule against the last GEMM started (the context before the tail)
        last = {name: Mux(tail, held[0][name], held[1][name]) for name in ("wb", "w_base", "wb_max")}
        nx = {name: getattr(self, f"{name}_next") for name in ("a_base", "a_max", "b_base", "b_max", *_TCU)}
        same = [nx[name] == getattr(self, f"t_{name}") for name in _TCU]
        hazard = last["wb"] & (((nx["a_base"] <= last["wb_max"]) & (last["w_base"] <= nx["a_max"]))
                               | ((nx["b_base"] <= last["wb_max"]) & (last["w_base"] <= nx["b_max"])))
        may = Signal(name="may_overlap")       # settings and hazard of the next cycle's GEMM
        m.d.sync += may.eq(~hazard & Cat(*same).all())
        tail_busy = Mux(tail, busy[1], busy[0])
        m.d.comb += [self.idle.eq(busy == 0), self.overlap.eq(~tail_busy & may)]
        return m
