"""Architecture descriptions for the analytical model (:mod:`gen.model`).

Every architecture gets the same MAC count (``FettaConfig.macs``, 256 by
default), the same precision and the same on-chip memory (FETTA section VI-B:
"the number of MAC units is scaled to 256 ... the same total on-chip memory").
They differ in what the paper says distinguishes them (sections III-B, VII-D,
Table I):

``fetta``
    ``num_ces`` CEs of ``ce_rows x ce_cols`` PEs; IS, WS and OS dataflows in
    either PE-array orientation (six mappings, section V-B1); any split of the
    GEMM dimensions across CEs, including the contracted dimension (the
    reduction network adds across CEs); multicast through the distribution
    network; on-chip layout reordering (transposable networks, XOR bank index:
    no bank conflicts), so stored layouts never cost anything.
``tpu``
    One ``16 x 16`` weight-stationary systolic array (``sqrt(macs)`` square),
    fixed loop order and parallelism, fixed row-major layouts: an operand whose
    stored layout does not put the fetched dimension innermost is fetched in
    short runs (strided access), which stalls the array.
``tpu-offchip``
    As ``tpu``, but a mismatched operand is re-laid out through DRAM first
    (read + write of the whole operand at DRAM bandwidth, section VII-D1).
``sigma``
    Flexible dot-product engine over all PEs (arbitrary spatial shapes, Benes
    distribution: twice the switching energy of a butterfly, section V-B4), WS
    and IS; no layout reordering, so a mismatched layout causes bank conflicts:
    each bank access yields only the contiguous run of useful elements.
``treta``
    Hierarchical CE array like FETTA with WS and OS, flexible loop order; no
    flexible distribution/reduction networks: no reduction across CEs (the
    contracted dimension is not split across CEs) and multicast by duplicated
    on-chip copies (extra SRAM writes and reads); layout reordering off-chip.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gen.design.config import FettaConfig
from gen.errors import ConfigError

ARCHS = ("fetta", "tpu", "tpu-offchip", "sigma", "treta")
#: how a layout mismatch is handled: ``free`` (on-chip reordering), ``stride``
#: (strided fetch stalls), ``offchip`` (re-layout through DRAM), ``conflict`` (bank conflicts)
LAYOUT_POLICIES = ("free", "stride", "offchip", "conflict")


@dataclass(frozen=True)
class Arch:
    """One architecture as the model sees it."""

    name: str
    #: processing groups (CEs) and the PE array of each
    ces: int
    rows: int
    cols: int
    #: intra-group dataflows: ``os`` (output stationary), ``ws``, ``is``
    dataflows: tuple[str, ...]
    #: both PE-array orientations allowed (transposable IB datapath)
    transposable: bool
    #: the contracted dimension may be split across groups (reduction network)
    k_split: bool
    #: data shared by groups is read once and multicast
    multicast: bool
    #: a group is a flexible dot-product engine (any rows x cols with rows*cols <= PEs)
    flexible_shape: bool
    layout: str
    #: relative energy of the distribution / reduction networks (1 = FETTA's butterflies)
    dist_scale: float
    red_scale: float

    @property
    def pes(self) -> int:
        return self.ces * self.rows * self.cols


def get_arch(name: str, config: FettaConfig) -> Arch:
    """The architecture ``name`` sized to ``config`` (same MAC count for all)."""
    c = config
    if name == "fetta":
        return Arch("fetta", c.num_ces, c.ce_rows, c.ce_cols, ("os", "ws", "is"), True, True, True, False,
                    "free", 1.0, 1.0)
    if name in ("tpu", "tpu-offchip"):
        side = math.isqrt(c.macs)
        if side * side != c.macs:
            raise ConfigError(f"the tpu baseline needs a square MAC count, got {c.macs}", field="num_ces")
        return Arch(name, 1, side, side, ("ws",), False, False, True, False,
                    "stride" if name == "tpu" else "offchip", 0.0, 0.0)
    if name == "sigma":
        return Arch("sigma", 1, c.macs, 1, ("ws", "is"), True, True, True, True, "conflict", 2.0, 1.0)
    if name == "treta":
        return Arch("treta", c.num_ces, c.ce_rows, c.ce_cols, ("os", "ws"), True, False, False, False,
                    "offchip", 0.0, 0.0)
    raise ConfigError(f"unknown architecture {name!r} (known: {', '.join(ARCHS)})", field="arch")


__all__ = ["ARCHS", "LAYOUT_POLICIES", "Arch", "get_arch"]
