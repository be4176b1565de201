"""Hypothesis strategies for layer specs of every format (small sizes for exhaustive checks)."""

from __future__ import annotations

import os

import pytest
from hypothesis import strategies as st

from gen.workload.spec import parse_spec

#: ``make test-full`` sets ``FETTA_TESTS=full``: the randomized tests then draw their full example
#: counts; ``make test`` draws fewer (the same properties, fewer random cases, to stay near 25 minutes)
FULL = os.environ.get("FETTA_TESTS") == "full"


def examples(ci: int, full: int) -> int:
    """Hypothesis ``max_examples`` of a randomized test: ``full`` under ``make test-full``, else ``ci``."""
    return full if FULL else ci


def covering(firsts, seconds) -> list:
    """Parameters ``(a, b)`` of a test over two axes (a tuple value gives one argument per item):
    every pair, those off the diagonal ``(firsts[i % n], seconds[i % m])``, ``i < max(n, m)``, marked
    ``slow``. So ``make test`` runs a set in which every value of each axis appears, and
    ``make test-full`` the whole product."""
    n, m = len(firsts), len(seconds)
    diagonal = {(firsts[i % n], seconds[i % m]) for i in range(max(n, m))}

    def args(v):
        return v if isinstance(v, tuple) else (v,)

    return [pytest.param(*args(a), *args(b), marks=() if (a, b) in diagonal else pytest.mark.slow)
            for a in firsts for b in seconds]


@st.composite
def specs(draw, formats=("dense", "tt", "tr", "ttm", "ht", "bt", "tucker"), max_mode=4, max_modes=3,
          max_rank=3, max_batch=3):
    fmt = draw(st.sampled_from(formats))
    di = draw(st.integers(1, max_modes))
    do = di if fmt == "ttm" else draw(st.integers(1, max_modes))
    mode = st.integers(1, max_mode)
    in_modes = draw(st.lists(mode, min_size=di, max_size=di))
    out_modes = draw(st.lists(mode, min_size=do, max_size=do))
    d = {"name": "h", "format": fmt, "in_modes": in_modes, "out_modes": out_modes,
         "batch": draw(st.integers(1, max_batch))}
    rank = st.integers(1, max_rank)
    if fmt != "dense":
        D = di + do
        if fmt in ("tt", "tr", "ttm") and draw(st.booleans()):
            n = {"tt": D - 1, "tr": D, "ttm": di - 1}[fmt]
            d["ranks"] = draw(st.lists(rank, min_size=n, max_size=n))
        else:
            d["ranks"] = draw(rank)
    if fmt == "bt":
        d["blocks"] = draw(st.integers(1, 3))
    return parse_spec(d)
