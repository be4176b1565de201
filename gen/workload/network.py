"""The tensor network of each training phase of a tensorized layer.

A :class:`Network` is a list of operands, each with named modes, plus the
modes of the result. It is what the golden model contracts, what the CSSE
searches contraction orders for and what the compiler lowers to instructions.

Mode names (stable, used in docs and compiler output):

* ``b``                      batch
* ``i0, i1, ..`` / ``o0, ..`` the physical in / out modes (``dense``: ``i`` and ``o``)
* ``r0 .. rD``               bonds of ``tt`` / ``tr`` / ``ttm`` (``r_k`` sits left of core k)
* ``h<c>``                   ``ht``: the bond above the tree node stored as ``core_c``
* ``c<b>_<k>``               ``bt`` / ``tucker``: mode k of the core tensor of term b

Phases (``shared/INTERFACES.md`` sections 1 and 3):

* ``fp``: inputs ``X, core_0, ..``, result ``Y``
* ``bp``: inputs ``dY, core_0, ..``, result ``dX``
* ``wg``: one network per core k, inputs ``X, dY, core_0, ..`` without ``core_k``,
  result ``dcore_k`` (``dL/dcore_k`` with ``L = sum(dY * Y)``)

``bt`` with several blocks is a sum of independent terms: ``fp``/``bp`` give one
network per term (inputs ``X`` or ``dY`` then that term's cores), all with the same
``target``; their results are summed. The ``wg`` network of a core holds only the
cores of its own term (the other terms do not depend on it). The compiler contracts the
terms as one network each (:func:`stack_terms`: the terms' cores stacked along a mode
``term``); the golden model keeps them apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from gen.errors import SpecError
from gen.workload.spec import LayerSpec

PHASES = ("fp", "bp", "wg")


@dataclass(frozen=True)
class Operand:
    """One input of a network: its name (npz key) and its modes in storage order."""

    name: str
    modes: tuple[str, ...]


@dataclass(frozen=True)
class Network:
    """A tensor network whose contraction gives (one term of) a phase's result."""

    phase: str
    target: str                       # npz key of the result this network contributes to
    inputs: tuple[Operand, ...]       # SSA numbering order
    output: tuple[str, ...]           # modes of the result (those present in the inputs)
    sizes: Mapping[str, int] = field(repr=False)
    #: shape the contracted result is reshaped to (the npz array shape)
    result_shape: tuple[int, ...] = ()
    #: index of the block term (``bt``) and how many terms share this target
    term: int = 0
    terms: int = 1

    @property
    def label(self) -> str:
        """``Y``, ``dcore_3``, or ``Y[term 1]`` when several terms are summed."""
        return self.target if self.terms == 1 else f"{self.target}[term {self.term}]"

    def shape(self, operand: Operand | int) -> tuple[int, ...]:
        op = self.inputs[operand] if isinstance(operand, int) else operand
        return tuple(self.sizes[m] for m in op.modes)

    def einsum_expr(self) -> str:
        """The whole network as an einsum expression (one letter per mode)."""
        letters = _letters(self.sizes)
        ins = ",".join("".join(letters[m] for m in op.modes) for op in self.inputs)
        return ins + "->" + "".join(letters[m] for m in self.output)

    def total_macs_dense(self) -> int:
        """MACs of contracting everything in one step (product of all mode sizes)."""
        return math.prod(self.sizes.values())


def _letters(sizes: Mapping[str, int]) -> dict[str, str]:
    import opt_einsum

    return {m: opt_einsum.get_symbol(i) for i, m in enumerate(sizes)}


# --------------------------------------------------------------------------------
# Building the networks from a spec
# --------------------------------------------------------------------------------
def physical_modes(spec: LayerSpec) -> tuple[list[str], list[str]]:
    """Names of the physical in- and out-modes (``dense``: ``["i"], ["o"]``)."""
    if spec.format == "dense":
        return ["i"], ["o"]
    di = len(spec.in_modes)
    return [f"i{k}" for k in range(di)], [f"o{k}" for k in range(len(spec.out_modes))]


def core_operands(spec: LayerSpec) -> tuple[list[Operand], dict[str, int], list[int]]:
    """The cores as operands, the size of every mode, and the term of each core."""
    ins, outs = physical_modes(spec)
    phys = ins + outs
    sizes: dict[str, int] = {"b": spec.batch}
    if spec.format == "dense":
        sizes.update(i=spec.I, o=spec.O)
    else:
        sizes.update(zip(phys, spec.modes))
    shapes = spec.core_shapes()
    cores: list[Operand] = []
    terms: list[int] = []
    f = spec.format
    if f == "dense":
        cores.append(Operand("core_0", ("i", "o")))
        terms.append(0)
    elif f in ("tt", "tr"):
        D = spec.D
        for k in range(D):
            right = f"r{k + 1}" if (f == "tt" or k + 1 < D) else "r0"
            cores.append(Operand(f"core_{k}", (f"r{k}", phys[k], right)))
            terms.append(0)
    elif f == "ttm":
        d = len(spec.in_modes)
        for k in range(d):
            cores.append(Operand(f"core_{k}", (f"r{k}", ins[k], outs[k], f"r{k + 1}")))
            terms.append(0)
    elif f == "ht":
        root = spec.ht_tree()
        ops: dict[int, Operand] = {}

        def visit(node) -> None:
            if node.is_leaf:
                ops[node.core] = Operand(f"core_{node.core}", (phys[node.modes[0]], f"h{node.core}"))
                return
            visit(node.left)
            visit(node.right)
            ops[node.core] = Operand(f"core_{node.core}",
                                     (f"h{node.left.core}", f"h{node.right.core}", f"h{node.core}"))

        visit(root)
        cores = [ops[c] for c in range(len(ops))]
        terms = [0] * len(cores)
    else:  # bt, tucker
        c = 0
        for b in range(spec.blocks):
            cores.append(Operand(f"core_{c}", tuple(f"c{b}_{k}" for k in range(spec.D))))
            terms.append(b)
            c += 1
            for k in range(spec.D):
                cores.append(Operand(f"core_{c}", (phys[k], f"c{b}_{k}")))
                terms.append(b)
                c += 1
    for op, shape in zip(cores, shapes):
        for m, s in zip(op.modes, shape):
            if m in sizes and sizes[m] != s:
                raise AssertionError(f"mode {m} sized {sizes[m]} and {s}")  # internal consistency
            sizes[m] = s
    return cores, sizes, terms


def phase_networks(spec: LayerSpec, phase: str) -> list[Network]:
    """The networks of one phase (``fp``, ``bp`` or ``wg``); ``train`` = all three."""
    if phase == "train":
        return [n for p in PHASES for n in phase_networks(spec, p)]
    if phase not in PHASES:
        raise SpecError(f"unknown phase {phase!r} (known: fp, bp, wg, train)", field="phase")
    ins, outs = physical_modes(spec)
    cores, sizes, terms = core_operands(spec)
    X = Operand("X", ("b", *ins))
    dY = Operand("dY", ("b", *outs))
    nterms = max(terms) + 1
    nets: list[Network] = []

    def make(phase: str, target: str, inputs: list[Operand], wanted: Sequence[str],
             result_shape: tuple[int, ...], term: int) -> Network:
        present = {m for op in inputs for m in op.modes}
        output = tuple(m for m in wanted if m in present)
        missing = [m for m in wanted if m not in present]
        assert all(sizes[m] == 1 for m in missing), missing
        used = {m: sizes[m] for op in inputs for m in op.modes}
        return Network(phase=phase, target=target, inputs=tuple(inputs), output=output, sizes=used,
                       result_shape=result_shape, term=term, terms=1 if phase == "wg" else nterms)

    if phase in ("fp", "bp"):
        src, dst, target, shape = (X, outs, "Y", (spec.batch, spec.O)) if phase == "fp" else \
            (dY, ins, "dX", (spec.batch, spec.I))
        for t in range(nterms):
            term_cores = [c for c, tc in zip(cores, terms) if tc == t]
            nets.append(make(phase, target, [src, *term_cores], ("b", *dst), shape, t))
    else:
        for k, core in enumerate(cores):
            others = [c for c, tc in zip(cores, terms) if tc == terms[k] and c is not core]
            nets.append(make("wg", f"d{core.name}", [X, dY, *others], core.modes,
                             tuple(sizes[m] for m in core.modes), terms[k]))
    return nets


#: joins the names of the parts of a stacked input or result (``core_0+core_9``, ``dcore_1+dcore_10``)
STACK = "+"
#: the mode that indexes the block terms of a stacked network
TERM = "term"


def stack_terms(nets: Sequence[Network]) -> list[Network]:
    """The block terms of a phase as one network per target (or per core position, ``wg``): the
    cores of the terms stacked along a new mode :data:`TERM`, which every stacked core holds and the
    result sums (``fp`` / ``bp``) or keeps (``wg``: the gradients of the stacked cores).

    ``Y = sum_t X x cores_t`` contracts ``X`` with the stacked cores of all terms at once, so a
    compiled program reads ``X`` (``dY``) once instead of once per term, and the terms' results sum
    on chip instead of on the host; the MACs are those of the separate terms (``term`` is kept by
    every step until the last). A stacked input is named by its parts joined with :data:`STACK`
    (``np.stack`` of them along a first axis, :func:`stacked_value`); a stacked ``wg`` result is
    split again by :func:`unstack_results`. Networks without several terms, or whose terms differ in
    core shapes, are returned unchanged."""
    keys, seen = [], {}
    for net in nets:
        if net.phase == "wg":       # the j-th core of each term
            seen[net.term] = seen.get(net.term, -1) + 1
            keys.append(("wg", seen[net.term]))
        else:
            keys.append((net.phase, net.target) if net.terms > 1 else None)
    groups: dict[tuple, list[Network]] = {}
    for key, net in zip(keys, nets):
        if key is not None:
            groups.setdefault(key, []).append(net)
    merged = {key: _stacked(group) for key, group in groups.items() if len(group) > 1}
    out: list[Network] = []
    for key, net in zip(keys, nets):
        if merged.get(key) is None:
            out.append(net)
        elif net is groups[key][0]:
            out.append(merged[key])
    return out


def _stacked(group: Sequence[Network]) -> Network | None:
    """One network for ``group`` (term networks of equal shapes), or None when they do not match."""
    first = group[0]
    if len({n.term for n in group}) != len(group) or TERM in first.sizes:
        return None
    rename: list[dict[str, str]] = []
    for net in group:
        if len(net.inputs) != len(first.inputs) or len(net.output) != len(first.output):
            return None
        ren: dict[str, str] = {}
        for a, b in zip(first.inputs + (Operand("", first.output),), net.inputs + (Operand("", net.output),)):
            if len(a.modes) != len(b.modes):
                return None
            for ma, mb in zip(a.modes, b.modes):
                if ren.setdefault(mb, ma) != ma or first.sizes[ma] != net.sizes[mb]:
                    return None
        if len(set(ren.values())) != len(ren):
            return None
        rename.append(ren)
    shared = [i for i, op in enumerate(first.inputs) if all(n.inputs[i].name == op.name for n in group)]
    if any(ren[m] != m for n, ren in zip(group, rename) for i in shared for m in n.inputs[i].modes):
        return None                     # a shared input (X, dY) must keep its modes in every term
    inputs = tuple(op if i in shared else Operand(STACK.join(n.inputs[i].name for n in group), (TERM, *op.modes))
                   for i, op in enumerate(first.inputs))
    wg = first.phase == "wg"
    output = (TERM, *first.output) if wg else first.output
    target = STACK.join(n.target for n in group) if wg else first.target
    shape = (len(group), *first.result_shape) if wg else first.result_shape
    return Network(phase=first.phase, target=target, inputs=inputs, output=output,
                   sizes={**first.sizes, TERM: len(group)}, result_shape=shape, term=0, terms=1)


def stacked_value(arrays: Mapping[str, Any], name: str) -> Any:
    """The array of input ``name``: ``arrays[name]``, or the stack of its parts (:data:`STACK`)."""
    if STACK not in name:
        return arrays[name]
    return np.stack([np.asarray(arrays[part]) for part in name.split(STACK)])


def unstack_results(results: Mapping[str, Any]) -> dict[str, Any]:
    """``results`` with every stacked result (:func:`stack_terms`) split into its parts."""
    out = {}
    for name, value in results.items():
        if STACK in name:
            out.update(zip(name.split(STACK), value))
        else:
            out[name] = value
    return out


# --------------------------------------------------------------------------------
# Pairwise contraction paths (SSA form, as opt_einsum)
# --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One pairwise contraction of a path, with the modes of its operands and result."""

    lhs: int
    rhs: int
    lhs_modes: tuple[str, ...]
    rhs_modes: tuple[str, ...]
    out_modes: tuple[str, ...]
    macs: int

    @property
    def contracted(self) -> tuple[str, ...]:
        return tuple(m for m in self.lhs_modes if m in self.rhs_modes and m not in self.out_modes)


def _check_path(net: Network, path: Sequence[Sequence[int]]) -> None:
    n = len(net.inputs)
    if len(path) != n - 1:
        raise ValueError(f"a path over {n} inputs needs {n - 1} steps, got {len(path)}")
    live = set(range(n))
    nxt = n
    for s, pair in enumerate(path):
        if len(pair) != 2:
            raise ValueError(f"step {s} must name two tensors, got {list(pair)}")
        i, j = pair
        if i == j or i not in live or j not in live:
            raise ValueError(f"step {s} {list(pair)} names a tensor that is not live (live: {sorted(live)})")
        live -= {i, j}
        live.add(nxt)
        nxt += 1


def path_steps(net: Network, path: Sequence[Sequence[int]]) -> list[Step]:
    """Expand an SSA path into :class:`Step` records (modes kept, MACs)."""
    _check_path(net, path)
    modes: dict[int, tuple[str, ...]] = {i: op.modes for i, op in enumerate(net.inputs)}
    nxt = len(net.inputs)
    steps: list[Step] = []
    for i, j in path:
        a, b = modes.pop(i), modes.pop(j)
        elsewhere = set(net.output)
        for m in modes.values():
            elsewhere.update(m)
        union = tuple(dict.fromkeys(a + b))
        out = tuple(m for m in union if m in elsewhere)
        macs = math.prod(net.sizes[m] for m in union)
        steps.append(Step(i, j, a, b, out, macs))
        modes[nxt] = out
        nxt += 1
    return steps


def path_macs(net: Network, path: Sequence[Sequence[int]]) -> int:
    """Total MACs of an SSA path (INTERFACES section 3 cost)."""
    return sum(s.macs for s in path_steps(net, path))


def greedy_path(net: Network) -> list[list[int]]:
    """A simple, deterministic order: always the cheapest connected pair next.

    This is the golden model's default order; it is independent of the CSSE
    (``gen.search``) on purpose, so that the two check each other.
    """
    modes: dict[int, tuple[str, ...]] = {i: op.modes for i, op in enumerate(net.inputs)}
    nxt = len(net.inputs)
    path: list[list[int]] = []
    while len(modes) > 1:
        best = None
        ids = sorted(modes)
        for x in range(len(ids)):
            for y in range(x + 1, len(ids)):
                i, j = ids[x], ids[y]
                shared = bool(set(modes[i]) & set(modes[j]))
                union = dict.fromkeys(modes[i] + modes[j])
                macs = math.prod(net.sizes[m] for m in union)
                key = (not shared, macs, i, j)
                if best is None or key < best[0]:
                    best = (key, i, j)
        _, i, j = best
        a, b = modes.pop(i), modes.pop(j)
        elsewhere = set(net.output)
        for m in modes.values():
            elsewhere.update(m)
        modes[nxt] = tuple(m for m in dict.fromkeys(a + b) if m in elsewhere)
        path.append([i, j])
        nxt += 1
    return path


__all__ = ["PHASES", "STACK", "TERM", "Operand", "Network", "Step", "core_operands", "phase_networks",
           "physical_modes", "stack_terms", "stacked_value", "unstack_results",
           "path_steps", "path_macs", "greedy_path"]
