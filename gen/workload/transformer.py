"""Tensorized transformer models (seed 003) for ``fetta train``: the model file and its layers.

A model file (JSON, ``examples/atis_transformer.json``) describes the encoder-only classifier of
seed 003 (Fig. 2 and 4):

* ``embedding``: the token embedding, a ``ttm`` layer (section 1 of ``shared/INTERFACES.md``
  without ``batch``) from one-hot tokens (``vocab = prod(in_modes)``) to ``d_model =
  prod(out_modes)``; a dense learnable position table ``[seq, d_model]`` is added to it;
  The lookup is a contraction (seed 003 eq. 13: each core's slice selected by one digit of the token
  index): the one-hot row of token ``t`` is the outer product of the one-hot vectors of its digits
  ``j_k`` in the ``in_modes`` radix, so :func:`embedding_networks` contracts the per-digit one-hot
  factors ``E_k [seq, in_k]`` (:func:`token_factors`) with the cores, the token a batch mode shared by
  every factor, instead of a ``[seq, vocab]`` one-hot matrix (``vocab / sum(in_modes)`` times
  the MACs of the first step: 33x at ATIS's 1,000 = 10 x 10 x 10);
* ``encoders`` blocks: ``Q / K / V / O`` of self-attention with ``heads`` heads and the FFN's two
  layers, each a ``tt`` (or any tensorized) ``d_model x d_model`` layer given by ``linear``
  (``ffn`` defaults to ``linear``); attention products are dense contractions; softmax, layer norm
  (no affine parameters), GELU (tanh form) and the residuals as in seed 003 section II-A; no biases;
* a dense classifier ``[d_model, classes]`` on the first token's final hidden state
  (the ``[CLS]`` position) and the softmax cross-entropy loss.

Fields: ``name``, ``seq``, ``heads``, ``encoders``, ``classes``, ``embedding``, ``linear``,
optional ``ffn``, ``lr`` (SGD learning rate, seed 003: 4e-3), ``train_samples`` (size of the
training set the per-epoch figures use; ATIS: 4,478) and ``samples`` (the synthetic set the steps
cycle through, default 16). :func:`parse_model` raises :class:`gen.errors.SpecError` naming the first
bad field (``embedding.ranks``), as for layer specs.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gen.errors import SpecError, UsageError, read_text_file
from gen.workload.network import Network, Operand, core_operands, physical_modes
from gen.workload.spec import LayerSpec, parse_spec

__all__ = ["TransformerSpec", "parse_model", "load_model", "LINEARS", "MAX_SEQ", "embedding_networks",
           "token_factors", "attention_networks", "ATTENTION_STAGES", "classifier_networks",
           "CLASSIFIER_STAGES", "load_atis"]

#: the tensorized linear layers of one encoder block, in forward order
LINEARS = ("q", "k", "v", "o", "ffn1", "ffn2")
KNOWN_FIELDS = ("name", "seq", "heads", "encoders", "classes", "embedding", "linear", "ffn", "lr",
                "train_samples", "samples")
#: bounds that keep a mistaken model file from allocating without end (docs/errors.md)
MAX_SEQ = 4096
MAX_ENCODERS = 64
MAX_CLASSES = 1 << 16


@dataclass(frozen=True)
class TransformerSpec:
    """A validated model file (module docstring). ``embedding``, ``linear`` and ``ffn`` are
    :class:`LayerSpec` with ``batch = seq``."""

    name: str
    seq: int
    heads: int
    encoders: int
    classes: int
    embedding: LayerSpec
    linear: LayerSpec
    ffn: LayerSpec
    #: SGD learning rate
    lr: float
    #: training sentences of the data set the per-epoch figures assume
    train_samples: int
    #: synthetic samples the steps cycle through
    samples: int

    vocab = property(lambda self: self.embedding.I, doc="Token ids: the embedding's ``prod(in_modes)``.")
    d_model = property(lambda self: self.embedding.O, doc="Activation width: the embedding's ``prod(out_modes)``.")
    head_dim = property(lambda self: self.d_model // self.heads, doc="``d_model / heads``.")

    def layer(self, kind: str) -> LayerSpec:
        """The spec of linear layer ``kind`` (:data:`LINEARS`) of every encoder."""
        return self.ffn if kind.startswith("ffn") else self.linear

    def params(self) -> list[tuple[str, tuple[int, ...]]]:
        """Every trained parameter, ``(name, shape)``, in a fixed order: ``emb.core_k``, ``pos``,
        ``enc{e}.{kind}.core_k``, ``cls``."""
        out = [(f"emb.{k}", s) for k, s in _cores(self.embedding)]
        out.append(("pos", (self.seq, self.d_model)))
        for e in range(self.encoders):
            for kind in LINEARS:
                out += [(f"enc{e}.{kind}.{k}", s) for k, s in _cores(self.layer(kind))]
        out.append(("cls", (self.d_model, self.classes)))
        return out


def _cores(spec: LayerSpec) -> list[tuple[str, tuple[int, ...]]]:
    return [(f"core_{k}", tuple(s)) for k, s in enumerate(spec.core_shapes())]


def _int(data: dict, key: str, default: Any = None, maximum: int | None = None) -> int:
    value = data.get(key, default)
    if value is None:
        raise SpecError("missing", field=key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"must be a positive integer, got {json.dumps(value)[:40]}", field=key)
    if maximum is not None and value > maximum:
        raise SpecError(f"must be at most {maximum}, got {value}", field=key)
    return value


def _layer(data: dict, key: str, seq: int) -> LayerSpec:
    value = data.get(key)
    if value is None:
        raise SpecError("missing", field=key)
    if not isinstance(value, dict):
        raise SpecError(f"must be a layer spec object, got {type(value).__name__}", field=key)
    if "batch" in value:
        raise SpecError("takes no batch (the model's seq is the batch of every layer)", field=f"{key}.batch")
    try:
        return parse_spec({"name": f"{data.get('name', 'model')}-{key}", **value, "batch": seq})
    except SpecError as exc:
        raise SpecError(exc.message, field=f"{key}.{exc.field}") from None


def parse_model(data: dict[str, Any] | str) -> TransformerSpec:
    """Validate a model given as a dict or JSON text (module docstring)."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            raise SpecError(f"not valid JSON: {exc}", field="<json>") from None
    if not isinstance(data, dict):
        raise SpecError(f"a model must be a JSON object, got {type(data).__name__}", field="<json>")
    for key in data:
        if key not in KNOWN_FIELDS:
            raise SpecError(f"unknown field (known: {', '.join(KNOWN_FIELDS)})", field=key)
    name = data.get("name", "model")
    if not isinstance(name, str):
        raise SpecError("must be a string", field="name")
    seq = _int(data, "seq", maximum=MAX_SEQ)
    heads = _int(data, "heads")
    encoders = _int(data, "encoders", maximum=MAX_ENCODERS)
    classes = _int(data, "classes", maximum=MAX_CLASSES)
    emb = _layer(data, "embedding", seq)
    if emb.format != "ttm":
        raise SpecError(f"the token embedding is a ttm layer (seed 003), got {emb.format}", field="embedding.format")
    linear = _layer(data, "linear", seq)
    ffn = _layer({**data, "ffn": data.get("ffn", data.get("linear"))}, "ffn", seq)
    d = emb.O
    for key, spec in (("linear", linear), ("ffn", ffn)):
        if spec.I != d or spec.O != d:
            raise SpecError(f"must map d_model = {d} (the embedding's prod(out_modes)) to itself, "
                            f"got {spec.I} x {spec.O}", field=f"{key}.out_modes")
    if d % heads:
        raise SpecError(f"must divide d_model = {d}", field="heads")
    lr = data.get("lr", 4e-3)
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not (0 < lr < 1e3) or not math.isfinite(lr):
        raise SpecError(f"must be a positive number, got {json.dumps(lr)[:40]}", field="lr")
    return TransformerSpec(name=name, seq=seq, heads=heads, encoders=encoders, classes=classes,
                           embedding=emb, linear=linear, ffn=ffn, lr=float(lr),
                           train_samples=_int(data, "train_samples", 4478),
                           samples=_int(data, "samples", 16, maximum=1 << 20))


def load_model(path: str | Path) -> TransformerSpec:
    """Read and validate a model file (``fetta train --model``)."""
    return parse_model(read_text_file(path, field="--model", error=SpecError))


def embedding_networks(spec: LayerSpec) -> tuple[Network, list[Network]]:
    """The token embedding's FP network (``Y[b, out...]`` from ``E_0 .. E_{d-1}`` and the cores) and its
    WG networks (``dcore_k`` from the factors, ``dY`` and the other cores); ``b`` is the token position."""
    cores, sizes, _ = core_operands(spec)
    ins, outs = physical_modes(spec)
    factors = [Operand(f"E{k}", ("b", m)) for k, m in enumerate(ins)]

    def make(phase: str, target: str, inputs: list[Operand], wanted, shape) -> Network:
        present = {m for op in inputs for m in op.modes}
        used = {m: sizes[m] for op in inputs for m in op.modes}
        return Network(phase, target, tuple(inputs), tuple(m for m in wanted if m in present), used, shape)
    fp = make("fp", "Y", [*factors, *cores], ("b", *outs), (spec.batch, spec.O))
    dY = Operand("dY", ("b", *outs))
    wg = [make("wg", f"d{c.name}", [*factors, dY, *(o for o in cores if o is not c)], c.modes,
               tuple(sizes[m] for m in c.modes)) for c in cores]
    return fp, wg


def token_factors(spec: LayerSpec, tokens: np.ndarray) -> dict[str, np.ndarray]:
    """``E_k [len(tokens), in_modes[k]]``: the one-hot vector of digit ``k`` of each token (first digit
    most significant, as ``W = Wt.reshape(I, O)`` orders the rows)."""
    digits = np.unravel_index(np.asarray(tokens), spec.in_modes)
    out = {}
    for k, n in enumerate(spec.in_modes):
        e = np.zeros((len(tokens), n), np.float32)
        e[np.arange(len(tokens)), digits[k]] = 1
        out[f"E{k}"] = e
    return out


#: the attention's contraction stages, each one program (the host's softmax / its backward between them):
#: forward scores, forward context, backward ``dP`` and ``dV``, backward ``dQ`` and ``dK``
ATTENTION_STAGES = {"scores": ("S",), "context": ("C",), "back_p": ("dP", "dV"), "back_s": ("dQ", "dK")}


def _product(target: str, a: tuple[str, str], b: tuple[str, str], out: str, sizes: dict[str, int]) -> Network:
    """The two-operand network ``target[out] = a[0][a[1]] b[0][b[1]]`` (modes one letter each)."""
    ops = (Operand(a[0], tuple(a[1])), Operand(b[0], tuple(b[1])))
    return Network("fp", target, ops, tuple(out), dict(sizes), tuple(sizes[m] for m in out))


def attention_networks(model: TransformerSpec, heads: int | None = None) -> dict[str, Network]:
    """Every head's attention products as one network per result, the head the batch mode ``b`` and
    the first axis of every operand: ``S[b,s,t] = Q[b,s,d] K[b,t,d]``, ``C[b,s,d] = P[b,s,t] V[b,t,d]``,
    ``dP[b,s,t] = dC[b,s,d] V[b,t,d]``, ``dV[b,t,d] = P[b,s,t] dC[b,s,d]``, ``dQ[b,s,d] = dS[b,s,t]
    K[b,t,d]``, ``dK[b,t,d] = dS[b,s,t] Q[b,s,d]`` (``Q``, ``K``, ``V``, ``C`` and their gradients are
    ``[seq, d_model]`` activations, given head-first: ``[heads, seq, head_dim]``; the 1 / sqrt(head_dim)
    scale is the host's). ``heads``: that many heads instead of the model's (a batch piece of them,
    :func:`gen.compiler.phases.compile_pieces`)."""
    sizes = {"b": heads or model.heads, "s": model.seq, "t": model.seq, "d": model.head_dim}

    def net(target: str, a: tuple[str, str], b: tuple[str, str], out: str) -> Network:
        return _product(target, a, b, out, sizes)
    return {"S": net("S", ("Q", "bsd"), ("K", "btd"), "bst"), "C": net("C", ("P", "bst"), ("V", "btd"), "bsd"),
            "dP": net("dP", ("dC", "bsd"), ("V", "btd"), "bst"), "dV": net("dV", ("P", "bst"), ("dC", "bsd"), "btd"),
            "dQ": net("dQ", ("dS", "bst"), ("K", "btd"), "bsd"), "dK": net("dK", ("dS", "bst"), ("Q", "bsd"), "btd")}


def classifier_networks(model: TransformerSpec) -> dict[str, Network]:
    """The classifier's three products on the ``[CLS]`` row ``Z[m, k]`` (``m`` = 1, ``k`` = d_model) and
    its weight ``W[k, n]`` (``n`` = classes): ``logits[m,n] = Z[m,k] W[k,n]`` forward,
    ``dW[k,n] = Z[m,k] G[m,n]`` and ``dZ[m,k] = G[m,n] W[k,n]`` backward (``G`` the logits' gradient);
    the transposes are the networks' mode orders, not copies."""
    sizes = {"m": 1, "k": model.d_model, "n": model.classes}

    def net(target: str, a: tuple[str, str], b: tuple[str, str], out: str) -> Network:
        return _product(target, a, b, out, sizes)
    return {"logits": net("logits", ("Z", "mk"), ("W", "kn"), "mn"), "dW": net("dW", ("Z", "mk"), ("G", "mn"), "kn"),
            "dZ": net("dZ", ("G", "mn"), ("W", "kn"), "mk")}


#: the classifier's programs: forward, and both backward products together (they share ``G``)
CLASSIFIER_STAGES = {"forward": ("logits",), "backward": ("dW", "dZ")}

#: token ids the ATIS loader reserves: the classifier's position, padding, words outside the vocabulary
CLS, PAD, UNK = 0, 1, 2


def load_atis(model: TransformerSpec, folder: str | Path) -> tuple[list[tuple[np.ndarray, int]], dict]:
    """Samples ``(tokens[seq], label)`` from an ATIS folder in the JointBERT layout: ``seq.in`` (one
    sentence per line, words separated by spaces) and ``label`` (its intent) side by side, in
    ``folder`` or ``folder/train``. The vocabulary is the ``vocab - 3`` most frequent words (ties in
    alphabetical order) after ``[CLS]``, ``[PAD]`` and ``[UNK]`` (:data:`CLS`, :data:`PAD`, :data:`UNK`);
    a sentence becomes ``[CLS]`` and its first ``seq - 1`` words, padded with ``[PAD]`` (no attention mask:
    padding takes part like any token); intents are numbered by frequency and must number at most
    ``classes``. Returns the samples and a summary (``sentences``, ``words``, ``vocab_covered``,
    ``intents``, ``truncated``). Raises :class:`UsageError` naming ``--data`` (files) or
    :class:`SpecError` naming ``classes`` (more intents than the model has classes)."""
    root = Path(folder)
    if (root / "train" / "seq.in").is_file():
        root = root / "train"
    texts = {}
    for name in ("seq.in", "label"):
        texts[name] = read_text_file(root / name, field="--data").splitlines()
    sents, labels = texts["seq.in"], [x.strip() for x in texts["label"]]
    if len(sents) != len(labels):
        raise UsageError(f"{root}: seq.in has {len(sents)} lines, label {len(labels)}", field="--data")
    if not sents:
        raise UsageError(f"{root}: no sentences", field="--data")
    words = [s.split() for s in sents]
    counts: dict[str, int] = {}
    for ws in words:
        for w in ws:
            counts[w] = counts.get(w, 0) + 1
    kept = sorted(counts, key=lambda w: (-counts[w], w))[:model.vocab - 3]
    ids = {w: i + 3 for i, w in enumerate(kept)}
    freq: dict[str, int] = {}
    for lab in labels:
        freq[lab] = freq.get(lab, 0) + 1
    intents = sorted(freq, key=lambda x: (-freq[x], x))
    if len(intents) > model.classes:
        raise SpecError(f"the data have {len(intents)} intents, the model {model.classes} classes", field="classes")
    label_id = {x: i for i, x in enumerate(intents)}
    out, truncated = [], 0
    for ws, lab in zip(words, labels):
        tokens = np.full(model.seq, PAD, dtype=np.int64)
        tokens[0] = CLS
        body = [ids.get(w, UNK) for w in ws][:model.seq - 1]
        truncated += len(ws) > model.seq - 1
        tokens[1:1 + len(body)] = body
        out.append((tokens, label_id[lab]))
    covered = sum(counts[w] for w in kept) / max(1, sum(counts.values()))
    return out, {"sentences": len(out), "words": len(counts), "vocab_covered": covered, "intents": intents,
                 "truncated": truncated}
