"""The main job (``make demo``, ``fetta demo``): elaborate the accelerator and run a demo contraction.

Steps, each reported on one line:

1. elaborate the whole accelerator for the default configuration (the paper's:
   16 CEs of 4x4 bf16 PEs, 16 banks) to ``build/demo/fetta.v``;
2. check the golden model of the ATIS attention layer (``examples/atis_tt.json``)
   against an independent rebuild of the full weight;
3. compile that layer's training step (``fp`` + ``bp`` + ``wg``) to instructions as ``fetta run``
   does (its runs move their own data by ``DMA`` instructions through the AXI4 port,
   :mod:`gen.compiler.dma`) and run it on the RTL of the default accelerator in Verilator with the
   bench's DRAM paced at the configured bandwidth: every job's cycles, and every byte the DMA
   stores write, must equal the instruction-level emulator's, and the results must be within the
   bf16 / FP32 error bound of the float64 golden model; the cycles are the hardware's own count;
4. run the same program with the host writing each run's operands and reading its results
   through the host port (``fetta run --dram rule``): every row read back and every run's
   cycles equal the emulator's, the compute cycles are step 3's, the results equal step 3's bit
   for bit, and the line shows the DRAM rule's estimate beside step 3's count.

Options: ``--sim icarus|verilator`` (default verilator), ``--config F.toml`` for the
simulated design (default ``configs/default.toml``; ``configs/demo.toml`` is a 4-CE design
that Icarus simulates quickly), ``--spec`` and ``--phase`` (default the ATIS layer, ``train``).
Elaboration (~65 s) and the Verilator build (~3 min on 2 cores) are cached per design under
``build/``: a second run takes well under a minute.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import opt_einsum

import hdl
from gen.design.config import FettaConfig, load_config
from gen.design.isa import Geometry
from gen.errors import FettaError
from gen.toolflow.execute import execute, rtl_check
from gen.toolflow.run import max_rel_err, phases_of, run_compiled_layer
from gen.workload.network import core_operands, physical_modes
from gen.workload.spec import load_spec
from sim.golden import compute, random_inputs, read_npz
from sim.runner import elaborate

OUT = Path("build/demo")


def run_demo(sim: str = "verilator", config_path: str = "configs/default.toml",
             spec_path: str = "examples/atis_tt.json", phase: str = "train") -> int:
    """The three steps of the module docstring; returns the exit status (0: everything agreed)."""
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    text = elaborate(hdl.DEFAULT_TOP, FettaConfig())
    (OUT / "fetta.v").write_text(text)
    print(f"[verilog] {hdl.module_name(hdl.DEFAULT_TOP)} (default configuration, 256 MACs): "
          f"{text.count(chr(10))} lines in {OUT / 'fetta.v'} ({time.perf_counter() - t0:.0f} s; cached under build/verilog/)")

    spec, arrays = read_npz(OUT / "atis_tt.npz")
    W = rebuild_weight(spec, arrays)
    Y = arrays["X"].astype(np.float64) @ W
    err = float(np.max(np.abs(Y - arrays["Y"])) / np.max(np.abs(Y)))
    print(f"[golden]  {spec.name}: Y {arrays['Y'].shape}, {spec.num_cores} cores; "
          f"max rel. error vs rebuilt weight {err:.2e}")
    if err > 1e-10:
        print("error: golden model disagrees with the rebuilt weight", file=sys.stderr)
        return 1
    try:
        return run_on_accelerator(load_config(config_path), sim, spec_path, phase)
    except FettaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run_on_accelerator(config, sim: str = "verilator", spec_path: str = "examples/atis_tt.json",
                       phase: str = "train") -> int:
    """Run ``spec_path`` for ``phase`` as ``fetta run`` does, on the emulator and on the RTL (``sim``)."""
    spec = load_spec(spec_path)
    inputs = random_inputs(spec, 1)
    phases = phases_of(phase)
    ref = compute(spec, inputs, phases=phases)
    print(f"[sim]     {spec.name} {phase} on {sim}: compiling, then building the {sim} model of the design "
          f"(cached per design under build/sim/; Verilator takes ~2 min for the default design the first time)",
          flush=True)
    t0 = time.perf_counter()
    # rtl_check_dma raises ExecutionError (a FettaError) on any difference
    prog, ex, exact = run_compiled_layer(spec, phase, config, inputs, sim, dram="dma")
    results, cycles, macs, busy = ex.results, ex.cycles, prog.macs, ex.compute_cycles
    rel = max_rel_err(results, ref)
    print(f"[run]     {spec.name} {phase} ({'+'.join(phases)}) on {sim}, {config.num_ces} CEs / {config.macs} MACs: "
          f"{cycles} cycles end to end ({busy} compute + {cycles - busy} DRAM stall), utilization "
          f"{macs / (cycles * config.macs):.1%} ({macs / (busy * config.macs):.1%} of compute), "
          f"max rel. error vs golden {rel:.2e}, "
          f"RTL vs emulator {'bit- and cycle-exact' if exact else 'DIFFERS'} ({time.perf_counter() - t0:.0f} s)")
    geo = Geometry.of(config)
    print(f"          ({ex.runs} jobs moving their own data by DMA instructions, DRAM {config.dram_gbps} GB/s "
          f"= {geo.dram_num}/{geo.dram_den} beat per cycle: the hardware's own count)")
    exact = run_host(prog, ex, config, inputs, sim) and exact
    if not exact or rel > 2 ** -7:
        print("error: the accelerator's result is wrong", file=sys.stderr)
        return 1
    return 0


def run_host(prog, ex, config, inputs, sim: str) -> bool:
    """Step 4 of the module docstring for a compiled ``prog`` already executed by DMA jobs as ``ex``;
    True when the RTL equals the emulator and the results equal ``ex``'s."""
    t0 = time.perf_counter()
    exh = execute(prog, inputs, config)
    rtl = rtl_check(exh, config, sim)
    same = all(np.array_equal(exh.results[k], v) for k, v in ex.results.items())
    runs = f"{len(prog.runs)} run{'s' * (len(prog.runs) != 1)}"
    print(f"[host]    the same program through the host port ({runs}; --dram rule): compute "
          f"{exh.compute_cycles} cycles ({'= step 3' if exh.compute_cycles == ex.compute_cycles else 'DIFFERS'}), "
          f"{exh.cycles} end to end by the DRAM rule (step 3's count: {ex.cycles}), results "
          f"{'bit-equal' if same else 'DIFFER'}, RTL vs emulator {'bit- and cycle-exact' if rtl else 'DIFFERS'} "
          f"({time.perf_counter() - t0:.0f} s)")
    return rtl and same and exh.compute_cycles == ex.compute_cycles


def rebuild_weight(spec, arrays) -> np.ndarray:
    """The full weight ``W: [I, O]`` from the cores, by one einsum over the cores only."""
    cores, sizes, terms = core_operands(spec)
    ins, outs = physical_modes(spec)
    letters = {m: opt_einsum.get_symbol(i) for i, m in enumerate(sizes)}
    W = np.zeros((spec.I, spec.O))
    for t in sorted(set(terms)):
        ops = [c for c, tc in zip(cores, terms) if tc == t]
        expr = ",".join("".join(letters[m] for m in op.modes) for op in ops) + "->" + \
            "".join(letters[m] for m in ins + outs)
        W += opt_einsum.contract(expr, *[arrays[op.name].astype(np.float64) for op in ops]).reshape(spec.I, spec.O)
    return W



__all__ = ["OUT", "run_demo", "run_on_accelerator", "run_dma", "rebuild_weight"]
