"""What the compiler produces: a :class:`Program` of accelerator runs and host operations.

A :class:`Run` is one start of the accelerator on one ping-pong half: the host writes tensors
(:class:`Write`), the program runs to HALT, the host reads tensors back (:class:`Read`). Between
runs the host slices, concatenates and re-lays out tensors (``Program.host_ops``). Every compiled
step leaves a :class:`StepRecord` (its roles, grid, instructions and estimated cycles).
Executing a program is :mod:`gen.toolflow.execute`'s business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from gen.compiler.layout import Layout
from gen.design.config import FettaConfig
from gen.design.isa import Dataflow, Geometry, Instr, Opcode, assemble, ce_offsets
from gen.design.timing import RunTiming, Timeline, dram_bytes_per_cycle, program_cycles, timeline
from gen.errors import FettaError


class CompileError(FettaError):
    kind = "compile"


@dataclass
class Write:
    """Host writes tensor ``name`` (host store) into ``addr`` with ``layout``."""

    addr: int
    name: str
    layout: Layout


@dataclass
class Read:
    """Host reads ``layout.rows`` rows at ``addr`` into host tensor ``name`` (axes ``layout.modes``)."""

    addr: int
    name: str
    layout: Layout


@dataclass
class Run:
    """One accelerator run: host writes, a program (ending in HALT), host reads after it."""

    half: int
    writes: list[Write] = field(default_factory=list)
    program: list[Instr] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)

    @property
    def words(self) -> list[int]:
        return assemble(self.program)


@dataclass
class StepRecord:
    """One compiled pairwise step: operand and result modes, roles, grid, instructions, cost."""

    network: str
    step: int
    lhs: tuple[str, ...]
    rhs: tuple[str, ...]
    out: tuple[str, ...]
    roles: str
    grid: tuple[int, int, int]
    instrs: int
    macs: int
    est_cycles: int
    out_layout: tuple[str, ...]
    #: dataflows of the step's GEMM instructions (:class:`gen.design.isa.Dataflow` names)
    dataflows: tuple[str, ...] = ()
    #: GEMM instructions that transpose in the distribution or the reduction network
    transposes: int = 0
    #: no operand depends on the batch (core x core): batch pieces compute it once per half
    batch_free: bool = False
    #: an operand is a sum carried across batch pieces: only the last piece computes it
    deferred: bool = False


@dataclass
class Program:
    """Everything the host does to run one phase: runs in order, and how to assemble results."""

    runs: list[Run]
    #: host-side operations between runs: (before run index, kind, args)
    host_ops: list[tuple[int, str, tuple]]
    #: target npz key -> list of (host tensor name, modes, result shape, output modes order)
    results: dict[str, list[tuple[str, tuple[str, ...], tuple[int, ...], tuple[str, ...]]]]
    sizes: dict[str, int]
    macs: int
    steps: list[StepRecord]
    #: tensors re-laid out through the host (read back, written in another layout)
    relayouts: int = 0
    relayout_bytes: int = 0
    #: :attr:`relayouts` by cause (:data:`gen.compiler.relayout.RELAYOUT_CAUSES`)
    relayout_causes: dict[str, int] = field(default_factory=dict)
    #: tensors re-laid out on chip by an identity GEMM (:mod:`gen.compiler.relayout`)
    onchip_relayouts: int = 0
    dram_bytes: int = 0
    onchip_bytes: int = 0
    padded_macs: int = 0
    #: steps split into pieces (``Compiler.chunked``) and host slices written for them
    chunked_steps: int = 0
    chunk_slices: int = 0
    #: OS steps compiled without output transposes (``Compiler.out_transposes`` off) that could have
    #: written their result with the lane the consumer contracts (:mod:`gen.compiler.transposed`)
    twin_sites: int = 0
    #: network results stored with padding rows (a lane padded to a multiple of ``lanes``) by a planner
    #: without ``store_pad`` (:meth:`gen.compiler.planner.Planner.pad_store_cycles`)
    padded_stores: int = 0
    paths: dict[str, list[list[int]]] = field(default_factory=dict)
    reused: dict[str, list[str]] = field(default_factory=dict)
    #: host-store inputs: npz key -> modes
    input_modes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: host-store inputs: npz key -> (size, padded size) per axis of the npz array (``split_modes``)
    input_pads: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    #: host-store inputs cut from an npz array: name -> (npz key, first, end) along its batch axis 0
    input_slices: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    #: results assembled from batch pieces: npz key -> pieces (concatenated along axis 0)
    result_pieces: dict[str, int] = field(default_factory=dict)
    #: (run, position, kind) of instructions of batch-free steps (``"free"``), of steps whose
    #: results are carried across batch pieces (``"carry"``) and of the steps after them, which only
    #: the last piece runs (``"final"``), see :mod:`gen.compiler.batched`
    instr_tags: list[tuple[int, int, str]] = field(default_factory=list)
    #: host names of the results carried across batch pieces (accumulated in the accumulation unit)
    carried: set[str] = field(default_factory=set)
    #: host names of the results of steps after a carried result (computed by the last piece only)
    deferred: set[str] = field(default_factory=set)
    #: host names of the tensors that depend on the batch
    batch_dep: set[str] = field(default_factory=set)
    #: the :func:`gen.compiler.phases.compile_layer` options this program was compiled with (``pad``,
    #: ``split``, ``fuse``, ``views``, ``pieces``, ``pieces_by``, ``stationary``, ``k_split``)
    variant: dict = field(default_factory=dict)
    #: batch pieces the program runs (1: the whole batch at once; :mod:`gen.compiler.pipeline`,
    #: :mod:`gen.compiler.batched`)
    pieces: int = 1
    #: WG networks that run a tree other than their MAC-optimal one, which spills a large intermediate
    #: (:func:`gen.compiler.phases._spill_tree`)
    spill_trees: int = 0

    @property
    def est_cycles(self) -> int:
        """The compiler's estimate of the compute cycles: instruction timing of every step."""
        return sum(s.est_cycles for s in self.steps)

    def dataflows(self) -> dict[str, int]:
        """Steps per dataflow (a step whose GEMMs use several dataflows counts under each)."""
        out: dict[str, int] = {}
        for s in self.steps:
            for df in s.dataflows:
                out[df] = out.get(df, 0) + 1
        return out

    @property
    def transposes(self) -> int:
        """GEMM instructions with a network transpose."""
        return sum(s.transposes for s in self.steps)

    def host_transposes(self) -> int:
        """Host writes of a tensor in another lane than its DRAM image: a transpose done on the way
        through DRAM (an explicit permutation), not counted by :attr:`relayouts`. A tensor's image is
        the layout it first reaches the host in (read back from the chip, or first written from the
        host store); chunk slices and concatenations belong to the tensor they are cut from / make.
        A different order of the other modes is not counted: a strided transfer reads it."""
        family: dict[str, str] = {}
        for _, kind, args in self.host_ops:
            if kind == "slice":
                family[args[1]] = args[0]
            elif kind == "concat":
                family.update((part, args[0]) for part, _ in args[3])

        def root(name: str) -> str:
            while name in family:
                name = family[name]
            return name

        image: dict[str, str] = {}
        count = 0
        for run in self.runs:
            for w in run.writes:
                lane = w.layout.lane.split("@")[0]
                count += image.setdefault(root(w.name), lane) != lane
            for rd in run.reads:
                image.setdefault(root(rd.name), rd.layout.lane.split("@")[0])
        return count

    def run_timings(self, config: FettaConfig, compute: Sequence[int] | None = None) -> list[RunTiming]:
        """What :func:`gen.design.timing.timeline` needs of every run: its half, the DRAM bytes of its
        writes and reads, and its compute cycles (``compute``: measured ones, e.g. the emulator's;
        default :func:`gen.design.timing.program_cycles` of its instructions)."""
        after = self.write_deps()
        return [RunTiming.of_rows(run.half, sum(w.layout.rows for w in run.writes),
                                  program_cycles(run.program, config) if compute is None else compute[i],
                                  sum(r.layout.rows for r in run.reads), config, after[i])
                for i, run in enumerate(self.runs)]

    def write_deps(self) -> list[int]:
        """Per run, the latest earlier run after which the host has the data of its writes (a tensor
        read back by that run, or sliced / concatenated / derived from one after it); -1 for inputs only."""
        return [max([-1] + deps) for deps in self.each_write_deps()]

    def each_write_deps(self) -> list[list[int]]:
        """Per run, per write (in ``run.writes`` order), the latest earlier run after which the host
        has that write's data (:meth:`write_deps`); -1 for an input."""
        ops: dict[int, list] = {}
        for r, kind, args in self.host_ops:
            ops.setdefault(r, []).append((kind, args))
        avail: dict[str, int] = {}
        deps = []
        for i, run in enumerate(self.runs):
            deps.append([avail.get(w.name, -1) for w in run.writes])
            for rd in run.reads:
                avail[rd.name] = i
            for kind, args in ops.get(i, ()):
                if kind in ("slice", "concat", "derive"):
                    avail[args[1] if kind == "slice" else args[0]] = i
        return deps

    def timeline(self, config: FettaConfig, compute: Sequence[int] | None = None) -> Timeline:
        """End-to-end timing of the program, DRAM transfers included (:mod:`gen.design.timing`)."""
        return timeline(self.run_timings(config, compute), dram_bytes_per_cycle(config))


def onchip_bytes(instrs: Sequence[Instr], geo: Geometry, elem_bytes: int) -> int:
    """Unified-memory bytes the GEMMs ``instrs`` read (a row multicast to several CEs counts once)
    and write back."""
    total = 0
    for i in instrs:
        reads = len(set(ce_offsets(i, "a"))) + len(set(ce_offsets(i, "b")))
        writes = i.gm * i.gn * geo.ce_rows
        total += i.L0 * i.L1 * (i.K * reads + writes) * geo.lanes * elem_bytes
    return total


def gemm_dataflows(instrs: Sequence[Instr]) -> tuple[str, ...]:
    """The dataflows (``Dataflow`` names) of the GEMM instructions among ``instrs``."""
    return tuple(sorted({Dataflow(i.mode).name for i in instrs if i.opcode == Opcode.GEMM}))


def gemm_transposes(instrs: Sequence[Instr]) -> int:
    """GEMM instructions among ``instrs`` that transpose in a network (``tr`` field, any layer)."""
    return sum(1 for i in instrs if i.opcode == Opcode.GEMM and i.tr)


__all__ = ["onchip_bytes", "gemm_dataflows", "gemm_transposes", "CompileError", "Write", "Read", "Run", "StepRecord",
           "Program"]
