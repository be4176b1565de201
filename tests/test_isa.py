"""ISA: encoding round trips, assembler helpers and the static checks (range, bank conflicts, shape)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gen.design.config import FettaConfig
from gen.design.isa import (INSTR_BITS, LAYOUT, ErrorCode, Geometry, Instr, IsaError, Opcode, check, decode, exec_cycles,
                     gemm, halt, load, store, vec, vector_rows, VecOp)

GEO = Geometry.of(FettaConfig())


@st.composite
def instrs(draw):
    return Instr(**{name: draw(st.integers(0, (1 << bits) - 1)) for name, (_, bits) in LAYOUT.items()})


@given(instrs())
def test_encode_decode_round_trip(ins):
    word = ins.encode()
    assert 0 <= word < (1 << INSTR_BITS)
    assert decode(word) == ins


def test_fields_do_not_overlap():
    used = 0
    for name, (pos, bits) in LAYOUT.items():
        mask = ((1 << bits) - 1) << pos
        assert used & mask == 0, name
        used |= mask


def test_field_range_is_checked():
    with pytest.raises(IsaError, match="K"):
        Instr(K=1 << 16)


def test_geometry_default():
    # 512 KiB / 2 halves / 8 bytes per row; 128 KiB / 16 bytes per row
    assert GEO.unified_half_rows == 32768
    assert GEO.accum_rows == 8192


def test_illegal_opcode():
    assert check(Instr(opcode=15), GEO) == ErrorCode.ILLEGAL_OPCODE
    assert check(halt(), GEO) == ErrorCode.NONE


def test_gemm_range_checks():
    ok = gemm(K=4, a=(GEO.unified_half_rows - 4, 1), b=(0, 1), o=(0, 1))
    assert check(ok, GEO) == ErrorCode.NONE
    over = gemm(K=5, a=(GEO.unified_half_rows - 4, 1), b=(0, 1), o=(0, 1))
    assert check(over, GEO) == ErrorCode.UNIFIED_RANGE
    acc = gemm(K=1, o=(GEO.accum_rows - 3, 1))   # rows o..o+3
    assert check(acc, GEO) == ErrorCode.ACCUM_RANGE
    wb = gemm(K=1, o=(0, 1), w_base=GEO.unified_half_rows - 3, wb=True)
    assert check(wb, GEO) == ErrorCode.UNIFIED_RANGE


def test_bank_conflicts():
    # 4 CEs reading rows 0, 16, 32, 48: all bank 0 -> conflict
    bad = gemm(K=2, grid=(4, 1, 1), a=(0, 1, 0, 0, 16), b=(64, 1), o=(0, 1, 0, 0, 1))
    assert check(bad, GEO) == ErrorCode.BANK_CONFLICT
    # the same row to all four (multicast) is fine for reads ...
    mc = gemm(K=2, grid=(4, 1, 1), a=(0, 1, 0, 0, 0), b=(64, 1), o=(0, 4, 0, 0, 1))
    assert check(mc, GEO) == ErrorCode.NONE
    # ... but never for writes
    w = gemm(K=2, grid=(1, 4, 1), a=(0, 1), b=(64, 1, 0, 0, 0, 1), o=(0, 4, 0, 0, 0, 0))
    assert check(w, GEO) == ErrorCode.BANK_CONFLICT


def test_bad_shape():
    assert check(gemm(K=1, grid=(4, 4, 2)), GEO) == ErrorCode.BAD_SHAPE   # 32 CEs > 16
    assert check(gemm(K=0), GEO) == ErrorCode.BAD_SHAPE
    assert check(gemm(K=1, mode=6), GEO) == ErrorCode.BAD_SHAPE


def test_load_store_checks():
    assert check(load(src=0, dst=0, chunks=2), GEO) == ErrorCode.NONE
    assert check(store(src=0, dst=0, chunks=2, dst_stride=2), GEO) == ErrorCode.BANK_CONFLICT
    assert check(load(src=0, dst=0, chunks=2, src_stride=0), GEO) == ErrorCode.NONE   # broadcast read
    assert check(load(src=0, dst=GEO.accum_rows - 16, chunks=2), GEO) == ErrorCode.ACCUM_RANGE


def test_timing_rules():
    """The GEMM timing written out by hand for one-cycle arithmetic (M = S = 1) and for a
    2-cycle multiplier with 3-cycle adders (OS interleaves 3 tiles per group)."""
    g1 = Geometry.of(FettaConfig(mul_latency=1, add_latency=1))
    g = gemm(K=10, L0=3, L1=2)
    # tiles back to back, then memory + network (2), CE drain (R), reduction (log2 16), write + FSM
    assert exec_cycles(g, g1) == 5 * 10 + 10 + 4 + 4 + 4
    short = gemm(K=2, L0=3)
    assert exec_cycles(short, g1) == 2 * 4 + 2 + 4 + 4 + 4    # period max(K, ce_rows)
    # IS/WS: the next tile's loads overlap this tile's vectors: period max(loads, K), the last
    # vector 1 (vertical loads) or ce_cols (horizontal) + K - 1 cycles after the last tile's first load
    ws = gemm(K=7, L0=3, mode=1)
    assert exec_cycles(ws, g1) == 2 * 7 + 1 + 7 + 4 + 4 + 4
    wsh = gemm(K=2, L0=3, mode=3)
    assert exec_cycles(wsh, g1) == 2 * 4 + 4 + 2 + 4 + 4 + 4
    assert exec_cycles(load(src=0, dst=0, chunks=3), g1) == 4
    assert exec_cycles(Instr(opcode=Opcode.SYNC), g1) == 0
    # M = 2, S = 3: latency = R*S + M - 1 (CE) + log2(16)*S (network) + S - 1 (the accumulation
    # unit's adder) + 4 = 12 + 1 + 12 + 2 + 4 = 31
    g23 = Geometry.of(FettaConfig(mul_latency=2, add_latency=3))
    # 6 OS tiles in 2 groups of 3, period 3 * max(10, 4); the last vector 3 * 9 + 2 into the group
    assert exec_cycles(g, g23) == 30 + 29 + 1 + 31
    assert exec_cycles(short, g23) == 3 * 1 + 2 + 1 + 31      # one group of 3 tiles of K = 2
    assert exec_cycles(gemm(K=2, L0=4), g23) == 3 * 4 + 3 * 1 + 0 + 1 + 31   # a partial group of 1
    assert exec_cycles(ws, g23) == 2 * 7 + 1 + 6 + 1 + 31     # IS/WS: no interleaving
    assert exec_cycles(wsh, g23) == 2 * 4 + 4 + 1 + 1 + 31
    assert exec_cycles(load(src=0, dst=0, chunks=3), g23) == 4
    # M = 2, S = 7: latency 28 + 1 + 28 + 6 + 4 = 67; a stationary period is at least S (ACC_L0
    # tiles add to the same rows and the accumulation unit's read-modify-write takes S cycles)
    g27 = Geometry.of(FettaConfig(mul_latency=2, add_latency=7))
    assert exec_cycles(gemm(K=2, L0=3, mode=1), g27) == 2 * 7 + 1 + 1 + 1 + 67
    assert exec_cycles(gemm(K=9, L0=3, mode=1), g27) == 2 * 9 + 1 + 8 + 1 + 67


def test_vec_encoding_and_fields():
    v = vec(op="axpy", x=3, y=5, chunks=2, x_stride=2, y_stride=3, scalar=0xBC24, wb=True, w_base=9)
    assert v.opcode == Opcode.VEC == 6 and v.mode == 1 and v.K == 2 and v.scalar == 0xBC24
    assert (v.a_base, v.a_sk, v.o_base, v.o_sk, v.w_base, v.flags) == (3, 2, 5, 3, 9, 2)
    assert decode(v.encode()) == v
    # the scalar and tr fields are appended after every earlier field: older encodings keep their bits
    assert LAYOUT["scalar"][0] == max(p + b for n, (p, b) in LAYOUT.items() if n not in ("scalar", "tr"))
    assert LAYOUT["tr"][0] == LAYOUT["scalar"][0] + LAYOUT["scalar"][1]
    assert GEO.vec_rows == 16 == vector_rows(FettaConfig())


def test_vec_checks():
    V = GEO.vec_rows
    H, A = GEO.unified_half_rows, GEO.accum_rows
    assert check(vec(op="add", chunks=2), GEO) == ErrorCode.NONE
    assert check(vec(op="add", chunks=0), GEO) == ErrorCode.BAD_SHAPE
    for op in VecOp:                                    # MUL .. RSQRT (issue 19) are codes 4 .. 8
        assert check(vec(op=op.name.lower(), chunks=1), GEO) == ErrorCode.NONE
    assert max(VecOp) == 8 and LAYOUT["mode"][1] == 4
    for mode in (9, 15):
        assert check(Instr(opcode=Opcode.VEC, mode=mode), GEO) == ErrorCode.BAD_SHAPE
    assert check(vec(op="add", chunks=1, x=H - V), GEO) == ErrorCode.NONE
    assert check(vec(op="add", chunks=1, x=H - V + 1), GEO) == ErrorCode.UNIFIED_RANGE
    assert check(vec(op="add", chunks=1, y=A - V + 1), GEO) == ErrorCode.ACCUM_RANGE
    assert check(vec(op="add", chunks=1, wb=True, w_base=H - V + 1, x=0), GEO) == ErrorCode.UNIFIED_RANGE
    assert check(vec(op="add", chunks=1, x_stride=2), GEO) == ErrorCode.BANK_CONFLICT   # even stride, 16 banks
    assert check(vec(op="add", chunks=1, x_stride=0), GEO) == ErrorCode.NONE            # broadcast x
    assert check(vec(op="add", chunks=1, y_stride=0), GEO) == ErrorCode.BANK_CONFLICT   # one row, 16 writers
    # WB: in place is fine, an overlapping shifted range would read rows already written
    assert check(vec(op="axpy", chunks=2, x=0, y=0, wb=True, w_base=0), GEO) == ErrorCode.NONE
    assert check(vec(op="axpy", chunks=2, x=0, y=0, wb=True, w_base=16), GEO) == ErrorCode.BANK_CONFLICT
    assert check(vec(op="axpy", chunks=2, x=0, y=0, wb=True, w_base=32), GEO) == ErrorCode.NONE
    one = Geometry.of(FettaConfig(vector_lanes=4))     # one row per cycle
    assert one.vec_rows == 1
    assert check(vec(op="add", chunks=2, y_stride=0), one) == ErrorCode.BANK_CONFLICT
    assert check(vec(op="add", chunks=1, y_stride=0), one) == ErrorCode.NONE
    assert Geometry.of(FettaConfig(vector_lanes=12)).vec_rows == 0
    assert check(vec(op="add", chunks=1), Geometry.of(FettaConfig(vector_lanes=12))) == ErrorCode.BAD_SHAPE


def test_vec_timing():
    """Memory read, multiplier, adder (the memory write its last register); with pipelined
    multipliers the result register before the write."""
    for m, s_, out_reg in ((1, 1, 0), (1, 4, 0), (2, 3, 1), (3, 7, 1)):
        geo = Geometry.of(FettaConfig(mul_latency=m, add_latency=s_))
        assert exec_cycles(vec(op="relu", chunks=5), geo) == 5 + m + s_ + out_reg
