"""When the controller starts and ends each instruction: the one cycle rule of the emulator, the
compiler's timing (:func:`gen.design.timing.program_cycles`) and the RTL (:class:`hdl.top.Fetta`).

Per instruction the controller spends FETCH, DECODE and CHECK (:data:`gen.design.isa.OVERHEAD`
cycles), then acts in CHECK: it ends the run (HALT, an error), or starts the instruction. A GEMM
*issues* for :func:`issue_cycles` cycles after its CHECK (its tile groups, to the end of the last
group's period) and *drains* until its last output row is written,
:func:`gen.design.isa.exec_cycles` after CHECK. The next FETCH follows a GEMM's CHECK at once, so
the next instruction is fetched and decoded while the GEMM issues; in CHECK it waits (one cycle at
a time) until

* a GEMM that :func:`overlaps` the last GEMM started: the last cycle of that GEMM's issue (the
  issue side samples its fields at the start, so the next GEMM's tiles follow without a gap),
  in OS until its first tiles cannot end before the last group's Psums left the CEs' drain
  registers (:func:`os_drain_guard`: a shorter ``K`` than the last GEMM's may wait), and at most one
  other GEMM still draining (the output side holds two GEMMs' fields, :class:`hdl.drain.DrainQueue`);
* anything else (another GEMM, a LOAD / STORE / VEC, NOP, SYNC, HALT, an instruction that fails
  its checks, the pc past the instruction memory): every GEMM has written its last row (a GEMM's
  drain always ends after its issue).

A GEMM's drain ends in the cycle of its last write, so the instruction that waits for it acts in
the next cycle. LOAD / STORE / VEC run to their end before the next FETCH. The run's cycle count
ends with the CHECK that halts it.

A DMA load / store hands its descriptor to the DMA engine in its CHECK (the next FETCH follows at
once) and the engine is busy for :func:`dma_cycles` cycles from the next cycle on; DMA instructions
do not wait for GEMMs, nor GEMMs for them. A DMA instruction (load, store or wait), HALT and an
instruction that fails its checks (the run ends) act no earlier than the cycle the engine is idle
again (its ``done`` cycle), as well as by the rules above.
"""

from __future__ import annotations

import functools

from gen.design.isa import (CE_MODE, OVERHEAD, START_CYCLES, DmaMode, Flag, Geometry, Instr, Opcode, exec_cycles,
                            groups, out_max, read_max, stationary, tile_period, transposed, vec_delay)

__all__ = ["issue_cycles", "overlaps", "Clock", "repeat_cycles", "os_issue_cycles", "stationary_issue_cycles",
           "os_drain_guard", "dma_bursts", "dma_cycles", "dram_paced"]


def dma_bursts(dram: int, beats: int, geo: Geometry) -> list[int]:
    """The beats of each AXI4 burst :class:`hdl.dma.AxiDma` cuts a transfer into: at most
    ``dma_burst``, never across a 4 KiB boundary."""
    out, left = [], beats
    while left:
        n = min(geo.dma_burst, left, (4096 - dram % 4096) // geo.dma_bytes)
        out.append(n)
        dram, left = dram + n * geo.dma_bytes, left - n
    return out


@functools.lru_cache(maxsize=1 << 16)     # a pure function of the word: timed many times over
def dma_cycles(ins: Instr, geo: Geometry) -> int:
    """Cycles the DMA engine is busy with a DMA load / store (from the cycle after its CHECK to its
    ``done`` cycle, in which the next DMA instruction may act), on the DRAM of ``geo``: an AXI4
    subordinate that takes every AR / AW at once, answers a read burst no earlier than
    ``dram_latency`` (``L``) cycles after its AR handshake (the bursts' beats in order) and a write
    burst with B the cycle after its last W beat, and moves at most ``dram_num / dram_den`` beats
    per cycle (:func:`dram_paced`).

    The engine issues burst ``i`` (AR / AW the next cycle) one cycle after burst ``i - 1`` and one
    cycle after burst ``i - outstanding`` completed (its last R beat; its B response). Load: R beats
    of burst ``i`` from ``max(AR_i + L, end of burst i - 1 + 1)``; done two cycles after the last.
    Store: W beats of burst ``i`` from ``max(AW_i + 1, end of burst i - 1 + 1)`` (the read-ahead FIFO
    holds the first beat from cycle 2 and keeps up); done three cycles after the last. At one beat
    per cycle and without gaps (``L`` small against ``outstanding * burst``) a load of ``n`` beats is
    ``n + L + 2`` cycles, a store ``n + 4`` (``hdl/dma.py``)."""
    store = ins.mode == DmaMode.STORE
    bursts = dma_bursts(ins.a_sel, ins.K, geo)
    if geo.dram_num < geo.dram_den:
        return dram_paced(store, tuple(bursts), geo.dma_outstanding, geo.dram_latency, geo.dram_num, geo.dram_den)
    O, L = geo.dma_outstanding, geo.dram_latency
    issue, done, end = [], [], 1 if store else 0      # end: the cycle of the last beat so far
    for i, n in enumerate(bursts):
        t = max(issue[-1] + 1 if issue else 0, done[i - O] + 1 if i >= O else 0)
        issue.append(t)
        end = max(t + 1 + (1 if store else L), end + 1) + n - 1
        done.append(end + 1 if store else end)
    return end + (3 if store else 2)


@functools.lru_cache(maxsize=4096)
def dram_paced(store: bool, bursts: tuple[int, ...], outstanding: int, latency: int, num: int, den: int) -> int:
    """:func:`dma_cycles` on a DRAM that moves at most ``num / den`` beats per cycle, cycle by cycle.

    The DRAM (the bench's ``fetta_axi_ram``) queues each burst from the cycle after its AR / AW
    handshake until its last beat; the head burst's next beat may move in a cycle ``L`` (a read) or 1
    (a write) cycles after its handshake or later, if the credit ``c >= den``. At the end of every
    cycle ``c`` becomes ``den`` if no burst was queued in it, else ``min(c + num - den * beat, den +
    num - 1)`` (a credit of up to one beat carried over, so a steady stream moves exactly ``num``
    beats every ``den`` cycles). At ``num = den`` this is :func:`dma_cycles`' count."""
    O, L, n = outstanding, latency, len(bursts)
    issue: list[int] = []
    done: list[int] = []
    queue: list[list[int]] = []             # queued bursts: [first cycle a beat may move, beats left]
    c, credit, last, hs = 0, den, 0, 0
    while len(done) < n:
        i = len(issue)
        if i < n and c >= (issue[-1] + 1 if issue else 0) and (i < O or (len(done) > i - O and c > done[i - O])):
            issue.append(c)
        idle = not queue
        beat = bool(queue) and queue[0][0] <= c and credit >= den
        if beat:
            queue[0][1] -= 1
            if queue[0][1] == 0:
                queue.pop(0)
                done.append(c + 1 if store else c)
                last = c
        if hs < len(issue) and issue[hs] + 1 == c:      # the AR / AW handshake of a burst issued last cycle
            queue.append([c + (1 if store else L), bursts[hs]])
            hs += 1
        credit = den if idle else min(credit + num - (den if beat else 0), den + num - 1)
        c += 1
    return last + (3 if store else 2)


@functools.lru_cache(maxsize=1 << 16)     # a pure function of the word: timed many times over
def issue_cycles(ins: Instr, geo: Geometry) -> int:
    """Cycles from a GEMM's CHECK to the last cycle of its issue: the last group's whole period of
    the walker of IA vectors (which starts ``vec_delay`` cycles late in IS/WS). A GEMM that starts
    in that cycle issues its first tile no earlier than a next tile of the same GEMM would, so the
    CEs' drain registers and stationary tiles are free. Always less than ``exec_cycles``."""
    delay = vec_delay(ins, geo) if stationary(ins.mode) else 0
    return delay + groups(ins, geo) * tile_period(ins, geo)


@functools.lru_cache(maxsize=1 << 16)     # a pure function of the word: timed many times over
def os_drain_guard(ins: Instr, geo: Geometry) -> int:
    """OS: cycles from a GEMM's CHECK to the earliest cycle in which a next OS GEMM's first tile
    may end if its depth is 1: its last group starts ``1 + (groups - 1) * period`` after CHECK, its
    tiles end ``q * (K - 1)`` later and drain ``q * ce_rows`` rows (``q = add_latency``). A next
    GEMM of depth ``K'`` may act ``q * (K' - 1)`` cycles before it (the guard of
    :class:`hdl.sequencer.GemmIssue`); within a GEMM the period keeps the same distance."""
    q = geo.add_latency
    return 1 + (groups(ins, geo) - 1) * tile_period(ins, geo) + q * (ins.K - 1) + q * geo.ce_rows - 1


def os_issue_cycles(K: int, tiles: int, geo: Geometry) -> int:
    """:func:`issue_cycles` of an output-stationary GEMM of ``tiles`` tiles of depth ``K`` from the
    loop bounds alone (groups of ``add_latency`` tiles, ``q * max(K, ce_rows)`` cycles each)."""
    q = geo.add_latency
    return -(-tiles // q) * q * max(K, geo.ce_rows)


def stationary_issue_cycles(K: int, tiles: int, geo: Geometry, horizontal_loads: bool = False) -> int:
    """:func:`issue_cycles` of a stationary GEMM (``WS`` / ``IS``; ``WS_H`` / ``IS_H`` with
    ``horizontal_loads``) of ``tiles`` tiles streaming ``K`` IA vectors each."""
    ld, delay = (geo.ce_cols, geo.ce_cols) if horizontal_loads else (geo.ce_rows, 1)
    return delay + tiles * max(ld, K, geo.add_latency)


def repeat_cycles(n: int, issue: int, execute: int) -> int:
    """Cycles from the first FETCH to the last write of ``n`` back-to-back GEMMs that overlap one
    another (:func:`overlaps`), each issuing for ``issue`` and ending ``execute`` cycles after its
    CHECK: GEMM ``j`` acts ``a = max(issue, OVERHEAD)`` cycles after GEMM ``j - 1``, and at least
    ``b = execute + 1`` after GEMM ``j - 2`` (two output contexts), so ``j * a`` when ``2a >= b``,
    else ``(j // 2) * b + (j % 2) * a``."""
    a, b = max(issue, OVERHEAD), execute + 1
    last = (n - 1) * a if 2 * a >= b else ((n - 1) // 2) * b + ((n - 1) % 2) * a
    return OVERHEAD + last + execute


@functools.lru_cache(maxsize=1 << 16)
def overlaps(prev: Instr, ins: Instr, geo: Geometry) -> bool:
    """May GEMM ``ins`` start while GEMM ``prev`` drains? Both run the same CE mapping, reduction
    network setting, CE and group counts and output transpose (what the draining rows still pass
    through), and ``ins`` reads no unified row in the range ``prev`` writes back (``WB``)."""
    same = (CE_MODE[prev.mode] == CE_MODE[ins.mode] and prev.red_mode == ins.red_mode
            and prev.log_gm + prev.log_gn == ins.log_gm + ins.log_gn and prev.log_gk == ins.log_gk
            and transposed(prev, "o") == transposed(ins, "o"))
    if not same:
        return False
    if prev.flags & Flag.WB:
        lo, hi = prev.w_base, prev.w_base + out_max(prev, geo)
        for op in ("a", "b"):
            if getattr(ins, f"{op}_base") <= hi and lo <= read_max(ins, op, geo):
                return False
    return True


class Clock:
    """The controller's cycle count over a run (module docstring), one instruction at a time.

    ``act(ins)`` takes the instruction fetched next (``None``: it fails its checks, or the pc
    ran past the instruction memory), returns the cycle its CHECK acts in and moves the next FETCH
    on; the run's cycles are ``act(...) + 1`` of the instruction that ends it."""

    def __init__(self, geo: Geometry):
        self.geo = geo
        self.fetch = START_CYCLES        # the cycle of the next FETCH (0: the start request)
        self._issued = 0                 # the last cycle of the last GEMM's issue
        self._guard = 0                  # OS: the earliest end of a next GEMM's first tile of depth 1
        self._flight: list[tuple[int, Instr]] = []    # the last two GEMMs started: (last-write cycle, word)
        self.dma_idle = 0                # the first cycle the DMA engine is idle again (its done cycle)

    def copy(self) -> "Clock":
        """The clock in its current state, to go on from without changing this one."""
        out = Clock(self.geo)
        out.fetch, out._issued, out._guard = self.fetch, self._issued, self._guard
        out._flight, out.dma_idle = list(self._flight), self.dma_idle
        return out

    def act(self, ins: Instr | None) -> int:
        need = [self.fetch + OVERHEAD - 1]
        gemm = ins is not None and ins.opcode == Opcode.GEMM
        dma = ins is not None and ins.opcode == Opcode.DMA
        if ins is None or dma or ins.opcode == Opcode.HALT:
            need.append(self.dma_idle)
        if gemm and self._flight and overlaps(self._flight[-1][1], ins, self.geo):
            need += [self._issued, self._guard - self.geo.add_latency * (ins.K - 1)]
            if len(self._flight) > 1:
                need.append(self._flight[-2][0] + 1)
        elif self._flight and not dma:
            need.append(self._flight[-1][0] + 1)
        c = max(need)
        if ins is None or ins.opcode == Opcode.HALT:
            self.fetch = None
        elif gemm:
            self._flight = [*self._flight[-1:], (c + exec_cycles(ins, self.geo), ins)]
            self._issued = c + issue_cycles(ins, self.geo)
            self._guard = 0 if stationary(ins.mode) else c + os_drain_guard(ins, self.geo)
            self.fetch = c + 1
        else:
            if dma and ins.mode != DmaMode.WAIT:
                self.dma_idle = c + 1 + dma_cycles(ins, self.geo)
            self.fetch = c + exec_cycles(ins, self.geo) + 1
        return c
