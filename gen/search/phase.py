"""Phase-level search and evaluation: every network of a phase, paths chosen, then costed.

:func:`search` runs stage 1 (exact MAC-optimal CSSE, :mod:`gen.search.csse`) and, for the
``latency`` / ``energy`` / ``edp`` metrics, stage 2 (re-ranking the top-k paths with the cost model
of :mod:`gen.model`). :func:`model_phase` costs a whole phase along given (or MAC-optimal) paths.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from gen.design.config import FettaConfig
from gen.model import ModelResult, add_vector_update, model_network
from gen.progress import progress
from gen.search.baselines import baselines_for
from gen.search.csse import METRICS, SearchError, best_path, search_network
from gen.workload.network import phase_networks


# --------------------------------------------------------------------------------
# Stage 2 and the phase-level search
# --------------------------------------------------------------------------------
def _rank_value(metric: str, result) -> float:
    if metric == "latency":
        return result.cycles
    if metric == "energy":
        return result.energy_pj
    return result.edp


def search(spec, phase: str, *, metric: str = "flops", top_k: int = 8, config=None,
           show_progress: bool = False) -> dict[str, Any]:
    """Search every network of ``phase`` of a layer: stage 1 (MACs), then stage 2 (``metric``).

    Returns a JSON-ready dict: ``phase, metric, path, macs, seconds`` plus
    ``networks`` (per network: label, path, macs, candidates) and ``baselines``.
    ``path`` is the single path for ``fp``/``bp`` with one network, else a dict
    keyed by :attr:`Network.label`.
    """
    if metric not in METRICS:
        raise SearchError(f"unknown metric {metric!r} (known: {', '.join(METRICS)})", field="metric")
    nets = phase_networks(spec, phase)
    if config is None:
        config = FettaConfig()
    t0 = time.perf_counter()
    per: list[dict[str, Any]] = []
    k1 = 1 if metric == "flops" else top_k
    with progress(len(nets), f"search {phase}", show_progress) as advance:
        for net in nets:
            cands = search_network(net, max(k1, 1 if metric == "flops" else top_k))
            chosen = cands[0]
            entry: dict[str, Any] = {"label": net.label, "inputs": [op.name for op in net.inputs]}
            if metric != "flops":
                scored = []
                for c in cands:
                    r = model_network(net, c.as_list(), config)
                    scored.append((_rank_value(metric, r), c.macs, c, r))
                scored.sort(key=lambda x: (x[0], x[1]))
                chosen = scored[0][2]
                entry["candidates"] = [{"path": c.as_list(), "macs": c.macs, "cycles": r.cycles,
                                        "energy_pj": r.energy_pj, "edp": r.edp} for _, _, c, r in scored]
            else:
                entry["candidates"] = [{"path": c.as_list(), "macs": c.macs} for c in cands]
            entry.update(path=chosen.as_list(), macs=chosen.macs, optimal_macs=cands[0].macs,
                         dense_macs=net.total_macs_dense())
            per.append(entry)
            advance(1)
    seconds = time.perf_counter() - t0
    single = len(nets) == 1
    out: dict[str, Any] = {
        "spec": spec.name, "format": spec.format, "phase": phase, "metric": metric,
        "path": per[0]["path"] if single else {e["label"]: e["path"] for e in per},
        "macs": sum(e["macs"] for e in per),
        "seconds": round(seconds, 4),
        "networks": per,
    }
    out["baselines"] = baselines_for(spec, phase, nets)
    return out


def model_phase(spec, phase: str, config: FettaConfig | None = None,
                paths: Mapping[str, Sequence[Sequence[int]]] | None = None) -> ModelResult:
    """Model every network of ``phase`` (``train`` adds the SGD update on the vector unit).

    ``paths`` maps :attr:`Network.label` to an SSA path; missing ones use the
    stage-1 MAC-optimal path.
    """
    config = config or FettaConfig()
    total = ModelResult(freq_mhz=config.freq_mhz, _pes=config.macs)
    for net in phase_networks(spec, phase):
        path = (paths or {}).get(net.label) or best_path(net)
        total.add(model_network(net, path, config))
    if phase == "train":
        add_vector_update(total, spec, config)
    return total


__all__ = ["search", "model_phase"]
