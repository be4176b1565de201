"""The plans of one pairwise step (:mod:`gen.compiler.planner`): before mapping (:class:`Candidate`)
and mapped (:class:`Plan`), and what the planner knows of the consumer step (:data:`NextInfo`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from gen.compiler.allocate import Tensor
from gen.compiler.layout import Layout
from gen.compiler.mapping import Mapping_
from gen.design.isa import Dataflow

#: (modes of the consumer's other operand, modes the consumer keeps, that operand's tensor if it exists yet)
NextInfo = tuple[set[str], set[str], "Tensor | None"]


class Candidate(NamedTuple):
    """A plan before mapping: roles, lanes (None: a dummy lane), the modes each grid index splits."""

    est: float
    X: Tensor
    Y: Tensor
    alpha: str | None
    beta: str | None
    gm: str | None
    gn: str | None
    gk: str | None
    penalty: int
    #: the dataflow: ``OS``, or ``WS`` / ``WS_H`` with ``alpha`` the contracted lane of X
    mode: int = Dataflow.OS


@dataclass
class Plan:
    """A mapped plan: roles, lanes, the layouts of the operands to write or re-lay out (None: use
    the one on chip), the result's layout, the modes kept and contracted, and its mappings (fastest
    first)."""

    X: Tensor
    Y: Tensor
    alpha: str
    beta: str
    xo: Layout | None
    yo: Layout | None
    lo: Layout
    keep_modes: list[str]
    kmodes: list[str]
    mappings: tuple[Mapping_, ...]
    #: the dataflow of the mappings (:class:`Candidate`)
    mode: int = Dataflow.OS


__all__ = ["Candidate", "Plan", "NextInfo"]
