"""The one configuration object: defaults, TOML, --set, and one-line errors naming the field."""

from __future__ import annotations

import pytest

from gen.cli import main as fetta
from gen.design.config import FettaConfig, load_config
from gen.errors import ConfigError


def test_defaults_are_the_paper_design_point():
    c = FettaConfig()
    assert (c.num_ces, c.ce_rows, c.ce_cols, c.macs) == (16, 4, 4, 256)
    assert (c.banks, c.lanes, c.unified_kb, c.accum_kb, c.datatype) == (16, 4, 512, 128, "bf16")
    # 512 KiB over 16 banks of 4 bf16 elements = 4096 rows; 128 KiB of 4 FP32 = 512 rows
    assert c.unified_rows_per_bank == 4096 and c.accum_rows_per_bank == 512


def test_toml_and_overrides(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[fetta]\nnum_ces = 4\nnet_ports = 4\nbanks = 8\ndatatype = "int16"\n')
    c = load_config(f, ["ce_rows=2", "freq_mhz=500", "banks=0x10"])
    assert (c.num_ces, c.net_ports, c.banks, c.ce_rows, c.freq_mhz, c.datatype) == (4, 4, 16, 2, 500.0, "int16")
    flat = tmp_path / "flat.toml"
    flat.write_text("lanes = 2\n")
    assert load_config(flat).lanes == 2
    assert load_config("configs/default.toml") == FettaConfig()
    load_config("configs/small.toml")


@pytest.mark.parametrize("override,field", [
    ("datatype=fp8", "datatype"),
    ("ce_rows=0", "ce_rows"),
    ("ce_cols=x", "ce_cols"),
    ("net_ports=12", "net_ports"),
    ("banks=8", "banks"),
    ("num_ces=32", "num_ces"),
    ("int_acc_width=20", "int_acc_width"),
    ("unified_kb=0", "unified_kb"),
    ("freq_mhz=-1", "freq_mhz"),
    ("nonsense=1", "nonsense"),
    ("novalue", "novalue"),
])
def test_invalid_configs_name_the_field(override, field):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert e.value.field == field
    assert f"'{field}'" in str(e.value)


def test_replace_validates():
    with pytest.raises(ConfigError):
        FettaConfig().replace(lanes=0)
    assert FettaConfig().replace(lanes=8).lanes == 8


def test_cli_reports_config_errors(capsys, tmp_path):
    code = fetta(["verilog", "--set", "net_ports=6", "-o", str(tmp_path / "x.v")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == "fetta: error: config field 'net_ports': must be a power of two >= 2, got 6"
    assert not (tmp_path / "x.v").exists()
    assert fetta(["verilog", "--config", str(tmp_path / "missing.toml"), "-o", str(tmp_path / "x.v")]) == 2
    assert "file not found" in capsys.readouterr().err
