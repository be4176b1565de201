"""Analytical performance / energy model: the cost of a pairwise step, a network along a path.

* :mod:`gen.model.arch` - the architectures (fetta and the baselines) as capability sets of one engine
* :mod:`gen.model.cost` - per-step mapping and cost, per-network totals (:class:`ModelResult`)

A whole phase (paths chosen by the search, then costed) is :func:`gen.search.model_phase`.
"""

from gen.model.arch import ARCHS, Arch, get_arch
from gen.model.cost import (ENERGY_PJ, Gemm, ModelResult, StepMapping, add_vector_update, gemm_of, map_step,
                            model_network)

__all__ = ["ARCHS", "Arch", "get_arch", "ENERGY_PJ", "Gemm", "StepMapping", "ModelResult", "gemm_of", "map_step",
           "model_network", "add_vector_update"]
