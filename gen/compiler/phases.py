"""Whole phases: a layer's FP, BP, WG (or all three, ``train``) into one :class:`Program`.

:func:`compile_layer` takes the networks of a phase (:func:`gen.workload.network.phase_networks`),
splits and pads their modes (:func:`gen.compiler.layout.split_modes`), contracts each along its
MAC-optimal path (:func:`gen.search.csse.best_path`, or one given per label) with a
:class:`gen.compiler.compiler.Compiler`, and records how the host assembles the results. With
``phase="train"`` the FP and BP intermediates are kept (spilled to the host, counted as DRAM traffic)
and every WG network is re-solved with the saved tensors as extra inputs when that saves MACs
(:func:`_with_saved`; ``gen.search.training_aware`` explains why an FP intermediate not containing
``core_k`` is exactly a WG operand of ``core_k``).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from gen.compiler.allocate import Tensor
from gen.compiler.compiler import Compiler
from gen.compiler.layout import padded_size, split_modes, useful_split
from gen.compiler.pipeline import PIECES, piece_counts, pipelined_network
from gen.compiler.program import CompileError, Program
from gen.design.config import FettaConfig
from gen.search.csse import best_path
from gen.workload.network import Network, Operand, path_macs, path_steps, phase_networks


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
                  pipeline: bool | int | None = None) -> Program:
    """Compile ``phase`` (``fp``, ``bp``, ``wg`` or ``train``) of ``spec`` into a :class:`Program`.

    ``pad``: zero-pad modes to a multiple of ``lanes`` (:func:`split_modes`); ``None`` compiles
    both ways when padding would change anything and keeps the program with fewer cycles end to end
    (:meth:`Program.timeline`: compute and DRAM stalls; padding costs MACs, memory and DRAM bytes, and
    can force chunking).
    ``pipeline`` (``fp`` and ``bp`` only): batch pipelining (:mod:`gen.compiler.pipeline`); ``None`` or
    ``True`` also compiles every piece count of :data:`PIECES` that divides the batch and keeps the
    program with the fewest cycles end to end; an int ``P`` compiles ``P`` pieces only (one piece if
    ``P`` does not divide the batch); ``False`` (or 1) one piece.
    ``align=True`` rounds every layout's row strides (:meth:`Layout.make` ``align``); measured
    NOT to help (see ``docs/compiler.md``), so compact layouts stay the default."""
    pads = [pad]
    if pad is None:
        pads = [False]
        phases = ["fp", "bp", "wg"] if phase == "train" else [phase]
        if any(padded_size(sz, config.lanes) != sz for ph in phases for net in phase_networks(spec, ph)
               for sz in net.sizes.values()):
            pads.append(True)
    progs = []
    for pd in pads:
        counts = _piece_choices(spec, phase, config, pd, pipeline)
        base = None
        if not counts or pipeline is None or pipeline is True:
            base = _compile_layer(spec, phase, config, paths, reuse, align, pd)
            if progs and base.timeline(config).compute_cycles > 1.5 * min(p.timeline(config).cycles for p in progs):
                counts = []     # hopeless (its compute alone): spare the compile time of its pieces
            progs.append(base)
        for pieces in counts:
            try:
                prog = _compile_layer(spec, phase, config, paths, reuse, align, pd, pieces)
            except CompileError:
                if base is None:        # asked for exactly these pieces
                    raise
                continue                # e.g. a piece needs chunking over a contracted mode: one piece does
            if base is not None and prog.macs != base.macs:
                raise CompileError(f"internal: {pieces} batch pieces give {prog.macs} MACs, one piece "
                                   f"{base.macs}", field="phase")
            progs.append(prog)
    # end to end: padding and pipelining change the compute and the bytes moved (and so the DRAM stalls)
    return min(progs, key=lambda p: (p.timeline(config).cycles, p.est_cycles))


def _piece_choices(spec, phase: str, config: FettaConfig, pad: bool, pipeline: bool | int | None) -> list[int]:
    """The batch piece counts to try for ``phase`` (those dividing every network's batch piece mode)."""
    if phase not in ("fp", "bp") or pipeline is False:
        return []
    wanted = PIECES if pipeline is None or pipeline is True else (int(pipeline),)
    nets = [split_modes(net, config.lanes, pad) for net in phase_networks(spec, phase)]
    return [p for p in wanted if all(p in piece_counts(net, (p,)) for net in nets)]


class _Layer:
    """The host's view of one layer being compiled: its input tensors and how results assemble."""

    def __init__(self, comp: Compiler, lanes: int, pad: bool):
        self.comp = comp
        self.lanes = lanes
        self.pad = pad
        self.tensors: dict[str, Tensor] = {}
        self.results: dict[str, list] = {}
        self.input_modes: dict[str, tuple[str, ...]] = {}
        self.input_pads: dict[str, tuple[tuple[int, int], ...]] = {}

    def add_inputs(self, orig: Network, net: Network) -> None:
        """Register the padding of ``orig``'s modes and the host-store inputs of ``net`` (split)."""
        for m, sz in orig.sizes.items():
            if padded_size(sz, self.lanes, self.pad) != sz:
                self.comp.useful_ext.update(useful_split(m, sz, self.lanes))
        for op in net.inputs:
            if op.name not in self.tensors:
                self.input_modes[op.name] = op.modes
                oop = orig.inputs[[o.name for o in orig.inputs].index(op.name)]
                self.input_pads[op.name] = tuple((sz, padded_size(sz, self.lanes, self.pad))
                                                 for sz in orig.shape(oop))
                t = Tensor(op.name, op.modes)
                t.on_host = True
                self.tensors[op.name] = t

    def add_result(self, orig: Network, net: Network, out: Tensor) -> None:
        crop = tuple((orig.sizes[m], padded_size(orig.sizes[m], self.lanes, self.pad)) for m in orig.output)
        self.results.setdefault(net.target, []).append((out.name, out.modes, net.result_shape, net.output, crop))


def _compile_layer(spec, phase, config, paths, reuse, align, pad, pieces: int = 1) -> Program:
    phases = ["fp", "bp", "wg"] if phase == "train" else [phase]
    comp = Compiler(config, align=align)
    layer = _Layer(comp, config.lanes, pad)
    used_paths: dict[str, list[list[int]]] = {}
    saved: list[tuple[frozenset[str], tuple[str, ...], str]] = []
    reused: dict[str, list[str]] = {}
    piped = 0
    for ph in phases:
        for net in phase_networks(spec, ph):
            orig = net
            net = split_modes(net, config.lanes, pad)
            layer.add_inputs(orig, net)
            path = None if paths is None else paths.get(net.label)
            if path is None:
                path = best_path(orig)      # the MAC-optimal path of the real (unpadded) network
            run_net = net
            if ph == "wg" and reuse and phase == "train" and saved:
                run_net, path, used = _with_saved(net, path, saved, layer.tensors)
                if used:
                    reused[net.label] = used
            prefix = net.label.replace(" ", "").replace("[", "_").replace("]", "")
            keeps = phase == "train" and ph in ("fp", "bp") and net.terms == 1
            if keeps:
                # known before compiling: a segment closing inside this network must spill them
                comp.mem.keep |= {f"{prefix}.t{sid}" for _, _, sid in _saved_subsets(net, path)[:-1]}
            out = None
            if pieces > 1 and phase in ("fp", "bp"):
                out = pipelined_network(comp, run_net, path, layer.tensors, prefix, pieces)
                piped += out is not None
            if out is None:
                out = comp.network(run_net, path, layer.tensors, prefix)
            used_paths[net.label] = [list(p) for p in path]
            layer.add_result(orig, net, out)
            if keeps:
                for s, modes, sid in _saved_subsets(net, path)[:-1]:
                    name = f"{prefix}.t{sid}"
                    saved.append((s, modes, name))
                    comp.mem.keep.add(name)
            layer.tensors.update(comp.registry)
    return comp.program(results=layer.results, paths=used_paths, reused=reused, input_modes=layer.input_modes,
                        input_pads=layer.input_pads, pieces=pieces if piped else 1)


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


__all__ = ["compile_layer", "default_paths"]
