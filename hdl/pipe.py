"""Pipeline helper shared by the blocks whose latency follows the configuration."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, Value
from amaranth.lib import data

__all__ = ["delay"]


def delay(m: Module, value, cycles: int, name: str):
    """``value`` delayed by ``cycles`` registers named ``{name}_d1`` .. (``value`` itself for 0); a
    :class:`~amaranth.lib.data.View` keeps its layout."""
    for d in range(cycles):
        shape = value.shape() if isinstance(value, data.View) else Value.cast(value).shape()
        reg = Signal(shape, name=f"{name}_d{d + 1}")
        m.d.sync += reg.eq(value)
        value = reg
    return value
