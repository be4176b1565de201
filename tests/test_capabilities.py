"""Architectures and ablations as capability sets of the one compiler (gen.compiler.capabilities).

Every architecture's program runs on the emulator of its own design (the TPU's square array
included) with correct results and the cycles its static timeline states (one timing source), and
each capability taken away is really absent from the program."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gen.compiler.capabilities import ABLATIONS, ARCHS, PATHS, capabilities, named_paths
from gen.compiler.program import CompileError
from gen.design.config import FettaConfig
from gen.design.isa import Opcode, Transpose
from gen.search.baselines import baseline_path
from gen.toolflow.execute import execute
from gen.workload.network import phase_networks
from gen.workload.spec import parse_spec
from sim.golden import compute, random_inputs

from tests.test_compiler import SPECS, bound

DEFAULT = FettaConfig()


def _run(name, fmt, phase, config=DEFAULT):
    caps = capabilities(name)
    spec = parse_spec(SPECS[fmt])
    inputs = random_inputs(spec, 0)
    prog = caps.compile(spec, phase, config)
    design = caps.config(config)
    ex = execute(prog, inputs, design)
    phases = ["fp", "bp", "wg"] if phase == "train" else [phase]
    gold = compute(spec, inputs, phases=phases)
    bnd = bound(spec, inputs, phases, prog)
    for k, ref in gold.items():
        assert np.all(np.abs(ex.results[k] - ref) <= bnd[k] + 1e-30), (name, k)
        assert np.max(np.abs(ex.results[k])) > 0
    # one timing source: the cycles `fetta model --arch NAME` reports are the emulator's
    assert prog.timeline(design).cycles == ex.cycles
    return caps, prog, design


@pytest.mark.parametrize("phase", ["fp", "train"])
@pytest.mark.parametrize("name", [*ARCHS, *ABLATIONS])
def test_capability_sets_emulator(name, phase):
    caps, prog, design = _run(name, "tt", phase)
    gemms = [ins for run in prog.runs for ins in run.program if ins.opcode == Opcode.GEMM]
    assert gemms
    if not caps.k_split:
        assert all(ins.gk == 1 for ins in gemms)
    if caps.views is False:
        assert not any(ins.tr & (Transpose.A | Transpose.B) for ins in gemms)
    if caps.transposes is False:
        assert not any(ins.tr & Transpose.O for ins in gemms)
    if caps.relayout == "host":
        assert prog.onchip_relayouts == 0
    if caps.stationary is False:
        assert set(prog.dataflows()) == {"OS"}
    if caps.array == "square":
        assert (design.num_ces, design.ce_rows, design.ce_cols) == (1, 16, 16)
        assert design.macs == DEFAULT.macs


@pytest.mark.parametrize("fmt", ["ht", "bt", "tr"])
def test_offchip_reordering_replaces_onchip(fmt):
    """The same layer that FETTA reorders on chip (or reads in a stationary dataflow) is reordered
    through DRAM without those capabilities. Both in one batch piece: a piece program counts its
    re-layouts once per piece, and each architecture keeps its own fastest piece count."""
    spec = parse_spec(SPECS[fmt])
    fetta = replace(ARCHS["fetta"], pieces=1).compile(spec, "train", DEFAULT)
    sigma = replace(ARCHS["sigma"], pieces=1).compile(spec, "train", DEFAULT)
    assert sigma.onchip_relayouts == 0 and not sigma.transposes and set(sigma.dataflows()) == {"OS"}
    assert sigma.relayouts >= fetta.relayouts
    if fetta.onchip_relayouts or fetta.transposes or set(fetta.dataflows()) != {"OS"}:
        assert sigma.relayouts > fetta.relayouts


def test_k_split_off_on_a_contraction_heavy_step():
    """A GEMM whose free modes are too small to fill 16 CEs needs cross-CE sums: without them fewer CEs."""
    spec = parse_spec({"format": "dense", "in_modes": [256], "out_modes": [4], "batch": 4})
    with_k = ARCHS["fetta"].compile(spec, "fp", DEFAULT)
    without = ABLATIONS["no-k-split"].compile(spec, "fp", DEFAULT)
    assert max(ins.gk for run in with_k.runs for ins in run.program if ins.opcode == Opcode.GEMM) > 1
    assert with_k.timeline(DEFAULT).compute_cycles < without.timeline(DEFAULT).compute_cycles


@pytest.mark.parametrize("path", PATHS)
def test_named_paths_are_compiled(path):
    spec = parse_spec(SPECS["tt"])
    paths = named_paths(spec, "train", path)
    prog = replace(ARCHS["fetta"], path=path).compile(spec, "train", DEFAULT)
    if path == "optimal":
        assert paths is None
        return
    order = {"left": "left_to_right", "right": "right_to_left"}.get(path, path)
    for ph in ("fp", "bp", "wg"):
        for net in phase_networks(spec, ph):
            assert prog.paths[net.label] == baseline_path(order, net)
    assert not prog.reused      # a fixed order is not re-solved with the saved intermediates


def test_right_to_left_order():
    spec = parse_spec(SPECS["tt"])
    (net,) = phase_networks(spec, "fp")
    n = len(net.inputs)
    path = baseline_path("right_to_left", net)
    assert path[0] == [n - 1, n - 2] and path[-1][1] == 0 and len(path) == n - 1


def test_architectures_and_their_network_energy():
    """The architectures of INTERFACES section 5, each a capability set; what differs in energy is
    only the network access scale (SIGMA's Benes distribution 2x, no networks on TRETA / TPU)."""
    assert list(ARCHS) == ["fetta", "sigma", "treta", "tpu", "tpu-offchip"]
    scales = {n: (c.dist_scale, c.red_scale) for n, c in ARCHS.items()}
    assert scales == {"fetta": (1.0, 1.0), "sigma": (2.0, 1.0), "treta": (0.0, 0.0), "tpu": (0.0, 0.0),
                      "tpu-offchip": (0.0, 0.0)}
    assert all((c.dist_scale, c.red_scale) == (1.0, 1.0) for c in ABLATIONS.values())


def test_unknown_names():
    with pytest.raises(CompileError, match="arch"):
        capabilities("gpu")
    with pytest.raises(CompileError, match="path"):
        named_paths(parse_spec(SPECS["tt"]), "fp", "random")
