"""Build caches are keyed on everything their output depends on (issue: no stale builds)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gen.design.config import FettaConfig
from sim import runner

ROOT = Path(__file__).resolve().parents[1]
SMALL = FettaConfig(vector_lanes=4)


@pytest.fixture
def tree(tmp_path):
    """A copy of the project's sources that a test may edit."""
    for pkg in runner.PROJECT_PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_closure_reaches_the_design_base():
    files = {str(p.relative_to(ROOT)) for p in runner.source_closure("hdl.top")}
    assert {"gen/design/isa.py", "gen/design/config.py", "hdl/controller.py", "hdl/top.py"} <= files
    assert not any(f.startswith(("gen/cli", "gen/compiler", "gen/toolflow", "sim/")) for f in files), files


def test_key_follows_imported_constants_only(tree):
    key = runner.elaboration_key("vector_unit", SMALL, tree)
    assert key == runner.elaboration_key("vector_unit", SMALL, tree)
    _append(tree / "gen" / "cli" / "run.py", "\nUNRELATED = 1\n")       # not imported by the hardware
    assert runner.elaboration_key("vector_unit", SMALL, tree) == key
    _append(tree / "gen" / "design" / "isa.py", "\nNEW_CONSTANT = 1\n")  # outside hdl/, imported by hdl/vector.py
    key2 = runner.elaboration_key("vector_unit", SMALL, tree)
    assert key2 != key
    _append(tree / "gen" / "design" / "config.py", "\n# a rule changed\n")
    assert runner.elaboration_key("vector_unit", SMALL, tree) not in (key, key2)
    assert runner.elaboration_key("vector_unit", FettaConfig(vector_lanes=8), tree) != \
        runner.elaboration_key("vector_unit", SMALL, tree)


def test_elaboration_cache_rebuilds_after_an_edit_outside_hdl(tree):
    """Elaborate in the copied tree, edit a constant in gen/design/isa.py, elaborate again: a new Verilog file."""
    env = {**os.environ, "PYTHONPATH": str(tree), "FETTA_BUILD_DIR": str(tree / "build")}
    code = ("from gen.design.config import FettaConfig; from sim.runner import elaborate; "
            "print(len(elaborate('vector_unit', FettaConfig(vector_lanes=4))))")

    def elaborate() -> list[str]:
        subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True, capture_output=True)
        return sorted(p.name for p in (tree / "build" / "verilog").glob("*.v"))

    first = elaborate()
    assert len(first) == 1 and elaborate() == first            # cached
    isa = tree / "gen" / "design" / "isa.py"
    assert "BF16_ONE = 0x3F80" in isa.read_text()
    isa.write_text(isa.read_text().replace("BF16_ONE = 0x3F80", "BF16_ONE = 0x4000"))
    second = elaborate()
    assert len(second) == 2 and first[0] in second             # re-elaborated, old file kept
    new = (tree / "build" / "verilog" / (set(second) - set(first)).pop()).read_text()
    old = (tree / "build" / "verilog" / first[0]).read_text()
    assert new != old                                          # the edited constant reached the Verilog
