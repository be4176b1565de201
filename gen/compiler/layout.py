"""How tensors are stored in the unified memory: layouts, lane splitting and zero padding.

* :class:`Layout` - the mode order of a stored tensor (the last mode is the *lane mode*: one row
  holds ``lanes`` consecutive values of it, zero padded to a multiple of ``lanes``), the row
  strides of the other modes, and the packing of host arrays into rows and back.
* :func:`split_modes` / :func:`padded_size` - a network whose large modes are reshaped into a
  lane-sized low half ``<m>~l`` and a high half ``<m>~h`` (zero padding a mode to a multiple of
  ``lanes`` when that adds at most :data:`PAD_WASTE`; :class:`Shaping` says which modes);
  :func:`useful_split` gives the real (unpadded) extents of the halves, for utilization.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from gen.workload.network import Network, Operand


def ceil_to(x: int, m: int) -> int:
    """``x`` rounded up to a multiple of ``m``."""
    return -(-x // m) * m


@dataclass(frozen=True)
class Layout:
    """Storage of one tensor in unified memory: ``modes`` in order, the last is the lane mode.

    ``ext`` are the logical (padded) extents the loops walk; the row strides may be larger
    (``align``, see :meth:`make`): ``sext`` are the storage extents they imply. A lane mode of
    several blocks has its blocks innermost (block stride 1) unless ``below`` row modes (the last
    ones of ``modes[:-1]``) sit below them (:meth:`make`)."""

    modes: tuple[str, ...]
    ext: tuple[int, ...]        # padded extents (lane and A-lane modes padded to ``lanes``)
    rstride: tuple[int, ...]    # row stride per mode (lane: per block of ``lanes`` values)
    rows: int
    lanes: int
    sext: tuple[int, ...] = ()  # storage extents (>= ext; the lane's in values); lane blocks innermost only
    #: row modes (the last of ``modes[:-1]``) whose strides are below the lane's block stride
    below: int = 0

    @property
    def lane(self) -> str:
        return self.modes[-1]

    def stride(self, mode: str) -> int:
        return self.rstride[self.modes.index(mode)] if mode in self.modes else 0

    @staticmethod
    def make(modes: Sequence[str], sizes: Mapping[str, int], lanes: int, padded: Sequence[str] = (),
             align: int = 0, below: int = 0) -> "Layout":
        """Row-major layout of ``modes``. With ``align`` (= ``banks``) every row stride is rounded
        up to a power of two below ``align`` or to a multiple of ``align``: then any loop can be
        split over CEs with its stride as the spatial offset while all coarser strides stay
        multiples of the offsets' span (the XOR / bank rule of :func:`gen.design.isa.check`).

        ``below``: the lane's blocks (a lane mode longer than ``lanes``) sit above the last ``below``
        row modes instead of innermost, so that those modes keep the lowest row strides (the spatial
        offsets of a CE-grid split must be the low bank bits, and every other stride a multiple of
        their span: blocks of stride 1 break that). Ignored for a lane of one block."""
        modes = tuple(modes)
        ext = tuple(ceil_to(sizes[m], lanes) if (m == modes[-1] or m in padded) else sizes[m] for m in modes)
        n = len(modes)
        below = below if ext[-1] > lanes else 0
        if not 0 <= below < n:
            raise ValueError(f"below={below} needs that many row modes above the lane ({modes})")
        # the row loops from outermost to innermost: mode indices, the lane's blocks (n - 1) among them
        seq = list(range(n - 1 - below)) + [n - 1] + list(range(n - 1 - below, n - 1))
        strides = [0] * n
        step = 1
        for pos in reversed(range(n)):
            i = seq[pos]
            strides[i] = step
            step *= ext[i] // lanes if i == n - 1 else ext[i]
            if align and pos:
                step = (1 << (step - 1).bit_length()) if step < align else ceil_to(step, align)
        if below:
            sext = ext     # storage extents describe lane-innermost layouts only (pack / unpack index)
        else:
            sext = tuple((step if i == 0 else strides[i - 1]) // strides[i] * (lanes if i == n - 1 else 1)
                         for i in range(n))
        return Layout(modes, ext, tuple(strides), step, lanes, sext, below)

    def _index(self) -> tuple[np.ndarray, np.ndarray]:
        """Row and lane of every value of the padded extents ``ext`` (broadcast arrays)."""
        n = len(self.modes)
        row = np.zeros((1,) * n, np.int64)
        for i, (e, st) in enumerate(zip(self.ext, self.rstride)):
            ax = np.arange(e, dtype=np.int64)
            if i == n - 1:
                ax = ax // self.lanes
            row = row + (ax * st).reshape([-1 if j == i else 1 for j in range(n)])
        col = (np.arange(self.ext[-1]) % self.lanes).reshape([1] * (n - 1) + [-1])
        return row, col

    def pack(self, arr: np.ndarray, arr_modes: Sequence[str]) -> np.ndarray:
        """Values ``arr`` (axes ``arr_modes``) -> rows ``[rows, lanes]`` (zeros in the padding)."""
        arr = np.asarray(arr, np.float32)
        src = list(arr_modes)
        for m in self.modes:           # dummy modes
            if m not in src:
                arr = arr[..., None]
                src.append(m)
        arr = np.transpose(arr, [src.index(m) for m in self.modes])
        if self.below:
            full = np.zeros(self.ext, np.float32)
            full[tuple(slice(0, s) for s in arr.shape)] = arr
            out = np.zeros((self.rows, self.lanes), np.float32)
            row, col = self._index()
            out[row, col] = full
            return out
        full = np.zeros(self.sext, np.float32)
        full[tuple(slice(0, s) for s in arr.shape)] = arr
        # rows: row-major over modes, lane blocked
        full = full.reshape(*self.sext[:-1], self.sext[-1] // self.lanes, self.lanes)
        return full.reshape(self.rows, self.lanes)

    def unpack(self, rows: np.ndarray, sizes: Mapping[str, int]) -> np.ndarray:
        """Rows -> values with axes ``self.modes`` (padding dropped)."""
        if self.below:
            row, col = self._index()
            full = np.asarray(rows).reshape(self.rows, self.lanes)[row, col]
            return full[tuple(slice(0, sizes[m]) for m in self.modes)]
        full = np.asarray(rows).reshape(self.sext)
        return full[tuple(slice(0, sizes[m]) for m in self.modes)]


#: a mode that is not a multiple of ``lanes`` is zero-padded to one (and split) if that adds at most this
PAD_WASTE = 0.25


class Shaping(NamedTuple):
    """How :func:`split_modes` reshapes a network's modes.

    ``pad``: zero-pad a mode to a multiple of ``lanes`` where that adds at most :data:`PAD_WASTE`.
    ``odd``: split a mode whose high half ``~h`` is odd too. With ``odd=False`` such a mode (UCF's
    20 = 5 x 4) stays whole and unpadded: an odd high half cannot be split over the CE grid (not a
    power of two), and as the lane of an operand it fills 5 of 8 lanes, padding MACs and the rows
    written to DRAM (UCF BT bp's ``dX`` 1.6x); whole, a mode of 20 is a lane of 5 full blocks."""

    pad: bool = False
    odd: bool = True


def _splits(p: int, lanes: int, odd: bool) -> bool:
    """Does :func:`split_modes` split a mode of (padded) extent ``p``?"""
    return p > lanes and p % lanes == 0 and (odd or (p // lanes) % 2 == 0)


def padded_size(size: int, lanes: int, pad: bool = True, odd: bool = True) -> int:
    """The extent :func:`split_modes` gives a mode of ``size`` (itself, or padded to a multiple of
    ``lanes``; :class:`Shaping` for ``pad`` and ``odd``)."""
    p = ceil_to(size, lanes)
    p = p if pad and size > lanes and p != size and (p - size) <= PAD_WASTE * size else size
    return p if p == size or _splits(p, lanes, odd) else size


def split_modes(net: Network, lanes: int, pad: bool = True, odd: bool = True) -> Network:
    """The same network with every mode of size ``s > lanes`` that is a multiple of ``lanes`` (or
    becomes one by zero padding that adds at most :data:`PAD_WASTE`, e.g. 10 -> 12, 30 -> 32) reshaped
    into two modes ``<m>~h`` (``s / lanes``) and ``<m>~l`` (``lanes``), row-major (``i = h * lanes + l``);
    with ``odd=False`` only where ``s / lanes`` is even (:class:`Shaping`).

    A reshape of every tensor, free for the host (no data moves) and invisible in the results
    (split modes stay adjacent in the output; padding is cropped). It gives every tensor
    lane-sized modes: a lane of exactly ``lanes`` values (one block, no padding) and small loops
    the compiler can split over the CE grid with the low bank bits
    (:meth:`gen.compiler.planner.Planner.candidates`). Zero padding is exact: every padded index of a
    result multiplies a zero of some input."""
    split = {}
    for m, sz in net.sizes.items():
        p = padded_size(sz, lanes, pad, odd)
        if _splits(p, lanes, odd):
            split[m] = (f"{m}~h", f"{m}~l", p)
    if not split:
        return net

    def ren(modes: Sequence[str]) -> tuple[str, ...]:
        return tuple(x for m in modes for x in (split[m][:2] if m in split else (m,)))

    sizes: dict[str, int] = {}
    for m, sz in net.sizes.items():
        if m in split:
            h, lo, p = split[m]
            sizes[h], sizes[lo] = p // lanes, lanes
        else:
            sizes[m] = sz
    return replace(net, inputs=tuple(Operand(op.name, ren(op.modes)) for op in net.inputs),
                   output=ren(net.output), sizes=sizes)


def useful_split(m: str, size: int, lanes: int) -> dict[str, float]:
    """Real (unpadded) extents of the halves :func:`split_modes` makes of mode ``m`` of ``size``
    (the ``~h`` half a fraction: the two multiply to ``size``)."""
    return {f"{m}~h": size / lanes, f"{m}~l": float(lanes)}


def base_mode(m: str) -> str:
    """The network mode a compiler mode stands for: ``b~h@0:2`` / ``b~l#4`` / ``b'`` -> ``b``."""
    m = m.split("@")[0].split("#")[0].rstrip("'")
    return m[:-2] if m.endswith(("~h", "~l")) else m


def has_batch(modes: Sequence[str]) -> bool:
    """Does a tensor of ``modes`` hold (part of) the batch mode ``b``?"""
    return any(base_mode(m) == "b" for m in modes)


__all__ = ["Layout", "ceil_to", "PAD_WASTE", "Shaping", "padded_size", "split_modes", "useful_split", "base_mode",
           "has_batch"]
