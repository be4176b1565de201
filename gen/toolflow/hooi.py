"""``fetta hooi`` as a library: Tucker decomposition by HOOI on the accelerator (seed 004).

One HOOI iteration is compiled once (:func:`compile_hooi`: the networks of
:func:`gen.workload.hooi.hooi_networks` in one program, :func:`gen.compiler.phases.compile_networks`)
lowered to jobs that move their own data by DMA instructions (:func:`gen.compiler.dma.lower_dma`), and
executed ``iters`` times on the emulator (:func:`gen.toolflow.dmarun.execute_dma`): the cycles are the
hardware's own count, DRAM transfers included, as for ``fetta run``. Between the TTM chains the host
computes each new factor by the warm-started one-sided Jacobi SVD (:mod:`gen.toolflow.jacobi`) from the
chain the accelerator just stored, and a later job loads it. On ``icarus`` / ``verilator`` every
iteration's jobs are replayed on the RTL with the bench's AXI4 DRAM (bit and cycle exact, every byte the
stores wrote, else :class:`gen.toolflow.execute.ExecutionError`).

Numerics: the accelerator multiplies bfloat16 and accumulates in FP32; the tensor and every factor
are rounded to bfloat16 when written (the host keeps the factors it wrote, so the decomposition
returned is exactly the one the accelerator used). The fit of an iteration is that of the returned
decomposition, ``1 - ||T - G x_1 U_1 .. x_d U_d|| / ||T||``, in float64 on the host, with ``T`` the
bfloat16 tensor the accelerator saw.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from gen.compiler.dma import DmaProgram, hardware_cycles, lower_dma
from gen.compiler.layout import padded_size
from gen.compiler.phases import WIDE_LOOKAHEAD, compile_networks
from gen.compiler.program import CompileError, Program
from gen.design.config import FettaConfig
from gen.toolflow.dmarun import execute_dma, rtl_check_dma
from gen.toolflow.jacobi import jacobi_cycles, jacobi_left
from gen.workload.hooi import HooiNetworks, hooi_networks
from sim.bf16 import round_to_bf16_f32


def orthonormal_factors(shape: Sequence[int], ranks: Sequence[int], seed: int) -> list[np.ndarray]:
    """Random factors with orthonormal columns (seed 004: random initialisation), float64."""
    rng = np.random.default_rng(seed)
    return [np.linalg.qr(rng.standard_normal((s, r)))[0] for s, r in zip(shape, ranks)]


def low_rank_tensor(shape: Sequence[int], ranks: Sequence[int], noise: float, seed: int) -> np.ndarray:
    """A tensor of multilinear rank ``ranks`` plus Gaussian noise (seed 004 VI-B: Gaussian core and
    factors, noise variance ``noise`` times that of the clean tensor's elements), float32."""
    rng = np.random.default_rng(seed)
    core = rng.standard_normal(tuple(ranks))
    clean = core
    for k, (s, r) in enumerate(zip(shape, ranks)):
        clean = np.moveaxis(np.tensordot(rng.standard_normal((s, r)), clean, axes=(1, k)), 0, k)
    clean /= clean.std()
    return (clean + math.sqrt(noise) * rng.standard_normal(clean.shape)).astype(np.float32)


def reconstruct(core: np.ndarray, factors: Sequence[np.ndarray]) -> np.ndarray:
    """``G x_1 U_1 .. x_d U_d`` in float64."""
    out = np.asarray(core, np.float64)
    for k, U in enumerate(factors):
        out = np.moveaxis(np.tensordot(np.asarray(U, np.float64), out, axes=(1, k)), 0, k)
    return out


def fit_of(T: np.ndarray, core: np.ndarray, factors: Sequence[np.ndarray]) -> float:
    """``1 - ||T - T_hat|| / ||T||`` (INTERFACES section 5)."""
    T = np.asarray(T, np.float64)
    return 1.0 - float(np.linalg.norm(T - reconstruct(core, factors)) / np.linalg.norm(T))


#: the shares of a half a chunk piece may take that :func:`compile_hooi` tries
#: (:class:`gen.compiler.compiler.Compiler` ``piece_fraction``)
PIECE_FRACTIONS = (0.9, 0.6)


def compile_hooi(shape: Sequence[int], ranks: Sequence[int], config: FettaConfig) -> tuple[HooiNetworks, Program]:
    """The networks of one iteration and their program: without zero padding, and with it when it
    would change a mode (:func:`gen.compiler.layout.split_modes`); chunk pieces sharing runs, and
    each in a run of its own (``run_per_piece``); a chain piece that is cut again running the chain
    on its own pieces or not (``fuse_nested``); a shared prefix (and the last chain's result) kept on
    chip in its pieces for the step that contracts their cut, or not (``pin``: the prefix then never
    goes to DRAM); chunk pieces of up to 90 % or 60 % of a half (:data:`PIECE_FRACTIONS`: smaller
    pieces shorten the first load, which no compute hides; a pinned variant that does not compile,
    a later unit of its pieces not fitting or mapping at its rows, is dropped); the fewer cycles end
    to end (lowered to DMA jobs,
    :func:`gen.compiler.dma.hardware_cycles`) kept, and its options once more with the planner's
    wider lookahead (:data:`gen.compiler.phases.WIDE_LOOKAHEAD`: a nested piece's first TTM then
    leaves its result in a layout the second splits over all CEs, 32^4). The tensor's DRAM image has
    mode 0 as its lane: no chain contracts mode 0 first (``docs/hooi.md``)."""
    nets = hooi_networks(shape, ranks)
    pads = [False]
    if any(padded_size(s, config.lanes) != s for s in (*shape, *ranks)):
        pads.append(True)

    def compiled(pad: bool, per_piece: bool, nested: bool, pin: bool, fraction: float,
                 wide: bool = False) -> Program | None:
        try:
            prog = compile_networks(nets.networks, config, derived=nets.derived, pad=pad, paths=nets.paths,
                                    saved=nets.saved, run_per_piece=per_piece, image_lanes={"T": "i0"},
                                    fuse_nested=nested, pin=pin, piece_fraction=fraction,
                                    **({"lookahead": WIDE_LOOKAHEAD} if wide else {}))
        except CompileError:
            if not pin:
                raise
            return None             # a later unit of pinned pieces does not fit or map at its rows
        prog.variant = dict(pad=pad, per_piece=per_piece, nested=nested, pin=pin, fraction=fraction)
        return prog

    def key(p: Program) -> tuple[int, int]:
        return hardware_cycles(p, config), p.est_cycles       # kept on the program: lowered once

    progs = [compiled(*v) for v in itertools.product(pads, (False, True), (False, True), (False, True),
                                                       PIECE_FRACTIONS)]
    best = min((p for p in progs if p is not None), key=key)
    wide = compiled(**best.variant, wide=True)
    return nets, best if wide is None else min([best, wide], key=key)

@dataclass
class HooiIteration:
    """One iteration: fit, accelerator timing (TTM chains and core, DRAM counted), host SVD cost."""

    fit: float
    cycles: int
    compute_cycles: int
    dram_stall_cycles: int
    dram_bytes: int
    utilization: float
    #: the Jacobi SVDs of the iteration on a ``vector_lanes``-wide unit (:func:`jacobi_cycles`)
    svd_cycles: int
    svd_rotations: int
    svd_seconds: float


@dataclass
class HooiRun:
    """A whole decomposition: the result, one record per iteration, and the program's figures."""

    core: np.ndarray
    factors: list[np.ndarray]
    iterations: list[HooiIteration]
    program: Program
    networks: HooiNetworks
    rtl_equal: bool | None = None
    #: relative error of rounding the tensor to bfloat16 (``||T - bf16(T)|| / ||T||``)
    rounding: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def fits(self) -> list[float]:
        return [it.fit for it in self.iterations]

    @property
    def relayouts(self) -> int:
        """Explicit permutations per iteration: re-layouts through the host, transposes on the way
        through DRAM (:meth:`Program.host_transposes`) and on-chip identity GEMMs."""
        p = self.program
        return p.relayouts + p.host_transposes() + p.onchip_relayouts

    def summary(self, config: FettaConfig) -> dict:
        """The ``fetta hooi --json`` fields (INTERFACES section 5: ``fit``, ``cycles``, ``utilization``,
        ``relayouts``; the rest documented in ``docs/hooi.md``)."""
        its = self.iterations
        cycles = sum(it.cycles for it in its)
        p = self.program
        out = {"fit": self.fits, "cycles": cycles, "utilization": p.macs * len(its) / (cycles * config.macs),
               "relayouts": self.relayouts, "cycles_per_iter": its[-1].cycles,
               "compute_cycles": sum(it.compute_cycles for it in its),
               "dram_stall_cycles": sum(it.dram_stall_cycles for it in its),
               "dram_bytes": sum(it.dram_bytes for it in its),
               "compute_utilization": p.macs * len(its) / (sum(it.compute_cycles for it in its) * config.macs),
               "macs_per_iter": p.macs, "padded_macs_per_iter": p.padded_macs,
               "ttms_per_iter": self.networks.ttms, "ttms_without_reuse": self.networks.ttms_plain,
               "host_relayouts": p.relayouts, "host_transposes": p.host_transposes(),
               "onchip_relayouts": p.onchip_relayouts, "dataflows": p.dataflows(), "transposes": p.transposes,
               "runs_per_iter": len(p.runs), "jobs_per_iter": self.extra.get("jobs"), "dram": "dma",
               "svd": {"where": "host", "sweeps": self.extra.get("sweeps"), "start": self.extra.get("start"),
                       "cycles": sum(it.svd_cycles for it in its),
                       "rotations": sum(it.svd_rotations for it in its),
                       "seconds": round(sum(it.svd_seconds for it in its), 3)},
               "bf16_rounding": self.rounding,
               "iterations": [dict(fit=it.fit, cycles=it.cycles, compute_cycles=it.compute_cycles,
                                   dram_stall_cycles=it.dram_stall_cycles, dram_bytes=it.dram_bytes,
                                   utilization=it.utilization, svd_cycles=it.svd_cycles) for it in its]}
        if self.rtl_equal is not None:
            out["rtl_equal"] = self.rtl_equal
        return out


def run_hooi(T: np.ndarray, ranks: Sequence[int], iters: int, config: FettaConfig, *, seed: int = 0,
             sim: str = "emulator", sweeps: int = 1, warm: bool = True,
             init: Sequence[np.ndarray] | None = None,
             progress: Callable[[int], None] | None = None,
             compiled: tuple[HooiNetworks, Program] | None = None, lowered: DmaProgram | None = None) -> HooiRun:
    """HOOI of ``T`` to multilinear rank ``ranks``, ``iters`` iterations (module docstring).

    ``init``: the initial factors (orthonormal columns; default :func:`orthonormal_factors` of
    ``seed``). ``sweeps``: Jacobi sweeps per SVD; ``warm``: start each SVD from the factor it
    replaces (seed 004 Alg. 3) instead of the identity. ``progress(n)`` advances a bar by ``n``
    jobs (``iters * len(lowered.jobs)`` in all). ``compiled``: :func:`compile_hooi`'s result, and
    ``lowered``: its program's :func:`gen.compiler.dma.lower_dma`, if the caller has them."""
    T = np.asarray(T, np.float32)
    Tq = round_to_bf16_f32(T)
    nets, prog = compiled if compiled is not None else compile_hooi(T.shape, ranks, config)
    dprog = lowered if lowered is not None else lower_dma(prog, config)
    d = T.ndim
    U = [round_to_bf16_f32(np.asarray(u, np.float32)) for u in
         (init if init is not None else orthonormal_factors(T.shape, ranks, seed))]
    records: list[HooiIteration] = []
    rtl = None
    core = np.zeros(tuple(ranks), np.float32)
    for _ in range(iters):
        V: list[np.ndarray | None] = [None] * d
        svd = {"cycles": 0, "rotations": 0, "seconds": 0.0}

        def derive(name: str, Y: np.ndarray) -> np.ndarray:
            n = int(name[1:])
            A = np.moveaxis(Y, n, 0).reshape(T.shape[n], -1)
            t0 = time.perf_counter()
            res = jacobi_left(A, ranks[n], sweeps, start=U[n] if warm else None)
            svd["seconds"] += time.perf_counter() - t0
            svd["cycles"] += jacobi_cycles(A.shape[0], A.shape[1], sweeps, config.vector_lanes, warm)
            svd["rotations"] += res.rotations
            V[n] = round_to_bf16_f32(res.U.astype(np.float32))
            return V[n]

        inputs = {"T": Tq, **{f"U{m}": U[m] for m in range(d)}}
        ex = execute_dma(dprog, inputs, config, progress=None if progress is None else lambda: progress(1),
                         derive=derive)
        if sim != "emulator":
            rtl = rtl_check_dma(ex, config, sim)
        core = ex.results["G"].astype(np.float32)
        U = [v for v in V]
        t = ex.timeline
        records.append(HooiIteration(fit=fit_of(Tq, core, U), cycles=t.cycles, compute_cycles=t.compute_cycles,
                                     dram_stall_cycles=t.dram_stall_cycles, dram_bytes=t.dram_bytes,
                                     utilization=prog.macs / (t.cycles * config.macs),
                                     svd_cycles=svd["cycles"], svd_rotations=svd["rotations"],
                                     svd_seconds=svd["seconds"]))
    rounding = float(np.linalg.norm(T.astype(np.float64) - Tq) / max(np.linalg.norm(T.astype(np.float64)), 1e-300))
    return HooiRun(core, U, records, prog, nets, rtl, rounding,
                   extra={"sweeps": sweeps, "start": "warm" if warm else "cold", "jobs": len(dprog.jobs)})


def hooi_float64(T: np.ndarray, ranks: Sequence[int], iters: int, init: Sequence[np.ndarray],
                 sweeps: int | None = 1, warm: bool = True) -> tuple[list[float], np.ndarray, list[np.ndarray]]:
    """The same HOOI in float64 on the host, no accelerator, no rounding (the reference of the tests
    and benchmarks): ``(fits, core, factors)``. ``sweeps=None``: exact SVD (``numpy.linalg.svd``)."""
    T = np.asarray(T, np.float64)
    U = [np.asarray(u, np.float64) for u in init]
    d = T.ndim
    fits = []
    core = None
    for _ in range(iters):
        for n in range(d):
            Y = T
            for m in reversed(range(d)):
                if m != n:
                    Y = np.moveaxis(np.tensordot(U[m].T, Y, axes=(1, m)), 0, m)
            A = np.moveaxis(Y, n, 0).reshape(T.shape[n], -1)
            if sweeps is None:
                U[n] = np.linalg.svd(A, full_matrices=False)[0][:, :ranks[n]]
            else:
                U[n] = jacobi_left(A, ranks[n], sweeps, start=U[n] if warm else None).U
        core = T
        for m in range(d):
            core = np.moveaxis(np.tensordot(U[m].T, core, axes=(1, m)), 0, m)
        fits.append(fit_of(T, core, U))
    return fits, core, U


__all__ = ["HooiIteration", "HooiRun", "compile_hooi", "fit_of", "hooi_float64", "low_rank_tensor",
           "orthonormal_factors", "reconstruct", "run_hooi"]
