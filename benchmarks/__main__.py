"""``python -m benchmarks [NAME [ARGS...]]``: run one benchmark module's ``main``, or all of them.

``NAME`` is a module ``benchmarks/NAME.py`` with a ``main(argv)`` function;
without a name every such module runs in alphabetical order (no arguments).
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
        if argv:
            sys.argv = [f"benchmarks.{name}", *argv]
        rc = main()
    return int(rc or 0)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
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
        print(f"== benchmarks.{name}", flush=True)
        rc |= _call(name, argv)
    return rc


if __name__ == "__main__":
    sys.exit(main())
