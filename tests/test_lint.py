"""The lint (``make lint``, :mod:`gen.toolflow.lint`): case completion, dead logic, per-signal waivers.

``make test`` runs the lint of every block of ``hdl.TOPS`` on the small configuration (both
datatypes for the arithmetic blocks); ``make lint`` runs it on the default configuration.
"""

from __future__ import annotations

import subprocess

import pytest
from amaranth import Module, Signal
from amaranth.back import rtlil
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

import hdl
from gen.design.config import FettaConfig, load_config
from gen.toolflow import lint
from sim.toolchain import available, sim_env

SMALL = "configs/small.toml"


# --------------------------------------------------------------------------- case completion
def test_complete_cases_adds_default_only_where_missing():
    text = "\n".join([
        "  always @* begin",
        "    x = 4'h0;",
        "    casez (st)",
        "      3'h0:",
        "          casez (sub)",
        "            1'h1:",
        "                x = 4'h2;",
        "            default:",
        "                x = 4'h3;",
        "          endcase",
        "    endcase",
        "  end",
        ""])
    out = hdl.complete_cases(text).splitlines()
    # the outer case gains one default, the inner one keeps its own
    assert sum(line.strip() == "default:" for line in out) == 2
    outer_end = max(i for i, line in enumerate(out) if line.strip() == "endcase")
    assert out[outer_end - 2].strip() == "default:" and out[outer_end - 1].strip() == "/* empty */;"
    assert hdl.complete_cases(hdl.complete_cases(text)) == hdl.complete_cases(text)


# --------------------------------------------------------------------------- dead logic
class _Toy(wiring.Component):
    """A register that nothing reads when ``dead`` (the defect the check must find)."""

    def __init__(self, dead: bool):
        self._dead = dead
        super().__init__({"a": In(8), "o": Out(8)})

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.o.eq(self.a + 1)
        if self._dead:
            unread = Signal(8, name="unread")
            m.d.sync += unread.eq(self.a ^ 0x5A)
        return m


def test_dead_logic_finds_an_unread_register_with_its_source_line():
    found = lint.dead_logic(rtlil.convert(_Toy(dead=True), name="toy"))
    assert set(found) == {"toy"}
    srcs = [src for net, src in found["toy"] if net == "unread"]
    assert srcs and all("tests/test_lint.py:" in src for src in srcs), found
    # the live register is not reported
    assert all(net != "o" for net, _ in found["toy"])
    assert lint.dead_logic(rtlil.convert(_Toy(dead=False), name="toy")) == {}


# --------------------------------------------------------------------------- every block
BLOCKS = [(name, SMALL, None) for name in sorted(hdl.TOPS)] + [
    ("pe", None, "int16"), ("ce", None, "int16"), ("vector_unit", None, "int16")]


@pytest.mark.sim
@pytest.mark.skipif(not available("verilator"), reason="Verilator not installed")
@pytest.mark.parametrize("name,config,datatype", BLOCKS, ids=[f"{n}-{c and 'small' or d}" for n, c, d in BLOCKS])
def test_block_lint_clean(name, config, datatype, tmp_path):
    """Verilator -Wall with only the emitter's file-wide waivers, no dead cell, and the per-signal
    waiver file reproduces the clean result when given to Verilator by hand."""
    cfg = load_config(config) if config else FettaConfig(datatype=datatype)
    result = lint.lint_block(name, cfg, workdir=tmp_path)
    assert result.clean, "\n".join((result.dead_summary() + result.warnings)[:20])
    module = hdl.module_name(name)
    cmd = ["verilator", "--lint-only", "-Wall", "--top-module", module, *[f"-Wno-{w}" for w in lint.WAIVERS],
           f"{module}.vlt", f"{module}.v"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=sim_env(), capture_output=True, text=True)
    assert proc.returncode == 0 and "%Warning" not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-2000:]


@pytest.mark.sim
@pytest.mark.skipif(not available("verilator"), reason="Verilator not installed")
def test_unused_input_port_is_not_waived(tmp_path):
    """An input that nothing reads is a finding even when no cell is dead; the alias names of the
    same block are waived."""

    class Idle(wiring.Component):
        def __init__(self):
            super().__init__({"a": In(8), "b": In(8), "o": Out(8)})

        def elaborate(self, platform):
            m = Module()
            m.d.comb += self.o.eq(self.a)
            return m

    result = lint.lint_rtlil("idle", "idle", rtlil.convert(Idle(), name="idle"), workdir=tmp_path)
    assert not result.dead
    assert len(result.warnings) == 1 and "UNUSEDSIGNAL" in result.warnings[0] and "'b'" in result.warnings[0]
