"""Tensor networks of each phase and SSA path bookkeeping (INTERFACES section 3)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import opt_einsum
import pytest
from hypothesis import given

from gen.workload.network import (TERM, greedy_path, path_macs, path_steps, phase_networks, stack_terms,
                                  stacked_value, unstack_results)
from gen.workload.spec import parse_spec
from sim.golden import contract, random_inputs

from .strategies import specs

TT = parse_spec({"format": "tt", "in_modes": [4, 3], "out_modes": [2, 5], "ranks": 3, "batch": 2})


def test_input_order_per_phase():
    fp, = phase_networks(TT, "fp")
    bp, = phase_networks(TT, "bp")
    wg = phase_networks(TT, "wg")
    assert [op.name for op in fp.inputs] == ["X", "core_0", "core_1", "core_2", "core_3"]
    assert [op.name for op in bp.inputs] == ["dY", "core_0", "core_1", "core_2", "core_3"]
    assert [n.target for n in wg] == ["dcore_0", "dcore_1", "dcore_2", "dcore_3"]
    assert [op.name for op in wg[2].inputs] == ["X", "dY", "core_0", "core_1", "core_3"]
    assert fp.output == ("b", "o0", "o1") and bp.output == ("b", "i0", "i1")
    # the size-1 boundary bond of core_0 is in no other input: it is restored by reshaping
    assert wg[0].output == ("i0", "r1") and wg[0].result_shape == (1, 4, 3)
    assert len(phase_networks(TT, "train")) == 6


def test_bt_terms():
    bt = parse_spec({"format": "bt", "in_modes": [2, 2], "out_modes": [2], "ranks": 2, "blocks": 3, "batch": 1})
    fp = phase_networks(bt, "fp")
    assert [n.label for n in fp] == ["Y[term 0]", "Y[term 1]", "Y[term 2]"]
    assert [op.name for op in fp[1].inputs] == ["X", "core_4", "core_5", "core_6", "core_7"]
    wg = phase_networks(bt, "wg")
    assert [op.name for op in wg[5].inputs] == ["X", "dY", "core_4", "core_6", "core_7"]


def test_path_macs_by_hand():
    fp, = phase_networks(TT, "fp")
    # X(b,i0,i1)=2*4*3, core_0(r0,i0,r1)=1*4*3 ; step [0,1]: modes b,i0,i1,r0,r1 -> 2*4*3*1*3 = 72
    steps = path_steps(fp, [[0, 1], [5, 2], [6, 3], [7, 4]])
    assert steps[0].macs == 2 * 4 * 3 * 1 * 3
    assert steps[0].out_modes == ("b", "i1", "r1")
    assert steps[1].macs == 2 * 3 * 3 * 3     # (b,i1,r1) x core_1(r1,i1,r2)
    assert path_macs(fp, [[0, 1], [5, 2], [6, 3], [7, 4]]) == sum(s.macs for s in steps)


@pytest.mark.parametrize("path,msg", [([[0, 1]], "needs 4 steps"), ([[0, 0], [1, 2], [3, 4], [5, 6]], "not live"),
                                      ([[0, 1], [0, 2], [3, 4], [5, 6]], "not live")])
def test_bad_paths(path, msg):
    fp, = phase_networks(TT, "fp")
    with pytest.raises(ValueError, match=msg):
        path_steps(fp, path)


@given(specs(max_mode=3, max_rank=3))
def test_any_valid_path_gives_the_same_result(spec):
    """The result does not depend on the order; greedy agrees with opt_einsum's einsum."""
    arrays = random_inputs(spec, 0)
    for net in phase_networks(spec, "train")[:4]:
        n = len(net.inputs)
        ref = opt_einsum.contract(net.einsum_expr(), *[arrays[op.name].astype(np.float64).reshape(net.shape(op))
                                                       for op in net.inputs])
        ref = ref.reshape(net.result_shape)
        # left-to-right order, a different valid path
        ltr = [[0, 1]] + [[n + k, k + 2] for k in range(n - 2)]
        for path in (greedy_path(net), ltr):
            got = contract(net, arrays, path)
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12 * max(1.0, float(np.max(np.abs(ref)))))


def test_greedy_is_not_worse_than_left_to_right_on_atis():
    atis = parse_spec({"format": "tt", "in_modes": [12, 8, 8], "out_modes": [8, 8, 12], "ranks": 12, "batch": 32})
    fp, = phase_networks(atis, "fp")
    n = len(fp.inputs)
    ltr = [[0, 1]] + [[n + k, k + 2] for k in range(n - 2)]
    assert path_macs(fp, greedy_path(fp)) <= path_macs(fp, ltr)
    assert math.prod(fp.sizes.values()) > path_macs(fp, greedy_path(fp))


@given(specs(max_mode=3, max_rank=3))
def test_stacked_terms_equal_the_terms(spec):
    """:func:`stack_terms` (what the compiler contracts): a block-term layer's terms as one network per
    target or core position, cores stacked along ``term``. Contracted by opt_einsum (float64), the
    stacked fp / bp result is the sum of the terms' and the stacked wg result holds each term's
    gradient; the MACs of the MAC-optimal paths are not more than the separate terms'; every other
    layer is returned unchanged."""
    from gen.search.csse import best_path

    arrays = random_inputs(spec, 0)
    for phase in ("fp", "bp", "wg"):
        nets = phase_networks(spec, phase)
        stacked = stack_terms(nets)
        if spec.format != "bt" or spec.blocks == 1:
            assert stacked == nets
            continue
        assert len(stacked) == len(nets) // spec.blocks
        assert all(TERM in n.sizes and n.terms == 1 for n in stacked)
        want: dict[str, np.ndarray] = {}
        for net in nets:
            v = opt_einsum.contract(net.einsum_expr(), *[arrays[op.name].astype(np.float64).reshape(net.shape(op))
                                                         for op in net.inputs]).reshape(net.result_shape)
            want[net.target] = want.get(net.target, 0) + v
        got = {}
        for net in stacked:
            v = opt_einsum.contract(net.einsum_expr(), *[np.asarray(stacked_value(arrays, op.name), np.float64)
                                                         .reshape(net.shape(op)) for op in net.inputs])
            got[net.target] = v.reshape(net.result_shape)
        got = unstack_results(got)
        assert got.keys() == want.keys()
        for k, v in want.items():
            np.testing.assert_allclose(got[k], v, rtol=1e-12, atol=1e-12 * max(1.0, float(np.max(np.abs(v)))))
        assert sum(path_macs(n, best_path(n)) for n in stacked) <= sum(path_macs(n, best_path(n)) for n in nets)
