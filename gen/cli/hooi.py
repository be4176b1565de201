"""``fetta hooi``: Tucker decomposition of a 3rd- or 4th-order tensor by HOOI on the accelerator (seed 004).

Every TTM chain runs on the TCU as compiled contractions (no permutation: the compiler picks layouts
and dataflows, and a tensor keeps the lane of its DRAM image); each factor update is the one-sided
Jacobi SVD with warm start on the host (:mod:`gen.toolflow.jacobi` says why and what it would cost on
a vector unit). ``--tensor T.npz`` holds key ``T`` (float16 / float32 / float64, finite); the
accelerator sees it rounded to bfloat16 (the JSON reports that rounding). See ``docs/hooi.md``.
"""

from __future__ import annotations

import argparse
import math
import time
import zipfile

import numpy as np

from gen.cli.common import (add_config_arguments, add_json_argument, add_max_elements_argument, add_seed_argument,
                            config_from_args, output_file, positive_int, print_json)
from gen.compiler.dma import lower_dma
from gen.errors import ConfigError, InputError, UsageError
from gen.progress import progress
from gen.toolflow.hooi import compile_hooi, run_hooi
from gen.toolflow.run import SIMS
from gen.workload.hooi import ORDERS, check_ranks

HELP = "Tucker decomposition (HOOI, seed 004) of a tensor on the simulated accelerator"


def ranks_arg(text: str) -> tuple[int, ...]:
    """``argparse`` type: ``r1,r2,..`` positive integers."""
    try:
        out = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if any(r < 1 for r in out):
        raise argparse.ArgumentTypeError(f"ranks must be positive, got {text!r}")
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tensor", required=True, metavar="T.npz", help="npz with key T (order 3 or 4)")
    p.add_argument("--ranks", required=True, type=ranks_arg, metavar="r1,r2,..", help="multilinear rank, one per mode")
    p.add_argument("--iters", type=positive_int, default=8, metavar="N",
                   help="HOOI iterations (default 8, seed 004's estimate for convergence)")
    p.add_argument("--jacobi-rounds", type=positive_int, default=1, metavar="K",
                   help="Jacobi sweeps per factor update (default 1: enough with the warm start)")
    p.add_argument("--cold", action="store_true",
                   help="start every Jacobi SVD from the identity instead of the previous factor (seed 004 Alg. 2)")
    add_seed_argument(p)
    p.add_argument("--sim", default="emulator", choices=SIMS,
                   help="execution engine (default emulator; icarus / verilator replay every run on the RTL)")
    p.add_argument("--out", metavar="F.npz", help="write core and U_0 .. U_{d-1} (folder must exist)")
    add_max_elements_argument(p)
    add_config_arguments(p)
    add_json_argument(p)


def read_tensor(path: str, max_elements: int) -> np.ndarray:
    """Key ``T`` of ``path``: order 3 or 4, float, finite, at most ``max_elements`` values (checked from
    the header before the data are read)."""
    if not path.strip():
        raise UsageError("empty file name", field="--tensor")
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise UsageError(f"file not found: {path}", field="--tensor") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory, not a file", field="--tensor") from None
    except zipfile.BadZipFile:
        raise UsageError(f"{path} is not an npz archive (numpy.savez writes them)", field="--tensor") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}", field="--tensor") from None
    with zf:
        names = {n[:-4] if n.endswith(".npy") else n: n for n in zf.namelist()}
        if "T" not in names:
            raise InputError(f"{path} has no key T (keys: {', '.join(sorted(names)) or 'none'})", field="T")
        try:
            with zf.open(names["T"]) as f:
                version = np.lib.format.read_magic(f)
                read = {(1, 0): np.lib.format.read_array_header_1_0,
                        (2, 0): np.lib.format.read_array_header_2_0}.get(version)
                if read is None:
                    raise InputError(f"npy format version {version} is not supported (1.0 and 2.0 are)", field="T")
                shape, fortran, dtype = read(f)
                if dtype.kind != "f" or dtype.itemsize not in (2, 4, 8):
                    raise InputError(f"dtype {dtype} is not accepted (float16, float32 or float64)", field="T")
                if len(shape) not in ORDERS:
                    raise InputError(f"HOOI runs on tensors of order 3 or 4, got shape {list(shape)}", field="T")
                if math.prod(shape) > max_elements:
                    raise InputError(f"{math.prod(shape)} elements exceed --max-elements {max_elements} "
                                     f"(the host store and the DRAM model hold the tensor)", field="T")
                if min(shape) < 1:
                    raise InputError(f"empty tensor, shape {list(shape)}", field="T")
                data = f.read(math.prod(shape) * dtype.itemsize)
        except InputError:
            raise
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
            raise InputError(f"not a readable npy array: {exc}", field="T") from None
    if len(data) != math.prod(shape) * dtype.itemsize:
        raise InputError(f"truncated: {len(data)} of {math.prod(shape) * dtype.itemsize} bytes", field="T")
    T = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    bad = ~np.isfinite(T)
    if bad.any():
        idx = [int(i) for i in np.argwhere(bad)[0]]
        raise InputError(f"value {T[tuple(idx)]} at index {idx} is not finite ({int(bad.sum())} of {T.size})",
                         field="T")
    if not np.any(T):
        raise InputError("the tensor is all zeros: its fit is undefined", field="T")
    return np.ascontiguousarray(T, dtype=np.float32)


def main(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if config.datatype != "bf16":
        raise ConfigError("fetta hooi runs in bf16; int16 is for dataflow bring-up", field="datatype")
    output_file(args.out)
    T = read_tensor(args.tensor, args.max_elements)
    check_ranks(T.shape, args.ranks)
    t0 = time.perf_counter()
    nets, prog = compile_hooi(T.shape, args.ranks, config)
    dprog = lower_dma(prog, config)
    with progress(args.iters * len(dprog.jobs), f"HOOI on {args.sim}", enabled=not args.json) as bar:
        r = run_hooi(T, args.ranks, args.iters, config, seed=args.seed, sim=args.sim, sweeps=args.jacobi_rounds,
                     warm=not args.cold, progress=bar, compiled=(nets, prog), lowered=dprog)
    seconds = time.perf_counter() - t0
    if args.out:
        np.savez(args.out, core=r.core, **{f"U_{k}": u for k, u in enumerate(r.factors)})
    result = r.summary(config)
    result = {"tensor": args.tensor, "shape": list(T.shape), "ranks": list(args.ranks), "iters": args.iters,
              "sim": args.sim, "seed": args.seed, **result, "seconds": round(seconds, 3)}
    if args.json:
        print_json(result)
    else:
        print(f"HOOI {'x'.join(map(str, T.shape))} rank {','.join(map(str, args.ranks))} on {args.sim}: fit "
              f"{result['fit'][-1]:.4f} after {args.iters} iterations, {result['cycles']} cycles "
              f"({result['cycles_per_iter']} per iteration, utilization {result['utilization']:.1%}), "
              f"{result['relayouts']} re-layouts ({seconds:.1f} s)")
    return 0
