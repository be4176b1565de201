"""The fetta command line: golden end to end, JSON output, help."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from gen.cli import main as fetta


def test_golden_all_formats(tmp_path, capsys):
    import glob

    # every layer spec among the examples (the transformer model files are fetta train's, not specs)
    specs = sorted(s for s in glob.glob("examples/*.json") if "transformer" not in s)
    formats = set()
    for s in specs:
        out = tmp_path / "g.npz"
        assert fetta(["golden", "--spec", s, "--seed", "2", "--out", str(out), "--json"]) == 0
        info = json.loads(capsys.readouterr().out)
        formats.add(info["format"])
        with np.load(out) as z:
            assert {"X", "dY", "Y", "dX", "spec", "core_0", "dcore_0"} <= set(z.files)
    assert formats == {"dense", "tt", "tr", "ttm", "ht", "bt", "tucker"}


def test_python_dash_m_gen_help():
    r = subprocess.run([sys.executable, "-m", "gen", "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    assert "golden" in r.stdout and "verilog" in r.stdout


def test_no_command_is_an_error(capsys):
    assert fetta([]) == 2
