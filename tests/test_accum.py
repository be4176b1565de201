"""The accumulation unit's adders (:class:`hdl.accum.AccumAdd`) against the emulator's arithmetic.

One row per clock cycle, back to back, at every ``add_latency`` the timing rules allow a test to
name (1: combinational; 3 and 7: the FP32 adder's inner stages with ``acc`` and ``psum`` riding
along): ``acc ? old + psum : psum`` per lane, bit for bit against ``sim.bf16.f32_add`` (FP32: random
pairs, cancellations, specials) or integers wrapping at ``int_acc_width``.
"""

from __future__ import annotations

import numpy as np
import pytest

from gen.design.config import FettaConfig
from hdl.accum import AccumAdd
from tests.test_fp import F32_SPECIAL, f32_pairs, ref_add, simulate


def _rows(lanes: int, width: int, values: np.ndarray) -> list[int]:
    """Pack ``values`` ``[n, lanes]`` into rows of ``lanes * width`` bits."""
    return [sum(int(v) << (width * x) for x, v in enumerate(row)) for row in values]


@pytest.mark.parametrize("add_latency", [1, 3, 7])
def test_fp32_rows(add_latency):
    cfg = FettaConfig(add_latency=add_latency)
    L, n = cfg.lanes, 600
    rng = np.random.default_rng(70 + add_latency)
    a, b = f32_pairs(rng, n * L)
    a, b = a[:n * L], b[:n * L]
    k = len(F32_SPECIAL)
    a[:k * k], b[:k * k] = np.repeat(F32_SPECIAL, k), np.tile(F32_SPECIAL, k)    # every pair of specials
    old, psum = a.reshape(-1, L), b.reshape(-1, L)
    acc = rng.integers(0, 2, len(old))
    want = np.where(acc[:, None] == 1, ref_add(old, psum).reshape(-1, L), psum)
    dut = AccumAdd(cfg)
    assert dut.latency == add_latency - 1
    got = simulate(dut, {"old": _rows(L, 32, old), "psum": _rows(L, 32, psum), "acc": acc}).tolist()
    bad = [i for i, (g, w) in enumerate(zip(got, _rows(L, 32, want))) if g != w]
    assert not bad, (len(bad), [hex(int(x)) for x in (*old[bad[0]], *psum[bad[0]])], acc[bad[0]])


def test_int_rows_wrap():
    cfg = FettaConfig(datatype="int16", add_latency=3)
    L, W, n = cfg.lanes, cfg.acc_bits, 800
    rng = np.random.default_rng(9)
    old = rng.integers(0, 1 << W, (n, L), dtype=np.uint64)
    psum = rng.integers(0, 1 << W, (n, L), dtype=np.uint64)
    acc = rng.integers(0, 2, n)
    want = np.where(acc[:, None] == 1, (old + psum) & np.uint64((1 << W) - 1), psum)
    got = simulate(AccumAdd(cfg), {"old": _rows(L, W, old), "psum": _rows(L, W, psum), "acc": acc})
    assert got.tolist() == _rows(L, W, want)
