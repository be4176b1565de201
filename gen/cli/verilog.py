"""``fetta verilog``: elaborate the accelerator (or one block) to Verilog."""

from __future__ import annotations

import argparse
import time

from gen.cli.common import (add_config_arguments, add_json_argument, config_from_args, output_file, print_json,
                            write_text_atomic)
import hdl
from gen.errors import UsageError
from gen.toolflow.core import vlnv, write_core

HELP = "elaborate the accelerator (or --top BLOCK) to Verilog"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_config_arguments(p)
    p.add_argument("--top", default=None, metavar="BLOCK",
                   help="block to emit (see --list); default: the whole accelerator")
    p.add_argument("-o", "--out", metavar="OUT.v", help="output Verilog file (its folder must exist)")
    p.add_argument("--core", metavar="OUT.core",
                   help="also write a FuseSoC core description (CAPI=2; targets default, lint, synth) naming the "
                        "Verilog (which must be in the core's folder or below it), with the FPGA constraints copied "
                        "beside it (gen/toolflow/core.py)")
    p.add_argument("--list", action="store_true", help="list the blocks that can be emitted")
    add_json_argument(p)


def main(args: argparse.Namespace) -> int:
    if args.list:
        if args.json:
            print_json({"tops": hdl.TOPS})
        else:
            for name, where in hdl.TOPS.items():
                print(f"{name:12s} {where}")
        return 0
    if args.out is None:
        raise UsageError("an output file is required (-o OUT.v)", field="--out")
    config = config_from_args(args)
    out = output_file(args.out)
    core = output_file(args.core, "--core")
    if core is not None and core.suffix != ".core":
        raise UsageError(f"{args.core}: FuseSoC finds core descriptions by the suffix .core; name it OUT.core",
                         field="--core")
    if core is not None and not out.resolve().is_relative_to(core.resolve().parent):
        raise UsageError(f"{args.out} is not in the folder of {args.core} or below it (FuseSoC takes a core's "
                         "files from there)", field="--core")
    top = args.top or hdl.DEFAULT_TOP
    t0 = time.perf_counter()
    text = hdl.to_verilog(top, config)
    seconds = time.perf_counter() - t0
    write_text_atomic(out, text)
    info = {"top": top, "module": hdl.module_name(top), "out": str(out), "lines": text.count("\n"),
            "seconds": round(seconds, 3), "config": config.to_dict()}
    if core is not None:
        write_core(out, info["module"], core, info["config"])
        info["core"], info["vlnv"] = str(core), vlnv(info["module"])
    if args.json:
        print_json(info)
    else:
        print(f"{info['module']}: {info['lines']} lines of Verilog in {out} ({seconds:.1f} s)")
        if core is not None:
            print(f"FuseSoC core {info['vlnv']} in {core} (targets default, lint, synth)")
    return 0
