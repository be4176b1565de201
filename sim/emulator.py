"""Instruction-level emulator of the fetta accelerator: bit-exact and cycle-exact with the RTL.

It executes the instruction words of :mod:`gen.design.isa` on a memory image laid out
exactly as the RTL holds it, with the same arithmetic order:

* a CE's Psum is a sequential FP32 MAC chain over ``k`` starting from ``+0``
  (:func:`sim.bf16.bf16_mac`: product rounded first, then the add; DAZ/FTZ);
* the ``gk`` CEs of a reduction group are summed as a balanced tree of adjacent
  pairs (``((c0+c1)+(c2+c3))+...``), the reduction network's adder switches;
* the accumulation unit adds the old row first: ``old + psum``;
* write-back and ``STORE`` round FP32 to bfloat16 (RNE), ``LOAD`` widens.

In the integer mode products are exact and sums wrap to ``int_acc_width`` bits;
write-back keeps the low ``int_width`` bits.

The emulator is vectorised over tiles, CEs and PEs (the ``k`` loop and the
write-back order stay sequential), so it is the fast reference that ``fetta run
--sim emulator`` and the compiler drive.

Memory images: ``unified[half, addr, lane]`` and ``accum[addr, lane]`` hold raw
bit patterns (``uint64``): bfloat16 / FP32 bits, or two's-complement integers. ``dram`` is the
DRAM the DMA instructions move to and from (``uint8``, byte ``a`` at DRAM byte address ``a``; a
beat's rows are packed lane 0 of its first row in the low bits, little-endian, as the AXI4 bus
carries them). A DMA load / store takes effect at its CHECK: it only touches the half the run does
not use and DMA transfers run one at a time, so nothing can tell it from the engine's timing.

Beside every image the emulator keeps which elements are **unknown** (``unified_x``, ``accum_x``,
``dram_x``; :mod:`sim.unknown`): the memories start unknown, as an SRAM macro powers up, and the
host writes them through :meth:`Emulator.write_unified` / :meth:`Emulator.write_accum`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gen.design.config import FettaConfig
from gen.design.control import Clock
from gen.design.isa import (DmaMode, ErrorCode, Flag, Geometry, Instr, Opcode, ce_offsets, check, decode, interleave,
                            gemm_macs, group_offsets, horizontal, loads, stationary, tile_period, transposed)

from sim import bf16 as fp
from sim.unknown import bytes_to_elements, elements_to_bytes, gemm_unknown, vec_unknown
from sim.vector_ref import vec_ref
from gen.errors import ConfigError, FettaError

#: bytes of the DRAM an :class:`Emulator` starts with (the RTL bench's AXI4 RAM has as many,
#: :data:`sim.host_player.DRAM_BYTES`)
DRAM_BYTES = 1 << 20


class DramRangeError(FettaError):
    """A DMA instruction reaches past the end of the emulator's ``dram``."""

    kind = "dram"


@dataclass
class RunResult:
    """What one program run did."""

    cycles: int
    macs: int
    error: ErrorCode
    pc: int
    instructions: int


class Emulator:
    """The accelerator's architectural state and an executor for instruction words."""

    def __init__(self, config: FettaConfig, dram_bytes: int = DRAM_BYTES):
        self.config = config
        #: the DRAM of the DMA instructions (the caller may replace it by its own ``uint8`` array)
        self.dram = np.zeros(dram_bytes, np.uint8)
        self.geo = Geometry.of(config)
        self.is_float = config.datatype == "bf16"
        g = self.geo
        self.unified = np.zeros((2, g.unified_half_rows, g.lanes), np.uint64)
        self.accum = np.zeros((g.accum_rows, g.lanes), np.uint64)
        #: unknown elements (:mod:`sim.unknown`): never written, or computed from an unknown one
        self.unified_x = np.ones(self.unified.shape, bool)
        self.accum_x = np.ones(self.accum.shape, bool)
        self.dram_x = np.zeros(dram_bytes, bool)          # the host's memory: known
        if not self.is_float and config.int_acc_width > 64:
            raise ConfigError("the emulator holds integer accumulators in 64 bits; must be <= 64",
                              field="int_acc_width")
        #: the instruction memory (zeros decode as NOP); the host writes it with :meth:`load_program`
        self.imem: list[int] = [0] * g.imem_depth
        self.elem_bits = config.elem_bits
        self.acc_bits = config.acc_bits

    # --- host side -----------------------------------------------------------------
    def load_program(self, words, at: int = 0) -> None:
        """Write instruction words to the instruction memory from slot ``at`` (the rest is kept)."""
        words = [int(w) for w in words]
        if at + len(words) > self.geo.imem_depth:
            raise ValueError(f"program of {len(words)} instructions exceeds imem_depth {self.geo.imem_depth}")
        self.imem[at:at + len(words)] = words

    def write_unified(self, half: int, addr: int, bits: np.ndarray) -> None:
        """The host writes rows ``addr ..`` of ``half`` (bit patterns ``[rows, lanes]``): known."""
        self.unified[half, addr:addr + len(bits)] = bits
        self.unified_x[half, addr:addr + len(bits)] = False

    def write_accum(self, addr: int, bits: np.ndarray) -> None:
        """The host writes accumulation rows ``addr ..`` (bit patterns ``[rows, lanes]``): known."""
        self.accum[addr:addr + len(bits)] = bits
        self.accum_x[addr:addr + len(bits)] = False

    # value <-> bit-pattern helpers ---------------------------------------------------
    def to_elem_bits(self, values: np.ndarray) -> np.ndarray:
        """Operand values (float32 exactly bf16, or integers) -> stored bit patterns."""
        if self.is_float:
            return fp.bf16_bits(fp.f32_to_bf16(np.asarray(values, np.float32))).astype(np.uint64)
        v = np.asarray(values, np.int64)
        return (v & ((1 << self.elem_bits) - 1)).astype(np.uint64)

    def from_elem_bits(self, bits: np.ndarray) -> np.ndarray:
        if self.is_float:
            return fp.bf16_from_bits(np.asarray(bits, np.uint64).astype(np.uint16)).astype(np.float32)
        return _signed(np.asarray(bits, np.uint64), self.elem_bits)

    def from_acc_bits(self, bits: np.ndarray) -> np.ndarray:
        if self.is_float:
            return fp.f32_from_bits(np.asarray(bits, np.uint64).astype(np.uint32))
        return _signed(np.asarray(bits, np.uint64), self.acc_bits)

    # --- execution -----------------------------------------------------------------
    def run(self, half: int = 0) -> RunResult:
        """Execute the program from pc 0 on ping-pong half ``half`` until HALT or an error."""
        clock = Clock(self.geo)
        macs = 0
        pc = 0
        n = 0
        while True:
            if pc >= self.geo.imem_depth:
                # the controller fetches, decodes and flags the missing slot like any instruction
                return RunResult(clock.act(None) + 1, macs, ErrorCode.PC_OVERFLOW, pc, n)
            ins = decode(self.imem[pc])
            n += 1
            err = check(ins, self.geo)
            c = clock.act(ins if err == ErrorCode.NONE else None)
            if err != ErrorCode.NONE:
                return RunResult(c + 1, macs, err, pc, n)
            if ins.opcode == Opcode.HALT:
                return RunResult(c + 1, macs, ErrorCode.NONE, pc, n)
            if ins.opcode == Opcode.GEMM:
                self._gemm(ins, half)
                macs += gemm_macs(ins, self.geo)
            elif ins.opcode == Opcode.LOAD:
                self._load(ins, half)
            elif ins.opcode == Opcode.STORE:
                self._store(ins, half)
            elif ins.opcode == Opcode.VEC:
                self._vec(ins, half)
            elif ins.opcode == Opcode.DMA and ins.mode != DmaMode.WAIT:
                self._dma(ins, 1 - half)
            pc += 1

    # --- instructions ----------------------------------------------------------------
    def _tiles(self, ins: Instr, op: str) -> np.ndarray:
        """Temporal address part of every tile (l1 outer, l0 inner) for operand ``op``."""
        l1, l0 = np.meshgrid(np.arange(ins.L1), np.arange(ins.L0), indexing="ij")
        return (l0 * getattr(ins, f"{op}_sl0") + l1 * getattr(ins, f"{op}_sl1")).reshape(-1)

    def _gather(self, ins: Instr, op: str, half: int, count: int | None = None, mem=None) -> np.ndarray:
        """Rows streamed to every CE: ``[tiles, ces, count (default K), lanes]`` (bit patterns, or of
        ``mem``: ``unified_x``); with the operand's transpose layer (:class:`gen.design.isa.Transpose`)
        lane ``off mod lanes`` of the ``lanes`` rows of the CE's block."""
        mem = self.unified if mem is None else mem
        count = ins.K if count is None else count
        L = self.geo.lanes
        offs = np.asarray(ce_offsets(ins, op))
        tr = transposed(ins, op)
        addr = (getattr(ins, f"{op}_base") + self._tiles(ins, op)[:, None, None]
                + (offs - offs % L if tr else offs)[None, :, None]
                + np.arange(count)[None, None, :] * getattr(ins, f"{op}_sk"))
        if not tr:
            return mem[half][addr]
        rows = mem[half][addr[..., None] + np.arange(L)]          # [T, E, count, i, lanes]
        lane = np.broadcast_to((offs % L)[None, :, None, None, None], rows.shape[:-1] + (1,))
        return np.take_along_axis(rows, lane, axis=-1)[..., 0]

    def _gemm(self, ins: Instr, half: int) -> None:
        g = self.geo
        A, B = self._operands(ins, half)
        if stationary(ins.mode):
            # Psum row s = sequential chain over the PE rows r from +0 of X[s, r] * W[r, c]
            steps = [(A[:, :, :, r, None], B[:, :, None, r, :]) for r in range(g.ce_rows)]
        else:
            steps = [(A[:, :, k, :, None], B[:, :, k, None, :]) for k in range(ins.K)]
        T, E = steps[0][0].shape[:2]
        rows = steps[0][0].shape[2]
        if self.is_float:
            def f(x):
                return fp.bf16_to_f32(fp.bf16_from_bits(x.astype(np.uint16)))
            acc = np.zeros((T, E, rows, g.ce_cols), np.float32)
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                for a, b in steps:
                    prod = fp.ftz32(f(a) * f(b))
                    acc = fp.ftz32(acc + prod)   # acc and prod are already flushed
            psum = acc.reshape(T, E // ins.gk, ins.gk, rows, g.ce_cols)
            # reduction network: aligned group summed as a balanced tree of adjacent pairs
            while psum.shape[2] > 1:
                psum = fp.f32_add(psum[:, :, 0::2], psum[:, :, 1::2])
            psum_bits = fp.f32_bits(psum[:, :, 0]).astype(np.uint64)   # [T, G, rows, C]
        else:
            acc = np.zeros((T, E, rows, g.ce_cols), np.int64)
            for a, b in steps:   # int64 wraps mod 2**64, a multiple of 2**acc_bits
                acc = acc + _signed(a, self.elem_bits) * _signed(b, self.elem_bits)
            psum = acc.reshape(T, E // ins.gk, ins.gk, rows, g.ce_cols).sum(axis=2)
            psum_bits = (psum & ((1 << self.acc_bits) - 1)).astype(np.uint64)
        if transposed(ins, "o"):
            psum_bits = _transpose_groups(psum_bits, g.lanes)
        unknown = self._gemm_unknown(ins, half)
        o_tiles = self._tiles(ins, "o")
        goff = np.asarray(group_offsets(ins))
        write_back = bool(ins.flags & Flag.WB)
        # the hardware's write order: per group of interleaved tiles (OS), row by row, tile by tile
        q = interleave(ins, self.geo)
        order = [(t, i) for g0 in range(0, T, q) for i in range(rows) for t in range(g0, min(g0 + q, T))]
        rmw = _RmwHazard(ins, g, T, rows)
        for t, i in order:
            accumulate = bool(ins.flags & Flag.ACC) or (bool(ins.flags & Flag.ACC_L0) and t % ins.L0 > 0)
            addr = ins.o_base + o_tiles[t] + goff + i * ins.o_sk
            new, new_x = psum_bits[t, :, i, :], unknown[t, :, i, :]
            stale = rmw.beat(t, i, addr)
            if accumulate:
                new, new_x = self._acc_add(self.accum[addr], new), new_x | self.accum_x[addr] | stale
            self.accum[addr], self.accum_x[addr] = new, new_x
            if write_back:
                w = ins.w_base + (addr - ins.o_base)
                self.unified[half][w], self.unified_x[half][w] = self._narrow(new), new_x

    def _operands(self, ins: Instr, half: int, mem=None) -> tuple[np.ndarray, np.ndarray]:
        """What every CE multiplies (bit patterns, or of ``mem``): output stationary, ``A`` ``[T, E, K,
        R]`` and ``B`` ``[T, E, K, C]``; stationary, the streamed rows ``[T, E, K, R]`` and the IB tile
        held in the PEs ``[T, E, R, C]`` (load ``j`` is PE row ``j`` (V) or PE column ``j`` (H))."""
        g = self.geo
        a = self._gather(ins, "a", half, mem=mem)[..., : g.ce_rows]
        if stationary(ins.mode):
            held = self._gather(ins, "b", half, loads(ins, g), mem=mem)[..., : g.lanes]   # [T, E, loads, lanes]
            return a, (np.swapaxes(held, 2, 3) if horizontal(ins.mode) else held)
        return a, self._gather(ins, "b", half, mem=mem)[..., : g.ce_cols]

    def _gemm_unknown(self, ins: Instr, half: int) -> np.ndarray:
        """Unknown elements of the reduced Psums ``[T, G, rows, C]``: a group's output
        is unknown when one of its CEs' is (:func:`sim.unknown.gemm_unknown`)."""
        x = gemm_unknown(*self._operands(ins, half, self.unified_x), stationary(ins.mode))
        T, E, R, C = x.shape
        x = x.reshape(T, E // ins.gk, ins.gk, R, C).any(axis=2)
        return _transpose_groups(x, self.geo.lanes) if transposed(ins, "o") else x

    def _acc_add(self, old: np.ndarray, new: np.ndarray) -> np.ndarray:
        if self.is_float:
            s = fp.f32_add(fp.f32_from_bits(old.astype(np.uint32)), fp.f32_from_bits(new.astype(np.uint32)))
            return fp.f32_bits(s).astype(np.uint64)
        return (old + new) & np.uint64((1 << self.acc_bits) - 1)

    def _narrow(self, acc_bits: np.ndarray) -> np.ndarray:
        """Accumulator row -> unified-memory row (RNE to bf16, or the low integer bits)."""
        if self.is_float:
            return fp.bf16_bits(fp.f32_to_bf16(fp.f32_from_bits(acc_bits.astype(np.uint32)))).astype(np.uint64)
        return acc_bits & np.uint64((1 << self.elem_bits) - 1)

    def _widen(self, elem_bits: np.ndarray) -> np.ndarray:
        if self.is_float:
            f = fp.bf16_to_f32(fp.bf16_from_bits(elem_bits.astype(np.uint16)))
            return fp.f32_bits(f).astype(np.uint64)
        v = _signed(elem_bits, self.elem_bits)
        return (v & ((1 << self.acc_bits) - 1)).astype(np.uint64)

    def _move_rows(self, ins: Instr) -> tuple[np.ndarray, np.ndarray]:
        rows = np.arange(ins.K * self.geo.banks)
        return ins.a_base + rows * ins.a_sk, ins.o_base + rows * ins.o_sk

    def _load(self, ins: Instr, half: int) -> None:
        u, a = self._move_rows(ins)
        for sl in self._chunks(ins.K, self.geo.banks, a):
            self.accum[a[sl]] = self._widen(self.unified[half][u[sl]])
            self.accum_x[a[sl]] = self.unified_x[half][u[sl]]

    def _store(self, ins: Instr, half: int) -> None:
        u, a = self._move_rows(ins)
        for sl in self._chunks(ins.K, self.geo.banks, u):
            self.unified[half][u[sl]] = self._narrow(self.accum[a[sl]])
            self.unified_x[half][u[sl]] = self.accum_x[a[sl]]

    @staticmethod
    def _chunks(K: int, rows: int, written: np.ndarray, read: np.ndarray | None = None) -> list[slice]:
        """The instruction's chunks in order (``rows`` rows each), or all at once where that gives
        the same result: no row written twice and none read after another chunk wrote it (``read``:
        rows of the written memory the instruction reads; equal to ``written`` row for row is safe)."""
        once = len(np.unique(written)) == len(written)
        if once and (read is None or np.array_equal(read, written) or not np.intersect1d(read, written).size):
            return [slice(0, K * rows)]
        return [slice(c * rows, (c + 1) * rows) for c in range(K)]

    def _vec(self, ins: Instr, half: int) -> None:
        """VEC: chunk by chunk (``vec_rows`` rows each; at once where the order does not matter), per
        lane :func:`sim.vector_ref.vec_ref`."""
        i = np.arange(ins.K * self.geo.vec_rows)
        u, a, w = ins.a_base + i * ins.a_sk, ins.o_base + i * ins.o_sk, ins.w_base + i * ins.o_sk
        wb = bool(ins.flags & Flag.WB)
        chunks = self._chunks(ins.K, self.geo.vec_rows, a)
        if wb and len(chunks) == 1:
            chunks = self._chunks(ins.K, self.geo.vec_rows, w, u)
        for sl in chunks:
            o, nar = vec_ref(self.config, ins.mode, ins.scalar, self.unified[half][u[sl]], self.accum[a[sl]])
            o_x = vec_unknown(ins.mode, self.unified_x[half][u[sl]], self.accum_x[a[sl]], self.is_float)
            self.accum[a[sl]], self.accum_x[a[sl]] = o, o_x
            if wb:
                self.unified[half][w[sl]], self.unified_x[half][w[sl]] = nar, o_x

    def _dma(self, ins: Instr, half: int) -> None:
        """DMA load / store of ``K`` beats between ``dram`` from ``a_sel`` and the rows of ``half``
        from ``a_base`` (``dma_rows`` rows per beat)."""
        g, eb = self.geo, self.elem_bits
        nbytes = ins.K * g.dma_bytes
        if ins.a_sel + nbytes > len(self.dram):
            raise DramRangeError(f"DMA of {nbytes} bytes at {ins.a_sel:#x} past the {len(self.dram)}-byte DRAM",
                                 field="a_sel")
        rows = slice(ins.a_base, ins.a_base + ins.K * g.dma_rows)
        dram = slice(ins.a_sel, ins.a_sel + nbytes)
        if len(self.dram_x) != len(self.dram):    # the caller replaced the DRAM: its bytes are known
            self.dram_x = np.zeros(len(self.dram), bool)
        if ins.mode == DmaMode.LOAD:
            self.unified_x[half][rows] = bytes_to_elements(self.dram_x[dram], g.lanes, eb)
            self.unified[half][rows] = bytes_to_rows(self.dram[dram], g.lanes, eb)
        else:
            self.dram[dram] = rows_to_bytes(self.unified[half][rows], eb)
            self.dram_x[dram] = elements_to_bytes(self.unified_x[half][rows], eb)

    def write_dram(self, addr: int, bits: np.ndarray) -> None:
        """The host writes rows (bit patterns ``[rows, lanes]``) into ``dram`` from byte ``addr``, as
        DMA stores leave them: known."""
        data = rows_to_bytes(bits, self.elem_bits)
        self.dram[addr:addr + len(data)] = data
        self.dram_x[addr:addr + len(data)] = False

    def read_dram(self, addr: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """``rows`` rows from ``dram`` byte ``addr`` on: bit patterns ``[rows, lanes]`` and which
        elements are unknown."""
        n = rows * self.geo.lanes * self.elem_bits // 8
        data = slice(addr, addr + n)
        return (bytes_to_rows(self.dram[data], self.geo.lanes, self.elem_bits),
                bytes_to_elements(self.dram_x[data], self.geo.lanes, self.elem_bits))


def rows_to_bytes(rows: np.ndarray, elem_bits: int) -> np.ndarray:
    """Rows of bit patterns ``[rows, lanes]`` as DRAM bytes (lane 0 of the first row in the low bits,
    little-endian: the AXI4 bus's order)."""
    rows = np.asarray(rows, np.uint64)
    v = np.ascontiguousarray(rows).astype("<u8").view(np.uint8).reshape(len(rows), -1, 8)
    bits = np.unpackbits(v, axis=2, bitorder="little")[:, :, :elem_bits]
    return np.packbits(bits.reshape(-1), bitorder="little")


def bytes_to_rows(data: np.ndarray, lanes: int, elem_bits: int) -> np.ndarray:
    """DRAM bytes as rows of bit patterns ``[rows, lanes]`` (:func:`rows_to_bytes` undone)."""
    bits = np.unpackbits(np.asarray(data, np.uint8).reshape(-1, 1), axis=1, bitorder="little")
    bits = bits.reshape(-1, lanes, elem_bits)
    weights = np.uint64(1) << np.arange(elem_bits, dtype=np.uint64)
    return (bits.astype(np.uint64) * weights).sum(axis=2, dtype=np.uint64)


class _RmwHazard:
    """The accumulation unit's read-modify-write within one GEMM (:class:`hdl.accum.AccumAdd`): a
    row is read when its beat arrives and written ``add_latency - 1`` cycles later, so a beat that
    adds to a row the same GEMM wrote fewer than ``add_latency`` cycles before reads the old value
    in the RTL. The compiler never does that (its tiles write distinct rows; ``ACC_L0`` tiles are a
    :func:`~gen.design.isa.tile_period` apart, never less than ``add_latency``); a hand-written
    program that does gets those rows **unknown** (:mod:`sim.unknown`), not a value the RTL would not
    compute. Beat cycles (relative): OS group ``g`` of ``n`` tiles drains row ``i`` of slot ``s`` at
    ``g * period + n * (1 - rows) + i * n + s`` (its last row ends with its last tile), IS/WS tile
    ``t`` row ``i`` at ``t * period + i``. Between GEMMs the period keeps a chain of GEMMs of one
    template (the compiler's ``ACC`` chains) apart."""

    def __init__(self, ins: Instr, geo, tiles: int, rows: int):
        self.latency = geo.add_latency
        self.q, self.tiles, self.rows = interleave(ins, geo), tiles, rows
        self.period = tile_period(ins, geo)
        self.last: dict[int, int] = {}

    def _cycle(self, t: int, i: int) -> int:
        g, s = divmod(t, self.q)
        n = min(self.q, self.tiles - g * self.q)
        return g * self.period + n * (1 - self.rows) + i * n + s

    def beat(self, t: int, i: int, addr: np.ndarray) -> np.ndarray | bool:
        """Beat ``(t, i)`` writes rows ``addr`` (one per group): which of them (``[G, 1]``) an add
        would read while the value is still in the adder."""
        if self.latency == 1:
            return False
        now = self._cycle(t, i)
        hit = np.asarray([now - self.last.get(int(a), now - self.latency) < self.latency for a in addr], bool)
        for a in addr:
            self.last[int(a)] = now
        return hit[:, None]


def _transpose_groups(x: np.ndarray, lanes: int) -> np.ndarray:
    """The reduction network's transpose layer on ``[T, G, R, C]``: group ``h*L + l`` takes lane ``l``
    of the rows of groups ``h*L + i``."""
    T, G, R, C = x.shape
    return x.reshape(T, G // lanes, lanes, R, C).transpose(0, 1, 4, 3, 2).reshape(T, G, R, C)


def _signed(bits: np.ndarray, width: int) -> np.ndarray:
    v = np.asarray(bits, np.uint64).astype(np.int64)
    if width < 64:
        v = v & ((1 << width) - 1)
        v = np.where(v >= (1 << (width - 1)), v - (1 << width), v)
    return v


__all__ = ["Emulator", "RunResult", "DramRangeError", "DRAM_BYTES", "rows_to_bytes", "bytes_to_rows"]
