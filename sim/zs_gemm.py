"""Zero skipping projected onto the accelerator's dense GEMM (issue 18): what the scheduler of
:mod:`sim.zs_model` would save on the output-stationary passes of :func:`gen.compiler.gemm.plan_gemm`,
and what bounds it. A model of a design not built yet (``docs/zero_skip.md``, "Projection"), not a
measurement of the RTL.

The mapping is the tiler's: a pass is one OS ``GEMM`` over ``tiles`` output tiles per CE, the CE
``(im, in, ik)`` of the grid ``(gm, gn, gk)`` computing, per tile, the ``R x C`` block of rows
``R * mb ..`` (``mb = l1 * gm + im``) and columns ``C * nb ..`` (``nb = l0 * gn + in``) over its
``Kc = Kp / gk`` values of ``k``. Per the integration rationale of ``docs/zero_skip.md``, each
CE gets a ``zero_skip_depth``-deep staging buffer of (IA, IB) vectors, one per ``k``, and every PE
row its own lookahead-only schedule (``options(R, depth, lookahead, lookaside=False)``: a
neighbouring row computes other outputs) from its IA element, the rows sharing the buffer
(:func:`sim.zs_model.run_stream` with ``R`` lanes). A row's pair at ``k`` is *effectual* when its
IA element ``A[m, k]`` is non-zero and the CE's IB vector ``B[k, C nb ..]`` is not all zero (the
row takes the whole vector). Three bounds shape the cycles:

* the **feed**: the buffer is refilled with at most ``refill`` vectors (IA and IB of one ``k``)
  per cycle. Today's distribution networks give every CE one of each per cycle (``refill = 1``:
  no speedup beyond the buffer's first fill); seed 001 banks its scratchpads to refill more. The
  unified memory's two read ports allow :func:`feed_limit` per cycle under a grid (the tiler's
  ``(1, 16, 1)`` for a 256^3 GEMM: 1, its 16 IB vectors per ``k`` take every bank's IB port);
* the **drain**: an OS tile's ``R`` rows leave one per cycle, so a tile takes at least ``R``
  cycles (the dense rule ``max(K, R)`` of :func:`gen.design.isa.os_gemm_cycles`);
* **lock step**: one ``GEMM`` drives all CEs, so a tile ends when the slowest CE's does
  (``lockstep``); ``decoupled`` lets each CE run its tiles back to back (a per-CE output queue
  the controller does not have), the pass ending with the slowest CE.

Only ``add_latency = 1`` (one tile in flight per CE, the default design) is modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gen.compiler.gemm import plan_gemm
from gen.design.config import FettaConfig
from gen.design.isa import Geometry, gemm_latency, os_gemm_cycles
from gen.design.timing import program_cycles
from sim.zs_model import options, run_stream

__all__ = ["Projection", "project_gemm", "effectual_macs", "feed_limit"]


@dataclass(frozen=True)
class Projection:
    """Cycles of the GEMM's passes (their programs' static count) dense and with zero skipping."""

    dense: int
    lockstep: int
    decoupled: int
    #: MACs with both operands non-zero, and all MACs of the (unpadded) GEMM
    effectual: int
    macs: int
    grid: tuple[int, int, int]

    def speedup(self, which: str = "lockstep") -> float:
        return self.dense / getattr(self, which)

    def ideal(self, depth: int) -> float:
        """Effectual MACs only, capped by the buffer depth (a row drains at most ``depth`` values
        of ``k`` per cycle)."""
        return min(float(depth), self.macs / max(1, self.effectual))


def effectual_macs(A: np.ndarray, B: np.ndarray) -> int:
    """MACs ``A[m, k] * B[k, n]`` with both operands non-zero."""
    return int(((A != 0).sum(axis=0).astype(np.int64) * (B != 0).sum(axis=1)).sum())


def feed_limit(config: FettaConfig, grid: tuple[int, int, int]) -> int:
    """The most ``k`` per cycle the unified memory can refill every CE's buffer with under ``grid``,
    bank conflicts aside: a ``k`` needs ``gm * gk`` distinct IA vectors and ``gn * gk`` distinct IB
    vectors, and each of the two read ports (IA, IB) reads one row per bank per cycle."""
    gm, gn, gk = grid
    return max(1, min(config.banks // (gm * gk), config.banks // (gn * gk)))


def project_gemm(config: FettaConfig, A: np.ndarray, B: np.ndarray, refill: int | None = 1,
                 grid: tuple[int, int, int] | None = None) -> Projection:
    """The GEMM ``A @ B`` as :func:`plan_gemm` maps it (on ``grid`` if given), dense and with zero
    skipping (module docstring; ``refill``: vectors per cycle the buffer is refilled with, None:
    unlimited; :func:`feed_limit` is what the memory allows)."""
    if config.add_latency != 1:
        raise ValueError(f"the projection models add_latency = 1 only, got {config.add_latency}")
    R, C, D = config.ce_rows, config.ce_cols, config.zero_skip_depth
    opts = options(R, D, config.zero_skip_lookahead, lookaside=False)
    plan = plan_gemm(config, np.zeros(A.shape, np.float32), np.zeros(B.shape, np.float32), grid=grid)
    geo = Geometry.of(config)
    gm, gn, gk = plan.grid
    Kc = plan.Kp // gk
    Ap = np.zeros((-(-A.shape[0] // plan.passes[0].Mc) * plan.passes[0].Mc, plan.Kp), bool)
    Ap[:A.shape[0], :A.shape[1]] = A != 0
    Bp = np.zeros((plan.Kp, -(-B.shape[1] // plan.passes[0].Nc) * plan.passes[0].Nc), bool)
    Bp[:B.shape[0], :B.shape[1]] = B != 0
    dense = lock = dec = 0
    for p in plan.passes:
        L1, L0 = p.Mc // (R * gm), p.Nc // (C * gn)
        tiles = L1 * L0
        per_ce = np.zeros((gm, gn, gk), np.int64)
        memo: dict[bytes, int] = {}
        span = 0
        for t in range(tiles):
            l1, l0 = divmod(t, L0)
            last = t == tiles - 1
            worst = 0
            for im, in_, ik in np.ndindex(gm, gn, gk):
                m = p.m0 + R * (l1 * gm + im)
                n = p.n0 + C * (l0 * gn + in_)
                ks = slice(ik * Kc, (ik + 1) * Kc)
                eff = Ap[m:m + R, ks].T & Bp[ks, n:n + C].any(axis=1)[:, None]      # [Kc, R]
                key = eff.tobytes()
                if key not in memo:
                    memo[key] = run_stream(eff.tolist(), opts, D, refill)
                cyc = memo[key] if last else max(memo[key], R)
                per_ce[im, in_, ik] += cyc
                worst = max(worst, cyc)
            span += worst
        dense_tiles = os_gemm_cycles(Kc, tiles, geo) - gemm_latency(geo)   # the tiles' issue, dense
        cycles = program_cycles(p.words, config)
        dense += cycles
        lock += cycles - dense_tiles + span
        dec += cycles - dense_tiles + int(per_ce.max())
    return Projection(dense, lock, dec, effectual_macs(A, B), A.shape[0] * A.shape[1] * B.shape[1], plan.grid)
