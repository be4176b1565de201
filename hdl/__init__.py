"""fetta hardware blocks (Amaranth 0.5 ``wiring.Component``s).

``TOPS`` maps every block that ``fetta verilog --top NAME`` can emit to a
factory ``"module:function"``; the function takes a :class:`gen.design.config.FettaConfig`
and returns the component. ``fetta`` (the default top) is the whole accelerator.
"""

from __future__ import annotations

import importlib
from gen.errors import ConfigError

#: name -> "module:factory(config)" ; the Verilog module is named ``fetta_<name>``
TOPS: dict[str, str] = {
    "pe": "hdl.pe:pe_from_config",
    "ce": "hdl.ce:ce_from_config",
    "dist_net": "hdl.dist_net:dist_net",
    "red_net": "hdl.red_net:red_net",
    "fetta": "hdl.top:build",
    "vector_unit": "hdl.vector:vector_unit",
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


def to_verilog(name: str, config) -> str:
    """Elaborate block ``name`` for ``config`` to Verilog text."""
    from amaranth.back import verilog

    component = build_top(name, config)
    return verilog.convert(component, name=module_name(name), emit_src=False)
