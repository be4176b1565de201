"""Execute a :class:`gen.compiler.vecops.VecProgram` on the emulator (and replay it on the RTL with
:func:`gen.toolflow.execute.rtl_check`).

The host packs each ``n``-element operand flat into ``rows x lanes`` (zero padded), writes every run's
rows of it (bfloat16 bit patterns into the unified memory, FP32 ones into the accumulation unit) and
the constant row of ``1.0``, runs the program and reads the run's result rows back. Timing is
:meth:`gen.compiler.vecops.VecProgram.timeline` (the rule of :mod:`gen.design.timing`) with the
emulator's compute cycles, which must equal the program's static timing.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from gen.compiler.vecops import ONE, VecProgram
from gen.design.config import FettaConfig
from gen.design.isa import ErrorCode, assemble
from gen.toolflow.execute import Execution, ExecutionError, refuse_unknown
from sim.bf16 import f32_bits, ftz32
from sim.emulator import Emulator

__all__ = ["execute_vec"]


def execute_vec(prog: VecProgram, inputs: Mapping[str, np.ndarray], config: FettaConfig) -> Execution:
    """Run ``prog`` on the emulator with ``inputs`` (every name of ``prog.inputs``, of ``prog.shape``;
    bfloat16 operands must hold bfloat16 values). ``results`` maps every output to a float32 array of
    ``prog.shape``."""
    missing = sorted(set(prog.inputs) - set(inputs))
    if missing:
        raise ExecutionError(f"vector operation {prog.op} needs {', '.join(missing)}", field="inputs")
    L = config.lanes
    emu = Emulator(config)
    packed = {}
    for name in prog.inputs:
        arr = np.asarray(inputs[name], np.float32)
        want = int(np.prod(prog.tensor_shape(name)))
        if arr.size != want:
            raise ExecutionError(f"{name} has {arr.size} elements, the program {want}", field="inputs")
        packed[name] = prog.pack(arr, L, name)
    one = np.ones((1, L), np.float32)
    outs = {name: np.zeros((1 if name in prog.stats else prog.cols, prog.blocks, L), np.float32)
            for name in prog.outputs}
    #: per output, its elements that are unknown (:mod:`sim.unknown`)
    xouts = {name: np.zeros(full.shape, np.float32) for name, full in outs.items()}
    trace, atrace, jobs, measured = [], [], [], []
    for j, run in enumerate(prog.runs):
        uw, aw = [], []
        for addr, name in run.uwrites:
            bits = emu.to_elem_bits(one if name == ONE else prog.slab(packed[name], run))
            emu.write_unified(run.half, addr, bits)
            uw.append((run.half, addr, bits))
        for addr, name in run.awrites:
            bits = f32_bits(ftz32(prog.slab(packed[name], run))).astype(np.uint64)
            emu.write_accum(addr, bits)
            aw.append((addr, bits))
        words = assemble(run.program)
        emu.load_program(words)
        r = emu.run(half=run.half)
        if r.error != ErrorCode.NONE:
            raise ExecutionError(f"{prog.op} run {j} stopped with {r.error.name} at pc {r.pc}", field="program")
        ucount = [len(prog.slab(outs[name], run)) for _, name in run.ureads]
        acount = [len(prog.slab(outs[name], run)) for _, name in run.areads]
        ureads = [emu.unified[run.half, a:a + n].copy() for (a, _), n in zip(run.ureads, ucount)]
        areads = [emu.accum[a:a + n].copy() for (a, _), n in zip(run.areads, acount)]
        for (a, name), bits in zip(run.ureads, ureads):
            prog.place(outs[name], run, emu.from_elem_bits(bits))
            prog.place(xouts[name], run, emu.unified_x[run.half, a:a + len(bits)])
        for (a, name), bits in zip(run.areads, areads):
            prog.place(outs[name], run, emu.from_acc_bits(bits))
            prog.place(xouts[name], run, emu.accum_x[a:a + len(bits)])
        trace.append((r.cycles, ureads))
        atrace.append(areads)
        jobs.append({"uwrites": uw, "awrites": aw, "prog": words, "half": run.half,
                     "ureads": [(run.half, a, n) for (a, _), n in zip(run.ureads, ucount)],
                     "areads": [(a, n) for (a, _), n in zip(run.areads, acount)]})
        measured.append(r.cycles)
    if measured != [t.compute_cycles for t in prog.run_timings(config)]:
        raise ExecutionError("emulator cycles differ from the static program timing", field="program")
    t = prog.timeline(config, measured)
    for name, full in xouts.items():
        refuse_unknown(prog.unpack(full, name), f"{prog.op}'s result {name}")
    results = {name: prog.unpack(full, name) for name, full in outs.items()}
    return Execution(results, t, 0, len(prog.runs), trace, jobs, atrace)
