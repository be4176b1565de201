"""The connectivity of TensorDash's zero-skipping multiplexers (seed 001, Fig. 5; issue 18): shared by
the scheduler block (:mod:`hdl.zs_sched`) and its reference model (:mod:`sim.zs_model`)."""

from __future__ import annotations

__all__ = ["options"]


def options(lanes: int, depth: int, lookahead: int, lookaside: bool = True) -> list[tuple[int, int]]:
    """The ``(step, lane offset)`` candidates of a lane of a ``lanes``-wide unit with a ``depth``-row
    staging buffer, in priority order: the dense pair ``(0, 0)``, lookahead ``(s, 0)`` for
    ``s = 1 .. lookahead``, then lookaside ``(1, +1)``, ``(1, -1)`` and ``(s, +s)`` for
    ``s = 2 .. depth - 1`` (lane offsets modulo ``lanes``; an option that wraps onto one already
    listed is left out). ``options(4, 4, 3)`` is seed 001's Fig. 5. ``lookaside=False``: the
    lookahead options only, where a lane's neighbour computes another output (an output-stationary
    PE row, ``docs/zero_skip.md``)."""
    if not 1 <= lookahead < depth:
        raise ValueError(f"lookahead must be 1 .. depth - 1 = {depth - 1}, got {lookahead}")
    opts = [(0, 0)] + [(s, 0) for s in range(1, lookahead + 1)]
    if not lookaside:
        return opts
    side = [(1, 1), (1, -1)] + [(s, s) for s in range(2, depth)]
    seen = {(st, d % lanes) for st, d in opts}
    for st, d in side:                       # a narrow unit wraps some of them onto one pair: once
        if (st, d % lanes) not in seen and st < depth:
            seen.add((st, d % lanes))
            opts.append((st, d))
    return opts
