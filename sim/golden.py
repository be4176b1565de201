"""Float64 golden model of a tensorized layer: FP, BP and WG by pairwise contraction.

The results are computed by contracting each phase's tensor network
(:func:`gen.workload.network.phase_networks`) pair by pair in float64, never by
rebuilding the full weight matrix. Inputs are drawn from a seed and are exactly
representable in bfloat16 (stored as float32), as ``shared/INTERFACES.md``
section 2 asks.

Drawing rule (documented so that anyone can reproduce it): one
``numpy.random.default_rng(seed)`` draws, in this order, ``X`` then ``dY`` then
``core_0, core_1, ..`` from a standard normal distribution; each core is scaled
by ``prod(bond sizes) ** -0.25`` (every bond is shared by two cores, so a
product of cores keeps unit variance), the first core of every term also by
``(I * blocks) ** -0.5`` (so ``Y`` has unit variance), and every value is rounded
to bfloat16.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from gen.workload.network import Network, core_operands, greedy_path, path_steps, phase_networks, physical_modes
from gen.workload.spec import LayerSpec

from sim.bf16 import round_to_bf16_f32
from gen.workload.spec import parse_spec

RESULT_KEYS = ("Y", "dX")


def random_inputs(spec: LayerSpec, seed: int = 0) -> dict[str, np.ndarray]:
    """``X``, ``dY`` and every ``core_k`` as float32 arrays exactly representable in bf16."""
    rng = np.random.default_rng(seed)
    out = {"X": round_to_bf16_f32(rng.standard_normal((spec.batch, spec.I))),
           "dY": round_to_bf16_f32(rng.standard_normal((spec.batch, spec.O)))}
    cores, sizes, terms = core_operands(spec)
    ins, outs = physical_modes(spec)
    physical = set(ins) | set(outs)
    seen_terms: set[int] = set()
    for op, term in zip(cores, terms):
        shape = tuple(sizes[m] for m in op.modes)
        bonds = math.prod(sizes[m] for m in op.modes if m not in physical)
        scale = bonds ** -0.25
        if term not in seen_terms:
            seen_terms.add(term)
            scale *= (spec.I * spec.blocks) ** -0.5
        out[op.name] = round_to_bf16_f32(rng.standard_normal(shape) * scale)
    return out


def contract(net: Network, arrays: Mapping[str, np.ndarray], path: Sequence[Sequence[int]] | None = None,
             dtype=np.float64) -> np.ndarray:
    """Contract one network pair by pair along ``path`` (default: :func:`greedy_path`).

    Returns the result with modes in ``net.output`` order, reshaped to ``net.result_shape``.
    """
    if path is None:
        path = greedy_path(net)
    live: dict[int, np.ndarray] = {}
    for i, op in enumerate(net.inputs):
        live[i] = np.asarray(arrays[op.name], dtype=dtype).reshape(net.shape(op))
    if len(net.inputs) == 1:
        raise ValueError("a network needs at least two inputs")
    nxt = len(net.inputs)
    letters = {m: chr(ord("a") + k) if k < 26 else chr(ord("A") + k - 26) for k, m in enumerate(net.sizes)}
    result_modes: tuple[str, ...] = ()
    for step in path_steps(net, path):
        a, b = live.pop(step.lhs), live.pop(step.rhs)
        expr = ("".join(letters[m] for m in step.lhs_modes) + "," + "".join(letters[m] for m in step.rhs_modes)
                + "->" + "".join(letters[m] for m in step.out_modes))
        live[nxt] = np.einsum(expr, a, b, optimize=True)
        result_modes = step.out_modes
        nxt += 1
    (result,) = live.values()
    order = [result_modes.index(m) for m in net.output]
    return np.transpose(result, order).reshape(net.result_shape)


def compute(spec: LayerSpec, inputs: Mapping[str, np.ndarray], phases: Sequence[str] = ("fp", "bp", "wg"),
            paths: Mapping[str, Sequence[Sequence[int]]] | None = None) -> dict[str, np.ndarray]:
    """Float64 results of the given phases: ``Y``, ``dX``, ``dcore_k``.

    ``paths`` maps a network label (``Y``, ``dcore_2``, ``Y[term 1]``) to an SSA path.
    """
    results: dict[str, np.ndarray] = {}
    for phase in phases:
        for net in phase_networks(spec, phase):
            path = None if paths is None else paths.get(net.label)
            value = contract(net, inputs, path)
            results[net.target] = results[net.target] + value if net.target in results else value
    return results


def golden(spec: LayerSpec, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs drawn from ``seed`` and float64 reference results of every phase."""
    inputs = random_inputs(spec, seed)
    out = dict(inputs)
    out.update(compute(spec, inputs))
    return out


def write_npz(path: str | Path, arrays: Mapping[str, np.ndarray], spec: LayerSpec) -> None:
    """Write the npz of INTERFACES section 2 atomically (nothing half-written on error)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = dict(arrays)
    payload["spec"] = np.array(spec.to_json())
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **payload)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_npz(path: str | Path) -> tuple[LayerSpec, dict[str, np.ndarray]]:
    """Read an npz written by :func:`write_npz`: the spec and the arrays."""
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files if k != "spec"}
        spec = parse_spec(json.loads(str(z["spec"])))
    return spec, arrays


__all__ = ["random_inputs", "contract", "compute", "golden", "write_npz", "read_npz"]
