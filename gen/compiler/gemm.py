"""Tiling a dense GEMM ``Y[M, N] = A[M, K] @ B[K, N]`` over all CEs into passes of instructions.

A *pass* is what one ping-pong half holds: the host writes the pass's operands
into a half, pushes its program (one ``GEMM`` with write-back, then ``HALT``),
starts it, and reads the bfloat16 results back from the same half. Passes
alternate halves, so loading pass ``p + 1`` overlaps computing pass ``p``;
the cycle counts reported are the accelerator's (host transfers are hidden by
the ping-pong and not counted).

Layouts in a half (row addresses, one row = ``lanes`` elements), for a pass
covering ``Mc`` rows of A / Y and ``Nc`` columns of B / Y, ``MB = Mc / 4`` and
``NB = Nc / 4`` (blocks of 4 = ``ce_rows`` = ``ce_cols`` = ``lanes``; the same with any ``lanes``):

* A (``IA``): row ``a0 + (l1*Kc + k)*gm*gk + im*gk + ik`` holds ``A[4mb .. 4mb+3, ik*Kc + k]``,
  ``mb = l1*gm + im`` (A transposed in blocks of 4; ``Kc = Kp / gk`` is the depth of one CE);
* B (``IB``): row ``b0 + (l0*Kc + k)*gn*gk + in*gk + ik`` holds ``B[ik*Kc + k, 4nb .. 4nb+3]``,
  ``nb = l0*gn + in``;
* Y: row ``y0 + mb * P + i * NB + nb`` holds ``Y[4mb + i, 4nb .. 4nb+3]`` (row-major
  per block of 4 rows); the accumulation unit uses the same layout from ``0``.

The CEs' spatial offsets fill the low bank bits and the temporal strides are multiples
of ``gm*gk`` / ``gn*gk`` (the XOR rule of the networks, ``gen.design.isa.route_ok``); ``P`` is
padded so that the groups' output rows hit different banks (``P = gn`` modulo ``banks``).
The grid ``(gm, gn, gk)`` is chosen to maximise utilisation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gen.design.config import FettaConfig, check_accelerator
from gen.design.timing import RunTiming, Timeline, dram_bytes_per_cycle, program_cycles, timeline
from gen.errors import FettaError
from gen.design.isa import (OVERHEAD, START_CYCLES, ErrorCode, Geometry, Instr, assemble, check, gemm, halt,
                          os_gemm_cycles)


class TilingError(FettaError):
    kind = "tiling"


def _ceil(a: int, b: int) -> int:
    return -(-a // b) * b


def _pad_to_residue(x: int, r: int, mod: int) -> int:
    """Smallest ``y >= x`` with ``y % mod == r % mod``."""
    return x + ((r - x) % mod)


@dataclass
class Pass:
    """One ping-pong pass: memory writes, program, where to read the result."""

    half: int
    m0: int
    n0: int
    Mc: int
    Nc: int
    #: (first row address, rows[n, lanes] of values) written by the host before the run
    writes: list[tuple[int, np.ndarray]]
    program: list[Instr]
    y_base: int
    y_pitch: int
    NB: int
    #: elements per row (``config.lanes``): the rows of a block of ``lanes`` result rows
    lanes: int

    @property
    def words(self) -> list[int]:
        return assemble(self.program)


@dataclass
class GemmPlan:
    M: int
    N: int
    K: int
    grid: tuple[int, int, int]
    Kp: int
    passes: list[Pass] = field(default_factory=list)

    @property
    def macs(self) -> int:
        """Useful MACs (no padding)."""
        return self.M * self.N * self.K

    def timeline(self, config: FettaConfig) -> Timeline:
        """End-to-end timing of the passes, DRAM transfers of operands and results included
        (:mod:`gen.design.timing`; compute cycles are the passes' static program timing, which the
        emulator and the RTL reproduce)."""
        runs = [RunTiming.of_rows(p.half, sum(len(rows) for _, rows in p.writes), program_cycles(p.words, config),
                                  sum(n for _, n in read_y_rows(p)), config)
                for p in self.passes]
        return timeline(runs, dram_bytes_per_cycle(config))


def _grids(E: int):
    out = []
    for lm in range(E.bit_length()):
        for ln in range(E.bit_length()):
            for lk in range(E.bit_length()):
                if (1 << (lm + ln + lk)) == E:
                    out.append((1 << lm, 1 << ln, 1 << lk))
    return out


def _layout(config: FettaConfig, Mc: int, Nc: int, Kp: int, grid) -> dict[str, int]:
    gm, gn, gk = grid
    Bk = config.banks
    L = config.lanes
    MB, NB = Mc // L, Nc // L
    Kc = Kp // gk
    # XOR-friendly (section V-D): the CE's spatial offset fills the low bank bits
    # (im*gk + ik < gm*gk), the temporal strides are multiples of gm*gk
    SA, SB = gm * gk, gn * gk
    P = _pad_to_residue(L * NB, gn, Bk)
    a0 = 0
    b0 = _ceil(a0 + MB * Kp, Bk)
    y0 = _ceil(b0 + NB * Kp, Bk)
    end = y0 + (MB - 1) * P + L * NB if MB else y0
    return dict(MB=MB, NB=NB, Kc=Kc, SA=SA, SB=SB, P=P, a0=a0, b0=b0, y0=y0, end=end,
                acc_end=(MB - 1) * P + L * NB)


def _pass_cycles(config: FettaConfig, Mc: int, Nc: int, Kp: int, grid) -> int:
    """Cycles of a pass's program (start, one OS GEMM, HALT) by the timing rules of
    :mod:`gen.design.control`: the HALT is fetched after the GEMM's CHECK and acts after its last write."""
    gm, gn, gk = grid
    L = config.lanes
    tiles = (Mc // (L * gm)) * (Nc // (L * gn))
    return START_CYCLES + OVERHEAD + os_gemm_cycles(Kp // gk, tiles, Geometry.of(config)) + 1


def _fits(config: FettaConfig, geo: Geometry, Mc: int, Nc: int, Kp: int, grid) -> bool:
    lay = _layout(config, Mc, Nc, Kp, grid)
    return lay["end"] <= geo.unified_half_rows and lay["acc_end"] <= geo.accum_rows


def plan_gemm(config: FettaConfig, A: np.ndarray, B: np.ndarray, *, grid=None) -> GemmPlan:
    """Split ``A @ B`` into passes for ``config`` (values must be exact in the datatype)."""
    check_accelerator(config)
    geo = Geometry.of(config)
    A = np.asarray(A)
    B = np.asarray(B)
    M, K = A.shape
    K2, N = B.shape
    if K != K2:
        raise TilingError(f"inner sizes differ: A is {A.shape}, B is {B.shape}", field="K")
    L = config.lanes
    best = None
    for g in ([tuple(grid)] if grid is not None else _grids(config.num_ces)):
        gm, gn, gk = g
        Kp = _ceil(K, gk)
        Mfull, Nfull = _ceil(M, L * gm), _ceil(N, L * gn)
        # largest pass that fits: shrink M first, then N, by halving the tile count
        Mc, Nc = Mfull, Nfull
        while not _fits(config, geo, Mc, Nc, Kp, g):
            if Mc > L * gm:
                Mc = _ceil(Mc // 2, L * gm)
            elif Nc > L * gn:
                Nc = _ceil(Nc // 2, L * gn)
            else:
                break
        if not _fits(config, geo, Mc, Nc, Kp, g):
            continue
        npm, npn = -(-Mfull // Mc), -(-Nfull // Nc)
        cycles = npm * npn * _pass_cycles(config, Mc, Nc, Kp, g)
        if best is None or cycles < best[0]:
            best = (cycles, g, Kp, Mc, Nc)
    if best is None:
        raise TilingError(f"a {M}x{K} @ {K}x{N} GEMM does not fit the unified memory even in the smallest "
                          f"pass (K too large for {config.unified_kb} KiB)", field="K")
    _, g, Kp, Mc, Nc = best
    gm, gn, gk = g
    plan = GemmPlan(M, N, K, g, Kp)
    lay = _layout(config, Mc, Nc, Kp, g)
    MB, NB, Kc, SA, SB, P = (lay[k] for k in ("MB", "NB", "Kc", "SA", "SB", "P"))
    Ap = np.zeros((_ceil(M, Mc), Kp), A.dtype)
    Ap[:M, :K] = A
    Bp = np.zeros((Kp, _ceil(N, Nc)), B.dtype)
    Bp[:K, :N] = B
    ins = gemm(K=Kc, grid=g, L0=NB // gn, L1=MB // gm,
               a=(lay["a0"], SA, 0, Kc * SA, gk, 0, 1),
               b=(lay["b0"], SB, Kc * SB, 0, 0, gk, 1),
               o=(0, NB, gn, gm * P, P, 1, 0),
               w_base=lay["y0"], acc=False, wb=True, ports=config.net_ports)
    err = check(ins, geo)
    if err != ErrorCode.NONE:   # the layout rules above make this impossible
        raise TilingError(f"internal: planned instruction fails {err.name}: {ins}", field="grid")
    half = 0
    for m0 in range(0, Ap.shape[0], Mc):
        for n0 in range(0, Bp.shape[1], Nc):
            writes = []
            Ablk = Ap[m0:m0 + Mc]          # [Mc, Kp]
            # row a0 + (l1*Kc + k)*gm*gk + im*gk + ik = A[4mb:4mb+4, ik*Kc + k], mb = l1*gm + im
            rows = Ablk.reshape(MB // gm, gm, L, gk, Kc).transpose(0, 4, 1, 3, 2).reshape(-1, L)
            writes.append((lay["a0"], rows))
            Bblk = Bp[:, n0:n0 + Nc]          # [Kp, Nc]
            # row b0 + (l0*Kc + k)*gn*gk + in*gk + ik = B[ik*Kc + k, 4nb:4nb+4], nb = l0*gn + in
            rows = Bblk.reshape(gk, Kc, NB // gn, gn, L).transpose(2, 1, 3, 0, 4).reshape(-1, L)
            writes.append((lay["b0"], rows))
            plan.passes.append(Pass(half=half, m0=m0, n0=n0, Mc=Mc, Nc=Nc, writes=writes,
                                    program=[ins, halt()], y_base=lay["y0"], y_pitch=P, NB=NB, lanes=L))
            half ^= 1
    return plan


def read_y_rows(p: Pass) -> list[tuple[int, int]]:
    """(first row, count) ranges of the pass's result in its half."""
    L = p.lanes
    return [(p.y_base + mb * p.y_pitch, L * p.NB) for mb in range(p.Mc // L)]


def assemble_y(plan: GemmPlan, results: list[list[np.ndarray]]) -> np.ndarray:
    """Put the rows read per pass (in :func:`read_y_rows` order) into ``Y[M, N]``."""
    Mp = max(p.m0 + p.Mc for p in plan.passes)
    Np = max(p.n0 + p.Nc for p in plan.passes)
    Y = np.zeros((Mp, Np), results[0][0].dtype)
    for p, chunks in zip(plan.passes, results):
        for mb, rows in enumerate(chunks):
            L = p.lanes
            blk = rows.reshape(L, p.NB * L)       # rows i * NB + nb -> [i, L nb + lane]
            Y[p.m0 + L * mb:p.m0 + L * mb + L, p.n0:p.n0 + p.Nc] = blk
    return Y[:plan.M, :plan.N]


__all__ = ["TilingError", "Pass", "GemmPlan", "plan_gemm", "read_y_rows", "assemble_y"]
