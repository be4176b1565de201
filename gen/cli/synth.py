"""``fetta synth``: Yosys synthesis statistics (Table III shaped) and the ECP5 FPGA flow."""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed

from gen.cli.common import (add_config_arguments, add_json_argument, config_from_args, output_file, positive_float,
                            positive_int, print_json, write_text_atomic)
from gen.toolflow.synth import synth_block
import hdl
from gen.errors import ConfigError, FettaError
from gen.toolflow.fpga import format_nextpnr_options, fpga_block, format_fpga, parse_nextpnr_options
from gen.progress import interactive, progress
from gen.toolflow.synth import SPAWN, find_yosys, format_table3, table3, table3_plan

HELP = "Yosys synthesis statistics of the accelerator (Table III) or of --top BLOCK; --fpga adds ECP5 P&R"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_config_arguments(p)
    p.add_argument("--top", default=None, metavar="BLOCK",
                   help="synthesize one block (see `fetta verilog --list`); default: the Table III report")
    p.add_argument("--fpga", action="store_true",
                   help="also place and route on the ECP5 (yosys synth_ecp5 + nextpnr-ecp5): LUT/FF/DSP/BRAM, Fmax")
    p.add_argument("--fpga-target", default="ulx3s-85f", help="FPGA target (default: ulx3s-85f, LFE5U-85F)")
    p.add_argument("--fpga-only", action="store_true", help="with --top: only the FPGA flow")
    p.add_argument("--fpga-harness", action="store_true",
                   help="place every block inside the timing harness that registers its ports (default: only "
                        "blocks with more ports than the package has pins; the others sit on IO pads)")
    p.add_argument("--fpga-seed", type=positive_int, default=1, metavar="N",
                   help="nextpnr placement seed (default 1); Fmax varies by a few percent from seed to seed")
    p.add_argument("--nextpnr-opts", default="", metavar="OPTS",
                   help="more nextpnr-ecp5 arguments, one string split like a shell line, after the flow's own; "
                        "give it with '=' as it starts with a dash: --nextpnr-opts=\"--tmg-ripup "
                        "--placer-heap-timingweight 40\" (docs/synthesis.md, FPGA flow)")
    p.add_argument("--no-whole", action="store_true",
                   help="Table III from the blocks only: skip the whole accelerator (only a cross-check of the "
                        "sum of the rows once `controller` gives the Others row)")
    p.add_argument("--timeout", type=positive_float, default=None, metavar="S", help="limit of one tool run (seconds)")
    p.add_argument("-j", "--jobs", type=positive_int, default=2, help="blocks synthesized in parallel (default 2)")
    p.add_argument("--no-cache", action="store_true", help="redo runs even if an identical one is cached")
    p.add_argument("-o", "--out", metavar="REPORT.md", help="also write the report as Markdown (folder must exist)")
    add_json_argument(p)


def _one(name: str, config, timeout, cache):
    return synth_block(name, config, timeout=timeout, cache=cache)


def _fpga_options(args: argparse.Namespace) -> dict:
    """The keyword arguments of :func:`fpga_block` that the command line sets."""
    extra = parse_nextpnr_options(args.nextpnr_opts)
    return {"target": args.fpga_target, "timeout": args.timeout, "cache": not args.no_cache,
            "harness": args.fpga_harness or None, "seed": args.fpga_seed, "nextpnr_options": extra}


def _fpga_note(res) -> str:
    extra = f", nextpnr options: {format_nextpnr_options(res.nextpnr_options)}" if res.nextpnr_options else ""
    return f"nextpnr seed {res.seed}{extra}; constraint {res.constraint_mhz:g} MHz"


def main(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    fpga_kw = _fpga_options(args)
    output_file(args.out)
    find_yosys()  # fail early with the fix when Yosys is missing
    cache = not args.no_cache
    say = (lambda *a: print(*a, file=sys.stderr)) if not args.json else (lambda *a: None)
    if args.top is not None:
        if args.top not in hdl.TOPS:
            hdl.build_top(args.top, config)  # raises the one-line "unknown block" error
        out: dict = {}
        if not args.fpga_only:
            res = _one(args.top, config, args.timeout, cache)
            out.update(res.to_dict())
        if args.fpga or args.fpga_only:
            fres = fpga_block(args.top, config, **fpga_kw)
            out["fpga"] = fres.to_dict()
        if args.json:
            print_json(out)
        else:
            lines = []
            if "cells" in out:
                lines.append(f"{out['module']}: {out['cells']:,} cells, {out['flip_flops']:,} flip-flops, "
                             f"area {out['area']:,.0f} GE ({out['logic_area']:,.0f} logic + "
                             f"{out['sram_transistors'] / 4:,.0f} SRAM, {out['sram_bits']:,} SRAM bits in "
                             f"{len(out['memories'])} macros); yosys {out['yosys']}, {out['seconds']:.1f} s"
                             + (" (cached)" if out["cached"] else ""))
            if "fpga" in out:
                lines.append(format_fpga([fres]))
                lines.append(_fpga_note(fres))
            text = "\n".join(lines)
            print(text)
            if args.out:
                write_text_atomic(args.out, text + "\n")
        return 0

    # Table III report over every registered block standing for a row, plus the whole accelerator
    plan = table3_plan(config)
    whole = set() if args.no_whole else ({hdl.DEFAULT_TOP} & set(hdl.TOPS))
    names = sorted({w[0] for w in plan.values() if w} | whole)
    if not names:
        raise ConfigError("no block of Table III is registered in hdl.TOPS yet", field="--top")
    results, errors = {}, {}
    with progress(len(names), "synthesis", interactive(args.json)) as advance:
        with ProcessPoolExecutor(max_workers=min(args.jobs, len(names)), mp_context=SPAWN) as pool:
            futs = {pool.submit(_one, n, config, args.timeout, cache): n for n in names}
            for fut in as_completed(futs):
                n = futs[fut]
                try:
                    results[n] = fut.result()
                    say(f"  {n}: {results[n].cells:,} cells, {results[n].area_ge:,.0f} GE"
                        f" ({results[n].seconds:.0f} s{', cached' if results[n].cached else ''})")
                except FettaError as exc:
                    errors[n] = str(exc)
                    say(f"  {n}: FAILED {exc}")
                advance(1)
    total = results.get(hdl.DEFAULT_TOP)
    report = table3(config, results, plan, total)
    out = {"cells": report["total_cells"],
           "area": round(report["total_area"], 1), "area_unit": report["area_unit"],
           "blocks": {n: r.to_dict() for n, r in results.items()}, "errors": errors, "table3": report}
    fres = []
    if args.fpga:
        for n in names:
            try:
                fres.append(fpga_block(n, config, **fpga_kw))
            except FettaError as exc:
                errors[f"fpga:{n}"] = str(exc)
        out["fpga"] = [r.to_dict() for r in fres]
    if args.json:
        print_json(out)
    else:
        text = format_table3(report)
        if fres:
            text += "\n\n" + format_fpga(fres) + "\n" + _fpga_note(fres[0])
        if errors:
            text += "\n\nFailed: " + "; ".join(f"{k}: {v}" for k, v in errors.items())
        print(text)
        if args.out:
            write_text_atomic(args.out, text + "\n")
    return 1 if errors and not results else 0
