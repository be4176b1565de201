"""Elaboration shortcuts of :func:`hdl.to_rtlil`: shared leaf modules (``hdl/share.py``) and the
memory-initialisation fast path (``hdl/rtlil_meminit.py``) leave the design unchanged.

The shared design is proven equivalent to Amaranth's plain per-instance one with Yosys' ``equiv_*``
passes (both flattened); a deliberately changed shared module must fail that proof.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
from amaranth import Module, signed
from amaranth.back import rtlil
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

import hdl
from gen.design.config import FettaConfig
from hdl.fp import FP32ToBF16
from hdl.rtlil_meminit import fast_meminit
from hdl.share import SharedModules, shared_instance

SMALL = FettaConfig(num_ces=4, net_ports=4, banks=4, unified_kb=4, accum_kb=2, imem_depth=16)
needs_yosys = pytest.mark.skipif(shutil.which("yosys") is None, reason="Debian yosys missing: make toolchain")


def _equivalent(gold: str, gate: str, top: str, tmp_path) -> bool:
    """Whether RTLIL designs ``gold`` and ``gate`` (top module ``top``) are equivalent: both flattened,
    ``equiv_make``, ``equiv_simple -seq 2``, ``equiv_induct``, ``equiv_status -assert``."""
    (tmp_path / "gold.il").write_text(gold)
    (tmp_path / "gate.il").write_text(gate)
    prep = f"hierarchy -top {top}; proc; flatten; opt_clean"
    script = (f"read_rtlil {tmp_path}/gold.il; {prep}; rename {top} gold; design -stash gold\n"
              f"read_rtlil {tmp_path}/gate.il; {prep}; rename {top} gate; design -stash gate\n"
              "design -copy-from gold -as gold gold; design -copy-from gate -as gate gate\n"
              "equiv_make gold gate equiv; hierarchy -top equiv; equiv_simple -seq 2; equiv_induct; "
              "equiv_status -assert\n")
    run = subprocess.run(["yosys", "-q", "-p", script], capture_output=True, text=True, timeout=600)
    return run.returncode == 0


def _both(block_factory, name: str) -> tuple[str, str]:
    """(plain, shared) RTLIL of the block ``block_factory()`` as top ``name``."""
    plain = rtlil.convert(block_factory(), name=name, emit_src=False)
    return plain, SharedModules(name, emit_src=False).convert(block_factory())


class _TwoConverters(wiring.Component):
    """Two FP32 -> bf16 converters on halves of a 64-bit input."""

    def __init__(self):
        super().__init__({"a": In(64), "o": Out(32)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.lo = lo = FP32ToBF16()
        m.submodules.hi = hi = FP32ToBF16()
        m.d.comb += [lo.a.eq(self.a[:32]), hi.a.eq(self.a[32:]), self.o.eq(lo.o | (hi.o << 16))]
        return m


@needs_yosys
def test_shared_pe_is_equivalent(tmp_path):
    """The PE (a pipelined bf16 multiplier and FP32 adder, shared) against its plain netlist."""
    plain, shared = _both(lambda: hdl.build_top("pe", SMALL), "fetta_pe")
    assert shared.count("module \\fetta_pe.BF16Mul") == 1 and shared.count("module \\fetta_pe.FP32Add") == 1
    assert _equivalent(plain, shared, "fetta_pe", tmp_path)


@needs_yosys
def test_equivalence_check_finds_a_changed_shared_module(tmp_path):
    plain, shared = _both(_TwoConverters, "toy")
    assert _equivalent(plain, shared, "toy", tmp_path)
    # the bf16 quiet NaN 0x7FC0 of the shared converter becomes 0x7FC1: no longer equivalent
    head, sep, rest = shared.partition("module \\toy.FP32ToBF16")
    changed = head + sep + rest.replace("16'0111111111000000", "16'0111111111000001", 1)
    assert changed != shared
    assert not _equivalent(plain, changed, "toy", tmp_path)


def test_each_distinct_unit_is_one_module():
    """The 16-PE CE: one module per PE variant and per floating-point unit, instanced where used."""
    text = hdl.to_rtlil("ce", SMALL, src=False)
    defined = re.findall(r"^module (\\fetta_ce\.(BF16Mul|FP32Add|PE)\S*)$", text, re.M)
    assert len({name for name, _ in defined}) == len(defined)
    kinds = [kind for _, kind in defined]
    assert kinds.count("BF16Mul") == 1 and kinds.count("FP32Add") == 1 and kinds.count("PE") >= 1
    uses = {name: len(re.findall(rf"^\s*cell {re.escape(name)} ", text, re.M)) for name, _ in defined}
    assert sum(n for name, n in uses.items() if ".PE" in name) == SMALL.ce_rows * SMALL.ce_cols
    pe_modules = sum(kind == "PE" for kind in kinds)
    assert all(uses[name] == pe_modules for name, kind in defined if kind != "PE")   # one per PE module
    assert text.count("attribute \\top 1\n") == 1


def test_plain_elaboration_elsewhere():
    """Outside :class:`SharedModules` (the Amaranth simulator, ``verilog.convert``) a block is plain."""
    conv = FP32ToBF16()
    assert shared_instance(None, conv, FP32ToBF16) is None
    assert "cell \\" not in rtlil.convert(conv, name="cvt", emit_src=False).split("module \\cvt", 1)[1]


class _Memories(wiring.Component):
    """Memories of several widths and depths with initial contents (signed rows included)."""

    def __init__(self, inits):
        self._inits = inits
        super().__init__({"addr": In(4), **{f"q{i}": Out(shape) for i, (shape, _) in enumerate(inits)}})

    def elaborate(self, platform):
        m = Module()
        for i, (shape, init) in enumerate(self._inits):
            mem = m.submodules[f"mem{i}"] = memory.Memory(shape=shape, depth=len(init), init=init)
            rd = mem.read_port(domain="comb")
            m.d.comb += [rd.addr.eq(self.addr), getattr(self, f"q{i}").eq(rd.data)]
        return m


def test_fast_meminit_writes_the_same_rtlil():
    rng = np.random.default_rng(3)
    inits = [(1, [1, 0, 1]),
             (7, [int(x) for x in rng.integers(0, 128, 16)]),
             (signed(12), [int(x) for x in rng.integers(-2048, 2048, 5)]),
             (64, [int(x) for x in rng.integers(0, 2 ** 63, 9)]),
             (32, [0] * 16)]
    with fast_meminit(False) as active:
        assert not active
        plain = rtlil.convert(_Memories(inits), name="mems")
    with fast_meminit() as active:
        assert active
        fast = rtlil.convert(_Memories(inits), name="mems")
    assert "$meminit_v2" in fast and fast == plain
