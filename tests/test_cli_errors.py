"""Every bad input gets one clear error (issue 22): a table of malformed specs, configurations,
options, paths and input npz files run through ``gen.cli.main`` in-process. Each must exit with
code 2, print one line ``fetta: error: ...`` naming the field or option, no traceback, within a
few seconds, and leave nothing on disk. Also ``fetta run --inputs F.npz`` (INTERFACES section 5).
"""

from __future__ import annotations

import io
import json
import os
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from gen.cli import main as fetta
from sim.golden import golden, write_npz
from gen.workload.spec import parse_spec

DENSE = {"name": "dense-small", "format": "dense", "in_modes": [24], "out_modes": [20], "batch": 12}
TT = {"name": "tt-tiny", "format": "tt", "in_modes": [4, 3], "out_modes": [2, 5], "ranks": 3, "batch": 2}
ROOT = Path(__file__).resolve().parents[1]
#: seconds one bad input may take (the issue asks for 10; every case here takes well under one)
LIMIT_S = 10

# spec files (name -> JSON text) that every command taking --spec must refuse, with the words of the line
BAD_SPECS = {
    "bt_huge": (json.dumps({"format": "bt", "in_modes": [4], "out_modes": [4], "ranks": 2, "batch": 1,
                            "blocks": 1_000_000_000}), ["'blocks'", "at most"]),
    "modes40": (json.dumps({"format": "tt", "in_modes": [2] * 20, "out_modes": [2] * 20, "ranks": 2, "batch": 1}),
                ["'out_modes'", "at most"]),
    "rank_huge": (json.dumps({**TT, "ranks": 10**9}), ["'ranks'", "at most"]),
    "rank_list_huge": (json.dumps({**TT, "ranks": [3, 10**12, 3]}), ["'ranks'", "at most"]),
    "batch_huge": (json.dumps({**DENSE, "batch": 10**12}), ["'batch'", "at most"]),
    "mode_huge": (json.dumps({**TT, "in_modes": [10**30, 3]}), ["'in_modes'", "at most"]),
    "features_huge": (json.dumps({**TT, "in_modes": [2**20, 2**20]}), ["'in_modes'", "product"]),
    "format_list": (json.dumps({**TT, "format": ["tt"]}), ["'format'", "unknown format"]),
    "name_int": (json.dumps({**TT, "name": 5}), ["'name'", "string"]),
    "batch_nan": ('{"format": "dense", "in_modes": [4], "out_modes": [4], "batch": NaN}', ["'batch'"]),
    "batch_float": (json.dumps({**DENSE, "batch": 1.5}), ["'batch'", "positive integer"]),
    "json_array": ("[1, 2, 3]", ["'<json>'", "JSON object"]),
    "json_empty": ("", ["'<json>'", "not valid JSON"]),
    "json_deep": ("[" * 100_000 + "]" * 100_000, ["'<json>'", "nested"]),
    "json_bigint": ('{"format": "dense", "in_modes": [' + "1" * 5000 + '], "out_modes": [2], "batch": 1}',
                    ["'<json>'", "digits"]),
}


def _npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _make_files(d) -> None:
    """The inputs of the cases, written into the test's folder ``d``."""
    (d / "dense.json").write_text(json.dumps(DENSE))
    (d / "tt.json").write_text(json.dumps(TT))
    for name, (text, _) in BAD_SPECS.items():
        (d / f"{name}.json").write_text(text)
    (d / "big.json").write_text(json.dumps({"format": "dense", "in_modes": [100000], "out_modes": [100000],
                                            "batch": 100000}))
    # a tr layer whose golden-model intermediates (4096) outgrow its inputs and results (2112)
    (d / "tr_inter.json").write_text(json.dumps({"format": "tr", "in_modes": [2] * 4, "out_modes": [2] * 4,
                                                 "ranks": 8, "batch": 1}))
    (d / "tt24.json").write_text(json.dumps({"format": "tt", "in_modes": [2] * 12, "out_modes": [2] * 12,
                                             "ranks": 2, "batch": 1}))
    (d / "bin.json").write_bytes(b"\xff\xfe\x00binary")
    (d / "g.npz").write_bytes(_npz_bytes(X=np.ones((2, 2), np.float32)))
    (d / "afile").write_text("not a folder\n")
    (d / "sub").mkdir()
    # configurations and grids
    (d / "bad.toml").write_text("num_ces = [[[\n")
    (d / "deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    (d / "unknown.toml").write_text("[fetta]\nfoo = 1\n")
    (d / "grid_huge.toml").write_text('[sweep]\ntops = ["pe"]\n[grid]\n' + "".join(
        f"{k} = [{', '.join(str(v) for v in range(1, 101))}]\n" for k in ("num_ces", "lanes", "unified_kb")))
    (d / "grid_table.toml").write_text('[sweep]\ntops = ["pe"]\n[grids]\nlanes = [4]\n')
    # input npz files of the dense layer (X [12, 24], dY [12, 20], core_0 [24, 20])
    ones = np.ones((12, 24), np.float32)
    (d / "in_shape.npz").write_bytes(_npz_bytes(X=np.ones((12, 23), np.float32)))
    (d / "in_dtype.npz").write_bytes(_npz_bytes(X=np.ones((12, 24), np.int64)))
    (d / "in_str.npz").write_bytes(_npz_bytes(X=np.array(["a"])))
    (d / "in_nan.npz").write_bytes(_npz_bytes(dY=np.full((12, 20), np.nan, np.float32)))
    (d / "in_inf.npz").write_bytes(_npz_bytes(dY=np.full((12, 20), np.inf, np.float32)))
    core = np.ones((24, 20), np.float32)
    core[3, 4] = 0.1
    (d / "in_bf16.npz").write_bytes(_npz_bytes(core_0=core))
    x64 = ones.astype(np.float64)
    x64[0, 1] = 1 + 2.0**-30
    (d / "in_f64.npz").write_bytes(_npz_bytes(X=x64))
    sub = ones.copy()
    sub[1, 1] = 2.0**-130
    (d / "in_sub.npz").write_bytes(_npz_bytes(X=sub))
    (d / "in_unknown.npz").write_bytes(_npz_bytes(X=ones, weights=ones))
    (d / "in_core1.npz").write_bytes(_npz_bytes(core_1=ones))
    (d / "in_text.npz").write_text("hello\n")
    np.save(d / "in.npy", ones)
    with zipfile.ZipFile(d / "in_badnpy.npz", "w") as z:
        z.writestr("X.npy", b"not an npy array")
    with zipfile.ZipFile(d / "in_trunc.npz", "w") as z:
        buf = io.BytesIO()
        np.save(buf, ones)
        z.writestr("X.npy", buf.getvalue()[:-10])
    buf = io.BytesIO()
    np.savez_compressed(buf, X=np.zeros((4000, 4000), np.float32))  # 64 MB unpacked, a few KB packed
    (d / "in_bomb.npz").write_bytes(buf.getvalue())


def _spec_cases() -> list:
    """Every bad spec through every command that reads one."""
    out = []
    for name, (_, words) in BAD_SPECS.items():
        spec = f"{{d}}/{name}.json"
        out += [(f"golden-{name}", ["golden", "--spec", spec, "--out", "{d}/o.npz"], words),
                (f"search-{name}", ["search", "--spec", spec, "--phase", "train"], words),
                (f"model-{name}", ["model", "--spec", spec, "--phase", "fp"], words),
                (f"run-{name}", ["run", "--spec", spec, "--out", "{d}/o.npz"], words)]
    return out


GOLDEN = ["golden", "--spec", "{d}/dense.json"]
RUN = ["run", "--spec", "{d}/dense.json"]
SEARCH = ["search", "--spec", "{d}/dense.json", "--phase", "fp"]
MODEL = ["model", "--spec", "{d}/dense.json", "--phase", "fp"]
SWEEP = ["sweep", "--grid", "{d}/grid_huge.toml"]

# (id, argv; "{d}" is the test's folder, words the one line must contain)
CASES = _spec_cases() + [
    # --- files given as --spec -------------------------------------------------------------------
    ("spec-missing", ["golden", "--spec", "{d}/none.json", "--out", "{d}/o.npz"], ["'--spec'", "not found"]),
    ("spec-folder", ["golden", "--spec", "{d}/sub", "--out", "{d}/o.npz"], ["'--spec'", "directory"]),
    ("spec-npz", ["golden", "--spec", "{d}/g.npz", "--out", "{d}/o.npz"], ["'--spec'", "UTF-8", "npz"]),
    ("spec-binary", ["search", "--spec", "{d}/bin.json", "--phase", "fp"], ["'--spec'", "UTF-8"]),
    ("spec-empty-name", ["model", "--spec", "", "--phase", "fp"], ["'--spec'", "empty"]),
    ("spec-not-given", ["golden", "--out", "{d}/o.npz"], ["--spec", "required"]),
    # --- sizes: refused before anything is allocated ----------------------------------------------
    ("golden-too-big", ["golden", "--spec", "{d}/big.json", "--out", "{d}/o.npz"],
     ["'in_modes'", "--max-elements", "60000000000"]),
    ("run-too-big", ["run", "--spec", "{d}/big.json"], ["'in_modes'", "--max-elements"]),
    ("golden-max-elements-small", [*GOLDEN, "--out", "{d}/o.npz", "--max-elements", "1000"],
     ["'in_modes'", "--max-elements", "1000"]),
    ("golden-intermediate-too-big", ["golden", "--spec", "{d}/tr_inter.json", "--out", "{d}/o.npz",
                                     "--max-elements", "3000"], ["'ranks'", "step", "--max-elements"]),
    ("golden-max-elements-zero", [*GOLDEN, "--out", "{d}/o.npz", "--max-elements", "0"], ["--max-elements"]),
    ("search-too-many-inputs", ["search", "--spec", "{d}/tt24.json", "--phase", "fp"], ["'network'", "22"]),
    # --- seeds and numbers --------------------------------------------------------------------------
    ("golden-seed-negative", [*GOLDEN, "--seed", "-1", "--out", "{d}/o.npz"], ["--seed", "non-negative"]),
    ("golden-seed-text", [*GOLDEN, "--seed", "abc", "--out", "{d}/o.npz"], ["--seed", "integer"]),
    ("golden-seed-float", [*GOLDEN, "--seed", "1.5", "--out", "{d}/o.npz"], ["--seed", "integer"]),
    ("run-seed-negative", [*RUN, "--seed", "-7"], ["--seed", "non-negative"]),
    ("run-pieces-zero", [*RUN, "--pieces", "0"], ["--pieces", "positive"]),
    ("run-pieces-dense", [*RUN, "--dram", "rule", "--pieces", "2"], ["pieces", "GEMM tiler"]),
    ("run-relayout-dense", [*RUN, "--dram", "rule", "--relayout", "host"], ["relayout", "GEMM tiler"]),
    ("run-relayout-choice", [*RUN, "--relayout", "always"], ["--relayout", "invalid choice"]),
    ("run-pieces-indivisible", ["run", "--spec", "{d}/tt.json", "--pieces", "3"], ["'pieces'", "3 batch pieces"]),
    ("search-top-k-zero", [*SEARCH, "--top-k", "0"], ["--top-k", "positive"]),
    ("search-top-k-text", [*SEARCH, "--top-k", "many"], ["--top-k", "integer"]),
    ("model-top-k-negative", [*MODEL, "--top-k", "-1"], ["--top-k", "positive"]),
    ("synth-jobs-zero", ["synth", "-j", "0"], ["--jobs", "positive"]),
    ("synth-timeout-negative", ["synth", "--timeout", "-5"], ["--timeout", "positive"]),
    ("synth-timeout-nan", ["synth", "--timeout", "nan"], ["--timeout", "positive"]),
    ("sweep-jobs-zero", [*SWEEP, "-j", "0"], ["--jobs", "positive"]),
    # --- choices and unknown options ------------------------------------------------------------------
    ("search-phase", ["search", "--spec", "{d}/dense.json", "--phase", "fwd"], ["--phase", "invalid choice"]),
    ("search-phase-missing", ["search", "--spec", "{d}/dense.json"], ["--phase", "required"]),
    ("search-metric", [*SEARCH, "--metric", "speed"], ["--metric", "invalid choice"]),
    ("search-arch", [*SEARCH, "--arch", "tpu"], ["unrecognized arguments", "--arch"]),
    ("model-arch", [*MODEL, "--arch", "gpu"], ["--arch", "invalid choice"]),
    ("run-sim", [*RUN, "--sim", "modelsim"], ["--sim", "invalid choice"]),
    ("run-phase", [*RUN, "--phase", "all"], ["--phase", "invalid choice"]),
    ("golden-unknown-option", [*GOLDEN, "--out", "{d}/o.npz", "--bogus"], ["--bogus", "unrecognized"]),
    ("unknown-command", ["compile"], ["'compile'", "invalid choice"]),
    ("verilog-top", ["verilog", "--top", "cpu", "-o", "{d}/x.v"], ["'--top'", "unknown block"]),
    # --- output paths: checked first, never created ------------------------------------------------
    ("golden-out-no-folder", [*GOLDEN, "--out", "{d}/nodir/x.npz"], ["--out", "does not exist"]),
    ("golden-out-folder", [*GOLDEN, "--out", "{d}/sub"], ["--out", "is a folder"]),
    ("golden-out-slash", [*GOLDEN, "--out", "{d}/nodir/"], ["--out", "names a folder"]),
    ("golden-out-empty", [*GOLDEN, "--out", ""], ["--out", "empty"]),
    ("golden-out-blank", [*GOLDEN, "--out", "  "], ["--out", "empty"]),
    ("golden-out-parent-file", [*GOLDEN, "--out", "{d}/afile/x.npz"], ["--out", "not a folder"]),
    ("golden-out-device", [*GOLDEN, "--out", os.devnull], ["--out", "not a regular file"]),
    ("run-out-no-folder", [*RUN, "--out", "{d}/nodir/x.npz"], ["--out", "does not exist"]),
    ("run-out-folder", [*RUN, "--out", "{d}"], ["--out", "is a folder"]),
    ("verilog-out-no-folder", ["verilog", "-o", "{d}/nodir/x.v"], ["--out", "does not exist"]),
    ("verilog-out-folder", ["verilog", "-o", "{d}/sub"], ["--out", "is a folder"]),
    ("verilog-out-empty", ["verilog", "-o", ""], ["--out", "empty"]),
    ("verilog-out-missing", ["verilog"], ["--out", "required"]),
    ("synth-out-no-folder", ["synth", "-o", "{d}/nodir/t.md"], ["--out", "does not exist"]),
    ("sweep-out-file", [*SWEEP, "--out", "{d}/afile"], ["--out", "not a folder"]),
    ("sweep-out-no-parent", [*SWEEP, "--out", "{d}/nodir/sweep"], ["--out", "does not exist"]),
    ("sweep-out-empty", [*SWEEP, "--out", ""], ["--out", "empty"]),
    # --- configurations -------------------------------------------------------------------------------
    ("run-config-npz", [*RUN, "--config", "{d}/g.npz"], ["'--config'", "UTF-8"]),
    ("run-config-folder", [*RUN, "--config", "{d}/sub"], ["'--config'", "directory"]),
    ("run-config-missing", [*RUN, "--config", "{d}/none.toml"], ["'--config'", "not found"]),
    ("verilog-config-npz", ["verilog", "--config", "{d}/g.npz", "-o", "{d}/x.v"], ["'--config'", "UTF-8"]),
    ("search-config-bad-toml", [*SEARCH, "--config", "{d}/bad.toml"], ["'--config'"]),
    ("model-config-deep", [*MODEL, "--config", "{d}/deep.toml"], ["'--config'", "nested"]),
    ("model-config-unknown-field", [*MODEL, "--config", "{d}/unknown.toml"], ["'foo'", "unknown field"]),
    ("lint-config-folder", ["lint", "--config", "{d}/sub"], ["'--config'", "directory"]),
    ("demo-config-missing", ["demo", "--config", "{d}/none.toml"], ["'--config'", "not found"]),
    ("demo-spec-binary", ["demo", "--config", str(ROOT / "configs" / "default.toml"), "--spec", "{d}/bin.json"],
     ["'--spec'", "UTF-8"]),
    ("run-set-no-equals", [*RUN, "--set", "num_ces"], ["'num_ces'", "key=value"]),
    ("run-set-not-int", [*RUN, "--set", "num_ces=many"], ["'num_ces'", "expected int"]),
    ("run-set-unknown", [*RUN, "--set", "cores=4"], ["'cores'", "unknown field"]),
    ("run-set-int16", [*RUN, "--set", "datatype=int16"], ["'datatype'", "bf16"]),
    ("run-set-unified-huge", [*RUN, "--set", "unified_kb=100000000"], ["'unified_kb'", "at most"]),
    ("run-set-accum-huge", [*RUN, "--set", "accum_kb=100000000"], ["'accum_kb'", "at most"]),
    ("verilog-set-lanes-huge", ["verilog", "--set", "vector_lanes=1000000000", "-o", "{d}/x.v"],
     ["'vector_lanes'", "at most"]),
    ("verilog-set-imem-huge", ["verilog", "--set", "imem_depth=1000000000", "-o", "{d}/x.v"],
     ["'imem_depth'", "at most"]),
    ("model-set-freq-nan", [*MODEL, "--set", "freq_mhz=nan"], ["'freq_mhz'", "finite"]),
    ("model-set-dram-inf", [*MODEL, "--set", "dram_gbps=inf"], ["'dram_gbps'", "finite"]),
    ("model-set-lanes-zero", [*MODEL, "--set", "lanes=0"], ["'lanes'", "positive"]),
    ("synth-config-npz", ["synth", "--config", "{d}/g.npz"], ["'--config'", "UTF-8"]),
    # --- sweep grids ------------------------------------------------------------------------------------
    ("sweep-grid-npz", ["sweep", "--grid", "{d}/g.npz"], ["'--grid'", "UTF-8"]),
    ("sweep-grid-folder", ["sweep", "--grid", "{d}/sub"], ["'--grid'", "directory"]),
    ("sweep-grid-missing", ["sweep", "--grid", "{d}/none.toml"], ["'--grid'", "not found"]),
    ("sweep-grid-bad-toml", ["sweep", "--grid", "{d}/bad.toml"], ["'--grid'"]),
    ("sweep-grid-deep", ["sweep", "--grid", "{d}/deep.toml"], ["'--grid'", "nested"]),
    ("sweep-grid-huge", [*SWEEP, "--out", "{d}/sw"], ["'grid'", "points"]),
    ("sweep-grid-unknown-table", ["sweep", "--grid", "{d}/grid_table.toml", "--out", "{d}/sw"], ["'grids'"]),
    # --- fetta run --inputs F.npz ------------------------------------------------------------------------
    ("inputs-missing", [*RUN, "--inputs", "{d}/none.npz"], ["--inputs", "not found"]),
    ("inputs-folder", [*RUN, "--inputs", "{d}/sub"], ["--inputs", "directory"]),
    ("inputs-empty-name", [*RUN, "--inputs", ""], ["--inputs", "empty"]),
    ("inputs-text", [*RUN, "--inputs", "{d}/in_text.npz"], ["--inputs", "not an npz"]),
    ("inputs-npy", [*RUN, "--inputs", "{d}/in.npy"], ["--inputs", "not an npz"]),
    ("inputs-spec-json", [*RUN, "--inputs", "{d}/dense.json"], ["--inputs", "not an npz"]),
    ("inputs-shape", [*RUN, "--inputs", "{d}/in_shape.npz"], ["'X'", "shape [12, 23]", "[12, 24]"]),
    ("inputs-dtype", [*RUN, "--inputs", "{d}/in_dtype.npz"], ["'X'", "dtype int64"]),
    ("inputs-strings", [*RUN, "--inputs", "{d}/in_str.npz"], ["'X'", "dtype"]),
    ("inputs-nan", [*RUN, "--inputs", "{d}/in_nan.npz"], ["'dY'", "not finite"]),
    ("inputs-inf", [*RUN, "--inputs", "{d}/in_inf.npz"], ["'dY'", "not finite"]),
    ("inputs-not-bf16", [*RUN, "--inputs", "{d}/in_bf16.npz"], ["'core_0'", "bfloat16", "[3, 4]"]),
    ("inputs-f64-not-bf16", [*RUN, "--inputs", "{d}/in_f64.npz"], ["'X'", "bfloat16", "[0, 1]"]),
    ("inputs-subnormal", [*RUN, "--inputs", "{d}/in_sub.npz"], ["'X'", "subnormal"]),
    ("inputs-unknown-key", [*RUN, "--inputs", "{d}/in_unknown.npz"], ["'weights'", "unknown key"]),
    ("inputs-core-out-of-range", [*RUN, "--inputs", "{d}/in_core1.npz"], ["'core_1'", "unknown key"]),
    ("inputs-bad-npy", [*RUN, "--inputs", "{d}/in_badnpy.npz"], ["'X'", "npy"]),
    ("inputs-truncated", [*RUN, "--inputs", "{d}/in_trunc.npz"], ["'X'", "truncated"]),
    ("inputs-zip-bomb", [*RUN, "--inputs", "{d}/in_bomb.npz"], ["'X'", "shape [4000, 4000]"]),
    ("inputs-other-spec", ["run", "--spec", "{d}/tt.json", "--inputs", "{d}/in_shape.npz"], ["'X'", "shape"]),
]


def _listing(d) -> dict:
    return {str(p.relative_to(d)): p.stat().st_size for p in sorted(d.rglob("*"))}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad-inputs")
    _make_files(d)
    return d


@pytest.mark.parametrize("argv,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_gives_one_line(argv, words, files, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may land in the current folder (or the repository) either
    before = _listing(files)
    t0 = time.perf_counter()
    code = fetta([a.format(d=files) for a in argv])
    seconds = time.perf_counter() - t0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert code == 2, captured.err
    assert len(lines) == 1 and lines[0].startswith("fetta: error: "), captured.err
    assert "Traceback" not in captured.err
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert captured.out == ""
    assert _listing(files) == before and not any(tmp_path.iterdir()), "something was written"
    assert seconds < LIMIT_S


def test_at_least_a_hundred_cases():
    assert len(CASES) >= 100 and len({c[0] for c in CASES}) == len(CASES)


def test_read_only_folder(tmp_path, capsys, monkeypatch):
    """An output folder the user cannot write (simulated: the tests may run as root, who can)."""
    (tmp_path / "s.json").write_text(json.dumps(DENSE))
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(tmp_path / "ro")
                        else real_access(p, mode, **kw))
    (tmp_path / "ro").mkdir()
    code = fetta(["golden", "--spec", str(tmp_path / "s.json"), "--out", str(tmp_path / "ro" / "g.npz")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--out" in err and "not writable" in err
    assert not any((tmp_path / "ro").iterdir())


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_for_real(tmp_path, capsys):
    (tmp_path / "s.json").write_text(json.dumps(DENSE))
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        code = fetta(["golden", "--spec", str(tmp_path / "s.json"), "--out", str(ro / "g.npz")])
    finally:
        ro.chmod(0o755)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "not writable" in err


@pytest.mark.parametrize("exc,words", [(MemoryError(), "out of memory"),
                                       (OSError(28, "No space left on device", "g.npz"), "No space left"),
                                       (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid"), "UTF-8")])
def test_last_guard(exc, words, tmp_path, capsys, monkeypatch):
    """What the checks up front miss is still one line with exit code 2."""
    (tmp_path / "s.json").write_text(json.dumps(DENSE))

    def fail(*a, **k):
        raise exc

    monkeypatch.setattr("gen.cli.golden.golden", fail)
    code = fetta(["golden", "--spec", str(tmp_path / "s.json"), "--out", str(tmp_path / "g.npz")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("fetta: error: ") and words in err


def test_bugs_keep_their_traceback(tmp_path, monkeypatch):
    """A programming error is not hidden behind a one-line message."""
    (tmp_path / "s.json").write_text(json.dumps(DENSE))
    monkeypatch.setattr("gen.cli.golden.golden", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        fetta(["golden", "--spec", str(tmp_path / "s.json"), "--out", str(tmp_path / "g.npz")])


def test_outputs_still_written(tmp_path, capsys):
    """The checks pass good paths: a relative name in the current folder and an existing file."""
    (tmp_path / "s.json").write_text(json.dumps(DENSE))
    out = tmp_path / "g.npz"
    for _ in range(2):  # the second run replaces the file
        assert fetta(["golden", "--spec", str(tmp_path / "s.json"), "--out", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.npz", "s.json"]  # no temporary file left
    mask = os.umask(0o022)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask  # as open() makes files, not mkstemp's 0600


# --- fetta run --inputs --------------------------------------------------------------------------------
def _run(argv, capsys) -> dict:
    assert fetta(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("spec", [DENSE, TT], ids=["dense", "tt"])
def test_inputs_round_trip(spec, tmp_path, capsys):
    """The golden npz of seed 3 read back with --inputs (seed 0 otherwise) runs exactly as --seed 3."""
    s = tmp_path / "s.json"
    s.write_text(json.dumps(spec))
    g = tmp_path / "g.npz"
    assert fetta(["golden", "--spec", str(s), "--seed", "3", "--out", str(g)]) == 0
    capsys.readouterr()
    base = ["run", "--spec", str(s), "--phase", "train", "--sim", "emulator"]
    a = _run(base + ["--inputs", str(g), "--out", str(tmp_path / "a.npz")], capsys)
    b = _run(base + ["--seed", "3", "--out", str(tmp_path / "b.npz")], capsys)
    n = parse_spec(spec).num_cores
    assert a["inputs"] == {"file": str(g), "keys": sorted(["X", "dY"] + [f"core_{k}" for k in range(n)]), "seed": 0}
    for key in ("cycles", "macs", "max_rel_err"):
        assert a[key] == b[key], key
    with np.load(tmp_path / "a.npz") as za, np.load(tmp_path / "b.npz") as zb:
        assert sorted(za.files) == sorted(zb.files)
        for k in za.files:
            assert np.array_equal(za[k], zb[k]), k


def test_inputs_missing_keys_come_from_the_seed(tmp_path, capsys):
    """A file with X only (float64, bf16-exact): X from the file, dY and the cores from --seed."""
    s = tmp_path / "s.json"
    s.write_text(json.dumps(TT))
    spec = parse_spec(TT)
    X = golden(spec, 5)["X"].astype(np.float64)
    np.savez(tmp_path / "x.npz", X=X)
    a = _run(["run", "--spec", str(s), "--phase", "fp", "--inputs", str(tmp_path / "x.npz"), "--seed", "2",
              "--out", str(tmp_path / "a.npz")], capsys)
    assert a["inputs"]["keys"] == ["X"]
    ref = golden(spec, 2)
    with np.load(tmp_path / "a.npz") as z:
        assert z["X"].dtype == np.float32 and np.array_equal(z["X"], X)
        assert np.array_equal(z["dY"], ref["dY"])
        for k in range(spec.num_cores):
            assert np.array_equal(z[f"core_{k}"], ref[f"core_{k}"])
    assert a["max_rel_err"] < 2**-6


def test_inputs_golden_npz_of_other_results_is_accepted(tmp_path, capsys):
    """Result keys (Y, dX, dcore_k) and spec in the file are skipped, whatever their values."""
    spec = parse_spec(DENSE)
    arrays = golden(spec, 1)
    arrays["Y"] = np.full_like(arrays["Y"], np.nan)
    write_npz(tmp_path / "g.npz", arrays, spec)
    (tmp_path / "s.json").write_text(json.dumps(DENSE))
    a = _run(["run", "--spec", str(tmp_path / "s.json"), "--inputs", str(tmp_path / "g.npz")], capsys)
    assert a["inputs"]["keys"] == ["X", "core_0", "dY"]
