"""Analytical model: hand-computed cycle / traffic cases and the CLI contract."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pathlib import Path

from gen.cli import main as fetta_main
from gen.compiler import compile_layer
from gen.compiler.dma import hardware_timeline
from gen.compiler.estimate import compulsory_bytes, model_compiled
from gen.design.config import FettaConfig
from gen.compiler.capabilities import ARCHS, capabilities
from gen.toolflow.execute import execute
from sim.golden import random_inputs
from gen.model import ENERGY_PJ, gemm_of, map_step, model_network
from gen.search import model_phase
from gen.workload.network import Network, Operand, path_steps, phase_networks
from gen.workload.spec import load_spec, parse_spec

from tests.programs import compiled
from tests.strategies import examples, specs

ROOT = Path(__file__).resolve().parents[1]

CFG = FettaConfig()


def _gemm_net(b: int, i: int, o: int) -> Network:
    return Network(phase="fp", target="Y", inputs=(Operand("X", ("b", "i")), Operand("core_0", ("i", "o"))),
                   output=("b", "o"), sizes={"b": b, "i": i, "o": o}, result_shape=(b, o))


def test_gemm_classification():
    net = Network(phase="fp", target="Y",
                  inputs=(Operand("A", ("b", "m", "k", "s")), Operand("B", ("b", "k", "n"))),
                  output=("b", "m", "n"), sizes={"b": 2, "m": 3, "k": 5, "n": 7, "s": 11})
    (st,) = path_steps(net, [[0, 1]])
    g = gemm_of(st, net.sizes)
    # "s" is summed inside A alone: it lengthens the reduction
    assert (g.b, g.m, g.n, g.k) == (2, 3, 7, 55)
    assert g.macs == st.macs == 2 * 3 * 5 * 7 * 11


def test_fetta_gemm_cycles_hand_computed():
    """64x64x64 on 16 CEs of 4x4: 256 PEs x 1024 cycles, plus fill R + C + log2(E) = 12."""
    net = _gemm_net(64, 64, 64)
    (st,) = path_steps(net, [[0, 1]])
    mp = map_step(st, net.sizes, CFG)
    assert mp.cycles == 1024 + 4 + 4 + 4
    assert mp.utilization == pytest.approx(64 ** 3 / (256 * 1036))
    # the chosen mapping's traffic follows the documented formulas
    cov = {x: mp.split[x] * (4 if x in (mp.rows, mp.cols) else 1) for x in "bmnk"}
    reads_a = 4096 if mp.dataflow == "is" else 4096 * math.ceil(64 / cov["n"])
    reads_b = 4096 if mp.dataflow == "ws" else 4096 * math.ceil(64 / cov["m"])
    assert mp.sram_reads == reads_a + reads_b and mp.sram_writes == 4096
    energy = (64 ** 3 * ENERGY_PJ["mac"] + (mp.sram_reads + mp.sram_writes) * ENERGY_PJ["sram"]
              + mp.accum_updates * ENERGY_PJ["accum"] + mp.dist_transfers * ENERGY_PJ["dist"]
              + mp.red_transfers * ENERGY_PJ["red"] + mp.cycles * ENERGY_PJ["static"])
    assert mp.energy_pj == pytest.approx(energy)


def test_small_dimensions_underutilise_tpu_not_fetta():
    """A TT-like step with a 4-wide output on the compiled engine: the TPU's 16-wide array leaves
    12 of 16 columns idle, FETTA's 4x4 CEs split the step differently."""
    spec = parse_spec({"name": "narrow", "format": "dense", "in_modes": [64], "out_modes": [4], "batch": 1024})
    tpu = model_compiled(spec, "fp", CFG, arch="tpu")
    fetta = model_compiled(spec, "fp", CFG, arch="fetta")
    # 1024 / 16 output tiles (one column tile, 4 of its 16 columns used), 64 deep: at most 25 % busy
    assert tpu.compute_cycles >= (1024 // 16) * 64 == 4 * (1024 * 64 * 4) // 256
    assert fetta.compute_cycles < tpu.compute_cycles / 3


def test_dram_compulsory_and_tiled_traffic():
    small = _gemm_net(64, 64, 64)
    r = model_network(small, [[0, 1]], CFG)
    assert r.dram_bytes == 3 * 4096 * 2           # X and W read once, Y written once
    assert r.cycles == 1036                       # 24576 B / 25.6 B per cycle = 960 < compute
    big = _gemm_net(32, 768, 768)                 # W is 1.125 MiB > 512 KiB unified memory
    r = model_network(big, [[0, 1]], CFG)
    half = 512 * 1024 // 2 // 2                   # elements in one ping-pong half
    extra = 32 * 768 * (math.ceil(768 * 768 / half) - 1)
    assert r.dram_bytes == 2 * (32 * 768 + 768 * 768 + 32 * 768 + extra)
    assert r.cycles == 32 * 768 * 768 // 256 + 12


def test_config_is_read():
    spec = load_spec("benchmarks/layers/atis_tt.json")
    base = model_phase(spec, "fp", CFG)
    small = model_phase(spec, "fp", CFG.replace(num_ces=4))
    slow_dram = model_phase(parse_spec({"format": "dense", "in_modes": [768], "out_modes": [768], "batch": 32}),
                            "fp", CFG.replace(dram_gbps=1.0))
    assert small.cycles > 2 * base.cycles
    assert slow_dram.cycles == slow_dram.dram_bytes   # 1 GB/s at 1 GHz: one byte per cycle, DRAM-bound


#: a TT layer small enough to compile in seconds (ATIS TT train takes minutes per architecture; its
#: model is checked against its compiled program in test_fetta_model_is_the_compiled_program)
SMALL_TT = {"name": "tt-small", "format": "tt", "in_modes": [4, 8, 4], "out_modes": [8, 4, 4], "ranks": 4,
            "batch": 8}


@pytest.mark.parametrize("arch", ARCHS)
def test_cli_model_json(arch, tmp_path):
    path = tmp_path / "tt_small.json"
    path.write_text(json.dumps(SMALL_TT))
    proc = subprocess.run([sys.executable, "-m", "gen", "model", "--spec", str(path),
                           "--phase", "train", "--arch", arch, "--json"], capture_output=True, text=True, check=True)
    out = json.loads(proc.stdout)
    for key in ("cycles", "dram_bytes", "sram_accesses", "energy_pj", "edp"):
        assert out[key] > 0
    assert out["edp"] == pytest.approx(out["energy_pj"] * out["cycles"] / 1000.0, rel=1e-6)
    from gen.search import search_network

    spec = load_spec(path)
    # every architecture is a compiled program (its capability set of the one engine)
    assert out["timing"] == "compiled"
    # by default compiled as `fetta run` compiles it and timed by the lowered program's own count
    assert out["dram"] == "dma"
    caps = capabilities(arch)
    prog = caps.compile(spec, "train", FettaConfig(), dram="dma")
    hw = hardware_timeline(prog, caps.config(FettaConfig()))
    assert out["macs"] == prog.macs and out["cycles"] == hw.cycles and out["dram_bytes"] == hw.dram_bytes
    assert out["compute_cycles"] == hw.compute_cycles
    assert out["relayouts"] == prog.relayouts and out["onchip_relayouts"] == prog.onchip_relayouts
    if arch == "fetta":    # train reuses FP / BP intermediates in WG
        assert out["macs"] == compile_layer(spec, "train", FettaConfig(), dram="dma").macs
        assert out["macs"] < sum(search_network(n, 1)[0].macs for n in phase_networks(spec, "train"))


def test_cli_model_analytical_is_fettas_estimate():
    proc = subprocess.run([sys.executable, "-m", "gen", "model", "--spec", "benchmarks/layers/atis_tt.json",
                           "--phase", "fp", "--arch", "tpu", "--analytical"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--analytical" in proc.stderr


def test_cli_model_bad_config_field():
    proc = subprocess.run([sys.executable, "-m", "gen", "model", "--spec", "benchmarks/layers/atis_tt.json",
                           "--phase", "fp", "--set", "num_ces=0"], capture_output=True, text=True)
    assert proc.returncode == 2 and "num_ces" in proc.stderr


def test_narrow_integer_elements_occupy_whole_bytes():
    """int_width < 8 still stores one element per byte (no division by zero, finite traffic)."""
    from gen.design.config import FettaConfig
    from gen.workload.spec import parse_spec

    spec = parse_spec({"format": "tt", "in_modes": [4, 4], "out_modes": [4, 4], "ranks": 2, "batch": 4})
    narrow = model_phase(spec, "fp", FettaConfig(datatype="int16", int_width=4, int_acc_width=16))
    wide = model_phase(spec, "fp", FettaConfig(datatype="int16", int_width=8, int_acc_width=16))
    assert narrow.cycles == wide.cycles and narrow.cycles > 0


@pytest.mark.xdist_group("examples")
@pytest.mark.parametrize("name,phase", [("atis_tt", "fp"), ("atis_tt", "train"), ("ht", "bp"), ("tucker", "fp"),
                                        pytest.param("tr13", "wg", marks=pytest.mark.slow)])   # ~1 min to compile
def test_fetta_model_is_the_compiled_program(name, phase):
    """`fetta model --arch fetta` reports the cycles the emulator counts for the compiled program (no second
    formula), and the DRAM bytes the program moves."""
    cfg = FettaConfig()
    spec, prog = compiled(name, phase)
    m = model_compiled(spec, phase, cfg)
    ex = execute(prog, random_inputs(spec, 0), cfg)
    assert (m.cycles, m.compute_cycles, m.dram_stall_cycles) == (ex.cycles, ex.compute_cycles, ex.dram_stall_cycles)
    assert m.dram_bytes == ex.timeline.dram_bytes and m.energy_pj > 0 and m.sram_accesses > 0


def test_fetta_model_cli_reports_the_compiled_timing(capsys):
    assert fetta_main(["model", "--spec", str(ROOT / "examples" / "atis_tt.json"), "--phase", "fp", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["timing"] == "compiled" and out["cycles"] == out["compute_cycles"] + out["dram_stall_cycles"]
    assert fetta_main(["model", "--spec", str(ROOT / "examples" / "atis_tt.json"), "--phase", "fp", "--json",
                       "--analytical"]) == 0
    assert json.loads(capsys.readouterr().out)["timing"] == "analytical"


@settings(max_examples=examples(6, 25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs(formats=("tt", "tr", "ttm", "ht", "bt", "tucker"), max_mode=6, max_rank=4, max_batch=9),
       phase=st.sampled_from(["fp", "bp", "wg", "train"]))
def test_fetta_model_equals_emulator_on_random_specs(spec, phase):
    """The model of FETTA is the compiled program's timeline: equal to the emulator's end-to-end cycles."""
    cfg = FettaConfig()
    prog = compile_layer(spec, phase, cfg)      # every spec compiles (chunking over any mode)
    ex = execute(prog, random_inputs(spec, 0), cfg)
    m = model_compiled(spec, phase, cfg)
    assert (m.cycles, m.compute_cycles) == (ex.cycles, ex.compute_cycles)


def test_compulsory_bytes_reads_cores_only_where_a_gradient_needs_them():
    dense = parse_spec({"format": "dense", "in_modes": [768], "out_modes": [768], "batch": 32})
    act, w = 32 * 768 * 2, 768 * 768 * 2            # bf16 bytes of X (= dY, Y, dX) and of the weight
    assert compulsory_bytes(dense, "fp", CFG) == act + w + act
    assert compulsory_bytes(dense, "wg", CFG) == 2 * act + w      # X, dY in; dW out; W not read
    assert compulsory_bytes(dense, "train", CFG) == 4 * act + 2 * w       # X, dY, W in; Y, dX, dW out
    tt = load_spec("benchmarks/layers/atis_tt.json")
    cores = sum(v for k, v in tt.tensor_elements().items() if k.startswith("core_")) * 2
    # each core's gradient contracts the other cores: WG reads them all
    assert compulsory_bytes(tt, "wg", CFG) == 2 * act + 2 * cores
