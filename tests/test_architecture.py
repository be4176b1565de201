"""The architecture as rules a test can check (``docs/architecture.md``).

* layers, bottom to top: an import (at module top or inside a function) may only go to the same
  layer or a lower one, and the module import graph has no cycle;
* size: no function longer than :data:`MAX_FUNCTION` lines and no class longer than
  :data:`MAX_CLASS` lines in ``gen/``, ``hdl/`` and ``sim/``;
* imports of project modules sit at module top (:data:`LAZY` lists the few that may not).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gen", "hdl", "sim")
MAX_FUNCTION = 120
MAX_CLASS = 400

#: module prefix -> layer (the longest matching prefix wins); see docs/architecture.md
LAYERS: dict[str, int] = {
    "gen": 0, "gen.errors": 0, "gen.progress": 0, "gen.design": 0,
    "gen.workload": 1,
    "hdl": 2,
    "gen.model": 3,
    "gen.search": 4,
    "gen.compiler": 5,
    "sim": 6,
    "gen.toolflow": 7,
    "gen.cli": 8, "gen.__main__": 8,
}
LAYER_NAMES = ("design base", "workloads", "hardware", "model", "search", "compiler", "simulation", "toolflow", "CLI")

#: (module, imported module) pairs that stay inside a function, with the reason
LAZY: dict[tuple[str, str], str] = {}


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = p
    return out


def layer(mod: str) -> int:
    best = max((p for p in LAYERS if mod == p or mod.startswith(p + ".")), key=len)
    return LAYERS[best]


def imports(mod: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """``(imported module, line, at module top)`` for every project import of ``mod``."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    out = []
    for n in ast.walk(tree):
        names = []
        if isinstance(n, ast.Import):
            names = [a.name for a in n.names]
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            names = [f"{n.module}.{a.name}" if f"{n.module}.{a.name}" in known else n.module for a in n.names]
        for name in names:
            if name.split(".")[0] in PACKAGES:
                while name not in known and "." in name:
                    name = name.rsplit(".", 1)[0]
                out.append((name, n.lineno, id(n) in top))
    return out


def graph() -> dict[str, list[tuple[str, int, bool]]]:
    known = modules()
    return {m: imports(m, p, known) for m, p in known.items()}


def test_no_relative_imports():
    bad = [f"{m}:{n.lineno}" for m, p in modules().items() for n in ast.walk(ast.parse(p.read_text()))
           if isinstance(n, ast.ImportFrom) and n.level]
    assert not bad, f"relative imports (use absolute ones): {bad}"


def test_imports_go_down_the_layers():
    bad = []
    for mod, deps in graph().items():
        for dep, line, _ in deps:
            if layer(dep) > layer(mod):
                bad.append(f"{mod}:{line} ({LAYER_NAMES[layer(mod)]}) imports {dep} ({LAYER_NAMES[layer(dep)]})")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_no_import_cycles():
    g = {m: sorted({d for d, _, _ in deps if d != m}) for m, deps in graph().items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in g.get(m, ()):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)
    # a package importing its own sub-modules (re-exports) is not a cycle unless a sub-module imports it back
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_project_imports_at_module_top():
    bad = [f"{mod}:{line} imports {dep} inside a function" for mod, deps in graph().items()
           for dep, line, at_top in deps if not at_top and (mod, dep) not in LAZY]
    assert not bad, "\n".join(bad)


def _sizes():
    for mod, path in modules().items():
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield mod, n, n.end_lineno - n.lineno + 1


def test_functions_and_classes_are_small():
    bad = [f"{mod}:{n.lineno} {type(n).__name__[:-3].lower()} {n.name}: {size} lines"
           for mod, n, size in _sizes()
           if size > (MAX_CLASS if isinstance(n, ast.ClassDef) else MAX_FUNCTION)]
    assert not bad, f"longer than {MAX_FUNCTION} lines (functions) / {MAX_CLASS} (classes):\n" + "\n".join(bad)


@pytest.mark.parametrize("mod", ["gen.design.config", "gen.design.isa", "gen.design.netsem", "gen.design.routing"])
def test_design_base_imports_no_other_layer(mod):
    deps = {d for d, _, _ in graph()[mod]}
    assert all(layer(d) == 0 for d in deps), deps
