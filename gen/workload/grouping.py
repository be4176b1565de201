"""Lowering one pairwise tensor contraction to a strided batched GEMM.

Every step of a contraction path (:class:`gen.workload.network.Step`) is a batched matrix
product once its modes are grouped (paper section V-B4, issue 6):

* ``batch`` - modes in both operands and in the result (shared-free),
* ``m``     - modes of the left operand only, kept in the result (free-of-A),
* ``n``     - modes of the right operand only, kept in the result (free-of-B),
* ``k``     - modes summed: in both operands but not the result (contracted), and
  modes of one operand alone that are summed (the other operand is broadcast
  over them with stride 0; in fetta's networks these are the size-1 boundary bonds).

``out[batch, m, n] = sum_k A[batch, m, k] * B[batch, k, n]``

:func:`group_modes` is the one definition of this grouping: the analytical model
(:func:`gen.model.cost.gemm_of`) and the compiler (:mod:`gen.compiler.planner`) use it too.

Each group is a *loop nest*: a list of (mode, size, stride) per operand, the
strides taken from the operand's layout in memory (the order of its modes, row-
major). This is what the address generators of the unified memory walk, so an
operand stored in any mode order is read without a copy - the paper's implicit
data layout reordering. The result may be written in any mode order
(``out_layout``): the next contraction then reads it in that layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Collection, Mapping, Sequence

import numpy as np

from gen.workload.network import Step


@dataclass(frozen=True)
class ModeGroups:
    """The modes of a pairwise contraction ``A x B`` by role, each group in the order of ``A``'s
    modes, then ``B``'s (every mode once)."""

    batch: tuple[str, ...]        #: in both operands, kept
    m: tuple[str, ...]            #: in ``A`` only, kept
    n: tuple[str, ...]            #: in ``B`` only, kept
    k: tuple[str, ...]            #: summed: contracted (in both) or in one operand only
    contracted: tuple[str, ...]   #: the modes of ``k`` in both operands


def group_modes(a_modes: Sequence[str], b_modes: Sequence[str], kept: Collection[str]) -> ModeGroups:
    """Group the modes of ``A`` (``a_modes``) and ``B`` (``b_modes``) when the result keeps ``kept``."""
    in_a, in_b = set(a_modes), set(b_modes)
    groups: dict[str, list[str]] = {"batch": [], "m": [], "n": [], "k": []}
    for x in dict.fromkeys(tuple(a_modes) + tuple(b_modes)):
        if x not in kept:
            groups["k"].append(x)
        elif x in in_a and x in in_b:
            groups["batch"].append(x)
        else:
            groups["m" if x in in_a else "n"].append(x)
    contracted = tuple(x for x in groups["k"] if x in in_a and x in in_b)
    return ModeGroups(*(tuple(groups[g]) for g in ("batch", "m", "n", "k")), contracted)


def row_major_strides(modes: Sequence[str], sizes: Mapping[str, int]) -> dict[str, int]:
    """Element strides of a tensor stored row-major in the given mode order."""
    strides: dict[str, int] = {}
    step = 1
    for m in reversed(modes):
        strides[m] = step
        step *= sizes[m]
    return strides


@dataclass(frozen=True)
class Loop:
    """One loop level of an address generator: a mode, its trip count, and a stride per tensor."""

    mode: str
    size: int
    a_stride: int
    b_stride: int
    out_stride: int


@dataclass(frozen=True)
class GemmView:
    """A pairwise contraction as ``out[batch, m, n] = sum_k A[batch, m, k] B[batch, k, n]``."""

    batch: tuple[Loop, ...]
    m: tuple[Loop, ...]
    n: tuple[Loop, ...]
    k: tuple[Loop, ...]
    a_layout: tuple[str, ...]
    b_layout: tuple[str, ...]
    out_layout: tuple[str, ...]

    @staticmethod
    def _size(loops: Sequence[Loop]) -> int:
        return math.prod(loop.size for loop in loops)

    @property
    def dims(self) -> tuple[int, int, int, int]:
        """``(batch, M, N, K)`` trip counts."""
        return (self._size(self.batch), self._size(self.m), self._size(self.n), self._size(self.k))

    @property
    def macs(self) -> int:
        return math.prod(self.dims)

    def offsets(self, group: str, tensor: str) -> np.ndarray:
        """Flat element offsets of ``tensor`` (``a``, ``b``, ``out``) over the loop nest of ``group``,
        outermost loop first (the order an address generator emits them)."""
        loops = getattr(self, group)
        off = np.zeros(1, dtype=np.int64)
        for loop in loops:
            stride = getattr(loop, f"{tensor}_stride")
            off = (off[:, None] + stride * np.arange(loop.size, dtype=np.int64)[None, :]).reshape(-1)
        return off

    def run(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Execute on flat arrays (float64) by walking the strides: the reference for the address generators."""
        a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
        size = math.prod(loop.size for loop in self.batch + self.m + self.n)
        out = np.zeros(size, dtype=np.result_type(a, b, np.float64))
        for bo_a, bo_b, bo_o in zip(self.offsets("batch", "a"), self.offsets("batch", "b"),
                                    self.offsets("batch", "out")):
            A = a[bo_a + self.offsets("m", "a")[:, None] + self.offsets("k", "a")[None, :]]
            B = b[bo_b + self.offsets("k", "b")[:, None] + self.offsets("n", "b")[None, :]]
            out[bo_o + self.offsets("m", "out")[:, None] + self.offsets("n", "out")[None, :]] = A @ B
        return out


def lower_step(step: Step, sizes: Mapping[str, int], out_layout: Sequence[str] | None = None) -> GemmView:
    """Group the modes of one step and derive every loop's strides.

    ``step.lhs_modes`` / ``step.rhs_modes`` are the operands' layouts in memory;
    ``out_layout`` is the order the result is written in (default ``step.out_modes``).
    """
    out_layout = tuple(step.out_modes if out_layout is None else out_layout)
    if sorted(out_layout) != sorted(step.out_modes):
        raise ValueError(f"out_layout {out_layout} is not a permutation of the result modes {step.out_modes}")
    a_modes, b_modes, out_modes = step.lhs_modes, step.rhs_modes, set(out_layout)
    sa = row_major_strides(a_modes, sizes)
    sb = row_major_strides(b_modes, sizes)
    so = row_major_strides(out_layout, sizes)

    def loop(mode: str) -> Loop:
        return Loop(mode, sizes[mode], sa.get(mode, 0), sb.get(mode, 0), so.get(mode, 0))

    g = group_modes(a_modes, b_modes, out_modes)
    batch = tuple(loop(m) for m in out_layout if m in g.batch)
    m_loops = tuple(loop(m) for m in out_layout if m in g.m)
    n_loops = tuple(loop(m) for m in out_layout if m in g.n)
    k_loops = tuple(loop(m) for m in g.k)
    return GemmView(batch, m_loops, n_loops, k_loops, tuple(a_modes), tuple(b_modes), out_layout)


__all__ = ["ModeGroups", "group_modes", "Loop", "GemmView", "lower_step", "row_major_strides"]
