"""Fmax benchmark: every block placed and routed on the ECP5, with its critical path.

    python -m benchmarks fmax [--blocks pe ce ...] [--seeds 1 2 3] [--nextpnr-opts OPTS] [--no-docs]

Each block of ``hdl.TOPS`` is synthesized with Yosys ``synth_ecp5`` and placed and routed by
nextpnr-ecp5 (LFE5U-85F, CABGA381, speed 6, seed 1 or each of ``--seeds``; :mod:`gen.toolflow.fpga`, the flow of
``make fpga``). The arithmetic blocks use the default configuration; the networks, the units,
the controller and the whole accelerator use ``configs/small.toml`` (the default ones do not fit
the 85F or take hours to route). Every block is placed out of context inside a harness that
registers every port (:func:`gen.toolflow.fpga.timing_harness`: the registers its neighbours in the
accelerator would be), also a block whose ports would fit the package's pins (the PE): on IO pads
around the device they would pull its registers apart. The table goes into ``docs/synthesis.md``
between the ``fmax-benchmark`` markers.
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

from benchmarks._docs import publish

DOC = Path(__file__).resolve().parent.parent / "docs" / "synthesis.md"
BEGIN, END = "<!-- fmax-benchmark:begin -->", "<!-- fmax-benchmark:end -->"
SMALL = Path(__file__).resolve().parent.parent / "configs" / "small.toml"
#: the pipelined arithmetic settings measured beside the default one-cycle multiplier and adders
PIPE3 = {"mul_latency": 2, "add_latency": 3}
PIPE7 = {"mul_latency": 2, "add_latency": 7}
#: the deepest setting (the multiplier's three stages)
PIPE37 = {"mul_latency": 3, "add_latency": 7}
#: rows: (block, configuration "default" or "small", ``--set`` overrides). The vector unit's lanes
#: are identical and parallel, so 4 of them have the critical path of 64.
ROWS = [("pe", "default", {}), ("pe", "default", PIPE3), ("pe", "default", PIPE7), ("pe", "default", PIPE37),
        ("ce", "default", {}), ("ce", "default", PIPE3), ("ce", "default", PIPE7),
        ("ce", "default", PIPE37),
        ("dist_net", "small", {}), ("red_net", "small", {}), ("red_net", "small", PIPE3),
        ("red_net", "small", PIPE7),
        ("vector_unit", "small", {"vector_lanes": 4}), ("vector_unit", "small", {"vector_lanes": 4, **PIPE7}),
        ("accum_unit", "small", {}), ("accum_unit", "small", PIPE7), ("controller", "small", {}),
        ("fetta", "small", {})]
BLOCKS = sorted({b for b, _, _ in ROWS})


def main(argv=None) -> int:
    from gen.design.config import FettaConfig, load_config
    from gen.errors import UsageError
    from gen.toolflow.fpga import fpga_block, parse_nextpnr_options

    ap = argparse.ArgumentParser(prog="python -m benchmarks fmax", description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", nargs="+", default=BLOCKS, choices=BLOCKS)
    ap.add_argument("--no-docs", action="store_true", help="print the table only")
    ap.add_argument("--seeds", nargs="+", type=int, default=[1], metavar="SEED",
                    help="nextpnr placement seeds per row (default 1); with several the row gives the median "
                         "Fmax, the range and the median run's critical path (placement alone moves a "
                         "block's Fmax by 5-10 %%)")
    ap.add_argument("--nextpnr-opts", default="", metavar="OPTS",
                    help="more nextpnr arguments in one string, e.g. \"--tmg-ripup --placer-heap-timingweight 40\" "
                         "(docs/synthesis.md, \"FPGA flow (ECP5)\": they helped the CE and not every block)")
    args = ap.parse_args(argv)
    try:
        extra = parse_nextpnr_options(args.nextpnr_opts)
    except UsageError as exc:
        ap.error(str(exc))  # exit 2 with the usage line, as for any other bad option
    rows = []
    for name, which, overrides in ROWS:
        if name not in args.blocks:
            continue
        config = FettaConfig() if which == "default" else load_config(SMALL)
        if overrides:
            config = config.replace(**overrides)
            which += ", " + ", ".join(f"{k}={v}" for k, v in overrides.items())
        print(f"fmax: {name} ({which}) ...", flush=True)
        runs = [fpga_block(name, config, harness=True, seed=seed, nextpnr_options=extra)
                for seed in args.seeds]
        r, fmax = _median_run(runs)
        rows.append(f"| `{name}` | {which} | {r.mode} | {r.lut4:,} | {r.carry:,} | {r.flip_flops:,} | {r.dsp} | "
                    f"{r.bram} | {fmax} | {r.critical_path or '—'} | {sum(x.seconds for x in runs):.0f} s"
                    f"{' (cached)' if all(x.cached for x in runs) else ''} |")
    table = "\n".join([
        f"nextpnr-ecp5 (yowasp){' ' + ' '.join(extra) if extra else ''}, LFE5U-85F speed 6, "
        f"{_seeds_text(args.seeds)}, constraint 100 MHz; "
        f"{platform.machine()}, "
        "shared 2-core machine. `default`: bf16, 4x4 PEs; `small`: `configs/small.toml` (4 CEs of 2x2, "
        "4 ports / banks, 2 lanes, 16 KiB unified, 8 KiB accumulation, 8 vector lanes). Without `mul_latency` / `add_latency` "
        "the block has the default one-cycle multiplier and adders. Every block is placed out of context inside "
        "a harness that registers every port (`gen.toolflow.fpga.timing_harness`), so paths from its inputs and "
        "to its outputs are timed; its LUT4 / CCU2C / FF / DSP / BRAM columns are the block's own.",
        "",
        "| block | configuration | mode | LUT4 | CCU2C | FF | DSP | BRAM | Fmax (MHz) | critical path | run |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|",
        *rows,
    ])
    return publish(table, args.no_docs, DOC, BEGIN, END, "Synthesis")


def _median_run(runs):
    """The run of median Fmax (the lower middle one of an even count) and the Fmax cell: its value,
    with the range over the seeds when there are several (``—`` for a block with no clocked path)."""
    timed = sorted((r for r in runs if r.fmax is not None), key=lambda r: r.fmax)
    if not timed:
        return runs[0], "—"
    mid = timed[(len(timed) - 1) // 2]
    if len(runs) == 1:
        return mid, f"{mid.fmax:.1f}"
    return mid, f"{mid.fmax:.1f} ({timed[0].fmax:.1f}-{timed[-1].fmax:.1f})"


def _seeds_text(seeds) -> str:
    """The table header's words for the seeds of its rows."""
    return f"seed {seeds[0]}" if len(seeds) == 1 else (
        f"seeds {', '.join(map(str, seeds))} (median Fmax, range in brackets, the median run's path)")
