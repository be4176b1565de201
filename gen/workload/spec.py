"""Tensorized layer specs (``shared/INTERFACES.md`` section 1).

A linear layer ``Y = X @ W`` with ``X: [batch, I]``, ``W: [I, O]``,
``I = prod(in_modes)``, ``O = prod(out_modes)``. The full weight is the
order-D tensor ``Wt`` of shape ``n = in_modes + out_modes`` and
``W = Wt.reshape(I, O)`` (C order). The spec names the tensor-network format
of ``Wt`` and its ranks; :meth:`LayerSpec.core_shapes` gives the shape of every
core in the order the npz files store them (``core_0 .. core_{C-1}``).

Formats: ``dense, tt, tr, ttm, ht, bt, tucker`` (``tucker`` is ``bt`` with one
block). ``bt`` takes an extra field ``blocks`` (default 1).

Optional fields: ``name`` (default ``"layer"``), ``blocks`` (``bt``),
``in_features`` / ``out_features`` (checked against the mode products).

:func:`parse_spec` raises :class:`gen.errors.SpecError` naming the first bad field. Besides the
rules of ``shared/INTERFACES.md`` it bounds the counts and sizes (``MAX_MODES``, ``MAX_BLOCKS``,
``MAX_RANK``, ``MAX_BATCH``, ``MAX_FEATURES``, see ``docs/errors.md``) so that no later stage builds
billions of core shapes or overflows; :meth:`LayerSpec.check_elements` bounds the memory that the
tensors of a layer take before anything is allocated.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen.errors import SpecError, read_text_file

FORMATS = ("dense", "tt", "tr", "ttm", "ht", "bt", "tucker")
#: formats whose ``ranks`` may be a list
LIST_RANK_FORMATS = ("tt", "tr", "ttm")
KNOWN_FIELDS = ("name", "format", "in_modes", "out_modes", "ranks", "batch", "blocks",
                "in_features", "out_features")

# --- sanity bounds (docs/errors.md) ------------------------------------------------
#: modes of a layer, ``len(in_modes) + len(out_modes)`` (the exact search handles networks of at most
#: 22 inputs; the golden model's einsum at most 52 modes per step)
MAX_MODES = 32
#: block terms of a ``bt`` layer (each term is a network of its own: 64 take seconds to search)
MAX_BLOCKS = 64
#: any one rank
MAX_RANK = 1 << 16
#: rows of ``X``
MAX_BATCH = 1 << 24
#: ``I = prod(in_modes)`` and ``O = prod(out_modes)`` (beyond, MAC counts leave float64's exact range)
MAX_FEATURES = 1 << 32
#: default bound on the elements of all the tensors ``fetta golden`` / ``fetta run`` hold
#: (inputs, results and every intermediate of the golden model): 2**27, 1 GiB of float64;
#: ``--max-elements N`` changes it
DEFAULT_MAX_ELEMENTS = 1 << 27


def _positive_int(value: Any, field: str, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"must be a positive integer, got {_short(value)}", field=field)
    if value < 1:
        raise SpecError(f"must be a positive integer, got {value!r}", field=field)
    if maximum is not None and value > maximum:
        raise SpecError(f"must be at most {maximum}, got {_short(value)}", field=field)
    return value


def _short(value: Any) -> str:
    """``repr`` of a bad value, cut to one readable piece."""
    text = repr(value)
    return text if len(text) <= 60 else text[:40] + f"... ({len(text)} characters)"


def _modes(value: Any, field: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError(f"must be a non-empty list of positive integers, got {_short(value)}", field=field)
    if len(value) > MAX_MODES:
        raise SpecError(f"at most {MAX_MODES} modes, got {len(value)}", field=field)
    for i, m in enumerate(value):
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise SpecError(f"entry {i} must be a positive integer, got {_short(m)}", field=field)
        if m > MAX_FEATURES:
            raise SpecError(f"entry {i} must be at most {MAX_FEATURES}, got {_short(m)}", field=field)
    if math.prod(value) > MAX_FEATURES:
        raise SpecError(f"the product of the modes must be at most {MAX_FEATURES} (2**32), "
                        f"got {math.prod(value)}", field=field)
    return tuple(value)


@dataclass(frozen=True)
class HTNode:
    """A node of the hierarchical-Tucker dimension tree."""

    modes: tuple[int, ...]          # indices into n (the modes below this node)
    core: int                       # index of its core in the core list
    left: "HTNode | None" = None
    right: "HTNode | None" = None

    @property
    def is_leaf(self) -> bool:
        return self.left is None


@dataclass(frozen=True)
class LayerSpec:
    """A validated layer spec. Build it with :func:`parse_spec`."""

    name: str
    format: str
    in_modes: tuple[int, ...]
    out_modes: tuple[int, ...]
    #: the bond ranks, expanded per format (see :meth:`bond_ranks`)
    ranks: int | tuple[int, ...]
    batch: int
    blocks: int = 1

    # --- sizes -----------------------------------------------------------------
    @property
    def modes(self) -> tuple[int, ...]:
        """``n = in_modes + out_modes``."""
        return self.in_modes + self.out_modes

    @property
    def D(self) -> int:
        return len(self.modes)

    @property
    def I(self) -> int:  # noqa: E743 - the paper's name
        return math.prod(self.in_modes)

    @property
    def O(self) -> int:  # noqa: E743
        return math.prod(self.out_modes)

    def bond_ranks(self) -> tuple[int, ...]:
        """The full rank vector of chain/ring formats.

        ``tt``: ``r_0..r_D`` (``r_0 = r_D = 1``); ``tr``: ``r_0..r_{D-1}`` (``r_D = r_0``);
        ``ttm``: ``r_0..r_d`` (``r_0 = r_d = 1``). Other formats: ``(R,)``.
        """
        r = self.ranks
        if self.format == "tt":
            inner = (r,) * (self.D - 1) if isinstance(r, int) else r
            return (1, *inner, 1)
        if self.format == "tr":
            return (r,) * self.D if isinstance(r, int) else r
        if self.format == "ttm":
            d = len(self.in_modes)
            inner = (r,) * (d - 1) if isinstance(r, int) else r
            return (1, *inner, 1)
        return (r,) if isinstance(r, int) else r

    @property
    def rank(self) -> int:
        """The single rank ``R`` of ``ht``, ``bt`` and ``tucker``."""
        return self.ranks if isinstance(self.ranks, int) else max(self.ranks)

    def ht_tree(self) -> HTNode:
        """The balanced dimension tree of the ``ht`` format, cores numbered as stored."""
        counter = [self.D]  # leaves are cores 0..D-1, internal nodes follow in post-order

        def build(modes: tuple[int, ...]) -> HTNode:
            if len(modes) == 1:
                return HTNode(modes=modes, core=modes[0])
            half = (len(modes) + 1) // 2
            left = build(modes[:half])
            right = build(modes[half:])
            node = HTNode(modes=modes, core=counter[0], left=left, right=right)
            counter[0] += 1
            return node

        return build(tuple(range(self.D)))

    def core_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of ``core_0 .. core_{C-1}`` in storage order."""
        n = self.modes
        f = self.format
        if f == "dense":
            return [(self.I, self.O)]
        if f == "tt" or f == "tr":
            r = self.bond_ranks()
            rr = r + (r[0],) if f == "tr" else r
            return [(rr[k], n[k], rr[k + 1]) for k in range(self.D)]
        if f == "ttm":
            r = self.bond_ranks()
            return [(r[k], self.in_modes[k], self.out_modes[k], r[k + 1]) for k in range(len(self.in_modes))]
        R = self.rank
        if f == "ht":
            shapes: list[tuple[int, ...] | None] = [None] * (2 * self.D - 1)
            root = self.ht_tree()

            def visit(node: HTNode, is_root: bool) -> None:
                if node.is_leaf:
                    shapes[node.core] = (n[node.modes[0]], R)
                    return
                visit(node.left, False)
                visit(node.right, False)
                shapes[node.core] = (R, R, 1 if is_root else R)

            visit(root, True)
            return [s for s in shapes if s is not None]
        # bt / tucker
        out: list[tuple[int, ...]] = []
        for _ in range(self.blocks):
            out.append((R,) * self.D)
            out.extend((n[k], R) for k in range(self.D))
        return out

    @property
    def num_cores(self) -> int:
        return len(self.core_shapes())

    def params(self) -> int:
        """Number of weight parameters stored in the cores."""
        return sum(math.prod(s) for s in self.core_shapes())

    def tensor_elements(self) -> dict[str, int]:
        """Elements of every tensor of the npz (INTERFACES section 2): inputs and results."""
        out = {"X": self.batch * self.I, "dY": self.batch * self.O, "Y": self.batch * self.O,
               "dX": self.batch * self.I}
        for k, shape in enumerate(self.core_shapes()):
            out[f"core_{k}"] = out[f"dcore_{k}"] = math.prod(shape)
        return out

    def check_elements(self, limit: int, option: str = "--max-elements") -> None:
        """Raise :class:`SpecError` naming the field to blame when the tensors of the layer hold more than
        ``limit`` elements together (checked before anything is allocated)."""
        sizes = self.tensor_elements()
        total = sum(sizes.values())
        if total <= limit:
            return
        key = max(sizes, key=sizes.get)
        raise SpecError(f"the layer's inputs and results hold {total} elements (largest: {key}, "
                        f"{list(self._shape_of(key))}), more than the limit {limit} ({option} raises it)",
                        field=self._blame(key))

    def _shape_of(self, key: str) -> tuple[int, ...]:
        if key in ("X", "dX"):
            return (self.batch, self.I)
        if key in ("Y", "dY"):
            return (self.batch, self.O)
        return self.core_shapes()[int(key.rsplit("_", 1)[1])]

    def _blame(self, key: str) -> str:
        """The spec field that makes tensor ``key`` large."""
        if key in ("X", "dX", "Y", "dY"):
            features = self.I if key in ("X", "dX") else self.O
            return "batch" if self.batch > features else ("in_modes" if key in ("X", "dX") else "out_modes")
        if self.format == "dense":
            return "in_modes" if self.I >= self.O else "out_modes"
        if self.format == "bt" and self.blocks > 1 and self.blocks * self.rank > max(self.modes):
            return "blocks"
        big = max(self.modes)
        if math.prod(self._shape_of(key)) > big ** 2:
            return "ranks"
        return "in_modes" if big in self.in_modes else "out_modes"

    def to_json(self) -> str:
        d: dict[str, Any] = {"name": self.name, "format": self.format,
                             "in_modes": list(self.in_modes), "out_modes": list(self.out_modes),
                             "ranks": self.ranks if isinstance(self.ranks, int) else list(self.ranks),
                             "batch": self.batch}
        if self.format == "bt":
            d["blocks"] = self.blocks
        return json.dumps(d)


def parse_spec(data: dict[str, Any] | str) -> LayerSpec:
    """Validate a spec given as a dict or JSON text."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise SpecError(f"not valid JSON: {exc}", field="<json>") from None
        except RecursionError:
            raise SpecError("not a spec: JSON nested too deeply", field="<json>") from None
        except ValueError:  # int() of more than sys.get_int_max_str_digits() digits
            raise SpecError("not a spec: a number with thousands of digits", field="<json>") from None
    if not isinstance(data, dict):
        raise SpecError(f"a spec must be a JSON object, got {type(data).__name__}", field="<json>")
    for key in data:
        if key not in KNOWN_FIELDS:
            raise SpecError(f"unknown field (known: {', '.join(KNOWN_FIELDS)})", field=key)
    for key in ("format", "in_modes", "out_modes", "batch"):
        if key not in data:
            raise SpecError("missing", field=key)
    name = data.get("name", "layer")
    if not isinstance(name, str):
        raise SpecError(f"must be a string, got {_short(name)}", field="name")
    fmt = data["format"]
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise SpecError(f"unknown format {_short(fmt)} (known: {', '.join(FORMATS)})", field="format")
    in_modes = _modes(data["in_modes"], "in_modes")
    out_modes = _modes(data["out_modes"], "out_modes")
    if len(in_modes) + len(out_modes) > MAX_MODES:
        raise SpecError(f"in_modes and out_modes together may have at most {MAX_MODES} modes, got "
                        f"{len(in_modes)} + {len(out_modes)}", field="out_modes")
    batch = _positive_int(data["batch"], "batch", MAX_BATCH)
    for key, modes in (("in_features", in_modes), ("out_features", out_modes)):
        if key in data:
            value = _positive_int(data[key], key, MAX_FEATURES)
            if value != math.prod(modes):
                raise SpecError(f"mode product mismatch: prod({list(modes)}) = {math.prod(modes)} != {value}",
                                field=key)
    if fmt == "ttm" and len(in_modes) != len(out_modes):
        raise SpecError(f"ttm needs as many in_modes as out_modes, got {len(in_modes)} and {len(out_modes)}",
                        field="out_modes")
    blocks = 1
    if "blocks" in data:
        if fmt != "bt":
            raise SpecError(f"only the bt format takes blocks (format is {fmt!r})", field="blocks")
        blocks = _positive_int(data["blocks"], "blocks", MAX_BLOCKS)
    if fmt == "dense":
        ranks: int | tuple[int, ...] = 1
        if "ranks" in data:
            r = data["ranks"]
            if not (isinstance(r, int) and not isinstance(r, bool) and r >= 1):
                raise SpecError(f"dense takes no ranks (or a positive integer, ignored), got {_short(r)}",
                                field="ranks")
    else:
        if "ranks" not in data:
            raise SpecError("missing", field="ranks")
        r = data["ranks"]
        D = len(in_modes) + len(out_modes)
        if isinstance(r, list):
            if fmt not in LIST_RANK_FORMATS:
                raise SpecError(f"{fmt} takes one integer rank, got a list", field="ranks")
            expected = {"tt": D - 1, "tr": D, "ttm": len(in_modes) - 1}[fmt]
            if len(r) != expected:
                what = {"tt": "r_1..r_{D-1}", "tr": "r_0..r_{D-1}", "ttm": "r_1..r_{d-1}"}[fmt]
                raise SpecError(f"{fmt} with {D if fmt != 'ttm' else len(in_modes)} "
                                f"{'modes' if fmt != 'ttm' else 'mode pairs'} needs {expected} ranks ({what}), "
                                f"got {len(r)}", field="ranks")
            for i, x in enumerate(r):
                if isinstance(x, bool) or not isinstance(x, int) or x < 1:
                    raise SpecError(f"entry {i} must be a positive integer, got {_short(x)}", field="ranks")
                if x > MAX_RANK:
                    raise SpecError(f"entry {i} must be at most {MAX_RANK}, got {_short(x)}", field="ranks")
            ranks = tuple(r)
        else:
            ranks = _positive_int(r, "ranks", MAX_RANK)
    if fmt == "tucker":
        blocks = 1
    return LayerSpec(name=name, format=fmt, in_modes=in_modes, out_modes=out_modes,
                     ranks=ranks, batch=batch, blocks=blocks)


def load_spec(path: str | Path) -> LayerSpec:
    """Read and validate a spec JSON file."""
    return parse_spec(read_text_file(path, field="--spec", error=SpecError))


__all__ = ["FORMATS", "LayerSpec", "HTNode", "parse_spec", "load_spec", "MAX_MODES", "MAX_BLOCKS", "MAX_RANK",
           "MAX_BATCH", "MAX_FEATURES", "DEFAULT_MAX_ELEMENTS"]
