"""The outside reference of ``fetta train``: the same transformer in JAX, differentiated by ``jax.grad``.

Written from seed 003 section II-A and ``shared/INTERFACES.md`` section 1 alone (weights rebuilt from
the cores by their definition), sharing nothing with :mod:`gen.toolflow.train` but the parameter
names, the initial values and the data. JAX runs on the CPU in float64 (``jax_enable_x64``) or float32;
the update is plain SGD ``p - lr * dp``.

JAX (0.10.2, a ~90 MB CPU wheel) is the autograd oracle rather than PyTorch, whose PyPI wheel pulls
several GB of CUDA libraries (issue 19).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")

LINEARS = ("q", "k", "v", "o", "ffn1", "ffn2")


def tr_weight(cores, in_modes, out_modes):
    """``W [I, O]`` of a ``tr`` layer: the trace of ``G_0[:, i_0, :] @ ... @ G_{D-1}[:, i_{D-1}, :]``; a ``tt``
    layer is the case ``r_0 = r_D = 1``."""
    w = cores[0]                                      # [r_0, n_0, r_1]
    for g in cores[1:]:
        w = jnp.einsum("anr,rbs->anbs", w, g).reshape(w.shape[0], -1, g.shape[2])
    return jnp.einsum("ana->n", w).reshape(math.prod(in_modes), math.prod(out_modes))


def weight(spec, cores):
    """``W`` of a ``tt``, ``tr`` or ``ttm`` layer spec from its cores (INTERFACES section 1)."""
    build = {"tt": tr_weight, "tr": tr_weight, "ttm": ttm_weight}[spec.format]
    return build(cores, spec.in_modes, spec.out_modes)


def ttm_weight(cores, in_modes, out_modes):
    """``W [I, O]`` of a ``ttm`` layer: ``F_0[:, i_0, o_0, :] @ ...``, modes ordered ins then outs."""
    d = len(cores)
    w = cores[0][0]                                   # [i_0, o_0, r_1]
    for g in cores[1:]:
        w = jnp.einsum("...r,rios->...ios", w, g)
    w = w[..., 0]                                     # [i_0, o_0, i_1, o_1, ...]
    w = jnp.transpose(w, [2 * k for k in range(d)] + [2 * k + 1 for k in range(d)])
    return w.reshape(math.prod(in_modes), math.prod(out_modes))


def _ln(x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + 1e-5)


def _gelu(x):
    return 0.5 * x * (1 + jnp.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def loss_fn(params, model, tokens, label):
    """Cross-entropy of one sample."""
    def cores(prefix, spec):
        return [params[f"{prefix}.core_{k}"] for k in range(len(spec.core_shapes()))]
    e = model.embedding
    z = ttm_weight(cores("emb", e), e.in_modes, e.out_modes)[tokens] + params["pos"]
    dh = model.head_dim
    for enc in range(model.encoders):
        def lin(kind, x):
            s = model.layer(kind)
            return x @ weight(s, cores(f"enc{enc}.{kind}", s))
        x = z
        q, k, v = lin("q", x), lin("k", x), lin("v", x)
        heads = []
        for h in range(model.heads):
            c = slice(h * dh, (h + 1) * dh)
            p = jax.nn.softmax(q[:, c] @ k[:, c].T / math.sqrt(dh), axis=-1)
            heads.append(p @ v[:, c])
        y1 = _ln(lin("o", jnp.concatenate(heads, axis=1)) + x)
        z = _ln(lin("ffn2", _gelu(lin("ffn1", y1))) + y1)
    logits = z[0] @ params["cls"]
    return jax.nn.logsumexp(logits) - logits[label]


def train(model, params, data, steps, dtype=np.float64):
    """Per-step losses and the final parameters of ``steps`` SGD steps (float64 or float32)."""
    p = {k: jnp.asarray(v, dtype) for k, v in params.items()}
    grad = jax.jit(jax.value_and_grad(loss_fn), static_argnums=(1,))
    losses = []
    for s in range(steps):
        tokens, label = data[s % len(data)]
        loss, g = grad(p, model, jnp.asarray(tokens), label)
        losses.append(float(loss))
        p = {k: p[k] - dtype(model.lr) * g[k] for k in p}
    return losses, {k: np.asarray(v) for k, v in p.items()}


def gradients(model, params, tokens, label):
    """Float64 loss and gradients of one sample."""
    p = {k: jnp.asarray(v, np.float64) for k, v in params.items()}
    loss, g = jax.value_and_grad(loss_fn)(p, model, jnp.asarray(tokens), label)
    return float(loss), {k: np.asarray(v) for k, v in g.items()}
