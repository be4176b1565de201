"""Row-wise operations of a training step on the vector unit: softmax, layer norm and their backward (issue 19).

**Layout.** An operand ``[R, C]`` is reduced along ``C`` (:class:`gen.compiler.vecops.VecProgram`
with ``C`` columns): element ``(r, c)`` is lane ``r % lanes`` of row ``r // lanes`` of column ``c``,
so the ``H`` rows of one column of a piece hold ``H * lanes`` independent rows of the operand, and a
reduction along ``C`` adds rows of different columns, lane by lane. Work runs in *blocks* of ``k``
columns (``P = k H`` rows, ``k`` a power of two dividing ``C``):

* a **reduction** adds (or takes the maximum of) block after block into ``k`` partial rows per row
  (FP32, accumulation unit), then a tree of ``log2 k`` levels combines them: each level stores the
  upper half to the unified memory as two bfloat16 halves (:meth:`~gen.compiler.vecops.Emit.split`:
  ``hi = bf16(p)``, ``lo = bf16(p - hi)``, 16 significant bits) and adds both to the lower half;
* a per-row **statistic** (``H`` rows, FP32) is split the same way and **broadcast** to ``P`` rows
  by doubling copies (``SCALE`` by 1, exact), so every block reads it with stride 1.

**Folding.** An operand with fewer rows than the chunk (layer norm's 32 rows are 8 row blocks of a
16-row chunk) folds ``f`` groups of its columns into one column's rows (group ``g`` in rows ``g H / f``
on; :attr:`VecProgram.fold`): elementwise work covers the chunk with no padding, and after each
reduction a butterfly of ``log2 f`` steps combines the groups' partial sums (as pairs) and leaves the
total in every group (:meth:`_Rows.allreduce`), so the statistics broadcast as before.

**Pieces.** Row pieces (``H`` rows a column, a multiple of the vector unit's chunk) alternate between
the ping-pong halves. Softmax keeps all ``C`` columns of a piece in one half. Layer norm runs in two
passes over *column pieces* when its columns do not fit one half (``C = 768`` with its scratch
regions): pass 1 runs accumulate the sums in the accumulation unit, which keeps them from run to
run, the first pass 2 run turns them into statistics, every pass 2 run writes its columns again and
computes them. A folded operand (few rows) can also run in *row pieces*, each folded on its own by
more (:attr:`VecProgram.row_pieces`; the ATIS model's 32 rows: 2-8 pieces of 16-4 rows, each a
column's 16 rows with 4-16 groups of columns): each piece holds all its columns in one half and runs
one pass, while the other piece's transfers overlap it (the ATIS backward with three addends: 29,731
cycles in 4 pieces against 33,513 in two passes over column pieces). Of the pieces and blocks that
fit, the compiler keeps the fastest end to end (:meth:`VecProgram.timeline`, the one timing rule). A
program longer than the instruction memory runs as several runs on the same half
(:func:`gen.compiler.vecops.cut`).

**Precision** (``u = 2**-9``, half of bfloat16's unit roundoff ``2**-8``; measured in
``docs/training.md``): the ``x`` operand of every ``VEC`` is bfloat16, so FP32 values travel as hi / lo
pairs where a rounding would matter: the scaled scores and ``exp``'s argument, the statistics
(maximum: exact; sums, ``1 / sum``).

* ``softmax(s)`` along ``C`` of ``scale * s``: ``z = scale (s - max)`` in FP32 (``scale`` as
  ``bf16(scale) + bf16(scale - bf16(scale))``), ``e = exp(z_hi) (1 + z_lo + z_lo^2 / 2)``, the row sum of ``e``
  (as hi / lo pairs), ``f = 1 / sum`` by ``RECIP`` of the sum's high part and one Newton-like
  correction ``f = r (1 - r sum_lo)``, ``p = e f`` (``f`` as a pair), rounded once to bfloat16.
* ``layer_norm(x + x0 + ..)`` (``x`` FP32 as a hi / lo pair, ``terms`` bfloat16 addends: the residual
  sum, fused; PyTorch's ``eps``, no affine parameters): two passes over the columns; the first sums ``x`` (exactly, as pairs) and ``x * bf16(x)`` (each rounded
  once to bfloat16: unbiased, ``u / sqrt(C)`` relative on the sum), then ``mean``, ``var = E[x^2] -
  mean^2`` (``mean^2`` to 16 bits), ``rstd = rsqrt(var + eps)`` by ``RSQRT`` of the high part and the
  correction ``r - r^3 var_lo / 2``; the second ``y = (x - mean) rstd`` in FP32 with ``mean`` and
  ``rstd`` as pairs; result FP32 as a hi / lo pair (16 bits), and ``rstd`` (a pair) for the backward.
  ``var`` loses accuracy where ``mean^2 >> var`` (a cancellation the host's two-pass formula avoids).
* ``layer_norm_bwd(y, dy + x0 + .., rstd)`` (``y`` the forward's output, ``dy`` FP32 as a pair, the
  addends the other gradients that meet at the output): ``dx = rstd
  (dy - mean(dy) - y mean(dy y))``: the first pass sums ``dy`` (pairs) and ``y * dy_hi`` (rounded once
  each), the second computes ``dy rstd - c1 - y c2`` (``c1 = rstd mean(dy)``, ``c2 = rstd mean(dy
  y)``, all pairs) in FP32; result FP32 as a pair.
* ``softmax_bwd(p, dp)``: ``ds = scale * p * (dp - sum_c dp p)`` with the products ``dp p`` exact
  and summed as pairs, the sum subtracted as a pair, one rounding of ``(dp - sum) p`` in FP32,
  ``scale`` applied as a pair; result bfloat16.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import ml_dtypes
import numpy as np

from gen.compiler.layout import ceil_to
from gen.compiler.program import CompileError
from gen.compiler.vecops import ONE, Emit, VecProgram, VecRun, check_vector_unit, cut, lane_ops, scalar_bits
from gen.design.config import FettaConfig
from gen.design.isa import Geometry, VecOp

__all__ = ["ROW_OPS", "compile_rows"]

#: the row-wise operations
ROW_OPS = {"softmax": "softmax(scale * s) along the last axis (bfloat16)",
           "softmax_bwd": "scale * p * (dp - sum(dp * p)) along the last axis (bfloat16)",
           "layer_norm": "(x - mean) / sqrt(var + eps) along the last axis (FP32 pairs in and out; rstd)",
           "layer_norm_bwd": "the gradient of layer_norm from its output, dy and rstd (FP32 pairs)"}

#: layer norm's variance offset (PyTorch's default)
EPS = 1e-5


def _pair(value: float) -> tuple[float, float]:
    """``value`` as two bfloat16 scalars whose sum is ``value`` to 16 significant bits."""
    hi = float(np.uint16(scalar_bits(value)).view(ml_dtypes.bfloat16))
    return hi, value - hi


class _Rows(Emit):
    """:class:`Emit` over a piece of ``C`` columns of ``H`` rows, in blocks of ``k`` columns."""

    def __init__(self, geo: Geometry, one: int, C: int, H: int, k: int, fold: int = 1):
        super().__init__(geo, one)
        self.C, self.H, self.k, self.P, self.fold = C, H, k, k * H, fold
        self.nb = C // k

    def blk(self, base: int, b: int) -> int:
        return base + b * self.P

    def reduce(self, part: int, hi: int, lo: int, src: Callable[[int], tuple[int, ...]], op: VecOp) -> None:
        """``part[0:H)`` (FP32) = the reduction by ``op`` (ADD or MAX) of every column; the columns of
        block ``b`` are the unified rows ``src(b)`` (one region, or two: a value's hi / lo pair)."""
        for b in range(self.nb):
            for i, x in enumerate(src(b)):
                if b == 0 and i == 0:
                    self.load(part, x, self.P)
                else:
                    self.vec(op, part, x, self.P)
        self.reduce_tree(part, hi, lo, op)

    def reduce_tree(self, part: int, hi: int, lo: int, op: VecOp) -> None:
        """Combine the ``k`` partial rows of every row (``part``, ``P`` rows) into ``part[0:H)``
        (``hi``, ``lo``: ``P / 2`` unified rows of scratch each)."""
        n = self.k
        while n > 1:
            h = n // 2
            rows, upper = h * self.H, part + h * self.H
            if op == VecOp.MAX:
                self.store(hi, upper, rows)             # exact: maxima of bfloat16 values
                self.vec(VecOp.MAX, part, hi, rows)
            else:
                self.split(upper, hi, lo, rows)
                self.vec(VecOp.ADD, part, hi, rows)
                self.vec(VecOp.ADD, part, lo, rows)
            n = h

    def allreduce(self, acc: int, u: dict, scratch: int, op: VecOp) -> None:
        """Folded columns (:attr:`VecProgram.fold`): ``acc[0:H)`` (one FP32 row per row of the folded
        column) becomes the reduction by ``op`` over the ``fold`` groups, in every group: a butterfly
        of ``log2 fold`` steps, each adding the rows ``d`` further on (cyclically; ``d = H / 2 .. H /
        fold``) as a pair (exact for MAX). The shifted rows come from two copies in a row at ``u["ft"]``
        / ``u["ftl"]`` (``3 H`` unified rows each); ``scratch``: ``H`` accumulation rows."""
        H, d = self.H, self.H // 2
        while self.fold > 1 and d >= H // self.fold:
            t, tl = u["ft"] + d, u["ftl"] + d
            if op == VecOp.MAX:
                self.store(t, acc, H)
                self.store(t + H, acc, H)
                self.vec(VecOp.MAX, acc, t + d, H)
            else:
                self.split(acc, t, tl, H)
                for x in (t, tl):
                    self.vec(VecOp.SCALE, scratch, x, H, wb=x + H)
                self.load(acc, t, H)
                for x in (tl, t + d, tl + d):
                    self.vec(VecOp.ADD, acc, x, H)
            d //= 2

    def bcast(self, dst: int, src: int, scratch: int) -> None:
        """Unified rows ``dst[0:P)`` = ``k`` copies of the ``H`` rows at ``src`` (``scratch``: ``P / 2``
        accumulation rows)."""
        self.vec(VecOp.SCALE, scratch, src, self.H, wb=dst)
        n = 1
        while n < self.k:
            m = min(n, self.k - n)
            self.vec(VecOp.SCALE, scratch, dst, m * self.H, wb=dst + n * self.H)
            n += m

    def stat_parts(self, acc: int, stat: list[int], bcast: list[int], scratch: int) -> None:
        """The FP32 statistic ``acc`` (``H`` rows) as ``len(stat)`` bfloat16 parts (``hi``, ``bf16(acc - hi)``,
        ...: 8 significant bits each) at ``stat``, broadcast to ``P`` rows each at ``bcast``."""
        for i, at in enumerate(stat):
            if i + 1 < len(stat):
                self.store(at, acc, self.H)
                self.vec(VecOp.AXPY, acc, at, self.H, scalar=-1.0, wb=stat[i + 1] if i + 2 == len(stat) else None)
        for at, to in zip(stat, bcast):
            self.bcast(to, at, scratch)


@dataclass(frozen=True)
class _Regions:
    """The regions of a row-wise operation, by name: unified ``full`` (``C H`` rows a piece: inputs
    and kept tensors), ``block`` (``P``), ``stat`` (``H``); accumulation ``ablock`` (``P``) and ``astat``
    (``H``)."""

    full: tuple[str, ...]
    block: tuple[str, ...]
    stat: tuple[str, ...]
    ablock: tuple[str, ...]
    astat: tuple[str, ...]


@dataclass(frozen=True)
class _Spec(_Regions):
    """A row-wise operation with every column of a piece in one half: ``inputs``, ``outputs`` (each
    output -> the ``full`` region it overwrites), ``emit`` (the program of a piece)."""

    inputs: tuple[str, ...]
    outputs: dict[str, str]
    emit: Callable


def _softmax(e: _Rows, u: dict, a: dict, scale: float) -> None:
    s1, s2 = _pair(scale)
    P, H = e.P, e.H
    A, B, part = a["a"], a["b"], a["part"]
    e.reduce(part, u["h"], u["l"], lambda b: (e.blk(u["s"], b),), VecOp.MAX)
    e.allreduce(part, u, A, VecOp.MAX)
    e.store(u["st"], part, H)                                   # max (exact)
    e.bcast(u["mb"], u["st"], A)
    for b in range(e.nb):
        S = e.blk(u["s"], b)
        e.vec(VecOp.SCALE, A, S, P, scalar=s1)                  # scale s (s1 s is exact)
        if s2:
            e.vec(VecOp.AXPY, A, S, P, scalar=s2)
        e.vec(VecOp.AXPY, A, u["mb"], P, scalar=-s1)            # z = scale (s - max)
        if s2:
            e.vec(VecOp.AXPY, A, u["mb"], P, scalar=-s2)
        e.split(A, u["h"], u["l"], P)                           # z = h + l
        e.vec(VecOp.EXP, A, u["h"], P)                          # exp(h)
        e.vec(VecOp.EXP, B, u["h"], P)
        e.vec(VecOp.MUL, B, u["l"], P, wb=u["t"])               # exp(h) l
        e.vec(VecOp.ADD, A, u["t"], P)
        e.vec(VecOp.MUL, B, u["l"], P, wb=u["t"])               # exp(h) l^2
        e.vec(VecOp.AXPY, A, u["t"], P, scalar=0.5)             # e = exp(h) (1 + l + l^2 / 2)
        e.split(A, e.blk(u["eh"], b), e.blk(u["el"], b), P)
    e.reduce(part, u["h"], u["l"], lambda b: (e.blk(u["eh"], b), e.blk(u["el"], b)), VecOp.ADD)
    e.allreduce(part, u, A, VecOp.ADD)
    R, Q = a["r"], a["q"]
    e.split(part, u["th"], u["tl"], H)                          # sum = th + tl
    e.vec(VecOp.RECIP, R, u["th"], H)                           # r = 1 / th
    e.vec(VecOp.RECIP, Q, u["th"], H, wb=u["rh"])
    e.vec(VecOp.MUL, Q, u["rh"], H)                             # r^2
    e.vec(VecOp.MUL, Q, u["tl"], H, wb=u["qc"])                 # r^2 tl
    e.vec(VecOp.AXPY, R, u["qc"], H, scalar=-1.0)               # f = r - r^2 tl = 1 / sum
    e.stat_parts(R, [u["fh"], u["fl"]], [u["fhb"], u["flb"]], A)
    for b in range(e.nb):
        EH, EL = e.blk(u["eh"], b), e.blk(u["el"], b)
        e.load(A, EH, P)
        e.vec(VecOp.ADD, A, EL, P)                              # e
        e.vec(VecOp.MUL, A, u["fhb"], P)                        # e fh
        e.load(B, EH, P)
        e.vec(VecOp.MUL, B, u["flb"], P, wb=u["t"])             # e fl
        e.vec(VecOp.ADD, A, u["t"], P, wb=e.blk(u["s"], b))     # p, rounded once (in place of s)


def _softmax_bwd(e: _Rows, u: dict, a: dict, scale: float) -> None:
    s1, s2 = _pair(scale)
    P, H = e.P, e.H
    A, B, part = a["a"], a["b"], a["part"]
    for b in range(e.nb):
        e.load(A, e.blk(u["dp"], b), P)
        e.vec(VecOp.MUL, A, e.blk(u["p"], b), P)                # dp p (exact)
        e.split(A, e.blk(u["qh"], b), e.blk(u["ql"], b), P)
    e.reduce(part, u["h"], u["l"], lambda b: (e.blk(u["qh"], b), e.blk(u["ql"], b)), VecOp.ADD)
    e.allreduce(part, u, A, VecOp.ADD)
    bparts = [u["sb0"], u["sb1"]]
    e.stat_parts(part, [u["s0"], u["s1"]], bparts, A)
    for b in range(e.nb):
        e.load(A, e.blk(u["dp"], b), P)
        for x in bparts:
            e.vec(VecOp.AXPY, A, x, P, scalar=-1.0)             # dp - sum
        e.vec(VecOp.MUL, A, e.blk(u["p"], b), P)                # (dp - sum) p, rounded once
        e.split(A, u["h"], u["l"], P)
        e.vec(VecOp.SCALE, B, u["h"], P, scalar=s1)             # scale (h + l)
        if s2:
            e.vec(VecOp.AXPY, B, u["h"], P, scalar=s2)
        e.vec(VecOp.AXPY, B, u["l"], P, scalar=s1, wb=e.blk(u["qh"], b))   # in place of qh


_SPECS = {
    "softmax": _Spec(full=("s", "eh", "el"), block=("h", "l", "t", "mb", "fhb", "flb"),
                     stat=("st", "th", "tl", "rh", "qc", "fh", "fl"), ablock=("part", "a", "b"), astat=("r", "q"),
                     inputs=("s",), outputs={"out": "s"}, emit=_softmax),
    "softmax_bwd": _Spec(full=("p", "dp", "qh", "ql"), block=("h", "l", "sb0", "sb1"), stat=("s0", "s1"),
                         ablock=("part", "a", "b"), astat=(), inputs=("p", "dp"), outputs={"out": "qh"},
                         emit=_softmax_bwd),
}


def _fit(geo: Geometry, spec: _Spec, C: int, blocks: int, unit: int, top: int | None = None) -> tuple[int, int]:
    """The largest piece (``H`` rows a column, a multiple of ``unit``, at most ``top``) and block (``k``
    columns) that fit."""
    ks = [k for k in (1 << i for i in range(C.bit_length())) if C % k == 0][::-1]
    for H in range(min(blocks, top or blocks), 0, -unit):
        pieces = -(-blocks // H)
        a_cap = geo.accum_rows // (2 if pieces > 1 else 1)
        for k in ks:
            P = k * H
            u_rows = len(spec.full) * C * H + len(spec.block) * P + _stat_rows(spec, H) + unit
            a_rows = len(spec.ablock) * P + len(spec.astat) * H
            if u_rows <= geo.unified_half_rows and a_rows <= a_cap:
                return H, k
    raise CompileError(f"no piece of {unit} rows a column fits the memories for {C} columns", field="shape")


def compile_rows(op: str, shape, config: FettaConfig, *, scale: float = 1.0, terms: int = 0,
                 row_pieces: int | None = None) -> VecProgram:
    """``op`` (:data:`ROW_OPS`) along the last axis of tensors of ``shape``; ``scale`` of the softmax;
    ``terms``: bfloat16 addends ``x0 ..`` the layer norm operations add to their FP32 input first.
    ``row_pieces`` (layer norm and its backward on folded operands, module docstring "Pieces"):
    ``None`` keeps the fastest of one piece and :data:`ROW_PIECES`, ``1`` one piece, ``P`` exactly ``P``."""
    if op not in ROW_OPS:
        raise CompileError(f"unknown row operation {op!r} (known: {', '.join(ROW_OPS)})", field="op")
    geo = Geometry.of(config)
    unit = check_vector_unit(geo)
    shape = tuple(int(d) for d in shape)
    C = shape[-1]
    R = int(np.prod(shape[:-1]))
    if C <= 0 or R <= 0:
        raise CompileError(f"needs a non-empty tensor, got shape {shape}", field="shape")
    fold = _fold(-(-R // geo.lanes), C, unit)
    if op in _TWO_PASS:
        return _compile_two_pass(op, _two_pass(op, terms), shape, config, unit, terms, fold, row_pieces)
    if row_pieces not in (None, 1):
        raise CompileError(f"{op} takes no row pieces", field="row_pieces")
    if terms:
        raise CompileError(f"{op} takes no addends", field="terms")
    spec = _SPECS[op]
    C //= fold
    rows = unit if fold > 1 else ceil_to(-(-R // geo.lanes), unit)
    # the largest piece that fits, and pieces of a half and a quarter of it: more pieces overlap the
    # transfers of one with the compute of another (the ATIS softmax, 384 rows of 32: 2 pieces)
    H = _fit(geo, spec, C, rows, unit)[0]
    tops = dict.fromkeys([H] + [ceil_to(-(-H // n), unit) for n in (2, 4)])
    progs = [_build_one_pass(op, spec, shape, geo, unit, fold, C, rows, *_fit(geo, spec, C, rows, unit, top), scale)
             for top in tops]
    return min(progs, key=lambda p: (p.timeline(config).cycles, len(p.runs)))


def _build_one_pass(op: str, spec: _Spec, shape: tuple[int, ...], geo: Geometry, unit: int, fold: int, C: int,
                    rows: int, H: int, k: int, scale: float) -> VecProgram:
    """A one-pass row-wise operation (softmax, its backward) in pieces of ``H`` rows a column, blocks of
    ``k`` columns."""
    blocks = ceil_to(rows, H)
    one = geo.unified_half_rows - unit
    runs: list[VecRun] = []
    ops = 0
    for p, first in enumerate(range(0, blocks, H)):
        half = p % 2
        u = _regions(spec, ((spec.full, C * H), (spec.block, k * H), (spec.stat, H), (_FOLD_SCRATCH, 3 * H)))
        a = _regions(spec, ((spec.ablock, k * H), (spec.astat, H)), half * (geo.accum_rows // 2) if blocks > H else 0)
        e = _Rows(geo, one, C, H, k, fold)
        spec.emit(e, u, a, scale)
        ops += lane_ops(e.ins, geo)
        parts = [VecRun(half, first, H, prog) for prog in cut(e.ins, geo.imem_depth)]
        parts[0].uwrites = [(u[name], name) for name in spec.inputs] + [(one, ONE)]
        parts[-1].ureads = [(u[region], name) for name, region in spec.outputs.items()]
        runs += parts
    return VecProgram(op, shape, C, blocks, runs, {name: "u" for name in spec.inputs},
                      {name: "u" for name in spec.outputs}, ops, fold=fold)


#: the unified scratch of :meth:`_Rows.allreduce` (``3 H`` rows each)
_FOLD_SCRATCH = ("ft", "ftl")


def _stat_rows(spec: _Regions, H: int) -> int:
    """Unified rows of the ``H``-row regions of a piece: the statistics and the folding scratch."""
    return (len(spec.stat) + 3 * len(_FOLD_SCRATCH)) * H


def _fold(rows: int, C: int, unit: int) -> int:
    """How many groups of columns a column's ``unit`` rows take when the operand has fewer ``rows``
    (a power of two dividing ``C``; 1: no folding)."""
    f = 1
    while rows <= unit // (2 * f) and C % (2 * f) == 0:
        f *= 2
    return f


# --- layer norm: two passes over the columns -----------------------------------------------------
@dataclass(frozen=True)
class _TwoPass(_Regions):
    """A row-wise operation in two passes over the columns (a run may hold part of them): ``pass1``
    reduces block after block into the accumulation unit, ``stats`` (once, after the last block)
    turns the sums into per-row FP32 statistics and keeps them as bfloat16 parts in the
    accumulation unit, ``prologue`` (every run of the second pass) broadcasts the parts on its half,
    ``pass2`` computes each block's result in place of its inputs.

    ``in1`` / ``in2``: the ``full`` inputs each pass reads; ``outputs``: each output -> the region it
    overwrites; ``stat_in`` / ``stat_out``: per-row tensors (:attr:`VecProgram.stats`) in ``stat``
    regions of the same names."""

    in1: tuple[str, ...]
    in2: tuple[str, ...]
    outputs: dict[str, str]
    stat_in: tuple[str, ...]
    stat_out: tuple[str, ...]
    pass1: Callable
    stats: Callable
    prologue: Callable
    pass2: Callable


def _sum_first(e: _Rows, acc: int, x: int, first: bool) -> None:
    if first:
        e.load(acc, x, e.P)
    else:
        e.vec(VecOp.ADD, acc, x, e.P)


def _mean(e: _Rows, out: int, part: int, hi: int, lo: int, C: int) -> None:
    """``out`` (FP32, ``H`` rows) = the reduced sums ``part`` / ``C`` (``1 / C`` as a pair)."""
    c1, c2 = _pair(1.0 / C)
    e.split(part, hi, lo, e.H)
    e.vec(VecOp.SCALE, out, hi, e.H, scalar=c1)
    if c2:
        e.vec(VecOp.AXPY, out, hi, e.H, scalar=c2)
    e.vec(VecOp.AXPY, out, lo, e.H, scalar=c1)


def _keep(e: _Rows, parts: list[tuple[int, int, int, int]]) -> None:
    """Split each FP32 statistic ``acc`` into bfloat16 parts ``hi``, ``lo`` and keep them widened in
    the accumulation rows ``hi_a``, ``lo_a`` (``(acc, hi, lo, hi_a, lo_a)`` without ``acc`` changing
    anything else)."""
    for acc, hi, lo, keep in parts:
        e.split(acc, hi, lo, e.H)
        e.load(keep, hi, e.H)
        e.load(keep + e.H, lo, e.H)


def _restore(e: _Rows, parts: list[tuple[int, int, int]], scratch: int) -> None:
    """Broadcast kept parts: ``(keep, region, bcast)``: the two parts kept at ``keep`` to the stat
    regions ``region`` (hi) and ``region + H`` (lo), broadcast to ``bcast`` and ``bcast + P``."""
    for keep, region, bcast in parts:
        for i in range(2):
            e.store(region + i * e.H, keep + i * e.H, e.H)
            e.bcast(bcast + i * e.P, region + i * e.H, scratch)


def _value(e: _Rows, acc: int, u, b: int, hi: str, lo: str) -> None:
    """``acc`` = block ``b`` of the FP32 value ``hi + lo + x0 + ...`` (the pair and the ``terms``
    bfloat16 addends of the operation, :func:`compile_rows`)."""
    e.load(acc, e.blk(u[hi], b), e.P)
    for name in (lo, *u["_terms"]):
        e.vec(VecOp.ADD, acc, e.blk(u[name], b), e.P)


def _sum_parts(e: _Rows, acc: int, u, b: int, hi: str, lo: str, first: bool) -> None:
    """``acc`` (the partial sums) += every part of block ``b`` of ``hi + lo + x0 + ..``, each exactly."""
    for i, name in enumerate((hi, lo, *u["_terms"])):
        if i == 0:
            _sum_first(e, acc, e.blk(u[name], b), first)
        else:
            e.vec(VecOp.ADD, acc, e.blk(u[name], b), e.P)


def _ln_pass1(e: _Rows, u, a, b: int, first: bool) -> None:
    _sum_parts(e, a["p1"], u, b, "xh", "xl", first)             # sum x
    _value(e, a["a"], u, b, "xh", "xl")
    if u["_terms"]:
        e.store(u["t"], a["a"], e.P)                            # bf16(x)
    e.vec(VecOp.MUL, a["a"], u["t"] if u["_terms"] else e.blk(u["xh"], b), e.P, wb=u["t"])   # x bf16(x)
    _sum_first(e, a["p2"], u["t"], first)


def _ln_stats(e: _Rows, u, a, C: int) -> None:
    H = e.H
    M, V, Q, R = a["m"], a["v"], a["q"], a["r"]
    for acc in (a["p1"], a["p2"]):
        e.reduce_tree(acc, u["h"], u["l"], VecOp.ADD)
        e.allreduce(acc, u, a["a"], VecOp.ADD)
    _mean(e, M, a["p1"], u["s0"], u["s1"], C)                   # mean
    _mean(e, V, a["p2"], u["s0"], u["s1"], C)                   # E[x^2]
    e.split(M, u["mh"], u["ml"], H)                             # mean = mh + ml
    e.load(Q, u["mh"], H)
    e.vec(VecOp.ADD, Q, u["ml"], H)
    e.vec(VecOp.MUL, Q, u["mh"], H)                             # mean mh
    e.load(R, u["mh"], H)
    e.vec(VecOp.ADD, R, u["ml"], H)
    e.vec(VecOp.MUL, R, u["ml"], H, wb=u["s0"])                 # mean ml
    e.vec(VecOp.ADD, Q, u["s0"], H)                             # mean^2
    e.split(Q, u["s0"], u["s1"], H)
    e.vec(VecOp.AXPY, V, u["s0"], H, scalar=-1.0)               # var = E[x^2] - mean^2
    e.vec(VecOp.AXPY, V, u["s1"], H, scalar=-1.0)
    e.vec(VecOp.AXPY, V, e.one, H, scalar=EPS, x_stride=0)      # var + eps
    e.split(V, u["s0"], u["s1"], H)                             # = s0 + s1
    e.vec(VecOp.RSQRT, R, u["s0"], H)                           # r = 1 / sqrt(s0)
    e.vec(VecOp.RSQRT, Q, u["s0"], H, wb=u["s2"])
    e.vec(VecOp.MUL, Q, u["s2"], H)
    e.vec(VecOp.MUL, Q, u["s2"], H)                             # r^3
    e.vec(VecOp.MUL, Q, u["s1"], H, wb=u["s2"])                 # r^3 s1
    e.vec(VecOp.AXPY, R, u["s2"], H, scalar=-0.5)               # rstd = r - r^3 s1 / 2
    e.load(M, u["mh"], H)
    e.vec(VecOp.ADD, M, u["ml"], H)
    _keep(e, [(M, u["mh"], u["ml"], a["km"]), (R, u["rsh"], u["rsl"], a["kr"])])


def _ln_prologue(e: _Rows, u, a) -> None:
    _restore(e, [(a["km"], u["mh"], u["mb"]), (a["kr"], u["rsh"], u["rb"])], a["a"])


def _xc(e: _Rows, acc: int, u, b: int) -> None:
    _value(e, acc, u, b, "xh", "xl")
    e.vec(VecOp.AXPY, acc, u["mb"], e.P, scalar=-1.0)
    e.vec(VecOp.AXPY, acc, u["mb"] + e.P, e.P, scalar=-1.0)     # x - mean


def _ln_pass2(e: _Rows, u, a, b: int) -> None:
    A, B = a["a"], a["b"]
    _xc(e, A, u, b)
    e.vec(VecOp.MUL, A, u["rb"], e.P)                           # (x - mean) rh
    _xc(e, B, u, b)
    e.vec(VecOp.MUL, B, u["rb"] + e.P, e.P, wb=u["t"])          # (x - mean) rl
    e.vec(VecOp.ADD, A, u["t"], e.P)
    e.split(A, e.blk(u["xh"], b), e.blk(u["xl"], b), e.P)       # y = yh + yl, in place


def _pair_in(e: _Rows, acc: int, hi: int, rows: int) -> None:
    """``acc`` = the pair at ``hi`` (``hi + rows``: the low part) in FP32."""
    e.load(acc, hi, rows)
    e.vec(VecOp.ADD, acc, hi + rows, rows)


def _lnb_pass1(e: _Rows, u, a, b: int, first: bool) -> None:
    _sum_parts(e, a["p1"], u, b, "dyh", "dyl", first)           # sum dy
    if u["_terms"]:
        _value(e, a["b"], u, b, "dyh", "dyl")
        e.store(u["t"], a["b"], e.P)                            # bf16(dy)
    e.load(a["a"], e.blk(u["yh"], b), e.P)
    e.vec(VecOp.ADD, a["a"], e.blk(u["yl"], b), e.P)
    e.vec(VecOp.MUL, a["a"], u["t"] if u["_terms"] else e.blk(u["dyh"], b), e.P, wb=u["t"])   # y bf16(dy)
    _sum_first(e, a["p2"], u["t"], first)


def _lnb_stats(e: _Rows, u, a, C: int) -> None:
    H = e.H
    for acc in (a["p1"], a["p2"]):
        e.reduce_tree(acc, u["h"], u["l"], VecOp.ADD)
        e.allreduce(acc, u, a["a"], VecOp.ADD)
    M1, M2, R, T = a["m"], a["v"], a["r"], a["q"]
    _mean(e, M1, a["p1"], u["s0"], u["s1"], C)                  # mean(dy)
    _mean(e, M2, a["p2"], u["s0"], u["s1"], C)                  # mean(dy y)
    for m, out in ((M1, a["c1"]), (M2, a["c2"])):               # c = rstd m, both pairs
        e.split(m, u["s0"], u["s1"], H)
        _pair_in(e, out, u["rsh"], H)
        e.vec(VecOp.MUL, out, u["s0"], H)
        _pair_in(e, T, u["rsh"], H)
        e.vec(VecOp.MUL, T, u["s1"], H, wb=u["s2"])
        e.vec(VecOp.ADD, out, u["s2"], H)
    _pair_in(e, R, u["rsh"], H)
    _keep(e, [(R, u["s0"], u["s1"], a["kr"]), (a["c1"], u["s0"], u["s1"], a["k1"]),
              (a["c2"], u["s0"], u["s1"], a["k2"])])


def _lnb_prologue(e: _Rows, u, a) -> None:
    _restore(e, [(a["kr"], u["s0"], u["rb"]), (a["k1"], u["s0"], u["c1b"]), (a["k2"], u["s0"], u["c2b"])], a["a"])


def _lnb_pass2(e: _Rows, u, a, b: int) -> None:
    YH, YL = e.blk(u["yh"], b), e.blk(u["yl"], b)
    A, B, P = a["a"], a["b"], e.P
    for acc, r in ((A, u["rb"]), (B, u["rb"] + P)):
        _value(e, acc, u, b, "dyh", "dyl")
        e.vec(VecOp.MUL, acc, r, P, wb=u["t"] if acc == B else None)
    e.vec(VecOp.ADD, A, u["t"], P)                              # dy rstd
    e.vec(VecOp.AXPY, A, u["c1b"], P, scalar=-1.0)
    e.vec(VecOp.AXPY, A, u["c1b"] + P, P, scalar=-1.0)          # - c1
    for c in (u["c2b"], u["c2b"] + P):
        e.load(B, YH, P)
        e.vec(VecOp.ADD, B, YL, P)
        e.vec(VecOp.MUL, B, c, P, wb=u["t"])
        e.vec(VecOp.AXPY, A, u["t"], P, scalar=-1.0)            # - y c2
    e.split(A, e.blk(u["dyh"], b), e.blk(u["dyl"], b), P)       # dx, in place of dy


def _terms(k: int) -> tuple[str, ...]:
    return tuple(f"x{i}" for i in range(k))


def _two_pass(op: str, k: int) -> _TwoPass:
    """The layer norm operations with ``k`` bfloat16 addends ``x0 ..`` to their FP32 input (the
    residual sum ``x + sublayer(x)``, or the gradients that meet at a tensor): fused, so the sum
    never goes to DRAM."""
    t = _terms(k)
    if op == "layer_norm":
        x = ("xh", "xl") + t
        return _TwoPass(full=x, block=("h", "l", "t", "mb", "mb+", "rb", "rb+"),
                        stat=("s0", "s1", "s2", "mh", "ml", "rsh", "rsl"), ablock=("p1", "p2", "a", "b"),
                        astat=("m", "v", "q", "r", "km", "km+", "kr", "kr+"), in1=x, in2=x,
                        outputs={"yh": "xh", "yl": "xl"}, stat_in=(), stat_out=("rsh", "rsl"),
                        pass1=_ln_pass1, stats=_ln_stats, prologue=_ln_prologue, pass2=_ln_pass2)
    io = ("yh", "yl", "dyh", "dyl") + t
    return _TwoPass(full=io, block=("h", "l", "t", "rb", "rb+", "c1b", "c1b+", "c2b", "c2b+"),
                    stat=("s0", "s1", "s2", "rsh", "rsl"), ablock=("p1", "p2", "a", "b"),
                    astat=("m", "v", "q", "r", "c1", "c2", "kr", "kr+", "k1", "k1+", "k2", "k2+"), in1=io, in2=io,
                    outputs={"dxh": "dyh", "dxl": "dyl"}, stat_in=("rsh", "rsl"), stat_out=(),
                    pass1=_lnb_pass1, stats=_lnb_stats, prologue=_lnb_prologue, pass2=_lnb_pass2)


#: the operations that run in two passes over the columns
_TWO_PASS = ("layer_norm", "layer_norm_bwd")

#: row pieces a folded two-pass operation is also compiled in (:func:`_compile_two_pass`)
ROW_PIECES = (2, 4, 8)


#: blocks a pass may take when wider ones fit (longer programs only repeat the per-block overhead)
MAX_BLOCKS = 64


def _candidates(geo: Geometry, spec: _TwoPass, C: int, blocks: int, unit: int) -> list[tuple[int, int, int]]:
    """``(H, k, Cp)`` that fit the memories: ``H`` rows a column (the most that fit), blocks of ``k``
    columns (at most :data:`MAX_BLOCKS` of them where possible), column pieces of ``Cp`` (a multiple
    of ``k``): the widest, and those that cut the columns into one or two more, evenly."""
    ks = [k for k in (1 << i for i in range(C.bit_length())) if C % k == 0]
    ks = [k for k in ks if C // k <= MAX_BLOCKS] or ks[-1:]
    for H in range(blocks, 0, -unit):
        out = []
        for k in ks:
            P = k * H
            room = geo.unified_half_rows - unit - len(spec.block) * P - _stat_rows(spec, H)
            cp = min(C, room // (len(spec.full) * H) // k * k) if room > 0 else 0
            if cp < k or len(spec.ablock) * P + len(spec.astat) * H > geo.accum_rows:
                continue
            n = -(-C // cp)
            out += sorted({(H, k, min(cp, ceil_to(-(-C // m), k))) for m in range(n, n + 3)})
        if out:
            return out
    raise CompileError(f"no piece of {unit} rows a column fits the memories for {C} columns", field="shape")


def _regions(spec, names_rows, base: int = 0) -> dict[str, int]:
    out, at = {}, base
    for names, rows in names_rows:
        for name in names:
            out[name], at = at, at + rows
    return out


def _compile_two_pass(op: str, spec: _TwoPass, shape: tuple[int, ...], config: FettaConfig, unit: int,
                      terms: int, fold: int, row_pieces: int | None = None) -> VecProgram:
    """The fastest end to end (:meth:`VecProgram.timeline`) of the pieces and blocks that fit
    (``row_pieces``: :func:`compile_rows`)."""
    C, R = shape[-1], int(np.prod(shape[:-1]))
    geo = Geometry.of(config)
    rows = unit if fold > 1 else ceil_to(-(-R // geo.lanes), unit)
    progs = []
    if row_pieces in (None, 1):
        progs += [_build_two_pass(op, spec, shape, geo, unit, terms, fold, *c)
                  for c in _candidates(geo, spec, C // fold, rows, unit)]
    # a folded operand in row pieces, each folded on its own: one pass each where its columns fit a half
    # (the other piece's transfers overlap it) instead of two passes over column pieces
    counts = ROW_PIECES if row_pieces is None else () if row_pieces == 1 else (row_pieces,)
    for pieces in counts:
        prows = -(-(R // pieces) // geo.lanes)
        pfold = _fold(prows, C, unit) if R % pieces == 0 else 1
        if fold == 1 or pfold == 1 or prows * pfold > unit:
            continue
        progs += [_build_two_pass(op, spec, shape, geo, unit, terms, pfold, *c, row_pieces=pieces)
                  for c in _candidates(geo, spec, C // pfold, unit, unit)]
    if not progs:
        raise CompileError(f"{op} of shape {shape} does not run in {row_pieces} row pieces (the rows must "
                           f"divide into them, fewer than the vector unit's {unit}-row chunk holds, and "
                           f"each piece fold into it)", field="row_pieces")
    return min(progs, key=lambda p: (p.timeline(config).cycles, len(p.runs)))


def _build_two_pass(op: str, spec: _TwoPass, shape: tuple[int, ...], geo: Geometry, unit: int, terms: int,
                    fold: int, H: int, k: int, cp: int, row_pieces: int = 1) -> VecProgram:
    C, R = shape[-1] // fold, int(np.prod(shape[:-1]))
    blocks = unit * row_pieces if fold > 1 else ceil_to(-(-R // geo.lanes), H)
    one = geo.unified_half_rows - unit
    a = _regions(spec, ((spec.ablock, k * H), (spec.astat, H)))
    pieces = [(c0, min(C, c0 + cp)) for c0 in range(0, C, cp)]
    runs: list[VecRun] = []
    ops, group = 0, 0

    def emit(first: int, c0: int, c1: int, body, writes, reads) -> None:
        nonlocal ops, group
        half = group % 2
        group += 1
        u = _regions(spec, ((spec.full, (c1 - c0) * H), (spec.block, k * H), (spec.stat, H),
                            (_FOLD_SCRATCH, 3 * H)))
        u["_terms"] = _terms(terms)
        e = _Rows(geo, one, c1 - c0, H, k, fold)
        body(e, u)
        ops += lane_ops(e.ins, geo)
        parts = [VecRun(half, first, H, prog, c0=c0, c1=c1) for prog in cut(e.ins, geo.imem_depth)]
        parts[0].uwrites = [(u[n], n) for n in writes] + [(one, ONE)]
        parts[-1].ureads = [(u[spec.outputs.get(n, n)], n) for n in reads]
        runs.extend(parts)

    for first in range(0, blocks, H):
        def pass1(j):
            def body(e, u):
                for b in range(e.nb):
                    spec.pass1(e, u, a, b, j == 0 and b == 0)
            return body

        def pass2(j, with_pass1: bool):
            def body(e, u):
                if with_pass1:
                    pass1(j)(e, u)
                if j == 0:
                    spec.stats(e, u, a, C * fold)
                spec.prologue(e, u, a)
                for b in range(e.nb):
                    spec.pass2(e, u, a, b)
            return body
        single = len(pieces) == 1
        if not single:
            for j, (c0, c1) in enumerate(pieces):
                emit(first, c0, c1, pass1(j), spec.in1, ())
        for j, (c0, c1) in enumerate(pieces):
            writes = tuple(dict.fromkeys((spec.in1 if single else ()) + spec.in2)) + (spec.stat_in if j == 0 else ())
            emit(first, c0, c1, pass2(j, single), writes, tuple(spec.outputs) + (spec.stat_out if j == 0 else ()))
    names = tuple(dict.fromkeys(spec.full + spec.stat_in))
    return VecProgram(op, shape, C, blocks, runs, {n: "u" for n in names},
                      {n: "u" for n in tuple(spec.outputs) + spec.stat_out}, ops,
                      frozenset(spec.stat_in + spec.stat_out), fold, row_pieces)
