"""Tensor contraction unit: two distribution networks, E contraction engines, a reduction network.

FETTA section V-B: the rows read from the ``banks`` unified-memory banks (port ``p`` =
bank ``p``) go through two :class:`hdl.dist_net.DistNet` butterflies (IA and IB; multicast
of one row to several CEs), into ``num_ces`` :class:`hdl.ce.CE` (CE ``c`` on network port
``c``, all in the instruction's :class:`hdl.ce.CEMode`), whose Psum vectors go through
the :class:`hdl.red_net.RedNet` (spatial reduction of aligned groups of ``2**log_gk`` CEs
into the group's first port). Control words come from the instruction (section V-D):
``a_sel``/``b_sel`` XOR the bank index of the temporal address, ``red_mode`` (bank index 0), and
the three transpose layers (``tr``: ``a_tr``, ``b_tr``, ``o_tr``).

Ports and timing
----------------
ia_rows, ib_rows : In(lanes * elem_bits).array(ports)
    Bank read data (cycle ``t``), with ``a_sel``, ``b_sel``, ``a_bidx``, ``b_bidx`` and the
    stream flags ``ia_go`` (an IA vector), ``ib_go`` (OS: the IB vector; IS/WS: an IB load),
    ``first``/``last`` (OS tile bounds), ``swap`` (IS/WS first vector), ``ib_index`` (load index).
    The networks register them: the CEs see them in ``t + 1``.
mode : In(CEMode), red_mode : In(mode_word_bits(ports)), log_gk : In(LOG_GRID_BITS), active : In(num_ces)
    Quasi-static for the whole instruction. ``mode`` is set no later than the cycle of the
    instruction's first ``ia_go`` / ``ib_go``: the CEs decode it into registers, one cycle before
    that vector or load reaches them.
a_tr, b_tr, o_tr : In(1)
    The transpose layers of the IA / IB distribution networks (rows entering with them) and of the
    reduction network (Psums entering with it); quasi-static (:class:`gen.design.isa.Transpose`).
red : Out(lanes * acc_bits).array(num_ces), red_valid : Out(1)
    Group ``g``'s sum (``red[g]``) of the CE output of cycle ``u`` appears in
    ``u + log2(ports) * add_latency`` with ``red_valid``. CE outputs: OS row ``r``
    ``r * add_latency + mul_latency + add_latency`` cycles after the tile's last vector, IS/WS
    ``ce_rows * add_latency + mul_latency`` cycles after its vector (:class:`hdl.ce.CE`).
"""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.design.config import FettaConfig, check_accelerator
from gen.design.isa import LOG_GRID_BITS

from hdl.ce import CE, CEMode
from hdl.dist_net import DistNet
from hdl.red_net import RedNet, mode_word_bits


class TCU(wiring.Component):
    """The tensor contraction unit of ``config`` (module docstring: ports and timing).

    Rows entering in cycle ``t`` reach the CEs in ``t + 1`` (the distribution networks'
    register); a group's reduced Psum row leaves ``log2(ports) * add_latency`` cycles after its
    CEs emitted it (``red``, ``red_valid``).
    """

    def __init__(self, config: FettaConfig):

        check_accelerator(config)
        self._cfg = config
        E, L, N = config.num_ces, config.lanes, config.net_ports
        n = N.bit_length() - 1
        super().__init__({
            "ia_rows": In(L * config.elem_bits).array(N), "ib_rows": In(L * config.elem_bits).array(N),
            "a_sel": In(N * n), "b_sel": In(N * n), "a_bidx": In(n), "b_bidx": In(n),
            "ia_go": In(1), "ib_go": In(1), "first": In(1), "last": In(1), "swap": In(1),
            "ib_index": In(range(L)),
            "mode": In(CEMode), "red_mode": In(mode_word_bits(N)), "log_gk": In(LOG_GRID_BITS), "active": In(E),
            "a_tr": In(1), "b_tr": In(1), "o_tr": In(1),
            "red": Out(L * config.acc_bits).array(E), "red_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        E, L, N = cfg.num_ces, cfg.lanes, cfg.net_ports
        EB, AB = cfg.elem_bits, cfg.acc_bits
        m.submodules.dist_a = da = DistNet(ports=N, lanes=L, width=EB, valid=False)
        m.submodules.dist_b = db = DistNet(ports=N, lanes=L, width=EB, valid=False)
        m.submodules.red_net = rn = RedNet(ports=N, lanes=L, datatype=cfg.datatype, width=AB,
                                           add_stages=cfg.add_latency)
        for net, rows, sel, bidx, tr in ((da, self.ia_rows, self.a_sel, self.a_bidx, self.a_tr),
                                         (db, self.ib_rows, self.b_sel, self.b_bidx, self.b_tr)):
            m.d.comb += [net.i_data.as_value().eq(Cat(*rows)),
                         net.sel_vec.eq(sel), net.bank_idx.eq(bidx), net.transpose.eq(tr)]
        # stream flags travel with the rows through the network's output register
        s_ia, s_ib, s_first, s_last, s_swap = (Signal(name=f"dist_{x}") for x in ("ia", "ib", "first", "last", "swap"))
        s_index = Signal(range(L), name="dist_ib_index")
        m.d.sync += [s_ia.eq(self.ia_go), s_ib.eq(self.ib_go), s_first.eq(self.first), s_last.eq(self.last),
                     s_swap.eq(self.swap), s_index.eq(self.ib_index)]
        os_mode = (self.mode == CEMode.OS_AB) | (self.mode == CEMode.OS_BA)
        psums, valids = [], []
        for c in range(E):
            ce = CE(rows=cfg.ce_rows, cols=cfg.ce_cols, datatype=cfg.datatype, int_width=cfg.int_width,
                    int_acc_width=cfg.int_acc_width, mul_latency=cfg.mul_latency, add_latency=cfg.add_latency,
                    status=False)
            m.submodules[f"ce{c}"] = ce
            m.d.comb += [ce.mode.eq(self.mode),
                         ce.ia.data.as_value().eq(da.o_data[c].as_value()),
                         ce.ia.valid.eq(s_ia & self.active[c]),
                         ce.ia.first.eq(s_first), ce.ia.last.eq(s_last), ce.ia.swap.eq(s_swap),
                         ce.ib.data.as_value().eq(db.o_data[c].as_value()),
                         ce.ib.valid.eq(s_ib & ~os_mode & self.active[c]), ce.ib.index.eq(s_index),
                         ce.psum_in.as_value().eq(0)]
            psums.append(ce.psum.data.as_value())
            valids.append(ce.psum.valid & self.active[c])
        zero = Const(0, L * AB)
        m.d.comb += [rn.i_data.as_value().eq(Cat(*psums, *([zero] * (N - E)))),
                     rn.i_valid.eq(Cat(*valids, Const(0, N - E) if N > E else Cat())),
                     rn.mode.eq(self.red_mode), rn.bank_idx.eq(0), rn.transpose.eq(self.o_tr),
                     self.red_valid.eq(rn.o_valid[0])]
        for g in range(E):
            with m.Switch(self.log_gk):
                for lg in range(E.bit_length()):
                    if (g << lg) < E:
                        with m.Case(lg):
                            m.d.comb += self.red[g].eq(rn.o_data[g << lg].as_value())
        return m
