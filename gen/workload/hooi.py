"""The contractions of one HOOI iteration (Tucker decomposition, seed 004 Alg. 1 / 3) as tensor networks.

HOOI updates the factor of every mode ``n`` in turn: ``Y_n = T x_m U_m^T`` for every ``m != n`` (a
chain of tensor-times-matrix products, TTMs), then ``U_n`` = the ``r_n`` leading left singular vectors
of the mode-``n`` unfolding of ``Y_n`` (on the host, :mod:`gen.toolflow.jacobi`). After the last mode
the core is ``G = Y_{d-1} x_{d-1} U_{d-1}^T``. Every TTM is a contraction of named modes: no mode is
ever permuted into a matrix (the compiler picks the layouts and dataflows; ``docs/hooi.md``).

Mode names: ``i<k>`` the tensor's modes, ``r<k>`` the ranks. Operand names (host-store keys):

* ``T`` the tensor, ``U<m>`` the factor of mode ``m`` at the start of the iteration, ``V<m>`` the
  factor computed in this iteration (derived on the host from ``Y<m>``);
* ``Y<n>`` the TTM chain of mode ``n`` (all modes but ``n``), ``G`` the core;
* ``Z<...>`` a partial chain computed once and reused by a later mode (seed 004 V-A: for a 3-way
  tensor ``T x_2 U_2`` serves modes 0 and 1): 5 TTMs per iteration instead of 6 (3-way), 8 instead
  of 12 (4-way).

Chains apply the modes from the last to the first (seed 004: "from mode N, then N-1, ... until mode
1"); a mode already updated in this iteration uses ``V<m>``, a later one ``U<m>``. A 4-way tensor's
chains of modes 2 and 3 apply modes 1 and 0 first, so that they share ``T x_1 V_1 x_0 V_0`` as modes
0 and 1 share ``T x_3 U_3 x_2 U_2`` (a dimension tree: the same products, 8 TTMs instead of seed
004's order's 9, and no shared prefix as large as ``T x_3 U_3``, a quarter of the tensor at rank
8 of 32). The prefix a later chain starts from (its longest one an earlier chain computes) is an
intermediate of that chain's network saved for the later one
(``HooiNetworks.saved``: the chain stays one network, so the compiler can run its TTMs piece by
piece without a round trip through DRAM, and still reads the prefix back). Every network applies
its TTMs in chain order (its path is fixed, not the CSSE's): the tensor's lane (a low mode) is then
never the first mode a chain contracts, so the tensor is read in one layout by every chain (the
compiler cannot contract a lane mode).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from gen.errors import SpecError
from gen.workload.network import Network, Operand

#: orders HOOI runs for (seed 004: 3rd- and 4th-order tensors)
ORDERS = (3, 4)

Key = tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class HooiNetworks:
    """The networks of one iteration in execution order, and the host's part between them."""

    networks: tuple[Network, ...]
    #: derived factor name -> the chain result it comes from (``V1`` <- ``Y1``)
    derived: dict[str, str]
    #: network label -> its SSA path: the TTMs in chain order (module docstring)
    paths: dict[str, list[list[int]]]
    #: TTMs (pairwise tensor-times-matrix contractions) per iteration, without and with reuse
    ttms_plain: int
    ttms: int
    #: partial chains reused by a later mode: name (``Z...``) -> (the network computing it, the SSA
    #: id of that intermediate on its path)
    saved: dict[str, tuple[str, int]] = field(default_factory=dict)


def check_ranks(shape: Sequence[int], ranks: Sequence[int]) -> None:
    """:class:`SpecError` naming ``ranks`` unless there is one rank per mode, ``1 <= r_k <= I_k``."""
    if len(shape) not in ORDERS:
        raise SpecError(f"HOOI runs on tensors of order {' or '.join(map(str, ORDERS))}, got order {len(shape)} "
                        f"(shape {tuple(shape)})", field="T")
    if len(ranks) != len(shape):
        raise SpecError(f"needs one rank per mode ({len(shape)}), got {len(ranks)}", field="ranks")
    for k, (r, s) in enumerate(zip(ranks, shape)):
        if not 1 <= r <= s:
            raise SpecError(f"rank {r} of mode {k} must be between 1 and the mode's size {s}", field="ranks")
    for k, r in enumerate(ranks):
        other = math.prod(x for j, x in enumerate(ranks) if j != k)
        if r > other:
            raise SpecError(f"rank {r} of mode {k} exceeds the product of the other ranks ({other}): the "
                            f"mode-{k} unfolding of Y_{k} has at most {other} singular values", field="ranks")


def _modes(d: int, applied: set[int]) -> tuple[str, ...]:
    return tuple(f"r{k}" if k in applied else f"i{k}" for k in range(d))


def chain(n: int, d: int) -> Key:
    """The TTMs of mode ``n``'s chain in order: ``(mode, factor kind)``, ``V`` once updated. From the
    last mode to the first, except the chains of modes 2 and 3 of a 4-way tensor, which apply modes
    1 and 0 first (module docstring)."""
    order = [1, 0, 3, 2] if d == 4 and n >= 2 else reversed(range(d))
    return tuple((m, "V" if m < n else "U") for m in order if m != n)


def _zname(key: Key) -> str:
    return "Z" + "".join(f"{k}{m}" for m, k in key)


def hooi_networks(shape: Sequence[int], ranks: Sequence[int]) -> HooiNetworks:
    """The networks of one HOOI iteration on a tensor of ``shape`` (see the module docstring)."""
    check_ranks(shape, ranks)
    d = len(shape)
    sizes = {f"i{k}": s for k, s in enumerate(shape)} | {f"r{k}": r for k, r in enumerate(ranks)}
    chains = [chain(n, d) for n in range(d)]
    avail: dict[Key, str] = {(): "T"}
    nets: list[Network] = []
    derived: dict[str, str] = {}
    paths: dict[str, list[list[int]]] = {}
    ttms = 0

    saved: dict[str, tuple[str, int]] = {}

    def add(start: Key, end: Key, target: str, keep: Sequence[int] = ()) -> None:
        """The network applying the TTMs of ``end`` after ``start``; the prefixes ``end[:q]`` for
        ``q`` in ``keep`` are saved as ``Z...`` intermediates."""
        nonlocal ttms
        applied = {m for m, _ in start}
        inputs = [Operand(avail[start], _modes(d, applied))]
        for m, kind in end[len(start):]:
            inputs.append(Operand(f"{kind}{m}", (f"i{m}", f"r{m}")))
            applied.add(m)
        out = _modes(d, applied)
        nets.append(Network(phase="hooi", target=target, inputs=tuple(inputs), output=out,
                            sizes={m: sizes[m] for op in inputs for m in op.modes},
                            result_shape=tuple(sizes[m] for m in out)))
        ttms += len(inputs) - 1
        avail[end] = target
        k = len(inputs)
        paths[target] = [[0, 1]] + [[k + j, j + 2] for j in range(k - 2)]
        for q in keep:      # after the TTMs end[len(start):q]: step q - len(start) - 1
            avail[end[:q]] = _zname(end[:q])
            saved[_zname(end[:q])] = (target, k + q - len(start) - 1)

    # the prefix each chain starts from: its longest one that an earlier chain computes
    starts = {c[:max((q for q in range(len(c) + 1) for e in chains[:k] if c[:q] == e[:q]), default=0)]
              for k, c in enumerate(chains)}
    for n, ch in enumerate(chains):
        j = max(q for q in range(len(ch) + 1) if ch[:q] in avail)
        # the prefixes a later chain starts from are saved from this chain's network
        add(ch[:j], ch, f"Y{n}", [q for q in range(j + 1, len(ch)) if ch[:q] in starts])
        derived[f"V{n}"] = f"Y{n}"
    # the core: the last chain times its own (new) factor
    last = chains[-1]
    avail[last + ((d - 1, "V"),)] = "G"
    applied = set(range(d - 1))
    nets.append(Network(phase="hooi", target="G",
                        inputs=(Operand(f"Y{d - 1}", _modes(d, applied)),
                                Operand(f"V{d - 1}", (f"i{d - 1}", f"r{d - 1}"))),
                        output=_modes(d, set(range(d))),
                        sizes={m: sizes[m] for m in _modes(d, applied) + (f"i{d - 1}", f"r{d - 1}")},
                        result_shape=tuple(ranks)))
    paths["G"] = [[0, 1]]
    return HooiNetworks(tuple(nets), derived, paths, ttms_plain=d * (d - 1), ttms=ttms, saved=saved)


__all__ = ["ORDERS", "HooiNetworks", "check_ranks", "chain", "hooi_networks"]
