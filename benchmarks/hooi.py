"""Tucker decomposition by HOOI on the accelerator (issue 20, seed 004): cycles per iteration, split.

    python -m benchmarks hooi [--iters N] [--quick] [--no-docs]

For every tensor below (seed 004 VI-B's synthetic tensors: Gaussian core and factors of the given
multilinear rank plus Gaussian noise of half the signal variance; a 3D MRI-like volume, 128 x 128
x 32, of the same kind, since seed 004's perfusion sequence is not public) HOOI runs ``N``
iterations on the emulator of the default design (one warm-started Jacobi sweep per SVD, on the
host), and ``tensorly.decomposition.tucker`` the same iterations from the same initial factors on
this machine's CPU (float64, exact truncated SVD). Columns:

* cycles per iteration, end to end: the iteration's DMA jobs as the emulator (and the RTL) count them,
  DRAM at the configured bandwidth, split into compute and DRAM stalls; DRAM bytes against the floor (the tensor read by every chain that needs it,
  factors written, chain results and core read back once);
* utilization of the TTM chains (useful MACs / (cycles x 256)), end to end and of compute cycles;
* the SVD on the host, its cost on a 64-lane vector unit with divide / square root
  (:func:`gen.toolflow.jacobi.jacobi_cycles`), and the time per iteration at 100 MHz and 1 GHz
  (TTM cycles + that SVD estimate);
* explicit permutations (re-layouts through the host, transposes through DRAM, on-chip identity
  GEMMs): the goal is 0;
* fit after ``N`` iterations, ours and tensorly's, and tensorly's CPU seconds.

The table goes into ``docs/hooi.md`` between the ``hooi-benchmark`` markers.
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from pathlib import Path

import numpy as np

from benchmarks._docs import publish

DOC = Path(__file__).resolve().parent.parent / "docs" / "hooi.md"
BEGIN, END = "<!-- hooi-benchmark:begin -->", "<!-- hooi-benchmark:end -->"
CASES = [
    ("synthetic", (64, 64, 64), (16, 16, 16)),
    ("synthetic", (64, 64, 64), (32, 32, 32)),
    ("synthetic", (128, 128, 128), (16, 16, 16)),
    ("synthetic 4-way", (32, 32, 32, 32), (8, 8, 8, 8)),
    ("MRI-like volume", (128, 128, 32), (16, 16, 8)),
]
QUICK = CASES[:1]


def floor_bytes(shape, ranks, elem: int, half_bytes: int) -> int:
    """The DRAM bytes one iteration cannot do without (see the module docstring)."""
    t = math.prod(shape) * elem
    reads = 1 if t <= half_bytes // 2 else 2    # T on chip for the whole iteration, or read by 2 chains
    d = len(shape)
    ys = sum(math.prod(shape[n] if k == n else ranks[k] for k in range(d)) for n in range(d)) * elem
    factors = 2 * sum(s * r for s, r in zip(shape, ranks)) * elem
    return reads * t + ys + math.prod(ranks) * elem + factors


def case_row(name, shape, ranks, iters: int, config) -> str:
    from tensorly.decomposition import tucker

    from gen.toolflow.hooi import low_rank_tensor, orthonormal_factors, run_hooi
    from sim.bf16 import round_to_bf16_f32

    T = low_rank_tensor(shape, ranks, 0.5, seed=1)
    init = [round_to_bf16_f32(u.astype(np.float32)) for u in orthonormal_factors(shape, ranks, 0)]
    t0 = time.perf_counter()
    r = run_hooi(T, ranks, iters, config, init=init)
    emu_s = time.perf_counter() - t0
    s = r.summary(config)
    it = r.iterations[-1]
    Tq = round_to_bf16_f32(T).astype(np.float64)
    t0 = time.perf_counter()
    _, errors = tucker(Tq, rank=list(ranks), init=[u.astype(np.float64) for u in init], n_iter_max=iters,
                       tol=0, return_errors=True)
    tl_s = time.perf_counter() - t0
    tl_fit = 1 - float(errors[-1])
    half = config.unified_kb * 1024 // 2
    floor = floor_bytes(shape, ranks, config.elem_bits // 8, half)
    svd = s["svd"]["cycles"] // iters
    per = it.cycles + svd
    print(f"  {name} {shape} r{ranks}: {it.cycles} cycles/iter, {it.utilization:.1%}, fit {r.fits[-1]:.4f} "
          f"(tensorly {tl_fit:.4f}), emulator {emu_s:.0f} s", flush=True)
    return (f"| {name} | {'x'.join(map(str, shape))} | {','.join(map(str, ranks))} | "
            f"{s['ttms_per_iter']} / {s['ttms_without_reuse']} | {s['macs_per_iter'] / 1e6:.2f} M | "
            f"{it.cycles:,} | {it.compute_cycles:,} | {it.dram_stall_cycles:,} | "
            f"{it.dram_bytes / 2**20:.2f} ({floor / 2**20:.2f}) | "
            f"{it.utilization:.1%} / {s['macs_per_iter'] / (it.compute_cycles * config.macs):.1%} | "
            f"{svd:,} | {per / 100e6 * 1e3:.2f} | {per / 1e9 * 1e6:.0f} | {s['relayouts']} | "
            f"{r.fits[-1]:.4f} | {tl_fit:.4f} | {abs(r.fits[-1] - tl_fit) / tl_fit:.1e} | {tl_s:.2f} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks hooi", description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=8, help="HOOI iterations per tensor (default 8, seed 004)")
    ap.add_argument("--quick", action="store_true", help="the first tensor only")
    ap.add_argument("--no-docs", action="store_true", help="print the table only")
    args = ap.parse_args(argv)
    from gen.design.config import FettaConfig

    config = FettaConfig()
    rows = [case_row(n, s, r, args.iters, config) for n, s, r in (QUICK if args.quick else CASES)]
    table = "\n".join([
        f"Default design (16 CEs of 4x4, 512 KiB unified memory, DRAM {config.dram_gbps} GB/s at "
        f"{config.freq_mhz:g} MHz), {args.iters} HOOI iterations, emulator, DMA jobs (the hardware's count); tensorly "
        f"{__import__('tensorly').__version__} on {platform.processor() or platform.machine()} "
        f"({platform.python_version()}), this machine.",
        "",
        "| tensor | shape | ranks | TTMs / iter (reuse / plain) | MACs / iter | cycles / iter | compute | "
        "DRAM stall | DRAM MiB (floor) | utilization e2e / compute | SVD cycles / iter (est.) | "
        "ms / iter @100 MHz | µs / iter @1 GHz | re-layouts | fit | fit tensorly | rel. diff | tensorly s |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows])
    return publish(table, args.no_docs, DOC, BEGIN, END, "Tucker decomposition (HOOI) on the accelerator")


if __name__ == "__main__":
    raise SystemExit(main())
