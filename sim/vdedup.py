"""Merge identical modules of emitted Verilog so simulators compile each distinct block once.

Amaranth emits one Verilog module per *instance* (``fetta_fetta.tcu.ce3``): the default
accelerator has 186 modules, most of them copies of a few (CEs, adder switches, memory banks; its
PEs and floating-point units are emitted once already, :mod:`hdl.share`; 1,402 modules before).
Verilator compiles each module on its own, so the whole design becomes ~124 MB of C++.
:func:`dedup_modules` hash-conses the modules bottom-up: a module whose body is identical to an
earlier one (after its sub-module references are replaced by their canonical names and Yosys'
``$auto$`` names are renumbered in order of appearance) is dropped and its instances point to the
canonical module. Behaviour is unchanged (the same netlist, instanced instead of copied).
"""

from __future__ import annotations

import re

_MODULE = re.compile(r"^module (\S+) ?\(.*?^endmodule\n?", re.S | re.M)
_AUTO = re.compile(r"\\\$auto\$\S*")
_ATTRS = re.compile(r"\(\*.*?\*\)", re.S)


def _name_token(name: str) -> str:
    """How a module name appears as a token (escaped identifiers end with a space)."""
    return name + " " if name.startswith("\\") else name


def dedup_modules(verilog: str) -> tuple[str, int]:
    """``verilog`` with duplicate modules merged; returns (text, number of modules dropped)."""
    mods = [(m.group(1), m.group(0)) for m in _MODULE.finditer(verilog)]
    if not mods:
        return verilog, 0
    names = {n for n, _ in mods}
    # instance references: "  \\name  inst (" or "  name inst ("
    inst = re.compile(r"^(\s+)(\S+)(\s+\S+\s*\()", re.M)
    deps: dict[str, set[str]] = {n: set() for n, _ in mods}
    for n, body in mods:
        for m in inst.finditer(body):
            if m.group(2) in names and m.group(2) != n:
                deps[n].add(m.group(2))
    canon: dict[str, str] = {}
    seen: dict[str, str] = {}
    bodies = dict(mods)
    out: dict[str, str] = {}
    visiting: set[str] = set()

    def visit(n: str) -> None:
        if n in canon:
            return
        if n in visiting:
            raise ValueError(f"recursive module instantiation at {n}")
        visiting.add(n)
        for d in sorted(deps[n]):
            visit(d)
        body = inst.sub(lambda m: m.group(1) + canon.get(m.group(2), m.group(2)) + m.group(3)
                        if m.group(2) in names else m.group(0), bodies[n])
        header_end = body.index("(")
        rest = body[header_end:]
        autos: dict[str, str] = {}
        key = _AUTO.sub(lambda m: autos.setdefault(m.group(0), f"\\$auto$dedup${len(autos)}"), rest)
        if key in seen:
            canon[n] = seen[key]
        else:
            seen[key] = n
            canon[n] = n
            out[n] = body
        visiting.discard(n)

    for n, _ in mods:
        visit(n)
    # keep the text outside modules (attributes, comments) in place: rebuild in original order
    pieces = []
    last = 0
    for m in _MODULE.finditer(verilog):
        before = verilog[last:m.start()]
        if m.group(1) in out or _ATTRS.sub("", before).strip():
            pieces.append(before)          # a dropped module's own attribute lines go with it
        if m.group(1) in out:
            text = out[m.group(1)]
            pieces.append(text if text.endswith("\n") else text + "\n")
        last = m.end()
    pieces.append(verilog[last:])
    return "".join(pieces), len(mods) - len(out)


__all__ = ["dedup_modules"]
