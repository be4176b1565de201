"""How tensors are stored in the unified memory: layouts, lane splitting and zero padding.

* :class:`Layout` - the mode order of a stored tensor (the last mode is the *lane mode*: one row
  holds ``lanes`` consecutive values of it, zero padded to a multiple of ``lanes``), the row
  strides of the other modes, and the packing of host arrays into rows and back.
* :func:`split_modes` / :func:`padded_size` - a network whose large modes are reshaped into a
  lane-sized low half ``<m>~l`` and a high half ``<m>~h`` (zero padding a mode to a multiple of
  ``lanes`` when that adds at most :data:`PAD_WASTE`); :func:`useful_split` gives the real
  (unpadded) extents of the halves, for utilization.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from gen.workload.network import Network, Operand


def ceil_to(x: int, m: int) -> int:
    """``x`` rounded up to a multiple of ``m``."""
    return -(-x // m) * m


@dataclass(frozen=True)
class Layout:
    """Storage of one tensor in unified memory: ``modes`` in order, the last is the lane mode.

    ``ext`` are the logical (padded) extents the loops walk; the row strides may be larger
    (``align``, see :meth:`make`): ``sext`` are the storage extents they imply."""

    modes: tuple[str, ...]
    ext: tuple[int, ...]        # padded extents (lane and A-lane modes padded to ``lanes``)
    rstride: tuple[int, ...]    # row stride per mode (lane: per block of ``lanes`` values)
    rows: int
    lanes: int
    sext: tuple[int, ...] = ()  # storage extents (>= ext; the lane's in values)

    @property
    def lane(self) -> str:
        return self.modes[-1]

    def stride(self, mode: str) -> int:
        return self.rstride[self.modes.index(mode)] if mode in self.modes else 0

    @staticmethod
    def make(modes: Sequence[str], sizes: Mapping[str, int], lanes: int, padded: Sequence[str] = (),
             align: int = 0) -> "Layout":
        """Row-major layout of ``modes``. With ``align`` (= ``banks``) every row stride is rounded
        up to a power of two below ``align`` or to a multiple of ``align``: then any loop can be
        split over CEs with its stride as the spatial offset while all coarser strides stay
        multiples of the offsets' span (the XOR / bank rule of :func:`gen.design.isa.check`)."""
        modes = tuple(modes)
        ext = tuple(ceil_to(sizes[m], lanes) if (m == modes[-1] or m in padded) else sizes[m] for m in modes)
        strides = [0] * len(modes)
        step = 1
        for i in reversed(range(len(modes))):
            strides[i] = step
            step *= ext[i] // lanes if i == len(modes) - 1 else ext[i]
            if align and i:
                step = (1 << (step - 1).bit_length()) if step < align else ceil_to(step, align)
        sext = tuple((step if i == 0 else strides[i - 1]) // strides[i] * (lanes if i == len(modes) - 1 else 1)
                     for i in range(len(modes)))
        return Layout(modes, ext, tuple(strides), step, lanes, sext)

    def pack(self, arr: np.ndarray, arr_modes: Sequence[str]) -> np.ndarray:
        """Values ``arr`` (axes ``arr_modes``) -> rows ``[rows, lanes]`` (zeros in the padding)."""
        arr = np.asarray(arr, np.float32)
        src = list(arr_modes)
        for m in self.modes:           # dummy modes
            if m not in src:
                arr = arr[..., None]
                src.append(m)
        arr = np.transpose(arr, [src.index(m) for m in self.modes])
        full = np.zeros(self.sext, np.float32)
        full[tuple(slice(0, s) for s in arr.shape)] = arr
        # rows: row-major over modes, lane blocked
        full = full.reshape(*self.sext[:-1], self.sext[-1] // self.lanes, self.lanes)
        return full.reshape(self.rows, self.lanes)

    def unpack(self, rows: np.ndarray, sizes: Mapping[str, int]) -> np.ndarray:
        """Rows -> values with axes ``self.modes`` (padding dropped)."""
        full = np.asarray(rows).reshape(self.sext)
        return full[tuple(slice(0, sizes[m]) for m in self.modes)]


#: a mode that is not a multiple of ``lanes`` is zero-padded to one (and split) if that adds at most this
PAD_WASTE = 0.25


def padded_size(size: int, lanes: int, pad: bool = True) -> int:
    """The extent :func:`split_modes` gives a mode of ``size`` (itself, or padded to a multiple of ``lanes``)."""
    p = ceil_to(size, lanes)
    return p if pad and size > lanes and p != size and (p - size) <= PAD_WASTE * size else size


def split_modes(net: Network, lanes: int, pad: bool = True) -> Network:
    """The same network with every mode of size ``s > lanes`` that is a multiple of ``lanes`` (or
    becomes one by zero padding that adds at most :data:`PAD_WASTE`, e.g. 10 -> 12, 30 -> 32) reshaped
    into two modes ``<m>~h`` (``s / lanes``) and ``<m>~l`` (``lanes``), row-major (``i = h * lanes + l``).

    A reshape of every tensor, free for the host (no data moves) and invisible in the results
    (split modes stay adjacent in the output; padding is cropped). It gives every tensor
    lane-sized modes: a lane of exactly ``lanes`` values (one block, no padding) and small loops
    the compiler can split over the CE grid with the low bank bits
    (:meth:`gen.compiler.planner.Planner.candidates`). Zero padding is exact: every padded index of a
    result multiplies a zero of some input."""
    split = {}
    for m, sz in net.sizes.items():
        p = padded_size(sz, lanes, pad)
        if p > lanes and p % lanes == 0:
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


__all__ = ["Layout", "ceil_to", "PAD_WASTE", "padded_size", "split_modes", "useful_split", "base_mode",
           "has_batch"]
