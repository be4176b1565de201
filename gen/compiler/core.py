"""The fetta compiler: whole tensorized layers (FP, BP, WG) to instruction runs and memory images.

Pipeline (issue 6, paper sections III-B and V-B4):

1. **Networks and paths.** ``gen.workload.network.phase_networks(spec, phase)``; each network is contracted
   along the MAC-optimal SSA path of ``gen.search.best_path`` (or a path given per label).
   With ``phase="train"`` the FP and BP intermediates are kept (host side, counted as DRAM
   traffic) and every WG network is re-solved with the saved tensors as extra inputs; the
   cheaper of "with reuse" / "without" is executed (``gen.search.training_aware`` explains why
   an FP intermediate not containing ``core_k`` is exactly a WG operand of ``core_k``).
2. **Grouping.** Each pairwise step is split into batch (shared-free), m (free of A), n (free of B)
   and k (contracted) modes as :func:`gen.workload.grouping.lower_step` does. Size-1 modes of one operand
   that are summed (the boundary bonds) are pinned to index 0.
3. **Roles and layouts.** A stored tensor has a mode order whose last mode is its *lane mode*:
   one unified row holds ``lanes`` consecutive values of it (padded with zeros to a multiple of
   ``lanes``); the other modes have row strides (row-major, compact). The OS dataflow reads IA
   rows as ``ce_rows`` values of m and IB rows as ``ce_cols`` values of n, and writes result rows
   of n: so the lane of A must be an m-mode, the lane of B an n-mode, and the result's lane is
   B's lane. The compiler picks which operand is A/B, the lane of every tensor the host writes,
   and the mode order of every result (the modes the *next* step contracts are put, sorted,
   just before the lane, so that they merge into one address-generator loop in both operands).
   A tensor whose lane mode cannot serve its consumer (the lane is contracted or shared there)
   is **re-laid out by the host** (read back, permuted, written again): counted in ``relayouts``
   and ``relayout_bytes``, and its cycles (``2 * ceil(rows / banks)``: a row-parallel read and a
   write through the host port at ``banks`` rows per cycle, as LOAD/STORE move rows) are added
   to ``cycles``. An operand with no free mode at all gets a size-1 *dummy lane* (``_<n>``)
   padded to ``lanes`` (padding counted in utilization).
4. **Tiling.** Every loop of the step becomes an address-generator level with a row stride per
   operand. The compiler enumerates the CE grid ``gm x gn x gk`` (products <= ``num_ces``), the
   loop each grid index splits, the ``K`` loop (largest contracted loop), and ``L0``/``L1`` (the
   largest free loops), checks every candidate with :func:`gen.design.isa.check` (bank conflicts, ranges)
   and keeps the fastest by :func:`gen.design.isa.exec_cycles`. Loops that do not fit the three levels
   become several instructions (free loops: separate instructions; contracted loops: an
   ``ACC`` chain, write-back on the last).
5. **Allocation.** A *segment* is a run of steps on one ping-pong half with a bump allocator.
   Intermediates stay on chip while they fit; when a step does not fit, the segment closes
   (live tensors are read back = spilled, counted in ``dram_bytes``), and the next segment uses
   the other half. Programs longer than ``imem_depth - 1`` are split into several runs.
   A step that does not fit one half even alone is **chunked** over a free mode of its result
   (``Compiler._chunked``: host slices, one step per piece, host concatenation; DRAM counted).
6. **Execution.** :func:`execute` runs the compiled :class:`Program` on the emulator (or records
   the host jobs for the RTL bench). Block-term sums (``bt`` with several blocks) are added on
   the host in float64 (documented deviation: the accelerator has no vector unit yet).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from gen.design.config import FettaConfig, check_accelerator
from gen.errors import FettaError
from gen.design.isa import OVERHEAD, ErrorCode, ce_offsets, gemm_latency, Geometry, Instr, assemble, check, exec_cycles, gemm, gemm_macs, halt
from gen.workload.network import Network, Operand, Step, path_macs, path_steps, phase_networks
from gen.search.csse import best_path


class CompileError(FettaError):
    kind = "compile"


def _ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


# --------------------------------------------------------------------------------
# Layouts
# --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """Storage of one tensor in unified memory: ``modes`` in order, the last is the lane mode.

    ``ext`` are the logical (padded) extents the loops walk; the row strides may be larger
    (``align``, see :meth:`make`): ``sext`` are the storage extents they imply."""

    modes: tuple[str, ...]
    ext: tuple[int, ...]        # padded extents (lane and A-lane modes padded to ``lanes``)
    rstride: tuple[int, ...]    # row stride per mode (lane: per block of ``lanes`` values)
    rows: int
    lanes: int
    sext: tuple[int, ...] = ()  # storage extents (>= ext; the lane's in values)

    @property
    def lane(self) -> str:
        return self.modes[-1]

    def stride(self, mode: str) -> int:
        return self.rstride[self.modes.index(mode)] if mode in self.modes else 0

    @staticmethod
    def make(modes: Sequence[str], sizes: Mapping[str, int], lanes: int, padded: Sequence[str] = (),
             align: int = 0) -> "Layout":
        """Row-major layout of ``modes``. With ``align`` (= ``banks``) every row stride is rounded
        up to a power of two below ``align`` or to a multiple of ``align``: then any loop can be
        split over CEs with its stride as the spatial offset while all coarser strides stay
        multiples of the offsets' span (the XOR / bank rule of :func:`gen.design.isa.check`)."""
        modes = tuple(modes)
        ext = tuple(_ceil_to(sizes[m], lanes) if (m == modes[-1] or m in padded) else sizes[m] for m in modes)
        strides = [0] * len(modes)
        step = 1
        for i in reversed(range(len(modes))):
            strides[i] = step
            step *= ext[i] // lanes if i == len(modes) - 1 else ext[i]
            if align and i:
                step = (1 << (step - 1).bit_length()) if step < align else _ceil_to(step, align)
        sext = tuple((step if i == 0 else strides[i - 1]) // strides[i] * (lanes if i == len(modes) - 1 else 1)
                     for i in range(len(modes)))
        return Layout(modes, ext, tuple(strides), step, lanes, sext)

    def pack(self, arr: np.ndarray, arr_modes: Sequence[str]) -> np.ndarray:
        """Values ``arr`` (axes ``arr_modes``) -> rows ``[rows, lanes]`` (zeros in the padding)."""
        arr = np.asarray(arr, np.float32)
        src = list(arr_modes)
        for m in self.modes:           # dummy modes
            if m not in src:
                arr = arr[..., None]
                src.append(m)
        arr = np.transpose(arr, [src.index(m) for m in self.modes])
        full = np.zeros(self.sext, np.float32)
        full[tuple(slice(0, s) for s in arr.shape)] = arr
        # rows: row-major over modes, lane blocked
        full = full.reshape(*self.sext[:-1], self.sext[-1] // self.lanes, self.lanes)
        return full.reshape(self.rows, self.lanes)

    def unpack(self, rows: np.ndarray, sizes: Mapping[str, int]) -> np.ndarray:
        """Rows -> values with axes ``self.modes`` (padding dropped)."""
        full = np.asarray(rows).reshape(self.sext)
        return full[tuple(slice(0, sizes[m]) for m in self.modes)]


# --------------------------------------------------------------------------------
# Mapping one GEMM onto the address generators and the CE grid
# --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Lp:
    """One loop level: trip count and row strides of A, B and the output."""

    name: str
    trip: int
    a: int
    b: int
    o: int


def _merge(loops: list[Lp]) -> list[Lp]:
    """Fuse loops ``x`` (outer) and ``y`` (inner) when ``x``'s strides are ``y.trip`` times ``y``'s
    in all three tensors: one address-generator level then walks both."""
    loops = [lp for lp in loops if lp.trip > 1]
    changed = True
    while changed:
        changed = False
        for x, y in itertools.permutations(loops, 2):
            if x.a == y.trip * y.a and x.b == y.trip * y.b and x.o == y.trip * y.o:
                loops = [lp for lp in loops if lp is not x and lp is not y]
                loops.append(Lp(f"{x.name}*{y.name}", x.trip * y.trip, y.a, y.b, y.o))
                changed = True
                break
    return loops


@dataclass
class Mapping_:
    """The chosen mapping of one step: an instruction template and the unrolled loops."""

    grid: tuple[int, int, int]
    K: Lp
    L0: Lp
    L1: Lp
    gm: Lp
    gn: Lp
    gk: Lp
    o_sk: int
    free_unroll: list[Lp]
    k_unroll: list[Lp]
    cycles: int
    instrs: int


_ONE = Lp("1", 1, 0, 0, 0)


def _split(lp: Lp, g: int) -> tuple[Lp, Lp]:
    """Split ``lp`` into a spatial index of ``g`` (inner, same strides) and the rest (outer)."""
    return (Lp(lp.name + "/s", g, lp.a, lp.b, lp.o),
            Lp(lp.name + "/t", lp.trip // g, lp.a * g, lp.b * g, lp.o * g))


def _template(m: Mapping_) -> Instr:
    return gemm(K=m.K.trip, grid=m.grid, L0=m.L0.trip, L1=m.L1.trip,
                a=(0, m.K.a, m.L0.a, m.L1.a, m.gm.a, m.gn.a, m.gk.a),
                b=(0, m.K.b, m.L0.b, m.L1.b, m.gm.b, m.gn.b, m.gk.b),
                o=(0, m.o_sk, m.L0.o, m.L1.o, m.gm.o, m.gn.o, 0), w_base=0, acc=False, wb=True)


@functools.lru_cache(maxsize=2048)
def _map_cached(free: tuple[Lp, ...], ks: tuple[Lp, ...], o_sk: int, geo: Geometry) -> tuple[Mapping_, ...]:
    """:func:`map_gemm_all`, memoized (plans of one step often share their loop nests).
    The mappings returned are shared: callers must not modify them."""
    return tuple(map_gemm_all(list(free), list(ks), o_sk, geo))


@functools.lru_cache(maxsize=1 << 14)
def _spatial_low(g: tuple[int, int, int], sm: int, sn: int, sk: int, banks: int) -> int | None:
    """Mask of the low bank bits the spatial offsets of one operand use, or None when two CEs
    read different rows of one bank."""
    offs = {im * sm + in_ * sn + ik * sk for im in range(g[0]) for in_ in range(g[1]) for ik in range(g[2])}
    banks_seen = {o % banks for o in offs}
    if len(banks_seen) != len(offs):
        return None
    mask = 0
    for b in banks_seen:
        mask |= b
    return (1 << mask.bit_length()) - 1


@functools.lru_cache(maxsize=1 << 14)
def _groups_ok(gm: int, gn: int, sm: int, sn: int, banks: int) -> bool:
    return len({(im * sm + in_ * sn) % banks for im in range(gm) for in_ in range(gn)}) == gm * gn


def _banks_ok(m: Mapping_, banks: int) -> bool:
    """Necessary conditions of :func:`gen.design.isa.check` on a mapping, cheap: the spatial offsets of
    IA / IB are distinct banks (or the same row) in the low bank bits, every temporal and unrolled
    stride a multiple of their span; the output groups write distinct banks."""
    g = m.grid
    for op in ("a", "b"):
        low = _spatial_low(g, getattr(m.gm, op), getattr(m.gn, op), getattr(m.gk, op), banks)
        if low is None:
            return False
        for lp in (m.K, m.L0, m.L1, *m.free_unroll, *m.k_unroll):
            if getattr(lp, op) & low:
                return False
    return _groups_ok(g[0], g[1], m.gm.o, m.gn.o, banks)


def map_gemm_all(free: list[Lp], ks: list[Lp], o_sk: int, geo: Geometry, keep: int = 4) -> list[Mapping_]:
    """Mappings whose template (bases 0) passes :func:`check`, fastest first: every grid, split
    loop and level assignment is costed with the timing rules of :mod:`gen.design.isa` (cheap), then
    checked in order of cycles until ``keep`` pass (the caller tries them with real bases)."""
    free = _merge(free)
    ks = _merge(ks)
    E = geo.ces
    cands: list[tuple[int, int, int, Mapping_]] = []
    grids = [(1 << a, 1 << b, 1 << c) for a in range(E.bit_length()) for b in range(E.bit_length())
             for c in range(E.bit_length()) if (1 << (a + b + c)) <= E]
    latency = gemm_latency(geo)
    for gm, gn, gk in grids:
        gk_opts = [None] if gk == 1 else [i for i, lp in enumerate(ks) if lp.trip % gk == 0]
        gm_opts = [None] if gm == 1 else [i for i, lp in enumerate(free) if lp.trip % gm == 0]
        gn_opts = [None] if gn == 1 else [i for i, lp in enumerate(free) if lp.trip % gn == 0]
        for ik, im, in_ in itertools.product(gk_opts, gm_opts, gn_opts):
            if im is not None and im == in_:
                continue
            kl = list(ks)
            fl = list(free)
            gk_lp = gm_lp = gn_lp = _ONE
            if ik is not None:
                gk_lp, kl[ik] = _split(kl[ik], gk)
            if im is not None:
                gm_lp, fl[im] = _split(fl[im], gm)
            if in_ is not None:
                gn_lp, fl[in_] = _split(fl[in_], gn)
            kl = sorted((lp for lp in kl if lp.trip > 1), key=lambda lp: -lp.trip)
            fl = sorted((lp for lp in fl if lp.trip > 1), key=lambda lp: -lp.trip)
            K = kl[0] if kl else _ONE
            k_unroll = kl[1:]
            for nlev in (2, 1, 0):
                levels = fl[:nlev] + [_ONE] * (2 - min(nlev, len(fl)))
                L0, L1 = levels[0], levels[1]
                free_unroll = fl[min(nlev, len(fl)):]
                if max(K.trip, L0.trip, L1.trip) >= 1 << 16 or \
                        max(abs(v) for v in (K.a, K.b, L0.a, L0.b, L0.o, L1.a, L1.b, L1.o,
                                             o_sk, gm_lp.a, gm_lp.b, gm_lp.o, gn_lp.a, gn_lp.b, gn_lp.o,
                                             gk_lp.a, gk_lp.b)) >= 1 << 16:
                    continue
                n = math.prod(lp.trip for lp in free_unroll + k_unroll)
                # exec_cycles of an OS GEMM (gen.design.isa timing rules) + FETCH/DECODE/CHECK
                one = (L0.trip * L1.trip - 1) * max(K.trip, geo.ce_rows) + K.trip + latency
                m = Mapping_((gm, gn, gk), K, L0, L1, gm_lp, gn_lp, gk_lp, o_sk, free_unroll, k_unroll,
                             n * (OVERHEAD + one), n)
                cands.append((m.cycles, -gm * gn * gk, len(cands), m))
    cands.sort(key=lambda c: c[:3])
    found: list[Mapping_] = []
    for *_, m in cands:
        if not _banks_ok(m, geo.banks):
            continue
        ins = _template(m)
        if check(ins, geo) != ErrorCode.NONE:
            continue
        # the unrolled loops move the bases: each stride must keep the bank/XOR rule
        if any(check(replace(ins, a_base=lp.a, b_base=lp.b), geo) != ErrorCode.NONE
               for lp in m.free_unroll + m.k_unroll):
            continue
        assert exec_cycles(ins, geo) + OVERHEAD == m.cycles // m.instrs, (m, ins)
        found.append(m)
        if len(found) >= keep:
            break
    if not found:
        raise CompileError("no mapping of a step passes the ISA checks (accumulation unit too small?)",
                           field="accum_kb")
    return found


# --------------------------------------------------------------------------------
# Compiled program
# --------------------------------------------------------------------------------
@dataclass
class Write:
    """Host writes tensor ``name`` (host store) into ``addr`` with ``layout``."""

    addr: int
    name: str
    layout: Layout


@dataclass
class Read:
    """Host reads ``layout.rows`` rows at ``addr`` into host tensor ``name`` (axes ``layout.modes``)."""

    addr: int
    name: str
    layout: Layout


@dataclass
class Run:
    """One accelerator run: host writes, a program (ending in HALT), host reads after it."""

    half: int
    writes: list[Write] = field(default_factory=list)
    program: list[Instr] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)

    @property
    def words(self) -> list[int]:
        return assemble(self.program)


@dataclass
class StepRecord:
    network: str
    step: int
    lhs: tuple[str, ...]
    rhs: tuple[str, ...]
    out: tuple[str, ...]
    roles: str
    grid: tuple[int, int, int]
    instrs: int
    macs: int
    est_cycles: int
    out_layout: tuple[str, ...]


@dataclass
class Program:
    """Everything the host does to run one phase: runs in order, and how to assemble results."""

    runs: list[Run]
    #: host-side operations between runs: (before run index, kind, args)
    host_ops: list[tuple[int, str, tuple]]
    #: target npz key -> list of (host tensor name, modes, result shape, output modes order)
    results: dict[str, list[tuple[str, tuple[str, ...], tuple[int, ...], tuple[str, ...]]]]
    sizes: dict[str, int]
    macs: int
    steps: list[StepRecord]
    relayouts: int = 0
    relayout_bytes: int = 0
    relayout_cycles: int = 0
    dram_bytes: int = 0
    onchip_bytes: int = 0
    padded_macs: int = 0
    #: steps split into pieces (``Compiler._chunked``) and host slices written for them
    chunked_steps: int = 0
    chunk_slices: int = 0
    paths: dict[str, list[list[int]]] = field(default_factory=dict)
    reused: dict[str, list[str]] = field(default_factory=dict)
    #: host-store inputs: npz key -> modes
    input_modes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: host-store inputs: npz key -> (size, padded size) per axis of the npz array (``split_modes``)
    input_pads: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    @property
    def est_cycles(self) -> int:
        """The compiler's cycle estimate: instruction timing of every step plus host re-layouts."""
        return sum(s.est_cycles for s in self.steps) + self.relayout_cycles


# --------------------------------------------------------------------------------
# The compiler
# --------------------------------------------------------------------------------
class _Tensor:
    def __init__(self, name: str, modes: tuple[str, ...]):
        self.name = name
        self.modes = modes           # logical modes (dummies included)
        self.layout: Layout | None = None
        self.addr: int | None = None  # on chip in the current segment
        self.on_host = False
        self.read_run = -1


class Compiler:
    """Compile networks into a :class:`Program` (see the module docstring)."""

    def __init__(self, config: FettaConfig, align: bool = False):
        check_accelerator(config)
        self.config = config
        self.geo = Geometry.of(config)
        self.L = config.lanes
        #: row strides aligned for multi-CE grids (``Layout.make``); 0 = compact layouts
        self.align = config.banks if align else 0
        self.elem_bytes = config.elem_bits // 8
        self.runs: list[Run] = []
        self.host_ops: list[tuple[int, str, tuple]] = []
        self.sizes: dict[str, int] = {}
        self.steps: list[StepRecord] = []
        self.stats = dict(relayouts=0, relayout_bytes=0, relayout_cycles=0, dram_bytes=0, onchip_bytes=0,
                          padded_macs=0, macs=0, chunked_steps=0, chunk_slices=0)
        self.half = 1
        self.top = 0
        self.onchip: dict[str, _Tensor] = {}
        self.dummies = 0
        self.cur: Run | None = None
        self.registry: dict[str, _Tensor] = {}
        #: real (unpadded) extents of padded split modes, see :meth:`_useful`
        self.useful: dict[str, float] = {}
        #: tensors read back when a segment closes: saved intermediates and the live operands
        self.keep: set[str] = set()
        self.live: set[str] = set()
        self._new_segment()

    # --- segments -----------------------------------------------------------------
    def _new_segment(self) -> None:
        self.half ^= 1
        self.top = 0
        self.onchip = {}
        self.cur = Run(self.half)
        self.runs.append(self.cur)

    def _close_segment(self) -> None:
        """Spill what is still needed (saved intermediates, live operands) and switch halves."""
        for t in list(self.onchip.values()):
            if t.name in self.keep or t.name in self.live:
                self._ensure_on_host(t)
            t.addr = None
        self._new_segment()

    def _ensure_on_host(self, t: _Tensor) -> None:
        """Read an on-chip tensor back (it then lives in the host store / DRAM model)."""
        if t.on_host:
            return
        assert t.addr is not None and t.layout is not None
        self.cur.reads.append(Read(t.addr, t.name, t.layout))
        self.stats["dram_bytes"] += t.layout.rows * self.L * self.elem_bytes
        t.on_host = True
        t.read_run = len(self.runs) - 1

    def _alloc(self, rows: int) -> int | None:
        base = _ceil_to(self.top, self.geo.banks)
        if base + rows > self.geo.unified_half_rows:
            return None
        self.top = base + rows
        return base

    def _place(self, t: _Tensor, layout: Layout, live: Sequence[_Tensor]) -> None:
        """Host-write ``t`` (from the host store) in ``layout``; close the segment if it does not fit."""
        addr = self._alloc(layout.rows)
        if addr is None:
            raise _NoRoom
        if t.read_run == len(self.runs) - 1:
            # its host copy is read after the current run: write it before the next one (same half)
            self.runs.append(Run(self.half))
            self.cur = self.runs[-1]
        t.layout, t.addr = layout, addr
        self.onchip[t.name] = t
        self.cur.writes.append(Write(addr, t.name, layout))
        self.stats["dram_bytes"] += layout.rows * self.L * self.elem_bytes

    # --- one step -------------------------------------------------------------------
    def _lane_choices(self, t: _Tensor, allowed: list[str]) -> list[str]:
        if t.layout is not None and t.name in self.onchip and t.layout.lane in allowed:
            return [t.layout.lane]
        if not allowed:
            return []
        # prefer little padding, then large extents
        return sorted(allowed, key=lambda m: (_ceil_to(self.sizes[m], self.L) - self.sizes[m],
                                              self.sizes[m] != self.L, -self.sizes[m], m))[:3]

    def _inner(self, t: _Tensor) -> list[str]:
        """The two row modes of an on-chip tensor with the smallest strides (the only ones a grid
        can split: the spatial offsets must be the low bank bits)."""
        lay = t.layout
        rows = sorted((lay.rstride[i], m) for i, m in enumerate(lay.modes[:-1]) if lay.ext[i] > 1)
        return [m for _, m in rows[:2]]

    def _pow2(self, m: str) -> int:
        s = self.sizes[m]
        return min(s & -s, self.geo.ces)

    def step(self, label: str, s_idx: int, A: _Tensor, B: _Tensor, keep: set[str], out_name: str,
             next_info: tuple[set[str], set[str]] | None, final: bool) -> _Tensor:
        """Compile one pairwise contraction ``A x B`` keeping modes ``keep``.

        ``next_info``: (modes of the consumer's other operand, modes the consumer keeps, that
        operand's tensor if it exists yet).
        """
        for attempt in range(2):
            mark = (len(self.runs), len(self.cur.writes), dict(self.stats), self.top, set(self.onchip),
                    len(self.host_ops))
            try:
                plan = self._best_plan(A, B, keep, next_info)
                if plan is None:
                    raise _NoAccum
                return self._emit(label, s_idx, plan, keep, out_name, final)
            except (_NoRoom, _NoAccum):
                self._rollback(mark)
                if attempt:
                    return self._chunked(label, s_idx, A, B, keep, out_name, final)
                self._close_segment()

    def _plans(self, A: _Tensor, B: _Tensor, keep: set[str], next_info):
        """Candidate plans of a step, cheapest estimate first.

        A plan is the roles (``X`` = IA operand, ``Y`` = IB operand), their lane modes and the
        modes meant to be split over the CE grid (``gm`` / ``gn`` / ``gk``). The layouts of host
        written operands and of the result are built around it: the split modes sit just above the
        lane (lowest row strides) so that their spatial offsets are the low bank bits and every
        other stride a multiple of their span (:func:`gen.design.isa.check`)."""
        sizes = self.sizes
        L = self.L
        kmodes = sorted(m for m in A.modes if m in B.modes and m not in keep)
        kprod = math.prod(sizes[m] for m in kmodes)
        out = []
        for X, Y in ((A, B), (B, A)):
            xm = [m for m in X.modes if m not in Y.modes and m in keep]
            yn = [m for m in Y.modes if m not in X.modes and m in keep]
            batch = [m for m in X.modes if m in Y.modes and m in keep]

            def ok(m: str) -> bool:
                if sizes[m] < 2 or sizes[m] % 2:
                    return False
                return all(m in self._inner(t) for t in (X, Y) if t.name in self.onchip and m in t.modes)

            for alpha in self._lane_choices(X, xm) or [None]:
                for beta in self._lane_choices(Y, yn) or [None]:
                    gms = [None] + [m for m in xm + batch if m != alpha and ok(m)]
                    gns = [None] + [m for m in yn + batch if m != beta and ok(m)]
                    gks = [None] + [m for m in kmodes if ok(m)]
                    union = set(X.modes) | set(Y.modes)
                    padded = math.prod(_ceil_to(sizes[m], L) if m in (alpha, beta) else sizes[m] for m in union)
                    padded *= (L if alpha is None else 1) * (L if beta is None else 1)
                    penalty = 0
                    for t, lane in ((X, alpha), (Y, beta)):
                        if t.name in self.onchip and (lane is None or t.layout.lane != lane):
                            penalty += 4 * -(-t.layout.rows // self.geo.banks)     # re-layout now
                    if next_info is not None and beta is not None:
                        other, nkeep = next_info[0], next_info[1]
                        if beta in other or beta not in nkeep:                    # re-layout later
                            penalty += 4 * -(-math.prod(sizes[m] for m in keep) // (L * self.geo.banks))
                    for gm_m, gn_m, gk_m in itertools.product(gms, gns, gks):
                        if gm_m is not None and gm_m == gn_m:
                            continue
                        g = 1
                        for m in (gk_m, gm_m, gn_m):
                            if m is not None:
                                g = min(self.geo.ces, g * self._pow2(m))
                        gk = min(self._pow2(gk_m), g) if gk_m else 1
                        k_eff = min(1.0, (kprod / gk) / self.geo.ce_rows)
                        est = padded / (self.config.macs * g / self.geo.ces * k_eff) + penalty
                        out.append((est, X, Y, alpha, beta, gm_m, gn_m, gk_m, penalty))
        out.sort(key=lambda p: p[0])
        return out, kmodes

    def _orders(self, X, Y, alpha, beta, gm_m, gn_m, gk_m, kmodes, keep_modes, next_info):
        """Mode orders (lane last) of the operands (host-written ones) and of the result for a plan."""
        kord = [m for m in kmodes if m != gk_m] + ([gk_m] if gk_m else [])

        def order(t_modes, lane, inner_pref):
            inner = [m for m in dict.fromkeys(inner_pref) if m is not None and m in t_modes and m != lane]
            rest = [m for m in t_modes if m != lane and m not in inner]
            head = sorted(m for m in rest if m not in kmodes)
            tail = [m for m in kord if m in rest]
            return tuple(head + tail + inner + [lane])

        xo = order(tuple(X.modes) + ((alpha,) if alpha not in X.modes else ()), alpha, (gk_m, gn_m, gm_m))
        yo = order(tuple(Y.modes) + ((beta,) if beta not in Y.modes else ()), beta, (gk_m, gm_m, gn_m))
        next_k: set[str] = set()
        first = gn_m
        if next_info is not None:
            other, nkeep = next_info[0], next_info[1]
            next_k = {m for m in keep_modes if m in other and m not in nkeep}
            # innermost: a split mode the consumer keeps free (it can split it over gm/gn there)
            if gn_m in next_k and gm_m is not None and gm_m not in next_k:
                first = gm_m
        inner = [m for m in (alpha, gn_m if first == gm_m else gm_m, first) if m is not None and m != beta]
        inner = list(dict.fromkeys(inner))
        rest = [m for m in keep_modes if m != beta and m not in inner]
        head = sorted(m for m in rest if m not in next_k)
        tail = sorted(m for m in rest if m in next_k)
        oo = tuple(head + tail + inner + [beta])
        return xo, yo, oo

    def _best_plan(self, A: _Tensor, B: _Tensor, keep: set[str], next_info, lookahead: int = 3):
        """The plan of a step: of the ``lookahead`` fastest (:meth:`_scored_plans`), the one whose
        cycles plus the best cycles of the consumer step reading its result (in the layout the
        plan gives it, the consumer's other operand as it is now) are fewest."""
        scored = self._scored_plans(A, B, keep, next_info)
        if not scored:
            return None
        if next_info is None or lookahead <= 1:
            return scored[0][1]
        other_modes, nkeep, other = next_info
        if other is None or other.name in (A.name, B.name):
            other = _Tensor("?other", tuple(sorted(other_modes)))
        best = None
        for score, plan in scored[:lookahead]:
            t = _Tensor("?out", tuple(plan["keep_modes"]))
            t.layout = plan["lo"]
            self.onchip[t.name] = t
            try:
                nxt = self._scored_plans(t, other, set(nkeep) | {m for m in t.modes if m.startswith("_")},
                                         None, tries=4)
            finally:
                del self.onchip[t.name]
            total = score + (nxt[0][0] if nxt else 10 * score)
            if best is None or total < best[0]:
                best = (total, plan)
        return best[1]

    def _scored_plans(self, A: _Tensor, B: _Tensor, keep: set[str], next_info, tries: int = 6,
                      max_tries: int = 24):
        """Evaluate plans with :func:`map_gemm_all`: ``[(cycles + re-layout penalties, plan)]``,
        fastest first.

        Plans are tried cheapest estimate first (and the unsplit fallback): at least ``tries`` of
        them, then more while a plan's estimate (which assumes its grid split is realised) is
        below half the best cycles found, up to ``max_tries``. Many equal estimates can be plans whose
        split the bank rule does not allow (the mapping then falls back to a small grid), so
        stopping after a fixed count could miss a slightly worse estimate that is realisable."""
        plans, kmodes = self._plans(A, B, keep, next_info)
        dummies: dict[str, str] = {}
        scored = []
        seen = set()
        first = plans[:tries] + [p for p in plans if p[5:8] == (None, None, None)][:1]
        best = math.inf
        for n, (est, X, Y, alpha, beta, gm_m, gn_m, gk_m, penalty) in enumerate(first + plans[tries:]):
            if n >= len(first) and (2 * est >= best or n >= max_tries):
                break
            if alpha is None:
                if X.name not in dummies:
                    dummies[X.name] = self._dummy()
                alpha = dummies[X.name]
            if beta is None:
                if Y.name not in dummies:
                    dummies[Y.name] = self._dummy()
                beta = dummies[Y.name]
            keep_modes = [m for m in dict.fromkeys(X.modes + Y.modes) if m in keep] + \
                [m for m in (alpha, beta) if m not in X.modes + Y.modes]
            xo, yo, oo = self._orders(X, Y, alpha, beta, gm_m, gn_m, gk_m, kmodes, keep_modes, next_info)
            fixed_x = X.name in self.onchip and X.layout.lane == alpha
            fixed_y = Y.name in self.onchip and Y.layout.lane == beta
            key = (X.name, alpha, beta, None if fixed_x else xo, None if fixed_y else yo, oo)
            if key in seen:
                continue
            seen.add(key)
            la = X.layout if fixed_x else Layout.make(xo, self.sizes, self.L, align=self.align)
            lb = Y.layout if fixed_y else Layout.make(yo, self.sizes, self.L, align=self.align)
            lo = Layout.make(oo, self.sizes, self.L, padded=(alpha,), align=self.align)
            free, ks = self._loops(la, lb, lo, alpha, beta, keep_modes, kmodes)
            try:
                mappings = _map_cached(tuple(free), tuple(ks), lo.stride(alpha), self.geo)
            except CompileError:
                continue
            best = min(best, mappings[0].cycles + penalty)
            scored.append((mappings[0].cycles + penalty, len(scored),
                           dict(X=X, Y=Y, alpha=alpha, beta=beta, xo=None if fixed_x else xo,
                                yo=None if fixed_y else yo, lo=lo, keep_modes=keep_modes, kmodes=kmodes,
                                mappings=mappings)))
        scored.sort(key=lambda c: c[:2])
        return [(c[0], c[2]) for c in scored]

    def _loops(self, la: Layout, lb: Layout, lo: Layout, alpha, beta, keep_modes, kmodes):
        sizes = self.sizes
        L = self.L
        free: list[Lp] = []
        ks: list[Lp] = []
        for m in keep_modes:
            if m == alpha:
                free.append(Lp(m, lo.ext[lo.modes.index(m)] // L, la.stride(m), 0, L * lo.stride(m)))
            elif m == beta:
                free.append(Lp(m, lb.ext[-1] // L, 0, lb.stride(m), lo.stride(m)))
            else:
                free.append(Lp(m, sizes[m], la.stride(m), lb.stride(m), lo.stride(m)))
        for m in kmodes:
            ks.append(Lp(m, sizes[m], la.stride(m), lb.stride(m), 0))
        return free, ks

    def _rollback(self, mark) -> None:
        """Drop the host writes of a failed attempt (they are neither executed nor counted)."""
        nruns, nwrites, stats, top, names, nops = mark
        for name in set(self.onchip) - names:     # placed by the failed attempt: never written
            self.onchip.pop(name).addr = None
        if len(self.runs) == nruns and self.cur is self.runs[-1]:
            del self.cur.writes[nwrites:]
            self.stats.update(stats)
            self.top = top
            del self.host_ops[nops:]

    # --- chunking of oversized steps --------------------------------------------------
    def _est_rows(self, modes: Sequence[str], sizes: Mapping[str, int]) -> int:
        """Rows of a tensor, every mode padded to ``lanes`` where it could be the lane (upper bound)."""
        ms = [m for m in modes if not m.startswith("_")]
        if not ms:
            return 1
        return max(math.prod(sizes[x] for x in ms if x != lane) * -(-sizes[lane] // self.L) for lane in ms) + \
            math.prod(sizes[x] for x in ms) // self.L   # slack for padding of a second (A-lane) mode

    def _chunked(self, label, s_idx, A: _Tensor, B: _Tensor, keep: set[str], out_name: str, final: bool):
        """Split a step that does not fit one half (or the accumulation unit) over a free mode of its result.

        Mode ``m`` (kept by the step) is cut into ``c`` pieces ``m@lo`` (host slices of every operand
        holding ``m``; the others are written again for every piece); each piece is an ordinary step
        (itself chunked again if it still does not fit), its result is read back, and the host
        concatenates the pieces along ``m``. Every piece therefore moves its operands and result
        through the DRAM model (counted in ``dram_bytes``).
        """
        sizes = self.sizes
        out_modes = [m for m in dict.fromkeys(A.modes + B.modes) if m in keep and not m.startswith("_")]
        budget = int(self.geo.unified_half_rows * 0.9)
        arows = lambda t, ms, sz: self._est_rows(ms, sz)  # noqa: E731
        best = None
        # the low halves of split modes (``~l``, lane-sized) only as a last resort: cutting them
        # leaves lanes of 1-2 values (padding) and multiplies the pieces
        lows = [m for m in out_modes if m.split("@")[0].endswith("~l")]
        for m in [m for m in out_modes if m not in lows] or lows:
            if sizes[m] < 2:
                continue
            for c in range(2, sizes[m] + 1):
                piece = -(-sizes[m] // c)
                sz = dict(sizes)
                sz[m] = piece
                rows = arows(A, A.modes, sz) + arows(B, B.modes, sz) + self._est_rows(out_modes, sz)
                if rows <= budget or c == sizes[m]:
                    # fewest pieces that fit; among modes, the one that fits with fewest pieces
                    key = (rows > budget, c, -sizes[m])
                    if best is None or key < best[0]:
                        best = (key, m, c)
                    break
        if best is None:
            raise CompileError(f"step {s_idx} of {label} ({A.modes} x {B.modes} -> {sorted(keep)}, sizes "
                               f"{ {m: sizes[m] for m in set(A.modes) | set(B.modes)} }) does not fit one unified half and has no free mode "
                               f"to chunk (chunking over contracted modes is not implemented)", field="unified_kb")
        _, m, c = best
        S = sizes[m]
        piece = -(-S // c)
        if self.L <= piece and _ceil_to(piece, self.L) < S:
            piece = _ceil_to(piece, self.L)    # whole lane blocks if m becomes a lane
        for t in (A, B):
            if t.name in self.onchip and not t.on_host:
                self._ensure_on_host(t)
        self.stats["chunked_steps"] += 1
        parts: list[tuple[_Tensor, str]] = []
        for lo in range(0, S, piece):
            hi = min(S, lo + piece)
            pm = f"{m}@{lo}:{hi}"     # unique per extent: mode sizes are global by name
            self.sizes[pm] = hi - lo
            ops = []
            for t in (A, B):
                if m not in t.modes:
                    ops.append(t)
                    continue
                self.dummies += 1      # a fresh suffix: slice names never collide with piece results
                st = _Tensor(f"{t.name}[{pm}]~{self.dummies}", tuple(pm if x == m else x for x in t.modes))
                st.on_host = True
                st.read_run = t.read_run
                self.host_ops.append((t.read_run, "slice", (t.name, st.name, m, pm, lo, hi)))
                ops.append(st)
                self.stats["chunk_slices"] += 1
            pkeep = {pm if x == m else x for x in keep}
            self.live = self.live | {A.name, B.name}
            res = self.step(label, s_idx, ops[0], ops[1], pkeep, f"{out_name}[{pm}]", None, True)
            parts.append((res, pm))
        out = _Tensor(out_name, tuple(out_modes))
        out.on_host = True
        out.read_run = max(r.read_run for r, _ in parts)
        self.host_ops.append((out.read_run, "concat", (out.name, out.modes, m,
                                                        tuple((r.name, pm) for r, pm in parts))))
        self.registry[out.name] = out
        return out

    def _useful(self, m: str) -> float:
        """Extent of mode ``m`` without the zero padding of :func:`split_modes` (a fraction for the
        ``~h`` half of a padded mode: the two halves multiply to the real size)."""
        if m in self.useful:
            return self.useful[m]
        base, _, rng = m.partition("@")
        if rng and base in self.useful:          # a chunk piece lo:hi of a split half
            lo, hi = (int(x) for x in rng.split(":"))
            if base.endswith("~h"):
                real = self.useful[base] * self.L       # values of the original mode
                return max(0.0, min(hi * self.L, real) - lo * self.L) / self.L
            return (hi - lo) * self.useful[base] / self.sizes[base]
        return self.sizes[m]

    def _dummy(self) -> str:
        self.dummies += 1
        name = f"_{self.dummies}"
        self.sizes[name] = 1
        return name

    def _prepare(self, t: _Tensor, lane: str, order: tuple[str, ...] | None) -> None:
        """Make ``t`` available on chip in ``order`` (``None``: already there; else a host write,
        or an explicit re-layout through the host if it is on chip with another lane)."""
        if order is None:
            return
        if t.name in self.onchip:      # lane mismatch: explicit re-layout through the host
            self._ensure_on_host(t)
            self.stats["relayouts"] += 1
            nbytes = 2 * t.layout.rows * self.L * self.elem_bytes
            self.stats["relayout_bytes"] += nbytes
            self.stats["relayout_cycles"] += 2 * -(-t.layout.rows // self.geo.banks)
            self.host_ops.append((len(self.runs) - 1, "relayout", (t.name,)))
        if lane not in t.modes:
            t.modes = t.modes + (lane,)
        self._place(t, Layout.make(order, self.sizes, self.L, align=self.align), ())

    def _fits(self, rows: Sequence[int]) -> bool:
        """Would the bump allocator place blocks of ``rows`` in the current half?"""
        top = self.top
        for r in rows:
            top = _ceil_to(top, self.geo.banks) + r
        return top <= self.geo.unified_half_rows

    def _emit(self, label, s_idx, plan: dict, keep, out_name, final):
        sizes = self.sizes
        L = self.L
        X, Y, alpha, beta, lo = plan["X"], plan["Y"], plan["alpha"], plan["beta"], plan["lo"]
        keep_modes = plan["keep_modes"]
        for m in set(X.modes) ^ set(Y.modes):
            if m not in keep_modes and sizes[m] != 1:
                raise CompileError(f"mode {m} of one operand is summed but has size {sizes[m]}", field="spec")
        need = [Layout.make(o, sizes, L, align=self.align).rows for o in (plan["xo"], plan["yo"]) if o is not None]
        if not self._fits(need + [lo.rows]):
            raise _NoRoom
        # operands on chip in the plan's layouts (host writes / re-layouts), then the result
        self._prepare(X, alpha, plan["xo"])
        self._prepare(Y, beta, plan["yo"])
        la, lb = X.layout, Y.layout
        out = _Tensor(out_name, tuple(keep_modes))
        addr = self._alloc(lo.rows)
        if addr is None:
            raise _NoRoom
        out.layout, out.addr = lo, addr
        # the plan's mappings passed with bases 0; the actual bases can still fail (the network
        # routing depends on the bank of each address): the fastest whose instructions all pass
        instrs = None
        for mp in plan["mappings"]:
            instrs = self._instructions(mp, la_addr(X), la_addr(Y), addr)
            if instrs is not None:
                break
        if instrs is None:
            raise CompileError(f"no mapping of step {s_idx} of {label} passes the ISA checks", field="program")
        self._add_instrs(instrs)
        macs = round(math.prod(self._useful(m) for m in set(X.modes) | set(Y.modes)))
        tcu = sum(gemm_macs(i, self.geo) for i in instrs)
        self.stats["macs"] += macs
        self.stats["padded_macs"] += tcu
        for i in instrs:
            # unified rows read (a row multicast to several CEs counts once) and rows written back
            reads = len(set(ce_offsets(i, "a"))) + len(set(ce_offsets(i, "b")))
            writes = i.gm * i.gn * self.geo.ce_rows
            rows = i.L0 * i.L1 * (i.K * reads + writes)
            self.stats["onchip_bytes"] += rows * L * self.elem_bytes
        self.steps.append(StepRecord(label, s_idx, X.modes, Y.modes, tuple(keep_modes),
                                     f"A={X.name} B={Y.name}", mp.grid, len(instrs), macs, mp.cycles, lo.modes))
        self.onchip[out.name] = out
        self.registry[out.name] = out
        if final:
            self._ensure_on_host(out)
        return out

    def _instructions(self, mp: Mapping_, a0: int, b0: int, w0: int) -> list[Instr] | None:
        tmpl = _template(mp)
        fu, ku = mp.free_unroll, mp.k_unroll
        instrs = []
        kidxs = list(itertools.product(*(range(lp.trip) for lp in ku)))
        for fidx in itertools.product(*(range(lp.trip) for lp in fu)):
            fa = sum(i * lp.a for i, lp in zip(fidx, fu))
            fb = sum(i * lp.b for i, lp in zip(fidx, fu))
            fo = sum(i * lp.o for i, lp in zip(fidx, fu))
            for n, kidx in enumerate(kidxs):
                ka = sum(i * lp.a for i, lp in zip(kidx, ku))
                kb = sum(i * lp.b for i, lp in zip(kidx, ku))
                ins = replace(tmpl, a_base=a0 + fa + ka, b_base=b0 + fb + kb, w_base=w0 + fo,
                              flags=(1 if n else 0) | (2 if n == len(kidxs) - 1 else 0))
                if check(ins, self.geo) != ErrorCode.NONE:
                    return None
                instrs.append(ins)
        return instrs

    def _add_instrs(self, instrs: list[Instr]) -> None:
        cap = self.geo.imem_depth - 1
        for ins in instrs:
            if len(self.cur.program) >= cap:
                self.runs.append(Run(self.half))   # same half: on-chip data stays
                self.cur = self.runs[-1]
            self.cur.program.append(ins)

    # --- networks -------------------------------------------------------------------
    def network(self, net: Network, path: Sequence[Sequence[int]], tensors: dict[str, _Tensor],
                prefix: str) -> _Tensor:
        """Compile one network along ``path``; ``tensors`` are the host-store inputs by name."""
        for m, s in net.sizes.items():
            self.sizes[m] = s
        steps = path_steps(net, path)
        live: dict[int, _Tensor] = {i: tensors[op.name] for i, op in enumerate(net.inputs)}
        consumer: dict[int, tuple[int, int]] = {}
        nxt = len(net.inputs)
        for si, st in enumerate(steps):
            consumer[st.lhs] = (si, st.rhs)
            consumer[st.rhs] = (si, st.lhs)
        step_modes = {i: op.modes for i, op in enumerate(net.inputs)}
        for si, st in enumerate(steps):
            step_modes[nxt + si] = st.out_modes
        result = None
        for si, st in enumerate(steps):
            self.live = {t.name for t in live.values()}
            A, B = live.pop(st.lhs), live.pop(st.rhs)
            keep = set(st.out_modes)
            keep |= {m for m in A.modes + B.modes if m.startswith("_")}
            me = nxt + si
            info = None
            if me in consumer:
                csi, other = consumer[me]
                info = (set(step_modes[other]), set(steps[csi].out_modes), live.get(other))
            final = si == len(steps) - 1
            result = self.step(net.label, si, A, B, keep, f"{prefix}.t{me}", info, final)
            live[me] = result
        return result

    def finish(self) -> None:
        for r in self.runs:
            r.program.append(halt())


class _NoRoom(Exception):
    pass


class _NoAccum(Exception):
    """No mapping of a step fits the accumulation unit (the step is chunked)."""


def la_addr(t: _Tensor) -> int:
    assert t.addr is not None
    return t.addr


# --------------------------------------------------------------------------------
# Whole phases
# --------------------------------------------------------------------------------
def default_paths(nets: Sequence[Network]) -> dict[str, list[list[int]]]:
    """MAC-optimal path of every network (``gen.search.best_path``)."""
    return {n.label: best_path(n) for n in nets}


#: a mode that is not a multiple of ``lanes`` is zero-padded to one (and split) if that adds at most this
PAD_WASTE = 0.25


def padded_size(size: int, lanes: int, pad: bool = True) -> int:
    """The extent :func:`split_modes` gives a mode of ``size`` (itself, or padded to a multiple of ``lanes``)."""
    p = _ceil_to(size, lanes)
    return p if pad and size > lanes and p != size and (p - size) <= PAD_WASTE * size else size


def split_modes(net: Network, lanes: int, pad: bool = True) -> Network:
    """The same network with every mode of size ``s > lanes`` that is a multiple of ``lanes`` (or
    becomes one by zero padding that adds at most :data:`PAD_WASTE`, e.g. 10 -> 12, 30 -> 32) reshaped
    into two modes ``<m>~h`` (``s / lanes``) and ``<m>~l`` (``lanes``), row-major (``i = h * lanes + l``).

    A reshape of every tensor, free for the host (no data moves) and invisible in the results
    (split modes stay adjacent in the output; padding is cropped). It gives every tensor
    lane-sized modes: a lane of exactly ``lanes`` values (one block, no padding) and small loops
    the compiler can split over the CE grid with the low bank bits (:meth:`Compiler._plans`).
    Zero padding is exact: every padded index of a result multiplies a zero of some input."""
    split = {}
    for m, sz in net.sizes.items():
        p = padded_size(sz, lanes, pad)
        if p > lanes and p % lanes == 0:
            split[m] = (f"{m}~h", f"{m}~l", p)
    if not split:
        return net

    def ren(modes: Sequence[str]) -> tuple[str, ...]:
        return tuple(x for m in modes for x in (split[m][:2] if m in split else (m,)))

    sizes: dict[str, int] = {}
    for m, sz in net.sizes.items():
        if m in split:
            h, lo, p = split[m]
            sizes[h], sizes[lo] = p // lanes, lanes
        else:
            sizes[m] = sz
    return replace(net, inputs=tuple(Operand(op.name, ren(op.modes)) for op in net.inputs),
                   output=ren(net.output), sizes=sizes)


def _useful_split(m: str, size: int, lanes: int) -> dict[str, float]:
    return {f"{m}~h": size / lanes, f"{m}~l": float(lanes)}


def _saved_subsets(net: Network, path) -> list[tuple[frozenset[str], tuple[str, ...], int]]:
    """(input names, modes, SSA id) of every intermediate of ``path``."""
    n = len(net.inputs)
    sets: dict[int, frozenset[str]] = {i: frozenset([op.name]) for i, op in enumerate(net.inputs)}
    out = []
    for si, st in enumerate(path_steps(net, path)):
        sets[n + si] = sets[st.lhs] | sets[st.rhs]
        out.append((sets[n + si], st.out_modes, n + si))
    return out


def compile_layer(spec, phase: str, config: FettaConfig, paths: Mapping[str, Sequence[Sequence[int]]] | None = None,
                  reuse: bool = True, align: bool = False, pad: bool | None = None) -> Program:
    """Compile ``phase`` (``fp``, ``bp``, ``wg`` or ``train``) of ``spec`` into a :class:`Program`.

    ``pad``: zero-pad modes to a multiple of ``lanes`` (:func:`split_modes`); ``None`` compiles
    both ways when padding would change anything and keeps the program with fewer estimated
    cycles (padding costs MACs and memory, and can force chunking).
    ``align=True`` rounds every layout's row strides (:meth:`Layout.make` ``align``); measured
    NOT to help (see ``docs/compiler.md``), so compact layouts stay the default."""
    if pad is None:
        progs = [_compile_layer(spec, phase, config, paths, reuse, align, False)]
        phases = ["fp", "bp", "wg"] if phase == "train" else [phase]
        if any(padded_size(sz, config.lanes) != sz for ph in phases for net in phase_networks(spec, ph)
               for sz in net.sizes.values()):
            progs.append(_compile_layer(spec, phase, config, paths, reuse, align, True))
        return min(progs, key=lambda p: p.est_cycles)
    return _compile_layer(spec, phase, config, paths, reuse, align, pad)


def _compile_layer(spec, phase, config, paths, reuse, align, pad) -> Program:
    phases = ["fp", "bp", "wg"] if phase == "train" else [phase]
    comp = Compiler(config, align=align)
    tensors: dict[str, _Tensor] = {}
    results: dict[str, list] = {}
    used_paths: dict[str, list[list[int]]] = {}
    saved: list[tuple[frozenset[str], tuple[str, ...], str]] = []
    reused: dict[str, list[str]] = {}
    input_modes: dict[str, tuple[str, ...]] = {}
    input_pads: dict[str, tuple[tuple[int, int], ...]] = {}
    for ph in phases:
        for net in phase_networks(spec, ph):
            orig = net
            net = split_modes(net, config.lanes, pad)
            for m, sz in orig.sizes.items():
                if padded_size(sz, config.lanes, pad) != sz:
                    comp.useful.update(_useful_split(m, sz, config.lanes))
            for op in net.inputs:
                if op.name not in tensors:
                    input_modes[op.name] = op.modes
                    oop = orig.inputs[[o.name for o in orig.inputs].index(op.name)]
                    input_pads[op.name] = tuple((sz, padded_size(sz, config.lanes, pad))
                                                for sz in orig.shape(oop))
                    t = _Tensor(op.name, op.modes)
                    t.on_host = True
                    tensors[op.name] = t
            path = None if paths is None else paths.get(net.label)
            if path is None:
                path = best_path(orig)      # the MAC-optimal path of the real (unpadded) network
            run_net = net
            names = [op.name for op in net.inputs]
            if ph == "wg" and reuse and phase == "train" and saved:
                run_net, path, used = _with_saved(net, path, saved, tensors)
                if used:
                    reused[net.label] = used
            prefix = net.label.replace(" ", "").replace("[", "_").replace("]", "")
            if phase == "train" and ph in ("fp", "bp") and net.terms == 1:
                # known before compiling: a segment closing inside this network must spill them
                comp.keep |= {f"{prefix}.t{sid}" for _, _, sid in _saved_subsets(net, path)[:-1]}
            out = comp.network(run_net, path, tensors, prefix)
            used_paths[net.label] = [list(p) for p in path]
            crop = tuple((orig.sizes[m], padded_size(orig.sizes[m], config.lanes, pad)) for m in orig.output)
            results.setdefault(net.target, []).append((out.name, out.modes, net.result_shape, net.output, crop))
            if phase == "train" and ph in ("fp", "bp") and net.terms == 1:
                for s, modes, sid in _saved_subsets(net, path)[:-1]:
                    name = f"{prefix}.t{sid}"
                    saved.append((s, modes, name))
                    comp.keep.add(name)
            tensors.update(comp.registry)
    comp.finish()
    st = comp.stats
    return Program(comp.runs, comp.host_ops, results, dict(comp.sizes), st["macs"], comp.steps,
                   relayouts=st["relayouts"], relayout_bytes=st["relayout_bytes"],
                   relayout_cycles=st["relayout_cycles"], dram_bytes=st["dram_bytes"],
                   onchip_bytes=st["onchip_bytes"], padded_macs=st["padded_macs"], paths=used_paths,
                   chunked_steps=st["chunked_steps"], chunk_slices=st["chunk_slices"],
                   reused=reused, input_modes=input_modes, input_pads=input_pads)


def _with_saved(net: Network, path, saved, tensors):
    """Re-solve a WG network with saved FP/BP intermediates as inputs, if that saves MACs."""
    names = {op.name for op in net.inputs}
    base = path_macs(net, path)
    # largest saved subsets first, disjoint, at least two inputs, strictly inside the network
    cands = sorted((s for s in saved if s[0] < names and len(s[0]) >= 2 and len(s[0]) < len(names)),
                   key=lambda s: -len(s[0]))
    chosen = []
    covered: set[str] = set()
    for s, modes, tname in cands:
        if s & covered:
            continue
        chosen.append((s, modes, tname))
        covered |= s
    if not chosen:
        return net, path, []
    inputs = [op for op in net.inputs if op.name not in covered]
    inputs += [Operand(tname, tuple(modes)) for s, modes, tname in chosen]
    if len(inputs) < 2:
        return net, path, []
    sizes = dict(net.sizes)
    red = Network(phase=net.phase, target=net.target, inputs=tuple(inputs), output=net.output, sizes=sizes,
                  result_shape=net.result_shape, term=net.term, terms=net.terms)
    # a saved tensor's modes are exactly those the WG network sees (gen.search.training_aware)
    rpath = best_path(red)
    if path_macs(red, rpath) >= base:
        return net, path, []
    for s, modes, tname in chosen:
        if tname not in tensors:
            raise CompileError(f"internal: saved tensor {tname} unknown", field="phase")
    return red, rpath, [t for _, _, t in chosen]


__all__ = ["CompileError", "Layout", "Program", "Run", "Compiler", "compile_layer", "map_gemm_all",
           "default_paths"]
