"""Unknown values in the emulator's memories (X propagation), so that no result depends on a row
the program never wrote.

The RTL's SRAM macros power up with any content; the emulator's arrays start at zero. A program
whose result depends on a row that nothing wrote would then agree with the RTL simulation (whose
memories also start at zero) and still differ on silicon. :class:`sim.emulator.Emulator` therefore
keeps, beside every stored element, whether it is **unknown**: never written, or computed from an
unknown element. Host writes, DMA loads of known DRAM bytes and instruction results from known
operands are known. The propagation is the dependence of the arithmetic, not its value: a product
with an unknown factor is unknown even when the other factor is zero (``0 * NaN`` is NaN), and an
output of a GEMM is unknown when any element of its row of ``A`` or its column of ``B`` in the
instruction's reduction is. Reading junk is legal (a padded tile reads rows past a tensor and its
results are never used); :func:`gen.toolflow.execute.execute` raises once an unknown element reaches
a result the host uses.
"""

from __future__ import annotations

import numpy as np

from gen.design.isa import VecOp

#: VEC operations per operand they read: ``x`` (unified memory) and ``y`` (accumulation unit)
READS_X = frozenset({VecOp.ADD, VecOp.AXPY, VecOp.SCALE, VecOp.MUL, VecOp.MAX, VecOp.EXP, VecOp.RECIP,
                     VecOp.RSQRT})
READS_Y = frozenset({VecOp.ADD, VecOp.AXPY, VecOp.RELU, VecOp.MUL, VecOp.MAX})


def gemm_unknown(a_x: np.ndarray, b_x: np.ndarray, stationary: bool) -> np.ndarray:
    """Unknown outputs of every CE, ``[T, E, rows, C]``, from the unknown elements streamed to it.

    Output stationary: ``a_x`` ``[T, E, K, R]``, ``b_x`` ``[T, E, K, C]``; output ``(r, c)`` sums over
    every ``k``. Stationary: ``a_x`` ``[T, E, K, R]`` (streamed rows ``s``), ``b_x`` ``[T, E, R, C]``
    (the held tile); output ``(s, c)`` sums over the PE rows ``r``."""
    if stationary:
        return a_x.any(axis=-1)[..., None] | b_x.any(axis=2)[:, :, None, :]
    return a_x.any(axis=2)[..., :, None] | b_x.any(axis=2)[..., None, :]


def vec_unknown(op: int, x_x: np.ndarray, y_x: np.ndarray, is_float: bool = True) -> np.ndarray:
    """Unknown results of a VEC operation ``op`` per element, from its operands' unknown elements
    (in the integer datatype EXP, RECIP and RSQRT give 0 whatever they read)."""
    out = np.zeros(np.broadcast_shapes(x_x.shape, y_x.shape), bool)
    if not is_float and op in (VecOp.EXP, VecOp.RECIP, VecOp.RSQRT):
        return out
    if op in READS_X:
        out |= x_x
    if op in READS_Y:
        out |= y_x
    return out


def bytes_to_elements(byte_x: np.ndarray, lanes: int, elem_bits: int) -> np.ndarray:
    """Unknown DRAM bytes -> unknown elements of the rows they pack into (``[rows, lanes]``; an
    element is unknown when any of its bits is)."""
    bits = np.repeat(byte_x, 8)
    return bits.reshape(-1, lanes, elem_bits).any(axis=-1)


def elements_to_bytes(elem_x: np.ndarray, elem_bits: int) -> np.ndarray:
    """Unknown elements of rows -> unknown DRAM bytes of their packed image."""
    bits = np.repeat(elem_x.reshape(-1), elem_bits)
    return bits.reshape(-1, 8).any(axis=-1)


__all__ = ["gemm_unknown", "vec_unknown", "bytes_to_elements", "elements_to_bytes", "READS_X", "READS_Y"]
