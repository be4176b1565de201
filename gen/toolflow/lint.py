"""``fetta lint`` (``make lint``): Verilator ``-Wall`` and a dead-logic check on the emitted blocks.

Every block of :data:`hdl.TOPS` (or those named with ``--top``, repeatable) is elaborated once for
the configuration (``--config`` / ``--set``) and checked twice:

1. **Verilator** ``--lint-only -Wall`` (the pinned 5.048, :func:`sim.toolchain.sim_env`) on the
   emitted Verilog, written to ``build/lint/fetta_<name>.v``. The warnings in :data:`WAIVERS` are
   conventions of the emitter, not of a signal (how Amaranth declares registers, sizes
   intermediates and names modules) and are switched off for the whole file.
2. **Dead logic**: Yosys ``proc`` on the block's RTLIL, then every cell whose outputs reach no
   port and no other live cell is reported with the Python source line that built it
   (:func:`dead_logic`). A register or gate that nothing reads is a defect of the generator.

``UNUSEDSIGNAL`` is not waived globally. Amaranth names every ``Signal`` in the netlist, and a
signal whose value is read under another name (a port alias of a submodule, an exactly sized
intermediate whose top bits a slice drops) draws an ``UNUSEDSIGNAL`` warning although no logic is
unused. When the dead-logic check of the block is clean, each such warning on a non-port signal is
waived **for that signal** (file and line) in ``build/lint/fetta_<name>.vlt``, a Verilator
configuration file with the reason, so ``verilator --lint-only -Wall fetta_<name>.vlt
fetta_<name>.v`` reproduces the clean result. An unused input port (except the ``rst`` that
Amaranth gives a module holding only memory arrays), or any unused name in a block with dead logic,
stays a warning. Cells that Amaranth's own FSM code builds (a state comparison per state, for
``ongoing()``) are not reported: they come from the library, not from this project's source. Exit status 1 on any warning or dead cell.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import hdl
from gen.toolflow.synth import find_yosys
from sim.toolchain import LINT_WAIVERS, VERILATOR_WAIVERS, require, sim_env

#: the file-wide waivers of the lint, with their reasons (the table is :data:`sim.toolchain.VERILATOR_WAIVERS`)
WAIVERS: dict[str, str] = {w: VERILATOR_WAIVERS[w] for w in LINT_WAIVERS}

#: why an ``UNUSEDSIGNAL`` warning on a non-port signal of a block without dead logic is waived
ALIAS_REASON = ("Amaranth name of a value that is read under another name (no cell of this block is "
                "unused: dead-logic check clean)")

#: why an unused ``rst`` input is waived
RST_REASON = ("Amaranth gives every module of the sync domain its reset; this module holds only "
              "reset-less state (memory arrays)")

ROOT = Path(__file__).resolve().parents[2]
LINT_DIR = ROOT / "build" / "lint"


def lint_verilog(text: str, module: str, *, workdir: Path | None = None,
                 waivers: Iterable[str] | None = None, timeout: float | None = None) -> list[str]:
    """Lint Verilog ``text`` (top ``module``) with ``verilator --lint-only -Wall`` minus ``waivers``
    (default :data:`WAIVERS`); return the ``%Warning`` / ``%Error`` lines. The one Verilator run of
    the project's lint: ``fetta lint`` and the sweep's lint column both call it. The source is
    written to ``workdir`` (kept for the user to look at) or to a temporary folder."""
    require("verilator")
    with tempfile.TemporaryDirectory(prefix="fetta-lint-") as tmp:
        wd = Path(tmp) if workdir is None else workdir
        wd.mkdir(parents=True, exist_ok=True)
        src = wd / f"{module}.v"
        src.write_text(text)
        waivers = WAIVERS if waivers is None else waivers
        cmd = ["verilator", "--lint-only", "-Wall", "-Wno-fatal", "--top-module", module,
               *[f"-Wno-{w}" for w in waivers], str(src)]
        proc = subprocess.run(cmd, env=sim_env(), capture_output=True, text=True, timeout=timeout, cwd=wd)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith(("%Warning", "%Error"))]
    if proc.returncode != 0 and not lines:
        lines = [f"%Error: verilator exited with {proc.returncode}: {proc.stderr.strip()[-500:]}"]
    return lines


# --------------------------------------------------------------------------- dead logic
def _dead_cells(module: dict) -> list[tuple[str, str]]:
    """``(name, src)`` of the cells of one Yosys JSON module whose outputs nothing reads (iterated:
    a cell that only feeds dead cells is dead too). Submodule instances are checked in their own
    module (their unread outputs are not ports there: Amaranth emits only the ports that are used)."""
    readers: Counter = Counter()
    for port in module["ports"].values():
        if port["direction"] != "input":
            readers.update(b for b in port["bits"] if isinstance(b, int))
    cells = module["cells"]

    def split(cell):
        dirs = cell.get("port_directions", {})
        ins, outs = [], []
        for port, bits in cell["connections"].items():
            (outs if dirs.get(port, "input") == "output" else ins).extend(b for b in bits if isinstance(b, int))
        return ins, outs

    io = {name: split(cell) for name, cell in cells.items()}
    for ins, _ in io.values():
        readers.update(ins)
    dead: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, (ins, outs) in io.items():
            if name in dead or not outs or not cells[name]["type"].startswith("$"):
                continue
            if all(readers[b] == 0 for b in outs):
                dead.add(name)
                readers.subtract(ins)
                changed = True
    names: dict[int, str] = {}
    for net, info in sorted(module["netnames"].items(), key=lambda kv: (kv[1].get("hide_name", 0), kv[0])):
        for b in info["bits"]:
            if isinstance(b, int):
                names.setdefault(b, net)
    found = []
    for name in dead:
        outs = io[name][1]
        src = cells[name]["attributes"].get("src", "").split("|")[0]
        found.append((names.get(outs[0], name), src))
    return sorted(found)


#: source file of the state comparisons Amaranth's ``m.FSM`` builds for every state
_FSM_SRC = "amaranth/hdl/_dsl.py"


def dead_logic(rtlil_text: str, *, timeout: float | None = None) -> dict[str, list[tuple[str, str]]]:
    """Dead cells of an RTLIL design, by module: ``{module: [(net name, "file.py:line"), ...]}``.

    Yosys (the synthesis one, :func:`gen.toolflow.synth.find_yosys`) runs ``proc`` and writes the
    netlist as JSON; :func:`_dead_cells` finds cells whose outputs reach no port and no live cell."""
    yosys, _ = find_yosys()
    with tempfile.TemporaryDirectory(prefix="fetta-dead-") as tmp:
        il, js = Path(tmp) / "design.il", Path(tmp) / "design.json"
        il.write_text(rtlil_text)
        subprocess.run([yosys, "-q", "-p", f"read_rtlil {il}; proc -noopt; write_json {js}"], check=True,
                       capture_output=True, timeout=timeout)
        netlist = json.loads(js.read_text())
    found = {name: [(net, src) for net, src in _dead_cells(mod) if _FSM_SRC not in src]
             for name, mod in netlist["modules"].items()}
    return {name: cells for name, cells in found.items() if cells}


# --------------------------------------------------------------------------- one block
@dataclass
class BlockLint:
    """The lint of one block: unwaived Verilator lines, dead cells, waived unused names."""

    name: str
    warnings: list[str] = field(default_factory=list)
    dead: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    waived: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.warnings and not self.dead

    def dead_summary(self) -> list[str]:
        """One line per source line of dead logic: ``file:line  N cells in M modules``."""
        by_src: dict[str, set] = defaultdict(set)
        count: Counter = Counter()
        for module, cells in self.dead.items():
            for _, src in cells:
                key = src.replace(f"{ROOT}/", "") or "(no source line)"
                by_src[key].add(module)
                count[key] += 1
        return [f"dead logic: {src}: {count[src]} cells in {len(mods)} module(s), e.g. {sorted(mods)[0]}"
                for src, mods in sorted(by_src.items())]


_UNUSED = re.compile(r"%Warning-UNUSEDSIGNAL: (?P<file>[^:]+):(?P<line>\d+):\d+: ")


def lint_block(name: str, config, *, workdir: Path | None = None) -> BlockLint:
    """Lint block ``name`` of ``hdl.TOPS`` for ``config`` (module docstring): Verilator ``-Wall``,
    the dead-logic check, per-signal ``UNUSEDSIGNAL`` waivers written to ``fetta_<name>.vlt``."""
    return lint_rtlil(name, hdl.module_name(name), hdl.to_rtlil(name, config), workdir=workdir)


def lint_rtlil(name: str, module: str, rtlil_text: str, *, verilog: str | None = None,
               workdir: Path | None = None, timeout: float | None = None) -> BlockLint:
    """:func:`lint_block` of a design given as RTLIL (with source lines) whose top is ``module``;
    ``verilog``: its Verilog when the caller converted it already; ``timeout``: per tool run."""
    wd = LINT_DIR if workdir is None else workdir
    text = hdl.rtlil_to_verilog(rtlil_text) if verilog is None else verilog
    result = BlockLint(name, dead=dead_logic(rtlil_text, timeout=timeout))
    lines = lint_verilog(text, module, workdir=wd, timeout=timeout)
    source = text.splitlines()
    vlt = ["`verilator_config", f"// waivers of {module}.v, one per signal (gen/toolflow/lint.py)"]
    for line in lines:
        m = _UNUSED.match(line)
        decl = source[int(m.group("line")) - 1].strip() if m else ""
        if m and decl == "input rst;":
            reason = RST_REASON
        elif m and not result.dead and not decl.startswith(("input", "inout")):
            reason = ALIAS_REASON
        else:
            result.warnings.append(line)
            continue
        result.waived.append(line)
        vlt += [f"// {reason}: {line.split(': ', 2)[-1]}",
                f'lint_off -rule UNUSEDSIGNAL -file "*{module}.v" -lines {m.group("line")}']
    (wd / f"{module}.vlt").write_text("\n".join(vlt) + "\n")
    return result


def lint_report(tops, config, progress=None) -> tuple[list[str], int]:
    """Lint every block in ``tops``: ``(report lines, number of blocks with findings)``;
    ``progress(lines)`` gets each block's lines as soon as it is done."""
    lines, failed = [], 0
    for name in tops:
        start = len(lines)
        result = lint_block(name, config)
        kinds = sorted(set(re.findall(r"%(?:Warning|Error)-?(\w*)", "\n".join(result.warnings))))
        if result.clean:
            status = f"clean ({len(result.waived)} unused names waived per signal: build/lint/{hdl.module_name(name)}.vlt)"
        else:
            status = (f"{len(result.warnings)} warnings ({', '.join(k for k in kinds if k)}), "
                      f"{sum(map(len, result.dead.values()))} dead cells")
        lines.append(f"{name:12s} {status}")
        findings = result.dead_summary() + result.warnings
        lines += [f"    {line}" for line in findings[:20]]
        if len(findings) > 20:
            lines.append(f"    ... {len(findings) - 20} more")
        failed += not result.clean
        if progress is not None:
            progress(lines[start:])
    return lines, failed


__all__ = ["WAIVERS", "ALIAS_REASON", "BlockLint", "dead_logic", "lint_verilog", "lint_block", "lint_rtlil",
           "lint_report"]
