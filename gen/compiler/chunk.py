"""Chunking a step that does not fit one ping-pong half: which free mode to cut, into how many pieces.

A step whose operands and result do not fit one unified half even alone (or whose mappings do not
fit the accumulation unit) is cut along a mode ``m`` its result keeps: every piece ``m@lo:hi`` is
an ordinary step on host slices of the operands holding ``m``, and the host concatenates the
pieces' results (:meth:`gen.compiler.compiler.Compiler.chunked` does that). This module chooses
``m`` and the piece size from row estimates (:func:`est_rows`), before any layout exists.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from gen.compiler.layout import ceil_to


def est_rows(modes: Sequence[str], sizes: Mapping[str, int], lanes: int) -> int:
    """Rows of a tensor, every mode padded to ``lanes`` where it could be the lane (upper bound)."""
    ms = [m for m in modes if not m.startswith("_")]
    if not ms:
        return 1
    return max(math.prod(sizes[x] for x in ms if x != lane) * -(-sizes[lane] // lanes) for lane in ms) + \
        math.prod(sizes[x] for x in ms) // lanes   # slack for padding of a second (A-lane) mode


def choose_chunk(a_modes: Sequence[str], b_modes: Sequence[str], out_modes: Sequence[str],
                 sizes: Mapping[str, int], budget: int, lanes: int,
                 candidates: Sequence[str] | None = None) -> tuple[str, int] | None:
    """``(mode, piece size)`` to cut a step ``a x b -> out`` into pieces whose estimated rows fit
    ``budget``: the fewest pieces, then the largest mode; None when no mode can be cut. The modes
    to cut are ``candidates`` (default: the modes of ``out``).

    The low halves of split modes (``~l``, lane-sized) are cut only as a last resort: that leaves
    lanes of 1-2 values (padding) and multiplies the pieces. A piece at least a lane long is
    rounded up to whole lane blocks (in case ``mode`` becomes a lane)."""
    best = None
    cands = [m for m in (out_modes if candidates is None else candidates) if sizes[m] >= 2]
    lows = [m for m in cands if m.split("@")[0].endswith("~l")]
    for m in [m for m in cands if m not in lows] or lows:
        for c in range(2, sizes[m] + 1):
            piece = -(-sizes[m] // c)
            sz = dict(sizes)
            sz[m] = piece
            rows = est_rows(a_modes, sz, lanes) + est_rows(b_modes, sz, lanes) + est_rows(out_modes, sz, lanes)
            if rows <= budget or c == sizes[m]:
                # fewest pieces that fit; among modes, the one that fits with fewest pieces
                key = (rows > budget, c, -sizes[m])
                if best is None or key < best[0]:
                    best = (key, m, c)
                break
    if best is None:
        return None
    _, m, c = best
    S = sizes[m]
    piece = -(-S // c)
    if lanes <= piece and ceil_to(piece, lanes) < S:
        piece = ceil_to(piece, lanes)    # whole lane blocks if m becomes a lane
    return m, piece


def choose_cuts(a_modes: Sequence[str], b_modes: Sequence[str], out_modes: Sequence[str],
                candidates: Sequence[str], sizes: Mapping[str, int], budget: int,
                lanes: int) -> list[tuple[str, int]] | None:
    """Cuts ``[(mode, piece size)]`` of ``candidates`` (one after the other, :func:`choose_chunk`)
    until the pieces' estimated rows fit ``budget``; None if cutting all of them does not."""
    sz = dict(sizes)
    rest = list(candidates)
    cuts: list[tuple[str, int]] = []
    while est_rows(a_modes, sz, lanes) + est_rows(b_modes, sz, lanes) + est_rows(out_modes, sz, lanes) > budget:
        ch = choose_chunk(a_modes, b_modes, out_modes, sz, budget, lanes, rest)
        if ch is None:
            return None
        cuts.append(ch)
        sz[ch[0]] = ch[1]
        rest.remove(ch[0])
    return cuts or None


def chunk_rows(a_modes: Sequence[str], b_modes: Sequence[str], cuts: Sequence[tuple[str, int]],
               sizes: Mapping[str, int], lanes: int) -> int:
    """Estimated rows the host writes to run a step in the pieces of ``cuts`` (``(mode, piece)``):
    an operand holding a cut mode is written in slices (the last ones may be zero-padded to whole
    pieces), one holding none of them once per piece."""
    n = math.prod(-(-sizes[m] // piece) for m, piece in cuts)
    sz = dict(sizes)
    sz.update(dict(cuts))
    return sum(est_rows(t, sz, lanes) * n for t in (a_modes, b_modes))


__all__ = ["est_rows", "choose_chunk", "choose_cuts", "chunk_rows"]
