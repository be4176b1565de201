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
import zipfile
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from gen.workload.network import Network, core_operands, greedy_path, path_steps, phase_networks, physical_modes
from gen.errors import InputError, SpecError, UsageError
from gen.workload.spec import LayerSpec, parse_spec
from sim.bf16 import SMALLEST_NORMAL, round_to_bf16_f32

RESULT_KEYS = ("Y", "dX")
EINSUM_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


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
    result_modes: tuple[str, ...] = ()
    for step in path_steps(net, path):
        a, b = live.pop(step.lhs), live.pop(step.rhs)
        letters = _step_letters(net, step)
        expr = ("".join(letters[m] for m in step.lhs_modes) + "," + "".join(letters[m] for m in step.rhs_modes)
                + "->" + "".join(letters[m] for m in step.out_modes))
        live[nxt] = np.einsum(expr, a, b, optimize=True)
        result_modes = step.out_modes
        nxt += 1
    (result,) = live.values()
    order = [result_modes.index(m) for m in net.output]
    return np.transpose(result, order).reshape(net.result_shape)


def _step_letters(net: Network, step) -> dict[str, str]:
    """One einsum letter per mode of one step (numpy knows 52: a-z, A-Z)."""
    modes = list(dict.fromkeys(step.lhs_modes + step.rhs_modes))
    if len(modes) > len(EINSUM_LETTERS):
        raise SpecError(f"a contraction step of {net.label} has {len(modes)} modes; the golden model's "
                        f"einsum handles {len(EINSUM_LETTERS)}", field="in_modes")
    return dict(zip(modes, EINSUM_LETTERS))


def check_size(spec: LayerSpec, max_elements: int, phases: Sequence[str] = ("fp", "bp", "wg"),
               option: str = "--max-elements") -> None:
    """Raise :class:`SpecError` before anything is allocated when the layer's inputs and results together,
    or one intermediate of the golden model's contractions (greedy paths), hold more than
    ``max_elements`` elements."""
    spec.check_elements(max_elements, option)
    for phase in phases:
        for net in phase_networks(spec, phase):
            for k, step in enumerate(path_steps(net, greedy_path(net))):
                size = math.prod(net.sizes[m] for m in step.out_modes)
                if size > max_elements:
                    raise SpecError(f"step {k} of the golden model's {net.label} network makes a tensor of "
                                    f"{size} elements, more than the limit {max_elements} ({option} raises it)",
                                    field="ranks" if spec.format != "dense" else "batch")


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
    """Write the npz of INTERFACES section 2 atomically (nothing half-written on error).

    The folder must exist (it is not created: a mistyped path is an error, as with ``cp``)."""
    path = Path(path)
    payload = dict(arrays)
    payload["spec"] = np.array(spec.to_json())
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=path.parent)
    try:
        mask = os.umask(0o022)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)  # the permissions open() would give, not mkstemp's 0600
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


def input_shapes(spec: LayerSpec) -> dict[str, tuple[int, ...]]:
    """Shapes of the input keys of the npz (INTERFACES section 2): ``X``, ``dY``, ``core_k``."""
    out = {"X": (spec.batch, spec.I), "dY": (spec.batch, spec.O)}
    out.update({f"core_{k}": tuple(s) for k, s in enumerate(spec.core_shapes())})
    return out


#: npz keys ``read_inputs`` skips: results and the spec (a golden npz can be read back as inputs)
IGNORED_KEYS = ("spec", *RESULT_KEYS)
_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def read_inputs(path: str | Path, spec: LayerSpec, option: str = "--inputs") -> dict[str, np.ndarray]:
    """The inputs of ``spec`` held by the npz ``path`` (``fetta run --inputs``), as float32.

    Keys are those of INTERFACES section 2; ``X``, ``dY``, ``core_k`` are read, result keys (``Y``,
    ``dX``, ``dcore_k``) and ``spec`` are skipped, any other key is an error. Each array's shape and
    dtype are checked from its header before it is read (so a compressed archive cannot blow up the
    memory); its values must be finite and exactly representable in bfloat16 (subnormals excluded:
    the datapath flushes them). Every problem raises one :class:`InputError` naming the key, or
    :class:`UsageError` naming ``option`` for a file that is not an npz archive.
    """
    shapes = input_shapes(spec)
    ignored = set(IGNORED_KEYS) | {f"d{k}" for k in shapes if k.startswith("core_")}
    if str(path) == "":
        raise UsageError("empty file name", field=option)
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise UsageError(f"file not found: {path}", field=option) from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory, not a file", field=option) from None
    except zipfile.BadZipFile:
        raise UsageError(f"{path} is not an npz archive (np.savez / fetta golden writes them)", field=option) from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}", field=option) from None
    out: dict[str, np.ndarray] = {}
    with zf:
        for member in zf.namelist():
            key = member[:-4] if member.endswith(".npy") else member
            if key in ignored:
                continue
            if key not in shapes:
                cores = "core_0" if spec.num_cores == 1 else f"core_0..core_{spec.num_cores - 1}"
                raise InputError(f"unknown key in {path} (inputs of this spec: X, dY, {cores}; "
                                 f"Y, dX, dcore_k and spec are skipped)", field=key)
            out[key] = _read_member(zf, member, key, shapes[key])
    return out


def _read_member(zf: zipfile.ZipFile, member: str, key: str, shape: tuple[int, ...]) -> np.ndarray:
    """One input array of an npz, checked (header first, then the values)."""
    try:
        with zf.open(member) as f:
            version = np.lib.format.read_magic(f)
            if version not in _HEADER_READERS:
                raise InputError(f"npy format version {version} is not supported (1.0 and 2.0 are)", field=key)
            got, fortran, dtype = _HEADER_READERS[version](f)
            if dtype.kind != "f" or dtype.itemsize not in (2, 4, 8):
                raise InputError(f"dtype {dtype} is not accepted; inputs are float32 (float16 / float64 with "
                                 f"bfloat16-exact values also work)", field=key)
            if tuple(got) != shape:
                raise InputError(f"shape {list(got)} does not fit the spec, expected {list(shape)}", field=key)
            count = math.prod(shape)
            data = f.read(count * dtype.itemsize)
    except InputError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"not a readable npy array: {exc}", field=key) from None
    if len(data) != count * dtype.itemsize:
        raise InputError(f"truncated: {len(data)} of {count * dtype.itemsize} bytes", field=key)
    a = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    _check_values(a, key)
    return np.ascontiguousarray(a, dtype=np.float32)


def _check_values(a: np.ndarray, key: str) -> None:
    """Finite and exactly bfloat16 (normal or zero) values, or one :class:`InputError` naming the first bad one."""
    bad = ~np.isfinite(a)
    what, hint = "is not finite", "inputs must be finite"
    if not bad.any():
        f32 = np.ascontiguousarray(a, dtype=np.float32)
        bad = (f32.astype(np.float64) != a.astype(np.float64)) | ((f32.view(np.uint32) & 0xFFFF) != 0)
        what, hint = "is not exactly representable in bfloat16", "round the inputs to bfloat16 as fetta golden does"
        sub = (f32 != 0) & (np.abs(f32) < SMALLEST_NORMAL)
        if not bad.any() and sub.any():
            bad, what = sub, "is a bfloat16 subnormal"
            hint = "the datapath flushes subnormals to zero (docs/numerics.md)"
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(f"value {a[idx]!s} at index {list(idx)} {what} ({int(bad.sum())} of {a.size} values; "
                         f"{hint})", field=key)


__all__ = ["random_inputs", "contract", "check_size", "compute", "golden", "write_npz", "read_npz",
           "input_shapes", "read_inputs", "IGNORED_KEYS"]
