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
    return _onchip(layout, lane, want, sizes, lanes, align)[0]


def onchip_obstacle(layout: Layout, lane: str, want: Layout, sizes: dict[str, int], lanes: int,
                    align: int) -> str | None:
    """Why :func:`onchip_layout` gives None (one of :data:`RELAYOUT_CAUSES`), or None when it does not."""
    return _onchip(layout, lane, want, sizes, lanes, align)[1]


def _onchip(layout, lane, want, sizes, lanes, align) -> tuple[Layout | None, str | None]:
    old = layout.lane
    if lane == old or lane not in layout.modes or want.lane != lane:
        return None, "lane-not-a-mode"
    if sizes[lane] > MAX_LANE_MODE:
        return None, "long-lane"
    sizes[primed(lane)] = sizes[lane]
    got = Layout.make(tuple(primed(lane) if m == lane else m for m in want.modes), sizes, lanes, padded=(old,),
                      align=align, below=want.below)
    if (got.ext, got.rstride, got.rows) != (want.ext, want.rstride, want.rows):
        return None, "padding"
    return got, None


#: why a tensor is re-laid out through the host instead of by an identity GEMM on chip
#: (``Program.relayout_causes``; docs/compiler.md "Host re-layouts by cause")
RELAYOUT_CAUSES = {
    "host-policy": "the policy is host (capability sets without on-chip re-layout)",
    "lane-not-a-mode": "the wanted lane is not one of the tensor's stored modes (a dummy or merged lane)",
    "long-lane": f"the wanted lane mode is longer than {MAX_LANE_MODE} (one identity GEMM moves one lane block)",
    "padding": "the consumer wants a padding of the modes the identity GEMM's result cannot have",
    "no-mapping": "no CE grid / loop mapping of the identity GEMM",
    "no-room": "no room on chip for the identity and the re-laid-out copy",
    "bank-conflict": "every mapping of the identity GEMM breaks the bank rule at these addresses",
    "host-faster": "the identity GEMM takes more cycles than the DRAM round trip (policy auto)",
}


def eye_layout(q: str, sizes: dict[str, int], lanes: int) -> Layout:
    """Layout of the identity ``E[q, q']`` (lane ``q'``; registers the size of ``q'``)."""
    sizes[primed(q)] = sizes[q]
    return Layout.make((q, primed(q)), sizes, lanes)


__all__ = ["MAX_LANE_MODE", "RELAYOUT_CAUSES", "eye_name", "primed", "onchip_layout", "onchip_obstacle", "eye_layout"]
