"""Semantics of the distribution and reduction networks: cycle-free Python models (the RTL's oracle).

Part of the design base: the ISA checks, the router (:mod:`gen.design.routing`), the emulator and
the RTL testbenches all read these functions. Element arithmetic is injected (``add=``), so this
module needs no number format; :mod:`sim.net_model` supplies the adders and the port packing.

Both networks are N-port butterflies (``N = 2**n``) whose ports each carry a vector of
``L`` lanes (one memory-bank row). The RTL in ``hdl/dist_net.py`` and ``hdl/red_net.py``
must agree with these functions bit for bit; ``gen/design/routing.py`` checks every control
word it returns by running it through them.

Conventions shared with the RTL
-------------------------------
* ``data[p][l]``: element ``l`` of port ``p``, as a raw bit pattern (``int``).
* ``valid[p]``: one valid bit per port (all lanes of a port share it).
* **Transpose layer** (groups of ``L`` consecutive ports, an ``L x L`` element block per
  group): ``out[g*L + l][i] = in[g*L + i][l]``. A transposed port is valid only when
  every port of its group was valid (it carries one element from each of them).
* **Distribution network**: transpose layer first (input side), then ``n`` levels of
  2:1 multiplexers. Level ``s`` works on address bit ``k = n-1-s`` (most significant
  first). Node ``x`` of level ``s`` takes its *vertical* input ``x`` (control 0) or its
  *diagonal* input ``x ^ 2**k`` (control 1). ``ctrl[s]`` is an N-bit mask, bit ``x`` =
  control of node ``x``.
* **Reduction network**: ``n`` levels of 2-in/2-out adder switches, level ``s`` on bit
  ``k = s`` (least significant first, the mirror image of the distribution network), then
  the transpose layer (output side). Switch ``p`` of level ``s`` joins nodes
  ``lo = insert_zero(p, k)`` (left) and ``hi = lo | 2**k`` (right); ``modes[s][p]`` is its
  2-bit mode (:data:`PASS`, :data:`SWAP`, :data:`ADD_LEFT`, :data:`ADD_RIGHT`).
* **Section V-D control form**: the effective control of every node (switch) of level
  ``s`` is ``sel_vec[s] XOR bank_idx[k]``: the bank-index bit of the level's address
  bit flips the multiplexer (for the reduction network: bit 0 of the mode, which turns
  pass<->swap and add-left<->add-right).
"""

from __future__ import annotations

from typing import Callable, Sequence

#: adder-switch modes (2-bit control). Bit 0 chooses the side, bit 1 chooses adding.
PASS = 0       #: left -> left, right -> right
SWAP = 1       #: left -> right, right -> left
ADD_LEFT = 2   #: sum -> left output, right output empty (invalid, zero)
ADD_RIGHT = 3  #: sum -> right output, left output empty (invalid, zero)
MODE_NAMES = {PASS: "pass", SWAP: "swap", ADD_LEFT: "add-left", ADD_RIGHT: "add-right"}

Data = list[list[int]]


def log2_exact(n: int) -> int:
    if n < 2 or n & (n - 1):
        raise ValueError(f"number of ports must be a power of two >= 2, got {n!r}")
    return n.bit_length() - 1


def dist_bit(s: int, n: int) -> int:
    """Address bit handled by level ``s`` of the distribution network (MSB first)."""
    return n - 1 - s


def red_bit(s: int, n: int) -> int:
    """Address bit handled by level ``s`` of the reduction network (LSB first)."""
    return s


def switch_nodes(p: int, k: int) -> tuple[int, int]:
    """Left and right node of switch ``p`` at a level on address bit ``k``."""
    low = p & ((1 << k) - 1)
    lo = ((p >> k) << (k + 1)) | low
    return lo, lo | (1 << k)


def transpose(data: Data, valid: Sequence[int], lanes: int) -> tuple[Data, list[int]]:
    """The transpose layer: exchange ports and lanes inside each group of ``lanes`` ports."""
    N = len(data)
    if N % lanes:
        raise ValueError(f"transpose needs lanes ({lanes}) to divide the ports ({N})")
    out = [[0] * lanes for _ in range(N)]
    ovalid = [0] * N
    for g in range(N // lanes):
        gv = int(all(valid[g * lanes + i] for i in range(lanes)))
        for l in range(lanes):
            for i in range(lanes):
                out[g * lanes + l][i] = data[g * lanes + i][l]
            ovalid[g * lanes + l] = gv
    return out, ovalid


def effective_ctrl(sel_vec: Sequence[int], bank_idx: int, n: int, *, bit_of=dist_bit,
                   width: int) -> list[int]:
    """``sel_vec[s] XOR bank_idx[bit_of(s)]`` broadcast over the ``width`` controls of a level."""
    ones = (1 << width) - 1
    return [(sel_vec[s] ^ (ones if (bank_idx >> bit_of(s, n)) & 1 else 0)) & ones for s in range(n)]


# --- distribution network ------------------------------------------------------------
def dist_forward(data: Data, valid: Sequence[int], ctrl: Sequence[int], *, do_transpose: bool = False,
                 lanes: int | None = None) -> tuple[Data, list[int]]:
    """Outputs of the distribution network for raw per-node controls ``ctrl[s]`` (N-bit masks)."""
    N = len(data)
    n = log2_exact(N)
    lanes = len(data[0]) if lanes is None else lanes
    cur = [list(row) for row in data]
    cv = [int(bool(v)) for v in valid]
    if do_transpose:
        cur, cv = transpose(cur, cv, lanes)
    for s in range(n):
        k = dist_bit(s, n)
        nxt, nv = [], []
        for x in range(N):
            src = x ^ (1 << k) if (ctrl[s] >> x) & 1 else x
            nxt.append(list(cur[src]))
            nv.append(cv[src])
        cur, cv = nxt, nv
    return cur, cv


def dist_sources(N: int, ctrl: Sequence[int], *, do_transpose: bool = False) -> list[int]:
    """Which (post-transpose) input port each output port reads, for controls ``ctrl``."""
    n = log2_exact(N)
    src = []
    for j in range(N):
        x = j
        for s in reversed(range(n)):
            if (ctrl[s] >> x) & 1:
                x ^= 1 << dist_bit(s, n)
        src.append(x)
    return src


# --- reduction network ---------------------------------------------------------------
def adder_switch(mode: int, a: list[int], va: int, b: list[int], vb: int,
                 add: Callable[[int, int], int]) -> tuple[list[int], int, list[int], int]:
    """One adder switch on lane vectors: returns (left data, left valid, right data, right valid).

    In the add modes an *invalid* operand counts as absent: the sum of a valid and an
    invalid input is the valid input unchanged (no ``+0`` that could flip a ``-0``);
    of two invalid inputs, the left one, still invalid.
    """
    if mode == PASS:
        return a, va, b, vb
    if mode == SWAP:
        return b, vb, a, va
    if va and vb:
        s = [add(x, y) for x, y in zip(a, b)]
    elif vb:
        s = list(b)
    else:
        s = list(a)
    sv = int(bool(va or vb))
    zero = [0] * len(a)
    if mode == ADD_LEFT:
        return s, sv, zero, 0
    if mode == ADD_RIGHT:
        return zero, 0, s, sv
    raise ValueError(f"adder-switch mode must be 0..3, got {mode!r}")


def red_forward(data: Data, valid: Sequence[int], modes: Sequence[Sequence[int]], *,
                add: Callable[[int, int], int], do_transpose: bool = False,
                lanes: int | None = None) -> tuple[Data, list[int]]:
    """Outputs of the reduction network for raw per-switch modes ``modes[s][p]``."""
    N = len(data)
    n = log2_exact(N)
    lanes = len(data[0]) if lanes is None else lanes
    cur = [list(row) for row in data]
    cv = [int(bool(v)) for v in valid]
    for s in range(n):
        k = red_bit(s, n)
        nxt = [None] * N
        nv = [0] * N
        for p in range(N // 2):
            lo, hi = switch_nodes(p, k)
            nxt[lo], nv[lo], nxt[hi], nv[hi] = adder_switch(modes[s][p], cur[lo], cv[lo], cur[hi], cv[hi], add)
        cur, cv = nxt, nv
    if do_transpose:
        cur, cv = transpose(cur, cv, lanes)
    return cur, cv


def red_effective_modes(mode_vec: Sequence[Sequence[int]], bank_idx: int, n: int) -> list[list[int]]:
    """Section V-D for the reduction network: bank bit ``k`` of level ``s`` XORed into mode bit 0."""
    return [[m ^ ((bank_idx >> red_bit(s, n)) & 1) for m in mode_vec[s]] for s in range(n)]


def red_symbolic(N: int, modes: Sequence[Sequence[int]],
                 active: Sequence[int] | None = None) -> list[frozenset[int] | None]:
    """Which input ports are summed into each output port (before the transpose layer).

    Only the ``active`` inputs (default: all) carry data; ``None`` marks an output that
    carries nothing.
    """
    n = log2_exact(N)
    act = set(range(N)) if active is None else set(active)
    cur: list[frozenset[int] | None] = [frozenset([p]) if p in act else None for p in range(N)]
    for s in range(n):
        k = red_bit(s, n)
        nxt: list[frozenset[int] | None] = [None] * N
        for p in range(N // 2):
            lo, hi = switch_nodes(p, k)
            a, b = cur[lo], cur[hi]
            m = modes[s][p]
            if m == PASS:
                nxt[lo], nxt[hi] = a, b
            elif m == SWAP:
                nxt[lo], nxt[hi] = b, a
            else:
                tot = (a or frozenset()) | (b or frozenset())
                tot = tot or None
                nxt[lo], nxt[hi] = (tot, None) if m == ADD_LEFT else (None, tot)
        cur = nxt
    return cur


# --- integer adder (routing checks, integer datatypes) ---------------------------------
def int_adder(width: int) -> Callable[[int, int], int]:
    """Exact two's-complement addition wrapped to ``width`` bits, on raw patterns."""
    mask = (1 << width) - 1
    return lambda a, b: (a + b) & mask


# --- control-word packing ---------------------------------------------------------------
def pack_bits(bits: Sequence[int]) -> int:
    return sum((int(b) & 1) << i for i, b in enumerate(bits))


def unpack_bits(value: int, count: int) -> list[int]:
    return [(value >> i) & 1 for i in range(count)]


def unpack_levels(value: int, levels: int, per_level: int, bits: int = 1) -> list[list[int]]:
    """Flat control port -> ``[level][item]`` (``bits`` bits per item)."""
    mask = (1 << bits) - 1
    return [[(value >> ((s * per_level + i) * bits)) & mask for i in range(per_level)] for s in range(levels)]


# --- running the emitted Verilog ------------------------------------------------------


__all__ = ["PASS", "SWAP", "ADD_LEFT", "ADD_RIGHT", "MODE_NAMES", "Data", "log2_exact", "dist_bit", "red_bit",
           "switch_nodes", "transpose", "effective_ctrl", "dist_forward", "dist_sources", "adder_switch",
           "red_forward", "red_effective_modes", "red_symbolic", "pack_bits", "unpack_bits", "unpack_levels", "int_adder"]
