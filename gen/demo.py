"""The main job (``make demo``): elaborate the accelerator and run a demo contraction.

Steps, each reported on one line:

1. elaborate the whole accelerator for the default configuration (the paper's:
   16 CEs of 4x4 bf16 PEs, 16 banks) to ``build/demo/fetta.v``;
2. check the golden model of the ATIS attention layer (``examples/atis_tt.json``)
   against an independent rebuild of the full weight;
3. run a dense contraction (``examples/dense_small.json``, ``fp``) on the RTL of the
   accelerator in simulation and check it against the emulator (bit and cycle
   exact) and the float64 golden model.

Options: ``--sim icarus|verilator`` (default icarus) and ``--config F.toml`` for the
simulated design (default ``configs/demo.toml``, 4 CEs: a Verilator build of the full
default design takes far longer than a demo should; ``--config configs/default.toml
--sim verilator`` runs it anyway).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

OUT = Path("build/demo")


def main(argv=None) -> int:
    import argparse

    import hdl
    from gen.config import FettaConfig, load_config
    from gen.errors import FettaError
    from sim.golden import read_npz

    ap = argparse.ArgumentParser(prog="python -m gen.demo", description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default="icarus", choices=("icarus", "verilator"))
    ap.add_argument("--config", default="configs/demo.toml", help="configuration of the simulated design")
    args = ap.parse_args(argv)

    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    text = hdl.to_verilog(hdl.DEFAULT_TOP, FettaConfig())
    (OUT / "fetta.v").write_text(text)
    print(f"[verilog] {hdl.module_name(hdl.DEFAULT_TOP)} (default configuration, 256 MACs): "
          f"{text.count(chr(10))} lines in {OUT / 'fetta.v'} ({time.perf_counter() - t0:.0f} s)")

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
        return run_on_accelerator(load_config(args.config), args.sim)
    except FettaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run_on_accelerator(config, sim: str = "icarus") -> int:
    """``Y = X @ W`` of a small dense layer on the RTL of the whole accelerator."""
    from gen.commands.run import execute
    from gen.gemm import plan_gemm
    from gen.spec import load_spec
    from sim.golden import compute, random_inputs

    spec = load_spec("examples/dense_small.json")
    inputs = random_inputs(spec, 1)
    ref = compute(spec, inputs, phases=("fp",))["Y"]
    plan = plan_gemm(config, inputs["X"], inputs["core_0"])
    t0 = time.perf_counter()
    Ye, ce, _ = execute(config, plan, "emulator")
    Yr, cr, _ = execute(config, plan, sim)
    rel = float(np.max(np.abs(Yr - ref)) / np.max(np.abs(ref)))
    exact = bool(np.array_equal(Yr.view(np.uint32), Ye.view(np.uint32))) and cr == ce
    print(f"[run]     {spec.name} fp on {sim}: {cr} cycles, utilization {plan.macs / (cr * config.macs):.1%}, "
          f"max rel. error vs golden {rel:.2e}, emulator {'bit- and cycle-exact' if exact else 'DIFFERS'} "
          f"({time.perf_counter() - t0:.0f} s)")
    if not exact or rel > 2 ** -7:
        print("error: the accelerator's result is wrong", file=sys.stderr)
        return 1
    return 0


def rebuild_weight(spec, arrays) -> np.ndarray:
    """The full weight ``W: [I, O]`` from the cores, by one einsum over the cores only."""
    import opt_einsum

    from gen.network import core_operands, physical_modes

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


if __name__ == "__main__":
    raise SystemExit(main())
