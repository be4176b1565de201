"""AMBA AXI4 (ARM IHI 0022) manager interface, as an Amaranth signature.

The five channels with the signals an AXI4 manager needs for incrementing bursts: write address
(``aw*``), write data (``w*``), write response (``b*``), read address (``ar*``), read data
(``r*``). Directions are the manager's (``Out``: the manager drives it); ``.flip()`` is the
subordinate's view. Omitted optional signals take their AXI4 defaults at the subordinate
(``AxLOCK = 0``, ``AxCACHE = 0``, ``AxPROT = 0``, ``AxQOS = 0``, no user signals). In Verilog a
member ``m_axi`` of this signature becomes ports ``m_axi__awaddr`` etc.
"""

from __future__ import annotations

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["axi4_signature", "BURST_INCR", "RESP_OKAY", "MAX_BURST", "BOUNDARY"]

#: ``AxBURST`` of an incrementing burst
BURST_INCR = 0b01
#: ``xRESP`` of a successful transfer
RESP_OKAY = 0b00
#: beats of the longest AXI4 incrementing burst (``AxLEN`` is 8 bits)
MAX_BURST = 256
#: no burst may cross a 4 KiB address boundary
BOUNDARY = 4096


def axi4_signature(addr_bits: int, data_bits: int, id_bits: int = 1) -> wiring.Signature:
    """The manager side of an AXI4 interface with ``addr_bits`` byte addresses, ``data_bits``-wide
    data (a power of two, at least 8) and ``id_bits`` transaction IDs."""
    if data_bits < 8 or data_bits & (data_bits - 1):
        raise ValueError(f"AXI data width must be a power of two >= 8, got {data_bits}")
    return wiring.Signature({
        "awid": Out(id_bits), "awaddr": Out(addr_bits), "awlen": Out(8), "awsize": Out(3), "awburst": Out(2),
        "awvalid": Out(1), "awready": In(1),
        "wdata": Out(data_bits), "wstrb": Out(data_bits // 8), "wlast": Out(1), "wvalid": Out(1), "wready": In(1),
        "bid": In(id_bits), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        "arid": Out(id_bits), "araddr": Out(addr_bits), "arlen": Out(8), "arsize": Out(3), "arburst": Out(2),
        "arvalid": Out(1), "arready": In(1),
        "rid": In(id_bits), "rdata": In(data_bits), "rresp": In(2), "rlast": In(1), "rvalid": In(1),
        "rready": Out(1),
    })
