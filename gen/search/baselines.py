"""Fixed and restricted contraction orders that the CSSE is compared with.

All baselines return SSA paths over a :class:`gen.workload.network.Network` (INTERFACES
section 3). The *source* operand is the network's first input (``X`` in FP and
WG, ``dY`` in BP); the other inputs are the weight operands (and ``dY`` in WG).

``left_to_right`` (TIE-style, FETTA section III-A "Scheme-1")
    Absorb the inputs one by one in storage order: ``[0, 1], [n, 2], [n+1, 3], ..``.
``right_to_left``
    The same chain from the other end: ``[n-1, n-2], [n, n-3], ..`` (the source absorbed last).
``ette`` (ETTE, seed 002, section 4.1: elimination then expansion)
    Elimination: the source absorbs the cores that share a mode with it (the
    cores carrying the modes being eliminated); expansion: then the remaining
    inputs. Within each phase the cores go in chain (index) order, and at each
    step the first one connected to the running tensor is taken (an unconnected
    one only when none is connected), so no needless outer product appears.
    ETTE's extra rule (cores by size, ``size(A_1) >= size(A_2) ..``) belongs to
    its core *construction*; with fixed cores of near-uniform size, ETTE's own
    assumption, it reduces to chain order.
``btt`` (bidirectional TT, seed 003, section IV-B)
    The cores sharing a mode with the source ("left" group) are merged among
    themselves from the lowest-numbered core inwards, the others ("right" group)
    from the highest-numbered core inwards, both without the source; then
    ``source x left`` and that times ``right``. When every core shares a mode with
    the source (``ttm``, ``dense``) the cores are split into halves by index. In
    WG the second activation (``dY``) is merged with the right group first.
``tetrix`` (Tetrix-style, FETTA section III-A)
    The source is the fixed start and absorbs one node at a time, preferring
    connected nodes; the best absorption order is found exactly (DP over the
    set of absorbed nodes), as Tetrix's breadth-first search does.
``best_mac``
    The CSSE stage-1 optimum.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from gen.workload.network import Network, path_macs
from gen.search.csse import best_path

BASELINES = ("left_to_right", "ette", "btt", "tetrix", "best_mac")
#: every named order :func:`baseline_path` knows (``right_to_left`` is not in the search's report)
ORDERS = BASELINES + ("right_to_left",)


def _size(net: Network, i: int) -> int:
    return math.prod(net.sizes[m] for m in net.inputs[i].modes)


def _chain(n: int, order: Sequence[int], start: int | None = None) -> tuple[list[list[int]], int]:
    """Absorb ``order`` into ``start`` (or into ``order[0]``); returns path and the result id."""
    path: list[list[int]] = []
    order = list(order)
    cur = order.pop(0) if start is None else start
    nxt = n
    for j in order:
        path.append([cur, j])
        cur = nxt
        nxt += 1
    return path, cur


class _Builder:
    """Builds an SSA path step by step while tracking the live tensors' modes."""

    def __init__(self, net: Network):
        self.net = net
        self.modes = {i: set(op.modes) for i, op in enumerate(net.inputs)}
        self.nxt = len(net.inputs)
        self.path: list[list[int]] = []

    def join(self, a: int, b: int) -> int:
        ma, mb = self.modes.pop(a), self.modes.pop(b)
        keep = set(self.net.output)
        for m in self.modes.values():
            keep |= m
        self.modes[self.nxt] = (ma | mb) & keep
        self.path.append([a, b])
        self.nxt += 1
        return self.nxt - 1

    def connected(self, a: int, b: int) -> bool:
        return bool(self.modes[a] & self.modes[b])

    def absorb(self, cur: int, order: Sequence[int]) -> int:
        """``cur`` absorbs ``order``, taking the first connected one each time."""
        todo = list(order)
        while todo:
            pick = next((j for j in todo if self.connected(cur, j)), todo[0])
            todo.remove(pick)
            cur = self.join(cur, pick)
        return cur

    def merge(self, order: Sequence[int]) -> int | None:
        """Merge a group among itself in the given order (first connected next)."""
        if not order:
            return None
        order = list(order)
        cur = order.pop(0)
        return self.absorb(cur, order)


def left_to_right(net: Network) -> list[list[int]]:
    n = len(net.inputs)
    return _chain(n, list(range(n)))[0] if n > 1 else []


def right_to_left(net: Network) -> list[list[int]]:
    n = len(net.inputs)
    return _chain(n, list(reversed(range(n))))[0] if n > 1 else []


def _groups(net: Network) -> tuple[list[int], list[int]]:
    src = set(net.inputs[0].modes) - {"b"}
    others = list(range(1, len(net.inputs)))
    left = [i for i in others if set(net.inputs[i].modes) & src]
    right = [i for i in others if i not in left]
    return left, right


def ette(net: Network) -> list[list[int]]:
    if len(net.inputs) < 2:
        return []
    left, right = _groups(net)
    b = _Builder(net)
    b.absorb(0, sorted(left) + sorted(right))
    return b.path


def btt(net: Network) -> list[list[int]]:
    if len(net.inputs) < 2:
        return []
    names = [op.name for op in net.inputs]
    acts = [i for i, nm in enumerate(names) if nm in ("X", "dY")]
    cores = [i for i in range(len(names)) if i not in acts]
    src_modes = set(net.inputs[0].modes) - {"b"}
    left = [i for i in cores if set(net.inputs[i].modes) & src_modes]
    right = [i for i in cores if i not in left]
    if not right and len(left) > 1:
        half = (len(left) + 1) // 2
        left, right = left[:half], left[half:]
    b = _Builder(net)
    L = b.merge(sorted(left))
    R = b.merge(sorted(right, reverse=True))
    cur = 0
    if L is not None:
        cur = b.join(cur, L)
    second = [i for i in acts if i != 0]
    if second:
        R = second[0] if R is None else b.join(second[0], R)
    if R is not None:
        cur = b.join(cur, R)
    return b.path


def tetrix(net: Network) -> list[list[int]]:
    """Best order of absorbing every node into the source (exact DP over absorbed sets)."""
    n = len(net.inputs)
    if n < 2:
        return []
    sizes = net.sizes
    masks = [set(op.modes) for op in net.inputs]
    out = set(net.output)
    full = (1 << n) - 1

    def modes_of(S: int) -> set[str]:
        inside: set[str] = set()
        outside: set[str] = set(out)
        for i in range(n):
            (inside if S >> i & 1 else outside).update(masks[i])
        return inside & outside

    best = {1: (0, [])}
    for S in sorted(range(1, full + 1), key=lambda s: bin(s).count("1")):
        if not S & 1 or S not in best:
            continue
        cost, order = best[S]
        cur = modes_of(S)
        rest = [j for j in range(1, n) if not S >> j & 1]
        conn = [j for j in rest if cur & masks[j]]
        for j in (conn or rest):
            step = math.prod(sizes[m] for m in cur | masks[j])
            T = S | 1 << j
            cand = (cost + step, order + [j])
            if T not in best or cand < best[T]:
                best[T] = cand
    order = best[full][1]
    return _chain(n, order, start=0)[0]


def best_mac(net: Network) -> list[list[int]]:
    return best_path(net)


_FUNCS = {"left_to_right": left_to_right, "right_to_left": right_to_left, "ette": ette, "btt": btt, "tetrix": tetrix,
          "best_mac": best_mac}


def baseline_path(name: str, net: Network) -> list[list[int]]:
    return _FUNCS[name](net)


def baselines_for(spec, phase: str, nets: Sequence[Network]) -> dict[str, Any]:
    """Every baseline on every network of a phase: path(s) and MACs (JSON-ready)."""
    out: dict[str, Any] = {}
    for name in BASELINES:
        paths = {net.label: baseline_path(name, net) for net in nets}
        macs = {net.label: path_macs(net, p) for net, p in zip(nets, paths.values())}
        out[name] = {"path": paths[nets[0].label] if len(nets) == 1 else paths,
                     "macs": sum(macs.values())}
    dense = dense_layer_macs(spec, phase)
    for name in BASELINES:
        out[name]["reduction_vs_dense"] = round(dense / out[name]["macs"], 4)
    return out


def dense_layer_macs(spec, phase: str) -> int:
    """MACs of the uncompressed layer in ``phase`` (``batch * I * O`` per GEMM; ``train`` = 3 GEMMs)."""
    return spec.batch * spec.I * spec.O * (3 if phase == "train" else 1)


__all__ = ["BASELINES", "ORDERS", "left_to_right", "right_to_left", "ette", "btt", "tetrix", "best_mac", "baseline_path", "baselines_for",
           "dense_layer_macs"]
