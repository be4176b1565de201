"""Shared pytest set-up: hypothesis profiles, and the order two workers take the tests in.

``make test`` runs ``pytest -n 2 --dist loadgroup``: the tests that share one long Verilator build,
compiled programs (``tests/programs.py``) or a module fixture carry ``@pytest.mark.xdist_group``
(one worker builds and runs them while the other goes on, instead of waiting on the build's lock),
and the collection puts the tests that took longest first (:data:`DURATIONS`, written by
``make test-durations``), so the run does not end on one worker with a long test started last.
The order changes no result: every test stands alone (a test that only passed in file order, the
sweep's forked workers in a process that had loaded JAX, was a defect: they are spawned now).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, settings

# `ci` (default): bounded examples, no deadline (2 shared cores make timings noisy).
settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("full", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: seconds (setup + call + teardown) of the tests of ``make test`` that took 5 s or more, by node
#: id, as ``python -m tests.durations`` reads them from a ``--durations=0`` log
DURATIONS = Path(__file__).with_name("durations.json")


def pytest_collection_modifyitems(session, config, items):
    """Longest first (a stable sort: the others keep the file order after them). A worker's node id
    may carry xdist's ``@<group>`` suffix; the file has the plain ids."""
    if not DURATIONS.exists():
        return
    known = json.loads(DURATIONS.read_text())
    items.sort(key=lambda item: -known.get(plain_id(item.nodeid), 0.0))


def plain_id(nodeid: str) -> str:
    """``nodeid`` without xdist's ``@<group>`` suffix (``--dist loadgroup``)."""
    head, at, group = nodeid.rpartition("@")
    return head if at and "]" not in group and "::" not in group else nodeid
