"""The :class:`Compiler`: networks, step by step, into runs of instructions.

For every pairwise step of a network's contraction path the compiler asks the
:class:`gen.compiler.planner.Planner` for a plan, lets :class:`gen.compiler.allocate.Memory`
place the operands (host writes, re-layouts through the host) and the result, and emits the
instructions of the plan's fastest mapping that passes the ISA checks at the real addresses
(:func:`gen.compiler.mapping.instantiate`). A step that does not fit the current half is retried
in a fresh segment; one that does not fit even then is chunked (:meth:`Compiler.chunked`,
:mod:`gen.compiler.chunk`).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from typing import Sequence

from gen.compiler.allocate import Memory, NoRoom, Tensor, addr_of
from gen.compiler.chunk import Chunking, Fusable
from gen.compiler.layout import Layout, has_batch
from gen.compiler.mapping import acc_span, free_instrs, instantiate
from gen.compiler.pins import Pinning
from gen.compiler.planner import NextInfo, Plan, Planner
from gen.compiler.relayout import eye_layout, eye_name, primed
from gen.compiler.program import (CompileError, Program, StepRecord, gemm_dataflows, gemm_transposes,
                                  onchip_bytes)
from gen.design.config import FettaConfig, check_accelerator
from gen.design.isa import Dataflow, Geometry, Instr, gemm_macs
from gen.workload.grouping import group_modes
from gen.workload.network import Network, path_steps


#: where tensors are re-laid out (``Compiler`` ``relayout``): the fewer cycles of the two (the TCU's
#: identity GEMM against the DRAM time of the host path, which also splits the run), always on chip
#: where the TCU can, or always through the host
RELAYOUT_POLICIES = ("auto", "onchip", "host")

#: a stationary plan holds its B operand in the PEs: ``WS`` / ``WS_H`` when B is batch-free (a weight),
#: else the input-stationary name of the same mapping (:class:`gen.design.isa.Dataflow`)
INPUT_STATIONARY = {Dataflow.WS: Dataflow.IS, Dataflow.WS_H: Dataflow.IS_H}


class NoAccum(Exception):
    """No mapping of a step fits the accumulation unit (the step is chunked)."""


class Compiler(Chunking, Pinning):
    """Compile networks into a :class:`gen.compiler.program.Program` (see :mod:`gen.compiler`)."""

    def __init__(self, config: FettaConfig, align: bool = False, carry_rows: int = 0, relayout: str = "auto",
                 views: bool = True, keep_lanes: bool = False, fuse: bool = True, run_per_piece: bool = False,
                 k_split: bool = True, stationary: bool = True, lookahead: int = 3, defer: bool = True,
                 fuse_nested: bool = False, piece_fraction: float = 0.9, out_transposes: bool = True,
                 store_pad: bool = False):
        check_accelerator(config)
        if relayout not in RELAYOUT_POLICIES:
            raise CompileError(f"must be one of {', '.join(RELAYOUT_POLICIES)}, got {relayout!r}", field="relayout")
        self.relayout = relayout
        #: chunked steps run their pieces through the later steps that keep the chunked mode
        self.fuse = fuse
        #: every piece of a step chunked over a free mode in a run of its own (:meth:`concatenated`)
        self.run_per_piece = run_per_piece
        #: a piece of a fused chain that is cut again runs the chain's later steps on its own pieces
        #: too (:meth:`concatenated`)
        self.fuse_nested = fuse_nested
        #: piece names whose pieces a nested chunking reads back and concatenates (:meth:`concatenated`)
        self.assemble: set[str] = set()
        #: intermediate name -> the modes the later step that uses it contracts: a chunked step
        #: pins the pieces of such a tensor where one of them is its cut (:meth:`concatenated`,
        #: :meth:`from_pins`; set by :func:`gen.compiler.phases.compile_networks` ``pin``)
        self.pin_for: dict[str, frozenset[str]] = {}
        #: the share of a half a chunk piece's estimated rows may take (:meth:`Chunking.chunked`):
        #: smaller pieces shorten the first piece's load, which no compute hides
        self.piece_fraction = piece_fraction
        self.config = config
        self.geo = Geometry.of(config)
        #: batch pieces (:mod:`gen.compiler.batched`): accumulation rows reserved at the top of the
        #: unit for the results carried across pieces; every other mapping stays below them
        self.carry_rows = carry_rows
        self.carry_next = self.geo.accum_rows - carry_rows
        self.plan_geo = replace(self.geo, accum_rows=self.carry_next).interned()   # one object: memo keys
        #: tensors that depend on the batch; (run, position, kind) of instructions of batch-free
        #: steps (``"free"``), of steps whose results are carried (``"carry"``) and of steps after a
        #: carried result, which only the last piece runs (``"final"``)
        self.batch_dep: set[str] = set()
        self.tags: list[tuple[int, int, str]] = []
        self.carried: set[str] = set()
        #: results of steps after a carried result (:attr:`tags` ``"final"``); ``defer``: a step that
        #: sums the batch away carries its result even when later steps use it (they are deferred),
        #: else only a network's last step carries
        self.deferred: set[str] = set()
        self.defer = defer
        self._deferring = False
        self.L = config.lanes
        #: row strides aligned for multi-CE grids (``Layout.make``); 0 = compact layouts
        self.align = config.banks if align else 0
        self.elem_bytes = config.elem_bits // 8
        self.host_ops: list[tuple[int, str, tuple]] = []
        self.sizes: dict[str, int] = {}
        self.steps: list[StepRecord] = []
        self.stats = dict(relayouts=0, relayout_bytes=0, onchip_relayouts=0, dram_bytes=0, onchip_bytes=0,
                          padded_macs=0, macs=0, chunked_steps=0, chunk_slices=0, twin_sites=0,
                          padded_stores=0)
        self.dummies = 0
        #: identities placed by on-chip re-layouts: name -> (modes, size); the host creates them
        self.eyes: dict[str, tuple[tuple[str, ...], int]] = {}
        self.registry: dict[str, Tensor] = {}
        #: real (unpadded) extents of padded split modes, see :meth:`useful`
        self.useful_ext: dict[str, float] = {}
        self.mem = Memory(self.geo, self.elem_bytes, self.stats, self.host_ops)
        self.mem.protected = lambda t: not self.depends(t) or t.name in self.eyes
        self.planner = Planner(config, self.plan_geo, self.align, self.sizes, self.mem, self.dummy, relayout, views,
                               keep_lanes, k_split, stationary, lookahead, out_transposes, store_pad)

    # --- names and extents --------------------------------------------------------------
    def dummy(self) -> str:
        """A fresh size-1 mode ``_<n>`` (a dummy lane)."""
        self.dummies += 1
        name = f"_{self.dummies}"
        self.sizes[name] = 1
        return name

    def useful(self, m: str) -> float:
        """Extent of mode ``m`` without the zero padding of :func:`gen.compiler.layout.split_modes` (a
        fraction for the ``~h`` half of a padded mode: the two halves multiply to the real size)."""
        if m in self.useful_ext:
            return self.useful_ext[m]
        base, *rngs = m.split("@")
        if rngs and base in self.useful_ext:         # a chunk piece lo:hi of a split half
            lo, hi = 0, 0
            for rng in rngs:                         # a piece of a piece: ranges within the previous one
                a, b = (int(x) for x in rng.split(":"))
                lo, hi = lo + a, lo + b
            if base.endswith("~h"):
                real = self.useful_ext[base] * self.L       # values of the original mode
                return max(0.0, min(hi * self.L, real) - lo * self.L) / self.L
            return (hi - lo) * self.useful_ext[base] / self.sizes[base]
        return self.sizes[m]

    # --- one step -------------------------------------------------------------------
    def step(self, label: str, s_idx: int, A: Tensor, B: Tensor, keep: set[str], out_name: str,
             next_info: NextInfo | None, final: bool, tail: Sequence[Fusable] = ()) -> Tensor:
        """Compile one pairwise contraction ``A x B`` keeping modes ``keep``.

        ``next_info``: (modes of the consumer's other operand, modes the consumer keeps, that
        operand's tensor if it exists yet). ``tail``: the steps after this one that may run piece by
        piece with it if it is chunked (:meth:`Chunking.chunked`); the result is then that of the
        last step done, named after it.

        An operand with pinned pieces (:meth:`Chunking.concatenated`) is used where its pieces
        are when the step contracts their cut (:meth:`Pinning.from_pins`), else read back first
        (:meth:`Pinning.unpinned`).

        Batch pieces (``carry_rows``): a step with a carried or deferred operand is *deferred*: the
        last piece runs it once, on the sum of all pieces (its other operand must not depend on the
        batch, and it must not be chunked).
        """
        if A.pieces or B.pieces:
            res = None if self.carry_rows else self.from_pins(label, s_idx, A, B, keep, out_name, final)
            if res is not None:
                return res
            for t in (A, B):
                if t.pieces:
                    self.unpinned(t)
        late = self.carried | self.deferred
        self._deferring = bool(self.carry_rows) and (A.name in late or B.name in late)
        if self._deferring and (self.depends(A) and A.name not in late or self.depends(B) and B.name not in late):
            raise CompileError(f"step {s_idx} of {label} joins a sum over batch pieces with a batch operand",
                               field="pieces")
        try:
            return self._place_step(label, s_idx, A, B, keep, out_name, next_info, final, tail)
        finally:
            self._deferring = False

    def _place_step(self, label, s_idx, A, B, keep, out_name, next_info, final, tail) -> Tensor:
        """:meth:`step`'s plan and placement: the best plan in the open segment, else in a new one,
        else the step chunked (not a deferred one)."""
        for attempt in range(2):
            self.mem.begin_step()
            mark = self.mem.mark()
            try:
                plan = self.planner.best_plan(A, B, keep, next_info)
                if plan is None:
                    raise NoAccum
                return self.emit(label, s_idx, plan, out_name, final)
            except (NoRoom, NoAccum):
                self.mem.rollback(mark)
                if attempt and self._deferring:
                    raise CompileError(f"step {s_idx} of {label} after a sum over batch pieces "
                                       "does not fit without chunking", field="pieces")
                if attempt:
                    return self.chunked(label, s_idx, A, B, keep, out_name, final, tail)
                self.mem.close_segment()

    def prepare(self, t: Tensor, lane: str, layout: Layout | None, label: str = "", s_idx: int = -1) -> None:
        """Make ``t`` available on chip in ``layout`` (``None``: already there; else a host write,
        or, if it is on chip with another lane, a re-layout: on chip by the TCU
        (:mod:`gen.compiler.relayout`) where one GEMM can do it, else through the host)."""
        if layout is None:
            return
        if t.name in self.mem.onchip:      # lane mismatch: on chip, else explicitly through the host
            cause = self.relayout_onchip(t, lane, layout, label, s_idx)
            if cause is None:
                return
            # DRAM bytes: the read back (unless the host has it) and the write in the new layout
            nbytes = ((0 if t.on_host else t.layout.rows) + layout.rows) * self.L * self.elem_bytes
            self.mem.ensure_on_host(t)
            self.stats["relayouts"] += 1
            self.stats["relayout_bytes"] += nbytes
            self.host_ops.append((len(self.mem.runs) - 1, "relayout", (t.name, nbytes, cause)))
        if lane not in t.modes:
            t.modes = t.modes + (lane,)
        self.mem.place(t, layout)

    def relayout_onchip(self, t: Tensor, lane: str, want: Layout, label: str, s_idx: int) -> str | None:
        """Re-lay out ``t`` (on chip) into ``want`` with one identity GEMM on the TCU
        (:mod:`gen.compiler.relayout`); returns None when done, else why not (nothing done: not
        possible here, or, policy ``auto``, slower than the host path), a key of
        :data:`~gen.compiler.relayout.RELAYOUT_CAUSES`."""
        gemm = self.planner.identity_mappings(t, lane, want)
        if gemm is None:
            return self.planner.identity_obstacle(t, lane, want)
        got, e_lay, mappings = gemm
        q = lane
        eye = self.mem.onchip.get(eye_name(q))
        if not self.mem.fits([] if eye else [e_lay.rows], [got.rows]):
            return "no-room"
        mark = self.mem.mark()
        new_eye = eye is None
        if new_eye:
            eye = Tensor(eye_name(q), (q, primed(q)))
            eye.on_host = True
            self.mem.place(eye, e_lay)
        addr = self.mem.alloc(got.rows)
        instrs = None
        for mp in mappings:
            instrs = instantiate(mp, addr_of(t), addr_of(eye), addr, self.geo)
            if instrs is not None:
                break
        if instrs is None or (self.relayout == "auto" and mp.cycles > self.planner.host_relayout_cycles(t)):
            self.mem.rollback(mark)
            return "bank-conflict" if instrs is None else "host-faster"
        if new_eye:
            self.eyes[eye.name] = (eye.modes, self.sizes[q])
        # a batch-free tensor re-laid out while deferring: later steps of every piece read the new
        # layout, so it is made with the batch-free steps (pieces 0 and 1), not by the last piece only
        dep = self.depends(t)
        deferred = self._deferring and dep
        self._add(instrs, "final" if deferred else "" if dep else "free")
        self._traffic(instrs)
        self.stats["onchip_relayouts"] += 1
        self.steps.append(StepRecord(label, s_idx, t.layout.modes, eye.modes, got.modes, f"re-layout {t.name}",
                                     mp.grid, len(instrs), 0, mp.cycles, want.modes, gemm_dataflows(instrs),
                                     gemm_transposes(instrs), batch_free=not dep, deferred=deferred))
        t.layout, t.addr = want, addr
        self.mem.onchip[t.name] = t
        return None

    def emit(self, label: str, s_idx: int, plan: Plan, out_name: str, final: bool) -> Tensor:
        """Place the operands and the result of ``plan`` and emit its instructions."""
        sizes = self.sizes
        X, Y, alpha, beta, lo = plan.X, plan.Y, plan.alpha, plan.beta, plan.lo
        groups = group_modes(X.modes, Y.modes, plan.keep_modes)
        for m in groups.k:
            if m not in groups.contracted and sizes[m] != 1:
                raise CompileError(f"mode {m} of one operand is summed but has size {sizes[m]}", field="spec")
        need = [o.rows for o in (plan.xo, plan.yo) if o is not None]
        # an on-chip re-layout may also place an identity
        need += [eye_layout(q, sizes, self.L).rows for t, q, o in ((X, alpha, plan.xo), (Y, beta, plan.yo))
                 if o is not None and t.name in self.mem.onchip]
        if not self.mem.fits(need, [lo.rows]):
            raise NoRoom
        # operands on chip in the plan's layouts (host writes / re-layouts), then the result
        self.prepare(X, alpha, plan.xo, label, s_idx)
        self.prepare(Y, beta, plan.yo, label, s_idx)
        out = Tensor(out_name, tuple(plan.keep_modes))
        addr = self.mem.alloc(lo.rows)
        if addr is None:
            raise NoRoom
        out.layout, out.addr = lo, addr
        # the plan's mappings passed with bases 0; the actual bases can still fail (the network
        # routing depends on the bank of each address): the fastest whose instructions all pass
        dep = self.depends(X) or self.depends(Y)
        deferred = self._deferring
        carried = (bool(self.carry_rows) and (final or self.defer) and dep and not deferred
                   and not has_batch(plan.keep_modes))
        if carried:
            try:
                instrs, mp = self._carried_instrs(plan, addr)
            except CompileError:
                if final:
                    raise
                carried = False         # no room: every piece runs the later steps on its own sum
        if not carried:
            instrs, mp = self._instrs(plan, addr)
        if instrs is None:
            raise CompileError(f"no mapping of step {s_idx} of {label} passes the ISA checks", field="program")
        if plan.mode in INPUT_STATIONARY and self.depends(Y):
            # the held operand is an activation / gradient: the same datapath, named input-stationary
            instrs = [replace(i, mode=INPUT_STATIONARY[plan.mode]) for i in instrs]
        self._add(instrs, "final" if deferred else "carry" if carried else "" if dep else "free")
        if dep:
            self.batch_dep.add(out.name)
        if carried:
            self.carried.add(out.name)
        if deferred:
            self.deferred.add(out.name)
        macs = self._count(instrs, X, Y)
        self.steps.append(StepRecord(label, s_idx, X.modes, Y.modes, tuple(plan.keep_modes),
                                     f"A={X.name} B={Y.name}", mp.grid, len(instrs), macs, mp.cycles, lo.modes,
                                     gemm_dataflows(instrs), gemm_transposes(instrs), batch_free=not dep,
                                     deferred=deferred))
        self.mem.onchip[out.name] = out
        self.registry[out.name] = out
        if final:
            self.mem.ensure_on_host(out)
            if lo.rows * self.L > math.prod(sizes[m] for m in plan.keep_modes):
                self.stats["padded_stores"] += 1
        return out

    def _instrs(self, plan: Plan, addr: int):
        """The instructions of the fastest of ``plan``'s mappings that pass with the real addresses."""
        for mp in plan.mappings:
            instrs = instantiate(mp, addr_of(plan.X), addr_of(plan.Y), addr, self.geo)
            if instrs is not None:
                return instrs, mp
        return None, None

    def _carried_instrs(self, plan: Plan, addr: int):
        """:meth:`_instrs` for a result carried across batch pieces: its partial sums get rows of
        their own in the reserved top of the accumulation unit (every free-loop index apart)."""
        for mp in plan.mappings:
            stride = acc_span(mp, self.geo)
            need = free_instrs(mp) * stride
            if self.carry_next + need > self.geo.accum_rows:
                continue
            instrs = instantiate(mp, addr_of(plan.X), addr_of(plan.Y), addr, self.geo, acc_stride=stride,
                                 acc_base=self.carry_next)
            if instrs is not None:
                self.carry_next += need
                return instrs, mp
        raise CompileError("the results carried across batch pieces do not fit the reserved accumulation rows",
                           field="accum_kb")

    def depends(self, t: Tensor) -> bool:
        """Does ``t`` depend on the batch (a batch mode, or computed from such a tensor)?"""
        return t.name in self.batch_dep or has_batch(t.modes)

    def _add(self, instrs: list[Instr], kind: str) -> None:
        """Append ``instrs`` to the program, tagged ``kind`` (``""``: untagged) in :attr:`tags`."""
        for ins in instrs:
            self.mem.add_instrs([ins])
            if kind:
                self.tags.append((len(self.mem.runs) - 1, len(self.mem.cur.program) - 1, kind))

    def _count(self, instrs: list[Instr], X: Tensor, Y: Tensor) -> int:
        """Add a step's useful and padded MACs and on-chip traffic to the stats; its useful MACs."""
        macs = round(math.prod(self.useful(m) for m in set(X.modes) | set(Y.modes)))
        self.stats["macs"] += macs
        self._traffic(instrs)
        return macs

    def _traffic(self, instrs: list[Instr]) -> None:
        """Add the padded MACs and the on-chip traffic of ``instrs`` to the stats."""
        self.stats["padded_macs"] += sum(gemm_macs(i, self.geo) for i in instrs)
        self.stats["onchip_bytes"] += onchip_bytes(instrs, self.geo, self.elem_bytes)

    # --- networks -------------------------------------------------------------------
    def network(self, net: Network, path: Sequence[Sequence[int]], tensors: dict[str, Tensor],
                prefix: str, upto: int | None = None) -> Tensor:
        """Compile one network along ``path``; ``tensors`` are the host-store inputs by name.
        ``upto``: only the first ``upto`` steps (their results stay registered; the last one is returned)."""
        for m, s in net.sizes.items():
            self.sizes[m] = s
        whole = path_steps(net, path)
        steps = whole[:upto]
        live: dict[int, Tensor] = {i: tensors[op.name] for i, op in enumerate(net.inputs)}
        consumer: dict[int, tuple[int, int]] = {}
        nxt = len(net.inputs)
        for si, st in enumerate(steps):
            consumer[st.lhs] = (si, st.rhs)
            consumer[st.rhs] = (si, st.lhs)
        step_modes = {i: op.modes for i, op in enumerate(net.inputs)}
        for si, st in enumerate(steps):
            step_modes[nxt + si] = st.out_modes
        result = None
        si = 0
        while si < len(steps):
            st = steps[si]
            self.mem.live = {t.name for t in live.values()}
            A, B = live.pop(st.lhs), live.pop(st.rhs)
            keep = set(st.out_modes)
            keep |= {m for m in A.modes + B.modes if m.startswith("_")}
            me = nxt + si
            info = None
            if me in consumer:
                csi, other = consumer[me]
                info = (set(step_modes[other]), set(steps[csi].out_modes), live.get(other))
            # the chain of later steps that consume this result with an operand already at hand
            tail: list[Fusable] = []
            others: list[int] = []
            prev = me
            for sj in range(si + 1, len(steps) if self.fuse else 0):
                nj = steps[sj]
                other = nj.rhs if nj.lhs == prev else nj.lhs if nj.rhs == prev else None
                if other is None or other not in live or live[other].pieces:
                    break
                tail.append(Fusable(sj, live[other], nj.lhs == prev, tuple(nj.out_modes), f"{prefix}.t{nxt + sj}"))
                others.append(other)
                prev = nxt + sj
            result = self.step(net.label, si, A, B, keep, f"{prefix}.t{me}", info, si == len(whole) - 1, tail)
            done = next((f for f in tail if f.out_name == result.name), None)
            if done is not None:            # chunked together with its tail: those steps are done
                for other in others[:tail.index(done) + 1]:
                    live.pop(other)
                si, me = done.s_idx, nxt + done.s_idx
            live[me] = result
            si += 1
        return result

    def program(self, **kw) -> Program:
        """End every run with HALT and return the :class:`Program` (``kw``: its remaining fields)."""
        self.mem.finish()
        st = self.stats
        eyes = [(-1, "eye", (name, modes, n)) for name, (modes, n) in self.eyes.items()]
        return Program(self.mem.runs, eyes + self.host_ops, kw.pop("results"), dict(self.sizes), st["macs"],
                       self.steps, relayouts=st["relayouts"], relayout_bytes=st["relayout_bytes"],
                       relayout_causes=dict(Counter(a[2] for _, kind, a in self.host_ops if kind == "relayout")),
                       onchip_relayouts=st["onchip_relayouts"],
                       dram_bytes=st["dram_bytes"],
                       onchip_bytes=st["onchip_bytes"], padded_macs=st["padded_macs"],
                       chunked_steps=st["chunked_steps"], chunk_slices=st["chunk_slices"],
                       twin_sites=st["twin_sites"], padded_stores=st["padded_stores"],
                       instr_tags=list(self.tags), carried=set(self.carried), deferred=set(self.deferred),
                       batch_dep=set(self.batch_dep), **kw)


__all__ = ["Compiler", "NoAccum", "RELAYOUT_POLICIES"]
