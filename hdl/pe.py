"""Processing element (PE) of the contraction engine (FETTA Fig. 11(b)).

One multiply-accumulate unit with a double-buffered IB register (stationary
operand: a shadow register loads the next tile while the active one computes)
and a double-buffered Psum (the output-stationary accumulator plus a drain
register that holds the finished result while the accumulator starts the
next tile).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.design.config import BF16_BITS, DATATYPES, DEFAULT, FP32_BITS, MAX_ADD_LATENCY, MAX_MUL_LATENCY

from hdl.fp import BF16Mul, FP32Add
from hdl.pipe import delay
from hdl.share import shared_instance

__all__ = ["PE", "DATATYPES", "operand_width", "acc_width"]


def _check_datatype(datatype, int_width, int_acc_width):
    if datatype not in DATATYPES:
        raise ValueError(f"datatype must be one of {', '.join(DATATYPES)}, not {datatype!r}")
    for name, value in (("int_width", int_width), ("int_acc_width", int_acc_width)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise TypeError(f"{name} must be a positive integer, not {value!r}")
    if datatype == "int16" and int_acc_width < 2 * int_width:
        raise ValueError(f"int_acc_width must be >= 2 * int_width = {2 * int_width}, not {int_acc_width!r}")


def _check_latencies(mul_latency, add_latency):
    for name, value, top in (("mul_latency", mul_latency, MAX_MUL_LATENCY),
                             ("add_latency", add_latency, MAX_ADD_LATENCY)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an integer, not {value!r}")
        if not 1 <= value <= top:
            raise ValueError(f"{name} must be between 1 and {top}, not {value!r}")


def operand_width(datatype: str, int_width: int = DEFAULT.int_width) -> int:
    """Bits of one IA/IB operand (as :attr:`gen.design.config.FettaConfig.elem_bits`)."""
    return BF16_BITS if datatype == "bf16" else int_width


def acc_width(datatype: str, int_acc_width: int = DEFAULT.int_acc_width) -> int:
    """Bits of one Psum (as :attr:`gen.design.config.FettaConfig.acc_bits`)."""
    return FP32_BITS if datatype == "bf16" else int_acc_width


class PE(wiring.Component):
    """Multiply-accumulate PE with double-buffered IB and Psum registers.

    Arithmetic: ``bf16``: bfloat16 x bfloat16 product (exact in FP32, see
    :class:`hdl.fp.BF16Mul`), then FP32 addition (RNE, DAZ/FTZ, canonical
    NaN), not fused, bit-exact with ``sim.bf16.bf16_mac``. ``int16``:
    ``int_width``-bit two's complement operands, exact product, sum wrapped
    modulo ``2**int_acc_width`` (``sim.bf16.int_mac``); the integer datapath has
    the same latencies (delay registers), so timing does not depend on the datatype.

    Pipeline (a vector is "at" the PE in the cycle its ``a``/``valid`` are presented,
    ``M = mul_latency``, ``S = add_latency``)::

        cycles x .. x+M-1   : multiply  a * Mux(os, b_in, IB)        -> prod    (BF16Mul, M-1 inner stages + prod)
        cycles x+M .. x+M+S-1 : add     Mux(os, acc|+0, psum_in) + prod -> acc (FP32Add, S-1 inner stages + acc)

    Latency: ``M + S`` cycles from ``a`` to ``psum_out``; ``psum_in`` is consumed ``M``
    cycles after the matching ``a``. ``b_out`` is ``b_in`` delayed by ``S`` cycles (the
    CE's row skew). ``acc`` is the adder's output register, written every cycle.

    Output-stationary accumulation: the adder is in an ``S``-cycle loop (``addend = acc``),
    so the feeder interleaves ``S`` tiles vector by vector (:func:`gen.design.isa.interleave`):
    vector ``k + 1`` of a tile arrives ``S`` cycles after vector ``k``, when ``acc`` holds that
    tile's partial sum. Each output is still summed in order ``k = 0, 1, ..`` from ``+0``.

    Parameters
    ----------
    datatype : ``"bf16"`` or ``"int16"``
    int_width, int_acc_width : int
        Operand and accumulator widths of the integer mode.
    mul_latency, add_latency : int
        ``M`` (1 .. 3) and ``S`` (1 .. 7), as :class:`gen.design.config.FettaConfig`.

    Members
    -------
    a : In(ew)
        IA operand (``ew`` = 16 for bf16, ``int_width`` otherwise).
    valid : In(1)
        ``a`` (and ``b_in`` in OS mode) carry a vector this cycle.
    first, last : In(1)
        OS mode, with ``valid``: first / last vector of a tile. ``first``
        starts the accumulation from ``+0``; ``last`` copies the finished sum
        into the drain register.
    swap : In(1)
        Stationary modes, with ``valid``: this vector is the first one that
        uses the IB in the shadow register; the shadow is copied into the
        active register in the same cycle (and used already).
    os : In(1)
        Output-stationary mode (IB streams through ``b_in``/``b_out``). Hold it from a vector's
        cycle until its result has left (``drain`` / ``psum_out``): the operand multiplexer reads it
        with the vector, the adder's side from the register ``os_add`` one cycle later.
    b_in : In(ew), b_out : Out(ew)
        Streaming IB from the PE above / to the PE below (``S`` registers).
    ib_load : In(1), ib_data : In(ew)
        Write ``ib_data`` into the IB shadow register (visible next cycle).
        A load in the same cycle as ``swap`` is allowed: the swap uses the
        old shadow value.
    psum_in : In(aw), psum_out : Out(aw), psum_valid : Out(1)
        Stationary modes: the partial sum flowing down the column
        (``aw`` = 32 for bf16, ``int_acc_width`` otherwise). ``psum_out`` is
        ``acc``; ``psum_valid`` marks it.
    drain : Out(aw), drain_valid : Out(1)
        OS mode: the Psum drain register; ``drain_valid`` is high for the one
        cycle after the ``last`` vector's sum was written (``M + S`` cycles after
        ``last`` was presented). ``drain`` keeps its value until the next ``last`` sum.

    ``b_out``, ``psum_valid`` and ``drain_valid`` exist only when the constructor's
    ``chain``, ``psum_valid`` and ``drain_valid`` are true (the default): a CE builds its
    bottom row without ``b_out`` and reads the valids of one PE per row, so no PE carries
    a register that nothing reads.
    """

    def __init__(self, *, datatype: str = DEFAULT.datatype, int_width: int = DEFAULT.int_width,
                 int_acc_width: int = DEFAULT.int_acc_width, mul_latency: int = DEFAULT.mul_latency,
                 add_latency: int = DEFAULT.add_latency, chain: bool = True, psum_valid: bool = True,
                 drain_valid: bool = True):
        _check_datatype(datatype, int_width, int_acc_width)
        _check_latencies(mul_latency, add_latency)
        self._outputs = {"b_out": chain, "psum_valid": psum_valid, "drain_valid": drain_valid}
        self._datatype = datatype
        self._int_width = int_width
        self._int_acc_width = int_acc_width
        self._mul_latency, self._add_latency = mul_latency, add_latency
        ew = operand_width(datatype, int_width)
        aw = acc_width(datatype, int_acc_width)
        members = {
            "a": In(ew), "valid": In(1), "first": In(1), "last": In(1), "swap": In(1), "os": In(1),
            "b_in": In(ew), "b_out": Out(ew),
            "ib_load": In(1), "ib_data": In(ew),
            "psum_in": In(aw), "psum_out": Out(aw), "psum_valid": Out(1),
            "drain": Out(aw), "drain_valid": Out(1),
        }
        super().__init__({k: v for k, v in members.items() if self._outputs.get(k, True)})

    @property
    def datatype(self) -> str:
        return self._datatype

    @property
    def latency(self) -> int:
        """Cycles from ``a`` to ``psum_out``."""
        return self._mul_latency + self._add_latency

    def elaborate(self, platform):
        shared = shared_instance(platform, self, PE, datatype=self._datatype, int_width=self._int_width,
                                 int_acc_width=self._int_acc_width, mul_latency=self._mul_latency,
                                 add_latency=self._add_latency, chain=self._outputs["b_out"],
                                 psum_valid=self._outputs["psum_valid"], drain_valid=self._outputs["drain_valid"])
        if shared is not None:
            return shared
        m = Module()
        M, S = self._mul_latency, self._add_latency
        ew = operand_width(self._datatype, self._int_width)
        aw = acc_width(self._datatype, self._int_acc_width)

        ib_active = Signal(ew, name="ib_active")
        ib_shadow = Signal(ew, name="ib_shadow")
        operand_b = Signal(ew, name="operand_b")
        m.d.comb += operand_b.eq(Mux(self.os, self.b_in, Mux(self.swap, ib_shadow, ib_active)))
        with m.If(self.ib_load):
            m.d.sync += ib_shadow.eq(self.ib_data)
        with m.If(self.valid & self.swap & ~self.os):
            m.d.sync += ib_active.eq(ib_shadow)
        if self._outputs["b_out"]:
            m.d.comb += self.b_out.eq(delay(m, self.b_in, S, "b_out"))

        # multiply: M - 1 stages inside the multiplier, then the product register
        prod = Signal(aw, name="prod")
        if self._datatype == "bf16":
            m.submodules.mul = mul = BF16Mul(stages=M - 1) if M > 1 else BF16Mul()
            m.d.comb += [mul.a.eq(self.a), mul.b.eq(operand_b)]
            product = mul.o
        else:
            # exact: 2*ew <= aw bits; the delay registers give the multiplier's latency
            product = delay(m, self.a.as_signed() * operand_b.as_signed(), M - 1, "mul")
        m.d.sync += prod.eq(product)
        # The PEs of a CE row see the same flags, so synthesis would merge their equal delay
        # registers into one per row; the registers that select or enable 32-bit words (the
        # addend, the drain) are each PE's own (``own``), the rest may be shared.
        m_valid = delay(m, self.valid, M, "m_valid")
        m_first = delay(m, self.first, M, "m_first", own=True)
        m_last = delay(m, self.last, M, "m_last")

        # add: S - 1 stages inside the adder, then the accumulator register (written every cycle:
        # in OS the loop carries the partial sums of the S interleaved tiles)
        acc = Signal(aw, name="acc")
        addend = Signal(aw, name="addend")
        total = Signal(aw, name="sum")
        # the adder's side reads ``os`` a register late: the mode is held from a vector's cycle
        # until its result leaves, and the adder sees the vector M >= 1 cycles after it (so the
        # mode decode of the CE is not in front of the adder's first stage)
        os_add = delay(m, self.os, 1, "os_add", own=True)
        m.d.comb += addend.eq(Mux(os_add, Mux(m_first, 0, acc), self.psum_in))
        if self._datatype == "bf16":
            m.submodules.add = add = FP32Add(stages=S - 1) if S > 1 else FP32Add()
            m.d.comb += [add.a.eq(addend), add.b.eq(prod), total.eq(add.o)]
        else:
            # two's complement wrap modulo 2**aw: the sum is simply truncated
            m.d.comb += total.eq(delay(m, (addend + prod)[:aw], S - 1, "add"))
        a_valid = delay(m, m_valid, S - 1, "a_valid")
        a_last = delay(m, m_last, S - 1, "a_last")
        m.d.sync += acc.eq(total)
        m.d.comb += self.psum_out.eq(acc)
        with m.If(a_valid & os_add & a_last):
            m.d.sync += self.drain.eq(total)
        if self._outputs["psum_valid"]:
            m.d.sync += self.psum_valid.eq(a_valid & ~os_add)
        if self._outputs["drain_valid"]:
            m.d.sync += self.drain_valid.eq(a_valid & os_add & a_last)
        return m


def pe_from_config(config) -> PE:
    """``hdl.TOPS`` factory: a PE of ``config.datatype`` and latencies."""
    return PE(datatype=config.datatype, int_width=config.int_width, int_acc_width=config.int_acc_width,
              mul_latency=config.mul_latency, add_latency=config.add_latency)
