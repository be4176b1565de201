"""Packaging and waveforms (issue 17, deliverable 3): the FuseSoC core of ``fetta verilog --core``
is built by FuseSoC (Verilator lint and Yosys synthesis targets), and the FST of ``fetta run
--trace`` is read back with an independent reader (pywellen)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sim.host_player import TOP
from sim.toolchain import sim_env

SMALL = ["--set", "num_ces=4", "--set", "net_ports=4", "--set", "banks=4", "--set", "unified_kb=4",
         "--set", "accum_kb=2", "--set", "imem_depth=16"]


def fetta(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "gen", *args], capture_output=True, text=True, timeout=timeout)


def fusesoc(cores: Path, build: Path, target: str, vlnv: str):
    exe = Path(sys.executable).parent / "fusesoc"
    return subprocess.run([str(exe), "--cores-root", str(cores), "run", "--build-root", str(build),
                           f"--target={target}", vlnv], capture_output=True, text=True, env=sim_env(), timeout=600)


@pytest.mark.sim
def test_verilog_core_builds_with_fusesoc(tmp_path):
    """The core names the Verilog (in a sub-folder, by a relative path) and the constraints; its lint
    target runs Verilator on it (and fails on a broken file), its synth target gives a netlist."""
    (tmp_path / "cores" / "rtl").mkdir(parents=True)
    core = tmp_path / "cores" / "pe.core"
    p = fetta("verilog", "--top", "pe", "-o", str(tmp_path / "cores" / "rtl" / "pe.v"), "--core", str(core), "--json")
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["vlnv"] == "fetta:generated:fetta_pe:0.1.0" and info["core"] == str(core)
    text = core.read_text()
    assert text.startswith("CAPI=2:\n")
    desc = yaml.safe_load(text)
    assert desc["filesets"]["rtl"]["files"] == ["rtl/pe.v"]
    assert (core.parent / desc["filesets"]["constraints"]["files"][0]).read_text().count("FREQUENCY PORT") == 1

    lint = fusesoc(tmp_path / "cores", tmp_path / "build", "lint", info["vlnv"])
    assert lint.returncode == 0, lint.stdout[-2000:] + lint.stderr[-2000:]
    assert "Verilator" in lint.stdout and "pe.v" in (tmp_path / "build").joinpath(
        "fetta_generated_fetta_pe_0.1.0", "lint", "fetta_generated_fetta_pe_0.1.0.vc").read_text()

    synth = fusesoc(tmp_path / "cores", tmp_path / "build", "synth", info["vlnv"])
    assert synth.returncode == 0, synth.stdout[-2000:] + synth.stderr[-2000:]
    netlist = json.loads((tmp_path / "build" / "fetta_generated_fetta_pe_0.1.0" / "synth" /
                          "fetta_generated_fetta_pe_0.1.0.json").read_text())
    cells = netlist["modules"]["fetta_pe"]["cells"].values()
    assert sum(c["type"] == "TRELLIS_FF" for c in cells) > 0 and sum(c["type"] == "LUT4" for c in cells) > 0

    # the lint target can fail: an undeclared name in the Verilog stops it
    v = tmp_path / "cores" / "rtl" / "pe.v"
    v.write_text(v.read_text().replace("assign", "assign undeclared_net = 1'b1; assign", 1))
    bad = fusesoc(tmp_path / "cores", tmp_path / "build2", "lint", info["vlnv"])
    assert bad.returncode != 0 and "undeclared_net" in bad.stdout + bad.stderr


def test_verilog_core_bad_use(tmp_path):
    p = fetta("verilog", "--top", "pe", "-o", str(tmp_path / "pe.v"), "--core", str(tmp_path / "pe.yml"))
    assert p.returncode == 2 and "--core" in p.stderr and ".core" in p.stderr
    (tmp_path / "cores").mkdir()
    p = fetta("verilog", "--top", "pe", "-o", str(tmp_path / "pe.v"), "--core", str(tmp_path / "cores" / "pe.core"))
    assert p.returncode == 2 and "--core" in p.stderr and "not in the folder" in p.stderr
    assert not (tmp_path / "pe.v").exists()


def _final(wave, name):
    """Value of the signal ``name`` of the test bench (the accelerator's port) at the end of the waveform."""
    var = next(v for v in wave.all_vars() if v.full_name.split(".")[-2:] == [TOP, name])
    return var.signal.value_at(2 ** 62)


@pytest.mark.sim
@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=pytest.mark.slow)])
def test_run_trace_writes_fst(tmp_path, sim):
    """``fetta run --trace F.fst``: an FST of the whole design whose cycle counter ends at the run's
    compute cycles (one pass) and whose controller reached ``done``."""
    import pywellen

    spec = tmp_path / "d.json"
    spec.write_text(json.dumps({"name": "d", "format": "dense", "in_modes": [10], "out_modes": [9], "batch": 7}))
    fst = tmp_path / "run.fst"
    p = fetta("run", "--spec", str(spec), "--phase", "fp", "--sim", sim, "--trace", str(fst), "--dram", "rule",
              "--json", *SMALL)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)
    assert res["traces"] == [str(fst)] and res["passes"] == 1
    wave = pywellen.Waveform(str(fst))
    assert wave.file_format == "FST"
    assert _final(wave, "cycles") == res["compute_cycles"] > 0
    assert _final(wave, "done") == 1
    # every level of the hierarchy is there, down to the PEs
    assert any(".pe" in v.full_name for v in wave.all_vars())


@pytest.mark.parametrize("extra, message", [
    (["--trace", "x.fst"], "needs an RTL simulator"),
    (["--sim", "icarus", "--trace", "x.vcd"], "written as FST"),
    (["--sim", "icarus", "--trace", "missing/x.fst"], "missing"),
])
def test_run_trace_bad_use(tmp_path, extra, message):
    spec = tmp_path / "d.json"
    spec.write_text(json.dumps({"name": "d", "format": "dense", "in_modes": [4], "out_modes": [4], "batch": 4}))
    extra = [str(tmp_path / e) if e.endswith((".fst", ".vcd")) else e for e in extra]
    p = fetta("run", "--spec", str(spec), *extra, *SMALL)
    assert p.returncode == 2 and "--trace" in p.stderr and message in p.stderr, p.stderr
