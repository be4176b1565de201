"""Reference of the vector unit (``hdl/vector.py``): one ``VEC`` operation on bit patterns.

The RTL matches these numpy operations bit for bit; the emulator executes ``VEC`` with them.
"""

from __future__ import annotations

import numpy as np

from gen.design.config import FettaConfig
from gen.design.isa import BF16_ONE, VecOp
from sim import bf16 as fp


def vec_ref(config: FettaConfig, op: int, scalar: int, x_bits, y_bits):
    """Reference of one operation on bit patterns (numpy arrays of equal shape).

    Returns ``(o_bits, narrow_bits)`` as ``uint64`` arrays: FP32 / ``acc_bits`` integer
    results and their bfloat16 / ``int_width`` narrowing."""
    x_bits = np.asarray(x_bits, np.uint64)
    y_bits = np.asarray(y_bits, np.uint64)
    if config.datatype == "bf16":
        x = fp.bf16_from_bits(x_bits.astype(np.uint16))
        y = fp.f32_from_bits(y_bits.astype(np.uint32))
        a = fp.bf16_from_bits(np.full(x.shape, BF16_ONE if op == VecOp.ADD else scalar, np.uint16))
        if op in (VecOp.ADD, VecOp.AXPY):
            o = fp.f32_add(y, fp.bf16_mul(x, a))
        elif op == VecOp.SCALE:
            o = fp.bf16_mul(x, a)
        elif op == VecOp.RELU:
            yf = fp.ftz32(y)
            with np.errstate(invalid="ignore"):
                o = np.where(np.isnan(yf), yf, np.where(yf > 0, yf, np.float32(0))).astype(np.float32)
        else:
            raise ValueError(f"unknown vector op {op}")
        ob = fp.f32_bits(o).astype(np.uint64)
        nb = fp.bf16_bits(fp.f32_to_bf16(o)).astype(np.uint64)
        return ob, nb
    EB, AB = config.elem_bits, config.acc_bits

    def signed(v, w):
        v = v.astype(object) & ((1 << w) - 1)
        return np.where(v >= (1 << (w - 1)), v - (1 << w), v)

    x = signed(x_bits, EB)
    y = signed(y_bits, AB)
    a = 1 if op == VecOp.ADD else (scalar - (1 << 16) if scalar & 0x8000 else scalar)
    if op in (VecOp.ADD, VecOp.AXPY):
        o = y + a * x
    elif op == VecOp.SCALE:
        o = a * x + 0 * y
    elif op == VecOp.RELU:
        o = np.where(y > 0, y, 0)
    else:
        raise ValueError(f"unknown vector op {op}")
    ob = np.vectorize(lambda v: int(v) & ((1 << AB) - 1), otypes=[object])(o).astype(np.uint64)
    nb = ob & np.uint64((1 << EB) - 1)
    return ob, nb


__all__ = ["vec_ref"]
