"""Build (cached per design) and run cocotb testbenches on Icarus or Verilator.

A simulator build is keyed by the SHA-256 of the emitted Verilog, the simulator
and the build flags: the same design is built once and reused by every test
and every ``fetta run`` (``build/sim/<sim>/<toplevel>-<hash>/``). A file lock
makes concurrent pytest-xdist workers wait for one build instead of racing.

Data goes to a bench through environment variables (see each bench's
docstring); results come back through files the bench writes.
"""

from __future__ import annotations

import ast
import fcntl
import functools
import hashlib
import json
import os
import re
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from gen.errors import FettaError

from sim import toolchain
from sim.vdedup import dedup_modules
import hdl

ROOT = Path(__file__).resolve().parents[1]
#: the packages whose sources can change what a block elaborates to
PROJECT_PACKAGES = ("gen", "hdl", "sim")
BUILD_ROOT = Path(os.environ.get("FETTA_BUILD_DIR", ROOT / "build"))


class SimulationError(FettaError):
    kind = "simulation"


@dataclass
class SimBuild:
    """A built simulation model: where it is and how long its build took (when ``cached``: the
    time measured when it was built)."""

    sim: str
    toplevel: str
    build_dir: Path
    build_seconds: float
    cached: bool
    #: built to record waveforms (:func:`build`'s ``waves``)
    waves: bool = False


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def source_closure(module: str, root: Path = ROOT) -> list[Path]:
    """Every project source file (``gen``, ``hdl``, ``sim``) that ``module`` imports, transitively,
    itself included: what the Verilog of a block can depend on."""
    todo, seen = [module], {}
    while todo:
        mod = todo.pop()
        path = _module_path(mod, root)
        if path is None or mod in seen:
            continue
        seen[mod] = path
        stat = path.stat()
        todo += _project_imports(path, stat.st_mtime_ns, stat.st_size)
    return sorted(set(seen.values()))


@functools.lru_cache(maxsize=1024)
def _project_imports(path: Path, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The project modules the file ``path`` imports, each package before its sub-modules (a
    package's ``__init__`` runs first); memoized on the file's modification time and size, so an
    edited file is parsed again (every RTL run asks for the same closure)."""
    out = []
    for n in ast.walk(ast.parse(path.read_bytes())):
        names = ([a.name for a in n.names] if isinstance(n, ast.Import) else
                 [n.module, *(f"{n.module}.{a.name}" for a in n.names)] if isinstance(n, ast.ImportFrom) and n.module
                 else [])
        for name in names:
            parts = name.split(".")
            if parts[0] in PROJECT_PACKAGES:
                out += [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return tuple(out)


def _module_path(mod: str, root: Path) -> Path | None:
    base = root.joinpath(*mod.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def elaboration_key(top: str, config, root: Path = ROOT) -> str:
    """Cache key of the Verilog of block ``top``: the configuration, the block name, the tool versions
    and the bytes of every source file the block's factory module imports (:func:`source_closure`),
    inside ``hdl/`` or not (configuration rules and ISA constants live in ``gen/design/``)."""
    module = hdl.TOPS[top].partition(":")[0] if top in hdl.TOPS else "hdl"
    h = hashlib.sha256(json.dumps([top, config.to_dict(), toolchain.tool_versions()], sort_keys=True).encode())
    for src in [*source_closure("hdl", root), *source_closure(module, root)]:
        h.update(str(src.relative_to(root)).encode() + b"\0" + src.read_bytes())
    return h.hexdigest()[:16]


def elaborate(top: str, config) -> str:
    """Verilog text of block ``top`` for ``config``, cached on disk under :func:`elaboration_key`,
    so an edited block, or an edited constant it imports from anywhere in the project, is
    re-elaborated. Elaborating the default accelerator takes ~65 s; repeated ``fetta run`` calls
    and tests reuse the text.
    """
    path = BUILD_ROOT / "verilog" / f"{hdl.module_name(top)}-{elaboration_key(top, config)}.v"
    with _locked(path.parent / f".{path.name}.lock"):     # concurrent workers wait for one elaboration
        if path.exists():
            return path.read_text()
        text = hdl.to_verilog(top, config)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)       # atomic: a reader never sees a partial file
    return text


def build(verilog: str, toplevel: str, sim: str, *, build_args: Sequence[str] = (), waves: bool = False) -> SimBuild:
    """Build ``verilog`` (text) for ``sim`` unless an identical build exists.

    ``waves`` (Icarus): a build that can record an FST waveform of a run (:func:`run`'s ``waves_file``),
    with a ``$dumpvars`` root module, cached apart from the plain one. Verilator waveforms come from
    :func:`build_native` models.
    """
    toolchain.require(sim)
    if "__" in toplevel:
        raise SimulationError(f"top-level module name {toplevel!r} must not contain '__' (Verilator bugs)")
    verilator = sim == "verilator"
    if waves and verilator:
        raise SimulationError("Verilator waveforms are recorded by build_native models, not cocotb builds")
    if verilator:
        # cocotb's runner passes --public-flat-rw, which keeps every internal signal of the
        # design alive and in the VPI symbol table (the default accelerator: ~80 MB of C++).
        # The benches only touch top-level ports, so make just those public (ports.vlt below).
        # The Verilog itself gets Amaranth's per-instance module copies merged (sim/vdedup.py;
        # the default accelerator: 186 modules -> 33; its PEs and FP units are shared modules
        # already, hdl/share.py), as Verilator compiles each to C++.
        args = ["--no-public-flat-rw", *(f"-Wno-{w}" for w in toolchain.SIM_WAIVERS), *build_args]
    else:
        # cocotb passes -g2012, where variable initializers run before any process and raise no
        # event: Yosys' combinational `always @*` blocks (kicked off by an initialized dummy reg)
        # then stay X until an input changes, e.g. the reduction output of a CE whose Psums are
        # constant for the whole run (tests/test_system.py::test_constant_ce_output_icarus)
        args = ["-g2005", *build_args]
    key = hashlib.sha256("\0".join([verilog, sim, toplevel, *args, "dedup1" if verilator else "",
                                     "waves" if waves else "",
                                     *toolchain.tool_versions(sim)]).encode()).hexdigest()[:16]
    bdir = BUILD_ROOT / "sim" / sim / f"{toplevel}-{key}{'-waves' if waves else ''}"

    def make(bdir: Path) -> None:
        _cocotb_build(bdir, verilog, toplevel, sim, args, waves)

    seconds, cached = _cached_build(bdir, make)
    return SimBuild(sim, toplevel, bdir, seconds, cached, waves)


def _cached_build(bdir: Path, make) -> tuple[float, bool]:
    """Run ``make(bdir)`` unless ``bdir`` holds a finished build (its ``build.ok`` marker); concurrent
    callers wait for one build. Returns ``(seconds the build took, cached)``."""
    marker = bdir / "build.ok"
    with _locked(bdir.parent / f".{bdir.name}.lock"):
        if marker.exists():
            try:
                return float(marker.read_text()), True
            except ValueError:
                return 0.0, True
        bdir.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        make(bdir)
        seconds = time.perf_counter() - t0
        marker.write_text(f"{seconds:.3f}\n")
    return seconds, False


def _cocotb_build(bdir: Path, verilog: str, toplevel: str, sim: str, args: list[str], waves: bool) -> None:
    """The simulator build of :func:`build` in ``bdir`` through cocotb's runner."""
    from cocotb_tools.runner import get_runner

    verilator = sim == "verilator"
    src = bdir / f"{toplevel}.v"
    src.write_text(dedup_modules(verilog)[0] if verilator else verilog)
    sources = [src]
    if waves:
        # cocotb's own dump module is SystemVerilog (a `string`); this build is -g2005
        sources.append(bdir / f"{_ICARUS_DUMP}.v")
        sources[-1].write_text(_icarus_dump(toplevel))
        args += ["-s", _ICARUS_DUMP]
    if verilator:
        vlt = bdir / "ports.vlt"
        vlt.write_text(f'`verilator_config\npublic_flat_rw -module "{toplevel}" -var "*"\n')
        args.append(str(vlt))
    toolchain.apply_sim_env()
    runner = get_runner(sim)
    try:
        runner.build(sources=sources, hdl_toplevel=toplevel, build_dir=bdir, build_args=args,
                     timescale=("1ns", "1ps"), always=True, log_file=bdir / "build.log")
    except (RuntimeError, SystemExit) as exc:
        raise SimulationError(f"{sim} build of {toplevel} failed ({exc}); log tail:\n{_tail(bdir / 'build.log')}") \
            from None


def _tail(log: Path, chars: int = 3000) -> str:
    return log.read_text(errors="replace")[-chars:] if log.exists() else ""


#: the C++ main of native Verilator models (:func:`build_native`)
HARNESS = ROOT / "sim" / "harness" / "verilator_main.cpp"


def verilator_threads() -> int:
    """Threads of native Verilator models: ``FETTA_SIM_THREADS`` (default 1). A model of N threads
    busy-waits on N cores, so more threads than free cores (two pytest workers on two cores) are
    slower, not faster; on a free 2-core machine 2 threads run the default design ~2x faster."""
    value = os.environ.get("FETTA_SIM_THREADS", "1")
    if not value.isdigit() or int(value) < 1:
        raise SimulationError(f"FETTA_SIM_THREADS must be a positive integer, got {value!r}")
    return int(value)


def verilator_opt() -> str | None:
    """The C++ optimization of native Verilator models: ``FETTA_VERILATOR_OPT`` (``-O0`` .. ``-O3``,
    ``-Os``, ``-Og``; unset: Verilator's own ``OPT_FAST=-Os``). ``make test`` sets ``-O1``: the default
    design's C++ compiles in about half the time (72 s against 135 s here) and runs ~15 % slower
    (13.7k against 16.0k clock cycles/s on the 256^3 GEMM), a good trade for its short runs; the
    benchmarks and ``make demo`` keep ``-Os``."""
    value = os.environ.get("FETTA_VERILATOR_OPT", "")
    if value and not re.fullmatch(r"-O[0-3sg]", value):
        raise SimulationError(f"FETTA_VERILATOR_OPT must be one of -O0 .. -O3, -Os, -Og; got {value!r}")
    return value or None


def build_native(verilog: str, toplevel: str, *, threads: int | None = None, waves: bool = False) -> SimBuild:
    """Build ``verilog`` into a stand-alone Verilator executable with the C++ main of
    :data:`HARNESS` (no cocotb, no VPI: the test bench in the Verilog does all the work; its top has
    ports ``clk`` and ``finished``), cached like :func:`build`. ``threads``: Verilator ``--threads``
    (default :func:`verilator_threads`); ``waves``: ``--trace-fst`` (:func:`run_native`'s ``waves_file``);
    the C++ optimization: :func:`verilator_opt` (part of the cache key)."""
    toolchain.require("verilator")
    threads = verilator_threads() if threads is None else threads
    args = ["--cc", "--exe", "--build", "-j", str(os.cpu_count() or 1), "--prefix", "Vtop", "--top-module", toplevel,
            "--timescale", "1ns/1ps", *(f"-Wno-{w}" for w in toolchain.SIM_WAIVERS), "--threads", str(threads),
            *(["--trace-fst", "--trace-structs"] if waves else []),
            *(["-MAKEFLAGS", f"OPT_FAST={opt}"] if (opt := verilator_opt()) else [])]
    key = hashlib.sha256("\0".join([verilog, toplevel, *args, HARNESS.read_text(), "dedup1",
                                     *toolchain.tool_versions("verilator")]).encode()).hexdigest()[:16]
    bdir = BUILD_ROOT / "sim" / "verilator-native" / f"{toplevel}-{key}{'-waves' if waves else ''}"

    def make(bdir: Path) -> None:
        src = bdir / f"{toplevel}.v"
        src.write_text(dedup_modules(verilog)[0])
        with open(bdir / "build.log", "w") as log:
            proc = subprocess.run(["verilator", *args, "-Mdir", str(bdir / "obj"), "-o", "sim", str(src), str(HARNESS)],
                                  stdout=log, stderr=subprocess.STDOUT, env=toolchain.sim_env(), cwd=bdir)
        if proc.returncode != 0:
            raise SimulationError(f"verilator build of {toplevel} failed (exit {proc.returncode}); log tail:\n"
                                  f"{_tail(bdir / 'build.log')}")

    seconds, cached = _cached_build(bdir, make)
    return SimBuild("verilator", toplevel, bdir, seconds, cached, waves)


def run_native(simbuild: SimBuild, plusargs: Sequence[str], limit: int, waves_file: Path | None = None) -> int:
    """Run a :func:`build_native` model for at most ``limit`` clock cycles with ``plusargs``; returns the
    clock cycles simulated until the bench's ``finished``. ``waves_file``: an FST of every signal
    (the build must have ``waves``). Raises :class:`SimulationError` on a timeout or a crash."""
    waves_file = _waves_file(simbuild, waves_file)
    cmd = [str(simbuild.build_dir / "obj" / "sim"), f"+cycle_limit={limit}", *plusargs,
           *([f"+trace_file={waves_file}"] if waves_file is not None else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=toolchain.sim_env())
    m = re.search(r"^cycles (\d+) finished (\d)$", proc.stdout, re.M)
    if proc.returncode != 0 or m is None or m.group(2) != "1":
        what = f"ran into its limit of {limit} cycles" if proc.returncode == 3 else f"exited with {proc.returncode}"
        raise SimulationError(f"verilator: {simbuild.toplevel} {what}; output tail:\n"
                              f"{(proc.stdout + proc.stderr)[-3000:]}")
    return int(m.group(1))


def _waves_file(simbuild: SimBuild, waves_file) -> Path | None:
    """``waves_file`` as an absolute path (None: no waveform); the build must be able to record it."""
    if waves_file is None:
        return None
    if not simbuild.waves:
        raise SimulationError(f"a waveform needs a build made with waves=True ({simbuild.build_dir})")
    return Path(waves_file).resolve()


_ICARUS_DUMP = "fetta_waves"


def _icarus_dump(toplevel: str) -> str:
    """A second Icarus root module that dumps every signal of ``toplevel`` to the file named by
    ``+dumpfile_path=F`` (the format is vvp's ``-fst``)."""
    return (f"module {_ICARUS_DUMP};\n"
            "  reg [8*4096-1:0] path;\n"
            "  initial begin\n"
            '    if ($value$plusargs("dumpfile_path=%s", path)) begin\n'
            "      $dumpfile(path);\n"
            f"      $dumpvars(0, {toplevel});\n"
            "    end\n"
            "  end\n"
            "endmodule\n")


_run_counter = 0


def run(simbuild: SimBuild, test_module: str, *, env: Mapping[str, str] | None = None,
        testcase: str | Sequence[str] | None = None, seed: int | None = None,
        waves_file: Path | None = None, plusargs: Sequence[str] = ()) -> Path:
    """Run the cocotb tests of ``test_module`` against a build; raise on any failure.

    ``waves_file``: record every signal of the design as an FST waveform there (the build must
    have been made with ``waves=True``). ``plusargs``: ``+name=value`` arguments of the simulation.

    Returns the per-run directory (benches write their outputs there; its path is
    in ``FETTA_RUN_DIR``).
    """
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    global _run_counter
    _run_counter += 1
    run_dir = simbuild.build_dir / "runs" / f"{os.getpid()}-{_run_counter}-{time.time_ns()}"
    run_dir.mkdir(parents=True)
    toolchain.apply_sim_env()
    extra = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
             "FETTA_RUN_DIR": str(run_dir)}
    extra.update(env or {})
    results = run_dir / "results.xml"
    runner = get_runner(simbuild.sim)
    log_file = run_dir / "sim.log"
    waves_file = _waves_file(simbuild, waves_file)
    if waves_file is not None:
        plusargs = [*plusargs, f"+dumpfile_path={waves_file}"]
    try:
        runner.test(test_module=test_module, hdl_toplevel=simbuild.toplevel, hdl_toplevel_lang="verilog", build_dir=simbuild.build_dir,
                    test_dir=run_dir, extra_env=extra, testcase=testcase, seed=seed, waves=waves_file is not None,
                    plusargs=plusargs,
                    results_xml=str(results), timescale=("1ns", "1ps"), log_file=log_file)
    except SystemExit:
        pass  # the result file below says what happened
    try:
        ntests, nfailed = get_results(results)
    except RuntimeError:
        ntests, nfailed = 0, -1
    if nfailed != 0 or ntests == 0:
        tail = log_file.read_text(errors="replace")[-4000:] if log_file.exists() else ""
        what = "terminated abnormally" if nfailed < 0 else f"{nfailed} of {ntests} cocotb tests failed"
        raise SimulationError(f"{simbuild.sim}: {test_module} {what}; log {log_file}:\n{tail}")
    return run_dir


__all__ = ["SimBuild", "SimulationError", "build", "elaborate", "run", "build_native", "run_native", "verilator_threads",
           "HARNESS", "BUILD_ROOT"]
