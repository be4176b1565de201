"""sim/vdedup.py: identical per-instance modules are merged, references rewritten, nothing else."""

from __future__ import annotations

import re

from sim.vdedup import dedup_modules

TEXT = r"""/* header */

(* top =  1  *)
(* generator = "Amaranth" *)
module top(a, o);
  input a; output [1:0] o;
  \top.u0  u0 (.a(a), .o(o[0]));
  \top.u1  u1 (.a(a), .o(o[1]));
  \top.v  v (.a(a));
endmodule

(* generator = "Amaranth" *)
module \top.u0 (a, o);
  reg \$auto$verilog_backend.cc:2355:dump_module$1  = 0;
  input a; output o;
  \top.u0.leaf  leaf (.a(a), .o(o));
endmodule

(* generator = "Amaranth" *)
module \top.u0.leaf (a, o);
  input a; output o;
  assign o = ~a;
endmodule

(* generator = "Amaranth" *)
module \top.u1 (a, o);
  reg \$auto$verilog_backend.cc:2355:dump_module$7  = 0;
  input a; output o;
  \top.u1.leaf  leaf (.a(a), .o(o));
endmodule

(* generator = "Amaranth" *)
module \top.u1.leaf (a, o);
  input a; output o;
  assign o = ~a;
endmodule

(* generator = "Amaranth" *)
module \top.v (a);
  input a;
  wire b;
  assign b = a;
endmodule
"""


def modules(text):
    return re.findall(r"^module (\\\S+|\w+)", text, re.M)


def test_merges_identical_subtrees_bottom_up():
    out, dropped = dedup_modules(TEXT)
    assert dropped == 2
    assert modules(out) == ["top", r"\top.u0", r"\top.u0.leaf", r"\top.v"]
    # the second instance now points to the canonical module; the leaf reference inside u0 too
    assert r"\top.u0  u1 (" in out and r"\top.u0.leaf  leaf (" in out
    assert r"\top.u1" not in out
    # attribute lines of dropped modules go with them; the others stay
    assert out.count('(* generator = "Amaranth" *)') == 4 and "(* top =  1  *)" in out
    # idempotent
    assert dedup_modules(out) == (out, 0)


def test_different_modules_are_kept():
    text = TEXT.replace("assign o = ~a;\nendmodule\n\n(* generator = \"Amaranth\" *)\nmodule \\top.v",
                        "assign o = a;\nendmodule\n\n(* generator = \"Amaranth\" *)\nmodule \\top.v")
    out, dropped = dedup_modules(text)
    assert dropped == 0 and modules(out) == modules(TEXT)


def test_accelerator_modules_shrink():
    """The 4-CE accelerator: Amaranth's per-instance modules collapse to the distinct blocks. (Its
    floating-point units are shared modules already, one per parameter set, hdl/share.py; the PEs,
    CEs, network switches and memories are still one module per instance.)"""
    from gen.design.config import FettaConfig
    from sim.runner import elaborate

    cfg = FettaConfig(num_ces=4, net_ports=4, banks=4, unified_kb=4, accum_kb=2, imem_depth=16)
    text = elaborate("fetta", cfg)      # the cached Verilog the RTL tests of this design build
    out, dropped = dedup_modules(text)
    n = len(modules(text))
    assert len(modules(out)) == n - dropped and dropped >= n // 3
    shared = [m for m in modules(text) if re.fullmatch(r"\\fetta_fetta\.(BF16Mul|FP32Add|FP32ToBF16)\S*", m)]
    assert len(shared) >= 3 and len(set(shared)) == len(shared)
    assert modules(out)[0] == "fetta_fetta"
    # every instantiated module is defined
    defined = set(modules(out))
    used = set(re.findall(r"^\s+(\\fetta_fetta\.\S+)\s+\S+\s*\(", out, re.M))
    assert used <= defined
