"""Routing of the distribution and reduction networks: pattern in, control words out.

The compiler asks for a *pattern* and gets the per-level control words that the RTL
takes (``hdl/dist_net.py``, ``hdl/red_net.py``), in the section V-D form
``control = sel_vec XOR bank_idx`` (see :mod:`gen.design.netsem` for the exact topology).
Both networks are blocking butterflies: a pattern that cannot be routed raises
:class:`RoutingError` naming the outputs that collide and where. Every returned
configuration has been run through the Python network model and checked against the
request, so a mis-route is an exception, never a silent wrong answer.

Distribution (:func:`route_dist`)
    ``sources[j]`` is the input port that output port ``j`` must read (``None``: don't
    care). With ``transpose=True`` the inputs are the *transposed* ports: port
    ``g*L + l`` is lane ``l`` of the ``L`` banks ``g*L .. g*L+L-1`` (a column).
    One input may feed many outputs (multicast); :func:`sources_from_map` turns an
    "input -> outputs" map into ``sources``.

Reduction (:func:`route_red`)
    ``groups`` is a list of ``(first_port, size, dest)``: the aligned group of ``size``
    (a power of two, ``first_port % size == 0``) input ports is summed, lane by lane,
    and the sum leaves at output port ``dest`` (before the optional transpose layer).
    ``size == 1`` moves one port unchanged. Inputs in no group are ignored.

Control words
    ``ctrl`` (distribution): per level ``s``, an N-bit mask, bit ``x`` = multiplexer of
    node ``x`` takes the diagonal input. ``modes`` (reduction): per level, the 2-bit mode
    of each of the N/2 adder switches. ``sel_vec`` / ``mode_vec`` are those words with the
    bank-index bit of each level already XORed out, so that the RTL, which computes
    ``sel_vec XOR bank_idx``, reproduces ``ctrl`` / ``modes``. ``port_value()`` packs them
    for the RTL's control ports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from gen.design import netsem as nm

from gen.errors import FettaError


class RoutingError(FettaError, ValueError):
    """A pattern the network cannot carry (blocking) or a malformed request."""

    kind = "routing"


def _ports(ports: int) -> int:
    try:
        return nm.log2_exact(ports)
    except ValueError as exc:
        raise RoutingError(str(exc), field="ports") from None


# === distribution network ============================================================
@dataclass(frozen=True)
class DistRoute:
    """Control of the distribution network for one pattern.

    Attributes
    ----------
    ports : number of ports N.
    sources : the request, ``sources[j]`` = input read by output ``j`` (or ``None``).
    ctrl : effective per-level multiplexer masks.
    transpose : whether the transpose layer is on.
    bank_idx : the bank index the RTL XORs in (section V-D).
    sel_vec : ``ctrl`` with the bank-index bits XORed out.
    """

    ports: int
    sources: tuple[int | None, ...]
    ctrl: tuple[int, ...]
    transpose: bool
    bank_idx: int
    sel_vec: tuple[int, ...]

    def port_value(self) -> int:
        """``sel_vec`` packed for the RTL port: level ``s``, node ``x`` at bit ``s*N + x``."""
        return sum(v << (s * self.ports) for s, v in enumerate(self.sel_vec))


def sources_from_map(ports: int, mapping: Mapping[int, Iterable[int]]) -> list[int | None]:
    """``{input: [outputs...]}`` -> ``sources`` list; an output claimed twice is an error."""
    sources: list[int | None] = [None] * ports
    for i, outs in mapping.items():
        if not 0 <= i < ports:
            raise RoutingError(f"input port {i} out of range 0..{ports - 1}", field="pattern")
        for o in outs:
            if not 0 <= o < ports:
                raise RoutingError(f"output port {o} out of range 0..{ports - 1}", field="pattern")
            if sources[o] is not None and sources[o] != i:
                raise RoutingError(f"output {o} requested from both input {sources[o]} and input {i}",
                                   field="pattern")
            sources[o] = i
    return sources


def route_dist(ports: int, sources: Sequence[int | None], *, transpose: bool = False,
               bank_idx: int = 0) -> DistRoute:
    """Control words that make output ``j`` read input ``sources[j]``; :class:`RoutingError` if blocking."""
    n = _ports(ports)
    if len(sources) != ports:
        raise RoutingError(f"expected {ports} entries, got {len(sources)}", field="sources")
    if not 0 <= bank_idx < ports:
        raise RoutingError(f"must be in 0..{ports - 1}, got {bank_idx}", field="bank_idx")
    for j, src in enumerate(sources):
        if src is not None and not 0 <= src < ports:
            raise RoutingError(f"output {j}: input port {src} out of range 0..{ports - 1}", field="sources")
    # node value of level s (after s levels): which input it carries, and for whom
    carry: list[dict[int, tuple[int, int]]] = [dict() for _ in range(n + 1)]
    ctrl = [0] * n
    for j, src in enumerate(sources):
        if src is None:
            continue
        x = j
        for s in reversed(range(n)):
            # node x at level s+1 must carry src
            seen = carry[s + 1].get(x)
            if seen is not None and seen[0] != src:
                raise RoutingError(
                    f"blocking: output {j} (from input {src}) and output {seen[1]} (from input {seen[0]}) "
                    f"both need node {x} after level {s} (address bit {nm.dist_bit(s, n)})", field="pattern")
            carry[s + 1][x] = (src, j)
            k = nm.dist_bit(s, n)
            if ((x ^ src) >> k) & 1:
                ctrl[s] |= 1 << x
                x ^= 1 << k
        assert x == src
    # Nodes that feed no requested output are don't-cares. Give each the sel_vec bit of a
    # used node with the same destination-side address bits (those already decided at this
    # level), so that sel_vec depends on the destination only: then the same sel_vec with
    # another bank_idx re-targets the whole pattern (section V-D), e.g. a broadcast from
    # bank b is the broadcast sel_vec with bank_idx = b.
    sel = []
    for s in range(n):
        bank_bit = (bank_idx >> nm.dist_bit(s, n)) & 1
        dest_mask = ((1 << n) - 1) ^ ((1 << nm.dist_bit(s, n)) - 1)
        by_dest: dict[int, int] = {}
        for x in sorted(carry[s + 1]):
            by_dest.setdefault(x & dest_mask, ((ctrl[s] >> x) & 1) ^ bank_bit)
        word = 0
        for x in range(ports):
            bit = ((ctrl[s] >> x) & 1) ^ bank_bit if x in carry[s + 1] else by_dest.get(x & dest_mask, 0)
            word |= bit << x
        sel.append(word)
    sel_vec = tuple(sel)
    ones = (1 << ports) - 1
    ctrl = [v ^ (ones if (bank_idx >> nm.dist_bit(s, n)) & 1 else 0) for s, v in enumerate(sel_vec)]
    route = DistRoute(ports, tuple(sources), tuple(ctrl), bool(transpose), bank_idx, sel_vec)
    verify_dist(route)
    return route


def verify_dist(route: DistRoute) -> None:
    """Run ``route`` through the network model; raise :class:`RoutingError` on any mis-route."""
    N = route.ports
    n = nm.log2_exact(N)
    ctrl = nm.effective_ctrl(route.sel_vec, route.bank_idx, n, width=N)
    got = nm.dist_sources(N, ctrl)
    tags = [[p] for p in range(N)]  # one lane whose value names its input port
    out, _ = nm.dist_forward(tags, [1] * N, ctrl)
    for j, src in enumerate(route.sources):
        if src is not None and (got[j] != src or out[j][0] != src):
            raise RoutingError(f"internal mis-route: output {j} reads input {got[j]}, requested {src}",
                               field="pattern")


# === reduction network ===============================================================
@dataclass(frozen=True)
class RedRoute:
    """Control of the reduction network for one pattern.

    Attributes
    ----------
    ports : number of ports N.
    groups : the request, ``(first_port, size, dest)`` triples.
    modes : effective per-level adder-switch modes (N/2 per level).
    transpose : whether the transpose layer (output side) is on.
    bank_idx : the bank index the RTL XORs into mode bit 0.
    mode_vec : ``modes`` with the bank-index bits XORed out.
    """

    ports: int
    groups: tuple[tuple[int, int, int], ...]
    modes: tuple[tuple[int, ...], ...]
    transpose: bool
    bank_idx: int
    mode_vec: tuple[tuple[int, ...], ...]

    def port_value(self) -> int:
        """``mode_vec`` packed for the RTL port: level ``s``, switch ``p`` at bits ``2*(s*N/2 + p)``."""
        half = self.ports // 2
        return sum(m << (2 * (s * half + p)) for s, lvl in enumerate(self.mode_vec) for p, m in enumerate(lvl))


def route_red(ports: int, groups: Sequence[tuple[int, int, int]], *, transpose: bool = False,
              bank_idx: int = 0) -> RedRoute:
    """Adder-switch modes that sum each aligned group into its ``dest``; :class:`RoutingError` if blocking."""
    n = _ports(ports)
    if not 0 <= bank_idx < ports:
        raise RoutingError(f"must be in 0..{ports - 1}, got {bank_idx}", field="bank_idx")
    owner: dict[int, int] = {}
    dests: dict[int, int] = {}
    for gi, (first, size, dest) in enumerate(groups):
        if size < 1 or size & (size - 1) or size > ports:
            raise RoutingError(f"group {gi}: size {size} is not a power of two in 1..{ports}", field="groups")
        if first % size or not 0 <= first < ports:
            raise RoutingError(f"group {gi}: ports {first}..{first + size - 1} are not an aligned group "
                               f"of {size} (the butterfly sums aligned groups only)", field="groups")
        if not 0 <= dest < ports:
            raise RoutingError(f"group {gi}: destination {dest} out of range 0..{ports - 1}", field="groups")
        if dest in dests:
            raise RoutingError(f"groups {dests[dest]} and {gi} both go to output {dest}", field="groups")
        dests[dest] = gi
        for p in range(first, first + size):
            if p in owner:
                raise RoutingError(f"groups {owner[p]} and {gi} both contain port {p}", field="groups")
            owner[p] = gi
    # position -> group of the partial sum (or item) that sits there
    pos: dict[int, int] = dict(owner)
    modes: list[list[int]] = []
    for s in range(n):
        k = nm.red_bit(s, n)
        level = []
        nxt: dict[int, int] = {}
        for p in range(ports // 2):
            lo, hi = nm.switch_nodes(p, k)
            a, b = pos.get(lo), pos.get(hi)
            if a is not None and a == b:
                # two partial sums of one group still being reduced: add toward the destination's bit
                dbit = (groups[a][2] >> k) & 1
                level.append(nm.ADD_RIGHT if dbit else nm.ADD_LEFT)
                nxt[hi if dbit else lo] = a
                continue
            want = {}
            if a is not None:
                want["lo"] = nm.SWAP if (groups[a][2] >> k) & 1 else nm.PASS
            if b is not None:
                want["hi"] = nm.PASS if (groups[b][2] >> k) & 1 else nm.SWAP
            if len(set(want.values())) > 1:
                ga, gb = groups[a], groups[b]
                raise RoutingError(
                    f"blocking: the sums for outputs {ga[2]} (group at {ga[0]}) and {gb[2]} (group at {gb[0]}) "
                    f"meet at the adder switch of nodes {lo},{hi} in level {s} (address bit {k}) and need "
                    f"{nm.MODE_NAMES[want['lo']]} vs {nm.MODE_NAMES[want['hi']]}", field="groups")
            mode = next(iter(want.values()), None)  # None: empty switch, a don't-care (below)
            level.append(mode)
            for node, g in ((lo, a), (hi, b)):
                if g is not None:
                    nxt[node ^ (1 << k) if mode == nm.SWAP else node] = g
        # Empty switches take the mode_vec of a used switch with the same source-side address
        # bits (those above this level's bit), so that mode_vec depends on the sources only:
        # then the same mode_vec with another bank_idx re-targets the sums (section V-D).
        bank_bit = (bank_idx >> k) & 1
        by_src: dict[int, int] = {}
        for p, mode in enumerate(level):
            if mode is not None:
                by_src.setdefault(p >> k, mode ^ bank_bit)
        level = [by_src.get(p >> k, 0) ^ bank_bit if mode is None else mode for p, mode in enumerate(level)]
        modes.append(level)
        pos = nxt
    mode_vec = tuple(tuple(m ^ ((bank_idx >> nm.red_bit(s, n)) & 1) for m in lvl) for s, lvl in enumerate(modes))
    route = RedRoute(ports, tuple(tuple(g) for g in groups), tuple(tuple(l) for l in modes), bool(transpose),
                     bank_idx, mode_vec)
    verify_red(route)
    return route


def verify_red(route: RedRoute) -> None:
    """Check ``route`` with the symbolic and the numeric model; :class:`RoutingError` on a mis-route."""
    N = route.ports
    n = nm.log2_exact(N)
    modes = nm.red_effective_modes(route.mode_vec, route.bank_idx, n)
    active = [p for first, size, _ in route.groups for p in range(first, first + size)]
    sym = nm.red_symbolic(N, modes, active)
    want: list[frozenset[int] | None] = [None] * N
    for first, size, dest in route.groups:
        want[dest] = frozenset(range(first, first + size))
    # numeric: input p carries 2**p, so every output value spells the set it summed
    data = [[1 << p] for p in range(N)]
    valid = [int(p in set(active)) for p in range(N)]
    out, ov = nm.red_forward(data, valid, modes, add=nm.int_adder(N + 1))
    for j in range(N):
        num = frozenset(p for p in range(N) if (out[j][0] >> p) & 1) if ov[j] else None
        if sym[j] != want[j] or num != want[j]:
            raise RoutingError(f"internal mis-route: output {j} gets {sorted(sym[j] or [])}, "
                               f"requested {sorted(want[j] or [])}", field="groups")


# === pattern families the compiler uses ==============================================
def shift_sources(ports: int, c: int) -> list[int]:
    """Unicast cyclic shift: input ``i`` goes to output ``(i + c) mod N``."""
    return [(j - c) % ports for j in range(ports)]


def xor_sources(ports: int, m: int) -> list[int]:
    """Unicast XOR permutation: output ``j`` reads input ``j ^ m`` (bank-index relocation)."""
    return [j ^ m for j in range(ports)]


def multicast_sources(ports: int, fanout: int, srcs: Sequence[int] | None = None) -> list[int]:
    """Each aligned group ``q`` of ``fanout`` outputs reads one input ``srcs[q]`` (default: input ``q``)."""
    if fanout < 1 or fanout & (fanout - 1) or fanout > ports:
        raise RoutingError(f"fanout {fanout} is not a power of two in 1..{ports}", field="fanout")
    groups = ports // fanout
    srcs = list(range(groups)) if srcs is None else list(srcs)
    if len(srcs) != groups:
        raise RoutingError(f"expected {groups} sources, got {len(srcs)}", field="srcs")
    return [srcs[j // fanout] for j in range(ports)]


def reduction_groups(ports: int, size: int, offset: int = 0) -> list[tuple[int, int, int]]:
    """All aligned groups of ``size`` summed; group ``q``'s sum goes to output ``q*size + offset``."""
    if not 0 <= offset < size:
        raise RoutingError(f"offset must be in 0..{size - 1}, got {offset}", field="offset")
    return [(q * size, size, q * size + offset) for q in range(ports // size)]


def packed_reduction_groups(ports: int, size: int) -> list[tuple[int, int, int]]:
    """All aligned groups of ``size`` summed into consecutive outputs ``0, 1, ...`` (compaction)."""
    return [(q * size, size, q) for q in range(ports // size)]


__all__ = ["RoutingError", "DistRoute", "RedRoute", "route_dist", "route_red", "verify_dist", "verify_red",
           "sources_from_map", "shift_sources", "xor_sources", "multicast_sources", "reduction_groups",
           "packed_reduction_groups"]
