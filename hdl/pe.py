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

from gen.design.config import BF16_BITS, DATATYPES, DEFAULT, FP32_BITS

from hdl.fp import BF16Mul, FP32Add

__all__ = ["PE", "DATATYPES", "operand_width", "acc_width"]


def _check_datatype(datatype, int_width, int_acc_width):
    if datatype not in DATATYPES:
        raise ValueError(f"datatype must be one of {', '.join(DATATYPES)}, not {datatype!r}")
    for name, value in (("int_width", int_width), ("int_acc_width", int_acc_width)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise TypeError(f"{name} must be a positive integer, not {value!r}")
    if datatype == "int16" and int_acc_width < 2 * int_width:
        raise ValueError(f"int_acc_width must be >= 2 * int_width = {2 * int_width}, not {int_acc_width!r}")


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
    modulo ``2**int_acc_width`` (``sim.bf16.int_mac``).

    Pipeline (a vector is "at" the PE in the cycle its ``a``/``valid`` are presented)::

        cycle x   : stage 1, multiply  a * Mux(os, b_in, IB)   -> prod (registered)
        cycle x+1 : stage 2, add       Mux(os, acc|+0, psum_in) + prod -> psum_out / acc / drain

    Latency: 2 cycles from ``a`` to ``psum_out`` (1 multiply + 1 add); ``psum_in``
    is consumed one cycle after the matching ``a`` and reaches ``psum_out``
    one cycle later. ``b_out`` is ``b_in`` delayed by one cycle. In output-
    stationary mode consecutive vectors accumulate back to back (the adder
    is in a one-cycle feedback loop, which is why :class:`hdl.fp.FP32Add` is
    not pipelined further).

    Parameters
    ----------
    datatype : ``"bf16"`` or ``"int16"``
    int_width, int_acc_width : int
        Operand and accumulator widths of the integer mode.

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
        Output-stationary mode (IB streams through ``b_in``/``b_out``).
    b_in : In(ew), b_out : Out(ew)
        Streaming IB from the PE above / to the PE below (registered).
    ib_load : In(1), ib_data : In(ew)
        Write ``ib_data`` into the IB shadow register (visible next cycle).
        A load in the same cycle as ``swap`` is allowed: the swap uses the
        old shadow value.
    psum_in : In(aw), psum_out : Out(aw), psum_valid : Out(1)
        Stationary modes: the partial sum flowing down the column
        (``aw`` = 32 for bf16, ``int_acc_width`` otherwise). ``psum_out`` is
        registered; ``psum_valid`` marks it.
    drain : Out(aw), drain_valid : Out(1)
        OS mode: the Psum drain register; ``drain_valid`` is high for the one
        cycle after the ``last`` vector's sum was written (2 cycles after
        ``last`` was presented). ``drain`` keeps its value until the next
        tile's ``last``.

    ``b_out``, ``psum_valid`` and ``drain_valid`` exist only when the constructor's
    ``chain``, ``psum_valid`` and ``drain_valid`` are true (the default): a CE builds its
    bottom row without ``b_out`` and reads the valids of one PE per row, so no PE carries
    a register that nothing reads.
    """

    def __init__(self, *, datatype: str = DEFAULT.datatype, int_width: int = DEFAULT.int_width,
                 int_acc_width: int = DEFAULT.int_acc_width, chain: bool = True, psum_valid: bool = True,
                 drain_valid: bool = True):
        _check_datatype(datatype, int_width, int_acc_width)
        self._outputs = {"b_out": chain, "psum_valid": psum_valid, "drain_valid": drain_valid}
        self._datatype = datatype
        self._int_width = int_width
        self._int_acc_width = int_acc_width
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
        return 2

    def elaborate(self, platform):
        m = Module()
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
            m.d.sync += self.b_out.eq(self.b_in)

        # stage 1: multiply
        s1_prod = Signal(aw, name="s1_prod")
        s1_valid = Signal(name="s1_valid")
        s1_first = Signal(name="s1_first")
        s1_last = Signal(name="s1_last")
        if self._datatype == "bf16":
            m.submodules.mul = mul = BF16Mul()
            m.d.comb += [mul.a.eq(self.a), mul.b.eq(operand_b)]
            product = mul.o
        else:
            product = self.a.as_signed() * operand_b.as_signed()  # exact: 2*ew <= aw bits
        m.d.sync += [s1_prod.eq(product), s1_valid.eq(self.valid), s1_first.eq(self.first),
                     s1_last.eq(self.last)]

        # stage 2: accumulate
        acc = Signal(aw, name="acc")
        addend = Signal(aw, name="s2_addend")
        s2_sum = Signal(aw, name="s2_sum")
        m.d.comb += addend.eq(Mux(self.os, Mux(s1_first, 0, acc), self.psum_in))
        if self._datatype == "bf16":
            m.submodules.add = add = FP32Add()
            m.d.comb += [add.a.eq(addend), add.b.eq(s1_prod), s2_sum.eq(add.o)]
        else:
            # two's complement wrap modulo 2**aw: the sum is simply truncated
            m.d.comb += s2_sum.eq((addend + s1_prod)[:aw])
        with m.If(s1_valid):
            with m.If(self.os):
                m.d.sync += acc.eq(s2_sum)
                with m.If(s1_last):
                    m.d.sync += self.drain.eq(s2_sum)
            with m.Else():
                m.d.sync += self.psum_out.eq(s2_sum)
        if self._outputs["psum_valid"]:
            m.d.sync += self.psum_valid.eq(s1_valid & ~self.os)
        if self._outputs["drain_valid"]:
            m.d.sync += self.drain_valid.eq(s1_valid & self.os & s1_last)
        return m


def pe_from_config(config) -> PE:
    """``hdl.TOPS`` factory: a PE of ``config.datatype``."""
    return PE(datatype=config.datatype, int_width=config.int_width, int_acc_width=config.int_acc_width)
