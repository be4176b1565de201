"""The model of FETTA itself: the cycles and the accesses of the compiled program.

``fetta model --arch fetta`` compiles the layer's phase (:func:`gen.compiler.compile_layer`) and
reports :meth:`Program.timeline`: the static timing of every run's instructions (which the
emulator and the RTL reproduce cycle for cycle) and the DRAM transfers between runs by the rule
of :mod:`gen.design.timing`. No second formula: the model agrees with the emulator exactly, not
within a tolerance (``tests/test_model.py``). Energy applies the per-access energies of
:data:`gen.model.ENERGY_PJ` to the accesses the compiled instructions perform.

Accesses counted per GEMM instruction (``E = gm*gn*gk`` active CEs, ``T = L0*L1`` tiles):
MACs ``gemm_macs`` (padding included: the PEs do them); distribution-network elements and unified
reads: IA ``K * ce_rows`` plus IB (``K * ce_cols`` for OS, ``loads * ce_cols`` for IS/WS) per CE and
tile; partial sums through the reduction network ``out_rows * ce_cols`` per CE and tile; accumulation
read-modify-writes, after the spatial reduction over ``gk``, ``out_rows * ce_cols`` per ``gm*gn`` and
tile. LOAD / STORE move ``K * banks`` rows (one unified and one accumulation access per element);
VEC ``K * vector_rows`` rows (a unified read, an accumulation read-modify-write and a vector op per
element). DMA transfers write or read every element once in the unified memory.
"""

from __future__ import annotations

from dataclasses import replace

from gen.compiler.capabilities import capabilities
from gen.compiler.dma import hardware_timeline
from gen.compiler.program import Program
from gen.design.config import FettaConfig
from gen.design.isa import Geometry, Opcode, gemm_macs, loads, out_rows, stationary, vector_rows
from gen.model import ENERGY_PJ, ModelResult


def program_accesses(prog: Program, config: FettaConfig) -> dict[str, int]:
    """Counts of the compiled program's operations by :data:`ENERGY_PJ` category."""
    geo = Geometry.of(config)
    R, C = geo.ce_rows, geo.ce_cols
    n = dict(mac=0, sram=0, accum=0, dist=0, red=0, vector=0)
    for run in prog.runs:
        for ins in run.program:
            if ins.opcode == Opcode.GEMM:
                ces, tiles = ins.gm * ins.gn * ins.gk, ins.L0 * ins.L1
                ib = (loads(ins, geo) if stationary(ins.mode) else ins.K) * C
                n["mac"] += gemm_macs(ins, geo)
                n["dist"] += ces * tiles * (ins.K * R + ib)
                n["red"] += ces * tiles * out_rows(ins, geo) * C
                n["accum"] += ins.gm * ins.gn * tiles * out_rows(ins, geo) * C
            elif ins.opcode in (Opcode.LOAD, Opcode.STORE):
                elems = ins.K * geo.banks * geo.lanes
                n["sram"] += elems
                n["accum"] += elems
            elif ins.opcode == Opcode.VEC:
                elems = ins.K * vector_rows(config) * geo.lanes
                n["sram"] += elems
                n["accum"] += elems
                n["vector"] += elems
    n["sram"] += n["dist"] + prog.dram_bytes // (config.elem_bits // 8)
    return n


#: npz keys each phase must read from and write to DRAM at least once
_COMPULSORY = {"fp": (("X", "core"), ("Y",)), "bp": (("dY", "core"), ("dX",)),
               "wg": (("X", "dY", "core"), ("dcore",)), "train": (("X", "dY", "core"), ("Y", "dX", "dcore")),
               "backward": (("X", "dY", "core"), ("dX", "dcore"))}


def compulsory_bytes(spec, phase: str, config: FettaConfig) -> int:
    """The DRAM floor of a phase: its inputs read once and its results written once (bytes of the
    stored element format); a program that keeps every intermediate and saved tensor on chip moves
    exactly this. WG reads the cores because each core's gradient contracts the others; a layer of one
    core (dense) has no other, so its WG reads none."""
    ins, outs = _COMPULSORY[phase]
    sizes = spec.tensor_elements()
    if phase == "wg" and len(spec.core_shapes()) == 1:
        ins = tuple(p for p in ins if p != "core")
    keys = [k for k in sizes if any(k == p or (p.endswith("core") and k.startswith(p + "_")) for p in ins + outs)]
    return sum(sizes[k] for k in keys) * (config.elem_bits // 8)


def model_compiled(spec, phase: str, config: FettaConfig | None = None, paths=None, arch: str = "fetta",
                   path: str | None = None, dram: str = "rule") -> ModelResult:
    """Cycles, DRAM bytes, SRAM accesses and energy of ``phase`` of ``spec`` as compiled for ``config``
    with the capabilities of ``arch`` (:mod:`gen.compiler.capabilities`: an architecture or an
    ablation; its design is :meth:`Capabilities.config` of ``config``). ``paths`` (by network label)
    or ``path`` (a name of :data:`gen.compiler.capabilities.PATHS`) replace the capability's order.
    Distribution / reduction network accesses are charged the capability set's ``dist_scale`` /
    ``red_scale`` (SIGMA's Benes network: 2x; none on TRETA and the TPU). ``dram="dma"``: compiled
    choosing by, and timed by, the program lowered to runs that move their own data
    (:func:`gen.compiler.dma.hardware_timeline`: ``fetta run``'s cycles, compute cycles and DRAM bytes)
    instead of the DRAM rule."""
    config = config or FettaConfig()
    caps = capabilities(arch)
    if path is not None:
        caps = replace(caps, path=path)
    design = caps.config(config)
    prog = caps.compile(spec, phase, config, paths, dram=dram)
    t = hardware_timeline(prog, design) if dram == "dma" else prog.timeline(design)
    acc = program_accesses(prog, design)
    scale = {"dist": caps.dist_scale, "red": caps.red_scale}
    energy = sum(acc[k] * ENERGY_PJ[k] * scale.get(k, 1.0) for k in acc) \
        + t.dram_bytes * ENERGY_PJ["dram_byte"] + t.cycles * ENERGY_PJ["static"]
    res = ModelResult(cycles=t.cycles, macs=prog.macs, dram_bytes=t.dram_bytes, sram_accesses=acc["sram"],
                      energy_pj=energy, freq_mhz=config.freq_mhz, compute_cycles=t.compute_cycles,
                      dram_stall_cycles=t.dram_stall_cycles, program=prog, _pes=design.macs)
    res.steps = [{"network": s.network, "step": s.step, "roles": s.roles, "grid": list(s.grid), "macs": s.macs,
                  "est_cycles": s.est_cycles, "out_layout": list(s.out_layout)} for s in prog.steps]
    return res


__all__ = ["program_accesses", "compulsory_bytes", "model_compiled"]
