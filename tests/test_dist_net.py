# amaranth: UnusedElaboratable=no
# (the parameter-validation tests create components that raise in __init__ and are never elaborated)
"""Distribution network RTL (Amaranth simulator) against the Python model, and routed patterns."""

from __future__ import annotations

import pytest
from amaranth.hdl import Fragment
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from gen.design import routing
from gen.design.config import FettaConfig
from gen.errors import ConfigError
from hdl.dist_net import DistNet, dist_net
from gen.design import netsem as nm
from sim import net_model as sm
from sim import toolchain

# (ports, lanes, width): small shapes keep the simulator fast; 16x4 is the paper's
SHAPES = [(2, 1, 3), (4, 2, 5), (8, 4, 16), (16, 4, 16)]


def simulate(dut: DistNet, beats):
    """Drive one beat per cycle (data, valid, sel_vec, bank_idx, transpose); collect outputs."""
    N, L, W = dut.ports, dut.lanes, dut.width
    outs = []

    async def tb(ctx):
        for data, valid, sel, bank, tr in beats:
            ctx.set(dut.i_data.as_value(), sm.pack_rows(data, W))
            ctx.set(dut.i_valid, nm.pack_bits(valid))
            ctx.set(dut.sel_vec, sel)
            ctx.set(dut.bank_idx, bank)
            ctx.set(dut.transpose, tr)
            await ctx.tick()
            outs.append((sm.unpack_rows(ctx.get(dut.o_data.as_value()), N, L, W),
                         nm.unpack_bits(ctx.get(dut.o_valid), N)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return outs


def model(data, valid, sel, bank, tr, N, L):
    n = nm.log2_exact(N)
    sel_levels = [(sel >> (s * N)) & ((1 << N) - 1) for s in range(n)]
    ctrl = nm.effective_ctrl(sel_levels, bank, n, width=N)
    return nm.dist_forward(data, valid, ctrl, do_transpose=bool(tr), lanes=L)


@st.composite
def beats(draw, N, L, W, count=6):
    n = nm.log2_exact(N)
    out = []
    for _ in range(draw(st.integers(1, count))):
        data = [[draw(st.integers(0, (1 << W) - 1)) for _ in range(L)] for _ in range(N)]
        valid = [draw(st.integers(0, 1)) for _ in range(N)]
        out.append((data, valid, draw(st.integers(0, (1 << (N * n)) - 1)), draw(st.integers(0, N - 1)),
                    draw(st.integers(0, 1))))
    return out


@pytest.mark.parametrize("N,L,W", SHAPES[:3])
@settings(max_examples=15)
@given(st.data())
def test_rtl_matches_model_random_controls(N, L, W, data):
    """Random control words, data and valids, changing every cycle: RTL == model, beat by beat."""
    bs = data.draw(beats(N, L, W))
    got = simulate(DistNet(ports=N, lanes=L, width=W), bs)
    for (d, v, sel, bank, tr), (od, ov) in zip(bs, got):
        md, mv = model(d, v, sel, bank, tr, N, L)
        assert (od, ov) == (md, mv), f"sel={sel:#x} bank={bank} transpose={tr}"


def test_rtl_full_size_routed_patterns():
    """The paper's 16 ports x 4 lanes: every pattern family routed, simulated and checked."""
    N, L, W = 16, 4, 16
    dut = DistNet(ports=N, lanes=L, width=W)
    data = [[(p << 8) | l for l in range(L)] for p in range(N)]  # element names its bank and lane
    cases = []
    for c in (0, 1, 3, 5, 8, 15):
        cases.append((routing.shift_sources(N, c), False))
    for f in (2, 4, 8, 16):
        cases.append((routing.multicast_sources(N, f, [(3 * q + 1) % N for q in range(N // f)]), False))
    cases.append((list(range(N)), True))                          # 4 banks x 4 lanes -> 4 x 4 columns
    cases.append((routing.multicast_sources(N, 4, [0, 1, 2, 3]), True))  # columns of group 0 to 4 CEs each
    routes = [routing.route_dist(N, src, transpose=tr, bank_idx=b)
              for b, (src, tr) in enumerate(cases)]
    got = simulate(dut, [(data, [1] * N, r.port_value(), r.bank_idx, int(r.transpose)) for r in routes])
    for r, (od, ov) in zip(routes, got):
        assert ov == [1] * N
        rows = nm.transpose(data, [1] * N, L)[0] if r.transpose else data
        for j, src in enumerate(r.sources):
            assert od[j] == rows[src], (r.sources, r.transpose, j)
    # the transpose really turns bank rows into columns: CE j gets lane j%4 of banks 4(j//4)..+3
    od, _ = got[len(cases) - 2]
    assert od[5] == [(4 << 8) | 1, (5 << 8) | 1, (6 << 8) | 1, (7 << 8) | 1]


def test_latency_and_reset():
    dut = DistNet(ports=4, lanes=1, width=4)
    seen = []

    async def tb(ctx):
        seen.append(ctx.get(dut.o_valid))  # reset value, before any clock edge
        ctx.set(dut.i_valid, 0b1111)
        ctx.set(dut.i_data.as_value(), 0x4321)
        seen.append(ctx.get(dut.o_valid))  # still registered: no combinational path
        await ctx.tick()
        seen.append((ctx.get(dut.o_valid), ctx.get(dut.o_data.as_value())))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert seen == [0, 0, (0b1111, 0x4321)]
    assert dut.latency == 1


def test_factory_uses_config():
    dut = dist_net(FettaConfig())
    assert (dut.ports, dut.lanes, dut.width) == (16, 4, 16)
    Fragment.get(dut, None)  # it elaborates
    dut = dist_net(FettaConfig(datatype="int16", int_width=8, int_acc_width=24, net_ports=8, num_ces=8))
    assert (dut.ports, dut.lanes, dut.width) == (8, 4, 8)
    Fragment.get(dut, None)
    with pytest.raises(ConfigError) as exc:
        dist_net(FettaConfig(lanes=32))
    assert exc.value.field == "lanes"


@pytest.mark.parametrize("kw,field", [
    (dict(ports=6, lanes=2, width=16), "net_ports"),
    (dict(ports=1, lanes=1, width=16), "net_ports"),
    (dict(ports=4, lanes=8, width=16), "lanes"),
    (dict(ports=8, lanes=3, width=16), "lanes"),
    (dict(ports=8, lanes=4, width=0), "width"),
])
def test_bad_parameters_name_the_field(kw, field):
    with pytest.raises(ConfigError) as exc:
        DistNet(**kw)
    assert exc.value.field == field


# --- emitted Verilog under cocotb, both simulators ------------------------------------
@pytest.mark.sim
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
@settings(max_examples=2)
@given(data=st.data())
def test_verilog_matches_model(sim, data, tmp_path_factory):
    """``fetta verilog --top dist_net`` (8 ports x 4 lanes x 8 bits) on Icarus and Verilator == model."""
    cfg = FettaConfig(datatype="int16", int_width=8, int_acc_width=16, net_ports=8, num_ces=8, lanes=4)
    N, L, W = cfg.net_ports, cfg.lanes, cfg.elem_bits
    bs = data.draw(beats(N, L, W, count=24))
    routed = routing.route_dist(N, routing.multicast_sources(N, 4, [5, 2]), transpose=True, bank_idx=3)
    bs.append((bs[0][0], [1] * N, routed.port_value(), routed.bank_idx, 1))
    flat = [(sm.pack_rows(d, W), nm.pack_bits(v), sel, bank, tr) for d, v, sel, bank, tr in bs]
    if not toolchain.available(sim):
        pytest.skip(f"{sim} not available")
    got = sm.run_net_bench("dist_net", cfg, flat, latency=1, ctrl_port="sel_vec", sim=sim,
                           workdir=tmp_path_factory.mktemp("dist"))
    assert len(got) == len(bs)
    for (d, v, sel, bank, tr), o in zip(bs, got):
        md, mv = model(d, v, sel, bank, tr, N, L)
        assert (sm.unpack_rows(o["data"], N, L, W), nm.unpack_bits(o["valid"], N)) == (md, mv)
