"""Compiled benchmark layers shared by the tests of one worker.

``tests/test_timing.py`` and ``tests/test_model.py`` both check compiled programs of the example
layers on the default design (ATIS TT ``train`` takes ~45 s to compile); their tests carry
``xdist_group("examples")`` so that one worker compiles each program once (:func:`compiled`).
"""

from __future__ import annotations

import functools
from pathlib import Path

from gen.compiler import compile_layer
from gen.design.config import FettaConfig
from gen.workload.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def compiled(name: str, phase: str):
    """``(spec, program)`` of ``examples/<name>.json`` compiled for ``phase`` on the default design
    (:func:`gen.compiler.compile_layer`'s defaults); callers only read the program."""
    spec = load_spec(ROOT / "examples" / f"{name}.json")
    return spec, compile_layer(spec, phase, FettaConfig())
