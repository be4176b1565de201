"""One-sided Jacobi SVD with warm start (seed 004 Alg. 2 and 3), the factor update of HOOI.

:func:`jacobi_left` returns the ``r`` leading left singular vectors of an ``n x R`` matrix ``A``
by orthogonalizing its rows two at a time (Hestenes' one-sided Jacobi, the variant seed 004 builds in
hardware): each rotation ``J`` of rows ``p, q`` makes them orthogonal and is accumulated into ``Q``
(``Q A`` stays the input), so once the rows are orthogonal the columns of ``Q`` are the left singular
vectors and the row norms the singular values. The pairs of a sweep follow the round-robin
(tournament) order of seed 004 [38]: ``n - 1`` steps of ``n / 2`` disjoint pairs, each step one
vectorised update here as it is one parallel step in hardware.

Warm start (seed 004 IV-B, Alg. 3): ``Q`` starts as an orthonormal basis whose first columns are the
previous factor (completed by a QR decomposition) and ``A`` as ``Q^T A``: one sweep then suffices
where a cold start (``Q = I``) needs about ten.

Where it runs, and its cost: on the host, in float64. The accelerator's vector unit has no divide,
square root or arctangent, which every rotation needs, so :func:`jacobi_cycles` states the cost the
same sweeps would take on a vector unit of ``V`` lanes that had them (the model of seed 004's SVD
unit: each pair streams its two rows for the three sums of products, then rotates them and the two
columns of ``Q``); ``docs/hooi.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=64)
def round_robin(n: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The steps of one sweep over ``n`` rows: ``(p, q)`` index arrays of disjoint pairs, every pair
    ``p < q`` exactly once over the sweep (circle method; odd ``n`` gets a dummy row that pairs with
    nobody)."""
    m = n + n % 2
    idx = list(range(m))
    steps = []
    for _ in range(m - 1):
        pairs = sorted((min(idx[k], idx[m - 1 - k]), max(idx[k], idx[m - 1 - k])) for k in range(m // 2))
        pairs = [pq for pq in pairs if pq[1] < n]
        steps.append((np.array([p for p, _ in pairs], np.intp), np.array([q for _, q in pairs], np.intp)))
        idx = [idx[0], idx[-1], *idx[1:-1]]
    return tuple(steps)


@dataclass(frozen=True)
class JacobiResult:
    """Leading left singular vectors ``U`` (``n x r``, orthonormal columns), their singular values
    (descending), the sweeps run and the rotations applied."""

    U: np.ndarray
    sigma: np.ndarray
    sweeps: int
    rotations: int


def _basis(start: np.ndarray, n: int) -> np.ndarray:
    """An orthonormal ``n x n`` basis whose first columns span ``start`` (QR, signs kept)."""
    q, r = np.linalg.qr(np.asarray(start, np.float64), mode="complete")
    signs = np.sign(np.diag(r))
    signs[signs == 0] = 1.0
    q[:, :len(signs)] *= signs
    return q


def jacobi_left(A: np.ndarray, r: int, sweeps: int, start: np.ndarray | None = None,
                tol: float = 1e-15) -> JacobiResult:
    """The ``r`` leading left singular vectors of ``A`` after ``sweeps`` sweeps (module docstring);
    ``start``: the warm start (``n x r'`` with orthonormal columns), ``None`` for a cold start.
    A pair already orthogonal to ``tol`` (relative) is not rotated."""
    A = np.array(A, np.float64)
    n = A.shape[0]
    if not 1 <= r <= n:
        raise ValueError(f"rank {r} must be between 1 and the rows {n}")
    if start is None:
        Q = np.eye(n)
    else:
        Q = _basis(start, n)
        A = Q.T @ A
    rotations = 0
    for _ in range(sweeps):
        for p, q in round_robin(n):
            a, b = A[p], A[q]
            alpha = np.einsum("ij,ij->i", a, a)
            beta = np.einsum("ij,ij->i", b, b)
            gamma = np.einsum("ij,ij->i", a, b)
            rot = np.abs(gamma) > tol * np.sqrt(alpha * beta)
            g = np.where(rot, gamma, 1.0)
            with np.errstate(over="ignore"):        # |zeta| -> inf: t = 0, no rotation (its limit)
                zeta = (beta - alpha) / (2.0 * g)
                t = np.where(zeta >= 0, 1.0, -1.0) / (np.abs(zeta) + np.hypot(1.0, zeta))    # the smaller root
            c = np.where(rot, 1.0 / np.sqrt(1.0 + t * t), 1.0)
            s = np.where(rot, c * t, 0.0)
            A[p], A[q] = c[:, None] * a - s[:, None] * b, s[:, None] * a + c[:, None] * b
            Qp, Qq = Q[:, p], Q[:, q]
            Q[:, p], Q[:, q] = Qp * c - Qq * s, Qp * s + Qq * c
            rotations += int(rot.sum())
    norms = np.linalg.norm(A, axis=1)
    order = np.argsort(-norms, kind="stable")[:r]
    return JacobiResult(Q[:, order], norms[order], sweeps, rotations)


def jacobi_cycles(n: int, R: int, sweeps: int, lanes: int, warm: bool) -> int:
    """Cycles of ``sweeps`` sweeps over an ``n x R`` matrix on a ``lanes``-wide vector datapath with
    divide / square root (the cost model of seed 004's SVD unit, module docstring): per pair
    ``ceil(3R / lanes)`` cycles for the sums of products and ``ceil(4(R + n) / lanes)`` for the
    rotations of two rows of ``A`` and two columns of ``Q``; a warm start adds the product
    ``Q^T A`` (``n * n * R`` MACs at ``lanes`` per cycle; seed 004 runs it on its TTM unit)."""
    pairs = n * (n - 1) // 2
    per_pair = math.ceil(3 * R / lanes) + math.ceil(4 * (R + n) / lanes)
    return sweeps * pairs * per_pair + (math.ceil(n * n * R / lanes) if warm else 0)


__all__ = ["JacobiResult", "jacobi_left", "jacobi_cycles", "round_robin"]
