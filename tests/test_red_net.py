# amaranth: UnusedElaboratable=no
# (the parameter-validation tests create components that raise in __init__ and are never elaborated)
"""Reduction network and adder switch RTL (Amaranth simulator) against the Python model."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Fragment
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from gen.design import routing
from gen.design.config import FettaConfig
from gen.errors import ConfigError
from hdl.red_net import AdderSwitch, RedNet, SwitchMode, red_net
from gen.design import netsem as nm
from sim import net_model as sm
from sim import toolchain
from sim.bf16 import f32_add, f32_bits, f32_from_bits
from tests.strategies import covering

# FP32 patterns that exercise the adder's corners: zeros of both signs, subnormals
# (flushed), infinities, NaNs, extremes, and exact cancellation partners
F32_SPECIAL = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x80800000, 0x7F7FFFFF,
               0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x3F800000,
               0xBF800000, 0x33800000, 0x4B800000]


def f32_patterns():
    return st.one_of(st.sampled_from(F32_SPECIAL), st.integers(0, 0xFFFFFFFF),
                     st.integers(0x3E000000, 0x41000000).map(lambda u: u | (0x80000000 if u & 1 else 0)))


def elem(datatype, width):
    return f32_patterns() if datatype == "bf16" else st.integers(0, (1 << width) - 1)


def simulate(dut: RedNet, beats):
    """One beat per cycle (data, valid, mode_vec, bank_idx, transpose), then drain the pipeline."""
    N, L, W, lat = dut.ports, dut.lanes, dut.width, dut.latency
    outs = []

    async def tb(ctx):
        for c in range(len(beats) + lat - 1):
            if c < len(beats):
                data, valid, mode, bank, tr = beats[c]
                ctx.set(dut.i_data.as_value(), sm.pack_rows(data, W))
                ctx.set(dut.i_valid, nm.pack_bits(valid))
                ctx.set(dut.mode, mode)
                ctx.set(dut.bank_idx, bank)
                ctx.set(dut.transpose, tr)
            else:  # bubbles with garbage controls: they must not disturb the beats in flight
                ctx.set(dut.i_valid, 0)
                ctx.set(dut.mode, (1 << len(dut.mode)) - 1 if c % 2 else 0)
                ctx.set(dut.transpose, c % 2)
            await ctx.tick()
            if c >= lat - 1:
                outs.append((sm.unpack_rows(ctx.get(dut.o_data.as_value()), N, L, W),
                             nm.unpack_bits(ctx.get(dut.o_valid), N)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return outs


def model(beat, N, L, add):
    data, valid, mode, bank, tr = beat
    n = nm.log2_exact(N)
    modes = nm.red_effective_modes(nm.unpack_levels(mode, n, N // 2, 2), bank, n)
    return nm.red_forward(data, valid, modes, add=add, do_transpose=bool(tr), lanes=L)


@st.composite
def beats(draw, N, L, datatype, W, count=4):
    n = nm.log2_exact(N)
    out = []
    for _ in range(draw(st.integers(1, count))):
        data = [[draw(elem(datatype, W)) for _ in range(L)] for _ in range(N)]
        valid = [draw(st.integers(0, 1)) for _ in range(N)]
        out.append((data, valid, draw(st.integers(0, (1 << (N // 2 * n * 2)) - 1)),
                    draw(st.integers(0, N - 1)), draw(st.integers(0, 1))))
    return out


# (ports, lanes, datatype, width)
SHAPES = [(2, 1, "int16", 8), (4, 2, "int16", 12), (8, 2, "int16", 32), (4, 2, "bf16", 32), (8, 1, "bf16", 32)]


@pytest.mark.parametrize("N,L,dt,W,add_stages", covering(SHAPES, [1, 3]))
@settings(max_examples=10)
@given(st.data())
def test_rtl_matches_model_random_controls(N, L, dt, W, add_stages, data):
    """Random modes, bank indices, transposes, data and valids, changing every cycle: RTL == model,
    with one-cycle levels and with 3-cycle levels (pipelined adders, everything else delayed)."""
    bs = data.draw(beats(N, L, dt, W))
    dut = RedNet(ports=N, lanes=L, datatype=dt, width=W, add_stages=add_stages)
    assert dut.latency == dut.levels * add_stages
    got = simulate(dut, bs)
    add = sm.adder_for(dt, W)
    assert len(got) == len(bs)
    for beat, (od, ov) in zip(bs, got):
        md, mv = model(beat, N, L, add)
        assert ov == mv, f"mode={beat[2]:#x} bank={beat[3]} transpose={beat[4]}"
        assert od == md, f"mode={beat[2]:#x} bank={beat[3]} transpose={beat[4]}"


@pytest.mark.parametrize("dt,W,stages", covering([("bf16", 32), ("int16", 20)], [3, 0, 1]))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_adder_switch_all_modes(dt, W, stages, data):
    """The adder switch alone, every mode and valid combination, against the model's switch; with
    inner stages the outputs follow the inputs ``stages`` cycles later (selects decoded up front)."""
    L = 2
    a = [data.draw(elem(dt, W)) for _ in range(L)]
    b = [data.draw(elem(dt, W)) for _ in range(L)]
    dut = AdderSwitch(lanes=L, datatype=dt, width=W, stages=stages)
    assert dut.latency == stages
    add = sm.adder_for(dt, W)
    results = []

    async def tb(ctx):
        ctx.set(dut.a, sm.pack_rows([a], W))
        ctx.set(dut.b, sm.pack_rows([b], W))
        for mode in SwitchMode:
            for va in (0, 1):
                for vb in (0, 1):
                    ctx.set(dut.mode, mode)
                    ctx.set(dut.a_valid, va)
                    ctx.set(dut.b_valid, vb)
                    if stages:
                        await ctx.tick().repeat(stages)
                    got = (sm.unpack_rows(ctx.get(dut.l), 1, L, W)[0], ctx.get(dut.l_valid),
                           sm.unpack_rows(ctx.get(dut.r), 1, L, W)[0], ctx.get(dut.r_valid))
                    results.append((mode.value, va, vb, got))

    sim = Simulator(dut)
    if stages:
        sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    assert len(results) == 16
    for mode, va, vb, got in results:
        assert got == tuple(nm.adder_switch(mode, a, va, b, vb, add)), (mode, va, vb)
    if dt == "bf16":  # the model's add is the reference op itself
        want = int(f32_bits(f32_add(f32_from_bits(np.uint32(a[0])), f32_from_bits(np.uint32(b[0])))))
        assert nm.adder_switch(nm.ADD_LEFT, a, 1, b, 1, add)[0][0] == want


@pytest.mark.parametrize("dt,W,add_stages", covering([("int16", 48), ("bf16", 32)], [1, 4]))
def test_full_size_reductions(dt, W, add_stages):
    """16 ports x 4 lanes: reductions of 1/2/4/8/16 with sums routed to chosen ports, streamed back to back."""
    N, L = 16, 4
    rng = np.random.default_rng(7)
    if dt == "bf16":
        vals = rng.normal(size=(N, L)).astype(np.float32)
        data = [[int(x) for x in row] for row in f32_bits(vals)]
    else:
        data = [[int(x) for x in row] for row in rng.integers(0, 1 << W, size=(N, L), dtype=np.uint64)]
    add = sm.adder_for(dt, W)
    patterns = []
    for size in (1, 2, 4, 8, 16):
        patterns.append(routing.reduction_groups(N, size, offset=size - 1))
        patterns.append(routing.packed_reduction_groups(N, size))
    patterns.append([(0, 8, 3), (8, 4, 12), (12, 2, 0), (14, 1, 14), (15, 1, 9)])  # mixed sizes
    routes = [routing.route_red(N, g, bank_idx=0) for g in patterns]
    routes.append(routing.route_red(N, routing.reduction_groups(N, 4), transpose=True))
    beats_ = [(data, [1] * N, r.port_value(), r.bank_idx, int(r.transpose)) for r in routes]
    got = simulate(RedNet(ports=N, lanes=L, datatype=dt, width=W, add_stages=add_stages), beats_)
    n = nm.log2_exact(N)
    for r, beat, (od, ov) in zip(routes, beats_, got):
        assert (od, ov) == model(beat, N, L, add)
        if r.transpose:
            continue
        # and independently of the network model: each destination holds its group's sum
        for first, size, dest in r.groups:
            assert ov[dest] == 1
            want = list(data[first])
            # the adder tree's order: pairs at distance 1, then 2, 4, ... (LSB-first butterfly)
            level = [list(data[p]) for p in range(first, first + size)]
            while len(level) > 1:
                level = [[add(x, y) for x, y in zip(level[2 * i], level[2 * i + 1])] for i in range(len(level) // 2)]
            want = level[0]
            assert od[dest] == want, (r.groups, dest)
        assert sum(ov) == len(r.groups)
    assert n == 4


def test_latency_pipelined_controls():
    """Latency log2(N); a different control word on every cycle still reaches its own beat."""
    dut = RedNet(ports=8, lanes=1, datatype="int16", width=16)
    assert dut.latency == 3
    r_all = routing.route_red(8, [(0, 8, 5)])
    r_pass = routing.route_red(8, [(p, 1, p) for p in range(8)])
    data = [[p + 1] for p in range(8)]
    got = simulate(dut, [(data, [1] * 8, r_all.port_value(), 0, 0), (data, [1] * 8, r_pass.port_value(), 0, 0)])
    assert got[0] == ([[0]] * 5 + [[36]] + [[0]] * 2, [0] * 5 + [1] + [0] * 2)
    assert got[1] == (data, [1] * 8)


def test_factory_uses_config():
    dut = red_net(FettaConfig())
    assert (dut.ports, dut.lanes, dut.width, dut.datatype) == (16, 4, 32, "bf16")
    dut2 = red_net(FettaConfig(datatype="int16", net_ports=4, num_ces=4, lanes=2))
    assert (dut2.ports, dut2.lanes, dut2.width, dut2.datatype) == (4, 2, 48, "int16")
    Fragment.get(dut2, None)
    Fragment.get(RedNet(ports=2, lanes=1, datatype="bf16", width=32), None)
    dut._MustUse__silence = True  # elaborating 128 FP32 adders here is not the point of this test
    with pytest.raises(ConfigError) as exc:
        red_net(FettaConfig(net_ports=8, num_ces=8, lanes=16))
    assert exc.value.field == "lanes"


@pytest.mark.parametrize("kw,field", [
    (dict(ports=6, lanes=2, datatype="int16", width=32), "net_ports"),
    (dict(ports=4, lanes=8, datatype="int16", width=32), "lanes"),
    (dict(ports=4, lanes=2, datatype="fp8", width=32), "datatype"),
    (dict(ports=4, lanes=2, datatype="bf16", width=48), "width"),
])
def test_bad_parameters_name_the_field(kw, field):
    with pytest.raises(ConfigError) as exc:
        RedNet(**kw)
    assert exc.value.field == field


# --- emitted Verilog under cocotb, both simulators ------------------------------------
@pytest.mark.sim
@pytest.mark.parametrize("sim,dt", covering(["icarus", "verilator"], ["int16", "bf16"]))
@settings(max_examples=2)
@given(data=st.data())
def test_verilog_matches_model(sim, dt, data, tmp_path_factory):
    """``fetta verilog --top red_net`` (4 ports x 2 lanes) on Icarus and Verilator == model."""
    cfg = FettaConfig(datatype=dt, int_width=8, int_acc_width=24, net_ports=4, num_ces=4, lanes=2)
    N, L, W = cfg.net_ports, cfg.lanes, cfg.acc_bits
    bs = data.draw(beats(N, L, dt, W, count=16))
    for groups in ([(0, 4, 3)], [(0, 2, 1), (2, 2, 0)]):
        r = routing.route_red(N, groups)
        bs.append((bs[0][0], [1] * N, r.port_value(), 0, 0))
    flat = [(sm.pack_rows(d, W), nm.pack_bits(v), mode, bank, tr) for d, v, mode, bank, tr in bs]
    if not toolchain.available(sim):
        pytest.skip(f"{sim} not available")
    got = sm.run_net_bench("red_net", cfg, flat, latency=nm.log2_exact(N), ctrl_port="mode", sim=sim,
                           workdir=tmp_path_factory.mktemp("red"))
    add = sm.adder_for(dt, W)
    assert len(got) == len(bs)
    for beat, o in zip(bs, got):
        md, mv = model(beat, N, L, add)
        assert (sm.unpack_rows(o["data"], N, L, W), nm.unpack_bits(o["valid"], N)) == (md, mv)
