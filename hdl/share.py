"""Emit each distinct block once: shared modules for RTLIL conversion.

Amaranth builds the netlist of every *instance* of a block anew: the default accelerator has 256
PEs, each with a bfloat16 multiplier and an FP32 adder, 128 adders in the reduction network, 64 in
the accumulation unit and so on, whose netlists are identical per parameter set, and building them
was most of its ~225 s elaboration (~50 s with this module). :func:`hdl.to_rtlil` therefore
elaborates under a :class:`SharedModules` "platform": a block (today the PE and the floating-point
units of ``hdl/fp.py``) that calls :func:`shared_instance` first in its
``elaborate`` is then converted **once** per parameter set, as a module of its own, and every
instance becomes an :class:`amaranth.hdl.Instance` of that module, ports connected by name (the
names Amaranth gives a component's ports: the signature's paths joined by ``__``, plus ``clk`` /
``rst`` when the block has registers). The netlist is unchanged: the same cells, instanced instead
of copied (Yosys ``flatten`` or ``sim/vdedup.py`` used to merge the copies afterwards).

Under any other platform (``None`` in Amaranth's simulator, in ``verilog.convert`` of a block, in
tests) :func:`shared_instance` returns ``None`` and the block elaborates its own body, so the
simulator and the stand-alone conversion see plain Amaranth.

A shared block's netlist must depend only on the keyword arguments given to
:func:`shared_instance`, which rebuilds the block from them (``cls(**params)``).
"""

from __future__ import annotations

import inspect
import re

from amaranth import ClockSignal, ResetSignal
from amaranth.back import rtlil
from amaranth.hdl import Instance
from amaranth.lib import wiring

_TOP_ATTR = "attribute \\top 1\n"
_PORT = re.compile(r"^\s*wire (?:width \d+ )?(?:input|output|inout) \d+\s+\\(\S+)$", re.M)


def _suffix(cls, params: dict) -> str:
    """Module name suffix of ``cls(**params)``: the parameters that differ from ``cls``'s defaults
    (``_<name><value>``, ``_<name>`` for True, ``_no_<name>`` for False)."""
    defaults = {k: p.default for k, p in inspect.signature(cls).parameters.items()}
    parts = []
    for k, v in sorted(params.items()):
        if k in defaults and defaults[k] == v:
            continue
        parts.append(f"_{k}" if v is True else f"_no_{k}" if v is False else f"_{k}{v}")
    return "".join(parts)


class SharedModules:
    """Elaboration platform that collects one RTLIL module per distinct shared block.

    ``prefix``: the top's module name (shared modules are ``<prefix>.<Class>`` with the parameters
    that differ from the class's defaults, e.g. ``fetta_fetta.PE_no_chain``, ``...FP32Add_stages2``);
    ``emit_src``: whether the shared modules carry source locations, as the top does.
    :meth:`shared_rtlil` is the text of every shared module, to be read with the top's.
    """

    def __init__(self, prefix: str, *, emit_src: bool = True):
        self.prefix = prefix
        self.emit_src = emit_src
        self._modules: dict[tuple, tuple[str, frozenset[str]]] = {}
        self._texts: list[str] = []
        self._plain: set[int] = set()

    def module(self, cls, params: dict) -> tuple[str, frozenset[str]]:
        """(module name, port names) of ``cls(**params)``, converting it the first time."""
        key = (cls.__module__, cls.__qualname__, tuple(sorted(params.items())))
        if key not in self._modules:
            suffix = _suffix(cls, params)
            name = f"{self.prefix}.{cls.__name__}{suffix}"
            if any(name == n for n, _ in self._modules.values()):
                raise ValueError(f"two shared blocks would both be named {name!r}")
            block = cls(**params)
            self._plain.add(id(block))     # its own body, not an instance of itself
            try:                            # (shared blocks inside it are instances)
                text = rtlil.convert(block, name=name, emit_src=self.emit_src, platform=self)
            finally:
                self._plain.discard(id(block))
            if text.count(_TOP_ATTR) != 1:
                raise AssertionError(f"{name}: expected one top module in its RTLIL")
            ports = frozenset(m.group(1) for m in _PORT.finditer(text.split("\nend\n", 1)[0]))
            self._texts.append(text.replace(_TOP_ATTR, ""))
            self._modules[key] = (name, ports)
        return self._modules[key]

    def shared_rtlil(self) -> str:
        """RTLIL text of the shared modules converted so far (none of them marked top)."""
        return "".join(self._texts)

    def convert(self, block) -> str:
        """RTLIL of ``block`` as the top module ``prefix`` (its own body, even when it is itself a
        shareable block), preceded by every shared module it instantiates."""
        self._plain.add(id(block))
        try:
            top = rtlil.convert(block, name=self.prefix, emit_src=self.emit_src, platform=self)
        finally:
            self._plain.discard(id(block))
        return self.shared_rtlil() + top


def shared_instance(platform, block: wiring.Component, cls, **params):
    """An :class:`~amaranth.hdl.Instance` standing for ``block`` (built as ``cls(**params)``) when
    ``platform`` is a :class:`SharedModules`, else ``None`` (elaborate the block's own body)."""
    if not isinstance(platform, SharedModules) or id(block) in platform._plain:
        return None
    name, ports = platform.module(cls, params)
    conns = {}
    for path, member, value in block.signature.flatten(block):
        port = "__".join(map(str, path))
        if port not in ports:
            raise AssertionError(f"{name} has no port {port!r} (ports: {sorted(ports)})")
        conns[("i_" if member.flow == wiring.In else "o_") + port] = value
    if "clk" in ports:
        conns["i_clk"] = ClockSignal()
    if "rst" in ports:
        conns["i_rst"] = ResetSignal()
    missing = ports - {k[2:] for k in conns}
    if missing:
        raise AssertionError(f"{name}: ports {sorted(missing)} left unconnected")
    return Instance(name, **conns)
