"""Whole phases: a layer's FP, BP, WG (or all three, ``train``) into one :class:`Program`.

:func:`compile_layer` takes the networks of a phase (:func:`gen.workload.network.phase_networks`),
splits and pads their modes (:func:`gen.compiler.layout.split_modes`), contracts each along its
MAC-optimal path (:func:`gen.search.csse.best_path`, or one given per label) with a
:class:`gen.compiler.compiler.Compiler`, and records how the host assembles the results. With
``phase="train"`` (or ``"backward"``: the same without FP's last step, whose result a training step's
forward pass made) the FP and BP intermediates are kept (spilled to the host, counted as DRAM traffic)
and every WG network is re-solved with the saved tensors as extra inputs when that saves MACs
(:func:`_with_saved`; ``gen.search.training_aware`` explains why an FP intermediate not containing
``core_k`` is exactly a WG operand of ``core_k``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Callable, Mapping, NamedTuple, Sequence

from gen.compiler.allocate import Tensor
from gen.compiler.batched import pieced
from gen.compiler.dma import hardware_cycles
from gen.compiler.compiler import Compiler
from gen.compiler.layout import Shaping, ceil_to, padded_size, split_modes, useful_split
from gen.compiler.pipeline import PIECES, piece_counts, pipelined_network
from gen.compiler.program import CompileError, Program
from gen.design.config import FettaConfig
from gen.design.isa import Dataflow, Geometry, stationary as stationary_mode
from gen.search.csse import best_path, search_network
from gen.workload.network import Network, Operand, path_macs, path_steps, phase_networks, stack_terms


#: phases of all three kinds of networks: ``train`` (FP's result ``Y`` too) and ``backward`` (FP only
#: up to its intermediates, which BP and WG reuse: a training step's backward pass, its forward pass
#: having made ``Y``)
TRAINS = ("train", "backward")


def _subphases(phase: str, wg_first: bool = False) -> list[str]:
    """The kinds of networks ``phase`` compiles, in order: a training phase's WG networks after BP's (they
    start from BP's intermediates), or, ``wg_first``, between FP's and BP's (:func:`_piece_search`)."""
    if phase not in TRAINS:
        return [phase]
    return ["fp", "wg", "bp"] if wg_first else ["fp", "bp", "wg"]


class _Policy(NamedTuple):
    """:func:`compile_layer`'s ``relayout``, ``k_split`` and ``stationary``, the planner's
    lookahead (:meth:`gen.compiler.planner.Planner.best_plan`), passed on to every compiler it makes,
    and whether WG networks share intermediates (:func:`_share_wg`)."""

    relayout: str = "auto"
    #: True / False, or ``"wg"``: only the WG networks of a train phase split contracted modes
    k_split: bool | str = True
    stationary: bool = True
    lookahead: int = 3
    share: bool = True
    #: batch pieces: steps after a carried sum run once, in the last piece (:mod:`gen.compiler.batched`)
    defer: bool = True
    #: a training phase's WG networks before BP's (:func:`_subphases`, :func:`_piece_search`)
    wg_first: bool = False
    #: a re-solved WG network with an operand larger than a ping-pong half runs the fastest alone of its
    #: cheapest trees (:func:`_spill_tree`)
    spill: bool = True
    #: every piece of a step chunked over a free mode in a run of its own (``Compiler.run_per_piece``)
    runs: bool = False
    #: OS plans may write their result output-transposed (``Compiler.out_transposes``; :func:`compile_layer`
    #: tries them on its winner)
    transposes: bool = False
    #: a network's last step weighs its result's padded DRAM store (``Compiler.store_pad``; a retry of the
    #: winner where it stores padding, :func:`_retry_runs`)
    store_pad: bool = False


def layer_networks(spec, phase: str, paths: Mapping | None = None) -> list[Network]:
    """The networks the compiler contracts for ``phase`` of ``spec``: :func:`phase_networks` with the
    block terms stacked into one network (:func:`gen.workload.network.stack_terms`: ``X`` / ``dY``
    read once for all terms, the sum on chip), unless ``paths`` fixes the order of each term's own
    network (by its label)."""
    nets = phase_networks(spec, phase)
    return stack_terms(nets) if paths is None else nets


def recomputed_macs(spec, prog: Program) -> int:
    """MACs of the FP steps a ``backward`` program of ``spec`` computes (its FP networks' paths but
    their last step): the forward pass did them once already."""
    return sum(sum(s.macs for s in path_steps(net, prog.paths[net.label])[:-1])
               for net in layer_networks(spec, "fp") if net.label in prog.paths)


def default_paths(nets: Sequence[Network]) -> dict[str, list[list[int]]]:
    """MAC-optimal path of every network (``gen.search.best_path``)."""
    return {n.label: best_path(n) for n in nets}


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
                  reuse: bool = True, align: bool = False, pad: bool | None = None,
                  pieces: int | None = None, relayout: str = "auto", pieces_by: str | None = None,
                  views: bool | None = None, fuse: bool | str | None = None, k_split: bool = True,
                  stationary: bool | None = None, share: bool | None = None, dram: str = "rule",
                  split: str | None = None, runs: bool | None = None, transposes: bool | None = None) -> Program:
    """Compile ``phase`` (``fp``, ``bp``, ``wg``, ``train`` or ``backward``: :data:`TRAINS`) of ``spec``
    into a :class:`Program`.

    ``pad``: zero-pad modes to a multiple of ``lanes`` (:func:`split_modes`); ``None`` compiles
    both ways when padding would change anything and keeps the program with fewer cycles end to end
    (:meth:`Program.timeline`: compute and DRAM stalls; padding costs MACs, memory and DRAM bytes, and
    can force chunking).
    ``split``: which modes :func:`split_modes` splits into lane-sized halves: ``"all"``, or ``"even"``
    (a mode whose high half would be odd stays whole and unpadded, :class:`Shaping`); ``None``
    compiles ``"all"`` and, where some mode's high half is odd, the winner's options once more with
    ``"even"`` (its batch pieces and fusion searched again), and keeps :func:`_best`'s choice.
    ``pieces``: run the batch in pieces, so that DRAM transfers overlap compute, in two ways: every fp /
    bp network pipelined on its own (:mod:`gen.compiler.pipeline`), or the whole phase compiled for one
    piece and repeated, weight gradients carried in the accumulation unit (:mod:`gen.compiler.batched`,
    every phase). ``None`` also compiles the piece counts that can help and keeps the program with the
    fewest cycles end to end; ``1`` the whole batch at once; ``P`` exactly ``P`` pieces (the faster
    way that can; :class:`CompileError` if neither can). ``pieces_by``: only one way, ``"networks"``
    (pipelined) or ``"phase"`` (repeated). A training phase's pieces are also searched under the
    options otherwise left to the retries below, WG before BP included (:func:`_piece_search`).
    ``relayout``: where a tensor whose lane does not suit its consumer is re-laid out (``auto``: the
    fewer cycles of the TCU's identity GEMM and the host path; ``onchip``; ``host``).
    ``views``: read on-chip tensors through the distribution networks' transpose layers where that
    gives a step the lane it wants (:meth:`gen.compiler.planner.Planner.view`) instead of re-laying
    them out; ``None`` compiles without, and also with them when that program re-lays out through
    the host, and keeps the fewer cycles end to end (they constrain the CE grid and the memory use).
    ``fuse``: a chunked step runs its pieces through the later steps that keep the chunked mode
    (:meth:`gen.compiler.chunk.Chunking.chunked`); ``False`` chunks every step on its own;
    ``"nested"``: a fused piece that is cut again runs those steps on its own pieces too
    (``Compiler.fuse_nested``; not among ``None``'s choices: on the benchmark layers it moves up to
    3x the DRAM bytes where a fused step's other operand is written for every inner piece,
    ``docs/compiler.md``); ``None`` compiles fused and, when that chunks a step, also unfused, each
    with its batch pieces, and keeps the one :func:`_best` keeps (fused pieces keep intermediates on
    chip but can be more pieces; a fused program can lose on the whole batch and win in pieces:
    ``docs/compiler.md``).
    ``runs``: every chunk piece (with its fused steps) in a run of its own (``Compiler.run_per_piece``);
    ``False``: pieces share runs while they fit a half; ``None``: where some program chunks a step, also
    the winner's options with a run per piece (:func:`_winner_with`), :func:`_best` keeping one.
    ``transposes``: an OS step may write its result with the lane its consumer contracts (the reduction
    network's transpose layer, ``Compiler.out_transposes``); ``None``: without, and where a step of the
    winner could, its options once more with them (:func:`_winner_with`), :func:`_best` keeping one.
    ``k_split=False``: no step splits a contracted mode over the CE grid (the cross-CE sums of the
    reduction network unused: a capability set, :mod:`gen.compiler.capabilities`).
    ``stationary``: the planner may switch a step to a stationary dataflow (``WS`` / ``IS``, vertical or
    horizontal loads) that reads an on-chip operand whose lane is a contracted mode as it is, where
    output-stationary needs a re-layout (:mod:`gen.compiler.planner`); ``False``: output-stationary
    GEMMs only (no dataflow switch). ``None`` compiles with the switch and, when that program uses a
    stationary dataflow, also without, and keeps the fewer cycles end to end (the planner weighs a
    slower stationary step against a re-layout step by step; the whole program decides).
    ``share``: a WG network starts from an intermediate of an earlier WG network of the same inputs
    where that saves MACs (:func:`_share_wg`; with ``reuse``); ``None`` compiles with and without
    (fewer MACs need not be fewer cycles) and keeps the fewer cycles end to end. A re-solved WG network
    with an operand or intermediate larger than a ping-pong half runs the fastest alone of its
    MAC-cheapest trees (:func:`_spill_tree`); where that changed a tree of the winner, the winner's
    options are retried along the MAC-optimal trees.
    Where options compete, "the fewer cycles" means :func:`_best`: within :data:`NEAR` (2 %) of the
    fastest end to end, the fewest host re-layouts, then the fewest DRAM bytes. ``dram``: the end-to-end count the final choice is made
    by: ``"rule"`` (:meth:`Program.timeline`, the DRAM rule of :mod:`gen.design.timing`) or ``"dma"``
    (:func:`gen.compiler.dma.hardware_cycles`: the program lowered to runs that move their own data,
    the controller's own count).
    ``align=True`` rounds every layout's row strides (:meth:`Layout.make` ``align``): measured not to help
    (``docs/compiler.md``)."""
    if pieces_by not in (None, "networks", "phase"):
        raise CompileError(f"must be 'networks' or 'phase', got {pieces_by!r}", field="pieces_by")
    if dram not in ("rule", "dma"):
        raise CompileError(f"must be 'rule' or 'dma', got {dram!r}", field="dram")
    if split not in (None, *_SPLITS.values()):
        raise CompileError(f"must be 'all' or 'even', got {split!r}", field="split")
    odd = split != "even"
    progs: list[Program] = []
    given = dict(runs=runs is True, transposes=transposes is True)
    for v in ([views] if views is not None else [False, True]):
        if v and views is None and progs and not any(p.relayouts for p in progs):
            break
        for st in ([stationary] if stationary is not None else [True, False]):
            if not st and stationary is None and not any(_stationary(p) for p in progs):
                break
            # WG networks with and without shared intermediates (:func:`_share_wg`): fewer MACs need not be
            # fewer cycles (kept ones take memory and DRAM reads: test layers' TTM wg 398 cycles shared, 310 not)
            for sh in ([share] if share is not None else [True, False] if reuse and phase in ("wg", *TRAINS)
                       else [True]):
                progs += _variants(spec, phase, config, paths, reuse, align, pad, pieces,
                                   _Policy(relayout, k_split, st, share=sh, **given), pieces_by, v, fuse, odd)
    search = phase in TRAINS and progs and pieces != 1 and pieces_by in (None, "phase") and views is not False
    searched = _piece_search(spec, phase, config, paths, reuse, align, pad, pieces,
                             _Policy(relayout, k_split, stationary is not False, share=share is not False, **given),
                             fuse, min(p.macs for p in progs), odd) if search and relayout != "host" else []
    progs += searched
    if not progs:
        raise CompileError(f"the phase does not run in {pieces} batch pieces (the batch must divide into them, "
                           f"and each piece's steps fit the memories)", field="pieces")
    best = _best(progs, config, dram)     # end to end: padding and pieces change compute and bytes moved
    if split is None and _splits_odd(spec, phase, config):
        progs += _even_shaped(best.variant, spec, phase, config, paths, reuse, align, pad, pieces, relayout,
                              k_split, pieces_by, fuse)
        best = _best(progs, config, dram)
    for key, asked, can in (("runs", runs, lambda: any(p.chunked_steps for p in progs)),
                            ("transposes", transposes, lambda: best.twin_sites)):
        if asked is None and can():
            progs += _winner_with(key, best.variant, spec, phase, config, paths, reuse, align, pad, pieces, relayout,
                                  k_split, pieces_by, fuse, split, odd)
            best = _best(progs, config, dram)
    if any(best is p for p in searched):
        return best         # the search has tried the retries' options below (lookaheads, re-layouts on chip)
    _retry(progs, _retry_runs(best, phase, relayout, k_split, stationary, views), best.variant, spec, phase, config,
           paths, reuse, align)
    final = _best(progs, config, dram)
    # a retry's winner that re-lays out through the host: its options once more with every re-layout
    # on chip (UCF HT wg: the wide lookahead's 168,066 cycles with one, its on-chip twin without)
    if relayout == "auto" and final.relayouts and final is not best:
        w = final.variant
        runs = [(policy, w["views"]) for policy in _onchip(k_split, stationary, w)]
        _retry(progs, runs, w, spec, phase, config, paths, reuse, align)
        final = _best(progs, config, dram)
    return final


def _winner_policy(v: Mapping, relayout: str, k_split) -> _Policy:
    """The policy :func:`compile_layer`'s winner of options ``v`` ran under, with the caller's
    ``relayout`` and ``k_split`` (what :func:`_winner_with` and :func:`_even_shaped` vary from)."""
    return _Policy(relayout, k_split, v["stationary"], share=v["share"], runs=v["runs"], transposes=v["transposes"],
                   store_pad=v["store_pad"])


def _winner_with(key: str, v: Mapping, spec, phase, config, paths, reuse, align, pad, pieces, relayout, k_split,
                 pieces_by, fuse, split, odd) -> list[Program]:
    """The options ``v`` of :func:`compile_layer`'s winner with the :class:`_Policy` flag ``key`` on,
    both splits of an odd high half, padded or not, fused or not, every batch piece count.

    ``runs``: every chunk piece in a run of its own (its first compute after one piece's writes, the
    pieces alternating halves; an operand not cut is written per piece: docs/compiler.md "Chunk pieces
    in runs of their own": UCF BT bp, UCF TR-14 bp, ATIS dense wg; UCF BT wg keeps its shared runs).
    ``transposes``: output-transposed results (:mod:`gen.compiler.transposed`), where the winner has a
    step that could (``Program.twin_sites``): a twin's gain is its consumer's, which the planner's
    step by step choice can lose over the layer (UCF TR-14 fp: 164,701 cycles with them, 161,975
    without), and another split and piece count can make the most of it (UCF BT bp: 152,767 ->
    118,112 cycles, the high halves of 20 whole, two pipelined pieces)."""
    out: list[Program] = []
    for o in [True, False] if split is None and _splits_odd(spec, phase, config) else [odd]:
        try:
            out += _variants(spec, phase, config, paths, reuse, align, pad, pieces,
                             _winner_policy(v, relayout, k_split)._replace(**{key: True}), pieces_by, v["views"],
                             fuse, odd=o)
        except CompileError:
            continue        # a piece's own run that does not fit: the shared runs stand
    return out


def _even_shaped(v: Mapping, spec, phase, config, paths, reuse, align, pad, pieces, relayout, k_split, pieces_by,
                 fuse) -> list[Program]:
    """The options ``v`` of :func:`compile_layer`'s winner with the modes of an odd high half whole
    (:class:`Shaping`), its batch pieces and fusion searched again (UCF BT bp: 201,122 -> 184,489 cycles,
    HT bp 91,135 -> 80,999: their 20 = 5 x 4 modes no longer pad lanes to 8, the result's 1.6x DRAM bytes
    among them; ATIS TTM embedding fp 263,480 -> 237,971: its 10s are no longer padded to 12 = 3 x 4)."""
    try:
        return _variants(spec, phase, config, paths, reuse, align, pad, pieces,
                         _winner_policy(v, relayout, k_split), pieces_by, v["views"], fuse, odd=False)
    except CompileError:
        return []


def _retry_runs(best: Program, phase, relayout, k_split, stationary, views) -> list[tuple[_Policy, bool]]:
    """The ``(policy, views)`` :func:`compile_layer` retries its winner ``best``'s options under.

    The planner decides step by step (one step of lookahead over the consumer); over a whole layer
    its choices can lose. The winner's options once more with a wider lookahead and without cross-CE
    splits (ATIS TTM embedding fp: 3,722 GEMMs with them, 216 without), and, where it re-lays out
    through the host, with every re-layout on chip at both lookaheads (the planner weighs each one's
    identity GEMM against its DRAM round trip alone; end to end the GEMM can cost nothing: ATIS TT wg,
    UCF TR-14 wg 350,459 cycles with none through the host against 352,089 with 11); :func:`_best`
    keeps one."""
    v = best.variant
    retries = [_Policy(relayout, k_split, v["stationary"], WIDE_LOOKAHEAD)]
    if k_split:
        retries.append(_Policy(relayout, False, v["stationary"]))
    if k_split and phase in TRAINS:
        # the FP / BP networks without cross-CE splits, the WG ones with them (ATIS TTM embedding train:
        # its dcore_0 first step 230,550 cycles on 8 CEs without, 115,350 on 16 with)
        retries.append(_Policy(relayout, "wg", v["stationary"]))
    if relayout == "auto" and best.relayouts:
        retries += _onchip(k_split, stationary, v)
    if best.padded_stores and not v["store_pad"]:
        # a network's result stored with its lane padding: its last step weighing that store, whose DRAM
        # time a DRAM-bound program does not hide (UCF BT train: 680,213 -> 656,761 cycles, dX's 5-long
        # lane no longer padded to 8)
        retries.append(_Policy(relayout, v["k_split"], v["stationary"], store_pad=True))
    if best.spill_trees:
        # every WG network along its MAC-optimal tree: a tree fastest alone can lose in the layer, where
        # its operands may be on chip already (a BT layer on a 16 KiB memory, tests/test_compiler.py)
        retries.append(_Policy(relayout, v["k_split"], v["stationary"], spill=False))
    runs = [(policy, v["views"]) for policy in retries]
    # An on-chip re-layout (or a view, or a stationary step) chosen step by step can still lose over the
    # whole layer to the plain program: every re-layout through the host, output-stationary, no views
    # (UCF TR-14 fp: 305,189 cycles against 308,291, SIGMA's count), at both lookaheads. Only where the
    # caller left those choices to the compiler.
    if relayout == "auto" and best.onchip_relayouts and stationary is None and views is None:
        runs += [(_Policy("host", k_split, False, la), False) for la in (_Policy().lookahead, WIDE_LOOKAHEAD)]
    return runs


def _onchip(k_split, stationary, v: Mapping) -> list[_Policy]:
    """The retries of :func:`compile_layer` with every re-layout on chip, for the options ``v`` of a
    program that re-lays out through the host: at both lookaheads, with the caller's ``k_split`` and
    the program's, with the program's dataflow switch and, where the caller left it to the compiler
    (``stationary`` None), with it on (a stationary step can replace a re-layout: UCF HT wg 168,847
    cycles on chip with it, against 168,066 with a host re-layout without it)."""
    sts = dict.fromkeys([v["stationary"]] + ([True] if stationary is None else []))
    return [_Policy("onchip", ks, st, la) for ks in dict.fromkeys([k_split, v["k_split"]])
            for st in sts for la in (_Policy().lookahead, WIDE_LOOKAHEAD)]


def _retry(progs: list, runs, v: Mapping, spec, phase, config, paths, reuse, align) -> None:
    """Compile the options ``v`` again under each ``(policy, views)`` of ``runs`` into ``progs``."""
    for policy, vw in runs:
        try:
            progs += _variants(spec, phase, config, paths, reuse, align, _variant_shape(v), v["pieces"],
                               policy._replace(share=v["share"], runs=v["runs"],
                                               transposes=policy.transposes or v["transposes"],
                                               store_pad=policy.store_pad or v["store_pad"]),
                               v["pieces_by"], vw, v["fuse"])
        except CompileError:
            continue


#: programs within this fraction of the fastest end to end count as equally fast (:func:`_best`)
NEAR = 0.02


def _best(progs: Sequence[Program], config: FettaConfig, dram: str = "rule") -> Program:
    """The program :func:`compile_layer` keeps: of those within :data:`NEAR` of the fewest cycles end
    to end (by the DRAM rule, or lowered to DMA jobs: ``dram``), the one with the fewest host
    re-layouts, then moving the fewest DRAM bytes, then the fewer cycles and estimate.

    Cycles alone pick a program whose DRAM traffic hides under compute by a few cycles: ATIS TT wg ran
    its 32 host re-layouts (253 KiB of DRAM traffic, 1.6x the energy) to save 1.1 % of its cycles
    against the program with every re-layout on chip. Bytes alone kept UCF HT fp's one host re-layout
    for 512 bytes less traffic than a program without it (81,844 against 81,389 cycles)."""
    cycles = {id(p): hardware_cycles(p, config) if dram == "dma" else p.timeline(config).cycles for p in progs}
    fastest = min(cycles.values())
    near = [p for p in progs if cycles[id(p)] <= fastest * (1 + NEAR)]
    return min(near, key=lambda p: (p.relayouts, p.dram_bytes, cycles[id(p)], p.est_cycles))


#: the planner's lookahead (plans weighed with their consumer's best) of :func:`compile_layer`'s retry
WIDE_LOOKAHEAD = 6


def _stationary(prog: Program) -> bool:
    """Does ``prog`` run a step in a stationary dataflow?"""
    return any(stationary_mode(Dataflow[df]) for df in prog.dataflows())


def _variants(spec, phase, config, paths, reuse, align, pad, pieces, policy, pieces_by, views,
              fuse, odd: bool = True) -> list[Program]:
    """The programs :func:`compile_layer` chooses from for one ``views`` setting (modes shaped as
    :func:`_pads` gives for ``pad`` and ``odd``)."""
    pads = _pads(spec, phase, config, pad, odd)
    # ``fuse=None``: fused, and where that chunks a step also unfused, both on to the batch pieces (UCF BT
    # fp: the whole batch runs faster unfused, 160,541 cycles against 184,978; two pipelined pieces fused,
    # 125,010 against 171,268)
    wholes = []
    for pd in pads:
        for fz in [True if fuse is None else fuse] + ([False] if fuse is None else []):
            whole = _compile_layer(spec, phase, config, paths, reuse, align, pd, policy=policy, views=views,
                                   fuse=fz)
            wholes.append((pd, fz, whole))
            if not whole.chunked_steps:
                break           # nothing chunked: the unfused program is the same
    progs = []
    for pd, fz, whole in wholes:
        whole.variant = dict(pad=pd.pad, split=_SPLITS[pd.odd], fuse=fz, views=views, pieces=1, pieces_by=None,
                             stationary=policy.stationary, share=policy.share, k_split=policy.k_split,
                             spill=policy.spill, runs=policy.runs, transposes=policy.transposes,
                             store_pad=policy.store_pad)
        if pieces is None and progs and whole.timeline(config).compute_cycles > \
                1.5 * min(p.timeline(config).cycles for p in progs):
            progs.append(whole)
            continue        # hopeless (its compute alone): spare the compile time of its pieces
        if pieces in (None, 1):
            progs.append(whole)
        if pieces != 1 and pieces_by in (None, "networks"):
            progs += _pipelined(spec, phase, config, paths, reuse, align, pd, pieces, policy, whole, views, fz)
        if pieces != 1 and pieces_by in (None, "phase"):
            progs += _batched(spec, phase, config, paths, reuse, align, pd, pieces, policy, whole, views, fz)
    return progs


def _pads(spec, phase: str, config: FettaConfig, pad: bool | Shaping | None, odd: bool = True) -> list[Shaping]:
    """The shapings of ``pad`` (a :class:`Shaping` as it is), or for None: unpadded, and padded too
    where padding would change a mode's size (modes split as ``odd`` says)."""
    if pad is not None:
        return [_shape(pad, odd)]
    changes = any(padded_size(sz, config.lanes, True, odd) != sz for ph in _subphases(phase)
                  for net in phase_networks(spec, ph) for sz in net.sizes.values())
    return [Shaping(False, odd), Shaping(True, odd)] if changes else [Shaping(False, odd)]


def _splits_odd(spec, phase: str, config: FettaConfig) -> bool:
    """Does :func:`split_modes` split a mode of ``phase`` into an odd high half (else ``odd=False``
    shapes every network as the default does)?"""
    return any(split_modes(net, config.lanes, pd).sizes != split_modes(net, config.lanes, pd, False).sizes
               for pd in (False, True) for ph in _subphases(phase) for net in phase_networks(spec, ph))


#: ``Shaping.odd`` -> the ``split`` option of :func:`compile_layer` (and of ``Program.variant``)
_SPLITS = {True: "all", False: "even"}


def _variant_shape(v: Mapping) -> Shaping:
    """The :class:`Shaping` a program's ``variant`` was compiled with."""
    return Shaping(v["pad"], v["split"] == "all")


def _shape(pad: bool | Shaping, odd: bool = True) -> Shaping:
    """The :class:`Shaping` of a ``pad`` argument (a :class:`Shaping` as it is; a bool with ``odd``)."""
    return pad if isinstance(pad, Shaping) else Shaping(bool(pad), odd)


def _pipelined(spec, phase, config, paths, reuse, align, pad, pieces, policy, whole, views, fuse) -> list[Program]:
    """fp / bp in batch pieces network by network (:func:`gen.compiler.pipeline.pipelined_network`)."""
    if phase not in ("fp", "bp"):
        return []
    nets = [split_modes(net, config.lanes, *_shape(pad)) for net in layer_networks(spec, phase, paths)]
    wanted = PIECES if pieces is None else (pieces,)
    out = []
    for P in [p for p in wanted if all(p in piece_counts(net, (p,)) for net in nets)]:
        try:
            prog = _compile_layer(spec, phase, config, paths, reuse, align, pad, policy=policy, pieces=P,
                                  views=views, fuse=fuse)
        except CompileError:
            continue                # e.g. a piece that needs chunking over a contracted mode
        if prog.macs != whole.macs:
            raise CompileError(f"internal: {P} batch pieces give {prog.macs} MACs, one piece {whole.macs}",
                               field="phase")
        prog.variant = dict(whole.variant, pieces=P, pieces_by="networks")
        out.append(prog)
    return out


def _carry_rows(phase: str, config: FettaConfig) -> int:
    """Accumulation rows a piece program of ``phase`` reserves for the sums carried across batch
    pieces (:mod:`gen.compiler.batched`): a quarter of the unit for ``wg`` / ``train``, else none."""
    geo = Geometry.of(config)
    return ceil_to(geo.accum_rows // 4, geo.banks) if phase in ("wg", *TRAINS) else 0


def piece_program(spec, phase: str, config: FettaConfig, P: int, policy: _Policy, paths=None, reuse: bool = True,
                  align: bool = False, pad: bool | Shaping = False, views: bool = True,
                  fuse: bool | str = True) -> Program | None:
    """``phase`` of ``spec`` as ``P`` repeats of one piece program (:func:`gen.compiler.batched.pieced`),
    or None where no piece compiles into one segment. Steps after a carried sum are deferred when
    ``policy.defer`` (they carry intermediates, which need more reserved rows: the piece is compiled
    without deferring where those do not fit)."""
    for pol in dict.fromkeys([policy, policy._replace(defer=False)]):
        try:
            piece = _compile_layer(replace(spec, batch=spec.batch // P), phase, config, paths, reuse, align, pad,
                                   carry_rows=_carry_rows(phase, config), policy=pol, views=views, fuse=fuse)
        except CompileError:
            continue
        return pieced(piece, P, spec.batch, config)
    return None


def _batched(spec, phase, config, paths, reuse, align, pad, pieces, policy, whole, views, fuse) -> list[Program]:
    """The phase in batch pieces as one repeated piece program (:func:`piece_program`).
    A piece must fit one segment: with the whole batch taking ``S`` segments, only ``P >= S`` is tried
    (compile time), and larger counts only while they pay; where no count reaches ``S``, the largest
    (the segments can come from a mode other than the batch that does not fit a half: UCF HT wg,
    ``X`` cut into 18 slices, runs in 16 one-sample pieces at 80,810 cycles against 168,847)."""
    segments = 1 + sum(a.half != b.half for a, b in zip(whole.runs, whole.runs[1:]))
    valid = [P for P in (2, 4, 8, 16) if spec.batch % P == 0]
    counts = ([P for P in valid if P >= segments] or valid[-1:]) if pieces is None else \
        [pieces] if spec.batch % pieces == 0 else []
    out, last = [], None
    for P in counts:
        prog = piece_program(spec, phase, config, P, policy, paths, reuse, align, pad, views, fuse)
        if prog is None:
            continue
        # useful MACs are the whole batch's: a piece's MAC-optimal path can cost more in all
        prog.macs = min(prog.macs, whole.macs)
        prog.variant = dict(whole.variant, pieces=P, pieces_by="phase", wg_first=policy.wg_first)
        out.append(prog)
        cycles = prog.timeline(config).cycles
        if last is not None and cycles >= last:
            break
        last = cycles
    return out


def _piece_search(spec, phase, config, paths, reuse, align, pad, pieces, policy, fuse, macs,
                  odd: bool = True) -> list[Program]:
    """A training phase in the most batch pieces (or ``pieces``) under the options :func:`compile_layer`
    otherwise tries only as retries of its winner: the transpose views, every re-layout on chip, both
    lookaheads, both orders of the backward networks (:func:`_subphases`), padded or not. A piece
    program is small (one sample: seconds to compile), and inside it a host re-layout is a DRAM round
    trip that every piece repeats; a phase whose whole batch takes more segments than pieces can have
    (:func:`_batched` compiles its pieces with the whole batch's options only) can fit one half
    this way (UCF HT train: 16 one-sample pieces, WG before BP, padded, every re-layout on chip, the
    wide lookahead: 193,567 cycles against 281,224 for the whole batch; with BP first no piece fits
    a half). ``macs``: the useful MACs (the whole batch's)."""
    valid = [P for P in (2, 4, 8, 16) if spec.batch % P == 0]
    counts = valid[-1:] if pieces is None else [pieces] if pieces in valid else []
    out = []
    for P, pd, wg_first, la in itertools.product(counts, _pads(spec, phase, config, pad, odd), (False, True),
                                                 (policy.lookahead, WIDE_LOOKAHEAD)):
        pol = policy._replace(relayout="onchip", lookahead=la, wg_first=wg_first)
        prog = piece_program(spec, phase, config, P, pol, paths, reuse, align, pd, True,
                             True if fuse is None else fuse)
        if prog is None:
            continue
        prog.macs = min(prog.macs, macs)
        prog.variant = dict(pad=pd.pad, split=_SPLITS[pd.odd], fuse=True if fuse is None else fuse, views=True,
                            pieces=P, pieces_by="phase",
                            stationary=pol.stationary, share=pol.share, k_split=pol.k_split, wg_first=wg_first,
                            spill=pol.spill, runs=pol.runs, transposes=pol.transposes, store_pad=pol.store_pad)
        out.append(prog)
    return out


class _Layer:
    """The host's view of one layer being compiled: its input tensors and how results assemble."""

    def __init__(self, comp: Compiler, lanes: int, shape: Shaping):
        self.comp = comp
        self.lanes = lanes
        self.shape = shape
        self.tensors: dict[str, Tensor] = {}
        self.results: dict[str, list] = {}
        self.input_modes: dict[str, tuple[str, ...]] = {}
        self.input_pads: dict[str, tuple[tuple[int, int], ...]] = {}

    def add_inputs(self, orig: Network, net: Network) -> None:
        """Register the padding of ``orig``'s modes and the host-store inputs of ``net`` (split)."""
        for m, sz in orig.sizes.items():
            if padded_size(sz, self.lanes, *self.shape) != sz:
                self.comp.useful_ext.update(useful_split(m, sz, self.lanes))
        for op in net.inputs:
            if op.name not in self.tensors:
                self.input_modes[op.name] = op.modes
                oop = orig.inputs[[o.name for o in orig.inputs].index(op.name)]
                self.input_pads[op.name] = tuple((sz, padded_size(sz, self.lanes, *self.shape))
                                                 for sz in orig.shape(oop))
                t = Tensor(op.name, op.modes)
                t.on_host = True
                self.tensors[op.name] = t

    def add_result(self, orig: Network, net: Network, out: Tensor) -> None:
        crop = tuple((orig.sizes[m], padded_size(orig.sizes[m], self.lanes, *self.shape)) for m in orig.output)
        self.results.setdefault(net.target, []).append((out.name, out.modes, net.result_shape, net.output, crop))


def _compile_layer(spec, phase, config, paths, reuse, align, pad, carry_rows: int = 0,
                   policy: _Policy | None = None, pieces: int = 1, views: bool = True,
                   fuse: bool | str = True) -> Program:
    policy = policy or _Policy()
    phases = _subphases(phase, policy.wg_first)
    comp = Compiler(config, align=align, carry_rows=carry_rows, relayout=policy.relayout, views=views,
                    fuse=fuse is not False, fuse_nested=fuse == "nested",
                    k_split=bool(policy.k_split), stationary=policy.stationary, lookahead=policy.lookahead,
                    defer=policy.defer, run_per_piece=policy.runs, out_transposes=policy.transposes,
                    store_pad=policy.store_pad)
    shape = _shape(pad)
    layer = _Layer(comp, config.lanes, shape)
    used_paths: dict[str, list[list[int]]] = {}
    saved: list[tuple[frozenset[str], tuple[str, ...], str]] = []
    reused: dict[str, list[str]] = {}
    #: saved tensor name -> the contraction tree (nested pairs of input names) that made it
    trees: dict[str, object] = {}
    piped = 0
    #: the MACs a network's :func:`_spill_tree` adds to its MAC-optimal tree's, per changed network
    spilled: list[int] = []

    def choose(red: Network, rpath):
        out = _spill_tree(red, rpath, config) if policy.spill else rpath
        if out is not rpath:
            spilled.append(path_macs(red, out) - path_macs(red, rpath))
        return out

    for ph in phases:
        comp.planner.k_split = policy.k_split is True or (policy.k_split == "wg" and ph == "wg")
        # every network split, with its path (given, or the MAC-optimal path of the real, unpadded one)
        nets = [(n, split_modes(n, config.lanes, *shape)) for n in layer_networks(spec, ph, paths)]
        nets = [(n, sn, (None if paths is None else paths.get(sn.label)) or best_path(n)) for n, sn in nets]
        for i, (orig, net, path) in enumerate(nets):
            layer.add_inputs(orig, net)
            run_net = net
            if ph == "wg" and reuse and saved:
                run_net, path, used = _with_saved(net, path, saved, layer.tensors, choose=choose)
                if used:
                    reused[net.label] = used
            prefix = net.label.replace(" ", "").replace("[", "_").replace("]", "")
            keeps = phase in TRAINS and ph in ("fp", "bp") and net.terms == 1
            # ``backward``: FP's intermediates only, not its result (the forward pass made it)
            upto = None
            if phase == "backward" and ph == "fp":
                if not keeps or len(path) < 2:
                    continue
                upto = len(path) - 1
            shared = _share_wg(comp, run_net, path, prefix, saved, [x[1:] for x in nets[i + 1:]]) \
                if ph == "wg" and reuse and policy.share else []
            if keeps:
                # known before compiling: a segment closing inside this network must spill them
                comp.mem.keep |= {f"{prefix}.t{sid}" for _, _, sid in _saved_subsets(net, path)[:-1]}
            out = None
            if pieces > 1 and phase in ("fp", "bp"):
                out = pipelined_network(comp, run_net, path, layer.tensors, prefix, pieces)
                piped += out is not None
            if out is None:
                out = comp.network(run_net, path, layer.tensors, prefix, upto)
            steps_of = _trees(run_net, path, trees)
            # a network that started from saved intermediates: the path over its own inputs that
            # contracts in the same order (the saved ones' subtrees included)
            used_paths[net.label] = _ssa_path([op.name for op in net.inputs], steps_of[-1]) \
                if run_net is not net else [list(p) for p in path]
            if upto is None:
                layer.add_result(orig, net, out)
            # the tree of every intermediate (tensor ``{prefix}.t{SSA id}``), for networks that start from it
            trees.update((f"{prefix}.t{len(run_net.inputs) + k}", t) for k, t in enumerate(steps_of))
            if keeps:
                for s, modes, sid in _saved_subsets(net, path)[:-1]:
                    name = f"{prefix}.t{sid}"
                    saved.append((s, modes, name))
                    comp.mem.keep.add(name)
            for entry in shared:
                if entry[2] in comp.registry:
                    saved.append(entry)
            layer.tensors.update(comp.registry)
    prog = comp.program(results=layer.results, paths=used_paths, reused=reused, input_modes=layer.input_modes,
                        input_pads=layer.input_pads, pieces=pieces if piped else 1, spill_trees=len(spilled))
    prog.macs -= sum(spilled)       # useful MACs: a spill tree's extra ones are not (UCF HT wg: 1.3 %)
    return prog


def compile_networks(nets: Sequence[Network], config: FettaConfig, derived: Mapping[str, str] | None = None,
                     pad: bool = False, relayout: str = "auto", views: bool = True,
                     paths: Mapping[str, Sequence[Sequence[int]]] | None = None, fuse: bool = True,
                     saved: Mapping[str, tuple[str, int]] | None = None,
                     run_per_piece: bool = False, image_lanes: Mapping[str, str] | None = None,
                     fuse_nested: bool = False, lookahead: int = _Policy().lookahead, pin: bool = False,
                     piece_fraction: float = 0.9) -> Program:
    """Compile a sequence of networks into one :class:`Program` (one compiler: tensors stay on chip
    from one network to the next, and a tensor that comes back in another layout counts as a
    re-layout like any other). Each network runs along its path in ``paths`` (by label), else its
    MAC-optimal one. A tensor the host holds keeps the lane of its DRAM image where a step allows it
    (``Compiler(keep_lanes=True)``; another lane is a transpose through DRAM,
    :meth:`Program.host_transposes`).

    A network's input named like an earlier network's ``target`` is that result (on chip where it
    still is). ``derived``: host tensors computed by the host from an earlier result (name -> that
    result's target, e.g. a HOOI factor from its TTM chain, :mod:`gen.workload.hooi`): the program
    records a ``derive`` host operation after the run that reads the result back, and the run that
    writes the derived tensor comes after it (:meth:`Program.write_deps` times the write from there).
    ``saved``: intermediates a later network uses by name (name -> (label of the network computing
    it, its SSA id on that network's path)): kept (read back when it leaves the chip).
    ``fuse``: as :func:`compile_layer`'s; ``run_per_piece``, ``fuse_nested``, ``lookahead``,
    ``piece_fraction``: see :class:`gen.compiler.compiler.Compiler`.
    ``image_lanes``: host-store input -> the mode whose (low half, if split) is the lane of its DRAM
    image (default: the lane of its first write), e.g. one that no network contracts first.
    ``pin``: a saved intermediate or a result that a later network's step contracts over the mode
    its chunk pieces were cut along stays on chip in those pieces, and that step runs on them where
    they are (:meth:`gen.compiler.pins.Pinning.from_pins`), instead of their DRAM round trip.
    """
    derived = dict(derived or {})
    comp = Compiler(config, relayout=relayout, views=views, keep_lanes=True, fuse=fuse,
                    run_per_piece=run_per_piece, fuse_nested=fuse_nested, lookahead=lookahead,
                    piece_fraction=piece_fraction)
    split = [split_modes(net, config.lanes, pad) for net in nets]
    chosen = {net.label: (paths or {}).get(net.label) or best_path(net) for net in nets}
    if pin:
        comp.pin_for = _pin_for(nets, split, chosen, saved or {})
    layer = _Layer(comp, config.lanes, Shaping(pad))
    outs: dict[str, Tensor] = {}
    used_paths: dict[str, list[list[int]]] = {}
    for orig, net in zip(nets, split):
        for op in net.inputs:
            if op.name in outs:
                layer.tensors[op.name] = outs[op.name]
        new = [op.name for op in net.inputs if op.name not in layer.tensors]
        layer.add_inputs(orig, net)
        for op in net.inputs:
            if op.name in new and op.name in (image_lanes or {}):
                base = image_lanes[op.name]
                lane = next((m for m in op.modes if m in (base, f"{base}~l")), None)
                if lane is None:
                    raise CompileError(f"{op.name} has no mode {base} to be the lane of its DRAM image "
                                       f"(modes {op.modes})", field="image_lanes")
                layer.tensors[op.name].dram_lane = lane
        for name in new:
            if name in derived:
                src = outs.get(derived[name])
                if src is None or not src.on_host:
                    raise CompileError(f"{name} is derived from {derived[name]}, which no earlier network "
                                       f"reads back", field="derived")
                layer.tensors[name].read_run = src.read_run
                comp.host_ops.append((src.read_run, "derive", (name, derived[name])))
        path = chosen[net.label]
        keeps = {name: f"{net.label}.t{sid}" for name, (label, sid) in (saved or {}).items() if label == net.label}
        comp.mem.keep |= set(keeps.values())
        out = comp.network(net, path, layer.tensors, net.label)
        for name, inner in keeps.items():
            outs[name] = comp.registry[inner]
        used_paths[net.label] = [list(p) for p in path]
        layer.add_result(orig, net, out)
        outs[net.target] = out
        layer.tensors.update(comp.registry)
    return comp.program(results=layer.results, paths=used_paths, reused={}, input_modes=layer.input_modes,
                        input_pads=layer.input_pads)


def _pin_for(nets: Sequence[Network], split: Sequence[Network], paths: Mapping[str, Sequence[Sequence[int]]],
             saved: Mapping[str, tuple[str, int]]) -> dict[str, frozenset[str]]:
    """:attr:`Compiler.pin_for` of :func:`compile_networks` ``pin``: the compiler's name of every saved
    intermediate and network result that exactly one later network uses, -> the (split) modes the
    step there that uses it contracts (a tensor used twice stays off: its pieces serve one step)."""
    inner = {name: f"{label}.t{sid}" for name, (label, sid) in saved.items()}
    for net, sp in zip(nets, split):
        inner[net.target] = f"{net.label}.t{len(sp.inputs) + len(paths[net.label]) - 1}"
    uses: dict[str, list[frozenset[str]]] = {}
    for sp in split:
        steps = path_steps(sp, paths[sp.label])
        for k, op in enumerate(sp.inputs):
            st = next((s for s in steps if k in (s.lhs, s.rhs)), None)
            if op.name in inner and st is not None:
                uses.setdefault(inner[op.name], []).append(frozenset(st.contracted))
    return {name: modes[0] for name, modes in uses.items() if len(modes) == 1}


#: most batch pieces :func:`compile_pieces` tries
MAX_PIECES = 16


def compile_pieces(make: Callable[[int], Sequence[Network]], batch: int, config: FettaConfig,
                   paths: Mapping[str, Sequence[Sequence[int]]] | None = None, dram: str = "rule") -> Program:
    """The networks ``make(batch)`` (all with the batch mode ``b`` of size ``batch`` as the first axis of
    every batch operand and result) as one program (:func:`compile_networks`), or as ``P`` repeats of the
    program of ``make(batch // P)`` on alternating halves (:func:`gen.compiler.batched.pieced`: the DRAM
    transfers of one piece overlap the compute of the other), for every ``P`` up to :data:`MAX_PIECES`
    dividing ``batch`` whose piece program is one segment; keeps :func:`_best`'s (``dram``: the count it
    compares by). ``paths`` (by label) hold for every piece count: a path names operands, not sizes.
    A piece program carries no sums across pieces (no reserved accumulation rows): networks that sum the
    batch away run whole. The ATIS transformer's attention (the head the batch mode) runs in 6-12 pieces:
    28,284 cycles per encoder as DMA jobs against 44,569 in one run each."""
    whole = compile_networks(make(batch), config, paths=paths)
    progs = [whole]
    for P in range(2, min(batch, MAX_PIECES) + 1):
        if batch % P:
            continue
        try:
            piece = compile_networks(make(batch // P), config, paths=paths)
        except CompileError:
            continue
        prog = pieced(piece, P, batch, config)
        if prog is None:
            continue
        prog.macs = min(prog.macs, whole.macs)
        prog.variant = dict(whole.variant, pieces=P, pieces_by="phase")
        progs.append(prog)
    return _best(progs, config, dram)


def _trees(net: Network, path, saved_trees: Mapping[str, object]) -> list:
    """The contraction tree (nested pairs of original input names) of every step of ``path``; a
    saved input stands for the tree that made it (``saved_trees``)."""
    n = len(net.inputs)
    tree: dict[int, object] = {i: saved_trees.get(op.name, op.name) for i, op in enumerate(net.inputs)}
    for si, st in enumerate(path_steps(net, path)):
        tree[n + si] = (tree[st.lhs], tree[st.rhs])
    return [tree[n + si] for si in range(len(path))]


def _ssa_path(names: Sequence[str], tree) -> list[list[int]]:
    """The SSA path over the inputs ``names`` that contracts in the order of ``tree``: what
    :attr:`Program.paths` reports, also for a network that started from saved intermediates."""
    index = {x: i for i, x in enumerate(names)}
    path: list[list[int]] = []

    def walk(t) -> int:
        if isinstance(t, str):
            return index[t]
        a, b = walk(t[0]), walk(t[1])
        path.append([a, b])
        return len(names) + len(path) - 1

    walk(tree)
    return path


def _share_wg(comp: Compiler, net: Network, path, prefix: str, saved: list, later: Sequence[tuple[Network, list]]
              ) -> list:
    """The intermediates of a WG network (``path``, before compiling it) to offer to the WG networks
    after it (``later``: each with its path): ``[(input names, modes, tensor name)]``, kept by the
    memory (``Memory.keep``).

    Every WG network of a layer contracts the same inputs but one core: an intermediate of a subset
    of inputs that a later network also holds is exactly an operand of that network (its open modes
    are those of the rest of the inputs and the result, the same there; :func:`_with_saved` checks
    them), so the later network can start from it instead of re-reading ``X`` from DRAM and
    recomputing it (UCF BT wg: the 16 networks each contract ``X`` with the same cores). Only an
    intermediate that a later network would take (:func:`_with_saved` on it, with what is saved now)
    is kept, and one that was kept is released once no later network can hold it (kept tensors take
    memory and are read back when a segment closes: keeping unused ones made the test layers' TTM wg
    slower, 389 cycles against 310)."""
    names = [frozenset(op.name for op in n.inputs) for n, _ in later]
    expand = {name: s for s, _, name in saved}

    def originals(names_: frozenset[str]) -> frozenset[str]:
        return frozenset().union(*(expand.get(x, frozenset([x])) for x in names_))

    for s, _, name in saved:
        if name in comp.mem.keep and not (s < frozenset(op.name for op in net.inputs) or any(s < n for n in names)):
            comp.mem.keep.discard(name)
    cands = [(originals(s), modes, f"{prefix}.t{sid}") for s, modes, sid in _saved_subsets(net, path)[:-1]]
    cands = [c for c in cands if len(c[0]) >= 2 and any(c[0] < n for n in names)]
    taken: set[str] = set()
    for n, p in later if cands else ():
        taken.update(_with_saved(n, p, saved + cands)[2])
    out = [c for c in cands if c[2] in taken]
    comp.mem.keep.update(c[2] for c in out)
    return out


def _with_saved(net: Network, path, saved, tensors=None, choose: Callable | None = None):
    """Re-solve a WG network with saved intermediates (of FP / BP, or of earlier WG networks) as
    inputs, if that saves MACs: ``(network, path, saved tensor names used)``. ``tensors``: the
    compiled tensors, where every chosen one must be (None: only which would be chosen).
    ``choose(red, path)``: the path the re-solved network ``red`` runs, given its MAC-optimal one
    (:func:`_spill_tree`; default: that one)."""
    names = {op.name for op in net.inputs}
    base = path_macs(net, path)

    def fits(s: frozenset[str], modes) -> bool:
        """The saved tensor is exactly the contraction of ``s`` in this network: its open modes."""
        inside = {m for op in net.inputs if op.name in s for m in op.modes}
        outside = {m for op in net.inputs if op.name not in s for m in op.modes} | set(net.output)
        return inside & outside == set(modes)

    # largest saved subsets first, disjoint, at least two inputs, strictly inside the network
    cands = sorted((s for s in saved if s[0] < names and len(s[0]) >= 2 and len(s[0]) < len(names)
                    and fits(s[0], s[1])), key=lambda s: -len(s[0]))
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
        if tensors is not None and tname not in tensors:
            raise CompileError(f"internal: saved tensor {tname} unknown", field="phase")
    return red, rpath if choose is None else choose(red, rpath), [t for _, _, t in chosen]


#: trees :func:`_spill_tree` compares: of the ``SPILL_TREES`` MAC-cheapest, those with at most ``SPILL_MACS``
#: more MACs than the cheapest (more let a tree fastest alone lose in the layer: ATIS TTM embedding train's
#: ``dcore_0`` took a tree of 44 % more MACs, and the step went 878,668 -> 1,151,613 cycles, its saved FP
#: intermediates being on chip in the layer, not alone)
SPILL_TREES = 8
SPILL_MACS = 0.05
#: the tree :func:`_spill_tree` chose, per network and configuration
_spill_choices: dict = {}


def _spill_tree(net: Network, path, config: FettaConfig) -> list[list[int]]:
    """``path``, the MAC-optimal tree of a WG network re-solved over saved intermediates
    (:func:`_with_saved`), or, where one of its operands or intermediates is larger than a ping-pong
    half (it cannot stay on chip), the fastest (compiled alone, by the DRAM rule) of its
    :data:`SPILL_TREES` cheapest trees by MACs within :data:`SPILL_MACS` of the cheapest.

    The MAC count does not see that a tree builds a large intermediate out of small operands, which
    leaves the chip and comes back, where another contracts the large operand first, in pieces that
    stay on chip: UCF BT wg's ``dcore_2`` (``X`` and three factors against ``G Q``) alone moves
    12.6 MiB along its MAC-optimal tree (520,693 cycles lowered to DMA jobs) and 3.9 MiB (161,283)
    along its second (the same MACs), ``X x core_3`` first. Chosen once per network and configuration
    (the compiled variants share it)."""
    half = Geometry.of(config).unified_half_rows * config.lanes
    sizes = [math.prod(net.sizes[m] for m in op.modes) for op in net.inputs]
    sizes += [math.prod(net.sizes[m] for m in st.out_modes) for st in path_steps(net, path)]
    if max(sizes) <= half or len(net.inputs) < 3:
        return path
    key = (net.phase, net.target, net.inputs, net.output, tuple(sorted(net.sizes.items())), config)
    if key not in _spill_choices:
        trees = spill_candidates(net)
        _spill_choices[key] = _fastest(net, trees, config) if len(trees) > 1 else trees[0]
    best = _spill_choices[key]
    return path if [list(s) for s in best] == [list(s) for s in path] else best


def spill_candidates(net: Network) -> list[list[list[int]]]:
    """The trees :func:`_spill_tree` compares: of the :data:`SPILL_TREES` MAC-cheapest, those within
    :data:`SPILL_MACS` of the cheapest, cheapest first."""
    cands = search_network(net, top_k=SPILL_TREES)
    return [c.as_list() for c in cands if c.macs <= cands[0].macs * (1 + SPILL_MACS)]


def _fastest(net: Network, trees, config: FettaConfig, dram: str = "rule") -> list[list[int]]:
    """The tree of ``trees`` along which ``net`` compiled alone takes the fewest cycles end to end (the
    DRAM rule, or lowered to DMA jobs: ``dram="dma"``); a tree that does not compile counts as endless."""
    def cycles(tree) -> float:
        try:
            prog = compile_networks([net], config, paths={net.label: tree})
        except CompileError:
            return math.inf
        return hardware_cycles(prog, config) if dram == "dma" else prog.timeline(config).cycles

    costs = [cycles(t) for t in trees]
    return trees[costs.index(min(costs))]


def fastest_paths(nets: Sequence[Network], config: FettaConfig, top_k: int = 8,
                  dram: str = "rule") -> dict[str, list[list[int]]]:
    """Per network, of its ``top_k`` cheapest contraction trees by MACs (:func:`gen.search.csse.search_network`),
    the one whose program alone is fastest end to end (compute and DRAM stalls: :meth:`Program.timeline`
    by the DRAM rule, or lowered to DMA jobs, ``dram="dma"``), by label, for :func:`compile_networks` ``paths``. The MAC-optimal tree can make an intermediate
    that does not fit a ping-pong half: the token embedding's ``dcore_2`` of the ATIS transformer moves
    4.3 MiB along it (180,017 cycles) and 0.7 MiB along its second tree (53,679 cycles, 18 % more MACs)."""
    return {net.label: _fastest(net, [c.as_list() for c in search_network(net, top_k=top_k)], config, dram)
            for net in nets}


__all__ = ["compile_layer", "compile_networks", "compile_pieces", "default_paths", "fastest_paths", "layer_networks",
           "recomputed_macs", "TRAINS"]
