"""The test order of ``make test`` (``tests/conftest.py``) and the durations file it reads."""

from __future__ import annotations

import json
from types import SimpleNamespace

from tests import conftest
from tests.durations import main, parse

LOG = """
============================= slowest durations ==============================
506.21s call     tests/test_system.py::test_grid
97.21s setup    tests/test_scalesim.py::test_version
3.50s call     tests/test_scalesim.py::test_version
0.01s teardown tests/test_scalesim.py::test_version
4.00s call     tests/test_fp.py::test_add[0]
1.50s call     tests/test_fp.py::test_add[0]@adders
=========================== short test summary info ===========================
"""


def test_durations_sum_phases_and_keep_the_long_ones(tmp_path, capsys):
    assert parse(LOG) == {"tests/test_system.py::test_grid": 506.21, "tests/test_scalesim.py::test_version": 100.72,
                          "tests/test_fp.py::test_add[0]": 5.5}
    log = tmp_path / "log"
    log.write_text(LOG)
    assert main([str(log)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["tests/test_system.py::test_grid", "tests/test_scalesim.py::test_version",
                         "tests/test_fp.py::test_add[0]"]
    kept = tmp_path / "durations.json"
    assert main([str(log), "--out", str(kept)]) == 0 and json.loads(kept.read_text()) == out
    log.write_text("no durations here\n")
    assert main([str(log)]) == 1
    assert main([str(log), "--out", str(kept)]) == 1 and json.loads(kept.read_text()) == out   # kept on failure


def test_collection_runs_the_longest_first(tmp_path, monkeypatch):
    path = tmp_path / "durations.json"
    path.write_text(json.dumps({"b": 50.0, "d": 9.0}))
    monkeypatch.setattr(conftest, "DURATIONS", path)
    items = [SimpleNamespace(nodeid=n) for n in ["a", "b", "c", "d@g", "e"]]
    conftest.pytest_collection_modifyitems(None, None, items)
    assert [i.nodeid for i in items] == ["b", "d@g", "a", "c", "e"]
    assert conftest.plain_id("t.py::f[a@b]") == "t.py::f[a@b]" and conftest.plain_id("t.py::f[x]@g") == "t.py::f[x]"
