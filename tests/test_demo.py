"""The main job's RTL step (``gen.toolflow.demo.run_on_accelerator``) on the 4-CE demo design in Icarus:
a dense layer (compiled as a two-tensor network) and a small TT layer, both as DMA jobs."""

import json

import pytest

from gen.design.config import load_config
from gen.toolflow.demo import run_on_accelerator


@pytest.mark.sim
@pytest.mark.parametrize("layer,phase", [
    pytest.param({"name": "d", "format": "dense", "in_modes": [10], "out_modes": [9], "batch": 7}, "train",
                 marks=pytest.mark.slow),
    ({"name": "t", "format": "tt", "in_modes": [4, 6], "out_modes": [6, 4], "ranks": 3, "batch": 4}, "fp"),
])
def test_demo_run_on_accelerator(tmp_path, layer, phase, capsys):
    spec = tmp_path / "layer.json"
    spec.write_text(json.dumps(layer))
    assert run_on_accelerator(load_config("configs/demo.toml"), "icarus", str(spec), phase) == 0
    out = capsys.readouterr().out
    assert "bit- and cycle-exact" in out and "max rel. error vs golden" in out
    # step 3 by DMA jobs, step 4 the same program through the host port
    assert "jobs moving their own data by DMA" in out
    host = next(line for line in out.splitlines() if line.startswith("[host]"))
    assert "results bit-equal" in host and "bit- and cycle-exact" in host and "= step 3" in host
