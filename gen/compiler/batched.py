"""Batch pieces: a phase run as ``P`` pieces of its batch on alternating ping-pong halves, so that
the DRAM transfers of one piece overlap the compute of the other.

The phase is compiled once for a batch of ``B / P`` (the *piece program*; it must be one segment:
all its runs on one half, and no host operation but creating the identities of on-chip
re-layouts), and :func:`pieced` runs it ``P`` times, piece ``p`` on half ``p % 2``:

* the batch inputs of piece ``p`` are the host slices ``[p B/P, (p+1) B/P)`` of the npz arrays
  (``Program.input_slices``). Tensors that do not depend on the batch (cores, identities) are
  written by pieces 0 and 1 only and stay in their half, and so do the results of batch-free steps
  (core x core, their re-layouts): pieces ``p >= 2`` skip those instructions. Nothing of a piece
  overwrites them: the allocator never reuses the rows of batch-free tensors
  (``Memory.protected``), and every piece is the same program at the same (half-relative) addresses.
* results with a batch axis are read back by every piece and concatenated by the host
  (``Program.result_pieces``). Results without one (weight gradients) are *carried*: their last
  step writes its partial sums to rows of their own at the top of the accumulation unit (reserved
  while compiling: :class:`gen.compiler.compiler.Compiler` ``carry_rows``; no other mapping
  touches them), every later piece adds to them (``ACC`` on every instruction), and only the last
  piece reads the result back.
* a step that sums the batch away carries its result even when later steps of its network (or of
  a network sharing it) use it: those steps are *deferred*, run by the last piece only, once, on
  the sum of all pieces (they are linear in it and their other operands are batch-free), instead
  of by every piece on its own partial sum (ATIS TT train: ``dcore_0 = (sum_b X dX.t10) core_1``
  computed once instead of once per piece).

The useful MACs are the phase's (batch-free steps count once). A carried result is one FP32
accumulation over all pieces: its error bound is that of a step whose contracted size is ``P``
times the piece's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from gen.compiler.layout import has_batch
from gen.compiler.program import Program, Read, Run, Write, onchip_bytes
from gen.design.config import FettaConfig
from gen.design.isa import Flag, Geometry, Opcode, gemm_macs


def piece_name(name: str, p: int) -> str:
    """Host name of piece ``p``'s copy of tensor ``name``."""
    return f"{name}@{p}"


def _batch_dep(piece: Program) -> set[str]:
    """Host names of the piece's tensors that differ between pieces."""
    return piece.batch_dep | {n for n, modes in piece.input_modes.items() if has_batch(modes)}


def _piece_run(piece: Program, run: Run, ri: int, p: int, P: int, dep: set[str], late: set[str],
               tags) -> Run | None:
    """Run ``ri`` of the piece program as piece ``p`` runs it (None: nothing left to do); ``late``: the
    piece's sums over all pieces, carried or deferred, which only the last piece has."""
    last = p == P - 1
    writes = [Write(w.addr, piece_name(w.name, p) if w.name in dep else w.name, w.layout)
              for w in run.writes if (p < 2 or w.name in dep) and (w.name not in late or last)]
    program = []
    for i, ins in enumerate(run.program):
        kind = tags.get((ri, i))
        if kind == "free" and p >= 2:
            continue             # its result is still in this half from piece p - 2
        if kind == "final" and not last:
            continue             # deferred: the last piece runs it on the sum of all pieces
        if kind == "carry" and p > 0:
            ins = replace(ins, flags=ins.flags | Flag.ACC)
        program.append(ins)
    reads = [Read(rd.addr, piece_name(rd.name, p) if rd.name in dep else rd.name, rd.layout)
             for rd in run.reads if (rd.name not in late or last) and (p < 2 or rd.name in dep)]
    if writes or reads or any(i.opcode != Opcode.HALT for i in program):
        return Run(p % 2, writes, program, reads)
    return None


def _runs(piece: Program, P: int, dep: set[str], late: set[str]) -> list[Run]:
    """The runs of all pieces: pieces in pairs (one per half), the runs of a pair interleaved, so
    that one piece computes while the other waits for a transfer (a host re-layout splits runs)."""
    tags = {(r, i): k for r, i, k in piece.instr_tags}
    runs = []
    for p0 in range(0, P, 2):
        for ri, run in enumerate(piece.runs):
            for p in range(p0, min(P, p0 + 2)):
                r = _piece_run(piece, run, ri, p, P, dep, late, tags)
                if r is not None:
                    runs.append(r)
    return runs


def pieced(piece: Program, P: int, batch: int, config: FettaConfig) -> Program | None:
    """The program running ``piece`` (compiled for a batch of ``batch / P``) on ``P`` batch pieces,
    or None when ``piece`` is not one segment or has host operations other than identities."""
    if P < 2 or batch % P or len({r.half for r in piece.runs}) != 1 \
            or any(kind not in ("eye", "relayout") for _, kind, _ in piece.host_ops):
        return None
    dep = _batch_dep(piece)
    late = piece.carried | piece.deferred       # sums over all pieces: only the last piece has them
    batch_in = {n for n in piece.input_modes if n in dep}
    results, result_pieces = {}, {}
    for target, parts in piece.results.items():
        if any(has_batch(part[3]) for part in parts):
            results[target] = [(piece_name(n, p), *rest) for p in range(P) for n, *rest in parts]
            result_pieces[target] = P
        elif all(n in late for n, *_ in parts):
            results[target] = [(piece_name(n, P - 1), *rest) for n, *rest in parts]
        else:
            return None
    modes, pads, slices = {}, {}, {}
    b = batch // P
    for n, m in piece.input_modes.items():
        names = [piece_name(n, p) for p in range(P)] if n in batch_in else [n]
        for p, pn in enumerate(names):
            modes[pn] = m
            if n in piece.input_pads:
                pads[pn] = piece.input_pads[n]
            if n in batch_in:
                slices[pn] = (n, p * b, (p + 1) * b)
    runs = _runs(piece, P, dep, late)
    # host re-layouts: every piece does those of batch tensors, pieces 0 and 1 those of the others
    relayouts = [(1 if a[0] in late else P if a[0] in dep else min(P, 2), a[1], a[2])
                 for _, kind, a in piece.host_ops if kind == "relayout"]
    causes = Counter()
    for n, _, cause in relayouts:
        causes[cause] += n
    steps = [s for p in range(P) for s in piece.steps
             if (p == P - 1 if s.deferred else p < 2 or not s.batch_free)]
    once_macs = sum(s.macs for s in piece.steps if s.batch_free or s.deferred)
    geo = Geometry.of(config)
    gemms = [i for r in runs for i in r.program if i.opcode == Opcode.GEMM]
    row_bytes = config.lanes * config.elem_bits // 8
    eyes = [op for op in piece.host_ops if op[1] == "eye"]      # re-layouts need no host work
    return Program(runs, eyes, results, dict(piece.sizes), P * (piece.macs - once_macs) + once_macs,
                   steps, dram_bytes=row_bytes * sum(x.layout.rows for r in runs for x in r.writes + r.reads),
                   onchip_bytes=onchip_bytes(gemms, geo, config.elem_bits // 8),
                   padded_macs=sum(gemm_macs(i, geo) for i in gemms),
                   onchip_relayouts=sum(1 for s in steps if s.roles.startswith("re-layout")),
                   relayouts=sum(n for n, _, _ in relayouts), relayout_bytes=sum(n * b for n, b, _ in relayouts),
                   relayout_causes=dict(causes),
                   paths=piece.paths, reused=piece.reused, input_modes=modes, input_pads=pads,
                   input_slices=slices, result_pieces=result_pieces, pieces=P, spill_trees=piece.spill_trees,
                   twin_sites=piece.twin_sites, padded_stores=piece.padded_stores,
                   carried={piece_name(n, P - 1) for n in piece.carried},
                   deferred={piece_name(n, P - 1) for n in piece.deferred})


__all__ = ["piece_name", "pieced"]
