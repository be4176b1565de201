"""``fetta sweep``: parameter sweeps over a grid, locally or on a Dask cluster."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from gen.cli.common import add_json_argument, output_dir, positive_int, print_json
from gen.errors import ConfigError, read_text_file
from gen.progress import interactive, progress
from gen.toolflow.sweep import load_grid, point_id, run_sweep
from gen.toolflow.sweep import _load_done

HELP = "parameter sweep (elaborate, lint, synthesize, model) over a grid TOML; CSV + PNG plots"
DEFAULT_OUT = "build/sweep"
#: most points one grid may make (the cartesian product of its axes)
MAX_POINTS = 100_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grid", required=True, metavar="G.toml", help="grid file (see sweeps/default.toml)")
    p.add_argument("--executor", default="local", choices=("local", "dask"),
                   help="local processes (default) or a Dask distributed cluster")
    p.add_argument("--scheduler", metavar="ADDR", help="Dask scheduler address, e.g. tcp://10.0.0.1:8786")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help=f"output folder, created if missing; its parent must exist (default {DEFAULT_OUT})")
    p.add_argument("-j", "--jobs", type=positive_int, default=None, help="local worker processes (default: CPU count)")
    p.add_argument("--retry-failed", action="store_true", help="redo points that failed in an earlier run")
    add_json_argument(p)


def main(args: argparse.Namespace) -> int:
    read_text_file(args.grid, field="--grid", error=ConfigError)  # readable UTF-8 text, or one line
    try:
        grid = load_grid(args.grid)
    except RecursionError:
        raise ConfigError("not a grid: TOML nested too deeply", field="--grid") from None
    output_dir(args.out, create_parents=args.out == DEFAULT_OUT)
    count = math.prod(len(v) for v in grid.grid.values())
    if count > MAX_POINTS:
        raise ConfigError(f"the axes make {count} points, more than {MAX_POINTS}; split the sweep", field="grid")
    settings = grid.settings()
    total = len(grid.points())
    with progress(total, "sweep", interactive(args.json)) as advance:
        # points already finished count as done from the start
        done = _load_done(Path(args.out) / "points")
        advance(sum(1 for p in grid.points() if (r := done.get(point_id(p, settings)))
                    and (r["status"] == "ok" or not args.retry_failed)))

        def on_done(row):
            advance(1)
            if not args.json and not sys.stderr.isatty() and row["status"] != "ok":
                print(f"point {row['id']} failed: {row['error']}", file=sys.stderr)

        summary = run_sweep(grid, args.out, executor=args.executor, scheduler=args.scheduler, jobs=args.jobs,
                            retry_failed=args.retry_failed, on_done=on_done)
    if args.json:
        print_json(summary.to_dict())
    else:
        s = summary
        print(f"{s.total} points: {s.ok} ok, {s.failed} failed ({s.ran} run now, {s.skipped} already done) "
              f"in {s.seconds:.0f} s -> {s.csv}" + (f", plots: {', '.join(p.name for p in s.plots)}" if s.plots else ""))
    return 0
