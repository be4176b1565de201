# amaranth: UnusedElaboratable=no
"""The compiler (gen/compiler/): every format x phase on the emulator vs the float64 golden model,
random specs (hypothesis), layouts, and the RTL replay (emulator == RTL bit and cycle exactly).

Error bound (derived in docs/compiler.md): a network of ``n`` inputs is ``n - 1`` pairwise steps;
each step sums exact bf16 x bf16 products in FP32 (``|theta| <= gamma_K = K u32 / (1 - K u32)``,
``u32 = 2^-24``, ``K`` the step's contracted size) and rounds the result to bf16 (``|delta| <= u =
2^-8``). Every product of inputs reaching the result passes at most ``n - 1`` such steps, so
``|Y - Y64| <= (((1 + u)(1 + gamma_K))^(n-1) - 1) * Yabs`` elementwise, ``Yabs`` the same network
contracted on ``|inputs|``. Block terms are summed on the host in float64 (their bounds add).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gen.compiler import CompileError, Layout, compile_layer
from gen.compiler.relayout import RELAYOUT_CAUSES
from gen.compiler import phases
from gen.compiler.phases import (NEAR, _best, _Policy, compile_networks, piece_program, recomputed_macs,
                                 spill_candidates)
from gen.toolflow.execute import execute, rtl_check
from gen.design.config import FettaConfig, load_config
from gen.design.isa import Flag, Opcode, Transpose
from gen.workload.network import phase_networks
from gen.workload.spec import parse_spec
from sim.golden import compute, random_inputs
from tests.strategies import covering, examples

DEFAULT = FettaConfig()
SMALL = FettaConfig(num_ces=4, net_ports=4, banks=4, unified_kb=4, accum_kb=2, imem_depth=16)
#: the 4-CE demo design (configs/demo.toml): room for a training step's batch piece in one half
DEMO = load_config("configs/demo.toml")

SPECS = {
    "dense": {"format": "dense", "in_modes": [24], "out_modes": [20], "batch": 8},
    "tt": {"format": "tt", "in_modes": [4, 6], "out_modes": [6, 4], "ranks": 4, "batch": 8},
    "tr": {"format": "tr", "in_modes": [4, 6], "out_modes": [6, 4], "ranks": 3, "batch": 8},
    "ttm": {"format": "ttm", "in_modes": [4, 6], "out_modes": [6, 4], "ranks": 5, "batch": 8},
    "ht": {"format": "ht", "in_modes": [4, 6], "out_modes": [6, 4], "ranks": 3, "batch": 8},
    "bt": {"format": "bt", "in_modes": [4, 6], "out_modes": [6, 4], "ranks": 3, "blocks": 2, "batch": 8},
    "tucker": {"format": "tucker", "in_modes": [4, 6], "out_modes": [6, 4], "ranks": 3, "batch": 8},
}
U = 2.0 ** -8
U32 = 2.0 ** -24


def bound(spec, inputs, phases, prog):
    """Elementwise error bound per result key (see the module docstring).

    ``K`` is the largest contracted size of any step the compiler actually emitted
    (``prog.steps``); padded sizes only make it larger, which keeps the bound valid.
    """
    absin = {k: np.abs(v) for k, v in inputs.items()}
    yabs = compute(spec, absin, phases=phases)
    K = max(math.prod(prog.sizes[m] for m in set(st.lhs) | set(st.rhs) if m not in st.out) for st in prog.steps)
    K *= prog.pieces    # a weight gradient carried across batch pieces accumulates P pieces' sums
    assert K * U32 < 0.01, f"contracted size {K} too large for the first-order bound"
    gamma = K * U32 / (1 - K * U32)
    out = {}
    for ph in phases:
        for net in phase_networks(spec, ph):
            factor = ((1 + U) * (1 + gamma)) ** (len(net.inputs) - 1) - 1
            out[net.target] = max(out.get(net.target, 0.0), factor)
    return {k: out[k] * yabs[k] for k in yabs}


def check_layer(spec, phase, config=DEFAULT, seed=0, align=False, prog=None, **kw):
    """Compile (``kw``: :func:`compile_layer`'s options; or take ``prog``), execute, and check every
    result against the float64 golden model within the derived bound."""
    inputs = random_inputs(spec, seed)
    prog = prog or compile_layer(spec, phase, config, align=align, **kw)
    ex = execute(prog, inputs, config)
    phases = {"train": ["fp", "bp", "wg"], "backward": ["bp", "wg"]}.get(phase, [phase])
    gold = compute(spec, inputs, phases=phases)
    bnd = bound(spec, inputs, phases, prog)
    assert set(ex.results) == set(gold)
    for k, ref in gold.items():
        got = ex.results[k]
        assert got.shape == ref.shape, k
        err = np.abs(got - ref)
        assert np.all(err <= bnd[k] + 1e-30), (k, float(np.max(err - bnd[k])))
        # and not trivially: the result is not all zeros
        assert np.max(np.abs(got)) > 0
    assert ex.cycles > 0 and prog.macs > 0
    return prog, ex


@pytest.mark.parametrize("phase", ["fp", "bp", "wg", "train"])
@pytest.mark.parametrize("fmt", list(SPECS))
def test_format_phase_emulator(fmt, phase):
    check_layer(parse_spec(SPECS[fmt]), phase)


@pytest.mark.parametrize("fmt", [f if f in ("dense", "tt", "ttm", "ht") else pytest.param(f, marks=pytest.mark.slow)
                                 for f in SPECS])     # make test: the formats of ~60 % of its time
def test_backward_phase(fmt):
    """``backward`` (a training step's backward pass, whose forward pass made ``Y``): ``dX`` and the core
    gradients within the golden model's bound and no ``Y``; its MACs less the FP steps it computes again
    (:func:`recomputed_macs`: FP's path but the last step) are the ``train`` program's less the ``fp``
    program's, and FP's last step is not among them (one-core layers have no intermediate: no FP at all).
    The ``train`` program is compiled with the ``backward`` winner's batch pieces, views and sharing: a
    training phase in batch pieces may start WG networks from other saved tensors (fewer MACs)."""
    spec = parse_spec(SPECS[fmt])
    prog, _ = check_layer(spec, "backward")
    v = prog.variant
    train = compile_layer(spec, "train", DEFAULT, pieces=v["pieces"], views=v["views"], share=v["share"])
    fp = compile_layer(spec, "fp", DEFAULT)
    assert prog.macs - recomputed_macs(spec, prog) == train.macs - fp.macs
    assert prog.macs < train.macs
    assert recomputed_macs(spec, prog) < fp.macs
    assert (recomputed_macs(spec, prog) == 0) == (fmt == "dense")


@pytest.mark.parametrize("fmt", ["tt", "ttm", "tr"])
def test_small_config_emulator(fmt):
    """The 4-CE test configuration (small memories, 16-instruction imem: many runs and segments)."""
    prog, _ = check_layer(parse_spec(SPECS[fmt]), "train", SMALL)
    assert len(prog.runs) > 1


#: 3 KiB unified memory (192 rows per half): a batch-32 layer's ``X`` alone does not fit one half
CHUNK = FettaConfig(num_ces=4, net_ports=4, banks=4, unified_kb=3, accum_kb=2, imem_depth=16)


@pytest.mark.parametrize("fmt,phase", covering(["tt", "tr", "ttm", "ht", "bt", "tucker"], ["wg", "train", "fp", "bp"]))
def test_chunked_steps(fmt, phase):
    """Steps larger than one ping-pong half are split over free modes (host slices + concatenation)
    or over contracted ones (partial sums in the accumulation unit), results stay within the derived
    bound, and the streamed pieces are counted as DRAM traffic."""
    spec = parse_spec(dict(SPECS[fmt], batch=32))
    prog, _ = check_layer(spec, phase, CHUNK, pieces=1)     # batch pieces would fit a half
    assert prog.chunked_steps > 0 and prog.chunk_slices > 0
    half_bytes = CHUNK.unified_kb * 1024 // 2
    x_bytes = 32 * math.prod(spec.in_modes) * 2
    assert x_bytes >= half_bytes   # X and any result of it cannot share one half
    # every slice is written once: the DRAM model moved at least the whole X
    assert prog.dram_bytes >= x_bytes


def test_train_reuses_fp_intermediates():
    spec = parse_spec(SPECS["tt"])
    with_reuse = compile_layer(spec, "train", DEFAULT)
    plain = sum(compile_layer(spec, p, DEFAULT).macs for p in ("fp", "bp", "wg"))
    assert with_reuse.reused, "some WG network must use a saved FP/BP intermediate"
    assert with_reuse.macs < plain


@pytest.mark.parametrize("fmt", ["tt", "tr", "ht", "bt", "tucker"])
def test_wg_networks_share_intermediates(fmt):
    """WG networks start from intermediates of earlier WG networks where that saves MACs (every WG
    network contracts the same inputs but one core), and compile_layer keeps the program only when it
    is no slower end to end than the one without; the shared program equals the golden model."""
    spec = parse_spec(SPECS[fmt])
    shared, _ = check_layer(spec, "wg", seed=3)
    plain = compile_layer(spec, "wg", DEFAULT, share=False)
    assert shared.reused and shared.variant["share"], "some WG network must start from a shared intermediate"
    assert all(n.startswith("dcore") for used in shared.reused.values() for n in used)
    assert shared.macs < plain.macs
    assert shared.timeline(DEFAULT).cycles <= plain.timeline(DEFAULT).cycles


def test_layout_pack_roundtrip():
    sizes = {"a": 3, "b": 5, "c": 6}
    arr = np.arange(90, dtype=np.float32).reshape(3, 5, 6)
    lay = Layout.make(("c", "a", "b"), sizes, 4, padded=("a",))
    assert lay.lane == "b" and lay.ext == (6, 4, 8) and lay.rows == 6 * 4 * 2
    rows = lay.pack(arr, ("a", "b", "c"))
    back = lay.unpack(rows, sizes)
    assert np.array_equal(back, np.transpose(arr, (2, 0, 1)))
    # row addressing: element (a, b, c) at row c*8 + a*2 + b//4, lane b%4
    assert rows[2 * 8 + 1 * 2 + 1, 0] == arr[1, 4, 2]
    assert np.all(rows.reshape(6, 4, 8)[:, 3, :] == 0) and np.all(rows.reshape(6, 4, 8)[:, :, 5:] == 0)


@settings(max_examples=40, deadline=None)
@given(ext=st.lists(st.integers(1, 13), min_size=1, max_size=4), pad_a=st.booleans(),
       align=st.sampled_from([4, 16]))
def test_aligned_layout(ext, pad_a, align):
    """Aligned strides: powers of two below ``align`` or multiples of it, nested (each divides the
    next coarser one), never smaller than compact, and pack/unpack still round-trip."""
    modes = tuple("abcd"[:len(ext)])
    sizes = dict(zip(modes, ext))
    padded = ("a",) if pad_a and len(modes) > 1 else ()
    lay = Layout.make(modes, sizes, 4, padded=padded, align=align)
    compact = Layout.make(modes, sizes, 4, padded=padded)
    assert lay.ext == compact.ext and lay.rows >= compact.rows
    for i, s in enumerate(lay.rstride):
        assert s >= compact.rstride[i]
        assert (s < align and s & (s - 1) == 0) or s % align == 0, lay
        if i:
            assert lay.rstride[i - 1] % s == 0
    arr = np.arange(math.prod(ext), dtype=np.float32).reshape(ext) + 1
    back = lay.unpack(lay.pack(arr, modes), sizes)
    assert np.array_equal(back, arr)
    assert np.count_nonzero(lay.pack(arr, modes)) == arr.size


@settings(max_examples=60, deadline=None)
@given(ext=st.lists(st.integers(1, 13), min_size=2, max_size=4), lane=st.integers(5, 14),
       below=st.integers(0, 3), align=st.sampled_from([0, 4, 16]))
def test_layout_lane_blocks_above_row_modes(ext, lane, below, align):
    """A lane of several blocks with ``below`` row modes under its blocks: those modes keep the
    lowest strides (nested as row-major over the order), the blocks sit right above them, every
    value has its own row and lane, and pack / unpack round-trip; ``below=0`` is the plain layout,
    whose index (the general path) is the reshape pack uses."""
    below = min(below, len(ext))
    modes = tuple("abcd"[:len(ext)]) + ("l",)
    sizes = dict(zip(modes, ext + [lane]))
    lay = Layout.make(modes, sizes, 4, align=align, below=below)
    plain = Layout.make(modes, sizes, 4, align=align)
    compact = Layout.make(modes, sizes, 4, below=below)
    assert lay.below == below and lay.ext == plain.ext
    assert compact.rows == Layout.make(modes, sizes, 4).rows <= lay.rows
    # row-major over the order with the lane's blocks moved up: each stride spans the finer level
    order = list(range(len(ext) - below)) + [len(ext)] + list(range(len(ext) - below, len(ext)))
    span = [lay.ext[i] // 4 if i == len(ext) else lay.ext[i] for i in order]
    strides = [lay.rstride[i] for i in order]
    assert strides[-1] == 1, lay
    assert all(a >= b * e for a, b, e in zip(strides, strides[1:], span[1:])), lay
    assert [compact.rstride[i] for i in order] == [math.prod(span[k + 1:]) for k in range(len(order))]
    row, col = lay._index()
    flat = np.broadcast_to(row * 4 + col, lay.ext).ravel()
    assert len(set(flat.tolist())) == flat.size and flat.max() < lay.rows * 4
    arr = np.arange(math.prod(ext) * lane, dtype=np.float32).reshape(ext + [lane]) + 1
    rows = lay.pack(arr, modes)
    assert np.array_equal(lay.unpack(rows, sizes), arr) and np.count_nonzero(rows) == arr.size
    prow, pcol = plain._index()
    got = np.zeros((plain.rows, 4), np.float32)
    full = np.zeros(plain.ext, np.float32)
    full[tuple(slice(0, s) for s in arr.shape)] = arr
    got[prow, pcol] = full
    assert np.array_equal(got, plain.pack(arr, modes))


@pytest.mark.parametrize("fmt", ["tt", "ttm", "ht"])
def test_aligned_layouts_emulator(fmt):
    """The aligned-layout variant (``align=True``) computes the same layers within the bound."""
    check_layer(parse_spec(SPECS[fmt]), "train", align=True)


@st.composite
def random_spec(draw):
    fmt = draw(st.sampled_from(["tt", "tr", "ttm", "ht", "bt", "tucker"]))
    d = draw(st.integers(2, 3))
    ins = draw(st.lists(st.integers(2, 6), min_size=d, max_size=d))
    outs = draw(st.lists(st.integers(2, 6), min_size=d, max_size=d))
    spec = {"format": fmt, "in_modes": ins, "out_modes": outs, "ranks": draw(st.integers(1, 5)),
            "batch": draw(st.integers(1, 9))}
    if fmt == "bt":
        spec["blocks"] = draw(st.integers(1, 2))
    return parse_spec(spec)


@settings(max_examples=examples(6, 12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=random_spec(), phase=st.sampled_from(["fp", "bp", "wg", "train"]), seed=st.integers(0, 99))
def test_random_specs_emulator(spec, phase, seed):
    check_layer(spec, phase, DEFAULT, seed)


def test_cli_json(tmp_path, capsys):
    from gen.cli import main

    p = tmp_path / "s.json"
    p.write_text(json.dumps(SPECS["ttm"]))
    out = tmp_path / "r.npz"
    assert main(["run", "--spec", str(p), "--phase", "train", "--json", "--out", str(out)]) == 0
    res = json.loads(capsys.readouterr().out)
    for key in ("cycles", "macs", "utilization", "max_rel_err", "relayouts", "onchip_bytes", "dram_bytes"):
        assert key in res
    assert 0 < res["utilization"] <= 1 and res["max_rel_err"] < 0.05
    with np.load(out) as z:
        assert {"Y", "dX", "dcore_0", "dcore_1"} <= set(z.files)


#: ``make test`` runs the RTL replays of compiled programs on Verilator (one ~30 s build per design,
#: then seconds); Icarus runs these designs at ~250 cycles/s (1-2 min a test): ``make test-full``
RTL_SIMS = [pytest.param("icarus", marks=pytest.mark.slow), "verilator"]


@pytest.mark.sim
@pytest.mark.parametrize("fmt,sim", [("tt", "verilator"), pytest.param("tt", "icarus", marks=pytest.mark.slow),
                                     pytest.param("ttm", "verilator", marks=pytest.mark.slow),
                                     pytest.param("tr", "verilator", marks=pytest.mark.slow)])
def test_rtl(fmt, sim):
    """Emulator == RTL, rows read back and cycles of every run of a training step, on the 4-CE
    configuration."""
    spec = parse_spec(SPECS[fmt])
    _, ex = check_layer(spec, "train", SMALL)
    assert rtl_check(ex, SMALL, sim)


def test_spill_tree_contracts_the_large_operand_first(monkeypatch):
    """A WG network re-solved over saved intermediates with an operand or intermediate larger than a
    ping-pong half runs the fastest alone of its cheapest trees (``_spill_tree``), not always the
    MAC-optimal one; where everything fits a half the MAC-optimal tree stays. The program computes
    the layer within the golden model's bound."""
    spec = parse_spec({"format": "bt", "in_modes": [8, 10, 8], "out_modes": [4, 4, 4], "ranks": 2, "blocks": 2,
                       "batch": 8})
    config = DEFAULT.replace(unified_kb=16)
    seen = []
    real = phases._spill_tree

    def spy(net, path, cfg):
        seen.append((net, path, real(net, path, cfg)))
        return seen[-1][2]

    monkeypatch.setattr(phases, "_spill_tree", spy)
    prog, _ = check_layer(spec, "wg", config, pieces=1, pad=True, fuse=True, views=True, stationary=True, share=True,
                           runs=False)
    assert prog.variant["spill"] and prog.spill_trees >= 1
    changed = [(net, path, out) for net, path, out in seen if [list(s) for s in out] != [list(s) for s in path]]
    assert changed, "no re-solved network chose another tree"
    net, path, out = changed[0]
    alone = {tuple(map(tuple, t)): compile_networks([net], config, paths={net.label: t}).timeline(config).cycles
             for t in spill_candidates(net)}
    assert alone[tuple(map(tuple, out))] == min(alone.values()) < alone[tuple(map(tuple, path))]
    assert real(net, path, DEFAULT) is path     # the default half holds every operand: MAC-optimal


def test_split_modes_even_keeps_odd_halves_whole():
    """``odd=False`` (:class:`Shaping`): a mode whose high half would be odd (20 = 5 x 4, 18 padded to
    20) stays whole and unpadded; one of an even high half (8 = 2 x 4, 30 padded to 32) is split as
    before."""
    from gen.compiler.layout import padded_size, split_modes
    from gen.workload.network import Network, Operand
    net = Network("fp", "Y", (Operand("A", ("a", "b")), Operand("B", ("b", "c", "d"))), ("a", "c", "d"),
                  {"a": 20, "b": 8, "c": 18, "d": 30})
    every, even = split_modes(net, 4, True), split_modes(net, 4, True, odd=False)
    assert every.sizes == {"a~h": 5, "a~l": 4, "b~h": 2, "b~l": 4, "c~h": 5, "c~l": 4, "d~h": 8, "d~l": 4}
    assert even.sizes == {"a": 20, "b~h": 2, "b~l": 4, "c": 18, "d~h": 8, "d~l": 4}
    assert even.output == ("a", "c", "d~h", "d~l")
    assert [padded_size(s, 4, True, False) for s in (20, 8, 18, 30)] == [20, 8, 18, 32]
    assert [padded_size(s, 4, True) for s in (20, 8, 18, 30)] == [20, 8, 20, 32]


@pytest.mark.parametrize("phase", ["fp", "bp", "wg", "train"])
def test_split_even_emulator(phase):
    """``split="even"``: a block-term layer whose 20-mode stays whole (a lane of 5 full blocks, no
    ``~h`` / ``~l`` halves) computes every phase within the golden model's bound; ``split="all"``
    splits it into 5 x 4; the variant records which."""
    spec = parse_spec({"format": "bt", "in_modes": [20, 4], "out_modes": [4, 4], "ranks": 3, "blocks": 2,
                       "batch": 8})
    prog, _ = check_layer(spec, phase, split="even")
    assert prog.variant["split"] == "even"
    assert "i0" in prog.sizes and prog.sizes["i0"] == 20 and "i0~h" not in prog.sizes
    every = compile_layer(spec, phase, DEFAULT, split="all")
    assert every.variant["split"] == "all" and every.sizes["i0~h"] == 5 and "i0" not in every.sizes
    with pytest.raises(CompileError, match="'all' or 'even'"):
        compile_layer(spec, phase, DEFAULT, split="odd")


def test_relayouts_counted():
    """A tensor whose lane does not suit its consumer is re-laid out on chip by an identity GEMM
    (gen.compiler.relayout) or through the host, whichever takes fewer cycles; both are counted:
    host ones with their host operation, bytes and cause, on-chip ones as 0-MAC steps. One-cycle
    arithmetic: with pipelined adders (M2S3) an identity GEMM drains 17 cycles longer (29 against 12),
    and the small test layers' re-layouts all go through the host."""
    onchip = 0
    config = DEFAULT.replace(mul_latency=1, add_latency=1)
    for fmt, spec in SPECS.items():
        for phase in ("fp", "bp", "wg", "train"):
            prog = compile_layer(parse_spec(spec), phase, config, pieces=1)
            ops = [args for _, kind, args in prog.host_ops if kind == "relayout"]
            assert prog.relayouts == len(ops) and prog.relayout_bytes == sum(b for _, b, _ in ops), (fmt, phase)
            assert all(b > 0 for _, b, _ in ops)
            # each host re-layout says why the TCU did not do it (a cause in the table)
            assert prog.relayout_causes == dict(Counter(c for _, _, c in ops)), (fmt, phase)
            assert set(prog.relayout_causes) <= set(RELAYOUT_CAUSES)
            host = compile_layer(parse_spec(spec), phase, config, pieces=1, relayout="host")
            assert host.relayout_causes == ({"host-policy": host.relayouts} if host.relayouts else {})
            steps = [s for s in prog.steps if s.roles.startswith("re-layout")]
            assert prog.onchip_relayouts == len(steps) and sum(s.macs for s in steps) == 0
            onchip += prog.onchip_relayouts
            # on chip wherever the TCU can: the test specs then need no host re-layout at all
            forced = compile_layer(parse_spec(spec), phase, config, pieces=1, relayout="onchip")
            # (a program of other options than ``prog``'s: the counts on chip need not compare)
            assert forced.relayouts == 0 and (forced.onchip_relayouts > 0 or not prog.relayouts)
    assert onchip > 0


def test_best_prefers_fewer_dram_bytes_when_near():
    """compile_layer keeps, of the programs within NEAR of the fastest end to end, the one with the
    fewest host re-layouts, then moving the fewest DRAM bytes; one slower than that band never wins."""
    from types import SimpleNamespace

    def prog(cycles, dram, relayouts=0):
        tl = SimpleNamespace(cycles=cycles)
        return SimpleNamespace(timeline=lambda config: tl, dram_bytes=dram, relayouts=relayouts, est_cycles=cycles)

    fast = prog(10_000, 250_000, relayouts=32)
    near = prog(int(10_000 * (1 + NEAR)), 130_000)
    far = prog(int(10_000 * (1 + NEAR)) + 1, 100_000)
    assert _best([fast, near, far], DEFAULT) is near
    assert _best([fast, far], DEFAULT) is fast
    # host re-layouts first: a near program without them wins over one with fewer bytes
    same = prog(10_100, 250_000)
    assert _best([same, fast], DEFAULT) is same
    assert _best([prog(10_000, 240_000, relayouts=1), same], DEFAULT) is same
    # equal re-layouts and bytes: the fewer cycles
    assert _best([prog(10_100, 250_000, relayouts=32), fast], DEFAULT) is fast


@pytest.mark.parametrize("fmt", ["tt", "ttm", "tr"])
def test_k_split_in_wg_networks_only(fmt):
    """``k_split="wg"`` (a retry of :func:`compile_layer` for train): the FP / BP networks split no
    contracted mode over the CE grid, the WG networks may; the results stay within the bound of the
    float64 golden model."""
    from gen.compiler.phases import _compile_layer, _Policy

    spec = parse_spec(dict(SPECS[fmt], batch=16))
    prog = _compile_layer(spec, "train", DEFAULT, None, True, False, False, policy=_Policy(k_split="wg"))
    fpbp = [s for s in prog.steps if not s.network.startswith("d") or s.network == "dX"]
    wg = [s for s in prog.steps if s.network.startswith("dcore")]
    assert fpbp and wg and all(s.grid[2] == 1 for s in fpbp)
    assert any(s.grid[2] > 1 for s in wg), [s.grid for s in wg]
    inputs = random_inputs(spec, 0)
    ex = execute(prog, inputs, DEFAULT)
    gold = compute(spec, inputs, phases=["fp", "bp", "wg"])
    bnd = bound(spec, inputs, ["fp", "bp", "wg"], prog)
    assert set(ex.results) == set(gold)
    for k, ref in gold.items():
        assert np.all(np.abs(ex.results[k] - ref) <= bnd[k] + 1e-30), k


STATIONARY = ("WS", "IS", "WS_H", "IS_H")


@pytest.mark.parametrize("fmt", ["tt", "ttm", "ht", "bt", "tucker"])
def test_dataflow_switch_replaces_relayouts(fmt):
    """With the dataflow switch an operand whose lane is a contracted mode streams in a stationary
    mapping as it lies instead of being re-laid out: within the bound, fewer re-layouts (host and on
    chip) than output-stationary only, and stationary GEMMs really issued with their loop nest
    (``ACC_L0`` tiles add in the accumulation unit). ``stationary=None`` keeps the faster program (or
    a faster one still: the whole-layer retries of ``compile_layer``)."""
    spec = parse_spec(SPECS[fmt])
    os_only = compile_layer(spec, "train", DEFAULT, pieces=1, views=False, stationary=False)
    prog, _ = check_layer(spec, "train", DEFAULT, pieces=1, views=False, stationary=True)
    assert set(os_only.dataflows()) == {"OS"}
    assert set(prog.dataflows()) & set(STATIONARY), fmt
    gemms = [i for r in prog.runs for i in r.program if i.opcode == Opcode.GEMM]
    assert all(i.mode == 0 or i.K == 1 or i.o_sk > 0 for i in gemms)
    assert prog.relayouts + prog.onchip_relayouts < os_only.relayouts + os_only.onchip_relayouts, fmt
    best = compile_layer(spec, "train", DEFAULT, pieces=1, views=False)
    # _best: within NEAR of the fastest end to end, the fewest DRAM bytes
    fastest = min((prog, os_only), key=lambda p: p.timeline(DEFAULT).cycles)
    assert best.timeline(DEFAULT).cycles <= (1 + NEAR) * fastest.timeline(DEFAULT).cycles
    assert best.timeline(DEFAULT).cycles <= fastest.timeline(DEFAULT).cycles or \
        best.dram_bytes < fastest.dram_bytes


@pytest.mark.sim
@pytest.mark.parametrize("fmt,covers", [("tt", {"OS", "WS", "WS_H"}), ("ht", {"OS", "WS", "IS"})])
def test_rtl_stationary_icarus(fmt, covers):
    """Emulator == RTL (Icarus) for compiled WG phases whose steps switch dataflows (vertical and
    horizontal IB loads; weight- and input-stationary) on the 4-CE configuration: GEMMs of one
    dataflow overlap one another's drains, a switch waits for it (gen.design.control)."""
    prog, ex = check_layer(parse_spec(SPECS[fmt]), "wg", SMALL, pieces=1, views=False, stationary=True)
    used = set(prog.dataflows())
    assert covers <= used, used
    assert rtl_check(ex, SMALL, "icarus")


@pytest.mark.parametrize("fmt,phase", covering(["dense", "tt", "ttm", "tr", "ht", "bt", "tucker"],
                                               ["train", "wg", "fp", "bp"]))
def test_batch_pieces(fmt, phase):
    """A phase run in batch pieces (gen.compiler.batched): results within the bound (carried weight
    gradients accumulate all pieces), the useful MACs of the whole batch, pieces on both halves."""
    spec = parse_spec(dict(SPECS[fmt], batch=16))
    for P in (2, 4):
        try:
            prog, _ = check_layer(spec, phase, DEFAULT, pieces=P)
        except CompileError:
            continue          # a piece that does not compile into one segment
        # useful MACs: the whole batch's on the same paths (WG networks sharing intermediates or not:
        # never more), and the TCU does at least them
        whole = compile_layer(spec, phase, DEFAULT, pieces=1, share=prog.variant["share"])
        assert prog.pieces == P and prog.macs <= whole.macs and prog.padded_macs >= prog.macs
        assert {r.half for r in prog.runs} == {0, 1}
        return
    pytest.fail(f"{fmt} {phase}: no batch pieces")


@pytest.mark.parametrize("fmt", ["ht", "tt"])
def test_train_pieces_wg_before_bp(fmt):
    """A training step's piece program with its WG networks before BP's (``_Policy.wg_first``: ``X``
    dies before BP makes ``dX``, so an X-sized piece can fit one half): every WG network of a piece
    runs before its first BP step, the results are within the bound, and :func:`compile_layer` weighs
    both orders (``_piece_search``: every re-layout on chip; its batch-piece variants record which)."""
    spec = parse_spec(dict(SPECS[fmt], batch=16))
    P = 4

    def wg_before_bp(prog):
        # piece 0's steps come first: its WG networks all before its BP network, or all after it
        assert prog.pieces == P
        nets = [st.network for st in prog.steps]
        wg = [i for i, n in enumerate(nets) if n.startswith("dcore")]
        return max(i for i in wg if i < len(nets) // P) < nets.index("dX")

    orders = {}
    for wg_first in (False, True):
        prog = piece_program(spec, "train", DEFAULT, P, _Policy("onchip", wg_first=wg_first))
        assert prog is not None and wg_before_bp(prog) == wg_first
        check_layer(spec, "train", prog=prog)
        orders[wg_first] = prog
    # the same options: both orders are among the candidates, so the kept one is within NEAR of both
    best = compile_layer(spec, "train", DEFAULT, pieces=P, pieces_by="phase", views=True, stationary=True,
                         share=True, fuse=True, pad=False)
    assert wg_before_bp(best) == best.variant["wg_first"]       # the variant records the order it ran
    assert best.timeline(DEFAULT).cycles <= (1 + NEAR) * min(p.timeline(DEFAULT).cycles for p in orders.values())


#: three cores: the WG networks sum the batch away before their last step (a deferred step after it)
TT3 = {"format": "tt", "in_modes": [4, 6, 4], "out_modes": [4, 6, 4], "ranks": 4, "batch": 16}


@pytest.mark.parametrize("phase", ["wg", "train"])
def test_deferred_steps_run_once(phase):
    """Batch pieces: a WG step that sums the batch away carries its result, and the steps after it
    (``dcore = (sum over pieces) x core``) run once, in the last piece, instead of in every piece on
    its partial sum: fewer MACs and cycles than without, results within the bound
    (:func:`check_layer`)."""
    spec = parse_spec(TT3)
    P = 4
    prog, _ = check_layer(spec, phase, DEFAULT, pieces=P, pieces_by="phase")
    deferred = [st for st in prog.steps if st.deferred]
    assert deferred and prog.deferred
    # each deferred step once, the other batch steps once per piece
    assert Counter((st.network, st.step, st.roles) for st in deferred).most_common(1)[0][1] == 1
    each = piece_program(spec, phase, DEFAULT, P, _Policy(defer=False), views=prog.variant["views"],
                         fuse=prog.variant["fuse"])
    assert not each.deferred and not any(st.deferred for st in each.steps)
    # the deferred steps' MACs once instead of once per piece, useful and on the TCU
    assert prog.macs < each.macs and prog.padded_macs < each.padded_macs
    assert prog.timeline(DEFAULT).compute_cycles < each.timeline(DEFAULT).compute_cycles


def test_store_pad_weighs_a_results_padded_store():
    """A network's last step may weigh the DRAM cycles of its result's lane padding
    (``_Policy.store_pad``): the small dense fp's result (20 outputs) then goes out unpadded, fewer
    bytes and cycles end to end; without it the program counts the padded store
    (``Program.padded_stores``), and ``compile_layer`` retries its winner with it."""
    spec = parse_spec(SPECS["dense"])
    plain, weighed = (phases._compile_layer(spec, "fp", DEFAULT, None, True, False, phases._shape(False),
                                            policy=_Policy(store_pad=sp)) for sp in (False, True))
    assert plain.padded_stores == 1 and weighed.padded_stores == 0
    assert weighed.dram_bytes < plain.dram_bytes
    assert weighed.timeline(DEFAULT).cycles < plain.timeline(DEFAULT).cycles
    check_layer(spec, "fp", prog=weighed)
    best = compile_layer(spec, "fp", DEFAULT)
    assert best.timeline(DEFAULT).cycles <= (1 + NEAR) * weighed.timeline(DEFAULT).cycles


#: three cores in a ring: with WG before BP, deferred WG steps re-lay out cores that BP reads after them
TR3 = {"format": "tr", "in_modes": [4, 6, 4], "out_modes": [4, 6, 4], "ranks": 4, "batch": 16}


def test_deferred_step_relays_out_a_core_for_every_piece():
    """A batch-free tensor (a core) that a deferred step re-lays out on chip (WG before BP, every
    re-layout on chip) is re-laid out with the batch-free steps (pieces 0 and 1, one per half), not
    by the last piece only: the BP steps after it read the new layout in every piece (they read rows
    no piece before the last had written: UCF HT train's 16 pieces under a penalty on stored padding)."""
    spec = parse_spec(TR3)
    prog = piece_program(spec, "train", DEFAULT, 2, _Policy(relayout="onchip", wg_first=True))
    first_deferred = next(i for i, st in enumerate(prog.steps) if st.deferred)
    late = [st for st in prog.steps[first_deferred:] if st.roles.startswith("re-layout") and st.batch_free]
    assert late and not any(st.deferred for st in late)
    check_layer(spec, "train", prog=prog)


@pytest.mark.sim
@pytest.mark.parametrize("sim", RTL_SIMS)
def test_rtl_batch_pieces(sim):
    """Emulator == RTL for a training step in 4 batch pieces (weight gradients carried in the
    accumulation unit, the steps after a carried sum deferred to the last piece, batch-free results
    kept in their half)."""
    prog, ex = check_layer(parse_spec(TT3), "train", DEMO, pieces=4)
    assert prog.pieces == 4 and any(i.flags & Flag.ACC for r in prog.runs[2:] for i in r.program)
    assert prog.deferred
    assert rtl_check(ex, DEMO, sim)


@pytest.mark.sim
@pytest.mark.parametrize("sim", RTL_SIMS)
def test_rtl_onchip_relayout(sim):
    """Emulator == RTL for a program with on-chip re-layouts (identity GEMMs)."""
    prog, ex = check_layer(parse_spec(SPECS["ht"]), "train", SMALL, pieces=1, relayout="onchip", stationary=False)
    assert prog.onchip_relayouts > 0 and prog.relayouts == 0
    assert rtl_check(ex, SMALL, sim)


@pytest.mark.sim
@pytest.mark.parametrize("fmt,phase", [("bt", "fp"), ("tucker", "bp"), ("tucker", "train")])
def test_fused_chunks(fmt, phase):
    """A chunked step runs its pieces through the later steps that keep the chunked mode: results
    within the bound, the intermediates of those steps never leave the chip (fewer DRAM bytes than
    the same program chunked step by step), the saved ones of ``train`` still read back; the
    default keeps the one :func:`gen.compiler.phases._best` keeps of the two (within ``NEAR`` of the
    faster, the fewer host re-layouts, then DRAM bytes)."""
    spec = parse_spec(dict(SPECS[fmt], batch=32))
    # the same WG networks in both (sharing intermediates between them changes what is chunked)
    fused, _ = check_layer(spec, phase, CHUNK, pieces=1, fuse=True, share=False, runs=False)
    plain, _ = check_layer(spec, phase, CHUNK, pieces=1, fuse=False, share=False, runs=False)
    # a fused step: a later step of a network working on a piece (mode ``m@lo:hi``) of an
    # intermediate that was never concatenated on the host
    concat = {args[0] for _, kind, args in fused.host_ops if kind == "concat"}
    on_pieces = [st for st in fused.steps if st.step > 0 and any("@" in m for m in st.lhs + st.rhs)
                 and "]~" not in st.roles]
    assert on_pieces
    if phase != "train":    # train saves the FP / BP intermediates: those pieces are read back too
        assert not any(st.roles.split()[0][2:].split("[")[0] in concat for st in on_pieces)
    assert fused.dram_bytes < plain.dram_bytes
    best = compile_layer(spec, phase, CHUNK, pieces=1, share=False, runs=False)
    want = _best([fused, plain], CHUNK)
    assert (best.relayouts, best.dram_bytes, best.timeline(CHUNK).cycles) == \
        (want.relayouts, want.dram_bytes, want.timeline(CHUNK).cycles)


def _pieces_read(prog) -> list[set[str]]:
    """Per run, the pieces (``m@lo:hi``) of chunked results it reads back."""
    return [{m for rd in run.reads for m in re.findall(r"\[([^\]]*@[^\]]*)\]", rd.name)} for run in prog.runs]


@pytest.mark.parametrize("fuse", [True, False])
def test_chunk_pieces_in_runs_of_their_own(fuse):
    """``runs=True``: every piece of a chunked step (with its fused steps) is a run of its own, results
    within the bound; with ``runs=False`` pieces share a run; ``runs=None`` (the default) keeps the one
    :func:`gen.compiler.phases._best` keeps of the two."""
    spec = parse_spec(dict(SPECS["bt"], batch=32))
    own, _ = check_layer(spec, "fp", CHUNK, pieces=1, fuse=fuse, share=False, runs=True)
    shared = compile_layer(spec, "fp", CHUNK, pieces=1, fuse=fuse, share=False, runs=False)
    assert own.chunked_steps and shared.chunked_steps
    assert all(len(p) <= 1 for p in _pieces_read(own)) and any(_pieces_read(own))
    assert any(len(p) > 1 for p in _pieces_read(shared))
    assert len(own.runs) > len(shared.runs)
    best = compile_layer(spec, "fp", CHUNK, pieces=1, fuse=fuse, share=False)
    want = _best([own, shared], CHUNK)
    assert (best.relayouts, best.dram_bytes, best.timeline(CHUNK).cycles) == \
        (want.relayouts, want.dram_bytes, want.timeline(CHUNK).cycles)


@pytest.mark.sim
@pytest.mark.parametrize("sim", RTL_SIMS)
def test_rtl_accumulated_chunks(sim):
    """Emulator == RTL for a step chunked over a contracted mode: the partial sums stay in the
    accumulation unit across runs on both ping-pong halves (``ACC`` from the second piece)."""
    spec = parse_spec(dict(SPECS["tt"], batch=48))     # too large for a half of SMALL at batch 48
    prog, ex = check_layer(spec, "wg", SMALL, pieces=1)
    carried = [i for r in prog.runs for i in r.program
               if i.opcode == Opcode.GEMM and i.flags & Flag.ACC]
    assert any("b~h[" in s.roles for s in prog.steps), [s.roles for s in prog.steps]
    assert carried and len({r.half for r in prog.runs}) == 2
    assert rtl_check(ex, SMALL, sim)


def test_plan_search_finds_realisable_splits():
    """Regression: in the UCF TR-14 fp step ``X x cores`` (K = 1920) the best-estimated plans all
    ask for grid splits the bank rule forbids; the planner must go on to a realisable one
    (8.0 % utilization when it stopped after a fixed number of plans, 23.5 % now)."""
    from pathlib import Path

    from gen.workload.spec import load_spec

    cfg = FettaConfig()
    prog = compile_layer(load_spec(Path(__file__).parent.parent / "benchmarks/layers/ucf_tr14.json"), "fp", cfg)
    assert prog.macs / (prog.est_cycles * cfg.macs) >= 0.2


def test_memory_reuses_dead_rows_for_computed_results_only():
    """The allocator: a computed result takes the rows of a dead tensor once the half is full, never
    those of a live, saved, protected (batch-free) or pending-read one; host writes never reuse."""
    from gen.compiler.allocate import Memory, NoRoom, Tensor
    from gen.design.isa import Geometry

    geo = Geometry.of(FettaConfig(num_ces=4, net_ports=4, banks=4, unified_kb=4, accum_kb=2, imem_depth=16))
    mem = Memory(geo, 2, {"dram_bytes": 0}, [])
    mem.protected = lambda t: t.name == "core"
    half = geo.unified_half_rows            # 256 rows, blocks of 64
    lay = Layout.make(("i", "j"), {"i": 64, "j": 4}, geo.lanes)
    assert lay.rows == 64
    names = ("dead", "live", "core", "kept")
    for n in names:
        t = Tensor(n, ("i", "j"))
        mem.place(t, lay)
    assert [mem.onchip[n].addr for n in names] == [0, 64, 128, 192] and mem.top == half
    mem.live, mem.keep = {"live"}, {"kept"}
    mem.begin_step()
    with pytest.raises(NoRoom):
        mem.place(Tensor("x", ("i", "j")), lay)          # a host write does not take dead rows
    assert mem.fits([], [64]) and not mem.fits([], [64, 64]) and not mem.fits([64])
    assert mem.alloc(64) == 0 and "dead" not in mem.onchip   # the dead tensor leaves the chip
    assert mem.alloc(64) is None                              # the block just taken is busy too
    mem.begin_step()
    out = Tensor("out", ("i", "j"))
    out.layout, out.addr = lay, 0
    mem.onchip["out"] = out
    mem.ensure_on_host(out)                                   # read after the run: busy until then
    assert mem.alloc(64) is None


def test_memory_pins_hold_rows_across_segments():
    """Pinned blocks (:meth:`Memory.pin`) keep their rows in their half through later segments of
    that half: host writes and computed results go around them; the rows after a pin are reserved
    for the next pieces of its size, which land back to back; :meth:`Memory.unpin` frees them all."""
    from gen.compiler.allocate import Memory, Tensor
    from gen.design.isa import Geometry

    geo = Geometry.of(FettaConfig(num_ces=4, net_ports=4, banks=4, unified_kb=4, accum_kb=2, imem_depth=16))
    mem = Memory(geo, 2, {"dram_bytes": 0}, [])
    lay = Layout.make(("i", "j"), {"i": 16, "j": 4}, geo.lanes)     # 16-row blocks, 256-row halves
    half = mem.half
    mem.place(Tensor("x", ("i", "j")), lay)                           # rows 0-15
    p = Tensor("p0", ("i", "j"))
    p.layout, p.addr = lay, mem.alloc(lay.rows)                       # rows 16-31
    mem.onchip["p0"] = p
    piece = mem.pin(p, "i@0:16", 0, 16, more=2)
    assert (piece.half, piece.addr, piece.run) == (half, 16, 0)
    mem.close_segment()                                               # the other half: no pins there
    assert mem.alloc(lay.rows) == 0
    mem.close_segment()                                               # back in the pinned half
    assert mem.half == half
    mem.place(Tensor("y", ("i", "j")), Layout.make(("i", "j"), {"i": 32, "j": 4}, geo.lanes))
    assert mem.onchip["y"].addr == 64                     # past the pin (16-31) and its reservation (32-63)
    assert mem.alloc(lay.rows) == 32                      # the next piece: right after the first
    assert mem.alloc(8) == 96                              # another size: past everything
    mem.unpin({"p0"})
    assert mem.pins == {0: [], 1: []} and mem.prefer == {}


def test_memory_reservation_never_evicts_a_live_tensor():
    """A result of a pinned piece's size may take the rows reserved for the next piece; while it
    lives there, the next result of that size goes elsewhere instead of evicting it (it did when its
    block was exactly the reservation: an operand of the running step lost its rows, UCF BT fp with
    every intermediate pinned)."""
    from gen.compiler.allocate import Memory, Tensor
    from gen.design.isa import Geometry

    geo = Geometry.of(FettaConfig(num_ces=4, net_ports=4, banks=4, unified_kb=4, accum_kb=2, imem_depth=16))
    mem = Memory(geo, 2, {"dram_bytes": 0}, [])
    lay = Layout.make(("i", "j"), {"i": 16, "j": 4}, geo.lanes)     # 16-row blocks
    mem.place(Tensor("x", ("i", "j")), lay)                           # rows 0-15
    p = Tensor("p0", ("i", "j"))
    p.layout, p.addr = lay, mem.alloc(lay.rows)                       # rows 16-31
    mem.onchip["p0"] = p
    mem.pin(p, "i@0:16", 0, 16, more=1)                               # rows 32-47 reserved
    q = Tensor("q", ("i", "j"))
    q.layout, q.addr = lay, mem.alloc(lay.rows)
    assert q.addr == 32                                               # the reservation, exactly
    mem.onchip["q"] = q
    mem.live = {"q"}
    mem.begin_step()
    assert mem.alloc(lay.rows) not in (None, 32)
    assert mem.onchip["q"] is q and q.addr == 32


def test_transposed_views_replace_relayouts():
    """A tensor on chip whose stride-1 row mode is the lane a step wants is read through the
    distribution network's transpose layer (``Planner.view``) instead of being re-laid out: fewer
    re-layouts, transposed GEMMs in the program, results within the golden bound. Output-stationary
    only: the dataflow switch removes re-layouts of its own (``test_dataflow_switch_replaces_relayouts``)."""
    before = after = transposes = 0
    for fmt, phase in (("tt", "wg"), ("tr", "train"), ("ht", "wg"), ("bt", "wg")):
        spec = parse_spec(SPECS[fmt])
        p0 = compile_layer(spec, phase, DEFAULT, pieces=1, views=False, stationary=False)
        p1, _ = check_layer(spec, phase, DEFAULT, pieces=1, views=True, stationary=False)
        assert p0.transposes == 0
        before += p0.relayouts + p0.onchip_relayouts
        after += p1.relayouts + p1.onchip_relayouts
        transposes += p1.transposes
        assert any(i.tr for r in p1.runs for i in r.program) == (p1.transposes > 0)
    assert transposes > 0 and after < before


@pytest.mark.sim
@pytest.mark.xdist_group("default-verilator")
def test_output_transpose_gives_the_consumer_its_contracted_lane():
    """The reduction network's transpose layer (``Transpose.O``, ``Planner.transposed_twins``) writes a
    result with the mode its consumer contracts as its lane, so that the consumer streams it
    stationary as it lies: in TT fp, ``core_2 x core_3`` is written with lane ``r2`` (split over 4
    consecutive output groups, its former lane at ``r2``'s row stride), the step contracting ``r2``
    runs input-stationary on it with no re-layout; within the golden bound, the default design on
    Verilator equal to the emulator (rows read back and cycles), and fewer cycles than
    output-stationary only. ``compile_layer`` searches without output transposes and compiles the
    winner's options once more with them where a step could have one (``Program.twin_sites``):
    ``transposes=False`` has no such GEMM and counts the step."""
    spec = parse_spec(SPECS["tt"])
    prog, ex = check_layer(spec, "fp", DEFAULT)
    assert rtl_check(ex, DEFAULT, "verilator")
    transposed = [i for r in prog.runs for i in r.program if i.opcode == Opcode.GEMM and i.tr & Transpose.O]
    t = transposed[0]
    assert len(transposed) == 1 and t.log_gk == 0 and (t.log_gn == 2 or (t.log_gn == 0 and t.log_gm == 2))
    k = next(n for n, st in enumerate(prog.steps) if st.transposes)
    made, consumer = prog.steps[k], prog.steps[k + 1]
    lane = made.out_layout[-1]
    assert lane in set(consumer.lhs) & set(consumer.rhs) and lane not in consumer.out
    assert consumer.dataflows[0] in ("IS", "WS") and not prog.onchip_relayouts and not prog.relayouts
    assert prog.est_cycles < compile_layer(spec, "fp", DEFAULT, stationary=False).est_cycles
    off = compile_layer(spec, "fp", DEFAULT, transposes=False)
    assert prog.variant["transposes"] and not off.variant["transposes"] and off.twin_sites >= 1
    assert not any(i.tr & Transpose.O for r in off.runs for i in r.program if i.opcode == Opcode.GEMM)
    assert prog.est_cycles < off.est_cycles


@pytest.mark.parametrize("fmt,config", covering(list(SPECS), ["default", "small"]))
def test_results_independent_of_initial_memory(fmt, config, monkeypatch):
    """The RTL's memories start unknown (an SRAM macro powers up with any content), the emulator's at
    zero: a compiled training step must give the same bits when every row starts as a NaN (bf16 /
    FP32 quiet NaNs with a payload), so no result depends on a row the program never wrote."""
    import sim.emulator as emulator

    spec, config = parse_spec(SPECS[fmt]), {"default": DEFAULT, "small": SMALL}[config]
    inputs = random_inputs(spec, 3)
    prog = compile_layer(spec, "train", config)
    clean = execute(prog, inputs, config).results
    init = emulator.Emulator.__init__

    def poisoned(self, cfg):
        init(self, cfg)
        self.unified[:] = 0x7FC1
        self.accum[:] = 0x7FC00001

    monkeypatch.setattr(emulator.Emulator, "__init__", poisoned)
    dirty = execute(prog, inputs, config).results
    assert set(dirty) == set(clean)
    for k in clean:
        assert np.array_equal(dirty[k], clean[k]), k
