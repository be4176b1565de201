"""Parameter sweeps: grid parsing, per-point results, failures, resume, plots, local and Dask executors.

The points synthesize the small ``ToyMac`` of test_synth (registered for the sweep
through ``[sweep] blocks``), so the expected register counts are known exactly.
"""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from gen.toolflow import sweep, synth
from gen.errors import ConfigError

pytestmark = pytest.mark.skipif(shutil.which("yosys") is None, reason="Debian yosys missing: make toolchain")

TOY = "tests.test_synth:toy_factory"


def broken_factory(config):
    raise RuntimeError(f"cannot build int_width={config.int_width}")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    # in-process workers (the Dask test) see the attribute, spawned ones (local) the environment
    monkeypatch.setattr(synth, "CACHE_DIR", tmp_path / "synth-cache")
    monkeypatch.setenv("FETTA_SYNTH_CACHE", str(tmp_path / "synth-cache"))


def toy_grid(**over):
    data = {"sweep": {"tops": ["toy"], "blocks": {"toy": TOY}, "lint": True},
            "base": {"datatype": "int16", "net_ports": 2, "num_ces": 2, "banks": 2, "lanes": 2},
            "grid": {"int_width": [3, 5], "banks": [2, 4], "int_acc_width": [10]}}
    for k, v in over.items():
        data[k] = {**data.get(k, {}), **v}
    return sweep.parse_grid(data)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("data, field", [
    ({"grid": {"ce_rows": [1]}}, "sweep.tops"),
    ({"sweep": {"tops": ["ce"]}}, "grid"),
    ({"sweep": {"tops": ["ce"]}, "grid": {"ce_rowz": [1]}}, "grid.ce_rowz"),
    ({"sweep": {"tops": ["ce"]}, "grid": {"ce_rows": []}}, "grid.ce_rows"),
    ({"sweep": {"tops": ["ce"]}, "grid": {"ce_rows": 4}}, "grid.ce_rows"),
    ({"sweep": {"tops": ["ce"], "timeout": -1}, "grid": {"ce_rows": [1]}}, "sweep.timeout"),
    ({"sweep": {"tops": ["ce"], "colour": 1}, "grid": {"ce_rows": [1]}}, "sweep.colour"),
    ({"sweep": {"tops": ["ce"]}, "base": {"nope": 1}, "grid": {"ce_rows": [1]}}, "base.nope"),
    ({"sweep": {"tops": ["ce"]}, "grid": {"ce_rows": [1]}, "extra": {}}, "extra"),
    ({"sweep": {"tops": ["ce"]}, "grid": {"num_ces,net_port": [[2, 2]]}}, "grid.net_port"),
    ({"sweep": {"tops": ["ce"]}, "grid": {"num_ces,net_ports": [[2, 2], [4]]}}, "grid.num_ces,net_ports"),
])
def test_bad_grids_name_the_field(data, field):
    with pytest.raises(ConfigError) as exc:
        sweep.parse_grid(data)
    assert exc.value.field == field


def test_grid_points_with_linked_axes():
    grid = sweep.parse_grid({"sweep": {"tops": ["ce"]},
                             "grid": {"datatype": ["int16", "bf16"], "num_ces, net_ports": [[2, 2], [8, 16]]}})
    assert grid.columns == ["datatype", "num_ces", "net_ports"]
    assert grid.points() == [
        {"datatype": "int16", "num_ces": 2, "net_ports": 2}, {"datatype": "int16", "num_ces": 8, "net_ports": 16},
        {"datatype": "bf16", "num_ces": 2, "net_ports": 2}, {"datatype": "bf16", "num_ces": 8, "net_ports": 16}]


def test_default_grid_parses_and_is_small():
    from pathlib import Path

    grid = sweep.load_grid(Path(__file__).parent.parent / "sweeps" / "default.toml")
    points = grid.points()
    assert 4 <= len(points) <= 40
    ids = {sweep.point_id(p, grid.settings()) for p in points}
    assert len(ids) == len(points)


def test_local_sweep_records_failures_resumes_and_plots(tmp_path):
    grid = toy_grid(grid={"int_width": [3, 5, 40]})  # int_width=40 is an invalid configuration
    out = tmp_path / "sw"
    s = sweep.run_sweep(grid, out, jobs=2)
    assert (s.total, s.ran, s.skipped, s.ok, s.failed) == (6, 6, 0, 4, 2)
    rows = read_csv(s.csv)
    assert len(rows) == 6
    for r in rows:
        if r["int_width"] == "40":
            assert r["status"] == "failed"
            assert r["error"].startswith("config:") and "int_width" in r["error"]
            assert r["toy.cells"] == ""
        else:
            assert r["status"] == "ok" and r["error"] == ""
            # the accumulator is the only register; the memory is int_width x banks SRAM bits
            assert int(r["toy.flip_flops"]) == 10
            assert int(r["toy.sram_bits"]) == int(r["int_width"]) * int(r["banks"])
            assert float(r["toy.area_ge"]) > 0 and int(r["toy.lint_warnings"]) >= 0
            assert r["cycles_error"]  # no benchmark layers: missing with a reason, never a number
    wider = {r["int_width"]: float(r["toy.logic_ge"]) for r in rows if r["status"] == "ok" and r["banks"] == "2"}
    assert wider["5"] > wider["3"]
    assert {p.name for p in s.plots} == {"area_toy.png"}
    assert (out / "area_toy.png").stat().st_size > 1000
    # resume: nothing is redone; failed points are redone only when asked
    s2 = sweep.run_sweep(grid, out, jobs=2)
    assert (s2.ran, s2.skipped, s2.ok, s2.failed) == (0, 6, 4, 2)
    victim = next(r["id"] for r in rows if r["status"] == "ok")
    (out / "points" / f"{victim}.json").unlink()
    s3 = sweep.run_sweep(grid, out, jobs=1)
    assert (s3.ran, s3.ok) == (1, 4)
    s4 = sweep.run_sweep(grid, out, jobs=1, retry_failed=True)
    assert (s4.ran, s4.failed) == (2, 2)
    key = ("id", "status", "error", "toy.cells", "toy.area_ge", "toy.sram_bits")
    assert ([{k: r[k] for k in key} for r in read_csv(s4.csv)]
            == [{k: r[k] for k in key} for r in rows])


def test_a_crashing_block_fails_its_points_only(tmp_path):
    grid = toy_grid(sweep={"tops": ["toy", "broken"], "blocks": {"toy": TOY, "broken": "tests.test_sweep:broken_factory"},
                           "lint": False},
                    grid={"int_width": [3], "banks": [2]})
    s = sweep.run_sweep(grid, tmp_path / "sw", jobs=1)
    (row,) = read_csv(s.csv)
    assert row["status"] == "failed"
    assert row["error"].startswith("elaborate broken: RuntimeError: cannot build int_width=3")
    assert row["toy.flip_flops"] == "10"  # what was measured before the failure is kept


def test_dask_executor_matches_local(tmp_path):
    distributed = pytest.importorskip("distributed")
    grid = toy_grid(sweep={"lint": False}, grid={"int_width": [4], "banks": [2, 4]})
    local = sweep.run_sweep(grid, tmp_path / "local", jobs=1)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        s = sweep.run_sweep(grid, tmp_path / "dask", executor="dask", scheduler=cluster.scheduler_address)
    assert (s.ran, s.ok, s.failed) == (2, 2, 0)
    key = ("id", "toy.cells", "toy.area_ge", "toy.flip_flops", "toy.sram_bits")
    assert ([{k: r[k] for k in key} for r in read_csv(s.csv)]
            == [{k: r[k] for k in key} for r in read_csv(local.csv)])


def test_dask_needs_a_scheduler(tmp_path):
    with pytest.raises(ConfigError) as exc:
        sweep.run_sweep(toy_grid(), tmp_path, executor="dask")
    assert exc.value.field == "--scheduler"


def test_cli_sweep_json(tmp_path, capsys):
    from gen.cli import main

    g = tmp_path / "g.toml"
    g.write_text(f"""
[sweep]
tops = ["toy"]
lint = false
blocks = {{ toy = "{TOY}" }}
[base]
datatype = "int16"
net_ports = 2
num_ces = 2
lanes = 2
[grid]
banks = [2, 3]
""")
    rc = main(["sweep", "--grid", str(g), "--out", str(tmp_path / "o"), "--json", "-j", "1"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["points"] == 2 and out["ok"] == 1 and out["failed"] == 1  # banks=3 is not a power of two
    rows = read_csv(out["csv"])
    assert [r["status"] for r in rows] == ["ok", "failed"] and "banks" in rows[1]["error"]


def test_cycles_come_from_the_analytical_model(tmp_path):
    from gen.design.config import FettaConfig
    from gen.search import model_phase
    from gen.workload.spec import load_spec

    grid = toy_grid(sweep={"lint": False, "layers": ["examples/atis_tt.json"], "phase": "fp"},
                    base={"net_ports": 16, "banks": 16, "lanes": 4},
                    grid={"int_width": [16], "int_acc_width": [32], "banks": [16], "num_ces": [4, 16]})
    s = sweep.run_sweep(grid, tmp_path / "sw", jobs=1)
    rows = {int(r["num_ces"]): r for r in read_csv(s.csv)}
    assert [(r["status"], r["error"], r.get("cycles_error", "")) for r in rows.values()] == [("ok", "", "")] * 2
    spec = load_spec(sweep.ROOT / "examples" / "atis_tt.json")
    for n, r in rows.items():
        cfg = FettaConfig(datatype="int16", int_width=16, int_acc_width=32, net_ports=16, num_ces=n, banks=16)
        assert int(r["cycles.atis_tt"]) == model_phase(spec, "fp", cfg).cycles > 0
    assert int(rows[16]["cycles.atis_tt"]) < int(rows[4]["cycles.atis_tt"])
    assert {p.name for p in s.plots} == {"area_toy.png", "cycles_vs_area_toy.png"}
