"""Lowering pairwise contractions to strided batched GEMMs (compiler front end)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gen.workload.grouping import lower_step
from gen.workload.network import greedy_path, path_steps, phase_networks
from sim.golden import random_inputs

from .strategies import specs


@given(specs(max_mode=3, max_rank=3), st.randoms(use_true_random=False))
def test_every_step_of_every_network_runs_as_a_strided_gemm(spec, rnd):
    """Walking the strides (in any output layout) reproduces numpy's einsum of the step."""
    arrays = random_inputs(spec, 1)
    for net in phase_networks(spec, "train"):
        live = {i: arrays[op.name].astype(np.float64).reshape(net.shape(op)) for i, op in enumerate(net.inputs)}
        nxt = len(net.inputs)
        for step in path_steps(net, greedy_path(net)):
            a, b = live.pop(step.lhs), live.pop(step.rhs)
            layout = list(step.out_modes)
            rnd.shuffle(layout)
            view = lower_step(step, net.sizes, layout)
            letters = {m: chr(97 + i) for i, m in enumerate(net.sizes)}
            expr = "".join(letters[m] for m in step.lhs_modes) + "," + "".join(letters[m] for m in step.rhs_modes) \
                + "->" + "".join(letters[m] for m in layout)
            want = np.einsum(expr, a, b)
            got = view.run(a, b).reshape(want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
            assert view.macs == step.macs
            live[nxt] = want.transpose([layout.index(m) for m in step.out_modes])
            nxt += 1


def test_grouping_of_a_tt_step():
    from gen.workload.spec import parse_spec

    spec = parse_spec({"format": "tt", "in_modes": [4, 3], "out_modes": [2, 5], "ranks": 3, "batch": 2})
    fp, = phase_networks(spec, "fp")
    step = path_steps(fp, [[0, 1], [5, 2], [6, 3], [7, 4]])[0]   # X(b,i0,i1) x core_0(r0,i0,r1)
    v = lower_step(step, fp.sizes)
    assert [l.mode for l in v.batch] == []
    assert [l.mode for l in v.m] == ["b", "i1"]
    assert [l.mode for l in v.n] == ["r1"]
    assert sorted(l.mode for l in v.k) == ["i0", "r0"]
    assert v.dims == (1, 6, 3, 4)
    # X is stored (b, i0, i1): i1 is contiguous, i0 has stride 3, b stride 12
    assert {l.mode: l.a_stride for l in v.m + v.k} == {"b": 12, "i1": 1, "i0": 3, "r0": 0}
