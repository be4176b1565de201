"""Synthesis-only tops for Table III's "Others" and "Accumulator" rows.

The controller (decoder, FSM, address generators, memory bank crossbars, host port,
instruction memory) is written inside :class:`hdl.top.Fetta` and does not stand
alone. To measure it, :class:`Controller` elaborates the real ``Fetta`` with the
blocks that have their own Table III rows replaced by **stubs**: components with the
same ports and no logic (the tensor contraction unit = CE array + distribution and
reduction networks, the vector unit, and the accumulation unit: its adders, format
converters and memory). Every stub input becomes an output port of the top and every stub
output an input port, so synthesis keeps all the controller logic that feeds the
stubs and cannot constant-fold what they return: the netlist is the accelerator
minus those blocks. The unified memory stays real: its SRAM macros are counted in their
own row (``gen.toolflow.synth`` drops them by name), its half/bank multiplexers and
read-during-write forwarding stay in the controller. The accumulation memory (its
macros and the banks' forwarding registers) is :class:`AccumUnit`'s, so it is a stub
here: with the real one the forwarding was counted in both rows.

:class:`AccumUnit` gathers the accumulation unit's logic as ``Fetta`` instantiates it
(``num_ces`` :class:`hdl.accum.AccumAdd` and :class:`hdl.accum.Narrow` for the drain,
``banks`` :class:`hdl.accum.Narrow` and :class:`hdl.accum.Widen` for STORE / LOAD)
with its memory (:class:`hdl.memory.AccumMemory`, SRAM macros); each part's ports
are ports of the top, unconnected to each other (the muxes between them are the
controller's).

Ports
-----
Controller: every port of :class:`hdl.top.Fetta` (same name, direction, timing),
plus ``<part><i>__<port path>`` for each stub port, direction flipped.
AccumUnit: ``<part>__<port path>`` for each part's port (``amem``, ``accadd<i>``, ...),
same direction (the memory is the submodule ``amem``, so its macros are named as in ``fetta``); the
adders and converters are combinational, the memory reads one cycle after the
address.

These tops exist for ``fetta synth``; they are not simulated as accelerators.
"""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.design.config import FettaConfig

from hdl.accum import AccumAdd, Narrow, Widen
from hdl.memory import AccumMemory
from hdl.top import PARTS, Fetta
from hdl.vector import vec_rows

#: blocks of :class:`hdl.top.Fetta` stubbed out in :class:`Controller` (they have their own rows)
STUBBED = ("tcu", "vector", "accadd", "narrow", "widen", "amem")


def _stub_class(cls):
    """Subclass of ``cls`` with the same constructor and ports and an empty body."""

    def elaborate(self, platform):
        return Module()

    return type(f"Stub{cls.__name__}", (cls,), {"elaborate": elaborate, "__doc__": f"{cls.__name__} without logic."})


def _flat_ports(prefix: str, component, flip: bool) -> list[tuple[str, object, object]]:
    """(port name, member, value) of every leaf port of ``component``, optionally direction-flipped."""
    out = []
    for path, member, value in component.signature.flatten(component):
        name = (prefix + "__" if prefix else "") + "__".join(str(p) for p in path)
        shape = member.shape
        is_in = member.flow == wiring.In
        out.append((name, (Out(shape) if is_in else In(shape)) if flip else (In(shape) if is_in else Out(shape)),
                    value))
    return out


def _forward(m: Module, comp, ports) -> None:
    """Connect ``comp``'s own ports to the inner ``value``s: an input drives the value, an output
    is driven by it (for flipped stub ports: a stub's input is read out, its output is driven
    from outside)."""
    for name, member, value in ports:
        mine = getattr(comp, name)
        m.d.comb += value.eq(mine) if member.flow == wiring.In else mine.eq(value)


class Controller(wiring.Component):
    """The accelerator without the blocks of :data:`STUBBED` (module docstring), for synthesis.

    Ports: every port of :class:`hdl.top.Fetta` (same name, direction and timing), and
    ``<part><i>__<port path>`` for every port of every stub, direction flipped (a stub's
    input is read out, its output driven from outside); all forwarded combinationally.
    """

    def __init__(self, config: FettaConfig):
        E, B = config.num_ces, config.banks
        lanes = vec_rows(config) * config.lanes
        counts = {"tcu": 1, "vector": 1, "accadd": E, "narrow": E + B, "widen": B, "amem": 1}
        self._stubs: dict[str, list] = {}
        for kind in STUBBED:
            stub = _stub_class(PARTS[kind])
            kw = {"lanes": lanes, "valid": False} if kind == "vector" else {}
            self._stubs[kind] = [stub(config, **kw) for _ in range(counts[kind])]
        self._taken = {kind: 0 for kind in STUBBED}

        def factory(kind):
            def make(cfg, **kw):
                i = self._taken[kind]
                if i >= len(self._stubs[kind]):
                    raise ValueError(f"hdl.top.Fetta builds more than {len(self._stubs[kind])} {kind!r} blocks; "
                                     "update hdl.others.Controller")
                self._taken[kind] = i + 1
                return self._stubs[kind][i]
            return make

        self._core = Fetta(config, parts={kind: factory(kind) for kind in STUBBED})
        members = {}
        self._own = _flat_ports("", self._core, flip=False)
        for name, member, _ in self._own:
            members[name] = member
        self._stub_ports = []
        for kind, stubs in self._stubs.items():
            for i, stub in enumerate(stubs):
                self._stub_ports += _flat_ports(f"{kind}{i}", stub, flip=True)
        for name, member, _ in self._stub_ports:
            members[name] = member
        super().__init__(members)

    @property
    def all_stubs_used(self) -> bool:
        """After elaboration: ``Fetta`` instantiated every stub (the counts above match hdl/top.py)."""
        return all(self._taken[k] == len(v) for k, v in self._stubs.items())

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = self._core
        _forward(m, self, self._own + self._stub_ports)
        return m


class AccumUnit(wiring.Component):
    """The accumulation unit's memory, adders and converters (module docstring), for synthesis.

    Ports: ``<part>__<port path>`` for every port of every part (``amem``, ``accadd<i>``,
    ``narrow<i>``, ``widen<i>``), same direction, forwarded combinationally: the adders and
    converters are combinational, the memory reads one cycle after the address.
    """

    def __init__(self, config: FettaConfig):
        E, B = config.num_ces, config.banks
        self._parts = [("amem", AccumMemory(config))]
        self._parts += [(f"accadd{i}", AccumAdd(config)) for i in range(E)]
        self._parts += [(f"narrow{i}", Narrow(config)) for i in range(E + B)]
        self._parts += [(f"widen{i}", Widen(config)) for i in range(B)]
        self._ports = []
        for name, part in self._parts:
            self._ports += _flat_ports(name, part, flip=False)
        super().__init__({name: member for name, member, _ in self._ports})

    def elaborate(self, platform):
        m = Module()
        for name, part in self._parts:
            m.submodules[name] = part
        _forward(m, self, self._ports)
        return m


def controller(config: FettaConfig) -> Controller:
    """Factory for :data:`hdl.TOPS` (``controller``)."""
    return Controller(config)


def accum_unit(config: FettaConfig) -> AccumUnit:
    """Factory for :data:`hdl.TOPS` (``accum_unit``)."""
    return AccumUnit(config)
