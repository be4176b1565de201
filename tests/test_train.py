"""``fetta train`` (issue 19): the tiny tensorized transformer against an autograd reference.

* the model files parse; bad ones name the field and exit 2;
* the host's loss equals ``jax.grad`` of the same function (the vector unit's operations: ``tests/test_vecops.py``);
* the embedding networks contract to the rows of the full TTM weight;
* one sample's loss and every gradient of the accelerator path (bf16 operands, FP32 accumulation)
  against JAX in float64: within the stated bf16 bounds, on the tiny model and on random small models
  (hypothesis); 12 SGD steps' losses and final parameters too; the ATIS file loader;
* the loss of the tiny model falls over 100 steps, as the float64 reference's does;
* the CLI's JSON (INTERFACES section 5) adds up;
* one whole step with every run replayed on Verilator (the default design) equals the emulator; on
  Icarus with the small configuration too (``-m slow``).

Bounds: ``u = 2**-9``, half of bfloat16's unit roundoff (8 significant bits: ``2**-8``). Every accelerator operand is rounded once per stage;
the deepest gradient path of the one-encoder model crosses ~8 such roundings, so the loss and the
gradient as a whole are held to ``8u`` (relative), and each parameter's gradient to a direction within
``cos >= 1 - 8u`` (the per-parameter norm error of the tiny Q / K gradients, ~1e-4 of the whole, is
dominated by cancellation and not bounded separately). After ``s`` SGD steps the bound grows to
``8u (1 + s / 4)``, measured drift ~1 % at 12 steps.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gen.cli import main as cli_main
from gen.design.config import FettaConfig, load_config
from gen.errors import SpecError, UsageError
from gen.toolflow import nonlinear as nl
from gen.toolflow.train import Accelerator, forward_backward, init_params, run_training, synthetic_data
from gen.compiler.batched import pieced
from gen.compiler.dma import hardware_cycles
from gen.compiler.phases import compile_networks, compile_pieces
from gen.toolflow.execute import execute
from gen.workload.transformer import (ATTENTION_STAGES, attention_networks, embedding_networks, load_model, parse_model,
                                      token_factors)
from sim.bf16 import round_to_bf16_f32
from sim.golden import contract, random_inputs
from tests import jax_transformer as ref
from tests.strategies import examples

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "examples" / "atis_transformer_tiny.json"
U = 2.0 ** -9


@pytest.fixture(scope="module")
def tiny():
    return load_model(TINY)


# --- model files ---------------------------------------------------------------------------------
def test_model_files_parse():
    full = load_model(ROOT / "examples" / "atis_transformer.json")
    assert (full.d_model, full.vocab, full.heads, full.head_dim, full.encoders, full.seq) == (768, 1000, 12, 64, 2, 32)
    assert full.linear.format == "tt" and full.linear.ranks == 12 and full.embedding.ranks == 30
    assert full.lr == 0.004 and full.train_samples == 4478
    tiny = load_model(TINY)
    assert tiny.d_model == 64 and tiny.encoders == 1 and tiny.ffn == dataclasses.replace(tiny.linear, name=tiny.ffn.name)


BASE = {"seq": 8, "heads": 2, "encoders": 1, "classes": 4,
        "embedding": {"format": "ttm", "in_modes": [4, 4], "out_modes": [4, 4], "ranks": 2},
        "linear": {"format": "tt", "in_modes": [4, 4], "out_modes": [4, 4], "ranks": 2}}


@pytest.mark.parametrize("change,field", [
    ({"heads": 3}, "heads"),
    ({"seq": 0}, "seq"),
    ({"colour": 1}, "colour"),
    ({"lr": -1}, "lr"),
    ({"embedding": {**BASE["embedding"], "format": "tt"}}, "embedding.format"),
    ({"embedding": {**BASE["embedding"], "batch": 8}}, "embedding.batch"),
    ({"linear": {**BASE["linear"], "ranks": [2, 2]}}, "linear.ranks"),
    ({"linear": {**BASE["linear"], "out_modes": [4, 8]}}, "linear.out_modes"),
])
def test_bad_model_names_the_field(change, field):
    with pytest.raises(SpecError) as exc:
        parse_model({**BASE, **change})
    assert exc.value.field == field


def test_cli_bad_model_exit_2(tmp_path, capsys):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({**BASE, "heads": 3}))
    assert cli_main(["train", "--model", str(path)]) == 2
    err = capsys.readouterr().err
    assert "heads" in err and len(err.strip().splitlines()) == 1


# --- host operations against jax.grad ----------------------------------------------------------
def test_cross_entropy_matches_jax():
    """The host's loss (the one nonlinear operation the vector unit does not run) and its gradient."""
    logits = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32) * 3
    loss, d = nl.cross_entropy(logits, 3)
    f = lambda v: jax.nn.logsumexp(v) - v[0, 3]  # noqa: E731
    assert loss == pytest.approx(float(f(logits.astype(np.float64))), rel=1e-6)
    np.testing.assert_allclose(d, np.asarray(jax.grad(f)(logits.astype(np.float64))), atol=1e-6)


# --- the embedding lookup as a contraction ---------------------------------------------------------
@pytest.mark.parametrize("in_modes,out_modes", [((4, 4, 4), (4, 4, 4)), ((3, 5), (2, 6)), ((2, 3, 2, 2), (1, 2, 3, 2))])
def test_embedding_networks_are_the_lookup(in_modes, out_modes):
    spec = parse_model({**BASE, "embedding": {"format": "ttm", "in_modes": list(in_modes),
                                               "out_modes": list(out_modes), "ranks": 3},
                        "linear": {"format": "tt", "in_modes": [math.prod(out_modes)],
                                   "out_modes": [math.prod(out_modes)], "ranks": 1}, "heads": 1}).embedding
    arrays = random_inputs(spec, 1)
    cores = [jnp.asarray(arrays[f"core_{k}"], np.float64) for k in range(len(in_modes))]
    W = np.asarray(ref.ttm_weight(cores, in_modes, out_modes))
    tokens = np.random.default_rng(0).integers(0, spec.I, size=spec.batch)
    arrays.update(token_factors(spec, tokens))
    fp, wg = embedding_networks(spec)
    np.testing.assert_allclose(contract(fp, arrays).reshape(fp.result_shape), W[tokens], rtol=1e-12, atol=1e-12)
    dY = np.random.default_rng(1).standard_normal((spec.batch, spec.O))
    arrays["dY"] = dY
    grads = jax.grad(lambda cs: jnp.sum(ref.ttm_weight(cs, in_modes, out_modes)[tokens] * dY))(cores)
    for k, net in enumerate(wg):
        np.testing.assert_allclose(contract(net, arrays).reshape(net.result_shape), np.asarray(grads[k]),
                                   rtol=1e-10, atol=1e-12)


# --- attention in batch pieces of heads -------------------------------------------------------------
@pytest.mark.parametrize("stage", list(ATTENTION_STAGES))
def test_attention_pieces_equal_one_piece(stage):
    """The attention stages of a 4-head model compiled in batch pieces of heads (the head is the batch
    mode ``b``: every output sums over its own head only) give the one-piece program's results bit for
    bit, within the bound of the float64 contraction (an FP32 sum of ``K`` exact products rounded once
    to bfloat16, 8 significant bits: ``2^-8 |ref| + K 2^-24 sum |a b|``); the ATIS model's stages run in
    pieces, in fewer cycles as DMA jobs than in one run each."""
    model = parse_model({**BASE, "heads": 4})
    nets = lambda h: [attention_networks(model, h)[t] for t in ATTENTION_STAGES[stage]]     # noqa: E731
    config = FettaConfig()
    rng = np.random.default_rng(3)
    inputs = {op.name: round_to_bf16_f32(rng.standard_normal(net.shape(op))) for net in nets(4) for op in net.inputs}
    one = execute(compile_networks(nets(4), config), inputs, config).results
    for net in nets(4):
        ref = contract(net, inputs).reshape(net.result_shape)
        mag = contract(net, {k: np.abs(v) for k, v in inputs.items()}).reshape(net.result_shape)
        K = math.prod(net.sizes.values()) // math.prod(net.sizes[m] for m in net.output)
        assert np.all(np.abs(one[net.target] - ref) <= 2.0 ** -8 * np.abs(ref) + K * 2.0 ** -24 * mag), net.target
    for P in (2, 4):
        prog = pieced(compile_networks(nets(4 // P), config), P, 4, config)
        assert prog is not None and len(prog.runs) >= P
        got = execute(prog, inputs, config).results
        assert set(got) == set(one) == set(ATTENTION_STAGES[stage])
        for k in one:
            np.testing.assert_array_equal(got[k], one[k])
    atis = load_model(ROOT / "examples" / "atis_transformer.json")
    big = lambda h: [attention_networks(atis, h)[t] for t in ATTENTION_STAGES[stage]]      # noqa: E731
    best = compile_pieces(big, atis.heads, config, dram="dma")
    assert best.variant["pieces"] > 1
    assert hardware_cycles(best, config) < hardware_cycles(compile_networks(big(atis.heads), config), config)


# --- the accelerator path against JAX float64 ------------------------------------------------------
@st.composite
def small_models(draw):
    """Random small models: 1-2 encoders, 1-4 heads, d_model 8..64 factored into 2-3 modes, ranks 1-4,
    layers in tt, tr or ttm (the formats the JAX reference rebuilds), seq 2-8, 2-5 classes."""
    d_modes = draw(st.sampled_from([(2, 4), (4, 4), (2, 2, 4), (4, 2, 4), (4, 4, 4)]))
    d = math.prod(d_modes)
    heads = draw(st.sampled_from([h for h in (1, 2, 4) if d % h == 0]))
    vocab_modes = draw(st.sampled_from([(2, 3), (4, 4), (3, 2)] if len(d_modes) == 2
                                       else [(3, 2, 2), (2, 2, 2), (4, 2, 4)]))   # ttm: as many as d_modes
    fmt = draw(st.sampled_from(["tt", "tr", "ttm"]))
    linear = {"format": fmt, "in_modes": list(d_modes), "out_modes": list(d_modes[::-1] if fmt != "ttm" else d_modes),
              "ranks": draw(st.integers(1, 4))}
    return parse_model({"seq": draw(st.integers(2, 8)), "heads": heads, "encoders": draw(st.integers(1, 2)),
                        "classes": draw(st.integers(2, 5)), "lr": 0.01, "samples": 2,
                        "embedding": {"format": "ttm", "in_modes": list(vocab_modes), "out_modes": list(d_modes),
                                      "ranks": draw(st.integers(1, 4))},
                        "linear": linear})


#: a ttm linear layer shaped like the embedding: the two programs were cached under one key
EMBEDDING_SHAPED = {"seq": 2, "heads": 1, "encoders": 1, "classes": 2, "lr": 0.01, "samples": 2,
                    "embedding": {"format": "ttm", "in_modes": [4, 4], "out_modes": [4, 4], "ranks": 1},
                    "linear": {"format": "ttm", "in_modes": [4, 4], "out_modes": [4, 4], "ranks": 1}}


@settings(max_examples=examples(2, 6), deadline=None)
@given(model=small_models(), seed=st.integers(0, 3))
@example(model=parse_model(EMBEDDING_SHAPED), seed=0)
def test_random_models_gradients_within_bf16_bound(model, seed):
    """Random small models (tt, tr and ttm layers, 1-2 encoders): the whole gradient
    within ``16u`` of JAX float64 (twice the tiny model's bound: up to two encoders deep)."""
    data, params = synthetic_data(model, seed), init_params(model, seed)
    tokens, label = data[0]
    loss, grads = forward_backward(Accelerator(FettaConfig()), model, params, tokens, label)
    want_loss, want = ref.gradients(model, params, tokens, label)
    assert abs(loss - want_loss) <= 16 * U * max(1.0, want_loss)
    err = math.sqrt(sum(float(np.sum((grads[k] - want[k]) ** 2)) for k in want))
    norm = math.sqrt(sum(float(np.sum(want[k] ** 2)) for k in want))
    assert err <= 16 * U * norm, err / norm


@pytest.mark.parametrize("seed,dram", [(0, "dma"), (1, "dma"), (0, "rule")])
def test_step_gradients_within_bf16_bound(tiny, seed, dram):
    config = FettaConfig()
    data, params = synthetic_data(tiny, seed), init_params(tiny, seed)
    acc = Accelerator(config, dram=dram)
    tokens, label = data[0]
    loss, grads = forward_backward(acc, tiny, params, tokens, label)
    want_loss, want = ref.gradients(tiny, params, tokens, label)
    assert abs(loss - want_loss) <= 8 * U * max(1.0, want_loss)
    assert sorted(grads) == sorted(want)
    err = math.sqrt(sum(float(np.sum((grads[k] - want[k]) ** 2)) for k in want))
    norm = math.sqrt(sum(float(np.sum(want[k] ** 2)) for k in want))
    assert err <= 8 * U * norm, err / norm
    for k in want:
        cos = float(np.sum(grads[k] * want[k]) / (np.linalg.norm(grads[k]) * np.linalg.norm(want[k])))
        assert cos >= 1 - 8 * U, (k, cos)
    # every contraction ran on the accelerator, and the costs add up
    c = acc.cost
    assert c.total("runs") > 0 and c.total("macs") > 0 and c.by_kind["embedding"]["programs"] == 2
    assert c.total("cycles") == c.total("compute_cycles") + c.total("dram_stall_cycles")


def test_twelve_steps_track_the_reference(tiny):
    steps = 12
    r = run_training(tiny, FettaConfig(), steps, seed=0)
    want, final = ref.train(tiny, init_params(tiny, 0), synthetic_data(tiny, 0), steps)
    bound = 8 * U * (1 + steps / 4)
    for s, (a, b) in enumerate(zip(r.losses, want)):
        assert abs(a - b) <= bound * max(1.0, b), (s, a, b)
    err = math.sqrt(sum(float(np.sum((r.params[k] - final[k]) ** 2)) for k in final))
    moved = math.sqrt(sum(float(np.sum((final[k] - v) ** 2)) for k, v in init_params(tiny, 0).items()))
    assert err <= bound * moved, (err, moved)      # the parameters moved along the reference's path


@pytest.mark.slow
def test_tiny_loss_falls_over_100_steps(tiny):
    r = run_training(tiny, FettaConfig(), 100, seed=0)
    want, _ = ref.train(tiny, init_params(tiny, 0), synthetic_data(tiny, 0), 100)
    first, last = np.mean(r.losses[:16]), np.mean(r.losses[-16:])
    assert last < 0.5 * first, (first, last)
    assert abs(last - np.mean(want[-16:])) <= 0.1 * np.mean(want[-16:])
    assert len(set(r.step_cycles)) == 1          # the same programs every step: data-independent timing


# --- CLI --------------------------------------------------------------------------------------------
def test_cli_json(tmp_path, capsys):
    assert cli_main(["train", "--model", str(TINY), "--steps", "2", "--json", "--out", str(tmp_path / "p.npz")]) == 0
    out = json.loads(capsys.readouterr().out)
    tiny = load_model(TINY)
    with np.load(tmp_path / "p.npz") as z:           # the trained parameters: every one, moved by SGD
        assert sorted(z.files) == sorted(name for name, _ in tiny.params())
        start = init_params(tiny, 0)
        assert all(z[k].shape == start[k].shape for k in z.files) and not np.array_equal(z["cls"], start["cls"])
    for key in ("losses", "cycles", "utilization", "dram_bytes"):
        assert key in out
    assert len(out["losses"]) == 2 and out["cycles"] == sum(out["cycles_per_step"])
    assert out["cycles"] == sum(v["cycles"] for v in out["by_kind"].values())
    assert out["dram_bytes"] == sum(v["dram_bytes"] for v in out["by_kind"].values()) > 0
    assert out["utilization"] == pytest.approx(out["macs"] / (out["cycles"] * FettaConfig().macs))
    assert out["host_elements"] > 0


def test_cli_dram_rule(capsys):
    """``--dram rule``: the contractions through the host port, timed by the DRAM rule (``run_training``'s
    count for that mode, not the DMA jobs')."""
    tiny = load_model(TINY)
    assert cli_main(["train", "--model", str(TINY), "--dram", "rule", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rule, dma = (run_training(tiny, FettaConfig(), 1, seed=0, dram=d) for d in ("rule", "dma"))
    assert out["dram"] == "rule" and out["cycles"] == rule.cycles != dma.cycles
    # the vector unit's runs are the same either way; the contractions' data movement is not
    assert rule.cost.by_kind["vector"] == dma.cost.by_kind["vector"]
    assert rule.cost.by_kind["linear"]["runs"] < dma.cost.by_kind["linear"]["runs"]


def test_unknown_dram_mode():
    with pytest.raises(UsageError) as exc:
        Accelerator(FettaConfig(), dram="host")
    assert exc.value.field == "--dram"


@pytest.mark.sim
@pytest.mark.xdist_group("default-verilator")
def test_tiny_step_rtl_equals_emulator():
    """Every run of one whole step (the contractions' DMA jobs, the vector unit's runs) replayed on
    Verilator: the DRAM bytes stored, rows read back and cycles equal the emulator's (``rtl_check_dma`` /
    ``rtl_check`` raise otherwise), and the step's results are the emulator's."""
    tiny = load_model(TINY)
    config = FettaConfig()
    emu = run_training(tiny, config, 1, seed=0)
    rtl = run_training(tiny, config, 1, seed=0, sim="verilator")
    assert rtl.losses == emu.losses and rtl.step_cycles == emu.step_cycles
    assert all(np.array_equal(rtl.params[k], emu.params[k]) for k in emu.params)


@pytest.mark.sim
@pytest.mark.slow
def test_tiny_step_icarus_small_config():
    """The same on Icarus, with the small configuration (4 CEs of 2 x 2; ~2 min)."""
    tiny, config = load_model(TINY), load_config(ROOT / "configs" / "small.toml")
    emu = run_training(tiny, config, 1, seed=0)
    rtl = run_training(tiny, config, 1, seed=0, sim="icarus")
    assert rtl.losses == emu.losses and rtl.step_cycles == emu.step_cycles
    assert all(np.array_equal(rtl.params[k], emu.params[k]) for k in emu.params)


@pytest.mark.slow
def test_small_config_runs_the_tiny_model():
    r = run_training(load_model(TINY), load_config(ROOT / "configs" / "small.toml"), 1, seed=0)
    assert math.isfinite(r.losses[0]) and r.cycles > 0


# --- real ATIS files ------------------------------------------------------------------------------
def _atis(folder: Path, sents, labels) -> Path:
    (folder / "train").mkdir(parents=True)
    (folder / "train" / "seq.in").write_text("\n".join(sents) + "\n")
    (folder / "train" / "label").write_text("\n".join(labels) + "\n")
    return folder


def test_atis_loader(tmp_path, tiny):
    from gen.workload.transformer import CLS, PAD, UNK, load_atis
    long = " ".join(f"w{i}" for i in range(20))
    folder = _atis(tmp_path, ["flights to boston", "fare to boston please", long],
                   ["atis_flight", "atis_airfare", "atis_flight"])
    data, about = load_atis(tiny, folder)
    assert about["sentences"] == 3 and about["truncated"] == 1 and about["intents"] == ["atis_flight", "atis_airfare"]
    # "boston" and "to" are the most frequent words (ids 3, 4), then the rest alphabetically (fare 5, flights 6)
    tokens, label = data[0]
    assert list(tokens[:4]) == [CLS, 6, 4, 3] and all(tokens[4:] == PAD) and label == 0
    assert data[1][1] == 1 and len(data[2][0]) == tiny.seq and UNK not in data[2][0]
    small = dataclasses.replace(tiny, embedding=dataclasses.replace(tiny.embedding, in_modes=(2, 2, 2)))
    assert UNK in load_atis(small, folder)[0][2][0]      # vocab 8: 5 words, the rest unknown
    r = run_training(tiny, FettaConfig(), 2, data=data)
    assert len(r.losses) == 2 and all(math.isfinite(x) for x in r.losses)


@pytest.mark.parametrize("sents,labels,error,field", [
    (["a b", "c"], ["x"], UsageError, "--data"),
    (["a", "b", "c", "d", "e"], ["i1", "i2", "i3", "i4", "i5"], SpecError, "classes"),
])
def test_atis_loader_errors(tmp_path, tiny, sents, labels, error, field):
    from gen.workload.transformer import load_atis
    with pytest.raises(error) as exc:
        load_atis(tiny, _atis(tmp_path, sents, labels))
    assert exc.value.field == field
