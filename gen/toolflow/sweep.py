"""Parameter sweeps: elaborate, lint, synthesize and model every point of a grid.

A grid is a TOML file (see ``sweeps/default.toml`` and docs/sweeps.md)::

    [sweep]
    tops = ["ce"]                       # blocks of hdl.TOPS measured at every point
    layers = ["examples/atis_tt.json"]  # benchmark layers for cycles (analytical model)
    phase = "fp"
    lint = true
    timeout = 900                       # seconds, one tool run

    [base]                              # fields fixed for every point
    datatype = "int16"

    [grid]                              # the cartesian product of these lists
    ce_rows = [2, 4]
    ce_cols = [2, 4]

Every point is identified by a hash of its full configuration. Its result is written
to ``OUT/points/<id>.json`` as soon as it is known, and ``OUT/results.csv`` is rebuilt
from those files, so an interrupted sweep resumes where it stopped (finished points
are not redone; ``retry_failed`` redoes the failed ones). A point that fails (invalid
configuration, elaboration, lint or synthesis error, timeout) is recorded with its
error in ``status``/``error`` and the sweep goes on.

Points run in parallel in local processes (default) or on a Dask distributed cluster
(``executor="dask"``, ``scheduler="tcp://host:8786"``): the same :func:`evaluate_point`
runs on the workers, and the client writes the results.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import os
import re
import subprocess
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from gen.design.config import FettaConfig, read_toml
from gen.errors import ConfigError, FettaError
from gen.search import model_phase
from gen.workload.spec import load_spec
import hdl
from gen.toolflow import lint, synth
from gen.toolflow.synth import SPAWN, synthesize
from sim import toolchain

ROOT = Path(__file__).resolve().parents[2]
EXECUTORS = ("local", "dask")
#: the file-wide waivers of the lint (:mod:`gen.toolflow.lint`; part of the lint cache key)
LINT_WAIVERS = {w: toolchain.VERILATOR_WAIVERS[w] for w in toolchain.LINT_WAIVERS}


class SweepError(FettaError):
    kind = "sweep"


@dataclass
class Grid:
    """A parsed grid file."""

    tops: list[str]
    grid: dict[str, list[Any]]
    base: dict[str, Any] = field(default_factory=dict)
    layers: list[str] = field(default_factory=list)
    phase: str = "fp"
    lint: bool = True
    timeout: float | None = None
    blocks: dict[str, str] = field(default_factory=dict)  #: extra blocks, name -> "module:factory"
    source: str = "grid"

    def points(self) -> list[dict[str, Any]]:
        """The cartesian product of the axes; a key ``"a,b"`` is one axis of linked values."""
        keys = list(self.grid)
        out = []
        for combo in itertools.product(*(self.grid[k] for k in keys)):
            point: dict[str, Any] = {}
            for key, value in zip(keys, combo):
                names = [n.strip() for n in key.split(",")]
                point.update(zip(names, value) if len(names) > 1 else [(key, value)])
            out.append(point)
        return out

    @property
    def columns(self) -> list[str]:
        """Configuration fields the grid varies, in grid order."""
        return [n.strip() for k in self.grid for n in k.split(",")]

    def settings(self) -> dict[str, Any]:
        return {"tops": self.tops, "base": self.base, "layers": self.layers, "phase": self.phase,
                "lint": self.lint, "timeout": self.timeout, "blocks": self.blocks}


def load_grid(path: str | Path) -> Grid:
    """Read and check a grid TOML file (errors name the bad key)."""
    return parse_grid(read_toml(path, field="--grid"), source=str(path))


def parse_grid(data: Mapping[str, Any], *, source: str = "grid") -> Grid:
    unknown = set(data) - {"sweep", "base", "grid"}
    if unknown:
        raise ConfigError(f"unknown table in {source} (known: sweep, base, grid)", field=sorted(unknown)[0])
    sw = dict(data.get("sweep", {}))
    known_sw = {"tops", "layers", "phase", "lint", "timeout", "blocks"}
    for k in sw:
        if k not in known_sw:
            raise ConfigError(f"unknown key in [sweep] of {source} (known: {', '.join(sorted(known_sw))})",
                              field=f"sweep.{k}")
    tops = sw.get("tops", [])
    if not isinstance(tops, list) or not tops or not all(isinstance(t, str) for t in tops):
        raise ConfigError("must be a non-empty list of block names", field="sweep.tops")
    grid = dict(data.get("grid", {}))
    if not grid:
        raise ConfigError(f"{source} has no [grid] table", field="grid")
    names = set(FettaConfig.field_names())
    for k, v in grid.items():
        keys = [n.strip() for n in k.split(",")]
        for n in keys:
            if n not in names:
                raise ConfigError(f"not a configuration field (known: {', '.join(FettaConfig.field_names())})",
                                  field=f"grid.{n}")
        if not isinstance(v, list) or not v:
            raise ConfigError("must be a non-empty list of values", field=f"grid.{k}")
        if len(keys) > 1 and not all(isinstance(x, list) and len(x) == len(keys) for x in v):
            raise ConfigError(f"linked axis: every value must be a list of {len(keys)} values",
                              field=f"grid.{k}")
    base = dict(data.get("base", {}))
    for k in base:
        if k not in names:
            raise ConfigError("not a configuration field", field=f"base.{k}")
    layers = sw.get("layers", [])
    if not isinstance(layers, list) or not all(isinstance(x, str) for x in layers):
        raise ConfigError("must be a list of layer spec files", field="sweep.layers")
    timeout = sw.get("timeout")
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ConfigError(f"must be a positive number of seconds, got {timeout!r}", field="sweep.timeout")
    blocks = sw.get("blocks", {})
    if not isinstance(blocks, dict) or not all(isinstance(v, str) and ":" in v for v in blocks.values()):
        raise ConfigError('must map block names to "module:factory"', field="sweep.blocks")
    return Grid(tops=tops, grid=grid, base=base, layers=layers, phase=str(sw.get("phase", "fp")),
                lint=bool(sw.get("lint", True)), timeout=float(timeout) if timeout else None,
                blocks=dict(blocks), source=source)


def point_id(point: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    """Stable id of a point: hash of its overrides and of what is measured."""
    key = json.dumps({"point": dict(point), "base": settings["base"], "tops": settings["tops"],
                      "layers": settings["layers"], "phase": settings["phase"], "lint": settings["lint"]},
                     sort_keys=True, default=str)
    return hashlib.sha256(key.encode()).hexdigest()[:12]


# --------------------------------------------------------------------------- one point
def lint_design(rtlil_text: str, verilog: str, top: str, module: str, timeout: float | None = None) -> dict[str, Any]:
    """``fetta lint`` of one elaborated block (:func:`gen.toolflow.lint.lint_rtlil`: Verilator -Wall,
    dead logic, per-signal waivers) as counts: findings by kind, ``DEAD`` for dead cells (cached)."""
    key = hashlib.sha256("\0".join([rtlil_text, module, *sorted(LINT_WAIVERS), *toolchain.tool_versions("verilator")])
                         .encode()).hexdigest()[:20]
    cfile = synth.CACHE_DIR / f"lint-{module}-{key}.json"
    if cfile.exists():
        try:
            return json.loads(cfile.read_text())
        except ValueError:
            pass
    try:
        with tempfile.TemporaryDirectory(prefix="fetta-sweep-lint-") as tmp:
            found = lint.lint_rtlil(top, module, rtlil_text, verilog=verilog, workdir=Path(tmp),
                                    timeout=timeout)
    except toolchain.ToolchainError as exc:
        raise SweepError(str(exc), field="lint") from None
    kinds: dict[str, int] = {}
    for line in found.warnings:
        m = re.match(r"%Warning-(\w+):", line)
        if m:
            kinds[m.group(1)] = kinds.get(m.group(1), 0) + 1
    dead = sum(map(len, found.dead.values()))
    if dead:
        kinds["DEAD"] = dead
    errors = sum(line.startswith("%Error") for line in found.warnings)
    result = {"warnings": sum(kinds.values()), "errors": errors, "kinds": kinds, "ok": not errors}
    cfile.parent.mkdir(parents=True, exist_ok=True)
    tmpf = cfile.with_suffix(f".{os.getpid()}.tmp")
    tmpf.write_text(json.dumps(result))
    os.replace(tmpf, cfile)
    return result


def model_cycles(config: FettaConfig, layers: Iterable[str], phase: str) -> tuple[dict[str, int] | None, str | None]:
    """Cycles of each benchmark layer from the analytical model (:func:`gen.search.model_phase`).

    Returns (cycles by layer, None) or (None, reason) when there is nothing to model:
    a missing number is recorded as missing, never made up.
    """
    layers = list(layers)
    if not layers:
        return None, "no benchmark layers in the grid"
    out: dict[str, int] = {}
    for path in layers:
        spec = load_spec(ROOT / path if not Path(path).is_absolute() else path)
        out[Path(path).stem] = int(model_phase(spec, phase, config).cycles)
    return out, None


def _register_blocks(blocks: Mapping[str, str]) -> None:
    for name, where in blocks.items():
        hdl.TOPS.setdefault(name, where)


def evaluate_point(point: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """Measure one design point; never raises for a failure of the point itself.

    Returns a flat dict: ``id``, ``status`` (``ok``/``failed``), ``error``
    (``step: message``), the point's parameters, ``macs`` and for each top
    ``<top>.cells``, ``.area_ge``, ``.logic_ge``, ``.flip_flops``, ``.sram_bits``,
    ``.lint_warnings``, ``.elab_s``, ``.synth_s``; ``cycles.<layer>`` or ``cycles_error``.
    """
    t0 = time.perf_counter()
    row: dict[str, Any] = {"id": point_id(point, settings), "status": "ok", "error": "", **dict(point)}
    step = "config"
    try:
        _register_blocks(settings.get("blocks", {}))
        config = FettaConfig.from_mapping({**settings["base"], **dict(point)}, source="grid point")
        row["macs"] = config.macs
        timeout = settings.get("timeout")
        for top in settings["tops"]:
            step = f"elaborate {top}"
            te = time.perf_counter()
            rtlil_text = hdl.to_rtlil(top, config)
            verilog = hdl.rtlil_to_verilog(rtlil_text)
            row[f"{top}.elab_s"] = round(time.perf_counter() - te, 2)
            module = hdl.module_name(top)
            if settings.get("lint", True):
                step = f"lint {top}"
                lint = lint_design(rtlil_text, verilog, top, module, timeout)
                row[f"{top}.lint_warnings"] = lint["warnings"]
                row[f"{top}.lint_kinds"] = ";".join(f"{k}={v}" for k, v in sorted(lint["kinds"].items()))
                if not lint["ok"]:
                    raise SweepError(f"{lint['errors']} lint errors", field="lint")
            step = f"synth {top}"
            res = synthesize(verilog, module, top=top, timeout=timeout)
            row.update({f"{top}.cells": res.cells, f"{top}.area_ge": round(res.area_ge, 1),
                        f"{top}.logic_ge": round(res.logic_ge, 1), f"{top}.flip_flops": res.flip_flops,
                        f"{top}.sram_bits": res.sram_bits, f"{top}.synth_s": round(res.seconds, 2)})
        step = "cycles"
        cycles, why = model_cycles(config, settings.get("layers", []), settings.get("phase", "fp"))
        if cycles is None:
            row["cycles_error"] = why
        else:
            for k, v in cycles.items():
                row[f"cycles.{k}"] = v
    except FettaError as exc:
        row.update(status="failed", error=f"{step}: {exc}")
    except subprocess.TimeoutExpired as exc:
        row.update(status="failed", error=f"{step}: timed out after {exc.timeout:.0f} s")
    except Exception as exc:  # an unexpected failure of one point must not stop the sweep
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        row.update(status="failed", error=f"{step}: {type(exc).__name__}: {exc} ({Path(tb.filename).name}:{tb.lineno})")
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


# --------------------------------------------------------------------------- the sweep
def _load_done(points_dir: Path) -> dict[str, dict[str, Any]]:
    done: dict[str, dict[str, Any]] = {}
    if points_dir.is_dir():
        for f in points_dir.glob("*.json"):
            try:
                row = json.loads(f.read_text())
            except ValueError:
                continue  # a torn write: the point is redone
            done[row["id"]] = row
    return done


def _save(points_dir: Path, row: Mapping[str, Any]) -> None:
    points_dir.mkdir(parents=True, exist_ok=True)
    tmp = points_dir / f".{row['id']}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(row, default=str))
    os.replace(tmp, points_dir / f"{row['id']}.json")


def write_csv(rows: list[Mapping[str, Any]], path: Path, grid_keys: list[str]) -> None:
    """All rows in one CSV: fixed columns first, then every measured column (sorted)."""
    lead = ["id", "status", *grid_keys, "macs"]
    rest = sorted({k for r in rows for k in r} - set(lead) - {"error", "seconds"})
    cols = lead + rest + ["seconds", "error"]
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in sorted(rows, key=lambda r: [str(r.get(k)) for k in grid_keys]):
            w.writerow(r)
    os.replace(tmp, path)


def plot(rows: list[Mapping[str, Any]], out: Path, tops: list[str]) -> list[Path]:
    """PNG plots of the successful points: area and cells against MACs per block, cycles against area."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r.get("status") == "ok"]
    made: list[Path] = []
    for top in tops:
        pts = [r for r in ok if r.get(f"{top}.area_ge") is not None]
        if not pts:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        groups: dict[str, list[Mapping[str, Any]]] = {}
        for r in pts:
            groups.setdefault(str(r.get("datatype", "")) or "config", []).append(r)
        for label, rs in sorted(groups.items()):
            axes[0].scatter([r["macs"] for r in rs], [r[f"{top}.area_ge"] for r in rs], label=label)
            axes[1].scatter([r["macs"] for r in rs], [r[f"{top}.area_ge"] / max(1, r["macs"]) for r in rs],
                            label=label)
        axes[0].set(xlabel="MACs of the configuration", ylabel="area (GE)", title=f"{top}: area",
                    xscale="log", yscale="log")
        axes[1].set(xlabel="MACs of the configuration", ylabel="area per MAC (GE)", title=f"{top}: area per MAC",
                    xscale="log")
        for ax in axes:
            ax.grid(True, alpha=0.3)
            ax.legend(title="datatype")
        fig.tight_layout()
        path = out / f"area_{top}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        made.append(path)
        ckeys = sorted({k for r in pts for k in r if k.startswith("cycles.")})
        if ckeys:
            fig, ax = plt.subplots(figsize=(6, 4))
            for k in ckeys:
                cp = [r for r in pts if r.get(k) is not None]
                ax.scatter([r[f"{top}.area_ge"] for r in cp], [r[k] for r in cp], label=k.split(".", 1)[1])
            ax.set(xlabel=f"{top} area (GE)", ylabel="cycles", title="cycles vs area", xscale="log", yscale="log")
            ax.grid(True, alpha=0.3)
            ax.legend()
            fig.tight_layout()
            path = out / f"cycles_vs_area_{top}.png"
            fig.savefig(path, dpi=100)
            plt.close(fig)
            made.append(path)
    return made


@dataclass
class SweepSummary:
    out: Path
    csv: Path
    plots: list[Path]
    total: int
    ran: int
    skipped: int
    ok: int
    failed: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"out": str(self.out), "csv": str(self.csv), "plots": [str(p) for p in self.plots],
                "points": self.total, "ran": self.ran, "skipped": self.skipped, "ok": self.ok,
                "failed": self.failed, "seconds": round(self.seconds, 1)}


def run_sweep(grid: Grid, out: str | Path, *, executor: str = "local", scheduler: str | None = None,
              jobs: int | None = None, retry_failed: bool = False,
              on_done: Callable[[Mapping[str, Any]], None] | None = None) -> SweepSummary:
    """Run (or resume) a sweep; results in ``out/results.csv``, ``out/points/``, ``out/*.png``."""
    if executor not in EXECUTORS:
        raise ConfigError(f"must be one of {', '.join(EXECUTORS)}, got {executor!r}", field="--executor")
    if executor == "dask" and not scheduler:
        raise ConfigError("--executor dask needs --scheduler ADDRESS (tcp://host:8786)", field="--scheduler")
    if jobs is not None and jobs < 1:
        raise ConfigError(f"must be >= 1, got {jobs}", field="--jobs")
    t0 = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    points_dir = out / "points"
    settings = grid.settings()
    (out / "grid.json").write_text(json.dumps({"source": grid.source, **settings, "grid": grid.grid}, indent=1))
    points = grid.points()
    done = _load_done(points_dir)
    todo = []
    for p in points:
        prev = done.get(point_id(p, settings))
        if prev is not None and (prev["status"] == "ok" or not retry_failed):
            continue
        todo.append(p)
    results = {point_id(p, settings): done[point_id(p, settings)] for p in points if point_id(p, settings) in done}
    grid_keys = grid.columns
    csv_path = out / "results.csv"

    def record(row: Mapping[str, Any]) -> None:
        results[row["id"]] = dict(row)
        _save(points_dir, row)
        write_csv(list(results.values()), csv_path, grid_keys)
        if on_done:
            on_done(row)

    if todo:
        if executor == "local":
            workers = jobs or os.cpu_count() or 1
            with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=SPAWN) as pool:
                futs = [pool.submit(evaluate_point, p, settings) for p in todo]
                for fut in as_completed(futs):
                    record(fut.result())
        else:
            from distributed import Client
            from distributed import as_completed as dask_completed

            try:
                client = Client(scheduler, timeout="30s")
            except (OSError, TimeoutError) as exc:
                raise SweepError(f"cannot reach the Dask scheduler {scheduler}: {exc}", field="--scheduler") from None
            try:
                futs = [client.submit(evaluate_point, p, settings, pure=False) for p in todo]
                for fut in dask_completed(futs):
                    record(fut.result())
            finally:
                client.close()
    write_csv(list(results.values()), csv_path, grid_keys)
    plots = plot(list(results.values()), out, grid.tops)
    rows = [results[point_id(p, settings)] for p in points if point_id(p, settings) in results]
    return SweepSummary(out=out, csv=csv_path, plots=plots, total=len(points), ran=len(todo),
                        skipped=len(points) - len(todo), ok=sum(r["status"] == "ok" for r in rows),
                        failed=sum(r["status"] != "ok" for r in rows), seconds=time.perf_counter() - t0)
