"""Routing function: every pattern family the compiler uses, blocking reports, completeness, V-D form."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gen.design import routing
from gen.design.routing import RoutingError, route_dist, route_red
from gen.design import netsem as nm

PORTS = [2, 4, 8, 16, 32, 64]


def dist_check(r, want):
    """Independent of the router: run the returned words through the model with tagged rows."""
    N = r.ports
    n = nm.log2_exact(N)
    ctrl = nm.effective_ctrl(r.sel_vec, r.bank_idx, n, width=N)
    rows = [[p, 100 + p] for p in range(N)]
    out, ov = nm.dist_forward(rows, [1] * N, ctrl, do_transpose=r.transpose, lanes=2)
    base = nm.transpose(rows, [1] * N, 2)[0] if r.transpose else rows
    for j, s in enumerate(want):
        if s is not None:
            assert out[j] == base[s] and ov[j] == 1, (j, s)


def red_check(r):
    N = r.ports
    n = nm.log2_exact(N)
    modes = nm.red_effective_modes(r.mode_vec, r.bank_idx, n)
    active = {p for a, s, _ in r.groups for p in range(a, a + s)}
    vals = [[3 ** p] for p in range(N)]  # base-3 digits: a sum names the exact multiset it added
    out, ov = nm.red_forward(vals, [int(p in active) for p in range(N)], modes, add=lambda a, b: a + b)
    dests = set()
    for a, s, d in r.groups:
        assert ov[d] == 1 and out[d][0] == sum(3 ** p for p in range(a, a + s)), (a, s, d)
        dests.add(d)
    assert all(ov[j] == 0 for j in range(N) if j not in dests)


# --- distribution: the families ----------------------------------------------------------
@pytest.mark.parametrize("N", PORTS)
def test_dist_unicast_shifts_all_route(N):
    for c in range(N):
        want = routing.shift_sources(N, c)
        dist_check(route_dist(N, want), want)
        want = routing.xor_sources(N, c)
        dist_check(route_dist(N, want), want)


@pytest.mark.parametrize("N", PORTS)
def test_dist_multicasts_route(N):
    """One bank row to aligned groups of 2/4/8/16/.../N CEs, from any distinct source banks."""
    for f in [f for f in (1, 2, 4, 8, 16, 32, 64) if f <= N]:
        G = N // f
        for srcs in (list(range(G)), [q * f for q in range(G)], [(5 * q + 3) % N for q in range(G)],
                     [N - 1 - q for q in range(G)]):
            if len(set(srcs)) < G:
                continue
            want = routing.multicast_sources(N, f, srcs)
            dist_check(route_dist(N, want), want)
    for b in range(N):  # broadcast
        dist_check(route_dist(N, [b] * N), [b] * N)


def path_nodes(N, j, src):
    """Nodes (level, index) the unique butterfly path from input ``src`` to output ``j`` uses."""
    n = nm.log2_exact(N)
    x, out = j, []
    for s in reversed(range(n)):
        out.append((s + 1, x))
        k = nm.dist_bit(s, n)
        x = (x & ~(1 << k)) | (src & (1 << k))
    return out


def really_blocks(N, want):
    seen = {}
    for j, src in enumerate(want):
        if src is None:
            continue
        for node in path_nodes(N, j, src):
            if seen.setdefault(node, src) != src:
                return True
    return False


@given(st.data())
def test_dist_multicast_any_distinct_sources(data):
    """Arbitrary source banks per CE group: routed and correct, or reported blocking for a real reason."""
    N = data.draw(st.sampled_from([4, 8, 16, 32]))
    f = data.draw(st.sampled_from([f for f in (2, 4, 8, 16) if f <= N]))
    srcs = data.draw(st.permutations(range(N)))[:N // f]
    want = routing.multicast_sources(N, f, srcs)
    try:
        r = route_dist(N, want)
    except RoutingError as exc:
        assert "blocking" in str(exc) and really_blocks(N, want)
        return
    assert not really_blocks(N, want)
    dist_check(r, want)


@pytest.mark.parametrize("N,L", [(4, 2), (8, 4), (16, 4), (16, 2), (64, 4)])
def test_dist_transposes(N, L):
    """Banks x lanes -> columns, alone and followed by shifts and column multicasts."""
    for want in (list(range(N)), routing.shift_sources(N, L), routing.multicast_sources(N, L)):
        r = route_dist(N, want, transpose=True)
        n = nm.log2_exact(N)
        ctrl = nm.effective_ctrl(r.sel_vec, r.bank_idx, n, width=N)
        rows = [[(p << 8) | l for l in range(L)] for p in range(N)]
        out, _ = nm.dist_forward(rows, [1] * N, ctrl, do_transpose=True, lanes=L)
        for j, s in enumerate(want):  # virtual port s = lane s%L of banks of group s//L
            g, l = divmod(s, L)
            assert out[j] == [((g * L + i) << 8) | l for i in range(L)]


def test_dist_exhaustive_small_completeness():
    """N=4: every permutation routes or is reported blocking, and exactly the realizable ones route."""
    N, n = 4, 2
    realizable = {tuple(nm.dist_sources(N, [a, b])) for a in range(16) for b in range(16)}
    routed = 0
    for perm in itertools.permutations(range(N)):
        try:
            r = route_dist(N, list(perm))
        except RoutingError as exc:
            assert "blocking" in str(exc)
            assert perm not in realizable
            continue
        dist_check(r, perm)
        routed += 1
    assert routed == sum(1 for p in realizable if len(set(p)) == N) == 2 ** (N // 2 * n)


@given(st.data())
def test_dist_completeness_random(data):
    """Whatever pattern some control word realizes, the router finds a control word for it."""
    N = data.draw(st.sampled_from([8, 16, 64]))
    n = nm.log2_exact(N)
    ctrl = [data.draw(st.integers(0, (1 << N) - 1)) for _ in range(n)]
    want = nm.dist_sources(N, ctrl)
    keep = data.draw(st.lists(st.booleans(), min_size=N, max_size=N))
    want = [s if k else None for s, k in zip(want, keep)]
    bank = data.draw(st.integers(0, N - 1))
    dist_check(route_dist(N, want, bank_idx=bank), want)


def test_dist_blocked_patterns_reported():
    with pytest.raises(RoutingError, match=r"blocking: output \d+ \(from input \d+\) and output"):
        route_dist(4, [0, 2, 1, 3])
    with pytest.raises(RoutingError, match="both input 1 and input 2"):
        routing.sources_from_map(4, {1: [0, 3], 2: [3]})
    assert routing.sources_from_map(4, {1: [0, 3], 2: [1, 2]}) == [1, 2, 2, 1]
    with pytest.raises(RoutingError, match="out of range"):
        route_dist(4, [0, 1, 2, 7])
    with pytest.raises(RoutingError) as exc:
        route_dist(6, [0] * 6)
    assert exc.value.field == "ports"


def test_dist_bank_index_relocates_uniform_patterns():
    """Section V-D: one sel_vec, the FSM changes bank_idx, the pattern follows the bank."""
    N = 16
    bcast = route_dist(N, [0] * N).sel_vec
    for b in range(N):
        assert route_dist(N, [b] * N, bank_idx=b).sel_vec == bcast
        assert route_dist(N, routing.xor_sources(N, b), bank_idx=b).sel_vec == (0,) * 4
        for f in (2, 4, 8):
            base = routing.multicast_sources(N, f, [q * f for q in range(N // f)])
            assert (route_dist(N, [s ^ b for s in base], bank_idx=b).sel_vec == route_dist(N, base).sel_vec)
    # and the RTL-side relation: effective control = sel_vec XOR bank bit, for any route
    r = route_dist(N, routing.shift_sources(N, 3), bank_idx=9)
    assert list(r.ctrl) == nm.effective_ctrl(r.sel_vec, 9, 4, width=N)


def test_dist_port_value_layout():
    r = route_dist(4, [1, 1, 1, 1])
    assert r.port_value() == r.sel_vec[0] | (r.sel_vec[1] << 4)
    assert nm.unpack_levels(r.port_value(), 2, 4) == [[(w >> x) & 1 for x in range(4)] for w in r.sel_vec]


# --- reduction: the families -------------------------------------------------------------
@pytest.mark.parametrize("N", PORTS)
def test_red_aligned_reductions_route(N):
    """Every aligned group of 2/4/8/.../N summed, sums to any offset in the group or packed to 0,1,..."""
    for size in [s for s in (1, 2, 4, 8, 16, 32, 64) if s <= N]:
        for off in range(size):
            red_check(route_red(N, routing.reduction_groups(N, size, off)))
        red_check(route_red(N, routing.packed_reduction_groups(N, size)))


@given(st.data())
def test_red_single_group_to_any_port(data):
    N = data.draw(st.sampled_from([4, 8, 16, 64]))
    size = data.draw(st.sampled_from([s for s in (2, 4, 8, 16, 64) if s <= N]))
    first = data.draw(st.integers(0, N // size - 1)) * size
    dest = data.draw(st.integers(0, N - 1))
    red_check(route_red(N, [(first, size, dest)], bank_idx=data.draw(st.integers(0, N - 1))))


@given(st.data())
def test_red_completeness_random(data):
    """Any pattern of aligned group sums that some mode word realizes is found by the router."""
    N = data.draw(st.sampled_from([4, 8, 16]))
    n = nm.log2_exact(N)
    modes = [[data.draw(st.integers(0, 3)) for _ in range(N // 2)] for _ in range(n)]
    sym = nm.red_symbolic(N, modes)
    groups = []
    for d, grp in enumerate(sym):
        if grp is None:
            continue
        lo, size = min(grp), len(grp)
        # the other outputs' inputs stay idle: a sum's make-up depends on the modes only
        if size & (size - 1) == 0 and lo % size == 0 and grp == frozenset(range(lo, lo + size)):
            groups.append((lo, size, d))
    red_check(route_red(N, groups))


def test_red_blocked_and_malformed_reported():
    with pytest.raises(RoutingError, match="blocking: the sums for outputs 15 .* and 9"):
        route_red(16, [(14, 1, 15), (15, 1, 9)])
    with pytest.raises(RoutingError, match="not an aligned group"):
        route_red(16, [(2, 4, 0)])
    with pytest.raises(RoutingError, match="not a power of two"):
        route_red(16, [(0, 3, 0)])
    with pytest.raises(RoutingError, match="both go to output 0"):
        route_red(16, [(0, 2, 0), (2, 2, 0)])
    with pytest.raises(RoutingError, match="both contain port 4"):
        route_red(16, [(0, 8, 0), (4, 4, 4)])


def test_red_bank_index_relocates_group_sums():
    """Same mode_vec, bank_idx b < size: every group's sum moves to offset t ^ b (accumulator bank)."""
    N = 16
    for size in (2, 4, 8, 16):
        for t in range(size):
            base = route_red(N, routing.reduction_groups(N, size, t)).mode_vec
            for b in range(size):
                assert route_red(N, routing.reduction_groups(N, size, t ^ b), bank_idx=b).mode_vec == base


def test_red_port_value_layout():
    r = route_red(4, [(0, 4, 2)])
    assert nm.unpack_levels(r.port_value(), 2, 2, 2) == [list(v) for v in r.mode_vec]
    assert r.modes[0] == (nm.ADD_LEFT, nm.ADD_LEFT) and r.modes[1][0] == nm.ADD_RIGHT
