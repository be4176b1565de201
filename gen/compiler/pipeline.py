"""Batch pipelining of the ``fp`` / ``bp`` networks: DRAM transfers overlapped with compute.

An ``fp`` network (``Y = cores x X[b, ..]``) or a ``bp`` one (``dX = cores x dY[b, ..]``) compiled in
one piece writes all its inputs, computes, and reads everything back: by the DRAM timing rule
(:mod:`gen.design.timing`) nothing overlaps. :func:`pipelined_network` cuts the batch mode into
``P`` pieces instead (the outer half ``b~h`` when :func:`gen.compiler.layout.split_modes` split it,
else ``b``; ``P`` divides its size):

* the steps whose operands hold no batch mode (core x core, *batch-free*) are computed once, in a
  *prologue* run; the batch-free results the batch steps consume (the *frontier*) are read back;
* every piece is the rest of the network on host slices ``b~h@lo:hi`` of the batch-holding inputs
  (:meth:`Compiler._slice`), with the frontier tensors as inputs, in a fresh segment: the pieces
  alternate ping-pong halves, so piece ``i + 1``'s writes overlap piece ``i``'s compute. Piece 0
  uses the prologue's half (a new segment), so its writes - and by program order every later
  piece's writes - wait for the prologue's reads: no write of a frontier tensor precedes the read
  that produced it (the timing rule itself knows no data dependencies);
* the batch-free operands of the pieces (cores, frontier tensors) stay on chip per half: piece
  ``i + 2`` finds them where piece ``i`` left them (:class:`_Resident`), so each is written once
  per half, and a piece's writes are mostly its batch slice;
* the host concatenates the pieces' results along the batch mode into the network's result.

Batch-free steps are computed once, so the useful MACs equal the unpipelined program's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from gen.compiler.allocate import Memory, Tensor
from gen.compiler.compiler import Compiler
from gen.compiler.layout import has_batch
from gen.workload.network import Network, Operand, path_steps

#: piece counts :func:`gen.compiler.phases.compile_layer` tries (those that divide the batch piece mode)
PIECES = (2, 4, 8)


def batch_mode(net: Network) -> str | None:
    """The mode the pieces cut: ``b~h`` if the batch was split, else ``b`` (None: no batch)."""
    for m in ("b~h", "b"):
        if m in net.sizes:
            return m
    return None


def piece_counts(net: Network, wanted: Sequence[int] = PIECES) -> list[int]:
    """The piece counts of ``wanted`` that divide the batch piece mode of ``net`` (a split network)."""
    m = batch_mode(net)
    if m is None:
        return []
    return [p for p in wanted if p > 1 and net.sizes[m] % p == 0]


class _Split:
    """A network's path cut into batch-free trees (each ending in a frontier tensor) and the rest."""

    def __init__(self, net: Network, path: Sequence[Sequence[int]]):
        self.net = net
        self.steps = path_steps(net, path)
        n = self.n = len(net.inputs)
        modes = {i: op.modes for i, op in enumerate(net.inputs)}
        batch = {i for i in range(n) if has_batch(modes[i])}
        self.free: list[int] = []          # step indices of batch-free steps
        self.leaves: dict[int, list[int]] = {i: [i] for i in range(n) if i not in batch}
        for si, st in enumerate(self.steps):
            me = n + si
            if st.lhs in batch or st.rhs in batch:
                batch.add(me)
            else:
                self.free.append(si)
                self.leaves[me] = self.leaves.pop(st.lhs) + self.leaves.pop(st.rhs)
        #: SSA ids of batch-free results consumed by batch steps
        self.frontier = [i for i in sorted(self.leaves) if i >= n]

    def sub_network(self, fid: int) -> tuple[Network, list[list[int]], list[int]]:
        """The batch-free tree ending in ``fid`` as a network of its own (inputs: its leaves), its
        path and the indices of its steps in the original path."""
        net, n = self.net, self.n
        leaves = sorted(self.leaves[fid])
        ids = {old: new for new, old in enumerate(leaves)}
        path, step_ids = [], []
        for si in self.free:
            st = self.steps[si]
            if st.lhs in ids and st.rhs in ids:
                path.append([ids.pop(st.lhs), ids.pop(st.rhs)])
                step_ids.append(si)
                ids[n + si] = len(leaves) + len(path) - 1
        inputs = tuple(net.inputs[i] for i in leaves)
        used = {m for op in inputs for m in op.modes}
        sub = replace(net, inputs=inputs, output=self.steps[fid - n].out_modes,
                      sizes={m: s for m, s in net.sizes.items() if m in used}, result_shape=())
        return sub, path, step_ids

    def batch_network(self, names: dict[int, str]) -> tuple[Network, list[list[int]]]:
        """The batch steps as a network whose inputs are the batch-holding inputs and cores they
        use directly, then the frontier tensors (``names``: their tensor names)."""
        net, n = self.net, self.n
        consumed = {i for fid in self.frontier for i in self.leaves[fid]}
        olds = [i for i in range(n) if i not in consumed] + self.frontier
        inputs = [net.inputs[i] if i < n else Operand(names[i], self.steps[i - n].out_modes) for i in olds]
        ids = {old: new for new, old in enumerate(olds)}
        path = []
        for si, st in enumerate(self.steps):
            if si not in self.free:
                path.append([ids[st.lhs], ids[st.rhs]])
                ids[n + si] = len(olds) + len(path) - 1
        return replace(net, inputs=tuple(inputs)), path

    def same_steps(self, sub: Network, path, step_ids: Sequence[int]) -> bool:
        """Do the steps of ``sub`` along ``path`` keep the modes the original steps keep?"""
        return [st.out_modes for st in path_steps(sub, path)] == [self.steps[i].out_modes for i in step_ids]


def _piece(net: Network, m: str, pm: str, size: int) -> Network:
    """``net`` with mode ``m`` renamed ``pm`` (of ``size``)."""
    def ren(modes):
        return tuple(pm if x == m else x for x in modes)

    sizes = {(pm if k == m else k): (size if k == m else s) for k, s in net.sizes.items()}
    return replace(net, inputs=tuple(Operand(op.name, ren(op.modes)) for op in net.inputs),
                   output=ren(net.output), sizes=sizes)


class _Resident:
    """The batch-free operands of the pieces (cores, frontier tensors): a copy per ping-pong half,
    which stays on chip from one piece to the next piece on the same half (written once per half)."""

    def __init__(self, src: dict[str, Tensor]):
        self.src = src
        self.copies: dict[int, dict[str, Tensor]] = {0: {}, 1: {}}
        #: half -> (last run of the piece that left them, allocator top, addresses on chip)
        self.saved: dict[int, tuple[int, int, dict[str, int]]] = {}

    def tensors(self, half: int) -> dict[str, Tensor]:
        """The copies for ``half`` (host tensors of the same names: written from the host store)."""
        for name, t in self.src.items():
            if name not in self.copies[half]:
                c = Tensor(name, t.modes)
                c.on_host, c.read_run = True, t.read_run
                self.copies[half][name] = c
        return dict(self.copies[half])

    def save(self, mem: Memory) -> None:
        """After a piece: which copies its half still holds."""
        h = mem.half
        on = {n: c.addr for n, c in self.copies[h].items() if mem.onchip.get(n) is c and c.addr is not None}
        self.saved.pop(h, None)
        if on:
            top = max(c.addr + c.layout.rows for n, c in self.copies[h].items() if n in on)
            self.saved[h] = (len(mem.runs) - 1, top, on)

    def restore(self, mem: Memory) -> None:
        """At the start of a piece (a fresh segment): the copies its half still holds, unless another
        segment used that half since."""
        h = mem.half
        if h not in self.saved:
            return
        last, top, on = self.saved.pop(h)
        if any(r.half == h for r in mem.runs[last + 1:-1]):
            return
        for n, addr in on.items():
            c = self.copies[h][n]
            c.addr = addr
            mem.onchip[n] = c
        mem.top = top


def pipelined_network(comp: Compiler, net: Network, path: Sequence[Sequence[int]], tensors: dict[str, Tensor],
                      prefix: str, pieces: int) -> Tensor | None:
    """Compile ``net`` (split, see :func:`gen.compiler.layout.split_modes`) along ``path`` in ``pieces``
    batch pieces (module docstring); None (nothing compiled) when it cannot be pipelined that way."""
    m = batch_mode(net)
    if pieces < 2 or pieces not in piece_counts(net, (pieces,)):
        return None
    sp = _Split(net, path)
    subs = {fid: sp.sub_network(fid) for fid in sp.frontier}
    bnet, bpath = sp.batch_network({fid: f"?t{fid}" for fid in sp.frontier})
    if not sp.same_steps(bnet, bpath, [si for si in range(len(sp.steps)) if si not in sp.free]) or \
            not all(sp.same_steps(sub, p, ids) for sub, p, ids in subs.values()):
        return None
    comp.sizes.update(net.sizes)
    mem = comp.mem
    if mem.onchip or mem.cur.writes or mem.cur.program or mem.cur.reads:
        mem.close_segment()
    # prologue: the batch-free trees, their results read back
    names = {}
    tensors = dict(tensors)
    for fid, (sub, p, _) in subs.items():
        t = comp.network(sub, p, tensors, f"{prefix}.pre{fid}")
        names[fid] = t.name
        tensors[t.name] = t
    bnet, bpath = sp.batch_network(names)
    res = _Resident({op.name: tensors[op.name] for op in bnet.inputs if m not in op.modes})
    S = net.sizes[m]
    step = S // pieces
    parts: list[tuple[Tensor, str]] = []
    for i, lo in enumerate(range(0, S, step)):
        pm = f"{m}@{lo}:{lo + step}"
        comp.sizes[pm] = step
        if i or subs:
            # piece 0 after a prologue: the same half, so its writes wait for the prologue's reads
            mem.live = set()
            mem.close_segment(switch=i > 0)
            res.restore(mem)
        ptensors = res.tensors(mem.half)
        for op in bnet.inputs:
            if m in op.modes:
                ptensors[op.name] = comp._slice(tensors[op.name], m, pm, lo, lo + step)
                comp.stats["chunk_slices"] -= 1     # a pipeline slice, not a chunk slice
        parts.append((comp.network(_piece(bnet, m, pm, step), bpath, ptensors, f"{prefix}.p{i}"), pm))
        res.save(mem)
    out = Tensor(f"{prefix}.out", tuple(net.output))
    out.on_host = True
    out.read_run = max(r.read_run for r, _ in parts)
    comp.host_ops.append((out.read_run, "concat", (out.name, out.modes, m, tuple((r.name, pm) for r, pm in parts))))
    comp.registry[out.name] = out
    return out


__all__ = ["PIECES", "batch_mode", "piece_counts", "pipelined_network"]
