"""The golden model against an independent computation (issue 2, item 6)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gen.workload.network import phase_networks
from gen.workload.spec import FORMATS, parse_spec
from sim.bf16 import is_bf16_exact
from sim.golden import golden, random_inputs, read_npz, write_npz

from .reference import loss_gradient_by_basis, rebuild_weight
from .strategies import specs

REL = 1e-10  # acceptance: golden vs rebuilt-weight reference


def rel_err(got, want) -> float:
    scale = max(float(np.max(np.abs(want))), 1e-300)
    return float(np.max(np.abs(np.asarray(got) - np.asarray(want)))) / scale


def cores_of(spec, arrays):
    return [arrays[f"core_{k}"] for k in range(spec.num_cores)]


def check_fp_bp(spec, arrays):
    W = rebuild_weight(spec, cores_of(spec, arrays))
    assert W.shape == (spec.I, spec.O)
    Y = arrays["X"].astype(np.float64) @ W
    dX = arrays["dY"].astype(np.float64) @ W.T
    assert arrays["Y"].shape == (spec.batch, spec.O) and arrays["dX"].shape == (spec.batch, spec.I)
    assert rel_err(arrays["Y"], Y) < REL
    assert rel_err(arrays["dX"], dX) < REL


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_fp_bp_match_rebuilt_weight(fmt, data):
    spec = data.draw(specs(formats=(fmt,)))
    check_fp_bp(spec, golden(spec, seed=3))


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_wg_matches_exact_basis_gradient(fmt, data):
    spec = data.draw(specs(formats=(fmt,), max_mode=3, max_rank=3))
    arrays = golden(spec, seed=5)
    cores = cores_of(spec, arrays)
    for k in range(spec.num_cores):
        want = loss_gradient_by_basis(spec, arrays["X"], arrays["dY"], cores, k)
        got = arrays[f"dcore_{k}"]
        assert got.shape == want.shape == spec.core_shapes()[k]
        if np.any(want):
            assert rel_err(got, want) < REL, (k, rel_err(got, want))
        else:
            assert not np.any(got)


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_inputs_are_bf16_exact_and_seeded(fmt, data):
    spec = data.draw(specs(formats=(fmt,)))
    a = random_inputs(spec, 11)
    b = random_inputs(spec, 11)
    c = random_inputs(spec, 12)
    assert set(a) == {"X", "dY", *(f"core_{k}" for k in range(spec.num_cores))}
    for key, value in a.items():
        assert value.dtype == np.float32
        assert is_bf16_exact(value), key
        assert np.array_equal(value, b[key]), key
    assert not np.array_equal(a["X"], c["X"])
    for k, shape in enumerate(spec.core_shapes()):
        assert a[f"core_{k}"].shape == shape


def test_value_scale_is_reasonable():
    """Y has roughly unit spread, so bf16 rounding later is meaningful (neither tiny nor huge)."""
    spec = parse_spec({"format": "tt", "in_modes": [12, 8, 8], "out_modes": [8, 8, 12], "ranks": 12, "batch": 32})
    Y = golden(spec, 1)["Y"]
    assert 0.2 < float(np.std(Y)) < 5.0


# --- the named acceptance layers ----------------------------------------------------
ATIS = {"name": "atis-q", "format": "tt", "in_modes": [12, 8, 8], "out_modes": [8, 8, 12], "ranks": 12, "batch": 32}
TR13 = {"name": "tr13", "format": "tr", "in_modes": [2, 3, 2, 2, 2, 3, 2], "out_modes": [2, 2, 3, 2, 2, 2],
        "ranks": 3, "batch": 4}


@pytest.mark.parametrize("d", [ATIS, TR13], ids=["atis-tt", "tr-13-cores"])
def test_named_layers(d, tmp_path):
    spec = parse_spec(d)
    arrays = golden(spec, 7)
    check_fp_bp(spec, arrays)
    if spec.num_cores == 13:
        assert len(phase_networks(spec, "wg")) == 13
    # one WG core checked exactly against the basis gradient (the smallest, to keep it fast)
    k = min(range(spec.num_cores), key=lambda c: math.prod(spec.core_shapes()[c]))
    want = loss_gradient_by_basis(spec, arrays["X"], arrays["dY"], cores_of(spec, arrays), k)
    assert rel_err(arrays[f"dcore_{k}"], want) < REL
    write_npz(tmp_path / "g.npz", arrays, spec)
    spec2, back = read_npz(tmp_path / "g.npz")
    assert spec2 == spec
    assert set(back) == set(arrays)


def test_npz_contents(tmp_path):
    spec = parse_spec(ATIS)
    arrays = golden(spec, 1)
    write_npz(tmp_path / "a.npz", arrays, spec)
    with np.load(tmp_path / "a.npz") as z:
        keys = set(z.files)
        assert json.loads(str(z["spec"]))["format"] == "tt"
        assert z["Y"].dtype == np.float64 and z["X"].dtype == np.float32
    want = {"X", "dY", "Y", "dX", "spec"} | {f"core_{k}" for k in range(6)} | {f"dcore_{k}" for k in range(6)}
    assert keys == want
