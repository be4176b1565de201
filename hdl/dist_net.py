"""Distribution network: a transposable butterfly of 2:1 multiplexers (FETTA section V-B2).

It carries one row of every unified-memory bank (a port = ``lanes`` elements) to the CE
array. The exact topology, numbering and control conventions are those of
:mod:`sim.net_model` (the oracle the tests compare against); :mod:`gen.design.routing` turns a
requested pattern into the control words.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gen.errors import ConfigError


def _check_ports_lanes(ports, lanes, width, *, what: str) -> int:
    for name, value in (("net_ports", ports), ("lanes", lanes), ("width", width)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{what}: must be a positive integer, got {value!r}", field=name)
    if ports < 2 or ports & (ports - 1):
        raise ConfigError(f"{what}: must be a power of two >= 2, got {ports!r}", field="net_ports")
    if ports % lanes:
        raise ConfigError(f"{what}: the transpose layer exchanges ports and lanes in groups of lanes "
                          f"ports, so lanes must divide net_ports ({ports}), got {lanes!r}", field="lanes")
    return ports.bit_length() - 1


def transpose_rows(rows, lanes: int, width: int):
    """Transpose layer on a list of port rows (Values of ``lanes*width`` bits): exchange ports and lanes."""
    out = []
    for g in range(len(rows) // lanes):
        for l in range(lanes):
            out.append(Cat(*(rows[g * lanes + i][l * width:(l + 1) * width] for i in range(lanes))))
    return out


def transpose_valid(valid, ports: int, lanes: int):
    """A transposed port carries one element of each port of its group: valid when all were."""
    return [valid[(p // lanes) * lanes:(p // lanes + 1) * lanes].all() for p in range(ports)]


class DistNet(wiring.Component):
    """N-port transposable butterfly distribution network.

    A transpose layer (one control bit) followed by ``n = log2(N)`` levels of ``N`` 2:1
    multiplexers each; level ``s`` works on address bit ``n-1-s`` (most significant first).
    Node ``x`` of level ``s`` takes its vertical input ``x`` or its diagonal input
    ``x ^ 2**(n-1-s)``. Each multiplexer is controlled as in section V-D by
    ``sel_vec[s*N + x] XOR bank_idx[n-1-s]``. A multiplexer node can feed both nodes of the
    next level, so one input reaches up to ``N`` outputs (multicast).

    Parameters
    ----------
    ports : int
        N, a power of two >= 2.
    lanes : int
        Elements per port (one bank row); must divide ``ports`` (transpose groups).
    width : int
        Bits per element (16 for ``bf16`` operands, ``int_width`` for ``int16``).

    Members
    -------
    i_data : In(ArrayLayout(ArrayLayout(width, lanes), ports))
        Input rows, port ``p`` = bank ``p``.
    i_valid : In(ports)
        Per-port valid; it travels with the data (a transposed port is valid when its whole
        group was).
    sel_vec : In(ports * log2(ports))
        Default selection vector, bit ``s*N + x`` = node ``x`` of level ``s``.
    bank_idx : In(log2(ports))
        Bank index XORed into every multiplexer of the level on the same address bit.
    transpose : In(1)
        Exchange ports and lanes in groups of ``lanes`` ports before the butterfly.
    o_data : Out(ArrayLayout(ArrayLayout(width, lanes), ports))
        Output rows, port ``j`` = CE ``j``.
    o_valid : Out(ports)

    ``i_valid`` / ``o_valid`` exist only with ``valid=True`` (the default): the TCU tracks its
    streams in the sequencer and builds both networks without them.

    Timing: one register at the outputs; everything sampled in cycle ``t`` (data, valid and
    control) appears at ``o_*`` in cycle ``t+1``. Latency 1, throughput one row set per cycle.
    ``o_valid`` resets to 0.
    """

    def __init__(self, *, ports: int, lanes: int, width: int, valid: bool = True):
        self._n = _check_ports_lanes(ports, lanes, width, what="distribution network")
        self._ports, self._lanes, self._width, self._valid = ports, lanes, width, valid
        rows = data.ArrayLayout(data.ArrayLayout(unsigned(width), lanes), ports)
        members = {
            "i_data": In(rows),
            "i_valid": In(ports),
            "sel_vec": In(ports * self._n),
            "bank_idx": In(self._n),
            "transpose": In(1),
            "o_data": Out(rows),
            "o_valid": Out(ports),
        }
        super().__init__({k: v for k, v in members.items() if valid or k not in ("i_valid", "o_valid")})

    ports = property(lambda self: self._ports)
    lanes = property(lambda self: self._lanes)
    width = property(lambda self: self._width)
    levels = property(lambda self: self._n)
    #: cycles from input to output
    latency = 1

    def elaborate(self, platform):
        m = Module()
        N, L, W, n = self._ports, self._lanes, self._width, self._n
        flat = self.i_data.as_value()
        rows = [flat[p * L * W:(p + 1) * L * W] for p in range(N)]
        t_rows = transpose_rows(rows, L, W)
        t_valid = transpose_valid(self.i_valid, N, L) if self._valid else None
        cur, cur_v = [], []
        for p in range(N):
            d = Signal(L * W, name=f"lvl0_data{p}")
            m.d.comb += d.eq(Mux(self.transpose, t_rows[p], rows[p]))
            cur.append(d)
            if self._valid:
                v = Signal(name=f"lvl0_valid{p}")
                m.d.comb += v.eq(Mux(self.transpose, t_valid[p], self.i_valid[p]))
                cur_v.append(v)
        for s in range(n):
            k = n - 1 - s
            ctrl = Signal(N, name=f"lvl{s}_ctrl")
            # section V-D: the bank index re-targets the default routing per level
            m.d.comb += ctrl.eq(self.sel_vec[s * N:(s + 1) * N] ^ self.bank_idx[k].replicate(N))
            nxt, nxt_v = [], []
            for x in range(N):
                d = Signal(L * W, name=f"lvl{s + 1}_data{x}")
                y = x ^ (1 << k)
                m.d.comb += d.eq(Mux(ctrl[x], cur[y], cur[x]))
                nxt.append(d)
                if self._valid:
                    v = Signal(name=f"lvl{s + 1}_valid{x}")
                    m.d.comb += v.eq(Mux(ctrl[x], cur_v[y], cur_v[x]))
                    nxt_v.append(v)
            cur, cur_v = nxt, nxt_v
        m.d.sync += self.o_data.as_value().eq(Cat(*cur))
        if self._valid:
            m.d.sync += self.o_valid.eq(Cat(*cur_v))
        return m


def dist_net(config) -> DistNet:
    """Factory for ``hdl.TOPS``: N = ``net_ports``, L = ``lanes``, operand width of the datatype."""
    # validate before constructing: a component that raises in __init__ would warn "never used"
    _check_ports_lanes(config.net_ports, config.lanes, config.elem_bits, what="distribution network")
    return DistNet(ports=config.net_ports, lanes=config.lanes, width=config.elem_bits)


__all__ = ["DistNet", "dist_net", "transpose_rows", "transpose_valid"]
