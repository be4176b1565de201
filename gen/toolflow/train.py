"""``fetta train``: whole training steps of a tensorized transformer (seed 003) on the accelerator.

One step of one sample (batch 1, ``seq`` tokens) runs every contraction on the accelerator:

* the token embedding's lookup and its core gradients as the contractions of
  :func:`gen.workload.transformer.embedding_networks` (per-digit one-hot factors, seed 003 eq. 13-14),
  compiled by :func:`gen.compiler.phases.compile_networks` along the trees that run fastest end to end
  (:func:`gen.compiler.phases.fastest_paths`); every ``tt`` layer of every encoder (FP, BP,
  WG; BP and WG as the layer's training-aware ``train`` program, :meth:`Accelerator.backward`) compiled by
  :func:`gen.compiler.compile_layer`; each program compiled once per run and executed
  by :func:`gen.toolflow.execute.execute` (replayed on the RTL for ``icarus`` / ``verilator``);
* the attention products of every head (``Q K^T`` and ``P V`` forward, the four backward products) as
  the networks of :func:`gen.workload.transformer.attention_networks` (the head a batch mode), one
  program per stage between the host's softmax and its backward, and the classifier's three GEMMs as
  dense GEMMs tiled by :mod:`gen.compiler.gemm`.

Operands enter the accelerator in bfloat16 (the unified memory's format) and results come back in
bfloat16. Softmax, layer norm, GELU, the residual sums and the loss run on the host in float32
(:mod:`gen.toolflow.nonlinear`: the vector unit lacks exp / rsqrt / reductions), and so does the
SGD update, with the vector unit's ``AXPY`` arithmetic bit for bit (``master + bf16(-lr) * grad`` in
FP32 master weights, :func:`sim.bf16.f32_add` of :func:`sim.bf16.bf16_mul`): the host elements are
counted (``host_elements``), not timed. Cycles are the sum of the runs' end-to-end cycles
(compute plus DRAM stalls, :mod:`gen.design.timing`); nothing overlaps between runs.

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
from gen.compiler.phases import compile_networks, fastest_paths
from gen.compiler.gemm import plan_gemm
from gen.design.config import FettaConfig
from gen.toolflow import nonlinear as nl
from gen.toolflow.execute import execute, rtl_check
from gen.toolflow.run import run_plan
from gen.search.csse import best_path
from gen.workload.network import path_macs
from gen.workload.transformer import (ATTENTION_STAGES, LINEARS, TransformerSpec, attention_networks, embedding_networks,
                                     token_factors)
from sim.bf16 import bf16_mul, f32_add, f32_to_bf16, round_to_bf16_f32
from sim.golden import random_inputs

__all__ = ["Accelerator", "StepCost", "synthetic_data", "init_params", "forward_backward", "sgd_update",
           "TrainRun", "run_training", "KINDS"]

#: the step's work by kind (the benchmark's breakdown)
KINDS = ("embedding", "linear", "attention", "classifier")


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
    ``dram_stall_cycles``, ``dram_bytes``, ``macs`` (useful), ``tcu_macs``, ``runs``."""

    by_kind: dict[str, Counter] = field(default_factory=lambda: {k: Counter() for k in KINDS})
    host_elements: int = 0

    def add(self, kind: str, **values: int) -> None:
        self.by_kind[kind].update(values)

    def total(self, key: str) -> int:
        return sum(c[key] for c in self.by_kind.values())


class Accelerator:
    """The accelerator as the training step uses it: compiled layers (cached per spec and phase) and
    dense GEMMs, on the emulator, with every run replayed on the RTL when ``sim`` is ``icarus`` or
    ``verilator`` (:func:`gen.toolflow.execute.rtl_check` raises on any difference)."""

    def __init__(self, config: FettaConfig, sim: str = "emulator"):
        self.config = config
        self.sim = sim
        self.cost = StepCost()
        self._programs: dict[tuple, object] = {}
        self._useful: dict[tuple, int] = {}

    def layer(self, kind: str, spec, phase: str, operands: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Results (float32, bfloat16 values) of ``phase`` of the compiled ``spec`` on ``operands``
        (``X``, ``dY``, ``core_k``: rounded to bfloat16 here)."""
        return self._execute(kind, self._layer_program(spec, phase), operands)

    def _layer_program(self, spec, phase: str):
        key = (replace(spec, name="layer"), phase)      # the program does not depend on the name
        if key not in self._programs:
            self._programs[key] = compile_layer(spec, phase, self.config)
        return self._programs[key]

    def backward(self, kind: str, spec, operands: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``dX`` and every ``dcore_k`` of ``spec`` from ``X``, ``dY`` and the cores by the layer's ``train``
        program (the training-aware paths, which reuse FP's intermediates in BP and WG: 18,659 cycles
        for the ATIS TT layer against 29,050 for its separate ``bp`` and ``wg``). FP's intermediates do
        not survive from the forward pass, so the program computes FP again; its useful MACs are the
        program's less those of the ``fp`` program that ran in the forward pass."""
        prog = self._layer_program(spec, "train")
        return self._execute(kind, prog, operands, prog.macs - self._layer_program(spec, "fp").macs)

    def embedding(self, spec, phase: str, operands: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The embedding's ``fp`` (``Y``) or ``wg`` (``dcore_k``) networks on ``operands`` (``E_k``,
        ``dY``, ``core_k``)."""
        def nets():
            fp, wg = embedding_networks(spec)
            return [fp] if phase == "fp" else wg
        return self.networks("embedding", (replace(spec, name="layer"), phase), nets, operands, search=True)

    def networks(self, kind: str, key, make: Callable[[], list], operands: dict[str, np.ndarray],
                 search: bool = False) -> dict[str, np.ndarray]:
        """The results of the networks ``make()`` builds, compiled together as one program (built and
        compiled once, cached under ``key``), on ``operands``; ``search``: along the trees of
        :func:`gen.compiler.phases.fastest_paths` instead of the MAC-optimal ones."""
        if key not in self._programs:
            nets = make()
            paths = fastest_paths(nets, self.config) if search else None
            self._programs[key] = compile_networks(nets, self.config, paths=paths)
            # useful MACs: those of the MAC-optimal trees, whichever tree runs
            self._useful[key] = sum(path_macs(n, best_path(n)) for n in nets)
        return self._execute(kind, self._programs[key], operands, self._useful[key])

    def _execute(self, kind: str, prog, operands: dict[str, np.ndarray], macs: int | None = None) -> dict[str, np.ndarray]:
        ex = execute(prog, {k: round_to_bf16_f32(v) for k, v in operands.items()}, self.config)
        if self.sim != "emulator":
            rtl_check(ex, self.config, self.sim)
        t = ex.timeline
        self.cost.add(kind, cycles=t.cycles, compute_cycles=t.compute_cycles, dram_stall_cycles=t.dram_stall_cycles,
                      dram_bytes=t.dram_bytes, macs=prog.macs if macs is None else macs, tcu_macs=ex.tcu_macs,
                      runs=ex.runs)
        return {k: np.asarray(v, np.float32) for k, v in ex.results.items()}

    def matmul(self, kind: str, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """``A @ B`` as a dense GEMM (operands rounded to bfloat16)."""
        plan = plan_gemm(self.config, round_to_bf16_f32(A), round_to_bf16_f32(B))
        Y, t, tm = run_plan(self.config, plan, self.sim)
        self.cost.add(kind, cycles=t.cycles, compute_cycles=t.compute_cycles, dram_stall_cycles=t.dram_stall_cycles,
                      dram_bytes=t.dram_bytes, macs=plan.macs, tcu_macs=tm, runs=len(plan.passes))
        return np.asarray(Y, np.float32)


def _cores(params, prefix: str, n: int) -> dict[str, np.ndarray]:
    # the FP32 master weights; the accelerator computes with their bfloat16 copy (Accelerator rounds every
    # operand, as the vector unit's narrow output of the update would hold them)
    return {f"core_{k}": params[f"{prefix}.core_{k}"] for k in range(n)}


def forward_backward(acc: Accelerator, model: TransformerSpec, params: dict[str, np.ndarray],
                     tokens: np.ndarray, label: int) -> tuple[float, dict[str, np.ndarray]]:
    """Loss and gradients (float32, bfloat16 values) of one sample (module docstring). Every array the
    host's elementwise work makes is counted in ``acc.cost.host_elements`` (``ops`` operations each)."""
    S, H, dh = model.seq, model.heads, model.head_dim
    heads = (S, H, dh)                # a [seq, d_model] activation read per head
    scale = np.float32(1 / math.sqrt(dh))
    emb_n = len(model.embedding.core_shapes())

    def host(x: np.ndarray, ops: int = 1) -> np.ndarray:
        acc.cost.host_elements += ops * x.size
        return x

    def attend(stage: str, operands: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return acc.networks("attention", ("attention", S, H, dh, stage),
                            lambda: [attention_networks(model)[t] for t in ATTENTION_STAGES[stage]], operands)
    factors = token_factors(model.embedding, tokens)
    emb = _cores(params, "emb", emb_n)
    z = host(acc.embedding(model.embedding, "fp", {**factors, **emb})["Y"] + params["pos"])
    saved = []
    for e in range(model.encoders):
        cores = {kind: _cores(params, f"enc{e}.{kind}", len(model.layer(kind).core_shapes())) for kind in LINEARS}

        def fp(kind, X):
            return acc.layer("linear", model.layer(kind), "fp", {"X": X, **cores[kind]})["Y"]
        x = z
        q, k, v = fp("q", x), fp("k", x), fp("v", x)
        scores = attend("scores", {"Q": q.reshape(heads), "K": k.reshape(heads)})["S"]
        probs = host(nl.softmax(host(scores * scale)))                            # [H, S, S]
        ctx = attend("context", {"P": probs, "V": v.reshape(heads)})["C"].reshape(S, H * dh)
        r1 = host(fp("o", ctx) + x)
        y1 = host(nl.layer_norm(r1))
        f1 = fp("ffn1", y1)
        g = host(nl.gelu(f1))
        r2 = host(fp("ffn2", g) + y1)
        z = host(nl.layer_norm(r2))
        saved.append((cores, x, q, k, v, probs, ctx, r1, y1, f1, g, r2))
    cls = params["cls"]
    logits = acc.matmul("classifier", z[:1], cls)
    loss, dlogits = nl.cross_entropy(logits, label)
    host(dlogits)
    grads = {"cls": acc.matmul("classifier", z[:1].T, dlogits)}
    dz = np.zeros_like(z)
    dz[:1] = acc.matmul("classifier", dlogits, cls.T)
    for e in reversed(range(model.encoders)):
        cores, x, q, k, v, probs, ctx, r1, y1, f1, g, r2 = saved[e]

        def bp_wg(kind, X, dY):
            spec = model.layer(kind)
            r = acc.backward("linear", spec, {"X": X, "dY": dY, **cores[kind]})
            for c in range(len(spec.core_shapes())):
                grads[f"enc{e}.{kind}.core_{c}"] = r[f"dcore_{c}"]
            return r["dX"]
        dr2 = host(nl.layer_norm_bwd(r2, dz))
        df1 = host(nl.gelu_bwd(f1, bp_wg("ffn2", g, dr2)))
        dy1 = host(dr2 + bp_wg("ffn1", y1, df1))
        dr1 = host(nl.layer_norm_bwd(r1, dy1))
        dctx = bp_wg("o", ctx, dr1)
        back = attend("back_p", {"dC": dctx.reshape(heads), "V": v.reshape(heads), "P": probs})
        ds = host(nl.softmax_bwd(probs, back["dP"]) * scale, ops=2)
        back_s = attend("back_s", {"dS": ds, "Q": q.reshape(heads), "K": k.reshape(heads)})
        dq, dk, dv = (a.reshape(S, H * dh) for a in (back_s["dQ"], back_s["dK"], back["dV"]))
        dz = host(dr1 + bp_wg("q", x, dq) + bp_wg("k", x, dk) + bp_wg("v", x, dv), ops=3)
    grads["pos"] = round_to_bf16_f32(dz)
    wg = acc.embedding(model.embedding, "wg", {**factors, "dY": dz, **emb})
    for c in range(emb_n):
        grads[f"emb.core_{c}"] = wg[f"dcore_{c}"]
    return loss, grads


def sgd_update(params: dict[str, np.ndarray], grads: dict[str, np.ndarray], lr: float) -> int:
    """``p <- p + bf16(-lr) * bf16(grad)`` in FP32 (the vector unit's ``AXPY``); returns the elements."""
    a = f32_to_bf16(np.float32(-lr))
    n = 0
    for name, g in grads.items():
        params[name] = f32_add(params[name], bf16_mul(f32_to_bf16(g), a)).astype(np.float32)
        n += g.size
    return n


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
                "runs": c.total("runs"), "host_elements": c.host_elements, "by_kind": kinds}


def run_training(model: TransformerSpec, config: FettaConfig, steps: int, *, seed: int = 0, sim: str = "emulator",
                 advance: Callable[[int], None] | None = None,
                 data: list[tuple[np.ndarray, int]] | None = None) -> TrainRun:
    """``steps`` SGD steps (batch 1) from :func:`init_params`, cycling through ``data`` (default: the
    synthetic set of ``seed``; :func:`gen.workload.transformer.load_atis` reads real ATIS files)."""
    data = synthetic_data(model, seed) if data is None else data
    params = init_params(model, seed)
    acc = Accelerator(config, sim)
    losses, step_cycles = [], []
    for s in range(steps):
        before = acc.cost.total("cycles")
        tokens, label = data[s % len(data)]
        loss, grads = forward_backward(acc, model, params, tokens, label)
        acc.cost.host_elements += sgd_update(params, grads, model.lr)
        losses.append(loss)
        step_cycles.append(acc.cost.total("cycles") - before)
        if advance is not None:
            advance(1)
    return TrainRun(losses, step_cycles, acc.cost, params, config.macs)
