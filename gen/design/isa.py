"""The fetta instruction set: fields, encoding, decoding, static checks and timing.

One instruction is one ``INSTR_BITS``-bit word (little-endian bit fields, see
``docs/isa.md``). The controller (``hdl/controller.py``) and the emulator
(``sim/emulator.py``) both execute it; everything they must agree on lives here:
the field layout, the error codes, the static checks an instruction must pass
before it touches any state, and the cycle count of each instruction.

Opcodes
-------
``NOP``, ``SYNC`` (wait for the datapath to drain), ``HALT``, ``GEMM`` (one tiled
contraction), ``LOAD`` (unified memory -> accumulation unit, widened) and
``STORE`` (accumulation unit -> unified memory, rounded to bfloat16 RNE) and
``VEC`` (elementwise ADD / AXPY / SCALE / RELU / MUL / MAX / EXP / RECIP / RSQRT on the vector
unit, :mod:`hdl.vector`) and ``DMA`` (DRAM <-> the unified-memory half the run does not use, through
the DMA engine :mod:`hdl.dma`, concurrently with the instructions that follow; see :func:`dma_load`).

GEMM (output-stationary dataflow ``OS``): the active CEs form a grid
``gm x gn x gk`` (``c = (im * gn + in_) * gk + ik``); for every tile ``(l1, l0)``
(``l1`` outermost) every CE streams ``K`` IA rows (4 elements of A: 4 values of
``m`` for one ``k``) and ``K`` IB rows (4 values of ``n`` for one ``k``) and
accumulates a ``ce_rows x ce_cols`` output tile in FP32 (sequential over ``k``,
from ``+0``). The ``gk`` CEs of one group are then reduced pairwise (adjacent
pairs first, a balanced tree) and each of the ``ce_rows`` result rows is written
to (or, with ``ACC``, added to) an accumulation-unit row; with ``WB`` the updated
row is also rounded to bfloat16 and written to the unified memory at
``w_base + (o_addr - o_base)``.

Addresses are row addresses (one row = ``lanes`` elements). In both memories
row ``a`` lives in bank ``a % banks`` at index ``a // banks``; unified-memory
addresses of instructions are within the active ping-pong half.
"""

from __future__ import annotations

import enum
import functools
import math
import operator
from dataclasses import dataclass, field, fields, replace
from fractions import Fraction
from typing import Iterable, Sequence

from amaranth.lib import enum as hw_enum

from gen.design.config import FettaConfig
from gen.design.netsem import dist_sources, effective_ctrl, log2_exact, red_symbolic, unpack_levels
from gen.design.routing import RoutingError, route_dist, route_red
from gen.errors import FettaError

#: bits of each network control word in an instruction (net_ports <= 16: 16 x 4 bits)
NET_WORD_BITS = 64
#: bits of a row address field (``*_base``); every row address of either memory fits it
ADDR_BITS = 20
#: bits of an address stride field (``*_s<level>``)
STRIDE_BITS = 16
#: bits of a loop bound field (``K``, ``L0``, ``L1``) and of the counters that walk it
BOUND_BITS = 16
#: bits of each of ``log_gm``, ``log_gn``, ``log_gk`` (grid sides up to ``2**(2**LOG_GRID_BITS - 1)``)
LOG_GRID_BITS = 3
#: bits of the ``VEC`` scalar field (bfloat16 bits, or a signed integer in the int datatype)
SCALAR_BITS = 16
#: bits of the host port's row address: wider than :data:`ADDR_BITS`, so that an address
#: beyond either memory reaches the range check instead of wrapping into it
HOST_ADDR_BITS = 32
#: bits of the accelerator's run cycle counter (the ``cycles`` status output)
CYCLE_BITS = 32
#: bits of a DRAM byte address (the AXI4 address of the DMA engine, :mod:`hdl.dma`); a ``DMA``
#: instruction carries it in the low bits of its ``a_sel`` field
DRAM_ADDR_BITS = 32


class Opcode(enum.IntEnum):
    NOP = 0
    HALT = 1
    SYNC = 2
    GEMM = 3
    LOAD = 4
    STORE = 5
    #: elementwise vector operation (``VecOp`` in ``mode``), see :func:`vec`
    VEC = 6
    #: DRAM transfer by the DMA engine (``DmaMode`` in ``mode``), see :func:`dma_load`
    DMA = 7


class DmaMode(enum.IntEnum):
    """The ``mode`` field of a ``DMA`` instruction."""

    #: DRAM -> unified memory (the half the run does not use)
    LOAD = 0
    #: unified memory (the half the run does not use) -> DRAM
    STORE = 1
    #: wait until the DMA engine is idle (the transfers started before are complete)
    WAIT = 2


class Dataflow(enum.IntEnum):
    """The ``mode`` field: the CE mapping (:class:`gen.design.isa.CEMode`) every active CE runs.

    ``OS``/``OS_BA``: output stationary (K IA + IB vectors per tile, R rows drained).
    ``WS``/``IS``/``WS_H``/``IS_H``: stationary IB tile (R loads from the ``b`` stream),
    then K IA vectors (``a`` stream), one Psum row per vector. The hardware paths of
    ``WS``/``IS`` (and of ``OS``/``OS_BA``) are the same: the names say which operand
    the compiler put on which stream.
    """

    #: output stationary, CEMode.OS_AB (IA = columns of A, IB = rows of B)
    OS = 0
    #: weight stationary, IB loaded vertically (CEMode.WS_V)
    WS = 1
    #: input stationary, IB loaded vertically (CEMode.IS_V)
    IS = 2
    #: weight stationary, IB loaded horizontally (CEMode.WS_H)
    WS_H = 3
    #: input stationary, IB loaded horizontally (CEMode.IS_H)
    IS_H = 4
    #: output stationary with operand roles exchanged (CEMode.OS_BA)
    OS_BA = 5


class CEMode(hw_enum.Enum, shape=3):
    """The six GEMM mappings of FETTA Fig. 12 (dataflow x IB direction x operand roles)."""

    #: weight stationary, IB (= B) loaded vertically, one row of B per load
    WS_V = 0
    #: weight stationary, IB (= B) loaded horizontally, one column of B per load
    WS_H = 1
    #: input stationary, IB (= A^T) loaded vertically, one column of A per load
    IS_V = 2
    #: input stationary, IB (= A^T) loaded horizontally, one row of A per load
    IS_H = 3
    #: output stationary, IA = A, IB = B streamed from the top; drains rows of C
    OS_AB = 4
    #: output stationary, IA = B^T, IB = A^T streamed from the top; drains columns of C
    OS_BA = 5

    @property
    def output_stationary(self) -> bool:
        return self in (CEMode.OS_AB, CEMode.OS_BA)

    @property
    def horizontal(self) -> bool:
        """IB is loaded from the left (the transposed path)."""
        return self in (CEMode.WS_H, CEMode.IS_H)

    @property
    def input_stationary(self) -> bool:
        return self in (CEMode.IS_V, CEMode.IS_H)


#: ``mode`` field value -> :class:`CEMode` value (the CE's ``mode`` port)
CE_MODE = {Dataflow.OS: CEMode.OS_AB.value, Dataflow.WS: CEMode.WS_V.value, Dataflow.IS: CEMode.IS_V.value,
           Dataflow.WS_H: CEMode.WS_H.value, Dataflow.IS_H: CEMode.IS_H.value, Dataflow.OS_BA: CEMode.OS_BA.value}


_STATIONARY = frozenset(int(m) for m in (Dataflow.WS, Dataflow.IS, Dataflow.WS_H, Dataflow.IS_H))
_HORIZONTAL = frozenset(int(m) for m in (Dataflow.WS_H, Dataflow.IS_H))


def stationary(mode: int) -> bool:
    return mode in _STATIONARY


def horizontal(mode: int) -> bool:
    return mode in _HORIZONTAL


class Flag(enum.IntFlag):
    #: add the tile results to the accumulation unit instead of overwriting
    ACC = 1
    #: also write the updated rows, rounded to bfloat16, to the unified memory
    WB = 2
    #: accumulate the tiles with ``l0 > 0`` (K tiling across the l0 loop), overwrite with ``l0 = 0``
    ACC_L0 = 4


class Transpose(enum.IntFlag):
    """The ``tr`` field of a GEMM: which transpose layers are on (FETTA section V-B2 / V-B3).

    ``A`` / ``B``: the distribution network of IA / IB exchanges ports and lanes, so a CE reads a
    *column* of an ``lanes x lanes`` block of rows: with the operand's spatial offset
    ``off = blk + l`` (``l = off mod lanes``), CE ``c`` gets lane ``l`` of the rows
    ``t + blk + i``, ``i < lanes`` (``t``: the temporal address, a multiple of ``lanes``).
    ``O``: the reduction network exchanges ports and lanes at its output: group ``h * lanes + l``
    writes lane ``l`` of the result rows of groups ``h * lanes + i``, ``i < lanes`` (``gk = 1``,
    at least ``lanes`` groups). Addresses are unchanged; the data is the transpose."""

    A = 1
    B = 2
    O = 4


class ErrorCode(enum.IntEnum):
    NONE = 0
    #: opcode not in :class:`Opcode`
    ILLEGAL_OPCODE = 1
    #: a unified-memory address is outside the active half
    UNIFIED_RANGE = 2
    #: an accumulation-unit address is outside the unit
    ACCUM_RANGE = 3
    #: two different rows of one bank are needed in the same cycle
    BANK_CONFLICT = 4
    #: unsupported dataflow, CE grid larger than the TCU, or a zero loop bound
    BAD_SHAPE = 5
    #: the program ran off the end of the instruction memory without HALT
    PC_OVERFLOW = 6
    #: the network control words do not deliver the rows the addresses name (see :func:`route_ok`)
    ROUTE = 7


#: (name, bits) of every field, in bit order from bit 0. Operand field groups are
#: ``<op>_base`` then the strides of the levels ``k, l0, l1, m, n, r``; for the
#: output ``o`` the ``k`` slot is the stride between the CE's result rows.
LEVELS = ("k", "l0", "l1", "m", "n", "r")
_FIELDS: list[tuple[str, int]] = [
    ("opcode", 4), ("flags", 4), ("mode", 4),
    ("log_gm", LOG_GRID_BITS), ("log_gn", LOG_GRID_BITS), ("log_gk", LOG_GRID_BITS),
    ("K", BOUND_BITS), ("L0", BOUND_BITS), ("L1", BOUND_BITS),
]
for _op in ("a", "b", "o"):
    _FIELDS.append((f"{_op}_base", ADDR_BITS))
    _FIELDS += [(f"{_op}_s{lv}", STRIDE_BITS) for lv in LEVELS]
_FIELDS.append(("w_base", ADDR_BITS))
# network control words (section V-D): distribution sel_vec of the IA and IB networks,
# reduction mode_vec (gen.design.routing port_value() packing); 0 = computed by gemm()
_FIELDS += [("a_sel", NET_WORD_BITS), ("b_sel", NET_WORD_BITS), ("red_mode", NET_WORD_BITS)]
# VEC: the scalar operand ``a`` (bfloat16 bits, or a signed 16-bit integer in the int datatype)
_FIELDS.append(("scalar", SCALAR_BITS))
# GEMM: the transpose layers of the IA / IB distribution networks and of the reduction network
# (:class:`Transpose` bits, see :func:`transposed_rows` and :func:`transposed_groups`)
_FIELDS.append(("tr", 3))
# LOAD / STORE reuse: src = a_base / a_sk (stride per row), dst = o_base / o_sk, count = K chunks
# DMA reuses: K = beats, a_base = first unified row (of the other half), a_sel = DRAM byte address
LAYOUT: dict[str, tuple[int, int]] = {}
_pos = 0
for _name, _bits in _FIELDS:
    LAYOUT[_name] = (_pos, _bits)
    _pos += _bits
#: the fields of an instruction in :data:`LAYOUT` order, and each one's name and bound
_VALUES = operator.attrgetter(*LAYOUT)
_LIMITS = tuple((name, 1 << bits) for name, (_, bits) in LAYOUT.items())
#: bits of one instruction word: exactly the fields of :data:`LAYOUT` (no dead bits in the
#: instruction memory, the host port or the decoder)
INSTR_BITS = _pos
USED_BITS = INSTR_BITS


class IsaError(FettaError):
    kind = "isa"


@dataclass(frozen=True)
class Instr:
    """One decoded instruction (all fields; unused ones are 0)."""

    opcode: int = Opcode.NOP
    flags: int = 0
    mode: int = Dataflow.OS
    log_gm: int = 0
    log_gn: int = 0
    log_gk: int = 0
    K: int = 1
    L0: int = 1
    L1: int = 1
    a_base: int = 0
    a_sk: int = 0
    a_sl0: int = 0
    a_sl1: int = 0
    a_sm: int = 0
    a_sn: int = 0
    a_sr: int = 0
    b_base: int = 0
    b_sk: int = 0
    b_sl0: int = 0
    b_sl1: int = 0
    b_sm: int = 0
    b_sn: int = 0
    b_sr: int = 0
    o_base: int = 0
    o_sk: int = 0
    o_sl0: int = 0
    o_sl1: int = 0
    o_sm: int = 0
    o_sn: int = 0
    o_sr: int = 0
    w_base: int = 0
    a_sel: int = 0
    b_sel: int = 0
    red_mode: int = 0
    scalar: int = 0
    tr: int = 0

    def __hash__(self) -> int:
        # computed once: the controller's clock and the compiler memoize functions of instructions
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(_VALUES(self))
            object.__setattr__(self, "_hash", h)
        return h

    def __post_init__(self) -> None:
        for v, (name, limit) in zip(_VALUES(self), _LIMITS):
            if not isinstance(v, int) or not 0 <= v < limit:
                bits = LAYOUT[name][1]
                raise IsaError(f"must be an integer in [0, 2**{bits}), got {v!r}", field=name)

    @property
    def gm(self) -> int:
        return 1 << self.log_gm

    @property
    def gn(self) -> int:
        return 1 << self.log_gn

    @property
    def gk(self) -> int:
        return 1 << self.log_gk

    def encode(self) -> int:
        word = 0
        for name, (pos, bits) in LAYOUT.items():
            word |= int(getattr(self, name)) << pos
        return word

    def __str__(self) -> str:
        try:
            op = Opcode(self.opcode).name
        except ValueError:
            op = f"OP{self.opcode}"
        parts = [f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                 if f.name != "opcode" and getattr(self, f.name) != f.default]
        return f"{op} " + " ".join(parts)


def decode(word: int) -> Instr:
    """Split an instruction word into its fields (never fails: checks come later)."""
    if not 0 <= word < (1 << INSTR_BITS):
        raise IsaError(f"instruction word must fit {INSTR_BITS} bits", field="word")
    values = {name: (word >> pos) & ((1 << bits) - 1) for name, (pos, bits) in LAYOUT.items()}
    return Instr(**values)


# --- assembler helpers ---------------------------------------------------------------
def nop() -> Instr:
    return Instr(opcode=Opcode.NOP)


def halt() -> Instr:
    return Instr(opcode=Opcode.HALT)


def sync() -> Instr:
    return Instr(opcode=Opcode.SYNC)


def gemm(*, K: int, grid: tuple[int, int, int] = (1, 1, 1), L0: int = 1, L1: int = 1,
         a: Sequence[int] = (0,), b: Sequence[int] = (0,), o: Sequence[int] = (0,),
         w_base: int = 0, acc: bool = False, wb: bool = False, mode: int = Dataflow.OS,
         acc_l0: bool = False, ports: int = 16, routes: bool = True, tr: int = 0) -> Instr:
    """A GEMM instruction. ``a``/``b``/``o`` are ``(base, s_k, s_l0, s_l1, s_m, s_n, s_r)``
    (trailing strides may be left out); ``grid = (gm, gn, gk)``, each a power of two;
    ``tr``: :class:`Transpose` bits.

    ``ports`` = ``config.net_ports``: the network control words (``a_sel``, ``b_sel``,
    ``red_mode``) are computed for it with :mod:`gen.design.routing` (``routes=False`` leaves
    them 0). A pattern the butterflies cannot route leaves its word 0; ``check``
    then reports ``ROUTE``."""
    kw: dict[str, int] = {}
    for name, g in zip(("gm", "gn", "gk"), grid):
        if g < 1 or g & (g - 1):
            raise IsaError(f"must be a power of two, got {g}", field=name)
        kw[f"log_{name}"] = g.bit_length() - 1
    for op, vals in (("a", a), ("b", b), ("o", o)):
        vals = list(vals) + [0] * (7 - len(vals))
        kw[f"{op}_base"] = vals[0]
        for lv, v in zip(LEVELS, vals[1:]):
            kw[f"{op}_s{lv}"] = v
    flags = (Flag.ACC if acc else 0) | (Flag.WB if wb else 0) | (Flag.ACC_L0 if acc_l0 else 0)
    ins = Instr(opcode=Opcode.GEMM, flags=int(flags), mode=int(mode), K=K, L0=L0, L1=L1,
                w_base=w_base, tr=int(tr), **kw)
    return with_routes(ins, ports) if routes else ins


def with_routes(ins: Instr, ports: int) -> Instr:
    """``ins`` with the network control words for ``ports`` network ports (= banks).

    Distribution (IA, IB): CE ``c`` (network output ``c``) reads bank ``off_c mod ports``
    at bank index 0 (:func:`gen.design.routing.route_dist`); the RTL XORs the bank of the
    temporal address in (section V-D). Reduction: group ``g`` (CEs ``g*gk ..``) summed
    into port ``g*gk`` (:func:`gen.design.routing.route_red`, bank index 0).
    """
    if ins.opcode != Opcode.GEMM or ports > NET_WORD_BITS // 4 or ins.gm * ins.gn * ins.gk > ports:
        return ins
    ces = ins.gm * ins.gn * ins.gk
    words = {}
    for op in ("a", "b"):
        words[f"{op}_sel"] = _dist_word(ports, tuple(o % ports for o in ce_offsets(ins, op)))
    words["red_mode"] = _red_word(ports, ces, ins.gk)
    return replace(ins, **words)


@functools.lru_cache(maxsize=4096)
def _dist_word(ports: int, offsets: tuple[int, ...]) -> int:
    """Distribution control word delivering bank ``offsets[c]`` to CE ``c`` (0: not routable)."""
    try:
        return route_dist(ports, list(offsets) + [None] * (ports - len(offsets))).port_value()
    except RoutingError:
        return 0


@functools.lru_cache(maxsize=256)
def _red_word(ports: int, ces: int, gk: int) -> int:
    """Reduction control word summing the groups of ``gk`` CEs into port ``g*gk`` (0: not routable)."""
    try:
        return route_red(ports, [(g * gk, gk, g * gk) for g in range(ces // gk)]).port_value()
    except RoutingError:
        return 0


def dma_load(*, dram: int, row: int, beats: int) -> Instr:
    """DMA ``beats`` beats of ``dma_data_bits`` (:attr:`Geometry.dma_rows` rows each) from the DRAM byte
    address ``dram`` to the unified rows from ``row`` on of the half the run does not use. The
    instruction only starts the transfer: the ones after it run meanwhile; ``dma_wait()`` waits for it
    (``docs/accelerator.md``, "DMA instructions")."""
    return Instr(opcode=Opcode.DMA, mode=DmaMode.LOAD, K=beats, a_base=row, a_sel=dram)


def dma_store(*, row: int, dram: int, beats: int) -> Instr:
    """DMA ``beats`` beats from the unified rows from ``row`` on of the half the run does not use to
    the DRAM byte address ``dram`` (as :func:`dma_load`)."""
    return Instr(opcode=Opcode.DMA, mode=DmaMode.STORE, K=beats, a_base=row, a_sel=dram)


def dma_wait() -> Instr:
    """Wait until the DMA engine is idle: every DMA load / store before it is complete."""
    return Instr(opcode=Opcode.DMA, mode=DmaMode.WAIT)


def load(*, src: int, dst: int, chunks: int, src_stride: int = 1, dst_stride: int = 1) -> Instr:
    """``chunks * banks`` rows, unified ``src + i*src_stride`` -> accumulation ``dst + i*dst_stride``."""
    return Instr(opcode=Opcode.LOAD, K=chunks, a_base=src, a_sk=src_stride, o_base=dst, o_sk=dst_stride)


def store(*, src: int, dst: int, chunks: int, src_stride: int = 1, dst_stride: int = 1) -> Instr:
    """``chunks * banks`` rows, accumulation ``src + i*src_stride`` -> unified ``dst + i*dst_stride``."""
    return Instr(opcode=Opcode.STORE, K=chunks, o_base=src, o_sk=src_stride, a_base=dst, a_sk=dst_stride)


class VecOp(enum.IntEnum):
    """The ``mode`` field of a ``VEC`` instruction (per lane; :mod:`hdl.vector` has the table)."""

    #: ``y + x``
    ADD = 0
    #: ``y + a * x``
    AXPY = 1
    #: ``a * x``
    SCALE = 2
    #: ``max(y, +0)``
    RELU = 3
    #: ``y * x`` (FP32 x bfloat16, rounded to nearest even)
    MUL = 4
    #: ``max(y, x)``
    MAX = 5
    #: ``exp(a * x)``
    EXP = 6
    #: ``1 / x``
    RECIP = 7
    #: ``1 / sqrt(x)``
    RSQRT = 8


#: bfloat16 1.0: the multiplier of ``VEC ADD`` (``y + x * 1.0``)
BF16_ONE = 0x3F80

#: VEC operation names (``fetta``-level spelling) -> :class:`VecOp` codes
VEC_OPS = {op.name.lower(): op.value for op in VecOp}


def vec(*, op: str | int, chunks: int, x: int = 0, y: int = 0, x_stride: int = 1, y_stride: int = 1,
        scalar: int = 0, wb: bool = False, w_base: int = 0) -> Instr:
    """``chunks * vec_rows`` rows: row ``i`` combines unified ``x + i*x_stride`` (bfloat16) with
    accumulation ``y + i*y_stride`` (FP32) and writes the result to that accumulation row (and,
    with ``wb``, rounded to bfloat16, to unified ``w_base + i*y_stride``). ``scalar`` is the
    bfloat16 bit pattern of ``a`` (AXPY, SCALE, EXP). See ``docs/isa.md``."""
    code = VEC_OPS[op] if isinstance(op, str) else int(op)
    return Instr(opcode=Opcode.VEC, mode=code, K=chunks, a_base=x, a_sk=x_stride, o_base=y, o_sk=y_stride,
                 scalar=scalar, flags=int(Flag.WB) if wb else 0, w_base=w_base)


def assemble(program: Iterable[Instr]) -> list[int]:
    return [i.encode() for i in program]


# --- geometry shared by the controller and the emulator ------------------------------
@dataclass(frozen=True)
class Geometry:
    """Sizes the ISA needs from a configuration."""

    banks: int
    lanes: int
    ces: int
    ce_rows: int
    ce_cols: int
    unified_half_rows: int
    accum_rows: int
    imem_depth: int
    ports: int = 16
    #: rows one VEC instruction processes per cycle (0: ``vector_lanes`` unusable, VEC is BAD_SHAPE)
    vec_rows: int = 0
    #: cycles of the PE's multiplier (``FettaConfig.mul_latency``)
    mul_latency: int = 1
    #: cycles of every FP32 adder of the PE, the reduction network and the accumulation unit
    #: (``FettaConfig.add_latency``)
    add_latency: int = 1
    #: unified rows per DMA beat (:func:`dma_beat_bits`; 0: the DMA engine cannot be built, DMA
    #: loads / stores are BAD_SHAPE)
    dma_rows: int = 0
    #: bytes per DMA beat
    dma_bytes: int = 0
    #: longest AXI4 burst of the DMA engine (``FettaConfig.dma_burst``)
    dma_burst: int = 16
    #: AXI4 bursts in flight (``FettaConfig.dma_outstanding``)
    dma_outstanding: int = 4
    #: the DRAM's read latency (``FettaConfig.dram_latency``)
    dram_latency: int = 8
    #: the DRAM's bandwidth in DMA beats per cycle, ``dram_num / dram_den`` <= 1 (:func:`dram_rate`)
    dram_num: int = 1
    dram_den: int = 1

    def __hash__(self) -> int:
        # computed once: the timing functions memoized on (instruction, geometry) hash it every call
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f.name) for f in fields(self)))
            object.__setattr__(self, "_hash", h)
        return h

    @classmethod
    def of(cls, config: FettaConfig) -> "Geometry":
        """The geometry of ``config``: one object per geometry (those memoized timing functions
        then find it by identity, not by comparing every field); kept per configuration."""
        found = _OF_CONFIG.get(config)
        if found is not None:
            return found
        half = config.unified_rows_per_bank // 2
        beat = dma_beat_bits(config)
        rate = dram_rate(config)
        geo = cls(banks=config.banks, lanes=config.lanes, ces=config.num_ces, ce_rows=config.ce_rows,
                   ce_cols=config.ce_cols, unified_half_rows=half * config.banks,
                   accum_rows=config.accum_rows_per_bank * config.banks, imem_depth=config.imem_depth,
                   ports=config.net_ports, vec_rows=vector_rows(config), mul_latency=config.mul_latency,
                   add_latency=config.add_latency, dma_rows=beat // (config.lanes * config.elem_bits),
                   dma_bytes=beat // 8, dma_burst=config.dma_burst, dma_outstanding=config.dma_outstanding,
                   dram_latency=config.dram_latency, dram_num=rate.numerator, dram_den=rate.denominator)
        if len(_OF_CONFIG) >= 1024:
            _OF_CONFIG.clear()
        found = _OF_CONFIG[config] = geo.interned()
        return found

    def interned(self) -> "Geometry":
        """The one object of this geometry (:meth:`of`; a geometry made by ``replace`` is another
        object until it is interned)."""
        return _GEOMETRIES.setdefault(self, self)


_GEOMETRIES: dict[Geometry, Geometry] = {}
#: :meth:`Geometry.of` by configuration
_OF_CONFIG: dict[FettaConfig, Geometry] = {}


#: largest denominator of :func:`dram_rate` (the credit counter of the bench's DRAM stays small)
DRAM_RATE_DEN = 64


@functools.lru_cache(maxsize=256)
def dram_rate(config: FettaConfig) -> Fraction:
    """The DRAM's bandwidth in DMA beats per accelerator cycle: ``dram_gbps`` at ``freq_mhz`` over the
    beat's bytes, at most 1 (the AXI4 port moves one beat per cycle), rounded down to a fraction of
    denominator at most :data:`DRAM_RATE_DEN` (at least ``1 / DRAM_RATE_DEN``). LPDDR4 at 25.6 GB/s
    and 1 GHz with 32-byte beats: 4/5. The bench's DRAM paces its beats with it
    (``sim/host_player.py``) and :func:`gen.design.control.dma_cycles` counts with it."""
    beat = dma_beat_bits(config) // 8 or config.dma_data_bits // 8
    exact = Fraction(str(config.dram_gbps)) * 1000 / Fraction(str(config.freq_mhz)) / beat
    if exact >= 1:
        return Fraction(1)
    f = exact.limit_denominator(DRAM_RATE_DEN)
    if f > exact:
        f = Fraction(math.floor(exact * DRAM_RATE_DEN), DRAM_RATE_DEN)
    return max(f, Fraction(1, DRAM_RATE_DEN))


def dma_beat_bits(config: FettaConfig) -> int:
    """Data bits of the accelerator's DMA beat: ``dma_data_bits``, at most one row per bank
    (``banks * lanes * elem_bits``: a beat's rows are written or read in one cycle); 0 unless it is a
    power of two of at least 8 bits and a power-of-two multiple of a row (then the accelerator
    cannot be built: :class:`hdl.top.Fetta` raises ConfigError)."""
    row = config.lanes * config.elem_bits
    beat = min(config.dma_data_bits, config.banks * row)
    q, r = divmod(beat, row)
    if r or q < 1 or q & (q - 1) or beat < 8 or beat & (beat - 1):
        return 0
    return beat


def vector_rows(config: FettaConfig) -> int:
    """``min(vector_lanes / lanes, banks)`` rows per VEC cycle; 0 unless ``vector_lanes`` is
    ``lanes`` times a power of two (``hdl.vector.vec_rows`` raises ConfigError then)."""
    q, r = divmod(config.vector_lanes, config.lanes)
    if r or q < 1 or q & (q - 1):
        return 0
    return min(q, config.banks)


@functools.lru_cache(maxsize=1 << 16)
def ce_offsets(ins: Instr, op: str) -> tuple[int, ...]:
    """Per active CE (index ``c``), the spatial part of operand ``op``'s address (memoized: the
    controller's clock and the compiler's placement ask for the same instructions many times)."""
    sm, sn, sr = (getattr(ins, f"{op}_s{lv}") for lv in ("m", "n", "r"))
    gn, gk = ins.gn, ins.gk
    return tuple(im * sm + in_ * sn + ik * sr for im in range(ins.gm) for in_ in range(gn) for ik in range(gk))


_TR_BIT = {"a": int(Transpose.A), "b": int(Transpose.B), "o": int(Transpose.O)}


def transposed(ins: Instr, op: str) -> bool:
    """Does operand ``op`` (``"a"``, ``"b"``; ``"o"``: the reduction network) go through a transpose layer?"""
    return bool(int(ins.tr) & _TR_BIT[op])


def read_offsets(ins: Instr, op: str, lanes: int) -> list[int]:
    """Per active CE, the first row it reads past the temporal address: its spatial offset, or with
    a transpose layer the first row of its block (the offset rounded down to ``lanes``)."""
    offs = ce_offsets(ins, op)
    return [o - o % lanes for o in offs] if transposed(ins, op) else offs


def group_offsets(ins: Instr) -> list[int]:
    """Per reduction group ``g = im * gn + in_``, the spatial part of the output address."""
    return [im * ins.o_sm + in_ * ins.o_sn for im in range(ins.gm) for in_ in range(ins.gn)]


def temporal_max(ins: Instr, op: str, k_bound: int) -> int:
    return ((k_bound - 1) * getattr(ins, f"{op}_sk") + (ins.L0 - 1) * getattr(ins, f"{op}_sl0")
            + (ins.L1 - 1) * getattr(ins, f"{op}_sl1"))


@functools.lru_cache(maxsize=1 << 16)
def read_max(ins: Instr, op: str, geo: "Geometry") -> int:
    """The last unified row a GEMM reads for operand ``op``: IA streams ``K`` vectors, IB ``K``
    (OS) or the tile's loads (IS/WS), stepped by ``x_sk``; a transposed operand reads whole blocks
    of ``lanes`` rows. The first is ``x_base`` (strides and offsets are unsigned)."""
    kb = loads(ins, geo) if op == "b" and stationary(ins.mode) else ins.K
    last = max(ce_offsets(ins, op)) | (geo.lanes - 1 if transposed(ins, op) else 0)
    return getattr(ins, f"{op}_base") + temporal_max(ins, op, kb) + last


@functools.lru_cache(maxsize=1 << 16)
def out_max(ins: Instr, geo: "Geometry") -> int:
    """The last output row of a GEMM past ``o_base`` (accumulation unit) or ``w_base`` (write-back)."""
    return temporal_max(ins, "o", out_rows(ins, geo)) + max(group_offsets(ins))


def _conflict(offsets: Sequence[int], banks: int, *, writes: bool = False) -> bool:
    """Two ports need one bank in one cycle: reads of the same row share it (multicast),
    writes never do (two writers of one row would race)."""
    seen: dict[int, int] = {}
    for off in offsets:
        b = off % banks
        if b in seen and (writes or seen[b] != off):
            return True
        seen[b] = off
    return False


def spatial_mask(offs) -> int:
    """The bank bits the CEs' spatial offsets ``offs`` (mod the ports) span: ``2**p - 1``, ``p`` the
    bit length of the largest; the temporal bank indices are the multiples of ``2**p``."""
    return (1 << max(offs, default=0).bit_length()) - 1


def _dist_ok(ins: Instr, op: str, geo: Geometry) -> bool:
    """The distribution network delivers to every active CE the bank its address names.

    CE ``c`` reads ``t + off_c`` (``t`` = base + temporal part). The RTL drives the
    network with ``a_sel``/``b_sel`` and bank index ``t mod N``, so CE ``c`` gets bank
    ``src_c(t mod N)`` (the sources traced through the butterfly). Required: no carry
    between the spatial and temporal bank bits (offsets ``mod N`` below ``2**p``, base
    and temporal strides multiples of ``2**p``: then ``(t + off) mod N = t ^ off``), and
    ``src_c(b) = (off_c mod N) ^ b`` for every bank index ``b`` (multiple of ``2**p``).
    """
    N = geo.ports
    offs = [o % N for o in ce_offsets(ins, op)]
    low = spatial_mask(offs)
    tbits = getattr(ins, f"{op}_base") | getattr(ins, f"{op}_sk") | getattr(ins, f"{op}_sl0") \
        | getattr(ins, f"{op}_sl1")
    if tbits & low:
        return False
    return _dist_routes(tuple(offs), getattr(ins, f"{op}_sel"), N, low)


@functools.lru_cache(maxsize=1 << 16)
def _dist_routes(offs: tuple[int, ...], sel_word: int, N: int, low: int) -> bool:
    """``src_c(b) = offs[c] ^ b`` for every bank index ``b`` (multiple of ``low + 1``); memoized:
    the compiler checks many candidate mappings with the same offsets and routes."""
    n = log2_exact(N)
    sel = [sum(b << x for x, b in enumerate(bits)) for bits in unpack_levels(sel_word, n, N)]
    for b in range(0, N, low + 1):
        src = dist_sources(N, effective_ctrl(sel, b, n, width=N))
        if any(src[c] != (o ^ b) for c, o in enumerate(offs)):
            return False
    return True


def _red_ok(ins: Instr, geo: Geometry) -> bool:
    """The reduction network sums exactly the CEs of group ``g`` into port ``g*gk``."""
    return _red_routes(ins.red_mode, ins.gm * ins.gn * ins.gk, ins.gk, geo.ports)


@functools.lru_cache(maxsize=1 << 12)
def _red_routes(red_mode: int, ces: int, gk: int, N: int) -> bool:
    n = log2_exact(N)
    sym = red_symbolic(N, unpack_levels(red_mode, n, N // 2, 2), active=range(ces))
    return all(sym[g * gk] == frozenset(range(g * gk, (g + 1) * gk)) for g in range(ces // gk))


def _blocks_aligned(ins: Instr, op: str, lanes: int) -> bool:
    """A transposed operand's temporal address is a multiple of ``lanes`` (whole blocks of rows)."""
    if not transposed(ins, op):
        return True
    tbits = getattr(ins, f"{op}_base") | getattr(ins, f"{op}_sk") | getattr(ins, f"{op}_sl0") \
        | getattr(ins, f"{op}_sl1")
    return tbits & (lanes - 1) == 0


def route_ok(ins: Instr, geo: Geometry) -> bool:
    """The GEMM's network words route as its addresses require (:data:`ErrorCode.ROUTE`); a
    transposed operand's temporal address is a multiple of ``lanes``."""
    return (_dist_ok(ins, "a", geo) and _dist_ok(ins, "b", geo) and _red_ok(ins, geo)
            and _blocks_aligned(ins, "a", geo.lanes) and _blocks_aligned(ins, "b", geo.lanes))


def out_rows(ins: Instr, geo: Geometry) -> int:
    """Result rows a CE emits per tile: ``ce_rows`` (OS) or ``K`` (one per IA vector, IS/WS)."""
    return ins.K if stationary(ins.mode) else geo.ce_rows


def loads(ins: Instr, geo: Geometry) -> int:
    """IB loads per tile of a stationary mode: ``ce_rows`` (V) or ``ce_cols`` (H)."""
    return geo.ce_cols if horizontal(ins.mode) else geo.ce_rows


def vec_delay(ins: Instr, geo: Geometry) -> int:
    """Stationary modes: cycles from a tile's first IB load to its first IA vector."""
    return geo.ce_cols if horizontal(ins.mode) else 1


def check(ins: Instr, geo: Geometry) -> ErrorCode:
    """The static checks the controller makes before executing ``ins`` (in this order).

    Every address an instruction generates is ``base + temporal + spatial`` with
    unsigned strides, so the range check of the largest address and the bank
    check of the spatial offsets (the temporal part is common to all ports in a
    cycle) are exact: an instruction that passes never conflicts or overflows.
    """
    try:
        op = Opcode(ins.opcode)
    except ValueError:
        return ErrorCode.ILLEGAL_OPCODE
    if op in (Opcode.NOP, Opcode.HALT, Opcode.SYNC):
        return ErrorCode.NONE
    if op == Opcode.GEMM:
        if (ins.mode > max(Dataflow) or ins.gm * ins.gn * ins.gk > geo.ces or ins.K == 0 or ins.L0 == 0
                or ins.L1 == 0):
            return ErrorCode.BAD_SHAPE
        if transposed(ins, "o") and geo.lanes > 1 and (ins.gk > 1 or ins.gm * ins.gn < geo.lanes):
            return ErrorCode.BAD_SHAPE
        if read_max(ins, "a", geo) >= geo.unified_half_rows or read_max(ins, "b", geo) >= geo.unified_half_rows:
            return ErrorCode.UNIFIED_RANGE
        omax = out_max(ins, geo)
        if ins.o_base + omax >= geo.accum_rows:
            return ErrorCode.ACCUM_RANGE
        if ins.flags & Flag.WB and ins.w_base + omax >= geo.unified_half_rows:
            return ErrorCode.UNIFIED_RANGE
        if _conflict(read_offsets(ins, "a", geo.lanes), geo.banks) \
                or _conflict(read_offsets(ins, "b", geo.lanes), geo.banks) \
                or _conflict(group_offsets(ins), geo.banks, writes=True):
            return ErrorCode.BANK_CONFLICT
        if out_rows(ins, geo) > 1 and ins.o_sk == 0:
            # consecutive rows of one address would read before the previous write
            return ErrorCode.BANK_CONFLICT
        if not route_ok(ins, geo):
            return ErrorCode.ROUTE
        return ErrorCode.NONE
    if op == Opcode.VEC:
        return _check_vec(ins, geo)
    if op == Opcode.DMA:
        return _check_dma(ins, geo)
    # LOAD / STORE: chunk c moves rows c*banks + j, j = 0..banks-1, in one cycle
    if ins.K == 0:
        return ErrorCode.BAD_SHAPE
    rows = ins.K * geo.banks
    umax = ins.a_base + (rows - 1) * ins.a_sk
    amax = ins.o_base + (rows - 1) * ins.o_sk
    if umax >= geo.unified_half_rows:
        return ErrorCode.UNIFIED_RANGE
    if amax >= geo.accum_rows:
        return ErrorCode.ACCUM_RANGE
    write_unified = ins.opcode == Opcode.STORE
    if _conflict([j * ins.a_sk for j in range(geo.banks)], geo.banks, writes=write_unified) or \
            _conflict([j * ins.o_sk for j in range(geo.banks)], geo.banks, writes=not write_unified):
        return ErrorCode.BANK_CONFLICT
    return ErrorCode.NONE


def _check_dma(ins: Instr, geo: Geometry) -> ErrorCode:
    """DMA: ``mode`` a :class:`DmaMode`; a load / store moves ``K >= 1`` beats, its DRAM byte address
    ``a_sel`` a multiple of the beat (``dma_bytes``) whose transfer ends within the
    :data:`DRAM_ADDR_BITS` address space, its first row ``a_base`` a multiple of ``dma_rows`` (a beat's
    rows then sit in consecutive banks from a multiple of ``dma_rows``): else ``BAD_SHAPE``; its last
    row within the half: else ``UNIFIED_RANGE``. The half is always the one the run does not use, so
    the transfer never touches the rows the run's other instructions read or write."""
    if ins.mode > max(DmaMode):
        return ErrorCode.BAD_SHAPE
    if ins.mode == DmaMode.WAIT:
        return ErrorCode.NONE
    R, nb = geo.dma_rows, geo.dma_bytes
    if (R == 0 or ins.K == 0 or ins.a_sel % nb or ins.a_base % R
            or ins.a_sel + ins.K * nb > (1 << DRAM_ADDR_BITS)):
        return ErrorCode.BAD_SHAPE
    if ins.a_base + ins.K * R - 1 >= geo.unified_half_rows:
        return ErrorCode.UNIFIED_RANGE
    return ErrorCode.NONE


def _check_vec(ins: Instr, geo: Geometry) -> ErrorCode:
    """VEC: chunk ``c`` reads unified rows ``a_base + i*a_sk`` and accumulation rows
    ``o_base + i*o_sk`` (``i = c*V + j``, ``j < V = vec_rows``) in one cycle and writes the
    accumulation rows (and with WB unified ``w_base + i*o_sk``) :func:`vec_tail` cycles later.

    Read-after-write hazards are refused as ``BANK_CONFLICT`` (as GEMM's ``o_sk = 0``):
    repeated accumulation rows (``o_sk = 0`` with more than one row), and with WB a
    unified write range that overlaps the read range unless it is the same rows
    (``w_base == a_base`` and ``o_sk == a_sk``: each row is read before it is written)."""
    V = geo.vec_rows
    if ins.mode > max(VecOp) or ins.K == 0 or V == 0:
        return ErrorCode.BAD_SHAPE
    rows = ins.K * V
    umax = ins.a_base + (rows - 1) * ins.a_sk
    amax = ins.o_base + (rows - 1) * ins.o_sk
    wmax = ins.w_base + (rows - 1) * ins.o_sk
    wb = bool(ins.flags & Flag.WB)
    if umax >= geo.unified_half_rows:
        return ErrorCode.UNIFIED_RANGE
    if amax >= geo.accum_rows:
        return ErrorCode.ACCUM_RANGE
    if wb and wmax >= geo.unified_half_rows:
        return ErrorCode.UNIFIED_RANGE
    if _conflict([j * ins.a_sk for j in range(V)], geo.banks) or \
            _conflict([j * ins.o_sk for j in range(V)], geo.banks, writes=True):
        return ErrorCode.BANK_CONFLICT
    if rows > 1 and ins.o_sk == 0:
        return ErrorCode.BANK_CONFLICT
    if wb and not (ins.w_base == ins.a_base and ins.o_sk == ins.a_sk) and ins.w_base <= umax \
            and ins.a_base <= wmax:
        return ErrorCode.BANK_CONFLICT
    return ErrorCode.NONE


# --- timing (the controller's FSM; the emulator counts with the same rules) ----------
#: cycles every instruction spends in FETCH, DECODE and CHECK before it executes
OVERHEAD = 3
#: GEMM: memory read (1) + distribution network (1) + accumulation read/write (1) + FSM (1),
#: on top of the CE's output latency, the reduction network's log2(ports) levels and the
#: accumulation adder's ``add_latency - 1`` inner registers (:func:`gemm_latency`)
GEMM_TAIL = 4
#: LOAD/STORE: pipeline latency after the last chunk is issued
MOVE_TAIL = 1


def vector_latency(mul_latency: int, add_latency: int) -> int:
    """Cycles from the vector unit's operands to its result (:class:`hdl.vector.VectorUnit`): the
    multiplier (``mul_latency``), the adder less its last register (``add_latency - 1``), and with
    pipelined multipliers (``mul_latency >= 2``) one result register after the result multiplexer
    and the bfloat16 rounder (the register the memory write would otherwise be)."""
    return mul_latency + add_latency - 1 + (1 if mul_latency >= 2 else 0)


def vec_tail(geo: "Geometry") -> int:
    """VEC: cycles after the last chunk is issued: memory read (1), then the vector unit's
    :func:`vector_latency`, the memory write in the cycle its result is valid; 2 with the default
    latencies."""
    return 1 + vector_latency(geo.mul_latency, geo.add_latency)


def interleave(ins: Instr, geo: Geometry) -> int:
    """Tiles a GEMM issues interleaved, vector by vector: OS: ``add_latency`` (each PE's
    accumulation loop holds one partial sum per stage of its adder, so vector ``k`` of tile
    ``j`` returns from the adder exactly when vector ``k + 1`` of the same tile arrives); IS/WS: 1."""
    return 1 if stationary(ins.mode) else geo.add_latency


def groups(ins: Instr, geo: Geometry) -> int:
    """Groups of :func:`interleave` consecutive tiles (``l0`` inner) a GEMM issues; the last one
    may be partial."""
    return -(-(ins.L0 * ins.L1) // interleave(ins, geo))


def tile_period(ins: Instr, geo: Geometry) -> int:
    """Cycles between the starts of consecutive tile groups (:func:`groups`).

    OS: ``q * max(K, ce_rows)`` with ``q`` = :func:`interleave`: the group's ``q * K`` vectors
    (vector ``k`` of its tiles in slot order, then ``k + 1``), then the double-buffered Psum
    registers drain one row of one tile per cycle (``q * ce_rows`` rows).
    IS/WS (one tile per group): ``max(K, loads, add_latency)``: a tile's ``loads`` IB loads go into
    the CEs' shadow registers while the previous tile's ``K`` vectors stream (they start with its
    first vector, :class:`hdl.sequencer.GemmIssue`); its vectors start ``delay`` cycles after its
    first load (1 for vertical loads, ``ce_cols`` for horizontal ones). The tiles of ``ACC_L0`` add
    to the same accumulation rows, one period apart, and the accumulation unit's read-modify-write
    takes ``add_latency`` cycles (:class:`hdl.accum.AccumAdd`): the period is never shorter.
    """
    if stationary(ins.mode):
        return max(loads(ins, geo), ins.K, geo.add_latency)
    return interleave(ins, geo) * max(ins.K, geo.ce_rows)


def last_issue(ins: Instr, geo: Geometry) -> int:
    """Cycle (within the last group) of the last IA vector."""
    if stationary(ins.mode):
        return vec_delay(ins, geo) + ins.K - 1
    q = interleave(ins, geo)
    slots = ins.L0 * ins.L1 - (groups(ins, geo) - 1) * q     # tiles of the last group
    return q * (ins.K - 1) + slots - 1


def ce_latency(geo: Geometry) -> int:
    """Cycles from an IA vector entering a CE to its Psum leaving it: ``mul_latency``, then
    ``add_latency`` per PE row (the row skew). OS: from the tile's last vector to its last row."""
    return geo.ce_rows * geo.add_latency + geo.mul_latency


def gemm_latency(geo: Geometry) -> int:
    """Cycles from issuing the last IA vector of the last tile to the end of the GEMM."""
    # CE, then the reduction network's log2(ports) levels of add_latency cycles each, then the
    # accumulation unit's read-modify-write (its adder's add_latency - 1 inner registers)
    return ce_latency(geo) - 1 + (geo.ports.bit_length() - 1) * geo.add_latency + geo.add_latency - 1 + GEMM_TAIL


@functools.lru_cache(maxsize=1 << 16)     # a pure function of the word: timed many times over
def exec_cycles(ins: Instr, geo: Geometry) -> int:
    """Cycles after CHECK (HALT: 0; the start costs one more cycle, see :func:`program_cycles`). A DMA
    instruction is done with CHECK (0): its transfer runs on, :func:`gen.design.control.dma_cycles`."""
    op = ins.opcode
    if op == Opcode.GEMM:
        return (groups(ins, geo) - 1) * tile_period(ins, geo) + last_issue(ins, geo) + 1 + gemm_latency(geo)
    if op in (Opcode.LOAD, Opcode.STORE):
        return ins.K + MOVE_TAIL
    if op == Opcode.VEC:
        return ins.K + vec_tail(geo)
    return 0


def gemm_macs(ins: Instr, geo: Geometry) -> int:
    """MACs the TCU performs for a GEMM (padding included)."""
    return ins.gm * ins.gn * ins.gk * ins.L0 * ins.L1 * ins.K * geo.ce_rows * geo.ce_cols


__all__ = ["INSTR_BITS", "ADDR_BITS", "STRIDE_BITS", "BOUND_BITS", "LOG_GRID_BITS", "SCALAR_BITS", "HOST_ADDR_BITS",
           "CYCLE_BITS", "DRAM_ADDR_BITS", "DmaMode", "dma_load", "dma_store", "dma_wait", "dma_beat_bits",
           "Opcode", "Dataflow", "Flag", "ErrorCode", "LAYOUT", "Instr", "IsaError", "decode", "nop",
           "halt", "sync", "gemm", "vec", "VEC_OPS", "vec_tail", "vector_latency", "vector_rows", "with_routes", "route_ok",
           "stationary", "horizontal", "CE_MODE", "CEMode", "VecOp", "BF16_ONE", "out_rows", "loads", "vec_delay",
           "last_issue", "gemm_latency", "interleave", "groups", "ce_latency", "NET_WORD_BITS", "load", "store", "assemble", "Geometry", "check",
           "ce_offsets", "group_offsets", "spatial_mask", "read_offsets", "transposed", "Transpose", "OVERHEAD", "GEMM_TAIL", "MOVE_TAIL", "tile_period", "exec_cycles",
           "gemm_macs", "replace", "field", "read_max", "out_max"]


# --- costing before an instruction exists (the compiler's mappings, the dense tiler's passes) ---
#: cycles from ``start`` to the first FETCH (the controller latches the start request)
START_CYCLES = 1


def os_gemm_cycles(K: int, tiles: int, geo: Geometry) -> int:
    """:func:`exec_cycles` of an output-stationary GEMM of ``tiles`` (``L0 * L1``) tiles of depth ``K``
    from the loop bounds alone: ``add_latency`` tiles interleaved per group (:func:`tile_period`,
    :func:`last_issue`)."""
    q = geo.add_latency
    n_groups = -(-tiles // q)
    slots = tiles - (n_groups - 1) * q
    return (n_groups - 1) * q * max(K, geo.ce_rows) + q * (K - 1) + slots + gemm_latency(geo)


def stationary_gemm_cycles(K: int, tiles: int, geo: Geometry, horizontal_loads: bool = False) -> int:
    """:func:`exec_cycles` of a stationary GEMM (``WS`` / ``IS``, vertical loads; ``WS_H`` / ``IS_H`` with
    ``horizontal_loads``) of ``tiles`` tiles streaming ``K`` IA vectors each, from the loop bounds
    alone (:func:`tile_period`, :func:`last_issue`)."""
    ld = geo.ce_cols if horizontal_loads else geo.ce_rows
    delay = geo.ce_cols if horizontal_loads else 1
    return (tiles - 1) * max(ld, K, geo.add_latency) + delay + K - 1 + 1 + gemm_latency(geo)


__all__ += ["START_CYCLES", "os_gemm_cycles", "stationary_gemm_cycles", "DRAM_RATE_DEN", "dram_rate"]
