"""Elementwise work of a training step compiled for the vector unit (issue 19).

A :class:`VecProgram` computes one elementwise operation (:data:`OPS`) over tensors of ``n``
elements (or, built by :mod:`gen.compiler.rowops`, a row-wise one): the sums of the residual connections and of the gradients that meet at a tensor, GELU and
its backward, and the SGD update. It is a list of :class:`VecRun`, one per *piece* of at most
``piece_rows`` unified-memory rows (``lanes`` elements each, the flat tensors zero padded to whole
chunks), on alternating ping-pong halves and accumulation-unit regions, so the DRAM transfers of
one piece overlap the compute of the last (:mod:`gen.design.timing`). Every run: the host writes
the bfloat16 operands into the unified memory and the FP32 operands into the accumulation unit, the
program (``LOAD`` / ``VEC``) runs to HALT, the host reads the results back (bfloat16 from the unified
memory, or FP32 from the accumulation unit).

The operations (``x`` bfloat16 operands, ``y`` FP32 operands; ``u = 2**-9``, half of bfloat16's unit
roundoff ``2**-8``; what each step rounds is in its recipe below, the measured error against float64
in ``docs/training.md``):

* ``add``: ``y + x_1 + ... + x_k`` in FP32, left to right, each sum rounded once (the host's float32
  sum of the same values, bit for bit outside subnormals); result FP32.
* ``sgd``: ``y + bf16(-lr) * x`` (``AXPY``: FP32 master weight ``y``, bfloat16 gradient ``x``); FP32.
* ``gelu``: ``x * sigmoid(2c x (1 + a x^2))`` (= the tanh form, ``c = sqrt(2/pi)``, ``a = 0.044715``)
  with ``sigmoid(z) = 1 / (1 + exp(-z))`` by ``EXP`` and ``RECIP``; result bfloat16.
* ``gelu_bwd``: ``dy * (s + 2c x s (1 - s) (1 + 3a x^2))``, ``s`` the sigmoid above and ``1 - s`` the
  sigmoid of ``-z`` (no cancellation, no ``0 * inf`` where ``exp`` overflows); bfloat16.

The constants are the bfloat16 scalars of the ``VEC`` instruction (``bf16(a)``, ``bf16(-2c)``,
``bf16(2c)``, ``bf16(3a)``: relative errors below ``u``); ``1.0`` comes from one host-written row.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from gen.compiler.layout import ceil_to
from gen.compiler.program import CompileError
from gen.design.config import FettaConfig
import ml_dtypes

from gen.design.isa import Geometry, Instr, Opcode, VecOp, halt, load, store, vec
from gen.design.timing import RunTiming, Timeline, dram_bytes_per_cycle, program_cycles, timeline

__all__ = ["OPS", "VecRun", "VecProgram", "compile_vec", "scalar_bits"]

_C2 = 2.0 * math.sqrt(2.0 / math.pi)
_A = 0.044715
#: the unified-memory row of ``1.0`` every run holds (read with stride 0)
ONE = "_one"


@functools.lru_cache(maxsize=1024)
def scalar_bits(value: float) -> int:
    """The ``VEC`` scalar field of ``value``: its bfloat16 bit pattern (round to nearest even)."""
    return int(np.float32(value).astype(ml_dtypes.bfloat16).view(np.uint16))


@dataclass
class VecRun:
    """One run of a :class:`VecProgram` on rows ``[first, first + size)`` of columns ``[c0, c1)`` of its
    tensors (:meth:`VecProgram.slab`). ``uwrites`` / ``awrites``: (address, tensor) written before the
    program (unified: bfloat16, the constant :data:`ONE` row too; accumulation: FP32), ``ureads`` /
    ``areads``: (address, tensor) read after it. A piece whose program exceeds the instruction memory
    runs as several runs on the same half: the first writes, the last reads, the memories keep the rest."""

    half: int
    first: int
    size: int
    program: list[Instr]
    uwrites: list[tuple[int, str]] = field(default_factory=list)
    awrites: list[tuple[int, str]] = field(default_factory=list)
    ureads: list[tuple[int, str]] = field(default_factory=list)
    areads: list[tuple[int, str]] = field(default_factory=list)
    c0: int = 0
    c1: int | None = None


@dataclass
class VecProgram:
    """A vector-unit operation over tensors stored as ``cols`` columns of ``blocks`` rows each.

    Flat (elementwise) operations have one column: element ``i`` of an ``n``-element tensor is lane
    ``i % lanes`` of row ``i // lanes``. Row-wise operations (:mod:`gen.compiler.rowops`) on ``[R, C]``
    have ``C`` columns: element ``(r, c)`` is lane ``r % lanes`` of row ``r // lanes`` of column ``c``
    (zero padded to ``blocks`` rows); their per-row statistics (:attr:`stats`, shape ``[R]``) have one.
    A run holds rows ``[first, first + size)`` of its columns, column after column."""

    op: str
    shape: tuple[int, ...]
    cols: int
    blocks: int
    runs: list[VecRun]
    #: input tensor -> ``"u"`` (bfloat16, unified memory) or ``"a"`` (FP32, accumulation unit)
    inputs: dict[str, str]
    #: output tensor -> memory, as ``inputs``
    outputs: dict[str, str]
    #: elements the vector unit combines (lanes x rows of every ``VEC`` instruction)
    lane_ops: int = 0
    #: tensors of one column (per-row statistics of a row-wise operation, shape ``shape[:-1]``)
    stats: frozenset[str] = frozenset()
    #: row-wise operations on few rows: groups of columns folded into one column's rows (group ``g``
    #: of the ``fold`` in rows ``[g * blocks / fold, (g + 1) * blocks / fold)``; :mod:`gen.compiler.rowops`)
    fold: int = 1
    #: folded row-wise operations in row pieces: rows ``[p R / pieces, (p + 1) R / pieces)`` of the
    #: operand are piece ``p``, packed (and folded) on their own into rows ``[p blocks / pieces, (p + 1)
    #: blocks / pieces)`` (:mod:`gen.compiler.rowops`, "Pieces")
    row_pieces: int = 1

    def tensor_shape(self, name: str) -> tuple[int, ...]:
        return self.shape[:-1] if name in self.stats else self.shape

    @functools.cached_property
    def _piece(self) -> "VecProgram":
        """One row piece as a program of its own (its layout; no runs)."""
        R = int(np.prod(self.shape[:-1]))
        P = self.row_pieces
        return VecProgram(self.op, (R // P, self.shape[-1]), self.cols, self.blocks // P, [], self.inputs,
                          self.outputs, stats=self.stats, fold=self.fold)

    def _flat(self, name: str) -> bool:
        return self.cols == 1 and self.fold == 1 or name in self.stats

    def pack(self, arr: np.ndarray, lanes: int, name: str = "") -> np.ndarray:
        """Tensor ``name`` -> ``[columns, blocks, lanes]`` (zero padded; a statistic repeated in every
        folded group)."""
        arr = np.asarray(arr, np.float32)
        if self.row_pieces > 1:
            one = self._piece
            rows = arr.reshape(-1) if name in self.stats else arr.reshape(-1, self.shape[-1])
            parts = np.split(rows, self.row_pieces)
            return np.concatenate([one.pack(part, lanes, name) for part in parts], axis=1)
        f, g = self.fold, self.blocks // self.fold
        if self._flat(name):
            flat = np.zeros(g * lanes, np.float32)
            flat[:arr.size] = arr.ravel()
            return np.tile(flat.reshape(g, lanes), (f, 1)).reshape(1, self.blocks, lanes)
        C = self.shape[-1]
        full = np.zeros((g * lanes, C), np.float32)
        full[:arr.size // C] = arr.reshape(-1, C)
        full = full.reshape(g, lanes, f, C // f).transpose(3, 2, 0, 1)
        return np.ascontiguousarray(full.reshape(C // f, self.blocks, lanes))

    def unpack(self, full: np.ndarray, name: str = "") -> np.ndarray:
        """``[columns, blocks, lanes]`` -> tensor ``name``."""
        shape = self.tensor_shape(name)
        if self.row_pieces > 1:
            one = self._piece
            parts = [one.unpack(part, name) for part in np.split(full, self.row_pieces, axis=1)]
            return np.concatenate(parts, axis=0).reshape(shape)
        n = int(np.prod(shape))
        f, g = self.fold, self.blocks // self.fold
        if full.shape[0] == 1 and (self.fold == 1 or name in self.stats):
            return full[0, :g].ravel()[:n].reshape(shape)
        C = self.shape[-1]
        rows = full.reshape(C // f, f, g, -1).transpose(2, 3, 1, 0).reshape(-1, C)
        return rows[:n // C].reshape(shape)

    def real_rows(self, name: str, run: VecRun, lanes: int) -> int:
        """Rows of ``run``'s slab of tensor ``name`` that hold an element of it (the rest are padding,
        which no result depends on: a transfer leaves them out)."""
        if self.row_pieces > 1:     # a run holds one piece (or part of one)
            first = run.first % (self.blocks // self.row_pieces)
            return self._piece.real_rows(name, replace(run, first=first), lanes)
        shape = self.tensor_shape(name)
        f, g = self.fold, self.blocks // self.fold
        if self._flat(name):
            cols, rows = 1, -(-int(np.prod(shape)) // lanes)
        else:
            c1 = self.cols if run.c1 is None else run.c1
            cols, rows = c1 - run.c0, -(-(int(np.prod(shape)) // self.shape[-1]) // lanes)
        if f > 1:               # one piece: every group of the column
            return cols * f * min(rows, g)
        return cols * max(0, min(rows, run.first + run.size) - run.first)

    def run_timings(self, config: FettaConfig, compute: Sequence[int] | None = None) -> list[RunTiming]:
        """What :func:`gen.design.timing.timeline` needs of every run: its half, the DRAM bytes of the
        rows it writes and reads that hold elements (:meth:`real_rows`; the constant row counts one),
        its compute cycles (``compute``: measured ones; default the static timing of its program)."""
        L = config.lanes
        row_u, row_a = L * config.elem_bits // 8, L * config.acc_bits // 8
        out = []
        for i, run in enumerate(self.runs):
            wu = sum(1 if n == ONE else self.real_rows(n, run, L) for _, n in run.uwrites)
            wa = sum(self.real_rows(n, run, L) for _, n in run.awrites)
            ru = sum(self.real_rows(n, run, L) for _, n in run.ureads)
            ra = sum(self.real_rows(n, run, L) for _, n in run.areads)
            cycles = program_cycles(run.program, config) if compute is None else compute[i]
            out.append(RunTiming(run.half, wu * row_u + wa * row_a, cycles, ru * row_u + ra * row_a))
        return out

    def timeline(self, config: FettaConfig, compute: Sequence[int] | None = None) -> Timeline:
        """End-to-end timing of the program, DRAM transfers included (:mod:`gen.design.timing`)."""
        return timeline(self.run_timings(config, compute), dram_bytes_per_cycle(config))

    @staticmethod
    def _cols(full: np.ndarray, run: VecRun) -> slice:
        return slice(0, 1) if full.shape[0] == 1 else slice(run.c0, run.c1)

    @classmethod
    def slab(cls, full: np.ndarray, run: VecRun) -> np.ndarray:
        """The rows of ``run`` of a packed tensor, as stored: ``[columns * size, lanes]``."""
        return full[cls._cols(full, run), run.first:run.first + run.size].reshape(-1, full.shape[-1])

    @classmethod
    def place(cls, full: np.ndarray, run: VecRun, rows: np.ndarray) -> None:
        """Store ``rows`` (as :meth:`slab` gives them) into the packed tensor ``full``."""
        part = full[cls._cols(full, run), run.first:run.first + run.size]
        part[...] = np.asarray(rows).reshape(part.shape)


class Emit:
    """Instruction helpers; every count of rows is a whole number of the vector unit's and the banks'
    chunks. ``one``: the unified row of :data:`ONE`."""

    def __init__(self, geo: Geometry, one: int):
        self.geo, self.one = geo, one
        self.ins: list[Instr] = []

    def load(self, dst: int, src: int, rows: int, stride: int = 1) -> None:
        """Accumulation rows ``dst..`` <- unified rows ``src..`` (``stride`` 0: one row everywhere)."""
        self.ins.append(load(src=src, dst=dst, chunks=rows // self.geo.banks, src_stride=stride))

    def store(self, dst: int, src: int, rows: int) -> None:
        """Unified rows ``dst..`` <- accumulation rows ``src..`` rounded to bfloat16."""
        self.ins.append(store(src=src, dst=dst, chunks=rows // self.geo.banks))

    def vec(self, op: VecOp, y: int, x: int, rows: int, *, scalar: float = 1.0, wb: int | None = None,
            x_stride: int = 1) -> None:
        self.ins.append(vec(op=op, chunks=rows // self.geo.vec_rows, x=x, y=y, x_stride=x_stride,
                            scalar=scalar_bits(scalar), wb=wb is not None, w_base=wb or 0))

    def split(self, acc: int, hi: int, lo: int, rows: int) -> None:
        """``hi = bf16(acc)``, ``lo = bf16(acc - hi)`` (``acc - hi`` is exact; ``acc`` keeps it): an
        FP32 value as two bfloat16 operands, to 16 significant bits."""
        self.store(hi, acc, rows)
        self.vec(VecOp.AXPY, acc, hi, rows, scalar=-1.0, wb=lo)


def cut(program: list[Instr], depth: int) -> list[list[Instr]]:
    """``program`` as runs of at most ``depth`` instructions, each ending in HALT."""
    step = depth - 1
    return [program[i:i + step] + [halt()] for i in range(0, max(1, len(program)), step)]


def lane_ops(program: list[Instr], geo: Geometry) -> int:
    """Elements the ``VEC`` instructions of ``program`` combine."""
    return sum(i.K * geo.vec_rows * geo.lanes for i in program if i.opcode == Opcode.VEC)


def _sigmoid(e: Emit, n: int, A: int, B: int, X: int, U1: int, U2: int, V: int | None = None) -> None:
    """``B = s = sigmoid(2c v)``, ``v = x (1 + a x^2)`` (FP32) and ``U1 = bf16(s)`` over ``n`` rows;
    ``V = bf16(v)`` when given; uses ``A`` and ``U2``."""
    V = U1 if V is None else V
    e.load(A, X, n)
    e.vec(VecOp.MUL, A, X, n, wb=U1)                        # x^2 (exact), U1 = bf16(x^2)
    e.load(B, e.one, n, stride=0)
    e.vec(VecOp.AXPY, B, U1, n, scalar=_A, wb=U2)           # 1 + a x^2
    e.load(A, X, n)
    e.vec(VecOp.MUL, A, U2, n, wb=V)                        # v = x (1 + a x^2)
    e.vec(VecOp.EXP, B, V, n, scalar=-_C2)                  # exp(-2c v)
    e.vec(VecOp.ADD, B, e.one, n, wb=U2, x_stride=0)        # 1 + exp(-2c v)
    e.vec(VecOp.RECIP, B, U2, n, wb=U1)                     # s


def _gelu(e: Emit, n: int, u: dict[str, int], a: dict[str, int]) -> None:
    _sigmoid(e, n, a["_a0"], a["_a1"], u["x"], u["_u1"], u["_u2"])
    e.vec(VecOp.MUL, a["_a1"], u["x"], n, wb=u["out"])      # s x, rounded once


def _gelu_bwd(e: Emit, n: int, u: dict[str, int], a: dict[str, int]) -> None:
    """``1 - s = sigmoid(-2c v)`` by its own ``EXP`` and ``RECIP``: no cancellation where ``s`` nears
    1, and no ``0 * inf`` where ``exp(-2c v)`` overflows."""
    A, B, C = a["_a0"], a["_a1"], a["_a2"]
    X, U1, U2, U3 = u["x"], u["_u1"], u["_u2"], u["_u3"]
    _sigmoid(e, n, A, B, X, U1, U2, V=U3)
    e.vec(VecOp.EXP, C, U3, n, scalar=_C2)                  # exp(2c v)
    e.vec(VecOp.ADD, C, e.one, n, wb=U2, x_stride=0)
    e.vec(VecOp.RECIP, C, U2, n)                            # 1 - s
    e.vec(VecOp.MUL, C, U1, n)                              # s (1 - s)
    e.load(A, X, n)
    e.vec(VecOp.MUL, A, X, n, wb=U2)                        # x^2
    e.load(A, e.one, n, stride=0)
    e.vec(VecOp.AXPY, A, U2, n, scalar=3 * _A, wb=U2)       # 1 + 3a x^2
    e.load(A, X, n)
    e.vec(VecOp.MUL, A, U2, n, wb=U2)                       # x (1 + 3a x^2)
    e.vec(VecOp.MUL, C, U2, n, wb=U3)                       # s (1 - s) x (1 + 3a x^2)
    e.vec(VecOp.AXPY, B, U3, n, scalar=_C2)                 # d = s + 2c s (1 - s) x (1 + 3a x^2)
    e.vec(VecOp.MUL, B, u["dy"], n, wb=u["out"])            # dy d, rounded once


@dataclass(frozen=True)
class _Recipe:
    """An operation: its bfloat16 and FP32 inputs, output (``out``: unified; ``y``: the accumulation
    rows of ``y``), scratch regions (unified, accumulation) and the emitter of one piece."""

    u_in: tuple[str, ...]
    a_in: tuple[str, ...]
    out: str
    scratch: tuple[int, int]
    emit: Callable


def _add(k: int) -> _Recipe:
    def emit(e: Emit, n, u, a):
        for i in range(k):
            e.vec(VecOp.ADD, a["y"], u[f"x{i}"], n)
    return _Recipe(tuple(f"x{i}" for i in range(k)), ("y",), "y", (0, 0), emit)


def _sgd(lr: float) -> _Recipe:
    def emit(e: Emit, n, u, a):
        e.vec(VecOp.AXPY, a["y"], u["x"], n, scalar=-lr)
    return _Recipe(("x",), ("y",), "y", (0, 0), emit)


#: the elementwise operations (``add`` takes ``y`` and ``x0 .. x{k-1}``; ``sgd``: ``y``, ``x``)
OPS = {"add": "y + x0 + ... (FP32)", "sgd": "y + bf16(-lr) x (FP32)", "gelu": "gelu(x) (bfloat16)",
       "gelu_bwd": "dy * gelu'(x) (bfloat16)"}


def _recipe(op: str, terms: int, lr: float) -> _Recipe:
    if op == "add":
        return _add(terms)
    if op == "sgd":
        return _sgd(lr)
    if op == "gelu":
        return _Recipe(("x",), (), "out", (2, 2), _gelu)
    if op == "gelu_bwd":
        return _Recipe(("x", "dy"), (), "out", (3, 3), _gelu_bwd)
    raise CompileError(f"unknown vector operation {op!r} (known: {', '.join(OPS)})", field="op")


def check_vector_unit(geo: Geometry) -> int:
    """The rows of a chunk every vector program uses (a multiple of the vector unit's rows and of the banks)."""
    if geo.vec_rows == 0:
        raise CompileError("the vector unit needs vector_lanes = lanes x a power of two", field="vector_lanes")
    return max(geo.vec_rows, geo.banks)


def compile_vec(op: str, shape, config: FettaConfig, *, terms: int = 1, lr: float = 0.0,
                piece_rows: int = 2048) -> VecProgram:
    """``op`` (:data:`OPS`) over tensors of ``shape`` (``terms``: the ``x`` operands of ``add``; ``lr``:
    the learning rate of ``sgd``), in pieces of at most ``piece_rows`` rows."""
    geo = Geometry.of(config)
    unit = check_vector_unit(geo)
    shape = tuple(int(d) for d in np.atleast_1d(shape)) if not isinstance(shape, int) else (shape,)
    n = int(np.prod(shape))
    if n <= 0:
        raise CompileError(f"needs at least one element, got shape {shape}", field="shape")
    r = _recipe(op, terms, lr)
    rows = ceil_to(-(-n // geo.lanes), unit)
    # unified: the regions of a piece and the ONE row (at the end of the half); accumulation: one
    # set of regions per half, so a piece's transfers may overlap the other half's compute
    u_scratch, a_scratch = r.scratch
    u_regions = len(r.u_in) + u_scratch + (r.out == "out")
    a_regions = len(r.a_in) + a_scratch
    cap = min(piece_rows, (geo.unified_half_rows - unit) // u_regions,
              geo.accum_rows // (2 * a_regions) if a_regions else piece_rows) // unit * unit
    if cap < unit:
        raise CompileError(f"the memories hold no piece of {unit} rows for {op}", field="op")
    runs = []
    ops = 0
    one = geo.unified_half_rows - unit
    for p, first in enumerate(range(0, rows, cap)):
        size = min(cap, rows - first)
        half = p % 2
        names = list(r.u_in) + [f"_u{i + 1}" for i in range(u_scratch)] + (["out"] if r.out == "out" else [])
        u = {name: i * cap for i, name in enumerate(names)}
        a_base = half * (geo.accum_rows // 2)
        a = {name: a_base + i * cap for i, name in enumerate(list(r.a_in) + [f"_a{i}" for i in range(a_scratch)])}
        e = Emit(geo, one)
        r.emit(e, size, u, a)
        ops += lane_ops(e.ins, geo)
        parts = [VecRun(half, first, size, prog) for prog in cut(e.ins, geo.imem_depth)]
        parts[0].uwrites = [(u[k], k) for k in r.u_in] + [(one, ONE)]
        parts[0].awrites = [(a[k], k) for k in r.a_in]
        if r.out == "out":
            parts[-1].ureads = [(u["out"], "out")]
        else:
            parts[-1].areads = [(a[r.out], "out")]
        runs += parts
    return VecProgram(op, shape, 1, rows, runs, {**{k: "u" for k in r.u_in}, **{k: "a" for k in r.a_in}},
                      {"out": "u" if r.out == "out" else "a"}, ops)
