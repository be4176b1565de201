"""The vector unit's training operations (issue 19): :mod:`gen.compiler.vecops` and :mod:`gen.compiler.rowops`
executed on the emulator (:mod:`gen.toolflow.vecrun`).

* ``add`` and ``sgd`` equal numpy's float32 arithmetic bit for bit;
* GELU and its backward over every finite bfloat16 input within the bounds derived in
  ``docs/training.md`` against float64 (the backward against ``jax.grad`` of the float64 GELU);
* softmax, layer norm and their backward (random shapes, hypothesis) within their bounds against
  float64 (the backward ones against ``jax.vjp`` of the float64 forward);
* pieces: several row pieces, column pieces (layer norm's two passes) and programs cut to the
  instruction memory give the same results as one piece; the emulator's cycles are the static timing;
* RTL == emulator on Icarus for every operation (small configuration, programs cut to 16 instructions).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gen.compiler.program import CompileError
from gen.compiler.rowops import EPS, compile_rows
from gen.compiler.vecops import compile_vec
from gen.design.config import FettaConfig
from gen.design.isa import assemble
from gen.design.timing import program_cycles
from gen.toolflow.execute import rtl_check
from gen.toolflow.train import split
from gen.toolflow.vecrun import execute_vec
from sim.bf16 import bf16_mul, f32_add, f32_to_bf16, round_to_bf16_f32

jax.config.update("jax_enable_x64", True)

U = 2.0 ** -9
CFG = FettaConfig()
SMALL = FettaConfig(num_ces=4, net_ports=4, banks=4, unified_kb=4, accum_kb=2, imem_depth=16)
C_GELU = np.sqrt(2 / np.pi)


def _gelu64(x):
    return 0.5 * x * (1 + jnp.tanh(C_GELU * (x + 0.044715 * x ** 3)))


def _all_bf16(lo: float, hi: float) -> np.ndarray:
    """Every finite bfloat16 value in ``[lo, hi]`` (float32)."""
    v = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
    return v[np.isfinite(v) & (v >= lo) & (v <= hi)]


def _run(prog, inputs, config=CFG):
    ex = execute_vec(prog, inputs, config)
    assert ex.compute_cycles == sum(program_cycles(assemble(r.program), config) for r in prog.runs)
    return ex


# --- elementwise ----------------------------------------------------------------------------------
@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 9000), terms=st.integers(1, 3), seed=st.integers(0, 99))
def test_add_and_sgd_equal_float32(n, terms, seed):
    rng = np.random.default_rng(seed)
    y = rng.standard_normal(n).astype(np.float32)
    xs = [round_to_bf16_f32(rng.standard_normal(n)) for _ in range(terms)]
    got = _run(compile_vec("add", (n,), CFG, terms=terms), {"y": y, **{f"x{i}": x for i, x in enumerate(xs)}})
    want = y
    for x in xs:
        want = want + x
    np.testing.assert_array_equal(got.results["out"], want)
    lr = float(rng.uniform(1e-3, 0.1))
    got = _run(compile_vec("sgd", (n,), CFG, lr=lr), {"y": y, "x": xs[0]})
    np.testing.assert_array_equal(got.results["out"], f32_add(y, bf16_mul(xs[0], f32_to_bf16(np.float32(-lr)))))


def test_gelu_every_bf16_input():
    """Every finite bfloat16 ``x`` in [-16, 16]: ``|gelu - gelu64| <= 6u |x|`` (one rounding of the
    result, 2u, and the sigmoid's ``3.2u``: the rounding of ``1 + exp`` and of its argument), plus
    ``2**-126`` (the vector unit flushes subnormals)."""
    x = _all_bf16(-16, 16)
    got = _run(compile_vec("gelu", x.shape, CFG), {"x": x}).results["out"]
    want = np.asarray(_gelu64(x.astype(np.float64)))
    err = np.abs(got - want) - 2.0 ** -126
    assert np.all(err <= 6 * U * np.abs(x)), np.max(err / np.maximum(np.abs(x), 1e-30)) / U


def test_gelu_bwd_every_bf16_input():
    """``dy = 1`` and every finite bfloat16 ``x`` in [-16, 16] against ``jax.grad``: ``|d - d64| <= 8u
    max(1, |x|)``; for other ``dy`` the result is ``bf16(dy d)`` (one more rounding)."""
    x = _all_bf16(-16, 16)
    got = _run(compile_vec("gelu_bwd", x.shape, CFG), {"x": x, "dy": np.ones_like(x)}).results["out"]
    want = np.asarray(jax.vmap(jax.grad(_gelu64))(x.astype(np.float64)))
    err = np.abs(got - want) / np.maximum(1.0, np.abs(x))
    assert np.all(err <= 8 * U), err.max() / U


def test_elementwise_pieces_and_unknown_op():
    n = 3 * 2048 * CFG.lanes + 5                 # four pieces on alternating halves
    prog = compile_vec("gelu", (n,), CFG)
    assert len({r.half for r in prog.runs}) == 2 and len(prog.runs) == 4
    with pytest.raises(CompileError, match="unknown vector operation"):
        compile_vec("tanh", (4,), CFG)


# --- row-wise -------------------------------------------------------------------------------------
def _softmax64(s, scale):
    z = scale * s.astype(np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@settings(max_examples=8, deadline=None)
@given(R=st.integers(1, 70), C=st.integers(1, 40), scale=st.sampled_from([1.0, 0.125, 0.3]), seed=st.integers(0, 99))
def test_softmax_and_backward(R, C, scale, seed):
    """``softmax`` within ``2.1u`` relative (one rounding of ``p``, 16-bit intermediates); ``softmax_bwd``
    on those ``p`` against ``jax.vjp`` of the float64 softmax at the scores: ``|ds - ds64| <= 2.1u |ds64|
    + 7u scale p max|dp|`` (``u scale p max|dp|`` its own arithmetic, ``6u`` the rounding of ``p``)."""
    rng = np.random.default_rng(seed)
    s = round_to_bf16_f32(rng.standard_normal((R, C)) * 4)
    p = _run(compile_rows("softmax", (R, C), CFG, scale=scale), {"s": s}).results["out"]
    want = _softmax64(s, scale)
    assert np.all(np.abs(p - want) <= 2.1 * U * want)
    dp = round_to_bf16_f32(rng.standard_normal((R, C)))
    ds = _run(compile_rows("softmax_bwd", (R, C), CFG, scale=scale), {"p": p, "dp": dp}).results["out"]
    _, vjp = jax.vjp(lambda z: jax.nn.softmax(z, axis=-1), scale * s.astype(np.float64))
    want = scale * np.asarray(vjp(dp.astype(np.float64))[0])
    bound = 2.1 * U * np.abs(want) + 7 * U * scale * p * np.abs(dp).max(-1, keepdims=True)
    assert np.all(np.abs(ds - want) <= bound), np.max(np.abs(ds - want) - bound)


def _ln64(x):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + EPS)


def _layer_norm(shape, x, config=CFG, terms=(), row_pieces=None):
    xh, xl = split(x)
    inputs = {"xh": xh, "xl": xl, **{f"x{i}": t for i, t in enumerate(terms)}}
    prog = compile_rows("layer_norm", shape, config, terms=len(terms), row_pieces=row_pieces)
    return _run(prog, inputs, config).results, xh, xl


@settings(max_examples=8, deadline=None)
@given(R=st.integers(1, 40), C=st.integers(2, 200), mean=st.floats(-2, 2), terms=st.integers(0, 2),
       seed=st.integers(0, 99))
def test_layer_norm_and_backward(R, C, mean, terms, seed):
    """``layer_norm`` of ``x + x0 + ..`` (``terms`` bfloat16 addends: the residual sum, fused):
    ``|y - y64| <= 2u (E[x^2] / var) |y64| + 2^-13 (1 + |y64|)`` (the unbiased roundings of ``x bf16(x)``
    in the variance, the pairs' 16 bits), ``rstd`` within ``2u E[x^2] / var``; ``layer_norm_bwd`` of
    ``dy + ..`` against ``jax.vjp``: within ``2u (E[x^2] / var) rstd max|dy| (1 + |y|)``."""
    _check_layer_norm(R, C, mean, terms, seed)


@pytest.mark.parametrize("R, C, pieces", [(32, 768, 2), (12, 96, 4), (8, 64, 8)])
def test_layer_norm_row_pieces(R, C, pieces):
    """Folded operands in row pieces (each piece folded on its own, one pass over its columns: the
    ATIS backward's choice) meet the same bounds; ``row_pieces`` outside what folds is refused."""
    assert compile_rows("layer_norm_bwd", (R, C), CFG, terms=1, row_pieces=pieces).row_pieces == pieces
    _check_layer_norm(R, C, 0.5, 1, pieces, row_pieces=pieces)
    with pytest.raises(CompileError, match="row pieces") as err:
        compile_rows("layer_norm", (R, C), CFG, row_pieces=3 * R)
    assert err.value.field == "row_pieces"


def _check_layer_norm(R, C, mean, terms, seed, row_pieces=None):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((R, C)) + mean).astype(np.float32)
    xs = [round_to_bf16_f32(rng.standard_normal((R, C))) for _ in range(terms)]
    r, xh, xl = _layer_norm((R, C), x, terms=xs, row_pieces=row_pieces)
    x64 = xh.astype(np.float64) + xl + sum(t.astype(np.float64) for t in xs)
    y = r["yh"].astype(np.float64) + r["yl"]
    want = np.asarray(_ln64(x64))
    var = x64.var(-1, keepdims=True)
    cond = (x64 ** 2).mean(-1, keepdims=True) / var
    assert np.all(np.abs(y - want) <= 2 * U * cond * np.abs(want) + 2.0 ** -13 * (1 + np.abs(want)))
    rstd = 1 / np.sqrt(var[..., 0] + EPS)
    assert np.all(np.abs(r["rsh"] + r["rsl"].astype(np.float64) - rstd) <= 2 * U * cond[..., 0] * rstd)
    dy = rng.standard_normal((R, C)).astype(np.float32)
    dyh, dyl = split(dy)
    dys = [round_to_bf16_f32(rng.standard_normal((R, C))) for _ in range(terms)]
    got = _run(compile_rows("layer_norm_bwd", (R, C), CFG, terms=terms, row_pieces=row_pieces),
               {"yh": r["yh"], "yl": r["yl"], "rsh": r["rsh"], "rsl": r["rsl"], "dyh": dyh, "dyl": dyl,
                **{f"x{i}": t for i, t in enumerate(dys)}}).results
    dx = got["dxh"].astype(np.float64) + got["dxl"]
    _, vjp = jax.vjp(_ln64, x64)
    d64 = dyh.astype(np.float64) + dyl + sum(t.astype(np.float64) for t in dys)
    want = np.asarray(vjp(d64)[0])
    bound = 2 * U * cond * rstd[:, None] * np.abs(d64).max(-1, keepdims=True) * (1 + np.abs(y))
    assert np.all(np.abs(dx - want) <= bound), np.max(np.abs(dx - want) / bound)


def test_pieces_agree_with_one_piece():
    """Layer norm on the small configuration runs in row pieces, column pieces (two passes) and
    programs cut to 16 instructions; it meets the same bound as the default configuration's single
    run and agrees with it to the pairs' 16 bits (the blocks, so the order of the partial sums, differ)."""
    x = (np.random.default_rng(5).standard_normal((40, 24)) + 0.5).astype(np.float32)
    prog = compile_rows("layer_norm", (40, 24), SMALL)
    assert len({r.first for r in prog.runs}) == 2 and len({r.c0 for r in prog.runs}) > 1
    # few rows: columns folded into a column's 16 rows (the tiny model's 8 x 64 by 8, the ATIS model's 32 x 768 by 2;
    # in row pieces, each piece by more: the ATIS backward with three addends in 4 pieces of 8 rows, 8 columns each)
    assert compile_rows("layer_norm", (8, 64), CFG, row_pieces=1).fold == 8
    assert compile_rows("layer_norm", (32, 768), CFG, row_pieces=1).fold == 2
    bwd = compile_rows("layer_norm_bwd", (32, 768), CFG, terms=3)
    assert (bwd.row_pieces, bwd.fold) == (4, 8)
    assert bwd.timeline(CFG).cycles < compile_rows("layer_norm_bwd", (32, 768), CFG, terms=3,
                                                   row_pieces=1).timeline(CFG).cycles
    assert len(compile_rows("layer_norm", (40, 24), CFG).runs) == 1
    small, xh, xl = _layer_norm((40, 24), x, SMALL)
    big, _, _ = _layer_norm((40, 24), x)
    x64 = xh.astype(np.float64) + xl
    want = np.asarray(_ln64(x64))
    cond = (x64 ** 2).mean(-1, keepdims=True) / x64.var(-1, keepdims=True)
    for r in (small, big):
        y = r["yh"].astype(np.float64) + r["yl"]
        assert np.all(np.abs(y - want) <= 2 * U * cond * np.abs(want) + 2.0 ** -13 * (1 + np.abs(want)))
    ys, yb = (r["yh"].astype(np.float64) + r["yl"] for r in (small, big))
    assert np.all(np.abs(ys - yb) <= 2.0 ** -14 * (1 + np.abs(yb)))


# --- RTL ------------------------------------------------------------------------------------------
@pytest.mark.sim
@pytest.mark.parametrize("sim", [pytest.param("icarus", marks=pytest.mark.slow), "verilator"])
def test_vector_programs_rtl(sim):
    """Every operation on the small configuration (several pieces and runs each): the RTL equals the
    emulator bit and cycle exact (Icarus, ~1.5 min, in ``make test-full``)."""
    rng = np.random.default_rng(19)
    x = round_to_bf16_f32(rng.standard_normal((6, 12)) * 2)
    y = rng.standard_normal((6, 12)).astype(np.float32)
    xh, xl = split(y)
    ln = execute_vec(compile_rows("layer_norm", (6, 12), SMALL), {"xh": xh, "xl": xl}, SMALL)
    xe = round_to_bf16_f32(rng.standard_normal(600) * 3)
    ye = rng.standard_normal(600).astype(np.float32)
    cases = [(compile_vec("add", (600,), SMALL, terms=2), {"y": ye, "x0": xe, "x1": xe[::-1]}),
             (compile_vec("sgd", (600,), SMALL, lr=0.01), {"y": ye, "x": xe}),
             (compile_vec("gelu", (600,), SMALL), {"x": xe}),
             (compile_vec("gelu_bwd", (600,), SMALL), {"x": xe, "dy": xe[::-1]}),
             (compile_rows("softmax", (6, 12), SMALL, scale=0.3), {"s": x}),
             (compile_rows("softmax_bwd", (6, 12), SMALL, scale=0.3), {"p": np.abs(x) / 8, "dp": x}),
             (compile_rows("layer_norm", (6, 12), SMALL), {"xh": xh, "xl": xl}),
             (compile_rows("layer_norm", (6, 12), SMALL, row_pieces=2), {"xh": xh, "xl": xl}),
             (compile_rows("layer_norm_bwd", (6, 12), SMALL, row_pieces=2),
              {**{k: ln.results[k] for k in ("rsh", "rsl")}, "yh": ln.results["yh"], "yl": ln.results["yl"],
               "dyh": x, "dyl": np.zeros_like(x)}),
             (compile_rows("layer_norm_bwd", (6, 12), SMALL),
              {**{k: ln.results[k] for k in ("rsh", "rsl")}, "yh": ln.results["yh"], "yl": ln.results["yl"],
               "dyh": x, "dyl": np.zeros_like(x)})]
    for prog, inputs in cases:
        assert len(prog.runs) > 1, prog.op
        assert rtl_check(execute_vec(prog, inputs, SMALL), SMALL, sim), prog.op
