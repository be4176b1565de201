"""Layer specs: valid shapes for every format, and every malformed case (issue 2, item 4)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from gen.cli import main as fetta
from gen.errors import SpecError
from gen.workload.spec import FORMATS, parse_spec

BASE = {"name": "x", "format": "tt", "in_modes": [4, 3], "out_modes": [2, 5], "ranks": 3, "batch": 2}


def spec_with(**changes):
    d = dict(BASE)
    for k, v in changes.items():
        if v is ...:
            d.pop(k, None)
        else:
            d[k] = v
    return d


# (spec dict, field that the message must name, a word the message must contain)
MALFORMED = [
    (spec_with(format="cp"), "format", "unknown format"),
    (spec_with(format=...), "format", "missing"),
    (spec_with(in_modes=[4, 0]), "in_modes", "positive"),
    (spec_with(in_modes=[4, -3]), "in_modes", "positive"),
    (spec_with(out_modes=[]), "out_modes", "non-empty"),
    (spec_with(out_modes=[2.5, 2]), "out_modes", "positive integer"),
    (spec_with(ranks=0), "ranks", "positive"),
    (spec_with(ranks=[3, 3]), "ranks", "needs 3 ranks"),
    (spec_with(ranks=[3, 0, 3]), "ranks", "positive"),
    (spec_with(format="tr", ranks=[3, 3, 3]), "ranks", "needs 4 ranks"),
    (spec_with(format="ht", ranks=[3, 3, 3]), "ranks", "one integer rank"),
    (spec_with(format="ttm", in_modes=[4, 3, 2]), "out_modes", "as many in_modes as out_modes"),
    (spec_with(format="ttm", ranks=[2, 2]), "ranks", "needs 1 ranks"),
    (spec_with(batch=0), "batch", "positive"),
    (spec_with(batch="32"), "batch", "positive integer"),
    (spec_with(batch=...), "batch", "missing"),
    (spec_with(in_features=13), "in_features", "mode product mismatch"),
    (spec_with(out_features=11), "out_features", "mode product mismatch"),
    (spec_with(blocks=2), "blocks", "only the bt format"),
    (spec_with(format="bt", blocks=0), "blocks", "positive"),
    (spec_with(rank=3), "rank", "unknown field"),
]


@pytest.mark.parametrize("bad,field,words", MALFORMED, ids=[f"{f}-{i}" for i, (_, f, _) in enumerate(MALFORMED)])
def test_malformed_spec_cli(bad, field, words, tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(bad))
    out = tmp_path / "out.npz"
    code = fetta(["golden", "--spec", str(spec), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert f"'{field}'" in err and words in err, err
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [spec]  # no temporary left behind either


@pytest.mark.parametrize("text,words", [("{not json", "not valid JSON"), ("[1, 2]", "JSON object")])
def test_not_a_spec(text, words, tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text(text)
    assert fetta(["golden", "--spec", str(spec), "--out", str(tmp_path / "o.npz")]) == 2
    assert words in capsys.readouterr().err
    assert not (tmp_path / "o.npz").exists()


def test_malformed_spec_real_process(tmp_path):
    """The exit code is the process's (not only main()'s return value)."""
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(spec_with(format="ttm", in_modes=[2, 2, 2])))
    out = tmp_path / "o.npz"
    r = subprocess.run([sys.executable, "-m", "gen", "golden", "--spec", str(spec), "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().startswith("fetta: error: spec field 'out_modes'")
    assert r.stdout == "" and not out.exists()


def test_missing_spec_file(tmp_path, capsys):
    assert fetta(["golden", "--spec", str(tmp_path / "nope.json"), "--out", str(tmp_path / "o.npz")]) == 2
    assert "file not found" in capsys.readouterr().err


# --- valid specs -----------------------------------------------------------------------
def test_core_shapes_per_format():
    n_in, n_out = [4, 3], [2, 5]
    tt = parse_spec(spec_with())
    assert tt.core_shapes() == [(1, 4, 3), (3, 3, 3), (3, 2, 3), (3, 5, 1)]
    tt_list = parse_spec(spec_with(ranks=[2, 3, 4]))
    assert tt_list.core_shapes() == [(1, 4, 2), (2, 3, 3), (3, 2, 4), (4, 5, 1)]
    tr = parse_spec(spec_with(format="tr", ranks=[2, 3, 4, 5]))
    assert tr.core_shapes() == [(2, 4, 3), (3, 3, 4), (4, 2, 5), (5, 5, 2)]
    ttm = parse_spec(spec_with(format="ttm", ranks=[6]))
    assert ttm.core_shapes() == [(1, 4, 2, 6), (6, 3, 5, 1)]
    dense = parse_spec(spec_with(format="dense", ranks=...))
    assert dense.core_shapes() == [(12, 10)]
    # ht over 4 modes: leaves 0..3, then (0,1) -> core 4, (2,3) -> core 5, root -> core 6
    ht = parse_spec(spec_with(format="ht"))
    assert ht.core_shapes() == [(4, 3), (3, 3), (2, 3), (5, 3), (3, 3, 3), (3, 3, 3), (3, 3, 1)]
    bt = parse_spec(spec_with(format="bt", blocks=2, ranks=2))
    assert bt.core_shapes() == 2 * [(2, 2, 2, 2), (4, 2), (3, 2), (2, 2), (5, 2)]
    tucker = parse_spec(spec_with(format="tucker", ranks=2))
    assert tucker.core_shapes() == [(2, 2, 2, 2), (4, 2), (3, 2), (2, 2), (5, 2)]
    assert tt.I == 12 and tt.O == 10 and tt.modes == tuple(n_in + n_out)


def test_ht_odd_split():
    """A node with modes m splits into m[:ceil(len/2)] and the rest: 5 modes -> (3, 2)."""
    ht = parse_spec(spec_with(format="ht", in_modes=[2, 2, 2], out_modes=[2, 2], ranks=2))
    root = ht.ht_tree()
    assert root.left.modes == (0, 1, 2) and root.right.modes == (3, 4)
    assert root.left.left.modes == (0, 1) and root.left.right.modes == (2,)
    # post-order numbering after the 5 leaves: (0,1)=5, (0,1,2)=6, (3,4)=7, root=8
    assert (root.left.left.core, root.left.core, root.right.core, root.core) == (5, 6, 7, 8)
    assert ht.core_shapes()[-1] == (2, 2, 1)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_parses(fmt):
    d = spec_with(format=fmt, in_modes=[2, 3], out_modes=[3, 2])
    if fmt == "dense":
        d.pop("ranks")
    s = parse_spec(d)
    assert s.format == fmt and s.num_cores >= 1
    assert s.params() == sum(math.prod(x) for x in s.core_shapes())
    assert parse_spec(s.to_json()) == s


def test_spec_error_is_value_error():
    with pytest.raises(ValueError):
        parse_spec(spec_with(format="nope"))
    with pytest.raises(SpecError) as e:
        parse_spec(spec_with(ranks=[1]))
    assert e.value.field == "ranks"
