# amaranth: UnusedElaboratable=no
"""The controller's decoder (Amaranth simulator) against :func:`gen.design.isa.check`: the same
error code for random instructions, biased towards the boundaries of every check."""

from __future__ import annotations

from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from gen.design.config import FettaConfig
from gen.design.isa import ErrorCode, Geometry, Instr, check
from hdl.controller import Decoder

CFG = FettaConfig(num_ces=4, net_ports=4, banks=4, unified_kb=4, accum_kb=2, imem_depth=16)
GEO = Geometry.of(CFG)


@st.composite
def instrs(draw):
    small = st.integers(0, 9)
    addr = st.one_of(st.integers(0, 40), st.integers(GEO.accum_rows - 20, GEO.unified_half_rows + 5))
    kw = {"opcode": draw(st.sampled_from([3, 3, 3, 4, 5, 1, 7, 8])), "flags": draw(st.integers(0, 3)),
          "mode": draw(st.sampled_from([0, 0, 0, 0, 0, 1])),
          "log_gm": draw(st.integers(0, 2)), "log_gn": draw(st.integers(0, 2)), "log_gk": draw(st.integers(0, 2)),
          "K": draw(st.sampled_from([1, 2, 5, 12, 0])), "L0": draw(st.sampled_from([1, 3, 0])),
          "L1": draw(st.sampled_from([1, 2, 4])),
          "w_base": draw(addr), "tr": draw(st.sampled_from([0, 0, 1, 2, 3, 4, 7]))}
    for op in "abo":
        kw[f"{op}_base"] = draw(addr)
        for lv in ("k", "l0", "l1", "m", "n", "r"):
            kw[f"{op}_s{lv}"] = draw(small)
    if kw["opcode"] == 7:
        # DMA: every mode, DRAM addresses (32-byte beats here) aligned or not, up to past 4 GiB
        kw["mode"] = draw(st.integers(0, 3))
        kw["a_sel"] = draw(st.sampled_from([0, 32, 48, 4096 - 32, (1 << 32) - 64, (1 << 32) - 32, 1 << 32,
                                            (1 << 64) - 32]))
    return Instr(**kw)


def decode_rtl(words):
    dut = Decoder(CFG)
    out = []

    async def tb(ctx):
        # the top's FETCH (the word from the memory), DECODE (load) then CHECK (the error code of
        # the registers); the memory delivers other words meanwhile, which the stages must not see
        for k, w in enumerate(words):
            ctx.set(dut.word, w)
            ctx.set(dut.pc_overflow, 0)
            ctx.set(dut.fetch, 1)
            await ctx.tick()
            ctx.set(dut.fetch, 0)
            ctx.set(dut.word, words[(k + 1) % len(words)])
            ctx.set(dut.load, 1)
            await ctx.tick()
            ctx.set(dut.load, 0)
            ctx.set(dut.word, words[(k + 2) % len(words)])
            out.append(ctx.get(dut.error))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    return out


@settings(max_examples=2, database=None)
@given(st.lists(instrs(), min_size=40, max_size=40))
def test_decoder_matches_isa_check(batch):
    got = decode_rtl([i.encode() for i in batch])
    want = [int(check(i, GEO)) for i in batch]
    assert got == want


def transposed_cases():
    """GEMMs with transpose layers on either side of every transposed check (4 CEs, 4 lanes)."""
    from gen.design.isa import gemm

    g = lambda **kw: gemm(ports=GEO.ports, **kw)   # noqa: E731
    half = GEO.unified_half_rows
    return [g(K=2, grid=(1, 2, 2), a=(0, 4, 8, 0, 0, 0, 1), b=(64, 4), o=(0, 1, 0, 0, 0, 1), tr=1),       # NONE
            g(K=2, grid=(1, 2, 2), a=(2, 4, 8, 0, 0, 0, 1), b=(64, 4), o=(0, 1, 0, 0, 0, 1), tr=1),       # ROUTE
            g(K=2, grid=(1, 2, 2), a=(0, 2, 8, 0, 0, 0, 1), b=(64, 4), o=(0, 1, 0, 0, 0, 1), tr=1),       # ROUTE
            g(K=2, grid=(1, 2, 2), a=(0, 4, 8, 0, 0, 0, 1), b=(64, 4), o=(0, 1, 0, 0, 0, 1), tr=0),       # NONE
            g(K=2, grid=(1, 1, 2), a=(0, 4, 0, 0, 0, 0, 5), b=(64, 4, 0, 0, 0, 0, 1), o=(0, 1), tr=1),    # BANK
            g(K=2, grid=(1, 1, 2), a=(0, 4, 0, 0, 0, 0, 5), b=(64, 4, 0, 0, 0, 0, 1), o=(0, 1), tr=0),    # NONE
            g(K=1, a=(half - 4, 4, 0, 0, 0, 0, 0), b=(64, 4), o=(0, 1), tr=1),                          # NONE
            g(K=1, a=(half - 4, 4, 0, 0, 0, 0, 0), b=(64, 4), o=(0, 1), tr=0),                          # NONE
            g(K=2, a=(half - 8, 4, 0, 0, 0, 0, 0), b=(64, 4), o=(0, 1), tr=1),                          # NONE
            g(K=3, a=(half - 8, 4, 0, 0, 0, 0, 0), b=(64, 4), o=(0, 1), tr=1),                          # RANGE
            g(K=2, grid=(2, 2, 1), a=(0, 4, 0, 0, 1), b=(64, 4, 0, 0, 0, 1), o=(0, 4, 0, 0, 2, 1), tr=4),  # NONE
            g(K=2, grid=(1, 2, 2), a=(0, 4, 0, 0, 0, 0, 1), b=(64, 4, 0, 0, 0, 1, 0), o=(0, 4, 0, 0, 0, 1), tr=4),
            g(K=2, grid=(1, 2, 1), a=(0, 4), b=(64, 4, 0, 0, 0, 1), o=(0, 4, 0, 0, 0, 1), tr=4)]       # BAD_SHAPE


def test_transposes_decoder_matches_isa_check():
    cases = transposed_cases()
    want = [int(check(i, GEO)) for i in cases]
    assert want == [0, 7, 7, 0, 4, 0, 0, 0, 0, 2, 0, 5, 5]
    assert decode_rtl([i.encode() for i in cases]) == want


def test_every_code_reachable():
    from gen.design.isa import gemm, load, store

    cases = {ErrorCode.NONE: gemm(K=2, o=(0, 1)), ErrorCode.ILLEGAL_OPCODE: Instr(opcode=8),
             ErrorCode.BAD_SHAPE: gemm(K=1, grid=(2, 2, 2)),
             ErrorCode.UNIFIED_RANGE: gemm(K=2, a=(GEO.unified_half_rows - 1, 1)),
             ErrorCode.ACCUM_RANGE: load(src=0, dst=GEO.accum_rows - 1, chunks=1),
             ErrorCode.BANK_CONFLICT: store(src=0, dst=0, chunks=1, dst_stride=0),
             ErrorCode.ROUTE: gemm(K=1, grid=(1, 1, 2), a=(0, 1, 0, 0, 0, 0, 1), b=(8, 2, 0, 0, 0, 0, 1), o=(0, 1),
                                   ports=GEO.ports)}
    got = decode_rtl([i.encode() for i in cases.values()])
    assert got == [int(c) for c in cases]
