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
from typing import Sequence

from gen.compiler.allocate import Memory, NoRoom, Tensor, addr_of
from gen.compiler.chunk import choose_chunk
from gen.compiler.layout import Layout
from gen.compiler.mapping import instantiate
from gen.compiler.planner import NextInfo, Plan, Planner
from gen.compiler.program import CompileError, Program, StepRecord, gemm_dataflows, gemm_transposes
from gen.design.config import FettaConfig, check_accelerator
from gen.design.isa import Geometry, Instr, ce_offsets, gemm_macs
from gen.workload.grouping import group_modes
from gen.workload.network import Network, path_steps


class NoAccum(Exception):
    """No mapping of a step fits the accumulation unit (the step is chunked)."""


class Compiler:
    """Compile networks into a :class:`gen.compiler.program.Program` (see :mod:`gen.compiler`)."""

    def __init__(self, config: FettaConfig, align: bool = False):
        check_accelerator(config)
        self.config = config
        self.geo = Geometry.of(config)
        self.L = config.lanes
        #: row strides aligned for multi-CE grids (``Layout.make``); 0 = compact layouts
        self.align = config.banks if align else 0
        self.elem_bytes = config.elem_bits // 8
        self.host_ops: list[tuple[int, str, tuple]] = []
        self.sizes: dict[str, int] = {}
        self.steps: list[StepRecord] = []
        self.stats = dict(relayouts=0, relayout_bytes=0, dram_bytes=0, onchip_bytes=0,
                          padded_macs=0, macs=0, chunked_steps=0, chunk_slices=0)
        self.dummies = 0
        self.registry: dict[str, Tensor] = {}
        #: real (unpadded) extents of padded split modes, see :meth:`useful`
        self.useful_ext: dict[str, float] = {}
        self.mem = Memory(self.geo, self.elem_bytes, self.stats, self.host_ops)
        self.planner = Planner(config, self.geo, self.align, self.sizes, self.mem, self.dummy)

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
             next_info: NextInfo | None, final: bool) -> Tensor:
        """Compile one pairwise contraction ``A x B`` keeping modes ``keep``.

        ``next_info``: (modes of the consumer's other operand, modes the consumer keeps, that
        operand's tensor if it exists yet).
        """
        for attempt in range(2):
            mark = self.mem.mark()
            try:
                plan = self.planner.best_plan(A, B, keep, next_info)
                if plan is None:
                    raise NoAccum
                return self.emit(label, s_idx, plan, out_name, final)
            except (NoRoom, NoAccum):
                self.mem.rollback(mark)
                if attempt:
                    return self.chunked(label, s_idx, A, B, keep, out_name, final)
                self.mem.close_segment()

    def prepare(self, t: Tensor, lane: str, order: tuple[str, ...] | None) -> None:
        """Make ``t`` available on chip in ``order`` (``None``: already there; else a host write,
        or an explicit re-layout through the host if it is on chip with another lane)."""
        if order is None:
            return
        if t.name in self.mem.onchip:      # lane mismatch: explicit re-layout through the host
            self.mem.ensure_on_host(t)
            self.stats["relayouts"] += 1
            nbytes = 2 * t.layout.rows * self.L * self.elem_bytes
            self.stats["relayout_bytes"] += nbytes
            self.host_ops.append((len(self.mem.runs) - 1, "relayout", (t.name,)))
        if lane not in t.modes:
            t.modes = t.modes + (lane,)
        self.mem.place(t, Layout.make(order, self.sizes, self.L, align=self.align))

    def emit(self, label: str, s_idx: int, plan: Plan, out_name: str, final: bool) -> Tensor:
        """Place the operands and the result of ``plan`` and emit its instructions."""
        sizes = self.sizes
        X, Y, alpha, beta, lo = plan.X, plan.Y, plan.alpha, plan.beta, plan.lo
        groups = group_modes(X.modes, Y.modes, plan.keep_modes)
        for m in groups.k:
            if m not in groups.contracted and sizes[m] != 1:
                raise CompileError(f"mode {m} of one operand is summed but has size {sizes[m]}", field="spec")
        need = [Layout.make(o, sizes, self.L, align=self.align).rows for o in (plan.xo, plan.yo) if o is not None]
        if not self.mem.fits(need + [lo.rows]):
            raise NoRoom
        # operands on chip in the plan's layouts (host writes / re-layouts), then the result
        self.prepare(X, alpha, plan.xo)
        self.prepare(Y, beta, plan.yo)
        out = Tensor(out_name, tuple(plan.keep_modes))
        addr = self.mem.alloc(lo.rows)
        if addr is None:
            raise NoRoom
        out.layout, out.addr = lo, addr
        # the plan's mappings passed with bases 0; the actual bases can still fail (the network
        # routing depends on the bank of each address): the fastest whose instructions all pass
        instrs = None
        for mp in plan.mappings:
            instrs = instantiate(mp, addr_of(X), addr_of(Y), addr, self.geo)
            if instrs is not None:
                break
        if instrs is None:
            raise CompileError(f"no mapping of step {s_idx} of {label} passes the ISA checks", field="program")
        self.mem.add_instrs(instrs)
        macs = self._count(instrs, X, Y)
        self.steps.append(StepRecord(label, s_idx, X.modes, Y.modes, tuple(plan.keep_modes),
                                     f"A={X.name} B={Y.name}", mp.grid, len(instrs), macs, mp.cycles, lo.modes,
                                     gemm_dataflows(instrs), gemm_transposes(instrs)))
        self.mem.onchip[out.name] = out
        self.registry[out.name] = out
        if final:
            self.mem.ensure_on_host(out)
        return out

    def _count(self, instrs: list[Instr], X: Tensor, Y: Tensor) -> int:
        """Add a step's useful and padded MACs and on-chip traffic to the stats; its useful MACs."""
        macs = round(math.prod(self.useful(m) for m in set(X.modes) | set(Y.modes)))
        tcu = sum(gemm_macs(i, self.geo) for i in instrs)
        self.stats["macs"] += macs
        self.stats["padded_macs"] += tcu
        for i in instrs:
            # unified rows read (a row multicast to several CEs counts once) and rows written back
            reads = len(set(ce_offsets(i, "a"))) + len(set(ce_offsets(i, "b")))
            writes = i.gm * i.gn * self.geo.ce_rows
            rows = i.L0 * i.L1 * (i.K * reads + writes)
            self.stats["onchip_bytes"] += rows * self.L * self.elem_bytes
        return macs

    # --- chunking of oversized steps --------------------------------------------------
    def chunked(self, label: str, s_idx: int, A: Tensor, B: Tensor, keep: set[str], out_name: str,
                final: bool) -> Tensor:
        """Split a step that does not fit one half (or the accumulation unit) over a free mode of its result.

        Mode ``m`` (kept by the step) is cut into pieces ``m@lo:hi`` (host slices of every operand
        holding ``m``; the others are written again for every piece); each piece is an ordinary step
        (itself chunked again if it still does not fit), its result is read back, and the host
        concatenates the pieces along ``m``. Every piece therefore moves its operands and result
        through the DRAM model (counted in ``dram_bytes``).
        """
        sizes = self.sizes
        out_modes = [m for m in dict.fromkeys(A.modes + B.modes) if m in keep and not m.startswith("_")]
        chosen = choose_chunk(A.modes, B.modes, out_modes, sizes, int(self.geo.unified_half_rows * 0.9), self.L)
        if chosen is None:
            raise CompileError(f"step {s_idx} of {label} ({A.modes} x {B.modes} -> {sorted(keep)}, sizes "
                               f"{ {m: sizes[m] for m in set(A.modes) | set(B.modes)} }) does not fit one unified half and has no free mode "
                               f"to chunk (chunking over contracted modes is not implemented)", field="unified_kb")
        m, piece = chosen
        S = sizes[m]
        for t in (A, B):
            if t.name in self.mem.onchip and not t.on_host:
                self.mem.ensure_on_host(t)
        self.stats["chunked_steps"] += 1
        parts: list[tuple[Tensor, str]] = []
        for lo in range(0, S, piece):
            hi = min(S, lo + piece)
            pm = f"{m}@{lo}:{hi}"     # unique per extent: mode sizes are global by name
            self.sizes[pm] = hi - lo
            ops = [self._slice(t, m, pm, lo, hi) if m in t.modes else t for t in (A, B)]
            pkeep = {pm if x == m else x for x in keep}
            self.mem.live = self.mem.live | {A.name, B.name}
            res = self.step(label, s_idx, ops[0], ops[1], pkeep, f"{out_name}[{pm}]", None, True)
            parts.append((res, pm))
        out = Tensor(out_name, tuple(out_modes))
        out.on_host = True
        out.read_run = max(r.read_run for r, _ in parts)
        self.host_ops.append((out.read_run, "concat", (out.name, out.modes, m,
                                                        tuple((r.name, pm) for r, pm in parts))))
        self.registry[out.name] = out
        return out

    def _slice(self, t: Tensor, m: str, pm: str, lo: int, hi: int) -> Tensor:
        """The host slice ``lo:hi`` of ``t`` along ``m``, as mode ``pm``."""
        self.dummies += 1      # a fresh suffix: slice names never collide with piece results
        st = Tensor(f"{t.name}[{pm}]~{self.dummies}", tuple(pm if x == m else x for x in t.modes))
        st.on_host = True
        st.read_run = t.read_run
        self.host_ops.append((t.read_run, "slice", (t.name, st.name, m, pm, lo, hi)))
        self.stats["chunk_slices"] += 1
        return st

    # --- networks -------------------------------------------------------------------
    def network(self, net: Network, path: Sequence[Sequence[int]], tensors: dict[str, Tensor],
                prefix: str) -> Tensor:
        """Compile one network along ``path``; ``tensors`` are the host-store inputs by name."""
        for m, s in net.sizes.items():
            self.sizes[m] = s
        steps = path_steps(net, path)
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
        for si, st in enumerate(steps):
            self.mem.live = {t.name for t in live.values()}
            A, B = live.pop(st.lhs), live.pop(st.rhs)
            keep = set(st.out_modes)
            keep |= {m for m in A.modes + B.modes if m.startswith("_")}
            me = nxt + si
            info = None
            if me in consumer:
                csi, other = consumer[me]
                info = (set(step_modes[other]), set(steps[csi].out_modes), live.get(other))
            final = si == len(steps) - 1
            result = self.step(net.label, si, A, B, keep, f"{prefix}.t{me}", info, final)
            live[me] = result
        return result

    def program(self, **kw) -> Program:
        """End every run with HALT and return the :class:`Program` (``kw``: its remaining fields)."""
        self.mem.finish()
        st = self.stats
        return Program(self.mem.runs, self.host_ops, kw.pop("results"), dict(self.sizes), st["macs"], self.steps,
                       relayouts=st["relayouts"], relayout_bytes=st["relayout_bytes"],
                       dram_bytes=st["dram_bytes"],
                       onchip_bytes=st["onchip_bytes"], padded_macs=st["padded_macs"],
                       chunked_steps=st["chunked_steps"], chunk_slices=st["chunk_slices"], **kw)


__all__ = ["Compiler", "NoAccum"]
