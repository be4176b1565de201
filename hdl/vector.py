"""The vector unit (FETTA V-A, VI-B): elementwise work on rows of the two memories.

Each lane combines one bfloat16 element ``x`` of a unified-memory row with one
FP32 element ``y`` of an accumulation-unit row and a bfloat16 scalar ``a`` taken
from the instruction (:data:`gen.design.isa.Opcode.VEC`). The operations, per lane, with
the reference of :mod:`sim.vector_ref` that the unit matches bit for bit (:func:`vec_ref`;
error bounds against float64, measured by ``tests/test_vector.py`` over every bfloat16 input):

=====  ======  ==========================================  =====================================
code   name    result                                      reference (bf16 datatype)
=====  ======  ==========================================  =====================================
0      ADD     ``y + x``                                   ``f32_add(y, bf16_mul(x, 1.0))``
1      AXPY    ``y + a * x`` (SGD: ``a = -lr``)            ``f32_add(y, bf16_mul(x, a))``
2      SCALE   ``a * x``                                   ``bf16_mul(x, a)``
3      RELU    ``max(y, +0)``                              ``ftz32(y)``; NaN stays (canonical),
                                                           negative or zero -> ``+0``
4      MUL     ``y * x``, rounded once (RNE)               ``ftz32(ftz32(y) * widened x)`` (numpy
                                                           float32: correctly rounded, 0.5 ulp)
5      MAX     ``max(y, x)``                               :func:`~sim.vector_ref.max_bits`: DAZ,
                                                           ``-0 < +0``, NaN -> canonical NaN
6      EXP     ``exp(a * x)``                              :func:`~sim.vector_ref.exp_bits` of
                                                           ``bf16_mul(x, a)``: FP32 within 3.93e-6
                                                           (2**-17.96) relative; ``a = 1``: bf16
                                                           correctly rounded for every ``x``
7      RECIP   ``1 / x``                                   :func:`~sim.vector_ref.recip_bits`:
                                                           FP32 and bf16 correctly rounded
8      RSQRT   ``1 / sqrt(x)``                             :func:`~sim.vector_ref.rsqrt_bits`:
                                                           FP32 and bf16 correctly rounded
=====  ======  ==========================================  =====================================

``x * 1.0`` is exactly the widened ``x`` (DAZ, canonical NaN), so ADD and AXPY
share one multiplier and one adder. The narrow output is the result rounded to
bfloat16 (RNE, :func:`sim.bf16.f32_to_bf16`), the write-back format of the unified
memory. Codes 4 .. 8 (issue 19) are :class:`hdl.vfunc.VectorFunc` (its docstring: the
algorithms, specials and logic depth): EXP takes the product ``x * a`` of the lane's multiplier
(exact in FP32), reads a 128-entry ``2**f`` ROM with linear interpolation; RECIP / RSQRT read
128 / 256-entry ROMs of correctly rounded FP32 fractions; all ROMs are
:mod:`gen.design.vtables`. Flush and NaN rules are the unit's: subnormal inputs are zeros,
results below ``2**-126`` flush to (signed) zero, every NaN is the canonical one. Reductions along
rows (the same lane of many rows): ``y_stride = 0`` with more than one row is refused
(``BANK_CONFLICT``, a read-after-write hazard), so a MAX (or ADD) reduction is a tree of VEC
instructions that halves the rows each time, the partial results going back to the unified
memory with ``WB`` (exact for MAX of bfloat16 data, one bfloat16 rounding per level for ADD).

In the ``int16`` datatype the lanes are exact integers: ``x`` is a signed
``int_width``-bit element, ``y`` a signed ``int_acc_width``-bit accumulator, ``a``
the 16-bit scalar field read as a signed integer; ADD, AXPY, SCALE and MUL wrap to
``int_acc_width`` bits, RELU is ``max(y, 0)``, MAX ``max(y, x)``, EXP / RECIP / RSQRT give 0,
and the narrow output keeps the low ``int_width`` bits (as :class:`hdl.accum.Narrow`).

Ports
-----
op : In(VecOp)       operation code (table above), sampled with the operands
scalar : In(SCALAR_BITS)  the scalar ``a`` (bfloat16 bits, or a signed 16-bit integer)
valid : In(1)        the operands are valid this cycle
x : In(lanes * elem_bits)   bfloat16 / integer elements, lane ``i`` at bits ``[i*eb, (i+1)*eb)``
y : In(lanes * acc_bits)    FP32 / integer accumulators
o : Out(lanes * acc_bits)   result (FP32 / integer)
o_narrow : Out(lanes * elem_bits)  result rounded to bfloat16 (or its low ``int_width`` bits)
o_valid : Out(1)

Timing (``M = mul_latency``, ``S = add_latency`` of the configuration): the multiplier
(:class:`hdl.fp.BF16Mul`, ``M - 1`` inner stages) ends in the stage register ``p1``
(product, ``y``, operation code) ``M`` cycles after the operands; the adder
(:class:`hdl.fp.FP32Add`) has ``S - 1`` inner stages, and the SCALE / RELU results and the
operation code wait in delay registers beside it. :class:`~hdl.vfunc.VectorFunc` (codes 4 .. 8)
has the same two stages (``M`` cycles to ``p1``, where its RECIP / RSQRT ROMs deliver their data,
then ``S - 1``), so every operation has the same latency. With ``M = 1``, ``o``, ``o_narrow`` and
``o_valid`` are combinational from the last stage (the adder's output, the result mux, the
bfloat16 rounder), valid **M + S - 1 cycles** after the operands (1 with the default
latencies); with ``M >= 2`` the result mux ends in the result register ``o_res<lane>_d1`` and the
rounder of ``o_narrow`` follows it, valid **M + S cycles** after the operands
(:func:`gen.design.isa.vector_latency`, :attr:`VectorUnit.latency`). The result mux's one-hot
selects are decoded from the operation code at ``p1`` and delayed beside the adder
(``o_sel_<result>_d<n>``). A new set of operands is
accepted every cycle. The top (:class:`hdl.top.Fetta`) writes ``o`` into the memories at the end
of the cycle it is valid (:func:`gen.design.isa.vec_tail`).
"""

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from gen.design.config import FettaConfig
from gen.design.isa import BF16_ONE, SCALAR_BITS, VecOp, vector_latency, vector_rows
from gen.errors import ConfigError

from hdl.fp import F32_QNAN, BF16Mul, FP32Add, FP32ToBF16
from hdl.pipe import decode, delay
from hdl.vfunc import FUNC_OPS, VectorFunc

__all__ = ["VectorUnit", "vector_unit", "vec_rows"]



def vec_rows(config: FettaConfig) -> int:
    """Rows a ``VEC`` instruction processes per cycle: ``min(vector_lanes / lanes, banks)``.

    Raises :class:`ConfigError` (field ``vector_lanes``) unless ``vector_lanes`` is a
    multiple of ``lanes`` whose quotient is a power of two (rows of one chunk must map
    to distinct banks with one stride)."""
    rows = vector_rows(config)
    if rows == 0:
        raise ConfigError(f"must be lanes ({config.lanes}) times a power of two, got {config.vector_lanes}",
                          field="vector_lanes")
    return rows


class VectorUnit(wiring.Component):
    """``lanes`` vector lanes (module docstring: operations, ports and timing).

    Parameters
    ----------
    config : FettaConfig
        ``datatype``, ``elem_bits``, ``acc_bits``.
    lanes : int, optional
        Lanes (default ``config.vector_lanes``); the top uses ``vec_rows * lanes``.

    valid : bool, optional
        Build ``valid`` / ``o_valid`` (default). The top leaves them out: its VEC sequencer
        carries the chunk's valid through the same stages.

    Ports: ``op``, ``scalar``, ``valid``, ``x``, ``y`` in; ``o``, ``o_narrow``, ``o_valid`` out,
    valid :attr:`latency` cycles after the operands, one set of operands per cycle.
    """

    def __init__(self, config: FettaConfig, *, lanes: int | None = None, valid: bool = True):
        if not isinstance(config, FettaConfig):
            raise TypeError(f"config must be a FettaConfig, got {type(config).__name__}")
        lanes = config.vector_lanes if lanes is None else lanes
        if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 1:
            raise ConfigError(f"must be a positive integer, got {lanes!r}", field="vector_lanes")
        self._cfg = config
        self._valid = valid
        self.lanes = lanes
        members = {
            "op": In(VecOp), "scalar": In(SCALAR_BITS), "valid": In(1),
            "x": In(lanes * config.elem_bits), "y": In(lanes * config.acc_bits),
            "o": Out(lanes * config.acc_bits), "o_narrow": Out(lanes * config.elem_bits), "o_valid": Out(1),
        }
        super().__init__({k: v for k, v in members.items() if valid or k not in ("valid", "o_valid")})

    @property
    def latency(self) -> int:
        """Cycles from the operands to ``o`` (:func:`gen.design.isa.vector_latency`:
        ``mul_latency + add_latency - 1``, one more with the result register at ``mul_latency >= 2``)."""
        return vector_latency(self._cfg.mul_latency, self._cfg.add_latency)

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        M, S = cfg.mul_latency, cfg.add_latency
        out_regs = self.latency - (M + S - 1)
        EB, AB = cfg.elem_bits, cfg.acc_bits
        is_float = cfg.datatype == "bf16"
        p1_op = delay(m, self.op, M, "p1_op")
        o_sel = {key: delay(m, sel, S - 1, f"o_sel_{key}") for key, sel in decode(m, p1_op, _RESULTS, "dec_").items()}
        if self._valid:
            m.d.comb += self.o_valid.eq(delay(m, self.valid, self.latency, "o_valid"))
        # ADD multiplies by one so that ADD and AXPY share the datapath
        mul_b = Signal(SCALAR_BITS, name="mul_b")
        m.d.comb += mul_b.eq(Mux(self.op == VecOp.ADD, BF16_ONE if is_float else 1, self.scalar))
        if is_float:
            m.submodules.func = func = VectorFunc(lanes=self.lanes, mul_latency=M, add_latency=S)
            m.d.comb += [func.op.eq(self.op), func.x.eq(self.x), func.y.eq(self.y)]
        for i in range(self.lanes):
            x = self.x[i * EB:(i + 1) * EB]
            y = self.y[i * AB:(i + 1) * AB]
            o = self.o[i * AB:(i + 1) * AB]
            on = self.o_narrow[i * EB:(i + 1) * EB]
            p1_prod = Signal(AB, name=f"p1_prod{i}")
            p1_y = delay(m, y, M, f"p1_y{i}")
            res = Signal(AB, name=f"res{i}")
            out = Signal(AB, name=f"out{i}")     # the result after the result register (if any)
            if is_float:
                m.submodules[f"mul{i}"] = mul = BF16Mul(stages=M - 1) if M > 1 else BF16Mul()
                m.d.comb += [mul.a.eq(x), mul.b.eq(mul_b)]
                m.d.sync += p1_prod.eq(mul.o)
                m.submodules[f"add{i}"] = add = FP32Add(stages=S - 1) if S > 1 else FP32Add()
                m.d.comb += [add.a.eq(p1_y), add.b.eq(p1_prod)]
                ye, yf = p1_y[23:31], p1_y[0:23]
                y_nan = (ye == 0xFF) & (yf != 0)
                # DAZ: a zero exponent is a zero, so only normal positive values (and +inf) pass
                y_pos = ~p1_y[31] & (ye != 0)
                relu = delay(m, Mux(y_nan, F32_QNAN, Mux(y_pos, p1_y, 0)), S - 1, f"relu{i}")
                m.submodules[f"cvt{i}"] = cvt = FP32ToBF16()
                m.d.comb += [cvt.a.eq(out), on.eq(cvt.o), func.p[i * AB:(i + 1) * AB].eq(p1_prod)]
                sum_ = add.o
                fn = func.o[i * AB:(i + 1) * AB]
            else:
                # the assignment sign-extends (or wraps) the signed product to acc_bits
                prod = Signal(signed(EB + SCALAR_BITS), name=f"prod{i}")
                m.d.comb += prod.eq(x.as_signed() * mul_b.as_signed())
                m.d.sync += p1_prod.eq(delay(m, prod, M - 1, f"prod{i}"))
                sum_ = delay(m, (p1_y + p1_prod)[:AB], S - 1, f"sum{i}")
                relu = delay(m, Mux(p1_y[AB - 1], 0, p1_y), S - 1, f"relu{i}")
                m.d.comb += on.eq(out[:EB])
                # MUL and MAX (wrapping, signed); EXP / RECIP / RSQRT give 0 in the integer datatype
                ifn = Signal(AB, name=f"ifn{i}")
                with m.Switch(self.op):
                    with m.Case(VecOp.MUL):
                        m.d.comb += ifn.eq(y.as_signed() * x.as_signed())
                    with m.Case(VecOp.MAX):
                        m.d.comb += ifn.eq(Mux(x.as_signed() > y.as_signed(), x.as_signed(), y))
                fn = delay(m, ifn, M + S - 1, f"ifn{i}")
            scale = delay(m, p1_prod, S - 1, f"scale{i}")
            # the result multiplexer: one-hot selects decoded from the operation code at ``p1``
            # and delayed beside the adder, so registers, not a decoder, drive the data bits
            m.d.comb += res.eq(Mux(o_sel["sum"], sum_, 0) | Mux(o_sel["scale"], scale, 0)
                               | Mux(o_sel["relu"], relu, 0) | Mux(o_sel["fn"], fn, 0))
            # the result register at mul_latency >= 2 (``o_res<lane>_d1``): the multiplexer ends in it,
            # the bfloat16 rounder of ``o_narrow`` follows it
            m.d.comb += [out.eq(delay(m, res, out_regs, f"o_res{i}")), o.eq(out)]
        return m


#: the vector unit's result multiplexer: which operation codes take which result (none: zero)
_RESULTS = {"sum": (VecOp.ADD, VecOp.AXPY), "scale": (VecOp.SCALE,), "relu": (VecOp.RELU,), "fn": FUNC_OPS}


def vector_unit(config: FettaConfig) -> VectorUnit:
    """Factory for :data:`hdl.TOPS` (``vector_unit``): ``config.vector_lanes`` lanes."""
    return VectorUnit(config)
