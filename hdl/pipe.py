"""Pipeline helpers shared by the blocks whose latency follows the configuration or whose fields
outlive the instruction that set them."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, Value
from amaranth.lib import data

__all__ = ["decode", "delay", "hold", "stage"]


def delay(m: Module, value, cycles: int, name: str, *, own: bool = False):
    """``value`` delayed by ``cycles`` registers named ``{name}_d1`` .. (``value`` itself for 0); a
    :class:`~amaranth.lib.data.View` keeps its layout. ``own``: the last register is marked ``keep``,
    so that synthesis does not merge it with the equal register of another instance (one register
    fanned out to the wide multiplexers of every PE of a CE row, say)."""
    for d in range(cycles):
        shape = value.shape() if isinstance(value, data.View) else Value.cast(value).shape()
        reg = Signal(shape, name=f"{name}_d{d + 1}", attrs={"keep": 1} if own and d == cycles - 1 else {})
        m.d.sync += reg.eq(value)
        value = reg
    return value


def decode(m: Module, value, groups: dict, prefix: str) -> dict:
    """One-hot selects ``{prefix}{key}``, set while ``value`` is one of ``groups[key]`` (a tuple of
    case values; none set for a value in no group), by key."""
    sel = {key: Signal(name=f"{prefix}{key}") for key in groups}
    with m.Switch(value):
        for key, cases in groups.items():
            with m.Case(*cases):
                m.d.comb += sel[key].eq(1)
    return sel


def hold(m: Module, when, sources: dict, prefix: str) -> dict:
    """Registers named ``{prefix}{key}`` that take ``sources[key]`` in a cycle of ``when`` and keep it
    (a list of values gives a list of registers); the dict of them, by key."""
    out = {}
    for key, src in sources.items():
        if isinstance(src, (list, tuple)):
            out[key] = [Signal.like(v, name=f"{prefix}{key}{i}") for i, v in enumerate(src)]
            pairs = list(zip(out[key], src))
        else:
            out[key] = Signal.like(src, name=f"{prefix}{key}")
            pairs = [(out[key], src)]
        with m.If(when):
            m.d.sync += [reg.eq(v) for reg, v in pairs]
    return out


def stage(m: Module, cuts, name: str, **values):
    """The ``values`` after cut point ``name``: registered copies ``{name}_{key}`` when the cut is
    in ``cuts``, else the values themselves."""
    if name not in cuts:
        return values
    out = {}
    for key, value in values.items():
        reg = Signal(Value.cast(value).shape(), name=f"{name}_{key}")
        m.d.sync += reg.eq(value)
        out[key] = reg
    return out
