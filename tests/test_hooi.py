"""Tucker decomposition by HOOI on the accelerator (issue 20, seed 004).

* the iteration's networks (:mod:`gen.workload.hooi`) contract to the TTM chains computed directly
  (opt_einsum on the network against numpy tensordot), with the prefix reuse of seed 004 V-A;
* the one-sided Jacobi SVD (:mod:`gen.toolflow.jacobi`) against numpy's SVD, and the warm start;
* HOOI on the emulator against the same algorithm in float64 (per iteration, within the bfloat16
  bound below) and against ``tensorly.decomposition.tucker`` (final fit within 1e-2 relative, the
  issue's goal, and the factor subspaces by principal angles);
* RTL == emulator on Icarus and (``-m slow``) Verilator (every run of an iteration, bit and cycle exact);
* no explicit permutation: 0 re-layouts on every shape of the benchmark (compile only);
* ``fetta hooi`` JSON, ``--out`` and its errors.

The bfloat16 bound of a fit: the accelerator rounds the tensor, each of the ``d`` factors and the
``d`` stored chain results (``Z``, ``Y``, core) to bfloat16, each a relative perturbation of at most
``u = 2**-8`` of the reconstruction; ``|fit - fit_ref| <= (2d + 1) * u`` (first order; the fit is
``1 - ||T - T_hat|| / ||T||`` and ``||T_hat|| <= ||T||``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import opt_einsum
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import subspace_angles

from gen.cli import main as cli_main
from gen.compiler.dma import hardware_cycles
from gen.compiler.layout import Layout
from gen.compiler.phases import compile_networks
from gen.compiler.program import Program, Read, Run, Write
from gen.design.config import FettaConfig, load_config
from gen.errors import SpecError
from gen.toolflow.hooi import compile_hooi, fit_of, hooi_float64, low_rank_tensor, orthonormal_factors, run_hooi
from gen.toolflow.jacobi import jacobi_cycles, jacobi_left, round_robin
from gen.workload.hooi import chain, check_ranks, hooi_networks
from gen.workload.network import path_steps
from sim.bf16 import round_to_bf16_f32

ROOT = Path(__file__).resolve().parents[1]
U_BF16 = 2.0 ** -8


def bound(d: int) -> float:
    return (2 * d + 1) * U_BF16


# --- networks ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,ranks,ttms", [((8, 6, 5), (2, 3, 2), 5), ((4, 5, 6, 3), (2, 2, 3, 2), 8)])
def test_networks_contract_to_the_ttm_chains(shape, ranks, ttms):
    """Every network, contracted by opt_einsum from the results before it, equals the chain of
    tensordots it stands for; the prefix reuse gives seed 004's TTM counts."""
    nets = hooi_networks(shape, ranks)
    d = len(shape)
    assert (nets.ttms_plain, nets.ttms) == (d * (d - 1), ttms)
    rng = np.random.default_rng(0)
    T = rng.standard_normal(shape)
    U = {f"{k}{m}": rng.standard_normal((shape[m], ranks[m])) for m in range(d) for k in "UV"}
    store = {"T": T, **U}
    for net in nets.networks:
        got = opt_einsum.contract(net.einsum_expr(), *[store[op.name] for op in net.inputs])
        store[net.target] = got
        assert got.shape == net.result_shape
        # the saved prefixes: the network's intermediate after its first TTMs (its path is the chain)
        steps = path_steps(net, nets.paths[net.label])
        sym = {m: opt_einsum.get_symbol(i) for i, m in enumerate(net.sizes)}
        used_as = {op.name: op.modes for later in nets.networks for op in later.inputs}
        for name, (label, sid) in nets.saved.items():
            if label == net.label:
                q = sid - len(net.inputs) + 1          # TTMs applied
                ops = net.inputs[:q + 1]
                assert set(steps[q - 1].out_modes) == set(used_as[name])
                expr = ",".join("".join(sym[m] for m in op.modes) for op in ops) + "->" + \
                    "".join(sym[m] for m in used_as[name])
                store[name] = opt_einsum.contract(expr, *[store[op.name] for op in ops])
    assert set(nets.saved) == {n for net in nets.networks for n in (op.name for op in net.inputs)
                               if n.startswith("Z")}
    for n in range(d):
        want = T
        for m, kind in chain(n, d):
            want = np.moveaxis(np.tensordot(U[f"{kind}{m}"].T, want, axes=(1, m)), 0, m)
        np.testing.assert_allclose(store[f"Y{n}"], want, rtol=1e-10, atol=1e-10)
    core = np.moveaxis(np.tensordot(U[f"V{d - 1}"].T, store[f"Y{d - 1}"], axes=(1, d - 1)), 0, d - 1)
    np.testing.assert_allclose(store["G"], core, rtol=1e-10, atol=1e-10)
    assert nets.derived == {f"V{n}": f"Y{n}" for n in range(d)}


@pytest.mark.parametrize("shape,ranks,match", [
    ((4, 4), (2, 2), "order 3 or 4"), ((4, 4, 4), (2, 2), "one rank per mode"),
    ((4, 4, 4), (5, 2, 2), "rank 5 of mode 0"), ((4, 4, 4), (0, 2, 2), "rank 0"),
    ((8, 8, 8), (5, 2, 2), "exceeds the product of the other ranks")])
def test_bad_ranks_name_the_field(shape, ranks, match):
    with pytest.raises(SpecError, match=match) as e:
        check_ranks(shape, ranks)
    assert e.value.field in ("ranks", "T")


# --- Jacobi SVD -------------------------------------------------------------------------------
@given(st.integers(2, 40))
def test_round_robin_pairs_every_row_once_per_sweep(n):
    seen = []
    for p, q in round_robin(n):
        rows = np.concatenate([p, q])
        assert len(set(rows.tolist())) == len(rows)      # disjoint: one parallel step
        seen += list(zip(p.tolist(), q.tolist()))
    assert sorted(seen) == [(i, j) for i in range(n) for j in range(i + 1, n)]


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 24), st.integers(1, 30), st.integers(0, 2**31 - 1))
def test_jacobi_converged_equals_numpy_svd(n, R, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, R)) * rng.uniform(0.1, 3.0, R)
    r = min(n, R, 3)
    res = jacobi_left(A, r, sweeps=30)
    u, s, _ = np.linalg.svd(A, full_matrices=False)
    np.testing.assert_allclose(res.sigma, s[:r], rtol=1e-9, atol=1e-9 * s[0])
    np.testing.assert_allclose(res.U.T @ res.U, np.eye(r), atol=1e-12)
    # singular vectors up to sign where the singular values are distinct
    for k in range(r):
        gaps = np.abs(np.delete(s[:min(n, R)], k) - s[k])
        if gaps.size == 0 or gaps.min() > 1e-6 * s[0]:
            assert abs(abs(res.U[:, k] @ u[:, k]) - 1) < 1e-8


def test_warm_start_one_sweep_beats_cold_one_sweep():
    """A gap after the 5th singular value; a start 0.39 rad off the leading subspace: one warm sweep
    brings it closer, one cold sweep from the identity is about as far off as the start."""
    rng = np.random.default_rng(3)
    s = np.r_[np.linspace(10, 5, 5), np.geomspace(0.5, 0.1, 25)]
    A = rng.standard_normal((40, 30)) @ np.diag(s) @ np.linalg.qr(rng.standard_normal((30, 30)))[0]
    u = np.linalg.svd(A)[0][:, :5]
    near = np.linalg.qr(u + 0.05 * rng.standard_normal(u.shape))[0]
    start = np.max(subspace_angles(near, u))
    warm = np.max(subspace_angles(jacobi_left(A, 5, 1, start=near).U, u))
    cold = np.max(subspace_angles(jacobi_left(A, 5, 1).U, u))
    assert warm < start / 2 and warm < cold / 2, (start, warm, cold)
    assert jacobi_cycles(40, 30, 1, 64, True) == 780 * (2 + 5) + 40 * 40 * 30 // 64


# --- HOOI on the emulator -----------------------------------------------------------------------
SMALL = (16, 12, 16), (4, 3, 4)


@pytest.fixture(scope="module")
def small_run():
    shape, ranks = SMALL
    T = low_rank_tensor(shape, ranks, 0.5, seed=1)
    init = [round_to_bf16_f32(u.astype(np.float32)) for u in orthonormal_factors(shape, ranks, 0)]
    return T, init, run_hooi(T, ranks, 6, FettaConfig(), init=init)


def test_hooi_per_iteration_fit_matches_float64(small_run):
    """The same algorithm (warm start, one sweep) in float64 from the same bf16 tensor and init."""
    T, init, r = small_run
    ref, core, U = hooi_float64(round_to_bf16_f32(T), SMALL[1], 6, init)
    np.testing.assert_allclose(r.fits, ref, atol=bound(3), rtol=0)
    assert all(0 < f < 1 for f in r.fits) and r.fits[-1] > r.fits[0]
    # the returned decomposition is the one the fit was computed of
    assert r.fits[-1] == pytest.approx(fit_of(round_to_bf16_f32(T), r.core, r.factors), abs=1e-12)
    assert [u.shape for u in r.factors] == [(16, 4), (12, 3), (16, 4)] and r.core.shape == SMALL[1]


def test_hooi_matches_tensorly(small_run):
    """tensorly's HOOI (exact truncated SVD) from the same init: the final fit within 1e-2
    relative (issue goal) and the same factor subspaces (largest principal angle < 0.1 rad)."""
    from tensorly.decomposition import tucker

    T, init, r = small_run
    Tq = round_to_bf16_f32(T).astype(np.float64)
    (core, factors), errors = tucker(Tq, rank=list(SMALL[1]), init=[u.astype(np.float64) for u in init],
                                     n_iter_max=6, tol=0, return_errors=True)
    fits = [1 - float(e) for e in errors]
    assert abs(r.fits[-1] - fits[-1]) <= 1e-2 * fits[-1], (r.fits, fits)
    for ours, theirs in zip(r.factors, factors):
        assert np.max(subspace_angles(ours.astype(np.float64), theirs)) < 0.1


def test_hooi_timing_and_counts(small_run):
    T, init, r = small_run
    cfg = FettaConfig()
    s = r.summary(cfg)
    assert s["relayouts"] == 0 and s["ttms_per_iter"] == 5 and s["ttms_without_reuse"] == 6
    assert s["cycles"] == sum(it["cycles"] for it in s["iterations"])
    assert all(it["cycles"] == s["cycles_per_iter"] for it in s["iterations"])      # one static program
    assert s["cycles"] == s["compute_cycles"] + s["dram_stall_cycles"]
    assert s["utilization"] == pytest.approx(s["macs_per_iter"] * 6 / (s["cycles"] * cfg.macs))
    # the hardware's count: the iteration's jobs, DMA transfers included, as `fetta run` times layers
    assert s["dram"] == "dma" and s["cycles_per_iter"] == hardware_cycles(r.program, cfg)
    assert s["jobs_per_iter"] > s["runs_per_iter"] and s["dram_stall_cycles"] > 0
    # the run writing a factor comes after the run that reads its chain back
    prog = r.program
    deps = prog.write_deps()
    read_in = {rd.name: i for i, run in enumerate(prog.runs) for rd in run.reads}
    for i, run in enumerate(prog.runs):
        for w in run.writes:
            if w.name.startswith("V"):
                src = prog.results[r.networks.derived[w.name]][0][0]
                assert deps[i] >= read_in[src] and i > read_in[src]


def test_warm_start_claim_of_seed_004():
    """Seed 004 Fig. 8: HOOI with ten cold Jacobi sweeps per SVD converges in about two iterations;
    with one warm-started sweep it reaches the same fit (here: within 1e-3 relative) a few
    iterations later (seed 004: after 7), at a fraction of the SVD cost."""
    shape, ranks = (32, 32, 32), (6, 6, 6)
    T = low_rank_tensor(shape, ranks, 0.5, seed=4)
    init = orthonormal_factors(shape, ranks, 5)
    cold, _, _ = hooi_float64(T, ranks, 4, init, sweeps=10, warm=False)
    warm, _, _ = hooi_float64(T, ranks, 8, init, sweeps=1, warm=True)
    assert abs(cold[-1] - cold[-2]) < 1e-6                       # converged
    assert abs(warm[-1] - cold[-1]) < 1e-3 * cold[-1], (warm, cold)
    assert abs(warm[2] - cold[-1]) > 1e-3 * cold[-1]             # not yet at iteration 3
    warm_cost, cold_cost = 8 * jacobi_cycles(32, 36, 1, 64, True), 3 * jacobi_cycles(32, 36, 10, 64, False)
    assert warm_cost < cold_cost / 3, (warm_cost, cold_cost)


def test_nested_chain_pieces():
    """A chain piece that is cut again runs the chain's next TTM on its own pieces
    (``fuse_nested``): on the small design a 16x16x16x8 tensor's slices along the kept mode do not
    fit a half, so chain 0's first TTM is cut twice; nested, its pieces go on through the second TTM
    on chip (that TTM's pieces of pieces are read back, the first's are not), the iteration moves
    fewer DRAM bytes, and HOOI gives the same fits, within the bfloat16 bound of float64."""
    cfg = load_config(ROOT / "configs" / "small.toml")
    shape, ranks = (16, 16, 16, 8), (2, 2, 2, 2)
    nets = hooi_networks(shape, ranks)
    progs = {n: compile_networks(nets.networks, cfg, derived=nets.derived, paths=nets.paths, saved=nets.saved,
                                 image_lanes={"T": "i0"}, fuse_nested=n) for n in (False, True)}

    def pieces_of_pieces(prog, prefix):
        return [x.name for r in prog.runs for x in r.reads if x.name.startswith(prefix) and x.name.count("[") == 2]

    assert pieces_of_pieces(progs[False], "Y0.t4[") and not pieces_of_pieces(progs[False], "Y0.t5[")
    assert pieces_of_pieces(progs[True], "Y0.t5[") and not pieces_of_pieces(progs[True], "Y0.t4[")
    assert progs[True].dram_bytes < progs[False].dram_bytes, {n: p.dram_bytes for n, p in progs.items()}
    T = low_rank_tensor(shape, ranks, 0.5, seed=3)
    init = [round_to_bf16_f32(u.astype(np.float32)) for u in orthonormal_factors(shape, ranks, 0)]
    fits = {n: run_hooi(T, ranks, 2, cfg, init=init, compiled=(nets, p)).fits for n, p in progs.items()}
    ref, _, _ = hooi_float64(round_to_bf16_f32(T), ranks, 2, init)
    np.testing.assert_allclose(fits[True], ref, atol=bound(4), rtol=0)
    np.testing.assert_allclose(fits[True], fits[False], atol=bound(4), rtol=0)


PINNED = (16, 16, 16), (4, 4, 4)


def _pinned_programs(cfg):
    shape, ranks = PINNED
    nets = hooi_networks(shape, ranks)
    return nets, {q: compile_networks(nets.networks, cfg, derived=nets.derived, paths=nets.paths, saved=nets.saved,
                                      image_lanes={"T": "i0"}, run_per_piece=True, pin=q) for q in (False, True)}


def test_pinned_prefix_stays_on_chip():
    """``pin``: on the small design chain 0 of a 16^3 tensor runs in pieces along ``i0``; the prefix
    ``Z = T x_2 U_2`` it shares with chain 1 stays on chip in those pieces (never read back, never
    written again), and chain 1's first TTM, which contracts ``i0``, runs on them where they are,
    the pieces of one half as one (the name ``+1``: two pieces back to back); so does the core on the
    pieces of chain 2's result. Fewer DRAM bytes, and the fits of the program without pins within
    the bfloat16 bound of float64 HOOI."""
    cfg = load_config(ROOT / "configs" / "small.toml")
    nets, progs = _pinned_programs(cfg)
    moved = {q: {x.name.split("[")[0] for r in p.runs for x in r.reads + r.writes} for q, p in progs.items()}
    assert "Y0.t3" in moved[False] and "Y0.t3" not in moved[True]
    roles = [s.roles for s in progs[True].steps if s.roles.endswith("pinned")]
    assert [r.split()[0] for r in roles] == ["A=Y0.t3"] * 2 + ["A=Y2.t4"] * 2, roles
    assert all("+1 " in r for r in roles)
    assert progs[True].dram_bytes < progs[False].dram_bytes
    T = low_rank_tensor(*PINNED, 0.5, seed=3)
    init = [round_to_bf16_f32(u.astype(np.float32)) for u in orthonormal_factors(*PINNED, 0)]
    fits = {q: run_hooi(T, PINNED[1], 2, cfg, init=init, compiled=(nets, p)).fits for q, p in progs.items()}
    ref, _, _ = hooi_float64(round_to_bf16_f32(T), PINNED[1], 2, init)
    np.testing.assert_allclose(fits[True], ref, atol=bound(3), rtol=0)
    np.testing.assert_allclose(fits[True], fits[False], atol=bound(3), rtol=0)


def test_pins_read_back_when_the_step_cannot_use_them(monkeypatch):
    """A pinned tensor whose consumer does not map on the pieces is read back after the runs that
    made it (its rows have held it since) and concatenated on the host: the same fits as without pins."""
    from gen.compiler.pins import Pinning

    released = []
    unpinned = Pinning.unpinned

    def spy(self, t):
        released.append((t.name, t.on_host))
        unpinned(self, t)

    monkeypatch.setattr(Pinning, "_pinned_mapping", lambda self, *a: None)
    monkeypatch.setattr(Pinning, "unpinned", spy)
    cfg = load_config(ROOT / "configs" / "small.toml")
    nets, progs = _pinned_programs(cfg)
    assert released == [("Y0.t3", False), ("Y2.t4", True)]       # the prefix only on chip, the result also read
    assert not [s for s in progs[True].steps if s.roles.endswith("pinned")]
    reads = [x.name for r in progs[True].runs for x in r.reads]
    assert [n for n in reads if n.startswith("Y0.t3[")], reads      # the pieces, read back late
    T = low_rank_tensor(*PINNED, 0.5, seed=3)
    init = [round_to_bf16_f32(u.astype(np.float32)) for u in orthonormal_factors(*PINNED, 0)]
    fits = {q: run_hooi(T, PINNED[1], 1, cfg, init=init, compiled=(nets, p)).fits for q, p in progs.items()}
    np.testing.assert_allclose(fits[True], fits[False], atol=bound(3), rtol=0)


# --- no explicit permutation, RTL ---------------------------------------------------------------
@pytest.mark.parametrize("shape,ranks", [((64, 64, 64), (16, 16, 16)), ((16, 16, 16, 16), (4, 4, 4, 4)),
                                         ((40, 24, 20), (5, 6, 4))])
def test_no_relayouts(shape, ranks):
    nets, prog = compile_hooi(shape, ranks, FettaConfig())
    assert (prog.relayouts, prog.host_transposes(), prog.onchip_relayouts) == (0, 0, 0)


def test_host_transposes_counts_a_lane_change():
    sizes = {"a": 8, "b": 4}
    ab, ba = Layout.make(("a", "b"), sizes, 4), Layout.make(("b", "a"), sizes, 4)
    runs = [Run(0), Run(1), Run(0)]
    runs[0].writes.append(Write(0, "X", ab))
    runs[0].reads.append(Read(0, "R", ab))
    runs[1].writes.append(Write(0, "X", ab))        # the same image
    runs[1].writes.append(Write(64, "R", ba))       # read back with lane b, written with lane a
    runs[2].writes.append(Write(0, "X", ba))
    prog = Program(runs, [], {}, sizes, 0, [])
    assert prog.host_transposes() == 2


@pytest.mark.sim
@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=pytest.mark.slow)])
def test_hooi_rtl_equals_emulator(sim):
    """Every DMA job of an iteration (TTM chains, factor loads between them, the core) on the RTL of
    the small design with the bench's AXI4 DRAM: every job's cycles and error and every byte the
    stores wrote equal the emulator's (``rtl_check_dma`` raises otherwise). Verilator (``-m slow``;
    about 7,000 cycles, a minute on Icarus) runs the program with pinned pieces of
    :func:`test_pinned_prefix_stays_on_chip`: chunked chains, the prefix used where it was made."""
    cfg = load_config(ROOT / "configs" / "small.toml")
    if sim == "icarus":
        shape, ranks = (8, 8, 8), (2, 2, 2)
        compiled = None
    else:
        (shape, ranks), (nets, progs) = PINNED, _pinned_programs(cfg)
        compiled = nets, progs[True]
    T = low_rank_tensor(shape, ranks, 0.5, seed=2)
    r = run_hooi(T, ranks, 1, cfg, sim=sim, compiled=compiled)
    assert r.rtl_equal is True and r.fits[0] > 0


# --- CLI ----------------------------------------------------------------------------------------
def test_cli_json_and_out(tmp_path, capsys):
    shape, ranks = (8, 8, 8), (2, 2, 2)
    np.savez(tmp_path / "t.npz", T=low_rank_tensor(shape, ranks, 0.5, seed=2))
    rc = cli_main(["hooi", "--tensor", str(tmp_path / "t.npz"), "--ranks", "2,2,2", "--iters", "2", "--json",
                   "--out", str(tmp_path / "o.npz")])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("fit", "cycles", "utilization", "relayouts"):
        assert key in out
    assert len(out["fit"]) == 2 and out["relayouts"] == 0 and out["svd"]["where"] == "host"
    with np.load(tmp_path / "o.npz") as z:
        assert sorted(z.files) == ["U_0", "U_1", "U_2", "core"]
        assert fit_of(round_to_bf16_f32(np.load(tmp_path / "t.npz")["T"]), z["core"],
                      [z[f"U_{k}"] for k in range(3)]) == pytest.approx(out["fit"][-1], abs=1e-12)


@pytest.mark.parametrize("make,args,field", [
    (lambda: np.ones((4, 4, 4), np.float32), ["--ranks", "5,2,2"], "ranks"),
    (lambda: np.ones((4, 4, 4), np.float32), ["--ranks", "2,2"], "ranks"),
    (lambda: np.full((4, 4, 4), np.nan, np.float32), ["--ranks", "2,2,2"], "T"),
    (lambda: np.ones((4, 4), np.float32), ["--ranks", "2,2"], "T"),
    (lambda: np.zeros((4, 4, 4), np.float32), ["--ranks", "2,2,2"], "T"),
    (lambda: np.ones((4, 4, 4), np.float32), ["--ranks", "2,2,2", "--max-elements", "10"], "T"),
    (lambda: np.ones((4, 4, 4), np.int32), ["--ranks", "2,2,2"], "T"),
])
def test_cli_bad_input_exit_2(tmp_path, capsys, make, args, field):
    np.savez(tmp_path / "t.npz", T=make())
    rc = cli_main(["hooi", "--tensor", str(tmp_path / "t.npz"), *args])
    err = capsys.readouterr().err
    assert rc == 2 and field in err and len(err.strip().splitlines()) == 1, err
