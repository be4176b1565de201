"""Bit-exact, cycle-exact Python model of the contraction engine (``hdl/ce.py``).

Two levels, both for ``C[M, N] = A[M, K] @ B[K, N] (+ acc)`` on one CE of
``rows`` x ``cols`` PEs in one of the six mappings of :class:`gen.design.isa.CEMode`:

* :func:`ce_gemm` returns the result, in exactly the accumulation order of
  the hardware, and the cycle count of the schedule below. This is what the
  instruction-level emulator uses.
* :func:`ce_program` returns the cycle-by-cycle stimulus (what a controller
  drives into the CE), every Psum vector the CE must emit (value and cycle)
  and how those vectors assemble into C. The cocotb benches and the Amaranth
  tests drive the RTL with it.

Accumulation order (bf16: each step is ``sim.bf16.bf16_mac``, not fused):

* IS / WS: K is padded with zeros (in both operands) to a multiple of
  ``rows``; a Psum enters the column top (``acc`` or ``+0`` for the first K
  tile, the previous K tile's Psum after that) and collects the products in
  order k = 0, 1, ...: ``C = (((acc + a0*b0) + a1*b1) + ...)``. The zero
  padding only matters for a ``-0`` accumulator (``-0 + +0 = +0``).
* OS: each PE accumulates from ``+0`` over k = 0..K-1; ``acc``, if given, is
  added afterwards (``acc + tile``) as the accumulation unit does.
* int16: exact products, sums wrapped modulo ``2**int_acc_width`` (the
  order does not matter).

Schedule (the controller's policy; all cycle counts below follow from it):

* IS / WS: tiles in order (outer output tile, inner K tile); a tile loads its
  IB (R row loads for ``*_V``, C column loads for ``*_H``) then streams its S
  IA vectors (S = M for WS, N for IS) on consecutive cycles. Loads of the
  next tile start with the current tile's first vector. Tile ``i`` starts at
  ``s_i = max(s_{i-1} + S, l_i + (1 if V else C), s_{i-1} + (R + 1) + FEEDBACK)``
  (the last term only for K tiles after the first: the Psum comes back
  through ``psum_in``), ``l_i = max(l_{i-1} + L, s_{i-1})``.
  Without stalls: ``cycles = first + tiles * S + R + 1`` with ``first`` = 1
  (V) or C (H), when ``S >= max(L, R + 1 + FEEDBACK)``.
* OS: tiles of K vectors back to back, at least R cycles apart:
  ``cycles = (tiles - 1) * max(K, R) + K + R + 1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil
from typing import Any

import numpy as np

from gen.design.config import DEFAULT
from hdl.ce import CEMode

from sim.bf16 import BF16, bf16_bits, bf16_mul, f32_add, f32_bits, f32_from_bits, ftz16

__all__ = ["ce_gemm", "ce_program", "ce_cycles", "CEProgram", "FEEDBACK", "fp32_error_bound"]

#: cycles between a Psum leaving the CE and the same Psum re-entering ``psum_in``
#: (the bench's monitor-to-driver hand-off; a real accumulation memory adds its latency here)
FEEDBACK = 1


def _mode(mode) -> CEMode:
    if isinstance(mode, CEMode):
        return mode
    if isinstance(mode, str):
        try:
            return CEMode[mode]
        except KeyError:
            raise ValueError(f"unknown CE mode {mode!r} (known: {', '.join(m.name for m in CEMode)})") from None
    return CEMode(mode)


# --- arithmetic on whole arrays ------------------------------------------------------------


class _Arith:
    """The PE arithmetic on numpy arrays: values are float32 (bf16) or Python ints (int16)."""

    def __init__(self, datatype: str, int_width: int, int_acc_width: int):
        if datatype not in ("bf16", "int16"):
            raise ValueError(f"datatype must be 'bf16' or 'int16', not {datatype!r}")
        self.datatype = datatype
        self.ew = 16 if datatype == "bf16" else int_width
        self.aw = 32 if datatype == "bf16" else int_acc_width

    def operands(self, x) -> np.ndarray:
        """Input operands as the PE sees them (bf16 values as float32, or ints)."""
        if self.datatype == "bf16":
            return ftz16(np.asarray(x, dtype=np.float32).astype(BF16)).astype(np.float32)
        x = np.asarray(x)
        if x.dtype.kind == "f" and not np.all(x == np.round(x)):
            raise ValueError("integer mode needs integer operands")
        lo, hi = -(1 << (self.ew - 1)), (1 << (self.ew - 1)) - 1
        xi = np.vectorize(int, otypes=[object])(x) if x.size else x.astype(object)
        if x.size and (min(xi.ravel()) < lo or max(xi.ravel()) > hi):
            raise ValueError(f"integer operands must fit in {self.ew} bits")
        return xi

    def zeros(self, shape) -> np.ndarray:
        return np.zeros(shape, np.float32) if self.datatype == "bf16" else np.zeros(shape, object)

    def accs(self, x) -> np.ndarray:
        if self.datatype == "bf16":
            return np.asarray(x, dtype=np.float32)
        return self.wrap(np.vectorize(int, otypes=[object])(np.asarray(x)))

    def wrap(self, x):
        m, h = 1 << self.aw, 1 << (self.aw - 1)
        return np.vectorize(lambda v: ((int(v) + h) % m) - h, otypes=[object])(x) if np.size(x) else x

    def mac(self, acc, a, b):
        if self.datatype == "bf16":
            return f32_add(acc, bf16_mul(a.astype(BF16), b.astype(BF16)))
        return self.wrap(acc + a * b)

    def add(self, x, y):
        if self.datatype == "bf16":
            return f32_add(x, y)
        return self.wrap(x + y)

    # bit patterns for the RTL ports
    def op_bits(self, x) -> list[int]:
        x = np.asarray(x)
        if self.datatype == "bf16":
            return [int(v) for v in bf16_bits(x.astype(np.float32).astype(BF16)).ravel()]
        return [int(v) & ((1 << self.ew) - 1) for v in x.ravel()]

    def acc_bits(self, x) -> list[int]:
        x = np.asarray(x)
        if self.datatype == "bf16":
            return [int(v) for v in f32_bits(x.astype(np.float32)).ravel()]
        return [int(v) & ((1 << self.aw) - 1) for v in x.ravel()]

    def acc_from_bits(self, bits) -> np.ndarray:
        if self.datatype == "bf16":
            return f32_from_bits(np.asarray(bits, dtype=np.uint32))
        h = 1 << (self.aw - 1)
        return np.array([((int(b) + h) % (1 << self.aw)) - h for b in np.ravel(bits)], dtype=object).reshape(
            np.shape(bits))


def _pad(x: np.ndarray, shape, arith: _Arith) -> np.ndarray:
    out = arith.zeros(shape) if arith.datatype == "int16" else np.zeros(shape, np.float32)
    out[: x.shape[0], : x.shape[1]] = x
    return out


# --- the program ---------------------------------------------------------------------------


@dataclass
class CEProgram:
    """Cycle-by-cycle stimulus and expected responses of one GEMM on the CE.

    ``inputs[t]`` (bit patterns, lists of ints) drives cycle ``t``:
    ``ia`` (R lanes) or ``None`` (``ia.valid`` low), ``first``/``last``/``swap``,
    ``ib_valid``/``ib_index``/``ib`` (``max(R, C)`` lanes), and ``psum_in``:
    ``("const", lanes)`` or ``("out", j)`` (feed back Psum vector ``j`` the CE emitted).
    ``expected[j] = (cycle, row, lanes)`` is the j-th Psum vector (in emission order).
    ``result[j]`` lists ``(lane, i, jj)``: lane ``lane`` of the final vector ``j`` is ``C[i, jj]``.
    """

    mode: CEMode
    rows: int
    cols: int
    datatype: str
    shape: tuple[int, int, int]
    cycles: int
    inputs: list[dict[str, Any]] = field(default_factory=list)
    expected: list[tuple[int, int, list[int]]] = field(default_factory=list)
    result: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    #: OS with an accumulator: C = acc + assembled tile results (bit patterns of acc, row major)
    post_acc: list[int] | None = None
    #: the PEs' multiplier and adder latencies
    mul_latency: int = DEFAULT.mul_latency
    add_latency: int = DEFAULT.add_latency

    @property
    def macs(self) -> int:
        M, N, K = self.shape
        return M * N * K

    @property
    def utilization(self) -> float:
        return self.macs / (self.rows * self.cols * self.cycles)


def _empty_cycle(lanes_ib: int, cols: int) -> dict[str, Any]:
    return {"ia": None, "first": 0, "last": 0, "swap": 0, "ib_valid": 0, "ib_index": 0,
            "ib": [0] * lanes_ib, "psum_in": ("const", [0] * cols)}


class _Trace:
    """The stimulus being laid out cycle by cycle, and the Psum vectors the CE emits."""

    def __init__(self, lanes_ib: int, cols: int):
        self.lanes_ib = lanes_ib
        self.cols = cols
        self.cycles: dict[int, dict[str, Any]] = {}
        #: (cycle, row, lanes as values) in emission order
        self.outputs: list[tuple[int, int, Any]] = []

    def at(self, t: int) -> dict[str, Any]:
        """The inputs driven at cycle ``t`` (idle until set)."""
        if t not in self.cycles:
            self.cycles[t] = _empty_cycle(self.lanes_ib, self.cols)
        return self.cycles[t]

    def emit(self, cycle: int, row: int, vals) -> int:
        """Record a Psum vector the CE emits; its index."""
        self.outputs.append((cycle, row, vals))
        return len(self.outputs) - 1


def ce_program(mode, A, B, acc=None, *, rows: int = 4, cols: int = 4, datatype: str = "bf16",
               int_width: int = 16, int_acc_width: int = 48, mul_latency: int = DEFAULT.mul_latency,
               add_latency: int = DEFAULT.add_latency) -> CEProgram:
    """The stimulus and the expected Psums of ``A @ B (+ acc)`` in ``mode`` (see the module docstring)
    on a CE whose PEs have ``mul_latency`` and ``add_latency``."""
    mode = _mode(mode)
    ar = _Arith(datatype, int_width, int_acc_width)
    A = ar.operands(A)
    B = ar.operands(B)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"need A[M, K] and B[K, N], got {A.shape} and {B.shape}")
    M, K = A.shape
    N = B.shape[1]
    if min(M, N, K) < 1:
        raise ValueError(f"empty GEMM {M}x{N}x{K}")
    if acc is not None:
        acc = ar.accs(np.broadcast_to(acc, (M, N)))
    prog = CEProgram(mode, rows, cols, datatype, (M, N, K), 0, mul_latency=mul_latency, add_latency=add_latency)
    tr = _Trace(max(rows, cols), cols)
    if not mode.output_stationary:
        _stationary_schedule(prog, tr, ar, A, B, acc)
    else:
        _os_schedule(prog, tr, ar, A, B)
        if acc is not None:
            prog.post_acc = ar.acc_bits(acc)
    for cycle, row, vals in tr.outputs:
        prog.expected.append((cycle, row, ar.acc_bits(vals)))
    prog.inputs = [tr.cycles.get(t, _empty_cycle(tr.lanes_ib, cols)) for t in range(prog.cycles)]
    return prog


def _stationary_operands(mode: CEMode, A, B, R: int, Cc: int, ar: _Arith):
    """IS / WS: the stationary operand ``W[k, c]`` and the streamed ``X[s, k]`` over the whole
    problem (K padded to a multiple of ``R``), the stream length ``S`` and the output tiles."""
    M, K = A.shape
    N = B.shape[1]
    Kp = ceil(K / R) * R
    if mode in (CEMode.WS_V, CEMode.WS_H):
        W_all = _pad(B, (Kp, ceil(N / Cc) * Cc), ar)   # [Kp, Np]
        X_all = _pad(A, (M, Kp), ar)                    # [S=M, Kp]
        return W_all, X_all, M, ceil(N / Cc)
    W_all = _pad(A.T.copy(), (Kp, ceil(M / Cc) * Cc), ar)  # [Kp, Mp]: W[k, m]
    X_all = _pad(B.T.copy(), (N, Kp), ar)                   # [S=N, Kp]
    return W_all, X_all, N, ceil(M / Cc)


def _stationary_schedule(prog: CEProgram, tr: _Trace, ar: _Arith, A, B, acc) -> None:
    """IS / WS: tiles in order (outer output tile, inner K tile), loads overlapping the stream."""
    mode, R, Cc = prog.mode, prog.rows, prog.cols
    K = A.shape[1]
    Kt = ceil(K / R)
    ws = mode in (CEMode.WS_V, CEMode.WS_H)
    W_all, X_all, S, outer = _stationary_operands(mode, A, B, R, Cc, ar)
    a_t = None if acc is None else (acc if ws else acc.T)   # [S, outer*C]
    L = R if not mode.horizontal else Cc
    first = Cc if mode.horizontal else 1
    Ls = R * prog.add_latency + prog.mul_latency
    s_prev = l_prev = None
    prev_ids: list[int] | None = None
    for o in range(outer):
        for kt in range(Kt):
            W = W_all[kt * R:(kt + 1) * R, o * Cc:(o + 1) * Cc]  # R x C tile
            X = X_all[:, kt * R:(kt + 1) * R]                     # S x R
            if s_prev is None:
                l_i = 0
                s_i = l_i + first
            else:
                l_i = max(l_prev + L, s_prev)
                s_i = max(s_prev + S, l_i + first)
                if kt > 0:
                    s_i = max(s_i, s_prev + Ls + FEEDBACK)
            _load_ib(tr, ar, W, l_i, L, mode.horizontal)
            P = _initial_psums(tr, ar, a_t, prev_ids, kt, o, S, Cc)
            for r in range(R):
                P = ar.mac(P, X[:, r:r + 1], W[r:r + 1, :])
            ids = _stream_ia(tr, ar, X, P, a_t, prev_ids, kt, o, s_i, Ls)
            if kt == Kt - 1:
                _record_tile(prog, ids, o, ws)
            prev_ids = ids
            s_prev, l_prev = s_i, l_i
    prog.cycles = s_prev + S + Ls


def _load_ib(tr: _Trace, ar: _Arith, W, l_i: int, L: int, horizontal: bool) -> None:
    """The ``L`` IB loads of a stationary tile from cycle ``l_i`` (rows, or columns for ``*_H``)."""
    for j in range(L):
        c = tr.at(l_i + j)
        lanes = list(W[j, :]) if not horizontal else list(W[:, j])
        c["ib_valid"], c["ib_index"] = 1, j
        c["ib"] = ar.op_bits(np.array(lanes + [0] * (tr.lanes_ib - len(lanes)), dtype=W.dtype))


def _initial_psums(tr: _Trace, ar: _Arith, a_t, prev_ids, kt: int, o: int, S: int, Cc: int):
    """The Psums entering a tile: ``acc`` (or zeros) for the first K tile, else the previous tile's."""
    if kt > 0:
        vals = [tr.outputs[j][2] for j in prev_ids]
        return np.array(vals) if ar.datatype == "bf16" else np.array(vals, dtype=object)
    P = ar.zeros((S, Cc))
    if a_t is not None:
        chunk = a_t[:, o * Cc:(o + 1) * Cc]
        P[:, : chunk.shape[1]] = chunk
    return P


def _stream_ia(tr: _Trace, ar: _Arith, X, P, a_t, prev_ids, kt: int, o: int, s_i: int, Ls: int) -> list[int]:
    """Stream a tile's ``S`` IA vectors from cycle ``s_i`` with their ``psum_in``; the ids of the Psums."""
    Cc = tr.cols
    ids = []
    for s in range(X.shape[0]):
        c = tr.at(s_i + s)
        c["ia"] = ar.op_bits(X[s, :])
        c["swap"] = int(s == 0)
        if kt == 0:
            init = ar.zeros(Cc)
            if a_t is not None:
                row = a_t[s, o * Cc:(o + 1) * Cc]
                init[: len(row)] = row
            c["psum_in"] = ("const", ar.acc_bits(init))
        else:
            c["psum_in"] = ("out", prev_ids[s])
        ids.append(tr.emit(s_i + s + Ls, 0, P[s, :]))
    return ids


def _record_tile(prog: CEProgram, ids: list[int], o: int, ws: bool) -> None:
    """Where the lanes of a stationary tile's final Psum vectors go in C."""
    M, N, _ = prog.shape
    for s, j in enumerate(ids):
        lanes = []
        for c_ in range(prog.cols):
            col = o * prog.cols + c_
            i, jj = (s, col) if ws else (col, s)
            if i < M and jj < N:
                lanes.append((c_, i, jj))
        prog.result[j] = lanes


def _os_schedule(prog: CEProgram, tr: _Trace, ar: _Arith, A, B) -> None:
    """OS: tiles of K vectors back to back, at least R cycles apart; R result rows per tile."""
    R, Cc = prog.rows, prog.cols
    M, N, K = prog.shape
    ab = prog.mode == CEMode.OS_AB
    # IA operand X[row_index, k], IB operand Y[k, col_index]
    if ab:
        Xa = _pad(A, (ceil(M / R) * R, K), ar)
        Yb = _pad(B, (K, ceil(N / Cc) * Cc), ar)
    else:
        Xa = _pad(B.T.copy(), (ceil(N / R) * R, K), ar)
        Yb = _pad(A.T.copy(), (K, ceil(M / Cc) * Cc), ar)
    # groups of SA = add_latency tiles, interleaved vector by vector (hdl.pe.PE: the adder loop)
    SA, MA = prog.add_latency, prog.mul_latency
    tiles = [(ot, it) for ot in range(Xa.shape[0] // R) for it in range(Yb.shape[1] // Cc)]
    last_emit = 0
    for g0 in range(0, len(tiles), SA):
        t_g = (g0 // SA) * SA * max(K, R)
        rows_out = []
        for i, (ot, it) in enumerate(tiles[g0:g0 + SA]):
            X = Xa[ot * R:(ot + 1) * R, :]   # R x K
            Y = Yb[:, it * Cc:(it + 1) * Cc]  # K x C
            P = ar.zeros((R, Cc))
            for k in range(K):
                P = ar.mac(P, X[:, k:k + 1], Y[k:k + 1, :])
            for k in range(K):
                c = tr.at(t_g + k * SA + i)
                c["ia"] = ar.op_bits(X[:, k])
                c["first"], c["last"] = int(k == 0), int(k == K - 1)
                c["ib"] = ar.op_bits(np.concatenate([Y[k, :], ar.zeros(tr.lanes_ib - Cc)]))
            t_last = t_g + (K - 1) * SA + i
            rows_out += [(t_last + r * SA + MA + SA, r, P[r, :], ot, it) for r in range(R)]
        for cycle, r, vals, ot, it in sorted(rows_out, key=lambda x: x[0]):
            j = tr.emit(cycle, r, vals)
            lanes = []
            for c_ in range(Cc):
                i, jj = (ot * R + r, it * Cc + c_) if ab else (it * Cc + c_, ot * R + r)
                if i < M and jj < N:
                    lanes.append((c_, i, jj))
            prog.result[j] = lanes
            last_emit = cycle
    prog.cycles = last_emit + 1


def assemble(prog: CEProgram, vectors: list[list[int]]) -> np.ndarray:
    """C (before any ``post_acc``) from the Psum vectors the CE emitted (bit patterns, emission order)."""
    M, N, _ = prog.shape
    bits = np.zeros((M, N), object)
    for j, lanes in prog.result.items():
        for lane, i, jj in lanes:
            bits[i, jj] = int(vectors[j][lane])
    return bits


def ce_result(prog: CEProgram, vectors: list[list[int]], *, int_width: int = 16,
              int_acc_width: int = 48) -> np.ndarray:
    """Final C from emitted Psum vectors, including the accumulation unit's ``acc +`` (OS with acc)."""
    ar = _Arith(prog.datatype, int_width, int_acc_width)
    M, N, _ = prog.shape
    C = ar.acc_from_bits(assemble(prog, vectors).astype(np.uint64 if prog.datatype == "bf16" else object))
    C = C.reshape(M, N)
    if prog.post_acc is not None:
        C = ar.add(ar.acc_from_bits(np.array(prog.post_acc, dtype=object)
                                    if prog.datatype == "int16" else np.array(prog.post_acc, np.uint32))
                   .reshape(M, N), C)
    return C


def ce_gemm(mode, A, B, acc=None, *, rows: int = 4, cols: int = 4, datatype: str = "bf16",
            int_width: int = 16, int_acc_width: int = 48, mul_latency: int = DEFAULT.mul_latency,
            add_latency: int = DEFAULT.add_latency) -> tuple[np.ndarray, int]:
    """``(C, cycles)`` of ``A @ B (+ acc)`` on one CE in ``mode``, bit-exact with the RTL.

    bf16: ``A``, ``B`` are rounded to bfloat16 (and flushed) as the PE sees them;
    C is float32. int16: integer arrays; C is an object array of Python ints
    wrapped to ``int_acc_width`` bits.
    """
    prog = ce_program(mode, A, B, acc, rows=rows, cols=cols, datatype=datatype, int_width=int_width,
                      int_acc_width=int_acc_width, mul_latency=mul_latency, add_latency=add_latency)
    vectors = [lanes for _, _, lanes in prog.expected]
    return ce_result(prog, vectors, int_width=int_width, int_acc_width=int_acc_width), prog.cycles


def ce_cycles(mode, M: int, N: int, K: int, *, rows: int = 4, cols: int = 4,
              mul_latency: int = DEFAULT.mul_latency, add_latency: int = DEFAULT.add_latency) -> int:
    """Cycle count of the schedule for an ``M x N x K`` GEMM (no data needed)."""
    mode = _mode(mode)
    R, Cc = rows, cols
    lat = R * add_latency + mul_latency
    if not mode.output_stationary:
        ws = mode in (CEMode.WS_V, CEMode.WS_H)
        S, outer = (M, ceil(N / Cc)) if ws else (N, ceil(M / Cc))
        Kt = ceil(K / R)
        L = Cc if mode.horizontal else R
        first = Cc if mode.horizontal else 1
        s_prev = l_prev = None
        for _ in range(outer):
            for kt in range(Kt):
                if s_prev is None:
                    l_i, s_i = 0, first
                else:
                    l_i = max(l_prev + L, s_prev)
                    s_i = max(s_prev + S, l_i + first)
                    if kt > 0:
                        s_i = max(s_i, s_prev + lat + FEEDBACK)
                s_prev, l_prev = s_i, l_i
        return s_prev + S + lat
    tiles = (ceil(M / R) * ceil(N / Cc)) if mode == CEMode.OS_AB else (ceil(N / R) * ceil(M / Cc))
    q = add_latency
    groups = ceil(tiles / q)
    slots = tiles - (groups - 1) * q
    # last row of the last tile: (K - 1) * q + slots - 1 into the last group, then lat
    return (groups - 1) * q * max(K, R) + (K - 1) * q + slots - 1 + lat + 1


def fp32_error_bound(A, B, acc=None, *, k_steps: int | None = None) -> np.ndarray:
    """Elementwise bound on |C_fp32-chain - C_exact| for a sequential FP32 sum of bf16 products.

    With ``n`` additions in FP32 (unit roundoff ``u = 2**-24``) the classic bound is
    ``gamma_n * sum_k |a_k b_k|`` (plus ``|acc|``) with ``gamma_n = n u / (1 - n u)``;
    products of bfloat16 values are exact in FP32 unless they over/underflow.
    Flushed subnormals add at most ``2**-126`` per step.
    """
    A = np.asarray(A, np.float64)
    B = np.asarray(B, np.float64)
    n = (k_steps if k_steps is not None else A.shape[1]) + 1
    u = 2.0 ** -24
    gamma = n * u / (1 - n * u)
    mag = np.abs(A) @ np.abs(B)
    if acc is not None:
        mag = mag + np.abs(np.asarray(acc, np.float64))
    return gamma * mag + n * 2.0 ** -126


def program_to_json(prog: CEProgram) -> dict[str, Any]:
    """A JSON-able form of ``prog`` (what the cocotb bench reads)."""
    return {"mode": prog.mode.name, "mode_value": prog.mode.value, "rows": prog.rows, "cols": prog.cols,
            "datatype": prog.datatype, "shape": list(prog.shape), "cycles": prog.cycles,
            "inputs": [{**c, "psum_in": list(c["psum_in"])} for c in prog.inputs],
            "expected": [list(e) for e in prog.expected]}
