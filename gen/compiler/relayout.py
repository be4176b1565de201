"""On-chip re-layout: a tensor whose lane does not suit its consumer is rewritten by the TCU.

A stored tensor ``T`` with lane ``l`` is needed with lane ``q`` (another of its modes, at most
:data:`MAX_LANE_MODE` long) in another layout (mode order, ``l`` padded to whole lanes). One GEMM
does it: ``T x E -> T'`` with ``E[q, q']`` the identity, contracted over ``q``. In the OS dataflow ``T`` streams as IA (its lane ``l`` is the
m-mode), ``E`` as IB (lane ``q'``), and the result's lane is ``q'`` while ``l`` becomes a row mode
(its values ``ce_rows`` rows ``o_sk`` apart, as every result's A-lane). Renamed ``q' -> q``, that
is ``T`` in the wanted layout, bit for bit: every result value is one product by 1 plus exact zeros.

Cost: ``|T| * |q|`` MACs on the TCU (counted as padded, not useful, MACs) and the rows of the new
copy, instead of a read back and a write through DRAM that also split the run (the host re-layout
of :meth:`gen.compiler.compiler.Compiler.prepare`, still the fallback when no mapping of the
identity GEMM passes the ISA checks). A transposing distribution network would do the same
without MACs (``docs/compiler.md``).
"""

from __future__ import annotations

from gen.compiler.layout import Layout


#: the longest mode an on-chip re-layout makes the lane (the identity GEMM contracts over it)
MAX_LANE_MODE = 16


def eye_name(q: str) -> str:
    """Host-store name of the identity over mode ``q`` (modes ``q``, :func:`primed` ``q``)."""
    return f"eye[{q}]"


def primed(q: str) -> str:
    """The result-lane copy of mode ``q`` in the identity GEMM."""
    return f"{q}'"


def onchip_layout(layout: Layout, lane: str, want: Layout, sizes: dict[str, int], lanes: int,
                  align: int) -> Layout | None:
    """The layout the identity GEMM writes (lane ``q'``) when re-laying out a tensor stored in
    ``layout`` into ``want`` (lane ``lane``), or None when the TCU cannot do it in one GEMM: the lane
    is unchanged or not one of the tensor's modes, longer than :data:`MAX_LANE_MODE`, or ``want``
    does not have the old lane padded to whole lanes as the GEMM's result has
    (:meth:`gen.compiler.planner.Planner.operand_layout` makes it so)."""
    old = layout.lane
    if lane == old or lane not in layout.modes or sizes[lane] > MAX_LANE_MODE or want.lane != lane:
        return None
    sizes[primed(lane)] = sizes[lane]
    got = Layout.make(tuple(primed(lane) if m == lane else m for m in want.modes), sizes, lanes, padded=(old,),
                      align=align)
    if (got.ext, got.rstride, got.rows) != (want.ext, want.rstride, want.rows):
        return None
    return got


def eye_layout(q: str, sizes: dict[str, int], lanes: int) -> Layout:
    """Layout of the identity ``E[q, q']`` (lane ``q'``; registers the size of ``q'``)."""
    sizes[primed(q)] = sizes[q]
    return Layout.make((q, primed(q)), sizes, lanes)


__all__ = ["MAX_LANE_MODE", "eye_name", "primed", "onchip_layout", "eye_layout"]
