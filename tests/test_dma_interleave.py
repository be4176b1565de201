"""The DMA lowering's placement of DMA instructions (`gen.compiler.dma._interleave`), which goes on
from the clock of its last placement, against the placement that simulates every candidate job
from its start (the rule of the docstring, written out the slow way)."""

from gen.compiler import compile_layer
from gen.compiler.dma import _build, _interleave, _place, lower_dma
from gen.design.config import FettaConfig
from gen.design.control import Clock
from gen.design.isa import OVERHEAD, Geometry, Opcode, halt, nop
from gen.design.timing import program_cycles
from gen.workload.spec import load_spec


def _reference(body, todo, geo):
    def positions(fixed):
        clock, pos, k = Clock(geo), list(fixed), 0
        for i in range(len(body) + 1):
            while k < len(todo) and (pos[k] == i if k < len(fixed) else
                                     i == len(body) or clock.dma_idle <= clock.fetch + OVERHEAD - 1):
                if k >= len(fixed):
                    pos.append(i)
                clock.act(todo[k])
                k += 1
            if i < len(body):
                clock.act(body[i])
        return pos

    def build(pos):
        return _build(body, todo, pos)

    def cycles(pos):
        clock = Clock(geo)
        for ins in build(pos):
            c = clock.act(ins)
        return c + 1

    fixed = []
    for k in range(len(todo)):
        at = positions(fixed)[k]
        tries = [at] + ([at - 1] if at > (fixed[-1] if fixed else 0) else [])
        fixed.append(min(tries, key=lambda p: (cycles(positions(fixed + [p])), -p)))
    return build(fixed)


def test_interleave_equals_the_placement_from_the_start():
    config = FettaConfig()
    geo = Geometry.of(config)
    assert Geometry.of(FettaConfig()) is geo            # one object per geometry
    dp = lower_dma(compile_layer(load_spec("benchmarks/layers/atis_tt.json"), "train", config, dram="dma"), config)
    _place.cache_clear()            # placed again below, not found among the lowering's jobs
    checked = 0
    for job in dp.jobs:
        if job.run is None:
            continue
        body = [i for i in job.program if i.opcode not in (Opcode.DMA, Opcode.HALT)]
        todo = [i for i in job.program if i.opcode == Opcode.DMA]
        if not todo:
            continue
        # the same DMA instructions, placed again both ways, from every first placement on
        placed = _interleave(body, [(i, []) for i in todo], geo)
        assert placed == _reference(body, todo, geo) == job.program
        # a kept placement is handed out as a new list; a kept job's cycles are a fresh clock's
        again = _interleave(body, [(i, []) for i in todo], geo)
        assert again == placed and again is not placed
        clock = Clock(geo)
        for ins in placed:
            c = clock.act(ins)
        assert program_cycles(placed, config) == program_cycles([i.encode() for i in placed], config) == c + 1
        checked += 1
    assert checked >= 4


def test_clock_copy_goes_on_alone():
    geo = Geometry.of(FettaConfig())
    a = Clock(geo)
    a.act(nop())
    b = a.copy()
    b.act(halt())
    assert a.fetch is not None and b.fetch is None
