"""Analytical estimate of FETTA: cycles, memory traffic and energy of contraction paths.

This is the contraction search's stage-2 heuristic (:func:`gen.search.search` ranks candidate paths
with it) and what ``fetta model --analytical`` prints; it is not a timing source. What
``fetta model`` reports, for FETTA and for every baseline, is the compiled program of a capability
set (:mod:`gen.compiler.capabilities`, :func:`gen.compiler.estimate.model_compiled`), timed by the
rules the emulator and the RTL follow. There is no per-architecture formula here.

It reads the same :class:`gen.design.config.FettaConfig` as the hardware (``num_ces`` x
``ce_rows`` x ``ce_cols`` PEs, ``banks`` x ``lanes`` elements per SRAM cycle,
``unified_kb``, ``accum_kb``, ``dram_gbps``, ``freq_mhz``). FETTA's own figures came from a
ZigZag-based model (section VI-C); this is a smaller, documented model of the same kind:

Per pairwise contraction (:func:`map_step`, the entry point a compiler reuses)
    The step is viewed as a batched GEMM: modes in both operands and the result
    are *batch* (``b``), modes of the left operand only kept in the result are
    ``m``, of the right operand ``n``, and summed modes (shared, or single-sided
    and needed nowhere else) are ``k``; ``b*m*n*k`` equals the step's MACs.
    Every mapping is enumerated: a split ``(e_b, e_m, e_n, e_k)`` of the groups
    (CEs) over the four dimensions, a dataflow (``os``: ``m x n`` on the PE array,
    ``k`` in time; ``ws``: ``k x n`` stationary, ``m`` in time; ``is``: ``k x m``
    stationary, ``n`` in time) and both orientations of the
    array (FETTA's six intra-CE mappings). For one mapping:

    * compute cycles ``= e_b' * ceil(rows'/R) * ceil(cols'/C) * max(t', R) + R + C + log2(E)``
      where ``x' = ceil(x / e_x)`` per CE, ``t`` the temporal dimension; the
      ``max(t', R)`` is the double-buffered preload / drain of ``R`` cycles per tile,
      hidden unless the temporal loop is shorter; the constant is the pipeline fill;
    * unified-memory reads: the stationary operand once, a streamed operand once
      per pass over the other operand's free dimension not covered spatially
      (``|A| * ceil(n / cov_n)``, ``|B| * ceil(m / cov_m)``, ``cov_x = e_x`` times the
      PE rows/cols it occupies; the distribution network multicasts); writes: the result once;
    * accumulation-unit read-modify-writes (``ws``/``is``): ``|out| * ceil(k / cov_k)``;
      reduction-network transfers: those times ``e_k`` (``os`` with ``e_k > 1``: ``|out| * e_k``);
    * SRAM-bound cycles: accesses / (``banks * lanes``) for both memories;
    * layouts cost nothing (FETTA's transposable networks and XOR bank index).

    The mapping with the fewest cycles (then least energy) is chosen.

Per network (:func:`model_network`)
    Layer inputs are read from DRAM once, the result written once; an
    intermediate larger than half the unified memory (one ping-pong half) is
    spilled (written and read back); a step whose operands and result do not fit
    in the unified memory is tiled and re-reads its smaller operand. DRAM time is
    overlapped with compute (ping-pong): a step takes the maximum of the two.

Energy (:data:`ENERGY_PJ`): per-operation / per-access costs calibrated to the
power breakdown of FETTA's Table III (ASAP7, 1 GHz, 102.59 mW in total): a
block's power in mW is its energy per cycle in pJ; divided by the accesses that
block serves per cycle at full load it gives an energy per access. This assumes
Table III was measured at full utilisation (the paper does not say at which
load). DRAM energy is not in the text (the paper used Micron's calculator; its
numbers were lost in the extraction): we assume 4 pJ/bit for LPDDR4. The compiled
baselines use the same table (same technology, section VI-B), with their network energies scaled
(:class:`gen.compiler.capabilities.Capabilities`).

Units: ``cycles`` of ``freq_mhz``; ``dram_bytes``; ``sram_accesses`` (element
accesses of unified memory plus accumulation unit); ``energy_pj``; ``edp`` in
pJ x microseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping, Sequence

from gen.design.config import FettaConfig
from gen.design.timing import dram_bytes_per_cycle
from gen.workload.grouping import group_modes
from gen.workload.network import Network, Step, path_steps

#: energy per operation / access in pJ; see the module docstring and docs/model.md
ENERGY_PJ: dict[str, float] = {
    # Table III "CE Array" 58.22 mW over 256 MACs per cycle
    "mac": 58.22 / 256,
    # "Unified Mem." 22.34 mW over 16 banks x 4 elements per cycle
    "sram": 22.34 / 64,
    # "Accumulator" 7.33 mW over 16 banks x 4 read-modify-write adders per cycle
    "accum": 7.33 / 64,
    # "Dist. Network" 1.37 mW over 64 elements delivered per cycle
    "dist": 1.37 / 64,
    # "Redu Network" 4.88 mW over 64 partial sums per cycle
    "red": 4.88 / 64,
    # "Vector Unit" 8.45 mW over 64 lanes
    "vector": 8.45 / 64,
    # "Others" 2.70 mW: controller and clocking, per cycle
    "static": 2.70,
    # assumption (not in the paper's text): LPDDR4 at 4 pJ/bit
    "dram_byte": 4.0 * 8,
}

_DATAFLOWS = {
    # dataflow: orientations as (row dim, col dim, temporal dim)
    "os": (("m", "n", "k"), ("n", "m", "k")),
    "ws": (("k", "n", "m"), ("n", "k", "m")),
    "is": (("k", "m", "n"), ("m", "k", "n")),
}


@dataclass(frozen=True)
class Gemm:
    """A pairwise contraction viewed as a batched GEMM ``[b, m, k] x [b, k, n] -> [b, m, n]``."""

    b: int
    m: int
    n: int
    k: int
    modes: Mapping[str, tuple[str, ...]]   #: mode names of each dimension
    size_a: int
    size_b: int
    size_out: int

    @property
    def macs(self) -> int:
        return self.b * self.m * self.n * self.k


def gemm_of(step: Step, sizes: Mapping[str, int]) -> Gemm:
    """Classify the modes of a :class:`gen.workload.network.Step` into ``b, m, n, k``
    (:func:`gen.workload.grouping.group_modes`)."""
    g = group_modes(step.lhs_modes, step.rhs_modes, set(step.out_modes))
    groups = {"b": g.batch, "m": g.m, "n": g.n, "k": g.k}
    dims = {x: math.prod(sizes[y] for y in ms) for x, ms in groups.items()}
    size = lambda ms: math.prod(sizes[x] for x in ms)  # noqa: E731
    return Gemm(dims["b"], dims["m"], dims["n"], dims["k"], groups,
                size(step.lhs_modes), size(step.rhs_modes), size(step.out_modes))


@dataclass(frozen=True)
class StepMapping:
    """The chosen dataflow / tiling of one contraction and its costs.

    ``split`` gives the CEs along each GEMM dimension, ``rows``/``cols``/``temporal``
    name the dimensions on the PE array and in time, ``tile`` the per-CE extents.
    """

    dataflow: str
    rows: str
    cols: str
    temporal: str
    split: Mapping[str, int]
    tile: Mapping[str, int]
    macs: int
    compute_cycles: int
    cycles: int
    utilization: float
    sram_reads: int
    sram_writes: int
    accum_updates: int
    dist_transfers: int
    red_transfers: int
    energy_pj: float

    def to_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in self.__dict__.items()}


@lru_cache(maxsize=None)
def _splits4(E: int) -> tuple[tuple[int, int, int, int], ...]:
    divs = [d for d in range(1, E + 1) if E % d == 0]
    out = []
    for a in divs:
        for b in divs:
            for c in divs:
                if E % (a * b * c) == 0:
                    out.append((a, b, c, E // (a * b * c)))
    return tuple(out)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def map_step(step: Step, sizes: Mapping[str, int], config: FettaConfig) -> StepMapping:
    """Best mapping (dataflow, CE split, orientation) of one pairwise contraction on FETTA.

    Parameters
    ----------
    step : gen.workload.network.Step
        The contraction (from :func:`gen.workload.network.path_steps`).
    sizes : mapping
        Mode sizes (``Network.sizes``).
    config : FettaConfig
        The accelerator configuration.

    Returns
    -------
    StepMapping
        The mapping with the fewest cycles (ties: least energy), with its cycles,
        SRAM / accumulator / network traffic and energy (DRAM traffic of spills is
        added by :func:`model_network`).
    """
    g = gemm_of(step, sizes)
    dims = {"b": g.b, "m": g.m, "n": g.n, "k": g.k}
    bw = config.banks * config.lanes
    E, R, C = config.num_ces, config.ce_rows, config.ce_cols
    best: tuple | None = None
    for df, orients in _DATAFLOWS.items():
        for rd, cd, td in orients:
            for split in _splits4(E):
                e = dict(zip("bmnk", split))
                ext = {x: _cdiv(dims[x], e[x]) for x in "bmnk"}
                if any(e[x] > dims[x] for x in "bmnk"):
                    continue  # idle CEs along a dimension: a smaller split is never worse
                tiles = ext["b"] * _cdiv(ext[rd], R) * _cdiv(ext[cd], C)
                compute = tiles * max(ext[td], R) + R + C + int(math.log2(max(E, 1)))
                cov = {x: e[x] * (R if x == rd else C if x == cd else 1) for x in "bmnk"}
                reads_a = g.size_a if df == "is" else g.size_a * _cdiv(g.n, cov["n"])
                reads_b = g.size_b if df == "ws" else g.size_b * _cdiv(g.m, cov["m"])
                writes = g.size_out
                if df == "os":
                    accum = 0
                    red = g.size_out * e["k"] if e["k"] > 1 else 0
                else:
                    accum = g.size_out * _cdiv(g.k, cov["k"])
                    red = accum * e["k"]
                sram_cycles = (reads_a + reads_b + writes) / bw
                cycles = int(math.ceil(max(compute, sram_cycles, accum / bw)))
                energy = (g.macs * ENERGY_PJ["mac"]
                          + (reads_a + reads_b + writes) * ENERGY_PJ["sram"]
                          + accum * ENERGY_PJ["accum"]
                          + (reads_a + reads_b) * ENERGY_PJ["dist"]
                          + red * ENERGY_PJ["red"]
                          + cycles * ENERGY_PJ["static"])
                key = (cycles, energy)
                if best is None or key < best[0]:
                    best = (key, StepMapping(
                        df, rd, cd, td, e, ext, g.macs, compute, cycles,
                        g.macs / (config.macs * cycles), reads_a + reads_b, writes, accum,
                        reads_a + reads_b, red, energy))
    assert best is not None
    return best[1]


@dataclass
class ModelResult:
    """Totals of a network or a phase, and the per-step mappings."""

    cycles: int = 0
    macs: int = 0
    dram_bytes: int = 0
    sram_accesses: int = 0
    energy_pj: float = 0.0
    freq_mhz: float = 1000.0
    steps: list[dict[str, Any]] = field(default_factory=list)
    #: of a compiled program (:func:`gen.compiler.estimate.model_compiled`): compute alone, and the
    #: cycles the arrays wait for DRAM; ``None`` for the analytical per-step model
    compute_cycles: int | None = None
    dram_stall_cycles: int | None = None
    #: the compiled :class:`gen.compiler.program.Program` it was measured on (None: analytical)
    program: Any = field(default=None, repr=False, compare=False)

    @property
    def seconds(self) -> float:
        return self.cycles / (self.freq_mhz * 1e6)

    @property
    def edp(self) -> float:
        """Energy-delay product in pJ x microseconds."""
        return self.energy_pj * self.cycles / self.freq_mhz

    def add(self, other: "ModelResult") -> None:
        self.cycles += other.cycles
        self.macs += other.macs
        self.dram_bytes += other.dram_bytes
        self.sram_accesses += other.sram_accesses
        self.energy_pj += other.energy_pj
        self.steps.extend(other.steps)

    def summary(self) -> dict[str, Any]:
        return {"cycles": self.cycles, "macs": self.macs, "dram_bytes": self.dram_bytes,
                "sram_accesses": self.sram_accesses, "energy_pj": round(self.energy_pj, 3),
                "edp": round(self.edp, 6), "latency_us": round(self.cycles / self.freq_mhz, 6),
                "utilization": round(self.macs / max(1, self.cycles) / self._pes, 6) if self._pes else None,
                **({"compute_cycles": self.compute_cycles, "dram_stall_cycles": self.dram_stall_cycles}
                   if self.compute_cycles is not None else {})}

    _pes: int = 0


def model_network(net: Network, path: Sequence[Sequence[int]], config: FettaConfig) -> ModelResult:
    """Cycles, traffic and energy of contracting ``net`` along ``path`` (the analytical estimate)."""
    eb = (config.elem_bits + 7) // 8  # bytes per stored element (narrow ints occupy whole bytes)
    half = config.unified_kb * 1024 // eb // 2   # elements of one ping-pong half
    capacity = 2 * half
    bpc = dram_bytes_per_cycle(config)
    steps = path_steps(net, path)
    n = len(net.inputs)
    res = ModelResult(freq_mhz=config.freq_mhz, _pes=config.macs)
    for s_i, st in enumerate(steps):
        mp = map_step(st, net.sizes, config)
        g = gemm_of(st, net.sizes)
        dram = 0
        for operand, size in ((st.lhs, g.size_a), (st.rhs, g.size_b)):
            if operand < n or size > half:   # layer input, or a spilled intermediate read back
                dram += size * eb
        last = s_i == len(steps) - 1
        if last or g.size_out > half:        # final result, or an intermediate spilled
            dram += g.size_out * eb
        if g.size_a + g.size_b + g.size_out > capacity:
            small, big = sorted((g.size_a, g.size_b))
            dram += small * (_cdiv(big, half) - 1) * eb
        cycles = max(mp.cycles, int(math.ceil(dram / bpc)))
        energy = mp.energy_pj + dram * ENERGY_PJ["dram_byte"] \
            + (cycles - mp.cycles) * ENERGY_PJ["static"]
        res.cycles += cycles
        res.macs += mp.macs
        res.dram_bytes += dram
        res.sram_accesses += mp.sram_reads + mp.sram_writes + mp.accum_updates
        res.energy_pj += energy
        d = mp.to_dict()
        d.update(network=net.label, step=[st.lhs, st.rhs], cycles=cycles, dram_bytes=dram, energy_pj=energy)
        res.steps.append(d)
    return res


def add_vector_update(total: ModelResult, spec, config: FettaConfig) -> None:
    """Add the SGD update ``core -= lr * dcore`` of a ``train`` step to ``total``: one multiply-add per
    parameter on the vector unit, reading core and gradient and writing the core back."""
    p = spec.params()
    cyc = _cdiv(p, config.vector_lanes)
    total.cycles += cyc
    total.sram_accesses += 3 * p
    total.energy_pj += p * 2 * ENERGY_PJ["vector"] + 3 * p * ENERGY_PJ["sram"] + cyc * ENERGY_PJ["static"]


__all__ = ["ENERGY_PJ", "Gemm", "StepMapping", "ModelResult", "gemm_of", "map_step", "model_network",
           "add_vector_update"]
