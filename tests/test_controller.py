# amaranth: UnusedElaboratable=no
"""The controller's decoder (Amaranth simulator) against :func:`gen.design.isa.check`: the same
error code for random instructions, biased towards the boundaries of every check."""

from __future__ import annotations

from dataclasses import replace

import pytest
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from gen.design.config import FettaConfig
from gen.design.isa import LOG_GRID_BITS, ErrorCode, Geometry, Instr, check
from hdl.controller import Decoder

CFG = FettaConfig(num_ces=4, net_ports=4, banks=4, unified_kb=4, accum_kb=2, imem_depth=16)
GEO = Geometry.of(CFG)


@st.composite
def instrs(draw):
    small = st.integers(0, 9)
    # grid sides up to the field's largest (the checks compare the logarithms' sums)
    grid_log = st.one_of(st.integers(0, 2), st.just((1 << LOG_GRID_BITS) - 1))
    addr = st.one_of(st.integers(0, 40), st.integers(GEO.accum_rows - 20, GEO.unified_half_rows + 5))
    kw = {"opcode": draw(st.sampled_from([3, 3, 3, 4, 5, 1, 7, 8])), "flags": draw(st.integers(0, 3)),
          "mode": draw(st.sampled_from([0, 0, 0, 0, 0, 1])),
          **{f"log_g{d}": draw(grid_log) for d in "mnk"},
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


def decode_rtl(words, config=CFG, offsets=False):
    """The decoder's error code of each word (``offsets``: with its registered ``a_off`` /
    ``b_off`` / ``o_off`` of every CE, as ``(error, {op: [offset per CE]})``)."""
    dut = Decoder(config)
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
            err = ctx.get(dut.error)
            if offsets:
                err = (err, {op: [ctx.get(getattr(dut, f"{op}_off")[c]) for c in range(config.num_ces)]
                             for op in "abo"})
            out.append(err)

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


def test_range_checks_see_every_bit_of_the_sums():
    """The range checks sum only the low bits of their terms (as many as the limit has) and flag a
    term with a higher bit set (``hdl.controller._capped``): each case has a product or a base whose
    low bits are 0 or small, so a sum of the low bits alone would pass; isa.check must fail them
    all, and the decoder with it."""
    from gen.design.isa import gemm, load, store, vec

    hi = 1 << (max(GEO.unified_half_rows, GEO.accum_rows).bit_length() + 3)     # above both limits
    g = lambda **kw: gemm(ports=GEO.ports, **kw)   # noqa: E731
    cases = [g(K=2, a=(0, hi), b=(8, 1), o=(0, 1)),                                   # a: K product
             g(K=1, L0=3, a=(0, 1, hi // 2), b=(8, 1), o=(0, 1)),                      # a: l0 product
             g(K=1, grid=(2, 1, 1), a=(0, 1, 0, 0, hi), b=(8, 1), o=(0, 4, 0, 0, 1)),  # a: spatial span
             g(K=1, L1=2, a=(0, 1), b=(8, 1, 0, hi - 1), o=(0, 1)),                    # b: l1 product
             g(K=1, L1=2, a=(0, 1), b=(8, 1), o=(0, 1, 0, hi)),                         # o: accumulation
             g(K=1, a=(0, 1), b=(8, 1), o=(0, 1), wb=True, w_base=hi + 1),              # o: write-back
             load(src=0, dst=0, chunks=1, src_stride=hi),
             store(src=0, dst=0, chunks=1, src_stride=hi // 4 * 3),
             vec(op=0, chunks=1, x=0, y=0, x_stride=hi),
             vec(op=0, chunks=1, x=0, y=hi)]
    want = [int(check(i, GEO)) for i in cases]
    assert all(w in (ErrorCode.UNIFIED_RANGE, ErrorCode.ACCUM_RANGE) for w in want), want
    assert decode_rtl([i.encode() for i in cases]) == want


@st.composite
def routed_gemms(draw, ports: int):
    """GEMMs on ``ports`` CEs whose IA / IB offsets the butterflies may or may not route: the
    words :func:`gen.design.isa.with_routes` computes, one of their switches flipped, or random
    words; strides small, so that routing (not range) decides, and temporal strides with or
    without the low bank bits the spatial offsets use."""
    from gen.design.isa import gemm

    n = ports.bit_length() - 1
    logs = [draw(st.integers(0, n))]
    logs.append(draw(st.integers(0, n - logs[0])))
    logs.append(draw(st.integers(0, n - sum(logs))))
    grid = tuple(1 << g for g in draw(st.permutations(logs)))
    st_small = st.sampled_from([0, 1, 1, 2, 3, 4, 5, 8])
    ops = {op: [draw(st.sampled_from([0, 16, 32, 64])), draw(st.sampled_from([16, 32, 1, 2])), 0, 0,
                draw(st_small), draw(st_small), draw(st_small)] for op in "ab"}
    ins = gemm(K=2, grid=grid, a=ops["a"], b=ops["b"], o=(256, 16, 0, 0, 1, 1), ports=ports)
    for op in "ab":
        how = draw(st.sampled_from(["keep", "keep", "flip", "random"]))
        word = getattr(ins, f"{op}_sel")
        if how == "flip":
            word ^= 1 << draw(st.integers(0, n * ports - 1))
        elif how == "random":
            word = draw(st.integers(0, (1 << n * ports) - 1))
        ins = replace(ins, **{f"{op}_sel": word})
    return ins


def flip_path_switch(ins: Instr, ports: int, c: int, k: int, b: int) -> Instr:
    """``ins`` with a switch on CE ``c``'s IA path flipped, so that it cannot route: the one of
    level ``n - 1 - k`` (it sets bit ``k`` of the source) that the path from bank index
    ``b``-th multiple of ``2**p`` (the bank indices the temporal address can take) crosses."""
    from gen.design.isa import ce_offsets, spatial_mask

    n = ports.bit_length() - 1
    offs = [o % ports for o in ce_offsets(ins, "a")]
    bank = (b * (spatial_mask(offs) + 1)) % ports
    switch = (c >> k << k) | ((offs[c] ^ bank) & ((1 << k) - 1))
    return replace(ins, a_sel=ins.a_sel ^ (1 << (n - 1 - k) * ports + switch))


@pytest.mark.parametrize("ports", [8, 16])
@settings(max_examples=2, database=None)
@given(data=st.data())
def test_decoder_offsets_and_routes_full_size(ports, data):
    """At 8 and 16 CEs: every CE's spatial offsets equal :func:`gen.design.isa.ce_offsets` and the
    error code :func:`gen.design.isa.check` (routing decides most: kept, flipped and random
    switch words); every instruction that routes comes again with a switch on an active CE's path
    (any level, any bank index) flipped, and a full grid whose IA offsets permute the banks comes in both forms."""
    from gen.design.isa import ce_offsets, gemm, group_offsets

    config = FettaConfig(num_ces=ports, net_ports=ports, banks=ports, unified_kb=64, accum_kb=16, imem_depth=16)
    geo = Geometry.of(config)
    full = gemm(K=2, grid=(1, 1, ports), a=(0, 16, 0, 0, 0, 0, 3), b=(64, 16), o=(256, 1), ports=ports)
    batch = [full, flip_path_switch(full, ports, ports - 1, 0, 0)]
    batch += data.draw(st.lists(routed_gemms(ports), min_size=32, max_size=32))
    n = ports.bit_length() - 1
    batch += [flip_path_switch(i, ports, data.draw(st.integers(0, i.gm * i.gn * i.gk - 1)),
                               data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, ports - 1)))
              for i in batch[2:] if check(i, geo) == ErrorCode.NONE]
    assert all(want == ErrorCode.ROUTE for want in map(check, batch[34:], [geo] * len(batch)))
    got = decode_rtl([i.encode() for i in batch], config, offsets=True)
    want = [int(check(i, geo)) for i in batch]
    assert [e for e, _ in got] == want
    assert want[:2] == [ErrorCode.NONE, ErrorCode.ROUTE]
    for ins, (_, offs) in zip(batch, got):
        ces = ins.gm * ins.gn * ins.gk
        assert offs["a"][:ces] == list(ce_offsets(ins, "a")) and offs["b"][:ces] == list(ce_offsets(ins, "b"))
        assert offs["o"][:ins.gm * ins.gn] == list(group_offsets(ins))
        # the idle CEs too: c split into (im, in, ik) by the grid's bits, im unbounded
        lgn, lgk = ins.log_gn, ins.log_gk
        for op in "ab":
            sm, sn, sr = (getattr(ins, f"{op}_s{lv}") for lv in "mnr")
            assert offs[op] == [(c >> lgn + lgk) * sm + ((c >> lgk) % ins.gn) * sn + (c % ins.gk) * sr
                                for c in range(ports)]
        assert offs["o"] == [(c >> lgn) * ins.o_sm + (c % ins.gn) * ins.o_sn for c in range(ports)]
