"""The TPU baseline's GEMM cycles against SCALE-Sim 3.0 (issue 15; ``sim/scalesim_ref.py``).

SCALE-Sim runs in ``.venv-scalesim`` (``make scalesim``, a prerequisite of ``make test``); ``make test``
compares :data:`CI_SHAPES` (about 60 s), ``make test-full`` all of ``SHAPES``.
Tolerance 5 % (the issue's goal) on what both tools model the same way: the folds (tiles) of the
array and the vectors streamed per fold. SCALE-Sim runs folds back to back with a fill / drain (and
in WS a weight load) each, which this datapath overlaps with the next fold, so the comparison
removes that per-fold time from SCALE-Sim's count; the raw counts must then agree too wherever that
time is under 5 % of a fold. What is left is the engine's once-per-instruction pipeline latency
(rule) and, for the compiled TPU model, its extra instructions and passes.
"""

from __future__ import annotations

import pytest

from sim.scalesim_ref import SHAPES, compare, fold_overhead
from tests.strategies import FULL

TOL = 0.05
#: ``make test`` compares four shapes (~60 s of the ~110 s SCALE-Sim takes for all: it simulates every
#: cycle), the two whose per-fold fill / drain is under ``TOL`` among them; ``make test-full`` all
CI_SHAPES = ((64, 64, 64), (32, 768, 768), (64, 128, 1024), (512, 64, 128))
RUN = SHAPES if FULL else CI_SHAPES
#: one worker runs the module: the comparison is a module fixture
pytestmark = pytest.mark.xdist_group("scalesim")


@pytest.fixture(scope="module")
def compared():
    return compare(shapes=RUN)


def test_scalesim_version_and_coverage(compared):
    version, rows = compared
    assert version == "3.0.0"
    assert len(SHAPES) >= 5 and set(CI_SHAPES) <= set(SHAPES)
    assert {(r.M, r.N, r.K) for r in rows} == set(RUN)
    assert {r.dataflow for r in rows} == {"os", "ws"}


def test_tpu_against_scalesim_folds_overlapped(compared):
    _, rows = compared
    for r in rows:
        assert r.overlapped_diff(r.rule) <= TOL, r
        if r.dataflow == "os":
            assert r.tpu_model is not None
            assert r.overlapped_diff(r.tpu_model) <= TOL, r


def test_tpu_against_scalesim_raw_where_fill_drain_is_small(compared):
    _, rows = compared
    checked = 0
    for r in rows:
        stream = r.K if r.dataflow == "os" else r.M
        over = fold_overhead(r.dataflow, 16, 16)
        if over / (stream + over) < TOL:
            assert abs(r.raw_ratio - 1) <= TOL, r
            checked += 1
        else:
            # SCALE-Sim pays the per-fold time the datapath overlaps: it counts more, never fewer
            assert r.scalesim > r.rule, r
    assert checked >= 2
