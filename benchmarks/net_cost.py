"""``python -m benchmarks net_cost``: hardware cost of the butterfly networks for N = 4..64.

Counts multiplexers, adders and registers of the distribution and reduction networks as
the generator builds them (``hdl/dist_net.py``, ``hdl/red_net.py``), beside an N x N
crossbar and a Benes network (``2 log2 N - 1`` stages of N/2 2x2 switches) doing the
same job, and the fraction of random patterns each butterfly routes (``gen.design.routing``).
The counts of the generated blocks are checked against the elaborated Amaranth design
for the smaller sizes (adder-switch and FP32 adder instances, register bits), so the
table cannot drift from the RTL. Prints the table and writes it into ``docs/networks.md``
between the ``net_cost`` markers.

Units: a "mux" is one 2:1 multiplexer of one element (``W`` bits); an N:1 selection
costs N-1 of them. "adders" are element adders (FP32 for ``bf16``). Register bits
include valid bits and the control pipeline.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from gen.design.routing import RoutingError, route_dist, route_red
from gen.design import netsem as nm

DOC = Path(__file__).resolve().parent.parent / "docs" / "networks.md"
BEGIN, END = "<!-- net_cost:begin -->", "<!-- net_cost:end -->"


def dist_cost(N: int, L: int, W: int) -> dict:
    n = nm.log2_exact(N)
    return {"muxes": N * n * L + N * L,          # butterfly levels + transpose-or-straight select
            "adders": 0,
            "reg_bits": N * (L * W + 1),         # output register: data + valid
            "ctrl_bits": N * n + n + 1}          # sel_vec + bank_idx + transpose


def red_cost(N: int, L: int, W: int) -> dict:
    n = nm.log2_exact(N)
    switches = N // 2 * n
    # per switch and lane: sum-or-operand select (2) + left/right output 4:1 selects (3 + 3)
    muxes = switches * L * 8 + N * L
    ctrl = N // 2 * n * 2
    # after level s the modes of levels > s, their bank bits and the transpose bit ride along
    ctrl_regs = sum((n - 1 - s) * (N // 2) * 2 + (n - 1 - s) + 1 for s in range(n))
    return {"switches": switches, "muxes": muxes, "adders": switches * L,
            "reg_bits": n * N * (L * W + 1) + ctrl_regs, "ctrl_bits": ctrl + n + 1}


def crossbar_cost(N: int, L: int, W: int) -> dict:
    return {"crosspoints": N * N, "muxes": N * (N - 1) * L}


def benes_cost(N: int, L: int, W: int) -> dict:
    n = nm.log2_exact(N)
    stages = 2 * n - 1
    return {"stages": stages, "switches": stages * N // 2, "muxes": stages * N * L}


def routable_fraction(N: int, trials: int, rng: random.Random) -> tuple[float, float, float]:
    """Fraction of random permutations (dist), random group-multicasts (dist, fanout 4) and
    random unicast permutations through the reduction network that route."""
    perm = mc = red = 0
    for _ in range(trials):
        p = list(range(N))
        rng.shuffle(p)
        try:
            route_dist(N, p)
            perm += 1
        except RoutingError:
            pass
        f = min(4, N)
        srcs = rng.sample(range(N), N // f)
        try:
            route_dist(N, [srcs[j // f] for j in range(N)])
            mc += 1
        except RoutingError:
            pass
        try:
            route_red(N, [(i, 1, p[i]) for i in range(N)])
            red += 1
        except RoutingError:
            pass
    return perm / trials, mc / trials, red / trials


def check_against_rtl(N: int, L: int) -> None:
    """Elaborate the int16 networks and compare instance / register-bit counts with the formulas."""
    from amaranth.hdl import Fragment

    from hdl.dist_net import DistNet
    from hdl.red_net import RedNet

    W = 16
    red = RedNet(ports=N, lanes=L, datatype="int16", width=W)
    frag = Fragment.get(red, None)
    # adder switches are the submodules named sw<level>_<index>
    switches = sum(1 for _sub, name, _loc in frag.subfragments if str(name).startswith("sw"))
    reg_bits = sum(len(st.lhs) for d, stmts in frag.statements.items() if d == "sync" for st in stmts)
    want = red_cost(N, L, W)
    assert switches == want["switches"], (switches, want)
    assert reg_bits == want["reg_bits"], (reg_bits, want)
    dist = DistNet(ports=N, lanes=L, width=W)
    frag = Fragment.get(dist, None)
    bits = sum(len(st.lhs) for d, stmts in frag.statements.items() if d == "sync" for st in stmts)
    assert bits == dist_cost(N, L, W)["reg_bits"], bits


def table(L: int, W_elem: int, W_acc: int, trials: int, seed: int) -> str:
    rng = random.Random(seed)
    rows = ["| N | dist muxes | dist reg bits | red switches | red adders | red muxes | red reg bits "
            "| crossbar crosspoints | crossbar muxes | Benes stages | Benes muxes | butterfly/crossbar muxes "
            "| routable: perm / mcast4 / red perm |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for N in (4, 8, 16, 32, 64):
        d, r = dist_cost(N, L, W_elem), red_cost(N, L, W_acc)
        x, b = crossbar_cost(N, L, W_elem), benes_cost(N, L, W_elem)
        fp, fm, fr = routable_fraction(N, trials, rng)
        rows.append(f"| {N} | {d['muxes']} | {d['reg_bits']} | {r['switches']} | {r['adders']} | {r['muxes']} "
                    f"| {r['reg_bits']} | {x['crosspoints']} | {x['muxes']} | {b['stages']} | {b['muxes']} "
                    f"| {d['muxes'] / x['muxes']:.2f} | {fp:.3f} / {fm:.3f} / {fr:.3f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks net_cost", description=__doc__.splitlines()[0])
    p.add_argument("--lanes", type=int, default=4)
    p.add_argument("--elem-bits", type=int, default=16, help="distribution element width (bf16: 16)")
    p.add_argument("--acc-bits", type=int, default=32, help="reduction element width (FP32: 32)")
    p.add_argument("--trials", type=int, default=2000, help="random patterns per size for the routable fractions")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-doc", action="store_true", help="print only, do not update docs/networks.md")
    args = p.parse_args(argv or [])
    for N in (4, 8, 16):
        check_against_rtl(N, args.lanes if N % args.lanes == 0 else 1)
    text = (f"L = {args.lanes} lanes, distribution elements {args.elem_bits} bits, reduction elements "
            f"{args.acc_bits} bits; routable fractions from {args.trials} random patterns per N "
            f"(seed {args.seed}).\n\n" + table(args.lanes, args.elem_bits, args.acc_bits, args.trials, args.seed))
    print(text)
    if not args.no_doc and DOC.exists():
        doc = DOC.read_text()
        if BEGIN in doc and END in doc:
            head, rest = doc.split(BEGIN, 1)
            _, tail = rest.split(END, 1)
            DOC.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")
            print(f"written to {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
