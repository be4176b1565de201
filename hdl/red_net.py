"""Reduction network: a pipelined butterfly of adder switches with a transpose layer (FETTA V-B3).

It takes the partial sums of the CE array (one port per CE, ``lanes`` Psums each), sums
aligned groups of CEs spatially and routes each result to an accumulation bank. The
topology, numbering and control conventions are those of :mod:`sim.net_model`;
:mod:`gen.design.routing` turns "which groups are summed and where the sums go" into modes.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Shape, Signal, unsigned
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

from gen.design import netsem
from gen.design.config import DATATYPES, FP32_BITS
from gen.errors import ConfigError

from hdl.dist_net import _check_ports_lanes, transpose_rows, transpose_valid
from hdl.fp import FP32Add
from hdl.pipe import delay


class SwitchMode(enum.Enum, shape=2):
    """2-bit mode of an :class:`AdderSwitch`; the values are those of the network semantics
    (:mod:`gen.design.netsem`). Bit 0 picks the side, so XORing a bank-index bit into it
    (section V-D) mirrors the switch: pass <-> swap, add-left <-> add-right."""

    #: left input -> left output, right -> right
    PASS = netsem.PASS
    #: left input -> right output, right -> left
    SWAP = netsem.SWAP
    #: sum -> left output; right output empty (zero, invalid)
    ADD_LEFT = netsem.ADD_LEFT
    #: sum -> right output; left output empty (zero, invalid)
    ADD_RIGHT = netsem.ADD_RIGHT


#: bits of one switch's mode in a mode word
MODE_BITS = Shape.cast(SwitchMode).width


def mode_word_bits(ports: int) -> int:
    """Bits of the mode word of an N-port network: ``N/2`` switches on each of ``log2(N)`` levels."""
    return ports // 2 * (ports.bit_length() - 1) * MODE_BITS


def _check_switch(lanes, datatype, width) -> None:
    if datatype not in DATATYPES:
        raise ConfigError(f"adder switch: must be one of {', '.join(DATATYPES)}, got {datatype!r}",
                          field="datatype")
    for name, value in (("lanes", lanes), ("width", width)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"adder switch: must be a positive integer, got {value!r}", field=name)
    if datatype == "bf16" and width != FP32_BITS:
        raise ConfigError(f"adder switch: bf16 accumulates in FP32, width must be {FP32_BITS}, got {width!r}",
                          field="width")


class AdderSwitch(wiring.Component):
    """2-input 2-output adder switch on vectors of ``lanes`` accumulator elements.

    Combinational with ``stages = 0`` (the reduction network registers its outputs); with
    ``stages = k`` the adders (:class:`hdl.fp.FP32Add`, or the integer sum) have ``k`` inner
    pipeline registers and the inputs, valids and mode wait ``k`` cycles beside them, so the
    outputs are valid ``k`` cycles after the inputs, one pair per cycle. In the add modes an
    invalid input counts as absent: valid + invalid gives the valid input unchanged
    (no ``+0`` that could turn ``-0`` into ``+0``), invalid + invalid gives the left
    input, still invalid. The output opposite the sum is zero and invalid.

    Parameters
    ----------
    lanes : int
        Elements per port.
    datatype : str
        ``"bf16"``: FP32 adders (:class:`hdl.fp.FP32Add`, bit-exact with
        ``sim.bf16.f32_add``); ``"int16"``: exact two's-complement adders that wrap
        at ``width`` bits.
    width : int
        Bits per element (32 for ``bf16``, ``int_acc_width`` for ``int16``).
    stages : int
        Inner pipeline registers (``add_latency - 1`` in the reduction network).

    Members
    -------
    a, b : In(lanes * width)
        Left and right input vectors (lane ``l`` at bits ``l*width``).
    a_valid, b_valid : In(1)
    mode : In(SwitchMode)
    l, r : Out(lanes * width)
        Left and right outputs.
    l_valid, r_valid : Out(1)
    """

    def __init__(self, *, lanes: int, datatype: str, width: int, stages: int = 0):
        _check_switch(lanes, datatype, width)
        if not isinstance(stages, int) or isinstance(stages, bool) or stages < 0:
            raise ConfigError(f"adder switch: must be a non-negative integer, got {stages!r}", field="add_latency")
        self._lanes, self._datatype, self._width, self._stages = lanes, datatype, width, stages
        super().__init__({
            "a": In(lanes * width), "a_valid": In(1),
            "b": In(lanes * width), "b_valid": In(1),
            "mode": In(SwitchMode),
            "l": Out(lanes * width), "l_valid": Out(1),
            "r": Out(lanes * width), "r_valid": Out(1),
        })

    @property
    def latency(self) -> int:
        """Cycles from the inputs to the outputs (``stages``)."""
        return self._stages

    def elaborate(self, platform):
        m = Module()
        L, W, k = self._lanes, self._width, self._stages
        total = Signal(L * W)
        for i in range(L):
            a, b = self.a[i * W:(i + 1) * W], self.b[i * W:(i + 1) * W]
            if self._datatype == "bf16":
                m.submodules[f"add{i}"] = add = FP32Add(stages=k)
                m.d.comb += [add.a.eq(a), add.b.eq(b), total[i * W:(i + 1) * W].eq(add.o)]
            else:
                m.d.comb += total[i * W:(i + 1) * W].eq(delay(m, (a + b)[:W], k, f"sum{i}"))
        # what bypasses the adders waits beside them; the output multiplexers' one-hot selects are
        # decoded from the mode and the valids at the inputs and wait as registers (at k >= 1), so
        # the data bits see a register and one AND-OR level, not the mode / valid decode
        a, b = delay(m, self.a, k, "a"), delay(m, self.b, k, "b")
        sel = _switch_selects(m, self.mode, self.a_valid, self.b_valid)
        sel = {key: delay(m, v, k, f"sel_{key}") for key, v in sel.items()}
        for o in "lr":
            m.d.comb += [getattr(self, o).eq(Mux(sel[f"{o}_a"], a, 0) | Mux(sel[f"{o}_b"], b, 0)
                                             | Mux(sel[f"{o}_sum"], total, 0)),
                         getattr(self, f"{o}_valid").eq(sel[f"{o}_valid"])]
        return m


def _switch_selects(m, mode, a_valid, b_valid) -> dict:
    """One-hot selects of each output of an :class:`AdderSwitch` (``l_a``: ``l`` takes ``a``, ``l_b``,
    ``l_sum``; none set: zero) and its valid, decoded from the mode and the input valids."""
    sel = {f"{o}_{x}": Signal(name=f"dec_{o}_{x}") for o in "lr" for x in ("a", "b", "sum", "valid")}
    both, any_valid = a_valid & b_valid, a_valid | b_valid
    # a sum with one valid input is that input unchanged; with none, the left input (invalid)
    summed = {"a": ~both & ~b_valid, "b": ~both & b_valid, "sum": both}
    with m.Switch(mode):
        with m.Case(SwitchMode.PASS):
            m.d.comb += [sel["l_a"].eq(1), sel["l_valid"].eq(a_valid), sel["r_b"].eq(1), sel["r_valid"].eq(b_valid)]
        with m.Case(SwitchMode.SWAP):
            m.d.comb += [sel["l_b"].eq(1), sel["l_valid"].eq(b_valid), sel["r_a"].eq(1), sel["r_valid"].eq(a_valid)]
        for case, side in ((SwitchMode.ADD_LEFT, "l"), (SwitchMode.ADD_RIGHT, "r")):
            with m.Case(case):
                m.d.comb += [sel[f"{side}_{x}"].eq(v) for x, v in summed.items()]
                m.d.comb += sel[f"{side}_valid"].eq(any_valid)
    return sel


class RedNet(wiring.Component):
    """N-port pipelined butterfly reduction network with a transpose layer at the bottom.

    ``n = log2(N)`` levels of ``N/2`` :class:`AdderSwitch` es; level ``s`` works on address
    bit ``s`` (least significant first, the mirror of :class:`hdl.dist_net.DistNet`):
    switch ``p`` joins nodes ``lo`` (``p`` with a 0 inserted at bit ``s``) and
    ``lo + 2**s``. Its mode is ``mode[2*(s*N/2 + p) +: 2]`` with ``bank_idx[s]`` XORed into
    bit 0 (section V-D). A register level follows every switch level. The switch pairs
    the two registers of its nodes and writes the same two of the next level: the
    butterfly's crossing is the switch's swap, so an output leaves on the path opposite
    its input as in the paper's figure, with no wiring beyond the switches. After the
    last register level, the transpose layer (one control bit) exchanges ports and lanes
    in groups of ``lanes`` ports.

    Parameters
    ----------
    ports : int
        N, a power of two >= 2.
    lanes : int
        Psums per port; must divide ``ports``.
    datatype : str
        ``"bf16"`` (FP32 adders) or ``"int16"`` (exact integer adders).
    width : int
        Bits per Psum (32 for ``bf16``, ``int_acc_width`` for ``int16``).
    add_stages : int
        Cycles per level (``FettaConfig.add_latency``, >= 1): the switches' adders have
        ``add_stages - 1`` inner registers, then the level's register.

    Members
    -------
    i_data : In(ArrayLayout(ArrayLayout(width, lanes), ports))
        Psums, port ``p`` = CE ``p``.
    i_valid : In(ports)
        Per-port valid; it travels (and is summed as "present") with the data.
    mode : In(mode_word_bits(ports)) = In(ports // 2 * log2(ports) * MODE_BITS)
        Default modes (``mode_vec``) of every switch, see above.
    bank_idx : In(log2(ports))
    transpose : In(1)
    o_data : Out(ArrayLayout(ArrayLayout(width, lanes), ports))
        Port ``j`` = accumulation bank ``j``.
    o_valid : Out(ports)

    Timing: ``i_data``, ``i_valid``, ``mode``, ``bank_idx`` and ``transpose`` are sampled
    together in cycle ``t``; the control words travel down the pipeline with their data,
    so they may change every cycle. The result appears at ``o_*`` in cycle
    ``t + log2(N) * add_stages`` (:attr:`latency`; ``add_stages`` cycles per switch level, the last
    of them the level's register), one beat per cycle.
    The transpose layer is combinational after the last register. Valid bits reset to 0.
    """

    def __init__(self, *, ports: int, lanes: int, datatype: str, width: int, add_stages: int = 1):
        self._n = _check_ports_lanes(ports, lanes, width, what="reduction network")
        _check_switch(lanes, datatype, width)
        if not isinstance(add_stages, int) or isinstance(add_stages, bool) or add_stages < 1:
            raise ConfigError(f"reduction network: must be a positive integer, got {add_stages!r}",
                              field="add_latency")
        self._ports, self._lanes, self._datatype, self._width = ports, lanes, datatype, width
        self._add_stages = add_stages
        rows = data.ArrayLayout(data.ArrayLayout(unsigned(width), lanes), ports)
        super().__init__({
            "i_data": In(rows),
            "i_valid": In(ports),
            "mode": In(mode_word_bits(ports)),
            "bank_idx": In(self._n),
            "transpose": In(1),
            "o_data": Out(rows),
            "o_valid": Out(ports),
        })

    ports = property(lambda self: self._ports)
    lanes = property(lambda self: self._lanes)
    width = property(lambda self: self._width)
    datatype = property(lambda self: self._datatype)
    levels = property(lambda self: self._n)

    @property
    def latency(self) -> int:
        """Cycles from input to output."""
        return self._n * self._add_stages

    def elaborate(self, platform):
        m = Module()
        N, L, W, n = self._ports, self._lanes, self._width, self._n
        half = N // 2
        mbits = half * MODE_BITS
        flat = self.i_data.as_value()
        cur = [flat[p * L * W:(p + 1) * L * W] for p in range(N)]
        cur_v = [self.i_valid[p] for p in range(N)]
        # control still needed downstream travels with its data
        mode_word, bank_word, tr = self.mode, self.bank_idx, self.transpose
        for s in range(n):
            k = s
            nxt = [Signal(L * W, name=f"stage{s}_data{x}", reset_less=True) for x in range(N)]
            nxt_v = [Signal(name=f"stage{s}_valid{x}") for x in range(N)]
            for p in range(half):
                lo = ((p >> k) << (k + 1)) | (p & ((1 << k) - 1))
                hi = lo | (1 << k)
                sw = AdderSwitch(lanes=L, datatype=self._datatype, width=W, stages=self._add_stages - 1)
                m.submodules[f"sw{s}_{p}"] = sw
                m.d.comb += [sw.a.eq(cur[lo]), sw.a_valid.eq(cur_v[lo]),
                             sw.b.eq(cur[hi]), sw.b_valid.eq(cur_v[hi]),
                             sw.mode.as_value().eq(mode_word[MODE_BITS * p:MODE_BITS * (p + 1)] ^ bank_word[0])]
                m.d.sync += [nxt[lo].eq(sw.l), nxt_v[lo].eq(sw.l_valid),
                             nxt[hi].eq(sw.r), nxt_v[hi].eq(sw.r_valid)]
            rest = n - 1 - s
            extra = self._add_stages - 1    # the switches' inner stages
            tr_next = Signal(name=f"stage{s}_transpose", reset_less=True)
            m.d.sync += tr_next.eq(delay(m, tr, extra, f"stage{s}_transpose_p"))
            if rest:
                mode_next = Signal(rest * mbits, name=f"stage{s}_mode", reset_less=True)
                bank_next = Signal(rest, name=f"stage{s}_bank", reset_less=True)
                m.d.sync += [mode_next.eq(delay(m, mode_word[mbits:], extra, f"stage{s}_mode_p")),
                             bank_next.eq(delay(m, bank_word[1:], extra, f"stage{s}_bank_p"))]
                mode_word, bank_word = mode_next, bank_next
            tr = tr_next
            cur, cur_v = nxt, nxt_v
        t_rows = transpose_rows(cur, L, W)
        t_valid = transpose_valid(Cat(*cur_v), N, L)
        m.d.comb += [
            self.o_data.as_value().eq(Cat(*(Mux(tr, t_rows[p], cur[p]) for p in range(N)))),
            self.o_valid.eq(Cat(*(Mux(tr, t_valid[p], cur_v[p]) for p in range(N)))),
        ]
        return m


def red_net(config) -> RedNet:
    """Factory for ``hdl.TOPS``: N = ``net_ports``, L = ``lanes``, accumulator width of the datatype."""
    # validate before constructing: a component that raises in __init__ would warn "never used"
    _check_ports_lanes(config.net_ports, config.lanes, config.acc_bits, what="reduction network")
    _check_switch(config.lanes, config.datatype, config.acc_bits)
    return RedNet(ports=config.net_ports, lanes=config.lanes, datatype=config.datatype, width=config.acc_bits,
                  add_stages=config.add_latency)


__all__ = ["SwitchMode", "MODE_BITS", "mode_word_bits", "AdderSwitch", "RedNet", "red_net"]
