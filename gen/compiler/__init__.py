"""Compiler: a layer's phase -> a :class:`Program` of instruction runs for the accelerator.

Modules, bottom to top:

* :mod:`gen.compiler.layout`   - :class:`Layout` (mode order, lane mode, row strides, packing);
  lane splitting and zero padding of modes (:func:`~gen.compiler.layout.split_modes`)
* :mod:`gen.compiler.program`  - the output: :class:`Program`, :class:`Run`, host writes / reads,
  step records, :class:`CompileError`
* :mod:`gen.compiler.mapping`  - one step's loop nest on the address generators and the CE grid
  (:func:`map_gemm_all`), bank checks, instructions at real addresses
* :mod:`gen.compiler.allocate` - segments on the ping-pong halves, bump allocation, spills, rollback
* :mod:`gen.compiler.planner`  - roles, lane modes, grid splits and mode orders of a step, scored;
  its stationary plans (:mod:`gen.compiler.stationary`) and output-transposed twins
  (:mod:`gen.compiler.transposed`: results written with the lane their consumer contracts)
* :mod:`gen.compiler.chunk`    - where to cut a step that does not fit one half, and the cutting
  (over free modes, or over contracted modes with partial sums in the accumulation unit)
* :mod:`gen.compiler.relayout` - re-laying out a tensor on chip by an identity GEMM
* :mod:`gen.compiler.compiler` - :class:`Compiler`: networks step by step (plan, place, emit, chunk)
* :mod:`gen.compiler.pipeline` - batch pipelining of ``fp`` / ``bp`` networks (pieces of the batch
  on alternating halves, batch-free steps computed once)
* :mod:`gen.compiler.batched`  - a whole phase's piece program repeated over batch pieces, weight
  gradients carried in the accumulation unit
* :mod:`gen.compiler.phases`   - whole phases (:func:`compile_layer`), saved tensors of ``train``,
  :func:`default_paths`
* :mod:`gen.compiler.gemm`     - the dense GEMM tiler (``fetta run`` on ``dense`` layers)

Pipeline (issue 6, paper sections III-B and V-B4):

1. **Networks and paths.** ``gen.workload.network.phase_networks(spec, phase)``; each network is
   contracted along the MAC-optimal SSA path of ``gen.search.best_path`` (or a path given per
   label). With ``phase="train"`` the FP and BP intermediates are kept (host side, counted as DRAM
   traffic) and every WG network is re-solved with the saved tensors as extra inputs; the cheaper
   of "with reuse" / "without" is executed.
2. **Grouping.** Each pairwise step is split into batch (shared-free), m (free of A), n (free of B)
   and k (contracted) modes by :func:`gen.workload.grouping.group_modes`. Size-1 modes of one
   operand that are summed (the boundary bonds) are pinned to index 0.
3. **Roles and layouts** (:mod:`~gen.compiler.planner`). A stored tensor's last mode is its lane
   mode (one unified row holds ``lanes`` consecutive values of it, zero padded); the lane of A must
   be an m-mode, the lane of B an n-mode, and the result's lane is B's lane. A tensor whose lane
   mode cannot serve its consumer is **re-laid out** on chip by an identity GEMM
   (:mod:`~gen.compiler.relayout`, ``onchip_relayouts``) or through the host (read back unless the
   host has it, written again in the new layout: ``relayouts``, ``relayout_bytes``; DRAM transfers
   timed like every other), whichever is estimated faster. An operand with no free mode at all gets a size-1
   *dummy lane* (``_<n>``) padded to ``lanes`` (padding counted in utilization).
4. **Tiling** (:mod:`~gen.compiler.mapping`). Every loop of the step becomes an address-generator
   level with a row stride per operand; grids, split loops and levels are costed with the timing
   rules of :mod:`gen.design.isa` and checked with :func:`gen.design.isa.check`.
5. **Allocation** (:mod:`~gen.compiler.allocate`, :mod:`~gen.compiler.chunk`). Intermediates stay on
   chip while they fit; a segment that is full closes (live tensors are spilled) and the next uses
   the other half; a step that does not fit one half even alone is chunked over a free mode of its
   result (host slices, one step per piece, host concatenation; DRAM counted) or over contracted
   modes (partial sums in the accumulation unit across pieces).
6. **Batch pieces** (:mod:`~gen.compiler.pipeline`, :mod:`~gen.compiler.batched`). The batch runs in
   pieces on alternating ping-pong halves so that DRAM transfers overlap compute;
   :func:`compile_layer` keeps the variant with the fewest cycles end to end.

Execution of a program is not the compiler's business: :mod:`gen.toolflow.execute` runs it on the
emulator or the RTL (block-term sums are added on the host in float64).
"""

from gen.compiler.compiler import Compiler
from gen.compiler.layout import Layout
from gen.compiler.mapping import map_gemm_all
from gen.compiler.phases import compile_layer, default_paths
from gen.compiler.program import CompileError, Program, Run

__all__ = ["CompileError", "Layout", "Program", "Run", "Compiler", "compile_layer", "map_gemm_all", "default_paths"]
