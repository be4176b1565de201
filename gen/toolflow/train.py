"""``fetta train``: whole training steps of a tensorized transformer (seed 003) on the accelerator.

One step of one sample (batch 1, ``seq`` tokens) runs every contraction on the accelerator:

* the token embedding's lookup and its core gradients as the contractions of
  :func:`gen.workload.transformer.embedding_networks` (per-digit one-hot factors, seed 003 eq. 13-14),
  compiled by :func:`gen.compiler.phases.compile_networks` along the trees that run fastest end to end
  (:func:`gen.compiler.phases.fastest_paths`); every ``tt`` layer of every encoder (FP, BP,
  WG; BP and WG as the layer's training-aware ``train`` program, :meth:`Accelerator.backward`) compiled by
  :func:`gen.compiler.compile_layer`; each program compiled once per run;
* the attention products of every head (``Q K^T`` and ``P V`` forward, the four backward products) as
  the networks of :func:`gen.workload.transformer.attention_networks` (the head a batch mode), one
  program per stage between the softmax and its backward, and the classifier's three products as the
  networks of :func:`gen.workload.transformer.classifier_networks` (two programs);
* every contraction program lowered to jobs that move their own data with DMA instructions
  (:func:`gen.compiler.dma.lower_dma`, executed by :func:`gen.toolflow.dmarun.execute_dma`: the
  controller's own cycle count; ``dram="rule"``: the host port and the DRAM rule,
  :func:`gen.toolflow.execute.execute`), replayed on the RTL for ``icarus`` / ``verilator``;
* on the vector unit (:meth:`Accelerator.vector`, :meth:`Accelerator.rows`; kind ``vector``): the
  residual and gradient sums and the SGD update (:mod:`gen.compiler.vecops`: FP32, bit for bit the
  host's float32 arithmetic), GELU and its backward, softmax, layer norm and their backward
  (:mod:`gen.compiler.rowops`, within the bounds of ``docs/training.md``), executed by
  :func:`gen.toolflow.vecrun.execute_vec`.

Operands enter the accelerator in bfloat16 (the unified memory's format) and results come back in
bfloat16; FP32 activations (the residual stream and its gradient) travel as two bfloat16 halves
(:func:`split`) or, for the sums and the update, as FP32 rows of the accumulation unit. Only the loss
(the cross-entropy of the logits) is computed on the host (:mod:`gen.toolflow.nonlinear`), counted in
``host_elements``. Cycles are the sum of the programs' end-to-end cycles (compute plus DRAM stalls:
the DMA jobs' own count, :func:`gen.compiler.dma.dma_timeline`; the vector unit's runs still move their
data through the host port, timed by :mod:`gen.design.timing`); nothing overlaps between programs.

The data are synthetic unless given (:func:`synthetic_data`): ``samples`` token sequences drawn from the
seed, token 0 is the ``[CLS]`` token (index 0) and the intent label is ``token[1] mod classes`` (the word
after it names the intent), so the task is learnable; steps cycle through the set
(:func:`gen.workload.transformer.load_atis` reads real ATIS files instead).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from gen.compiler import compile_layer
from gen.compiler.phases import compile_networks, compile_pieces, fastest_paths, recomputed_macs
from gen.compiler.dma import lower_dma
from gen.compiler.rowops import compile_rows
from gen.compiler.vecops import compile_vec
from gen.design.config import FettaConfig
from gen.errors import UsageError
from gen.toolflow import nonlinear as nl
from gen.toolflow.execute import rtl_check
from gen.toolflow.run import DRAM_MODES, execute_program
from gen.toolflow.vecrun import execute_vec
from gen.search.csse import best_path
from gen.workload.network import path_macs
from gen.workload.transformer import (ATTENTION_STAGES, CLASSIFIER_STAGES, LINEARS, TransformerSpec, attention_networks,
                                     classifier_networks, embedding_networks, token_factors)
from sim.bf16 import round_to_bf16_f32
from sim.golden import random_inputs

__all__ = ["Accelerator", "StepCost", "synthetic_data", "init_params", "forward_backward", "sgd_update",
           "TrainRun", "run_training", "KINDS"]

#: the step's work by kind (the benchmark's breakdown); ``vector``: the vector unit's work
#: (:mod:`gen.compiler.vecops`, :mod:`gen.compiler.rowops`: sums, GELU, softmax, layer norm, their
#: backward, the SGD update)
KINDS = ("embedding", "linear", "attention", "classifier", "vector")


def synthetic_data(model: TransformerSpec, seed: int) -> list[tuple[np.ndarray, int]]:
    """``model.samples`` pairs ``(tokens[seq], label)`` (module docstring)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(model.samples):
        tokens = rng.integers(1, model.vocab, size=model.seq)
        tokens[0] = 0
        out.append((tokens, int(tokens[1] % model.classes)))
    return out


def init_params(model: TransformerSpec, seed: int) -> dict[str, np.ndarray]:
    """Initial parameters (float32, bfloat16-exact): the cores as :func:`sim.golden.random_inputs` draws
    them (``W`` with entries of variance ~ ``1/I``), the position table with standard deviation 0.1,
    the classifier with ``1/sqrt(d_model)``."""
    rng = np.random.default_rng(seed + 1)
    params: dict[str, np.ndarray] = {}

    def cores(prefix: str, spec, s: int) -> None:
        drawn = random_inputs(spec, s)
        for k in range(len(spec.core_shapes())):
            params[f"{prefix}.core_{k}"] = drawn[f"core_{k}"]
    cores("emb", model.embedding, seed * 1000 + 1)
    params["pos"] = round_to_bf16_f32(0.1 * rng.standard_normal((model.seq, model.d_model)))
    for e in range(model.encoders):
        for i, kind in enumerate(LINEARS):
            cores(f"enc{e}.{kind}", model.layer(kind), seed * 1000 + 10 + 10 * e + i)
    params["cls"] = round_to_bf16_f32(rng.standard_normal((model.d_model, model.classes)) / math.sqrt(model.d_model))
    return params


@dataclass
class StepCost:
    """What the accelerator did: per kind (:data:`KINDS`) ``cycles``, ``compute_cycles``,
    ``dram_stall_cycles``, ``dram_bytes``, ``macs`` (useful), ``tcu_macs``, ``runs`` (the controller's
    runs: DMA jobs, or host-port runs) and ``programs`` (compiled programs executed)."""

    by_kind: dict[str, Counter] = field(default_factory=lambda: {k: Counter() for k in KINDS})
    host_elements: int = 0
    #: the vector unit's cycles (end to end) by operation (``add``, ``softmax``, ``layer_norm``, ...)
    vector_ops: Counter = field(default_factory=Counter)

    def add(self, kind: str, **values: int) -> None:
        self.by_kind[kind].update(values)

    def total(self, key: str) -> int:
        return sum(c[key] for c in self.by_kind.values())


class Accelerator:
    """The accelerator as the training step uses it: compiled layers (cached per spec and phase) and
    network programs (attention, classifier, embedding), on the emulator, with every run replayed on the
    RTL when ``sim`` is ``icarus`` or ``verilator`` (:func:`gen.toolflow.dmarun.rtl_check_dma` /
    :func:`gen.toolflow.execute.rtl_check` raise on any difference). ``dram``: ``"dma"`` (default) runs
    the contraction programs as DMA jobs, ``"rule"`` through the host port timed by the DRAM rule
    (:data:`gen.toolflow.run.DRAM_MODES`); the vector unit's programs use the host port either way."""

    def __init__(self, config: FettaConfig, sim: str = "emulator", dram: str = "dma"):
        if dram not in DRAM_MODES:
            raise UsageError(f"dram must be one of {', '.join(DRAM_MODES)}, got {dram!r}", field="--dram")
        self.config = config
        self.sim = sim
        self.dram = dram
        self.cost = StepCost()
        self._programs: dict[tuple, object] = {}
        self._useful: dict[tuple, int] = {}
        #: each contraction program lowered to DMA jobs (``dram="dma"``), by ``id`` of the cached program
        self._lowered: dict[int, object] = {}

    def layer(self, kind: str, spec, phase: str, operands: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Results (float32, bfloat16 values) of ``phase`` of the compiled ``spec`` on ``operands``
        (``X``, ``dY``, ``core_k``: rounded to bfloat16 here)."""
        return self._execute(kind, self._layer_program(spec, phase), operands)

    def _layer_program(self, spec, phase: str):
        key = (replace(spec, name="layer"), phase)      # the program does not depend on the name
        if key not in self._programs:
            self._programs[key] = compile_layer(spec, phase, self.config, dram=self.dram)
        return self._programs[key]

    def backward(self, kind: str, spec, operands: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``dX`` and every ``dcore_k`` of ``spec`` from ``X``, ``dY`` and the cores by the layer's
        ``backward`` program: the ``train`` program's training-aware paths (BP and WG reuse FP's
        intermediates: 13,777 cycles for the ATIS TT layer as DMA jobs against 5,041 + 9,844 for its
        separate ``bp`` and ``wg``, docs/compiler.md) without FP's last step, whose result ``Y`` the forward pass made
        (13,900 cycles: fewer MACs, but its 2 batch pieces hide less DRAM time than ``train``'s 4,
        docs/training.md). FP's intermediates do not survive from the forward pass, so the program computes
        them again; its useful MACs are the program's less those (:func:`gen.compiler.phases.recomputed_macs`)."""
        prog = self._layer_program(spec, "backward")
        return self._execute(kind, prog, operands, prog.macs - recomputed_macs(spec, prog))

    def embedding(self, spec, phase: str, operands: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The embedding's ``fp`` (``Y``) or ``wg`` (``dcore_k``) networks on ``operands`` (``E_k``,
        ``dY``, ``core_k``)."""
        def nets():
            fp, wg = embedding_networks(spec)
            return [fp] if phase == "fp" else wg
        # keyed apart from a layer program of the same spec (a ttm linear layer shaped like the embedding)
        return self.networks("embedding", ("embedding", replace(spec, name="layer"), phase), nets, operands,
                             search=True)

    def networks(self, kind: str, key, make: Callable, operands: dict[str, np.ndarray], search: bool = False,
                 batch: int | None = None) -> dict[str, np.ndarray]:
        """The results of the networks ``make()`` builds, compiled together as one program (built and
        compiled once, cached under ``key``), on ``operands``; ``search``: along the trees of
        :func:`gen.compiler.phases.fastest_paths` instead of the MAC-optimal ones. ``batch``: the networks
        are ``make(batch)``, their batch mode ``b`` (``batch`` long) leading every operand and result,
        compiled whole or in batch pieces, whichever runs fastest end to end
        (:func:`gen.compiler.phases.compile_pieces`, by this accelerator's ``dram`` count)."""
        if key not in self._programs:
            if batch is None:
                nets = make()
                paths = fastest_paths(nets, self.config, dram=self.dram) if search else None
                self._programs[key] = compile_networks(nets, self.config, paths=paths)
            else:
                nets = make(batch)
                self._programs[key] = compile_pieces(make, batch, self.config, dram=self.dram)
            # useful MACs: those of the MAC-optimal trees, whichever tree runs
            self._useful[key] = sum(path_macs(n, best_path(n)) for n in nets)
        return self._execute(kind, self._programs[key], operands, self._useful[key])

    def _execute(self, kind: str, prog, operands: dict[str, np.ndarray], macs: int | None = None) -> dict[str, np.ndarray]:
        if self.dram == "dma" and id(prog) not in self._lowered:
            self._lowered[id(prog)] = lower_dma(prog, self.config)
        ex, _ = execute_program(prog, {k: round_to_bf16_f32(v) for k, v in operands.items()}, self.config, self.sim,
                                self._lowered.get(id(prog)))
        t = ex.timeline
        self.cost.add(kind, cycles=t.cycles, compute_cycles=t.compute_cycles, dram_stall_cycles=t.dram_stall_cycles,
                      dram_bytes=t.dram_bytes, macs=prog.macs if macs is None else macs, tcu_macs=ex.tcu_macs,
                      runs=ex.runs, programs=1)
        return {k: np.asarray(v, np.float32) for k, v in ex.results.items()}

    def vector(self, op: str, y: np.ndarray | None = None, *xs: np.ndarray, lr: float = 0.0) -> np.ndarray:
        """The vector unit's ``op`` (:data:`gen.compiler.vecops.OPS`) on operands of one shape: ``add``
        (``y + xs[0] + ...``, FP32 ``y``), ``sgd`` (``y + bf16(-lr) xs[0]``), ``gelu`` (``xs[0]``) and
        ``gelu_bwd`` (``xs[0]`` the input, ``xs[1]`` the gradient); ``xs`` hold bfloat16 values.
        Returns float32 in the shape of the operands (FP32 sums, bfloat16 GELU values)."""
        shape = np.shape(xs[0])
        n = int(np.prod(shape))
        key = ("vector", op, n, len(xs), lr)
        if key not in self._programs:
            self._programs[key] = compile_vec(op, (n,), self.config, terms=len(xs), lr=lr)
        prog = self._programs[key]
        names = {"gelu": ("x",), "gelu_bwd": ("x", "dy"), "sgd": ("x",)}.get(op, tuple(f"x{i}" for i in range(len(xs))))
        inputs = dict(zip(names, (round_to_bf16_f32(x) for x in xs)))
        if y is not None:
            inputs["y"] = np.asarray(y, np.float32)
        return self._vector_run(prog, inputs)["out"].reshape(shape)

    def rows(self, op: str, inputs: dict[str, np.ndarray], scale: float = 1.0) -> dict[str, np.ndarray]:
        """The vector unit's row-wise ``op`` (:data:`gen.compiler.rowops.ROW_OPS`) along the last axis;
        ``inputs`` by the operation's names (bfloat16 values; FP32 values as :func:`split` pairs).
        Returns every output (float32)."""
        shape = max((np.shape(v) for v in inputs.values()), key=len)       # a per-row statistic has one axis less
        terms = sum(1 for k in inputs if k[0] == "x" and k[1:].isdigit())
        key = ("rows", op, shape, float(scale), terms)
        if key not in self._programs:
            self._programs[key] = compile_rows(op, shape, self.config, scale=float(scale), terms=terms)
        return self._vector_run(self._programs[key], {k: round_to_bf16_f32(v) for k, v in inputs.items()})

    def _vector_run(self, prog, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        ex = execute_vec(prog, inputs, self.config)
        if self.sim != "emulator":
            rtl_check(ex, self.config, self.sim)
        t = ex.timeline
        self.cost.add("vector", cycles=t.cycles, compute_cycles=t.compute_cycles, dram_stall_cycles=t.dram_stall_cycles,
                      dram_bytes=t.dram_bytes, macs=0, tcu_macs=0, runs=ex.runs, programs=1,
                      lane_ops=prog.lane_ops)
        self.cost.vector_ops[prog.op] += t.cycles
        return ex.results

    def classifier(self, stage: str, model: TransformerSpec, operands: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The classifier's ``stage`` (:data:`gen.workload.transformer.CLASSIFIER_STAGES`) on ``operands``
        (``Z``, ``W``, ``G``), one program per stage."""
        return self.networks("classifier", ("classifier", model.d_model, model.classes, stage),
                             lambda: [classifier_networks(model)[t] for t in CLASSIFIER_STAGES[stage]], operands)


def split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An FP32 tensor as two bfloat16 ones, ``hi + lo`` = ``x`` to 16 significant bits (how the vector
    unit takes FP32 operands: :mod:`gen.compiler.rowops`)."""
    hi = round_to_bf16_f32(x)
    return hi, round_to_bf16_f32(np.asarray(x, np.float32) - hi)


def _cores(params, prefix: str, n: int) -> dict[str, np.ndarray]:
    # the FP32 master weights; the accelerator computes with their bfloat16 copy (Accelerator rounds every
    # operand, as the vector unit's narrow output of the update would hold them)
    return {f"core_{k}": params[f"{prefix}.core_{k}"] for k in range(n)}


def forward_backward(acc: Accelerator, model: TransformerSpec, params: dict[str, np.ndarray],
                     tokens: np.ndarray, label: int) -> tuple[float, dict[str, np.ndarray]]:
    """Loss and gradients (float32, bfloat16 values) of one sample (module docstring). Every array the
    host's elementwise work makes is counted in ``acc.cost.host_elements`` (``ops`` operations each)."""
    S, H, dh = model.seq, model.heads, model.head_dim
    scale = np.float32(1 / math.sqrt(dh))
    emb_n = len(model.embedding.core_shapes())

    def host(x: np.ndarray, ops: int = 1) -> np.ndarray:
        acc.cost.host_elements += ops * x.size
        return x

    def terms(xs) -> dict[str, np.ndarray]:
        return {f"x{i}": x for i, x in enumerate(xs)}

    def layer_norm(x: np.ndarray, *xs: np.ndarray) -> tuple[np.ndarray, tuple]:
        """Layer norm of the residual sum ``x + xs[0] + ..`` (FP32 ``x``, bfloat16 ``xs``), fused."""
        xh, xl = split(x)
        r = acc.rows("layer_norm", {"xh": xh, "xl": xl, **terms(xs)})
        return r["yh"] + r["yl"], (r["yh"], r["yl"], r["rsh"], r["rsl"])

    def layer_norm_bwd(ln: tuple, dy: np.ndarray, *xs: np.ndarray) -> np.ndarray:
        """Its backward for the gradient ``dy + xs[0] + ..`` (the gradients meeting at its output)."""
        dyh, dyl = split(dy)
        r = acc.rows("layer_norm_bwd", {**dict(zip(("yh", "yl", "rsh", "rsl"), ln)), "dyh": dyh, "dyl": dyl,
                                        **terms(xs)})
        return r["dxh"] + r["dxl"]

    def attend(stage: str, operands: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The attention products of ``stage``, every head at once (in batch pieces of heads where
        that is faster); activations go in and come out head-first, ``[H, S, dh]``."""
        return acc.networks("attention", ("attention", S, H, dh, stage),
                            lambda h: [attention_networks(model, h)[t] for t in ATTENTION_STAGES[stage]], operands,
                            batch=H)

    def by_head(x: np.ndarray) -> np.ndarray:
        """A ``[seq, d_model]`` activation head-first, ``[H, S, dh]``."""
        return x.reshape(S, H, dh).transpose(1, 0, 2)

    def joined(x: np.ndarray) -> np.ndarray:
        """Back from head-first to ``[seq, d_model]``."""
        return x.transpose(1, 0, 2).reshape(S, H * dh)
    factors = token_factors(model.embedding, tokens)
    emb = _cores(params, "emb", emb_n)
    z = acc.vector("add", params["pos"], acc.embedding(model.embedding, "fp", {**factors, **emb})["Y"])
    saved = []
    for e in range(model.encoders):
        cores = {kind: _cores(params, f"enc{e}.{kind}", len(model.layer(kind).core_shapes())) for kind in LINEARS}

        def fp(kind, X):
            return acc.layer("linear", model.layer(kind), "fp", {"X": X, **cores[kind]})["Y"]
        x = z
        q, k, v = fp("q", x), fp("k", x), fp("v", x)
        scores = attend("scores", {"Q": by_head(q), "K": by_head(k)})["S"]
        probs = acc.rows("softmax", {"s": scores}, scale)["out"]                  # [H, S, S]
        ctx = joined(attend("context", {"P": probs, "V": by_head(v)})["C"])
        y1, ln1 = layer_norm(x, fp("o", ctx))
        f1 = fp("ffn1", y1)
        g = acc.vector("gelu", None, f1)
        z, ln2 = layer_norm(y1, fp("ffn2", g))
        saved.append((cores, x, q, k, v, probs, ctx, ln1, y1, f1, g, ln2))
    cls = params["cls"]
    logits = acc.classifier("forward", model, {"Z": z[:1], "W": cls})["logits"]
    loss, dlogits = nl.cross_entropy(logits, label)
    host(dlogits)
    back = acc.classifier("backward", model, {"Z": z[:1], "W": cls, "G": dlogits})
    grads = {"cls": back["dW"]}
    dz = np.zeros_like(z)
    dz[:1] = back["dZ"]
    dz_terms: tuple[np.ndarray, ...] = ()
    for e in reversed(range(model.encoders)):
        cores, x, q, k, v, probs, ctx, ln1, y1, f1, g, ln2 = saved[e]

        def bp_wg(kind, X, dY):
            spec = model.layer(kind)
            r = acc.backward("linear", spec, {"X": X, "dY": dY, **cores[kind]})
            for c in range(len(spec.core_shapes())):
                grads[f"enc{e}.{kind}.core_{c}"] = r[f"dcore_{c}"]
            return r["dX"]
        dr2 = layer_norm_bwd(ln2, dz, *dz_terms)
        df1 = acc.vector("gelu_bwd", None, f1, bp_wg("ffn2", g, dr2))
        dr1 = layer_norm_bwd(ln1, dr2, bp_wg("ffn1", y1, df1))
        dctx = bp_wg("o", ctx, dr1)
        back = attend("back_p", {"dC": by_head(dctx), "V": by_head(v), "P": probs})
        ds = acc.rows("softmax_bwd", {"p": probs, "dp": back["dP"]}, scale)["out"]
        back_s = attend("back_s", {"dS": ds, "Q": by_head(q), "K": by_head(k)})
        dq, dk, dv = (joined(a) for a in (back_s["dQ"], back_s["dK"], back["dV"]))
        dz, dz_terms = dr1, (bp_wg("q", x, dq), bp_wg("k", x, dk), bp_wg("v", x, dv))
    dz = acc.vector("add", dz, *dz_terms)
    grads["pos"] = round_to_bf16_f32(dz)
    wg = acc.embedding(model.embedding, "wg", {**factors, "dY": dz, **emb})
    for c in range(emb_n):
        grads[f"emb.core_{c}"] = wg[f"dcore_{c}"]
    return loss, grads


def sgd_update(acc: Accelerator, params: dict[str, np.ndarray], grads: dict[str, np.ndarray], lr: float) -> None:
    """``p <- p + bf16(-lr) * grad`` on the vector unit: ``AXPY`` on the FP32 master weights of every
    parameter at once (one program over their concatenation, so its pieces overlap their transfers;
    ``grads`` hold bfloat16 values)."""
    names = sorted(grads)
    flat = acc.vector("sgd", np.concatenate([params[k].ravel() for k in names]),
                      np.concatenate([np.asarray(grads[k], np.float32).ravel() for k in names]), lr=lr)
    at = 0
    for k in names:
        n = params[k].size
        params[k] = flat[at:at + n].reshape(params[k].shape)
        at += n


@dataclass
class TrainRun:
    """``fetta train``'s result: per step ``losses`` and accelerator costs, and the totals."""

    losses: list[float]
    step_cycles: list[int]
    cost: StepCost
    params: dict[str, np.ndarray]
    macs_per_cycle: int

    @property
    def cycles(self) -> int:
        return self.cost.total("cycles")

    @property
    def utilization(self) -> float:
        return self.cost.total("macs") / max(1, self.cycles * self.macs_per_cycle)

    def summary(self) -> dict:
        c = self.cost
        kinds = {k: dict(v) for k, v in c.by_kind.items()}
        return {"losses": self.losses, "steps": len(self.losses), "cycles": self.cycles,
                "cycles_per_step": self.step_cycles, "compute_cycles": c.total("compute_cycles"),
                "dram_stall_cycles": c.total("dram_stall_cycles"), "dram_bytes": c.total("dram_bytes"),
                "macs": c.total("macs"), "tcu_macs": c.total("tcu_macs"), "utilization": self.utilization,
                "runs": c.total("runs"), "host_elements": c.host_elements, "by_kind": kinds,
                "vector_ops": dict(c.vector_ops)}


def run_training(model: TransformerSpec, config: FettaConfig, steps: int, *, seed: int = 0, sim: str = "emulator",
                 advance: Callable[[int], None] | None = None,
                 data: list[tuple[np.ndarray, int]] | None = None, dram: str = "dma") -> TrainRun:
    """``steps`` SGD steps (batch 1) from :func:`init_params`, cycling through ``data`` (default: the
    synthetic set of ``seed``; :func:`gen.workload.transformer.load_atis` reads real ATIS files).
    ``dram``: how the contractions move their data (:class:`Accelerator`)."""
    data = synthetic_data(model, seed) if data is None else data
    params = init_params(model, seed)
    acc = Accelerator(config, sim, dram)
    losses, step_cycles = [], []
    for s in range(steps):
        before = acc.cost.total("cycles")
        tokens, label = data[s % len(data)]
        loss, grads = forward_backward(acc, model, params, tokens, label)
        sgd_update(acc, params, grads, model.lr)
        losses.append(loss)
        step_cycles.append(acc.cost.total("cycles") - before)
        if advance is not None:
            advance(1)
    return TrainRun(losses, step_cycles, acc.cost, params, config.macs)
