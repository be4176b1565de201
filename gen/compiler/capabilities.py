"""Architectures and ablations as capability sets of the one compiler (FETTA Table I, III-B, VII-D).

Every architecture ``fetta model --arch`` knows is compiled by :func:`gen.compiler.compile_layer`
and timed by the rules the emulator and the RTL follow (:meth:`gen.compiler.program.Program.timeline`:
instruction timing plus DRAM transfers by :mod:`gen.design.timing`). What distinguishes two
architectures is what the compiler may use, never a formula of its own. Same MAC count, clock,
memories and DRAM bandwidth for all (FETTA VI-B: "the number of MAC units is scaled to 256 ... the
same total on-chip memory").

A :class:`Capabilities` names, with the paper's section it comes from:

``array``
    ``grid``: the configuration's CEs behind the distribution / reduction networks; ``square``: one
    ``sqrt(macs) x sqrt(macs)`` PE array (a TPU-like systolic array: one CE, no networks, rows of
    ``sqrt(macs)`` elements in two banks).
``k_split``
    a contracted mode may be split over CEs (the reduction network adds across CEs, FETTA V-B3).
``views``
    on-chip tensors may be read through the distribution networks' transpose layers (FETTA V-B2).
``transposes``
    results may be written through the reduction network's transpose layer with the lane their
    consumer contracts (FETTA V-B3; :mod:`gen.compiler.transposed`; ``None``: where that is faster).
``stationary``
    the dataflow switch: a step may run weight- / input-stationary (vertical or horizontal IB loads)
    to read an operand whose lane is a contracted mode as it lies (FETTA II-C, Fig. 12); ``False``:
    output-stationary only.
``relayout``
    where a tensor whose layout does not suit its consumer is reordered: ``auto`` (the cheaper of an
    identity GEMM on chip and a round trip through DRAM), ``onchip`` (the identity GEMM: an explicit
    transpose on the array), ``host`` (through DRAM: read back and written again, timed as DRAM traffic).
``reuse``
    training-aware WG (FETTA IV-A: WG networks re-solved with the saved FP / BP intermediates).
``pieces``
    batch pieces for ping-pong overlap of DRAM and compute (``None``: the compiler's choice; 1: none).
``path``
    the contraction order: ``optimal`` (the CSSE), or a fixed one (:data:`PATHS`).
``dist_scale``, ``red_scale``
    the energy of a distribution / reduction network access relative to FETTA's butterflies (the
    per-access energies of :data:`gen.model.ENERGY_PJ`): SIGMA's Benes distribution 2x (V-B4); 0
    where the architecture has no such network (TRETA, the TPU's systolic array).

What the engine cannot take away is listed per architecture in :data:`NOT_MODELED` (each such gap
favours the baseline). The baselines' GEMMs are output-stationary: on this datapath a
weight-stationary tile has the same period as an output-stationary one
(:func:`gen.design.isa.tile_period`), the stationary side padding its contraction into the PE rows
as OS pads it in time, so their fixed-dataflow arrays are timed with OS tiles of the same shape,
and the engine picks the better operand orientation for them. Only FETTA switches dataflows per
step (``stationary``), which is what a fixed dataflow cannot do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from gen.compiler.phases import compile_layer
from gen.compiler.program import CompileError, Program
from gen.design.config import FettaConfig
from gen.errors import ConfigError
from gen.search.baselines import baseline_path
from gen.workload.network import phase_networks

#: named contraction orders (``--path``): the CSSE's and the fixed ones of other works
#: (:mod:`gen.search.baselines`; ``right`` absorbs the inputs in reverse storage order; ``tetrix``:
#: Tetrix's search, every node absorbed into the input in the best order)
PATHS = ("optimal", "btt", "ette", "left", "right", "tetrix")
_PATH_FUNCS = {"btt": "btt", "ette": "ette", "left": "left_to_right", "right": "right_to_left", "tetrix": "tetrix"}


@dataclass(frozen=True)
class Capabilities:
    """What one architecture may use of the engine (module docstring)."""

    name: str
    #: one line: what it is, and the section of the paper it comes from
    doc: str
    array: str = "grid"
    k_split: bool = True
    views: bool | None = None
    transposes: bool | None = None
    stationary: bool | None = None
    relayout: str = "auto"
    reuse: bool = True
    pieces: int | None = None
    path: str = "optimal"
    dist_scale: float = 1.0
    red_scale: float = 1.0

    def config(self, config: FettaConfig) -> FettaConfig:
        """The design this architecture runs on: ``config`` itself, or its MACs as one square array."""
        if self.array == "grid":
            return config
        side = math.isqrt(config.macs)
        if side * side != config.macs:
            raise ConfigError(f"{self.name} is one square array: needs a square MAC count, got {config.macs}",
                              field="num_ces")
        return config.replace(num_ces=1, ce_rows=side, ce_cols=side, lanes=side, banks=2, net_ports=2)

    def compile(self, spec, phase: str, config: FettaConfig,
                paths: Mapping[str, Sequence[Sequence[int]]] | None = None, dram: str = "rule") -> Program:
        """``phase`` of ``spec`` compiled with these capabilities for :meth:`config` of ``config``
        (``paths`` replaces the capability's own order; ``dram``: :func:`compile_layer`'s)."""
        paths = paths if paths is not None else named_paths(spec, phase, self.path)
        return compile_layer(spec, phase, self.config(config), paths, reuse=self.reuse and self.path == "optimal",
                             pieces=self.pieces, relayout=self.relayout, views=self.views, k_split=self.k_split,
                             stationary=self.stationary, transposes=self.transposes, dram=dram)


def named_paths(spec, phase: str, name: str) -> dict[str, list[list[int]]] | None:
    """Path ``name`` (:data:`PATHS`) of every network of ``phase`` (``train``: fp, bp and wg), by
    label; None for ``optimal``."""
    if name not in PATHS:
        raise CompileError(f"must be one of {', '.join(PATHS)}, got {name!r}", field="path")
    if name == "optimal":
        return None
    phases = ["fp", "bp", "wg"] if phase == "train" else [phase]
    return {net.label: baseline_path(_PATH_FUNCS[name], net) for ph in phases for net in phase_networks(spec, ph)}


#: the architectures of FETTA's comparison (Table I, VI-B), each on the same engine
ARCHS: dict[str, Capabilities] = {c.name: c for c in (
    Capabilities("fetta", "FETTA: every capability of the engine (sections IV, V)"),
    Capabilities("sigma", "SIGMA: flexible distribution and reduction (Benes: 2x switching energy, V-B4), "
                 "no transposition: reorders through DRAM (Table I, III-B3, VII-D2)",
                 views=False, transposes=False, relayout="host", stationary=False, dist_scale=2.0),
    Capabilities("treta", "TRETA: CE array, no flexible reduction (no cross-CE sums), no transposition: "
                 "reorders through DRAM (Table I, III-B3, VII-D3)",
                 k_split=False, views=False, transposes=False, relayout="host", stationary=False, dist_scale=0.0,
                 red_scale=0.0),
    Capabilities("tpu", "TPU: one 16x16 systolic array, fixed dataflow, explicit transposes on the array "
                 "(III-B2, VII-C)",
                 array="square", views=False, transposes=False, relayout="onchip", stationary=False,
                 dist_scale=0.0, red_scale=0.0),
    Capabilities("tpu-offchip", "TPU-offchip: as tpu, but tensors are reordered through DRAM (VII-D1)",
                 array="square", views=False, transposes=False, relayout="host", stationary=False,
                 dist_scale=0.0, red_scale=0.0),
)}

#: what the engine cannot take away from an architecture (each gap favours it)
NOT_MODELED = {
    "sigma": "its stationary-only dataflow (timed with OS tiles of the same period)",
    "treta": "its lack of multicast (the engine's butterfly multicasts; TRETA duplicates copies on chip)",
    "tpu": "its fixed weight-stationary loop order (timed with OS tiles of the same period, either orientation)",
    "tpu-offchip": "as tpu",
}

_FETTA = ARCHS["fetta"]
#: FETTA with one capability taken away each (``python -m benchmarks compare``'s ablation)
ABLATIONS: dict[str, Capabilities] = {c.name: c for c in (
    replace(_FETTA, name="no-transpose-views", doc="no distribution-network transpose layers", views=False),
    replace(_FETTA, name="no-dataflow-switch", doc="output-stationary only: no per-step WS / IS", stationary=False),
    replace(_FETTA, name="no-onchip-reorder", doc="no on-chip reordering (views, output transposes, dataflow switch, "
            "identity GEMMs): through DRAM", views=False, transposes=False, relayout="host", stationary=False),
    replace(_FETTA, name="no-k-split", doc="no cross-CE sums in the reduction network", k_split=False),
    replace(_FETTA, name="no-training-aware", doc="WG without the saved FP / BP intermediates", reuse=False),
    replace(_FETTA, name="no-ping-pong", doc="the whole batch at once: no batch pieces overlapping DRAM",
            pieces=1),
    replace(_FETTA, name="path-ette", doc="ETTE's fixed order (seed 002)", path="ette"),
    replace(_FETTA, name="path-btt", doc="BTT's fixed order (seed 003)", path="btt"),
)}


def capabilities(name: str) -> Capabilities:
    """The architecture or ablation ``name``."""
    found = ARCHS.get(name) or ABLATIONS.get(name)
    if found is None:
        raise CompileError(f"unknown architecture {name!r} (known: {', '.join([*ARCHS, *ABLATIONS])})",
                           field="arch")
    return found


__all__ = ["PATHS", "Capabilities", "ARCHS", "ABLATIONS", "NOT_MODELED", "capabilities", "named_paths"]
