"""Reference model of TensorDash's zero-skipping scheduler (seed 001, section IV; issue 18).

A lane ``i`` of a ``lanes``-wide dot-product unit multiplies, per step, one operand pair taken from
a staging buffer of ``depth`` rows (row 0: the pairs of the dense schedule's current step, rows
``1 .. depth - 1``: the next steps). Its multiplexer offers
:func:`gen.design.zeroskip.options` ``(step, lane)``: first
the dense pair ``(0, i)``, then lookahead ``(s, i)`` for ``s = 1 .. lookahead``, then lookaside
``(1, i + 1)``, ``(1, i - 1)`` and ``(s, i + s)`` for ``s = 2 .. depth - 1`` (lanes modulo
``lanes``; an option that wraps onto one already listed is left out): with ``depth = 4,
lookahead = 3`` the eight options of seed 001's Fig. 5, in its
priority order.

:func:`schedule` is one step: lanes decide one after the other (lane 0 first, seed 001 Fig. 6),
each taking the first of its options whose pair is still *effectual* (both operands non-zero and
not yet multiplied), which it then removes; ``advance`` is how many leading rows are left with no
effectual pair (they are drained and refilled from the scratchpad; always >= 1, because ``(0, i)``
belongs to lane ``i`` alone). :func:`run_stream` plays a whole stream of rows through the buffer.
"""

from __future__ import annotations

from typing import Sequence

from gen.design.zeroskip import options

__all__ = ["options", "schedule", "run_stream"]


def schedule(eff: Sequence[Sequence[bool]], opts: Sequence[tuple[int, int]]):
    """One step on the effectual-pair matrix ``eff[step][lane]``: per lane the index of the option
    it takes (or None), the pairs left, and the rows drained (module docstring)."""
    depth, lanes = len(eff), len(eff[0])
    left = [list(row) for row in eff]
    sel: list[int | None] = []
    for i in range(lanes):
        pick = None
        for k, (s, d) in enumerate(opts):
            if left[s][(i + d) % lanes]:
                pick = k
                left[s][(i + d) % lanes] = False
                break
        sel.append(pick)
    adv = 0
    while adv < depth and not any(left[adv]):
        adv += 1
    return sel, left, adv


def run_stream(rows: Sequence[Sequence[bool]], opts: Sequence[tuple[int, int]], depth: int,
               refill: int | None = None) -> int:
    """Steps to multiply every effectual pair of ``rows`` (the dense schedule, one row per step)
    through a ``depth``-row staging buffer; a dense unit takes ``len(rows)``.

    ``refill``: rows the scratchpad writes into the buffer per step (seed 001: one write port per
    buffer row, banked scratchpads). ``None``: the buffer starts full and is refilled with as many
    rows as were drained. Else it starts empty and every step first writes up to ``refill`` rows
    into its free slots, then schedules the rows written: ``refill = 1`` takes ``len(rows)`` steps
    whatever the zeros (nothing to skip to). Rows past the end are empty."""
    n = len(rows)
    if n == 0:
        return 0
    if refill is not None and refill < 1:
        raise ValueError(f"refill must be >= 1 row per step, got {refill}")
    lanes = len(rows[0])
    empty = [False] * lanes

    def row(j: int) -> list[bool]:
        return list(rows[j]) if j < n else list(empty)

    if refill is None:
        pos, steps = 0, 0
        buf = [row(k) for k in range(depth)]
        while pos < n:
            _, left, adv = schedule(buf, opts)
            steps += 1
            pos += adv
            buf = left[adv:] + [row(pos + depth - adv + k) for k in range(adv)]
        return steps
    pos, steps, filled = 0, 0, 0            # filled: rows written beyond the head
    buf = [list(empty) for _ in range(depth)]
    while pos < n:
        for _ in range(min(refill, depth - filled, n - pos - filled)):
            buf[filled] = row(pos + filled)
            filled += 1
        _, left, adv = schedule(buf, opts)
        adv = min(adv, filled)              # a row not written yet cannot drain
        steps += 1
        pos += adv
        filled -= adv
        buf = left[adv:] + [list(empty) for _ in range(adv)]
    return steps
