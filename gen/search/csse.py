"""Contraction sequence search engine (CSSE), after FETTA section IV-A.

Stage 1 finds the ``K`` cheapest *distinct* pairwise contraction trees of a
:class:`gen.workload.network.Network` under the INTERFACES section 3 cost (MACs = the
product of the sizes of all distinct modes of the two operands), outer
products allowed. It is **exact**: the first candidate is the true optimum and
the ``k``-th is the true ``k``-th best tree. Stage 2 (:func:`search`) ranks the
stage-1 candidates with the analytical model (:mod:`gen.model`) by latency,
energy or EDP.

Algorithm (instead of the paper's plain depth-first search, which visits about
6.6e16 orders for 14 nodes):

1. Every subset ``S`` of the inputs contracts to the same tensor ``T(S)``
   whatever the order: its modes are those of ``S`` that also appear outside
   ``S`` or in the output. So the optimum is a dynamic programme over subsets:
   ``best[S] = min over splits S = A + B of best[A] + best[B] + cost(A, B)``
   with ``cost(A, B) = |T(A)| |T(B)| / |T(A) & T(B)|`` (the union of modes).
2. Branch and bound: any tree using ``T(S)`` as a proper subtree costs at
   least ``best[S] + |T(S)|`` (the step consuming ``T(S)`` touches all its
   elements), so subsets whose bound exceeds a cap (first the greedy order's
   cost, a valid upper bound) are dropped. This removes most large outer
   products. Each subset-size level is evaluated with numpy either densely
   (all splits of all subsets, ``3^n / 2`` pairs over the whole run) or
   sparsely (pairs of surviving subsets), whichever is less work.
3. K-best: lazy K-best derivation of the split hypergraph (Huang and Chiang,
   "Better k-best parsing", 2005, algorithm 3). A tree is identified by the
   set of its subtrees, so two derivations differing in any split are
   distinct trees. If fewer than ``K`` trees cost at most the cap, the cap is
   raised and the search repeated; trees within the cap are never pruned, so
   the list is exact.

Costs are carried as float64 (exact for integer MAC counts below 2**53 ~ 9e15);
the reported ``macs`` are recomputed from each path with
:func:`gen.workload.network.path_macs` in exact integers.

A tree is turned into an SSA path (opt_einsum convention) by a post-order
walk: the subtree holding the lower-numbered input is emitted first.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from gen.errors import FettaError
from gen.workload.network import Network, path_macs, path_steps, phase_networks
from gen.workload.network import greedy_path
from gen.progress import progress

#: stage-1 cost kinds: ``macs`` (INTERFACES section 3), ``opt_einsum`` (its flop
#: count: union size, doubled when the step sums over an index; used to check
#: this search against ``opt_einsum.paths.optimal``) or ``lanes`` (the PE cycles of
#: an output-stationary grid of ``lanes``-wide CEs, lane padding included: :func:`lane_pad`)
COSTS = ("macs", "opt_einsum", "lanes")
METRICS = ("flops", "latency", "energy", "edp")
#: the exact search keeps arrays over all 2**n subsets
MAX_NODES = 22
#: elements per numpy block in the dense level evaluation
_CHUNK = 1 << 20


class SearchError(FettaError):
    """A network the search cannot handle (names the field)."""

    kind = "search"


@dataclass(frozen=True)
class Candidate:
    """One contraction tree found by stage 1."""

    path: tuple[tuple[int, int], ...]   #: SSA path
    macs: int                           #: exact MACs recomputed from the path
    cost: float                         #: stage-1 cost (equals ``macs`` for cost ``macs``)

    def as_list(self) -> list[list[int]]:
        return [list(p) for p in self.path]


# --------------------------------------------------------------------------------
# Subset tables
# --------------------------------------------------------------------------------
class _Tables:
    """Arrays over all ``2**n`` subsets: result modes (bit mask) and result size."""

    def __init__(self, net: Network, cost: str, lanes: int = 4):
        n = len(net.inputs)
        if n > MAX_NODES:
            raise SearchError(f"{n} inputs; the exact search handles at most {MAX_NODES}", field="network")
        if cost not in COSTS:
            raise SearchError(f"unknown cost {cost!r} (known: {', '.join(COSTS)})", field="cost")
        self.n, self.cost_kind = n, cost
        names = list(dict.fromkeys(m for op in net.inputs for m in op.modes))
        if len(names) > 64:  # size-1 modes change no product: leave them out of the masks
            names = [m for m in names if net.sizes[m] > 1]
        if len(names) > 64:
            raise SearchError(f"{len(names)} modes larger than 1; at most 64 supported", field="network")
        bit = {m: i for i, m in enumerate(names)}
        self.mode_size = np.array([float(net.sizes[m]) for m in names] + [1.0] * (64 - len(names)))
        # products of mode sizes for each byte of a mask
        # (highest mode first, as a product built by adding the lowest bit last would be)
        byte = np.arange(256)
        self._tables = []
        for j in range(8):
            t = np.ones(256)
            for b in reversed(range(8)):
                t = np.where(byte >> b & 1, t * self.mode_size[8 * j + b], t)
            self._tables.append(t)
        # the lane padding of each mode (:func:`lane_pad`): its minimum over each byte of a mask
        pad = np.array([_pad(net.sizes[m], lanes) for m in names] + [np.inf] * (64 - len(names)))
        self._pads = []
        for j in range(8):
            t = np.full(256, np.inf)
            for b in range(8):
                t = np.where(byte >> b & 1, np.minimum(t, pad[8 * j + b]), t)
            self._pads.append(t)
        self.lanes = lanes
        in_masks = [sum(1 << bit[m] for m in set(op.modes) if m in bit) for op in net.inputs]
        out_mask = sum(1 << bit[m] for m in net.output if m in bit)
        N = 1 << n
        or_in = np.zeros(1, dtype=np.uint64)
        pc = np.zeros(1, dtype=np.int8)
        for mk in in_masks:
            or_in = np.concatenate([or_in, or_in | np.uint64(mk)])
            pc = np.concatenate([pc, pc + 1])
        full = N - 1
        idx = np.arange(N, dtype=np.int64)
        self.tm = or_in & (or_in[full ^ idx] | np.uint64(out_mask))
        # an input keeps all its modes (a mode found only there is summed by the step that uses it)
        for i, mk in enumerate(in_masks):
            self.tm[1 << i] = np.uint64(mk)
        self.tsize = self.msize(self.tm)
        self.pc = pc
        self.full = full
        order = np.argsort(pc, kind="stable")
        counts = np.bincount(pc, minlength=n + 1)
        starts = np.concatenate([[0], np.cumsum(counts)])
        self.levels = [order[starts[m]:starts[m + 1]] for m in range(n + 1)]

    def msize(self, mask: np.ndarray) -> np.ndarray:
        out = self._tables[0][(mask & np.uint64(255)).astype(np.int64)]
        for j in range(1, 8):
            part = (mask >> np.uint64(8 * j)) & np.uint64(255)
            if part.any():
                out = out * self._tables[j][part.astype(np.int64)]
        return out

    def pair_cost(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """Stage-1 cost of contracting ``T(A)`` with ``T(B)`` (vectorised)."""
        ta, tb = self.tm[A], self.tm[B]
        shared = ta & tb
        c = self.tsize[A] * self.tsize[B] / self.msize(shared)
        if self.cost_kind == "opt_einsum":
            inner = (shared & ~self.tm[A | B]) != 0
            c = c * np.where(inner, 2.0, 1.0)
        elif self.cost_kind == "lanes":
            c = c * self.mpad(ta & ~tb) * self.mpad(tb & ~ta)
        return c

    def mpad(self, mask: np.ndarray) -> np.ndarray:
        """:func:`lane_pad` of the modes of each mask (``lanes`` for none)."""
        out = np.full(mask.shape, np.inf)
        for j in range(8):
            part = (mask >> np.uint64(8 * j)) & np.uint64(255)
            out = np.minimum(out, self._pads[j][part.astype(np.int64)])
        return np.where(np.isfinite(out), out, float(self.lanes))


def _splits(S: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """All unordered splits ``(A, B)`` of the subsets ``S`` (each of popcount ``m``).

    ``A`` always holds the lowest bit of ``S``. Shapes: ``(len(S), 2**(m-1) - 1)``.
    """
    cnt = len(S)
    bits = ((S[:, None] >> np.arange(63, dtype=np.int64)) & 1).astype(bool)
    rows, cols = np.nonzero(bits)
    pos = cols.reshape(cnt, m)
    low = np.int64(1) << pos[:, 0]
    subs = np.zeros((cnt, 1), dtype=np.int64)
    for j in range(1, m):
        v = (np.int64(1) << pos[:, j])[:, None]
        subs = np.concatenate([subs, subs | v], axis=1)
    A = subs[:, :-1] | low[:, None]
    return A, S[:, None] ^ A


# --------------------------------------------------------------------------------
# Stage 1
# --------------------------------------------------------------------------------
class _Solver:
    def __init__(self, tables: _Tables):
        self.t = tables

    def run(self, cap: float) -> np.ndarray:
        """``best[S]`` for every subset whose bound ``best[S] + |T(S)|`` is within ``cap`` (else inf)."""
        t = self.t
        n, N = t.n, 1 << t.n
        best = np.full(N, np.inf)
        singles = np.int64(1) << np.arange(n, dtype=np.int64)
        best[singles] = 0.0
        viable: list[np.ndarray] = [np.zeros(0, np.int64), singles[t.tsize[singles] <= cap]]
        if n == 1:
            return best
        for m in range(2, n + 1):
            level = t.levels[m]
            dense_work = len(level) * ((1 << (m - 1)) - 1)
            sparse_work = sum(len(viable[a]) * len(viable[m - a]) for a in range(1, m // 2 + 1))
            if dense_work <= sparse_work:
                per = max(1, _CHUNK // max(1, (1 << (m - 1))))
                for s0 in range(0, len(level), per):
                    S = level[s0:s0 + per]
                    A, B = _splits(S, m)
                    c = best[A] + best[B]
                    ok = np.isfinite(c)
                    if not ok.any():
                        continue
                    c[ok] += t.pair_cost(A[ok], B[ok])
                    best[S] = c.min(axis=1)
            else:
                for a in range(1, m // 2 + 1):
                    VA, VB = viable[a], viable[m - a]
                    if not len(VA) or not len(VB):
                        continue
                    ia, ib = np.nonzero((VA[:, None] & VB[None, :]) == 0)
                    if not len(ia):
                        continue
                    A, B = VA[ia], VB[ib]
                    c = best[A] + best[B] + t.pair_cost(A, B)
                    np.minimum.at(best, A | B, c)
            S = level
            if m < n:
                bad = best[S] + t.tsize[S] > cap
            else:
                bad = best[S] > cap
            best[S[bad]] = np.inf
            viable.append(S[np.isfinite(best[S])])
        return best


class _KBest:
    """Lazy K-best trees over the split hypergraph (Huang and Chiang, algorithm 3)."""

    def __init__(self, tables: _Tables, best: np.ndarray):
        self.t, self.best = tables, best
        self.D: dict[int, list[tuple[float, int, int, int, int]]] = {}
        self.heap: dict[int, list] = {}
        self.stream: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]] = {}
        self.pcost: dict[tuple[int, int], float] = {}
        self.seen: dict[int, set] = {}

    def _init(self, S: int) -> None:
        self.D[S] = []
        self.heap[S] = []
        self.seen[S] = set()
        m = int(self.t.pc[S])
        A, B = _splits(np.array([S], dtype=np.int64), m)
        A, B = A[0], B[0]
        c = self.best[A] + self.best[B]
        ok = np.isfinite(c)
        A, B = A[ok], B[ok]
        pc = self.t.pair_cost(A, B)
        tot = c[ok] + pc
        order = np.lexsort((A, tot))
        self.stream[S] = (A[order], B[order], pc[order], tot[order], [0])
        self._push_stream(S)

    def _push_stream(self, S: int) -> None:
        A, B, pc, tot, ptr = self.stream[S]
        k = ptr[0]
        if k < len(A):
            a, b = int(A[k]), int(B[k])
            self.pcost[(a, b)] = float(pc[k])
            self.seen[S].add((a, b, 0, 0))
            heapq.heappush(self.heap[S], (float(tot[k]), a, b, 0, 0, True))
            ptr[0] = k + 1

    def get(self, S: int, k: int):
        if S & (S - 1) == 0:  # a single input: exactly one derivation
            return (0.0, 0, 0, 0, 0) if k == 0 else None
        if S not in self.D:
            self._init(S)
        D, heap = self.D[S], self.heap[S]
        while len(D) <= k:
            if not heap:
                return None
            c, a, b, i, j, from_stream = heapq.heappop(heap)
            D.append((c, a, b, i, j))
            if from_stream:
                self._push_stream(S)
            for i2, j2 in ((i + 1, j), (i, j + 1)):
                key = (a, b, i2, j2)
                if key in self.seen[S]:
                    continue
                self.seen[S].add(key)
                ea, eb = self.get(a, i2), self.get(b, j2)
                if ea is not None and eb is not None:
                    heapq.heappush(heap, (ea[0] + eb[0] + self.pcost[(a, b)], a, b, i2, j2, False))
        return D[k]

    def tree(self, S: int, k: int):
        if S & (S - 1) == 0:
            return S.bit_length() - 1
        _, a, b, i, j = self.get(S, k)
        return (self.tree(a, i), self.tree(b, j))


def tree_to_path(tree, n: int) -> list[list[int]]:
    """SSA path of a nested-pair tree whose leaves are input numbers."""
    path: list[list[int]] = []
    nxt = [n]

    def emit(node) -> int:
        if isinstance(node, int):
            return node
        a, b = emit(node[0]), emit(node[1])
        path.append([a, b])
        nxt[0] += 1
        return nxt[0] - 1

    emit(tree)
    return path


def _pad(size: int, lanes: int) -> float:
    """Lanes a mode of ``size`` takes per useful one: ``ceil(size / lanes) * lanes / size``."""
    return -(-size // lanes) * lanes / size


def lane_pad(sizes: Sequence[int], lanes: int = 4) -> float:
    """The lane padding of the best lane among modes of ``sizes``, ``lanes`` when there is none (one
    useful lane of ``lanes``). A pairwise step output-stationary on ``lanes`` x ``lanes`` PEs takes
    ``macs * lane_pad(free modes of A) * lane_pad(free modes of B)`` PE cycles at best: its M and N
    lanes are a free mode of each operand, padded to a multiple of ``lanes`` (UCF TR-14's rank-5
    lanes: 1.6). A mode larger than ``lanes`` counts as split (:func:`gen.compiler.layout.split_modes`
    makes 20 a 5 x 4): only its padding to a multiple of ``lanes`` counts."""
    return min((_pad(s, lanes) for s in sizes), default=float(lanes))


def path_cost(net: Network, path: Sequence[Sequence[int]], cost: str = "macs", lanes: int = 4) -> float:
    """Stage-1 cost of a path: exact integers for ``macs`` and ``opt_einsum`` flops; ``lanes``: every
    step's MACs times the lane padding of its operands' free modes (:func:`lane_pad`)."""
    if cost == "macs":
        return path_macs(net, path)
    total = 0
    for s in path_steps(net, path):
        lhs, rhs = set(s.lhs_modes), set(s.rhs_modes)
        if cost == "lanes":
            total += s.macs * lane_pad([net.sizes[m] for m in lhs - rhs], lanes) \
                * lane_pad([net.sizes[m] for m in rhs - lhs], lanes)
        else:
            total += s.macs * (2 if (lhs & rhs) - set(s.out_modes) else 1)
    return total


def _greedy_cost(net: Network, cost: str, lanes: int) -> float:
    return float(path_cost(net, greedy_path(net), cost, lanes))


def search_network(net: Network, top_k: int = 1, cost: str = "macs", lanes: int = 4) -> list[Candidate]:
    """Stage 1: the ``top_k`` cheapest distinct contraction trees of ``net``, cheapest first.

    Exact (see the module docstring). Fewer than ``top_k`` are returned only when the
    network has fewer distinct trees. ``lanes``: the CE width of cost ``lanes``.
    """
    if top_k < 1:
        raise SearchError(f"must be >= 1, got {top_k}", field="top_k")
    n = len(net.inputs)
    if n == 1:
        return [Candidate((), 0, 0.0)]
    tables = _Tables(net, cost, lanes)
    cap = _greedy_cost(net, cost, lanes) * (1 + 1e-9)
    while True:
        best = _Solver(tables).run(cap)
        kb = _KBest(tables, best)
        found = []
        for k in range(top_k):
            e = kb.get(tables.full, k)
            if e is None or e[0] > cap:
                break
            found.append(kb.tree(tables.full, k))
        if len(found) == top_k or math.isinf(cap):
            break
        # fewer than K trees within the cap: the K-th best may lie above it
        cap = cap * 16 if cap * 16 < 1e300 else math.inf
    out = []
    for tree in found:
        path = tree_to_path(tree, n)
        out.append(Candidate(tuple(tuple(p) for p in path), path_macs(net, path),
                             float(path_cost(net, path, cost, lanes))))
    return out


def best_path(net: Network) -> list[list[int]]:
    """The MAC-optimal SSA path of ``net``. Kept per network: a compiler comparing variants of a
    layer searches the same networks again (a fresh list each call; callers may change it)."""
    key = (net.phase, net.target, net.inputs, net.output, tuple(sorted(net.sizes.items())), net.result_shape,
           net.term, net.terms)
    found = _BEST_PATHS.get(key)
    if found is None:
        if len(_BEST_PATHS) >= 4096:
            _BEST_PATHS.clear()
        found = _BEST_PATHS[key] = tuple(tuple(p) for p in search_network(net, 1)[0].as_list())
    return [list(p) for p in found]


#: :func:`best_path`'s paths by network
_BEST_PATHS: dict[tuple, tuple[tuple[int, ...], ...]] = {}


# --------------------------------------------------------------------------------
# Training-aware search (beyond the paper)
# --------------------------------------------------------------------------------
def _tree_subsets(path: Sequence[Sequence[int]], n: int) -> list[int]:
    """The input subsets (bit masks) of the intermediate results of an SSA path."""
    sets = {i: 1 << i for i in range(n)}
    nxt = n
    out = []
    for i, j in path:
        s = sets.pop(i) | sets.pop(j)
        sets[nxt] = s
        out.append(s)
        nxt += 1
    return out


def _wg_with_saved(net: Network, saved: dict[int, int]) -> tuple[float, list[int]]:
    """Optimal MACs of a WG network when the subsets in ``saved`` are free (already computed).

    Returns the cost and the saved subsets the optimum uses. A plain (uncapped)
    subset DP; WG networks are small.
    """
    t = _Tables(net, "macs")
    n, N = t.n, 1 << t.n
    best = np.full(N, np.inf)
    best[np.int64(1) << np.arange(n, dtype=np.int64)] = 0.0
    choice = np.zeros(N, dtype=np.int64)
    free = np.zeros(N, dtype=bool)
    for s in saved:
        free[s] = True
    for m in range(2, n + 1):
        S = t.levels[m]
        if not len(S):
            continue
        A, B = _splits(S, m)
        c = best[A] + best[B] + t.pair_cost(A, B)
        k = c.argmin(axis=1)
        best[S] = c[np.arange(len(S)), k]
        choice[S] = A[np.arange(len(S)), k]
        fs = S[free[S]]
        best[fs] = 0.0
    used: list[int] = []

    def walk(S: int) -> None:
        if S & (S - 1) == 0:
            return
        if free[S]:
            used.append(S)
            return
        a = int(choice[S])
        walk(a)
        walk(S ^ a)

    walk(N - 1)
    return float(best[N - 1]), used


def _map_subset(src: Network, dst: Network, mask: int) -> int | None:
    """The subset of ``dst``'s inputs naming the same operands as ``mask`` of ``src`` (or None)."""
    pos = {op.name: i for i, op in enumerate(dst.inputs)}
    out = 0
    for i, op in enumerate(src.inputs):
        if mask >> i & 1:
            if op.name not in pos:
                return None
            out |= 1 << pos[op.name]
    return out


def training_aware(spec, top_k: int = 16, show_progress: bool = False) -> dict[str, Any]:
    """Choose FP/BP orders together with the WG orders (beyond the paper).

    An intermediate ``T(S)`` of the FP (or BP) tree over operands ``S`` is exactly
    the tensor the WG network of core ``k`` gets from the same operands when
    ``core_k`` is not in ``S`` (both keep the modes shared with the rest of the
    layer), so saving it in FP lets WG skip recomputing it. This search takes the
    top-``K`` FP and BP trees (stage 1) and, for every pair, each WG network's
    optimum with the saved tensors free; it minimises total train-step MACs, then
    the bytes of saved intermediates. Compared with per-phase search (each phase
    optimal on its own, no reuse) and per-phase trees with reuse afterwards.
    Only single-term formats (not ``bt`` with several blocks) are handled.
    """
    fp = phase_networks(spec, "fp")
    bp = phase_networks(spec, "bp")
    wg = phase_networks(spec, "wg")
    if len(fp) != 1:
        raise SearchError("training-aware search handles single-term layers only", field="blocks")
    fp, bp = fp[0], bp[0]
    t0 = time.perf_counter()
    fpc = search_network(fp, top_k)
    bpc = search_network(bp, top_k)
    elem = 2  # bytes per stored bfloat16 element

    def evaluate(fc: Candidate, bc: Candidate):
        fsets = _tree_subsets(fc.as_list(), len(fp.inputs))[:-1]
        bsets = _tree_subsets(bc.as_list(), len(bp.inputs))[:-1]
        total = fc.macs + bc.macs
        saved_bytes = 0
        saved_names: set[tuple[str, ...]] = set()
        wg_paths = {}
        for w in wg:
            avail: dict[int, int] = {}
            for src, sets in ((fp, fsets), (bp, bsets)):
                for s in sets:
                    d = _map_subset(src, w, s)
                    if d is not None and d & (d - 1):
                        avail[d] = s
            cost, used = _wg_with_saved(w, avail)
            total += int(round(cost))
            for u in used:
                names = tuple(sorted(w.inputs[i].name for i in range(len(w.inputs)) if u >> i & 1))
                if names not in saved_names:
                    saved_names.add(names)
                    t = _Tables(w, "macs")
                    saved_bytes += int(t.tsize[u]) * elem
            wg_paths[w.label] = cost
        return total, saved_bytes, sorted(saved_names)

    per_phase_wg = sum(search_network(w, 1)[0].macs for w in wg)
    per_phase_total = fpc[0].macs + bpc[0].macs + per_phase_wg
    reuse_total, reuse_bytes, _ = evaluate(fpc[0], bpc[0])
    best = None
    with progress(len(fpc) * len(bpc), "training-aware search", show_progress) as advance:
        for fc in fpc:
            for bc in bpc:
                total, sb, names = evaluate(fc, bc)
                key = (total, sb)
                if best is None or key < best[0]:
                    best = (key, fc, bc, names)
                advance(1)
    (total, sb), fc, bc, names = best
    return {
        "spec": spec.name, "format": spec.format, "top_k": top_k,
        "per_phase": {"macs": per_phase_total, "fp": fpc[0].macs, "bp": bpc[0].macs, "wg": per_phase_wg},
        "per_phase_with_reuse": {"macs": reuse_total, "saved_bytes": reuse_bytes},
        "joint": {"macs": total, "saved_bytes": sb, "fp_path": fc.as_list(), "bp_path": bc.as_list(),
                  "fp_macs": fc.macs, "bp_macs": bc.macs, "saved": [list(n) for n in names]},
        "gain_vs_per_phase": round(per_phase_total / total, 4),
        "gain_vs_per_phase_with_reuse": round(reuse_total / total, 4),
        "seconds": round(time.perf_counter() - t0, 4),
    }


__all__ = ["COSTS", "METRICS", "Candidate", "SearchError", "search_network", "best_path",
           "training_aware", "tree_to_path", "path_cost", "lane_pad"]
