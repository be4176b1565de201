"""Contraction engine (CE): an R x C transposable systolic array of PEs (FETTA Fig. 11(a), 12).

GEMM notation used by every mapping: ``C[M, N] = A[M, K] @ B[K, N]``.
The CE has two input operands, IA and IB, and one output, Psum (paper,
section V-B1). IA enters from the left, one element per row, broadcast to all
PEs of the row; row ``r`` sees its element ``r`` cycles later (the row skew,
done inside the CE). IB is either held stationary in the PEs (IS, WS) or
streamed from the top (OS).

The six mappings (:class:`CEMode`), with the vector the feeder presents per
cycle (``ia.data`` has R lanes, ``ib.data`` has ``max(R, C)`` lanes) and the
layout in memory that the IB load direction implies:

============  =============================  ==============================  ==================================
mode          stationary / streamed IB        IA vector (one per cycle)        Psum vector (one per cycle)
============  =============================  ==============================  ==================================
``WS_V``      IB = B tile [R x C] loaded       ``A[m, k0:k0+R]``                ``C[m, n0:n0+C]`` (a row of C)
              from the top: one row
              ``B[k0+j, n0:n0+C]`` per load
              (B stored K-major, ``[K, N]``)
``WS_H``      IB = B tile loaded from the      ``A[m, k0:k0+R]``                ``C[m, n0:n0+C]``
              left: one column
              ``B[k0:k0+R, n0+j]`` per load
              (B stored N-major, ``[N, K]``)
``IS_V``      IB = A^T tile: PE(r, c) holds    ``B[k0:k0+R, n]``                ``C[m0:m0+C, n]`` (a column of C)
              ``A[m0+c, k0+r]``; from the top
              one row ``A[m0:m0+C, k0+j]``
              (A stored K-major, ``[K, M]``)
``IS_H``      as IS_V, loaded from the left:   ``B[k0:k0+R, n]``                ``C[m0:m0+C, n]``
              one column ``A[m0+j, k0:k0+R]``
              (A stored M-major, ``[M, K]``)
``OS_AB``     IB streams from the top:         ``A[m0:m0+R, k]``                after the tile: rows
              ``B[k, n0:n0+C]`` per cycle                                       ``C[m0+r, n0:n0+C]``, r = 0..R-1
``OS_BA``     operand roles exchanged: IB      ``B[k, n0:n0+R]``                after the tile: columns
              streams ``A[m0:m0+C, k]``                                         ``C[m0:m0+C, n0+r]``, r = 0..R-1
============  =============================  ==============================  ==================================

In IS and WS the reduction dimension K lies along the PE rows: the Psum of
a vector enters the top of each column through ``psum_in`` (``+0`` for the
first K tile, the previous K tile's Psum otherwise: the chain continues, so
the accumulation order is the sequential order over k), flows down, and
leaves the bottom ``R * S + M`` cycles after the vector entered. In OS, each PE
accumulates in place over the K vectors of a tile; the tile's results are
drained through the bottom port one row per cycle.

Latencies (:class:`gen.design.config.FettaConfig`): ``M = mul_latency`` (multiplier),
``S = add_latency`` (adder). Row ``r`` sees everything ``r * S`` cycles late (the row
skew), because a Psum spends ``S`` cycles in each PE of its column.

Timing (cycle ``t``: inputs presented in ``t`` are sampled at the clock edge
that ends ``t``):

* IS/WS: ``psum.data`` for the IA vector of cycle ``t`` is valid in cycle
  ``t + R * S + M`` (``psum.valid``). ``psum_in`` is presented in cycle ``t``
  with that vector.
* IB loads (IS/WS): ``ib.valid``, ``ib.index`` = row (``*_V``) or column
  (``*_H``) of the shadow IB, ``ib.data`` = that row (C lanes) or column (R
  lanes). A load may be presented in the same cycle as, or any cycle after,
  the ``swap`` vector that retires the previous shadow tile, load ``j`` at the
  earliest ``j`` cycles after it; the next ``swap`` vector may come one cycle after
  the tile's last load. Horizontal loads travel through the row skew and vertical
  load ``j`` is delayed ``j * (S - 1)`` cycles, so both load orders are gap-free.
  A tile of R (vertical) or C (horizontal) loads per M vectors means no idle
  cycle between tiles when ``M >= R`` (resp. ``C``).
* OS: vectors of a tile are flagged ``first`` / ``last`` (a one-vector tile
  has both); the vectors of one tile come exactly ``S`` cycles apart, so the
  feeder interleaves ``S`` tiles (:func:`gen.design.isa.interleave`). Row ``r``
  of a tile is on ``psum`` in cycle ``t_last + r * S + M + S`` with ``psum.row = r``.
  Two ``last`` vectors must not be a multiple of ``S`` cycles apart below ``R * S``
  (interleaved tiles are 1 .. S - 1 cycles apart, groups ``S * max(K, R)``);
  otherwise rows collide on the drain port and raise ``overrun``.
* ``mode`` is decoded into registers: present it at least one cycle before the
  first vector or IB load of the mapping, and hold it while anything is in flight
  (change it only when the CE has drained).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from gen.design.config import DEFAULT
from gen.design.isa import CEMode
from hdl.pe import PE, _check_datatype, _check_latencies, acc_width, operand_width
from hdl.pipe import delay

__all__ = ["CE", "CEMode", "IASignature", "IBSignature", "PsumSignature", "ce_from_config"]


class IASignature(wiring.Signature):
    """IA stream into the CE, seen from the feeder.

    Members: ``data`` (R operands), ``valid``, ``first``/``last`` (OS tile
    bounds), ``swap`` (IS/WS: first vector that uses the newly loaded IB).
    """

    def __init__(self, rows: int, ew: int):
        super().__init__({"data": Out(data.ArrayLayout(ew, rows)), "valid": Out(1),
                          "first": Out(1), "last": Out(1), "swap": Out(1)})


class IBSignature(wiring.Signature):
    """IB into the CE, seen from the feeder: loads (IS/WS) or the stream from the top (OS).

    Members: ``data`` (``max(R, C)`` operands), ``valid`` (a load, IS/WS only),
    ``index`` (shadow row for vertical loads, column for horizontal ones).
    """

    def __init__(self, rows: int, cols: int, ew: int):
        super().__init__({"data": Out(data.ArrayLayout(ew, max(rows, cols))), "valid": Out(1),
                          "index": Out(range(max(rows, cols)))})


class PsumSignature(wiring.Signature):
    """Psums leaving the bottom of the CE: ``data`` (C sums), ``valid``, ``row`` (OS: drained PE row;
    only with ``row=True``)."""

    def __init__(self, rows: int, cols: int, aw: int, *, row: bool = True):
        members = {"data": Out(data.ArrayLayout(aw, cols)), "valid": Out(1)}
        if row:
            members["row"] = Out(range(rows))
        super().__init__(members)


class CE(wiring.Component):
    """R x C transposable systolic contraction engine; see the module docstring for the mappings.

    Parameters
    ----------
    rows, cols : int
        PE rows R and columns C (>= 1).
    datatype, int_width, int_acc_width
        As :class:`hdl.pe.PE`.
    status : bool
        Build ``overrun`` and ``psum.row`` (default). The TCU leaves them out: its output
        sequencer knows the drained row, and the controller's checks and the timing rule
        (:func:`gen.design.isa.tile_period`) space ``last`` vectors so that no overrun can
        occur; the CE bench (``tests/test_ce.py``) checks both.

    Members
    -------
    mode : In(CEMode)
        The mapping; quasi-static: set at least one cycle before its first vector or load,
        changed only when the CE is drained.
    ia : In(IASignature)
        IA vectors with their flags.
    ib : In(IBSignature)
        IB loads (IS/WS) or the IB vector streamed with each IA vector (OS).
    psum_in : In(ArrayLayout(aw, C))
        IS/WS: the Psums entering the top of the columns, presented with the IA vector.
    psum : Out(PsumSignature)
        Psums leaving the bottom (latencies in the module docstring).
    overrun : Out(1)
        OS: two rows were due on the drain port in the same cycle (a schedule error; ``status`` only).
    """

    def __init__(self, *, rows: int = DEFAULT.ce_rows, cols: int = DEFAULT.ce_cols, datatype: str = DEFAULT.datatype,
                 int_width: int = DEFAULT.int_width, int_acc_width: int = DEFAULT.int_acc_width,
                 mul_latency: int = DEFAULT.mul_latency, add_latency: int = DEFAULT.add_latency,
                 status: bool = True):
        for name, value in (("rows", rows), ("cols", cols)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an integer, not {value!r}")
            if value < 1:
                raise ValueError(f"{name} must be >= 1, not {value!r}")
        _check_datatype(datatype, int_width, int_acc_width)
        _check_latencies(mul_latency, add_latency)
        self._rows, self._cols, self._status = rows, cols, status
        self._mul_latency, self._add_latency = mul_latency, add_latency
        self._datatype, self._int_width, self._int_acc_width = datatype, int_width, int_acc_width
        ew = operand_width(datatype, int_width)
        aw = acc_width(datatype, int_acc_width)
        members = {
            "mode": In(CEMode),
            "ia": In(IASignature(rows, ew)),
            "ib": In(IBSignature(rows, cols, ew)),
            "psum_in": In(data.ArrayLayout(aw, cols)),
            "psum": Out(PsumSignature(rows, cols, aw, row=status)),
        }
        if status:
            members["overrun"] = Out(1)
        super().__init__(members)

    rows = property(lambda self: self._rows)
    cols = property(lambda self: self._cols)
    datatype = property(lambda self: self._datatype)

    @property
    def stationary_latency(self) -> int:
        """IS/WS: cycles from an IA vector to its Psum vector (``rows * add_latency + mul_latency``,
        :func:`gen.design.isa.ce_latency`)."""
        return self._rows * self._add_latency + self._mul_latency

    def elaborate(self, platform):
        m = Module()
        R, C = self._rows, self._cols
        M, S = self._mul_latency, self._add_latency
        aw = acc_width(self._datatype, self._int_acc_width)

        # The mode is decoded into registers: it comes at least a cycle before the first vector or
        # load that needs it, so no decode sits between the mode port and the PEs.
        os_mode = Signal(name="os_mode")
        horizontal = Signal(name="horizontal")
        m.d.sync += [
            os_mode.eq((self.mode == CEMode.OS_AB) | (self.mode == CEMode.OS_BA)),
            horizontal.eq((self.mode == CEMode.WS_H) | (self.mode == CEMode.IS_H)),
        ]

        # Row skew: row r sees the IA element, its flags and the horizontal IB
        # load r * S cycles late (S = add_latency: a Psum takes S cycles per PE row).
        # The horizontal loads ride on the same skew so that a column load reaches
        # row r exactly when row r has swapped. The mode rides along too (it is held while
        # anything is in flight, so row r may read it r * S cycles late): each row's PEs read
        # their own register instead of one register fanned out to every PE.
        def register(name, value, **kwargs):
            reg = Signal(Value.cast(value).shape(), name=name, **kwargs)
            m.d.sync += reg.eq(value)
            return reg

        skew = []
        for r in range(R):
            stage = {"valid": self.ia.valid, "first": self.ia.first,
                     "last": self.ia.last, "swap": self.ia.swap, "os": os_mode,
                     "hl_valid": self.ib.valid & horizontal, "hl_index": self.ib.index,
                     "hl_data": self.ib.data[r]}
            a = [self.ia.data[r]] * C       # the element as each PE of the row sees it
            for d in range(r * S):
                stage = {key: register(f"skew_r{r}_d{d + 1}_{key}", value) for key, value in stage.items()}
                if d < r * S - 1:
                    a = [register(f"skew_r{r}_d{d + 1}_a", a[0])] * C
                else:
                    # The last stage is one register per PE: every bit of the element enters a row
                    # of the multiplier's partial products, so one register for the row would fan
                    # out across C PEs. ``keep`` stops synthesis from merging the copies (both Yosys
                    # flows move it onto the flip-flops: gen.toolflow.synth.KEEP_REGISTERS).
                    a = [register(f"skew_r{r}_d{d + 1}_a_c{c}", a[0], attrs={"keep": 1}) for c in range(C)]
            skew.append(stage | {"a": a})
        # Vertical loads go to one row each; load j comes j cycles after the swap vector
        # and row j swaps j * S cycles after it, so row j takes its load j * (S - 1) cycles
        # late (a tap of one delay line).
        vload = [{"valid": self.ib.valid & ~horizontal, "index": self.ib.index,
                  "data": self.ib.data.as_value()[:C * len(self.ib.data[0])]}]
        for d in range((R - 1) * (S - 1)):
            nxt = {}
            for key, value in vload[-1].items():
                reg = Signal(Value.cast(value).shape(), name=f"vload_d{d + 1}_{key}")
                m.d.sync += reg.eq(value)
                nxt[key] = reg
            vload.append(nxt)

        psum_top = delay(m, self.psum_in, M, "psum_top")

        pes = [[None] * C for _ in range(R)]
        for r in range(R):
            for c in range(C):
                # the valids of column 0 are read (drain: every row; psum: the bottom row)
                pe = PE(datatype=self._datatype, int_width=self._int_width, int_acc_width=self._int_acc_width,
                        mul_latency=M, add_latency=S, chain=r < R - 1, psum_valid=(r, c) == (R - 1, 0), drain_valid=c == 0)
                m.submodules[f"pe_{r}_{c}"] = pe
                pes[r][c] = pe
                s = skew[r]
                m.d.comb += [
                    pe.a.eq(s["a"][c]), pe.valid.eq(s["valid"]), pe.first.eq(s["first"]),
                    pe.last.eq(s["last"]), pe.swap.eq(s["swap"]), pe.os.eq(s["os"]),
                    pe.b_in.eq(self.ib.data[c] if r == 0 else pes[r - 1][c].b_out),
                    pe.psum_in.eq(psum_top[c] if r == 0 else pes[r - 1][c].psum_out),
                ]
                v = vload[r * (S - 1)]
                vertical_load = v["valid"] & (v["index"] == r)
                horizontal_load = s["hl_valid"] & (s["hl_index"] == c)
                ew = len(self.ib.data[0])
                m.d.comb += [
                    pe.ib_load.eq(~os_mode & (vertical_load | horizontal_load)),
                    pe.ib_data.eq(v["data"][c * ew:(c + 1) * ew]),
                ]
                with m.If(horizontal):
                    m.d.comb += pe.ib_data.eq(s["hl_data"])

        # Drain port: a tile's rows finish S cycles apart (the skew) and the S interleaved
        # tiles of a group one cycle apart, so the drain register of row r holds one result
        # per cycle and is read in the cycle the result appears.
        # The output side reads the decoded mode (a register): a result leaves M + S >= 2 cycles
        # after its vector, and the mode is held from before the vector until then.
        drain_valid = Signal(R, name="drain_valid")
        m.d.comb += drain_valid.eq(sum((pes[r][0].drain_valid << r for r in range(R)), 0))
        with m.If(os_mode):
            for r in range(R):
                with m.If(drain_valid[r]):
                    m.d.comb += self.psum.valid.eq(1)
                    if self._status:
                        m.d.comb += self.psum.row.eq(r)
                    m.d.comb += [self.psum.data[c].eq(pes[r][c].drain) for c in range(C)]
            # more than one bit set: x & (x - 1) clears the lowest one
            if self._status:
                m.d.comb += self.overrun.eq((drain_valid & (drain_valid - 1)) != 0)
        with m.Else():
            m.d.comb += self.psum.valid.eq(pes[R - 1][0].psum_valid)
            m.d.comb += [self.psum.data[c].eq(pes[R - 1][c].psum_out) for c in range(C)]
        return m


def ce_from_config(config) -> CE:
    """``hdl.TOPS`` factory: the CE of ``config`` (``ce_rows`` x ``ce_cols``, ``datatype``)."""
    return CE(rows=config.ce_rows, cols=config.ce_cols, datatype=config.datatype,
              int_width=config.int_width, int_acc_width=config.int_acc_width,
              mul_latency=config.mul_latency, add_latency=config.add_latency)
