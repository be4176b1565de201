"""The loss of a training step, on the host: the cross-entropy of the classifier's logits.

Everything else of the step's elementwise and row-wise work (softmax, layer norm, GELU, their
backward, the residual sums, the SGD update) runs on the vector unit (:mod:`gen.compiler.vecops`,
:mod:`gen.compiler.rowops`). The loss is a logarithm of a sum, which the vector unit has no operation
for, over ``classes`` values: ``fetta train`` computes it here in float32 / float64 with numpy and
counts the elements (``host_elements``).

* ``cross_entropy(logits, label)``: the loss (float64 scalar) and ``dlogits = softmax - onehot``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["cross_entropy"]

_F = np.float32


def _softmax(s: np.ndarray) -> np.ndarray:
    s = np.asarray(s, _F)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(_F)


def cross_entropy(logits: np.ndarray, label: int) -> tuple[float, np.ndarray]:
    """Loss of one sample (``logits``: ``[1, classes]``) and its gradient ``[1, classes]``."""
    z = np.asarray(logits, _F)
    p = _softmax(z)
    loss = float(np.log(np.exp(z.astype(np.float64) - z.max()).sum()) - (z[0, label] - z.max()))
    d = p.copy()
    d[0, label] -= 1
    return loss, d.astype(_F)
