"""fetta hardware blocks (Amaranth 0.5 ``wiring.Component``s).

``TOPS`` maps every block that ``fetta verilog --top NAME`` can emit to a
factory ``"module:function"``; the function takes a :class:`gen.design.config.FettaConfig`
and returns the component. ``fetta`` (the default top) is the whole accelerator.
"""

from __future__ import annotations

import importlib

from gen.errors import ConfigError
from hdl.rtlil_meminit import fast_meminit
from hdl.share import SharedModules

#: name -> "module:factory(config)" ; the Verilog module is named ``fetta_<name>``
TOPS: dict[str, str] = {
    "pe": "hdl.pe:pe_from_config",
    "ce": "hdl.ce:ce_from_config",
    "dist_net": "hdl.dist_net:dist_net",
    "red_net": "hdl.red_net:red_net",
    "fetta": "hdl.top:build",
    "vector_unit": "hdl.vector:vector_unit",
    "dma": "hdl.dma:dma_from_config",
    "zs_sched": "hdl.zs_sched:zs_sched_from_config",
    "zs_unit": "hdl.zs_unit:zs_unit_from_config",
    "zs_rows": "hdl.zs_rows:zs_rows_from_config",
    # synthesis-only (Table III): the accelerator minus the blocks above, and the accumulation unit
    "controller": "hdl.others:controller",
    "accum_unit": "hdl.others:accum_unit",
}

#: the block ``fetta verilog`` emits without ``--top``
DEFAULT_TOP = "fetta"


def build_top(name: str, config):
    """Instantiate block ``name`` for ``config`` (raises ConfigError for unknown names)."""
    if name not in TOPS:
        known = ", ".join(sorted(TOPS)) or "none yet"
        raise ConfigError(f"unknown block {name!r} (known: {known})", field="--top")
    module, _, func = TOPS[name].partition(":")
    return getattr(importlib.import_module(module), func)(config)


def module_name(name: str) -> str:
    """Verilog module name of a top (no ``__``: Verilator has had bugs with it)."""
    return f"fetta_{name}"


def to_rtlil(name: str, config, *, src: bool = True) -> str:
    """Elaborate block ``name`` for ``config`` to RTLIL text (``src``: cells carry the Python line
    that built them, as the lint's dead-logic report wants). Each distinct PE and floating-point
    unit is one module, instanced where used (:mod:`hdl.share`); memory contents are written by
    :mod:`hdl.rtlil_meminit`. The default accelerator takes ~1 min (~4 min with plain Amaranth)."""
    with fast_meminit():
        return SharedModules(module_name(name), emit_src=src).convert(build_top(name, config))


def rtlil_to_verilog(text: str) -> str:
    """The Verilog of RTLIL ``text``: Amaranth's own conversion (Yosys ``proc -nomux``,
    ``write_verilog``), then :func:`complete_cases`."""
    from amaranth.back.verilog import _convert_rtlil_text

    return complete_cases(_convert_rtlil_text(text))


def to_verilog(name: str, config) -> str:
    """Elaborate block ``name`` for ``config`` to Verilog text."""
    return rtlil_to_verilog(to_rtlil(name, config, src=False))


def complete_cases(text: str) -> str:
    """Give every ``case`` / ``casez`` of emitted Verilog that lacks one an empty ``default``.

    Yosys' ``write_verilog`` lists, per driven signal, only the case items up to the last one
    that assigns it (an FSM's states, a ``Switch``'s cases); the signal's default is assigned
    before the ``case`` in the same ``always`` block. An empty ``default`` therefore changes no
    behaviour, and Verilator ``-Wall`` (CASEINCOMPLETE), synthesis and equivalence tools then
    see a complete case instead of a possible latch."""
    out: list[str] = []
    stack: list[bool] = []  # per open case: has a default item
    for line in text.splitlines(keepends=True):
        word = line.lstrip()
        if word.startswith(("case (", "casez (", "casex (")):
            stack.append(False)
        elif word.startswith("default:") and stack:
            stack[-1] = True
        elif word.startswith("endcase") and stack:
            if not stack.pop():
                indent = line[:len(line) - len(word)]
                out.append(f"{indent}  default:\n{indent}      /* empty */;\n")
        out.append(line)
    return "".join(out)
