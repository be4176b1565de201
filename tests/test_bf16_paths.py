"""Randomized differential test of the accelerator's arithmetic along the compiled contraction path.

The oracle evaluates every network of a phase along the **same SSA path** the compiler used
(``Program.paths``; dense layers: the one GEMM), in float64, rounding every intermediate and the
result to bfloat16 (RNE, flush to zero) as the unified memory stores them. Next to each value it
carries an elementwise bound on ``|accelerator - oracle|``, propagated step by step:

* operand differences: ``|A| e_B + e_A |B| + e_A e_B`` (contracted like the operands);
* the accelerator's FP32 accumulation of ``n`` exact bf16 products (in whatever order the CE grid,
  the reduction network and ACC chains add them): ``gamma_n * (|A| |B|)``, ``gamma_n = n u / (1 - n u)``,
  ``u = 2^-24``;
* both sides round to bfloat16: two roundings of values ``d`` apart differ by at most ``d`` plus one
  bf16 ulp of the larger magnitude (and the flush-to-zero threshold).

So the check is as tight as the arithmetic allows (a few bf16 ulps where rounding boundaries are
crossed, exact agreement elsewhere), unlike a flat tolerance, and it stays valid when outputs cancel.
Specs: every format, modes of size 1, rank 1 and odd batches included.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gen.compiler import compile_layer
from gen.design.config import FettaConfig
from gen.toolflow.execute import execute
from gen.toolflow.run import run_dense
from gen.compiler.phases import layer_networks
from gen.workload.network import STACK, path_steps, phase_networks, stacked_value
from sim.bf16 import round_to_bf16_f32
from sim.golden import random_inputs
from tests.strategies import examples, specs

CFG = FettaConfig()
U32 = 2.0 ** -24
FTZ = 2.0 ** -126


def rb(x: np.ndarray) -> np.ndarray:
    """Round float64 values to bfloat16 (RNE, flush to zero), back as float64."""
    return round_to_bf16_f32(np.asarray(x, np.float64)).astype(np.float64)


def ulp_bf16(m: np.ndarray) -> np.ndarray:
    """One bfloat16 ulp at magnitude ``m`` (8 significant bits), at least the flush-to-zero threshold."""
    e = np.floor(np.log2(np.maximum(m, FTZ)))
    return np.maximum(2.0 ** (e - 7), FTZ)


def oracle(net, arrays, path):
    """``(value, bound)`` of one network along ``path``, in ``net.output`` order and ``net.result_shape``."""
    live = {i: (np.asarray(stacked_value(arrays, op.name), np.float64).reshape(net.shape(op)), None)
            for i, op in enumerate(net.inputs)}
    nxt = len(net.inputs)
    out_modes = ()
    for step in path_steps(net, path):
        (a, ea), (b, eb) = live.pop(step.lhs), live.pop(step.rhs)
        letters = {m: chr(97 + i) for i, m in enumerate(dict.fromkeys(step.lhs_modes + step.rhs_modes))}
        expr = ("".join(letters[m] for m in step.lhs_modes) + "," + "".join(letters[m] for m in step.rhs_modes)
                + "->" + "".join(letters[m] for m in step.out_modes))
        exact = np.einsum(expr, a, b)
        mag = np.einsum(expr, np.abs(a), np.abs(b))
        n = math.prod(net.sizes[m] for m in set(step.lhs_modes) | set(step.rhs_modes) if m not in step.out_modes)
        d = n * U32 / (1 - n * U32) * mag
        if ea is not None:
            d = d + np.einsum(expr, ea, np.abs(b))
        if eb is not None:
            d = d + np.einsum(expr, np.abs(a), eb)
        if ea is not None and eb is not None:
            d = d + np.einsum(expr, ea, eb)
        live[nxt] = (rb(exact), d + ulp_bf16(np.abs(exact) + d))
        out_modes = step.out_modes
        nxt += 1
    ((value, bound),) = live.values()
    order = [out_modes.index(m) for m in net.output]
    return (np.transpose(value, order).reshape(net.result_shape),
            np.transpose(bound, order).reshape(net.result_shape))


def check(spec, phase: str, seed: int) -> None:
    inputs = random_inputs(spec, seed)
    if spec.format == "dense":
        results = run_dense(CFG, inputs, [phase], "emulator")["results"]
        paths = {}
    else:
        prog = compile_layer(spec, phase, CFG)
        results = execute(prog, inputs, CFG).results
        paths = prog.paths
    want: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    # the networks the compiler contracted (block terms stacked into one network)
    nets = phase_networks(spec, phase) if spec.format == "dense" else layer_networks(spec, phase)
    for net in nets:
        path = paths.get(net.label, [[0, 1]] if len(net.inputs) == 2 else None)
        assert path is not None, f"no compiled path for {net.label}"
        v, e = oracle(net, inputs, path)
        if net.target in want:      # block terms of a fixed path are summed on the host in float64
            v0, e0 = want[net.target]
            v, e = v0 + v, e0 + e
        want[net.target] = (v, e)
    # a stacked wg result holds the gradients of the terms' cores along its first axis
    split = [(key, v, e) for target, (vs, es) in want.items()
             for key, v, e in (zip(target.split(STACK), vs, es) if STACK in target else [(target, vs, es)])]
    for key, v, e in split:
        got = np.asarray(results[key], np.float64).reshape(v.shape)
        bad = np.abs(got - v) > e
        assert not bad.any(), (f"{key}: {int(bad.sum())} of {bad.size} elements outside the bound, e.g. got "
                               f"{got[bad][0]!r} oracle {v[bad][0]!r} bound {e[bad][0]!r}")


@settings(max_examples=examples(25, 60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs(max_mode=5, max_modes=3, max_rank=3, max_batch=7), phase=st.sampled_from(["fp", "bp", "wg"]),
       seed=st.integers(0, 2 ** 16))
def test_accelerator_matches_bf16_path_oracle(spec, phase, seed):
    check(spec, phase, seed)


def test_oracle_is_tight():
    """The bound is a few bf16 ulps: a result off by 4 ulps of its own magnitude must fail it."""
    from gen.workload.spec import parse_spec

    spec = parse_spec({"name": "t", "format": "tt", "in_modes": [3, 4], "out_modes": [4, 3], "ranks": 2,
                       "batch": 5})
    inputs = random_inputs(spec, 1)
    prog = compile_layer(spec, "fp", CFG)
    got = execute(prog, inputs, CFG).results["Y"]
    (net,) = phase_networks(spec, "fp")
    v, e = oracle(net, inputs, prog.paths[net.label])
    assert np.all(np.abs(got - v) <= e)
    worse = got + 4 * ulp_bf16(np.abs(got)) * np.sign(got + (got == 0))
    assert np.any(np.abs(worse - v) > e)
