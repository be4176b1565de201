"""Independent reference for the golden model: the full weight rebuilt from the cores.

Written straight from the table in ``shared/INTERFACES.md`` section 1, without
``gen.workload.network`` (whose mode bookkeeping the golden model uses), so that a
mistake there cannot hide in both.
"""

from __future__ import annotations

import math
import string

import numpy as np


def _chain(cores):
    """``T[r0, N, r_last]`` = product of ``G_k[:, i_k, :]`` over the chain (i's flattened in C order)."""
    T = np.asarray(cores[0], np.float64)
    for G in cores[1:]:
        T = np.einsum("pas,sbt->pabt", T, np.asarray(G, np.float64))
        T = T.reshape(T.shape[0], -1, T.shape[-1])
    return T


def rebuild_weight(spec, cores) -> np.ndarray:
    """``W: [I, O]`` (float64) from the list of cores, per the format's definition."""
    f = spec.format
    n = spec.modes
    D = len(n)
    if f == "dense":
        return np.asarray(cores[0], np.float64).reshape(spec.I, spec.O)
    if f == "tt":
        T = _chain(cores)
        assert T.shape[0] == 1 and T.shape[2] == 1
        return T[0, :, 0].reshape(spec.I, spec.O)
    if f == "tr":
        T = _chain(cores)
        return np.einsum("pnp->n", T).reshape(spec.I, spec.O)
    if f == "ttm":
        # T[I_acc, O_acc, r]
        F0 = np.asarray(cores[0], np.float64)
        T = F0[0]                                   # [i0, o0, r1]
        for F in cores[1:]:
            T = np.einsum("IOr,rios->IiOos", T, np.asarray(F, np.float64))
            T = T.reshape(T.shape[0] * T.shape[1], T.shape[2] * T.shape[3], T.shape[4])
        return T[:, :, 0]
    if f == "ht":
        counter = [D]

        def node(modes):
            if len(modes) == 1:
                return np.asarray(cores[modes[0]], np.float64)       # [n_k, R]
            half = math.ceil(len(modes) / 2)
            left = node(modes[:half])
            right = node(modes[half:])
            B = np.asarray(cores[counter[0]], np.float64)             # [R_l, R_r, R_node]
            counter[0] += 1
            U = np.einsum("ar,bs,rst->abt", left, right, B)
            return U.reshape(-1, U.shape[-1])

        U = node(list(range(D)))
        assert counter[0] == len(cores) and U.shape[1] == 1
        return U[:, 0].reshape(spec.I, spec.O)
    if f in ("bt", "tucker"):
        letters = string.ascii_letters
        core_idx = letters[:D]
        phys = letters[D:2 * D]
        W = np.zeros(n)
        per = D + 1
        for b in range(len(cores) // per):
            C = cores[b * per]
            Us = cores[b * per + 1:(b + 1) * per]
            expr = core_idx + "," + ",".join(phys[k] + core_idx[k] for k in range(D)) + "->" + phys
            W += np.einsum(expr, np.asarray(C, np.float64), *[np.asarray(U, np.float64) for U in Us])
        return W.reshape(spec.I, spec.O)
    raise ValueError(f)


def loss_gradient_by_basis(spec, X, dY, cores, k) -> np.ndarray:
    """``dL/dcore_k`` for ``L = sum(dY * (X @ W))``, exactly, from L being affine in core k.

    ``L(core_k = e_idx) - L(core_k = 0)`` is the gradient's entry ``idx`` (the offset is
    non-zero only for block-term layers, whose other terms do not depend on core k).
    """
    XtdY = np.asarray(X, np.float64).T @ np.asarray(dY, np.float64)    # dL/dW
    shape = np.shape(cores[k])
    grad = np.empty(math.prod(shape))
    basis = list(cores)
    basis[k] = np.zeros(shape)
    offset = np.sum(XtdY * rebuild_weight(spec, basis))
    for idx in range(grad.size):
        e = np.zeros(grad.size)
        e[idx] = 1.0
        basis[k] = e.reshape(shape)
        grad[idx] = np.sum(XtdY * rebuild_weight(spec, basis)) - offset
    return grad.reshape(shape)
