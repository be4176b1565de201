"""The transformer's elementwise and row-wise operations and their backward, in float32 on the host.

These are the operations issue 19 assigns to the vector unit (softmax, layer norm, GELU,
cross-entropy); the vector unit of this release has ADD / AXPY / SCALE / RELU only, so
``fetta train`` runs them here, in IEEE float32 with numpy, and counts the elements they touch
(``host_elements``) instead of cycles. Every function takes and returns float32 arrays; rows are the
last axis.

* ``softmax(s)`` / ``softmax_bwd(p, dp)``: ``p = exp(s - max) / sum``; ``ds = p * (dp - sum(dp * p))``;
* ``layer_norm(x)`` / ``layer_norm_bwd(x, dy)``: ``(x - mean) / sqrt(var + EPS)``, no affine
  parameters;
* ``gelu(x)`` / ``gelu_bwd(x, dy)``: the tanh form ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``;
* ``cross_entropy(logits, label)``: the loss (float64 scalar) and ``dlogits = softmax - onehot``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["EPS", "softmax", "softmax_bwd", "layer_norm", "layer_norm_bwd", "gelu", "gelu_bwd", "cross_entropy"]

#: layer norm's variance offset (PyTorch's default)
EPS = 1e-5
_F = np.float32
_C = np.float32(np.sqrt(2.0 / np.pi))
_A = np.float32(0.044715)


def softmax(s: np.ndarray) -> np.ndarray:
    s = np.asarray(s, _F)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(_F)


def softmax_bwd(p: np.ndarray, dp: np.ndarray) -> np.ndarray:
    p, dp = np.asarray(p, _F), np.asarray(dp, _F)
    return (p * (dp - (dp * p).sum(axis=-1, keepdims=True))).astype(_F)


def _norm(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, _F)
    mu = x.mean(axis=-1, keepdims=True, dtype=_F)
    xc = x - mu
    rstd = (1 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True, dtype=_F) + _F(EPS))).astype(_F)
    return xc, rstd


def layer_norm(x: np.ndarray) -> np.ndarray:
    xc, rstd = _norm(x)
    return (xc * rstd).astype(_F)


def layer_norm_bwd(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    xc, rstd = _norm(x)
    xhat = xc * rstd
    dy = np.asarray(dy, _F)
    mean_dy = dy.mean(axis=-1, keepdims=True, dtype=_F)
    mean_dyx = (dy * xhat).mean(axis=-1, keepdims=True, dtype=_F)
    return (rstd * (dy - mean_dy - xhat * mean_dyx)).astype(_F)


def gelu(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, _F)
    return (_F(0.5) * x * (1 + np.tanh(_C * (x + _A * x * x * x)))).astype(_F)


def gelu_bwd(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    x = np.asarray(x, _F)
    t = np.tanh(_C * (x + _A * x * x * x))
    d = _F(0.5) * (1 + t) + _F(0.5) * x * (1 - t * t) * _C * (1 + 3 * _A * x * x)
    return (np.asarray(dy, _F) * d).astype(_F)


def cross_entropy(logits: np.ndarray, label: int) -> tuple[float, np.ndarray]:
    """Loss of one sample (``logits``: ``[1, classes]``) and its gradient ``[1, classes]``."""
    z = np.asarray(logits, _F)
    p = softmax(z)
    loss = float(np.log(np.exp(z.astype(np.float64) - z.max()).sum()) - (z[0, label] - z.max()))
    d = p.copy()
    d[0, label] -= 1
    return loss, d.astype(_F)
