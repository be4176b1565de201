"""Contraction sequence search (CSSE) and the phase-level evaluation built on it.

* :mod:`gen.search.csse`      - exact MAC-optimal search over SSA paths (stage 1; or lane-padded MACs,
  cost ``lanes``), training-aware search
* :mod:`gen.search.baselines` - the contraction orders of other works (left-to-right, ETTE, BTT, Tetrix)
* :mod:`gen.search.phase`     - every network of a phase: :func:`search` (stage 2 re-ranks with the
  cost model) and :func:`model_phase`
"""

from gen.search.csse import (COSTS, METRICS, Candidate, SearchError, best_path, lane_pad, path_cost,
                             search_network, training_aware, tree_to_path)
from gen.search.phase import model_phase, search

__all__ = ["COSTS", "METRICS", "Candidate", "SearchError", "search_network", "best_path", "search", "model_phase",
           "training_aware", "tree_to_path", "path_cost", "lane_pad"]
