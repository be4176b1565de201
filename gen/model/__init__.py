"""FETTA's analytical estimate (the search's stage-2 heuristic) and the per-access energy table.

* :mod:`gen.model.cost` - per-step mapping and cost, per-network totals (:class:`ModelResult`),
  :data:`ENERGY_PJ` (which the compiled model, :mod:`gen.compiler.estimate`, applies too)

A whole phase (paths chosen by the search, then costed) is :func:`gen.search.model_phase`. Every
architecture's timing, FETTA's included, is its compiled program (:mod:`gen.compiler.capabilities`).
"""

from gen.model.cost import (ENERGY_PJ, Gemm, ModelResult, StepMapping, add_vector_update, gemm_of, map_step,
                            model_network)

__all__ = ["ENERGY_PJ", "Gemm", "StepMapping", "ModelResult", "gemm_of", "map_step", "model_network",
           "add_vector_update"]
