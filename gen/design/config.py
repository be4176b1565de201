"""The one configuration object of a fetta accelerator.

:class:`FettaConfig` is the single source of truth for a design point: the
hardware generator (``hdl/``), the compiler, the instruction-level emulator and
the analytical model all read it. It is a frozen dataclass; a TOML file maps
onto it field by field and ``--set key=value`` overrides single fields.

Example ``configs/default.toml``::

    [fetta]
    datatype = "bf16"
    num_ces = 16
    ce_rows = 4
    ce_cols = 4

Every invalid value raises :class:`gen.errors.ConfigError` naming the field.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Mapping

from gen.errors import ConfigError

DATATYPES = ("bf16", "int16")
#: bits of a bfloat16 element (operands of the ``bf16`` datatype)
BF16_BITS = 16
#: bits of an FP32 element (accumulators of the ``bf16`` datatype)
FP32_BITS = 32
#: largest ``mul_latency`` (the multiplier has two internal cuts)
MAX_MUL_LATENCY = 3
#: largest ``add_latency`` (the adder has six internal cuts)
MAX_ADD_LATENCY = 7


def _is_pow2(x: int) -> bool:
    return x >= 1 and (x & (x - 1)) == 0


@dataclass(frozen=True)
class FettaConfig:
    """Parameters of one accelerator design point.

    Defaults are the paper's configuration (FETTA, section VI-B): 16 CEs of
    4x4 PEs (256 MACs), bfloat16 multiply with FP32 accumulation, 16 banks of
    4 elements, 512 KB unified memory, 128 KB accumulation memory, a 64-lane
    vector unit, LPDDR4 at 25.6 GB/s and a 1 GHz clock.
    """

    # --- arithmetic ---------------------------------------------------------
    #: ``bf16``: bfloat16 x bfloat16 -> FP32 accumulate (subnormals flushed,
    #: see docs/numerics.md); ``int16``: exact integers for dataflow bring-up.
    datatype: str = "bf16"
    #: operand width of the integer mode (bits, two's complement)
    int_width: int = 16
    #: accumulator width of the integer mode (bits, wraps modulo 2**width)
    int_acc_width: int = 48
    #: cycles from the PE's operands to its registered product (bfloat16 multiplier pipeline
    #: registers, the output register included; 1 .. 3, see :class:`hdl.fp.BF16Mul`)
    mul_latency: int = 1
    #: cycles from an FP32 adder's operands to its registered sum, the output register included
    #: (1 .. 7, see :class:`hdl.fp.FP32Add`). Every adder of the PE, of the reduction network and
    #: of the accumulation unit has it (the vector unit's too, less its last register); the PE's
    #: output-stationary accumulation interleaves ``add_latency`` output tiles, and the accumulation
    #: unit's read-modify-write of one row takes ``add_latency`` cycles.
    #: The int16 datatype has the same timing (its adders are followed by delay registers).
    add_latency: int = 1

    # --- tensor contraction unit -------------------------------------------
    #: PE rows of one contraction engine (CE)
    ce_rows: int = 4
    #: PE columns of one CE
    ce_cols: int = 4
    #: number of CEs in the tensor contraction unit
    num_ces: int = 16
    #: ports of the distribution and reduction networks (power of two)
    net_ports: int = 16

    # --- memories -----------------------------------------------------------
    #: SRAM banks of the unified memory (and of the accumulation unit)
    banks: int = 16
    #: elements per bank row (one network port carries one row)
    lanes: int = 4
    #: unified memory capacity in KiB (both ping-pong halves together)
    unified_kb: int = 512
    #: accumulation unit capacity in KiB
    accum_kb: int = 128
    #: instruction memory depth (instructions)
    imem_depth: int = 256

    # --- vector unit --------------------------------------------------------
    #: floating-point lanes of the vector unit
    vector_lanes: int = 64

    # --- system (performance model) ----------------------------------------
    #: clock frequency in MHz
    freq_mhz: float = 1000.0
    #: off-chip DRAM bandwidth in GB/s (LPDDR4)
    dram_gbps: float = 25.6
    #: data width of the DMA engine's AXI4 manager in bits (:class:`hdl.dma.AxiDma`): a power of two
    #: from 8 to 1024; the engine needs a power-of-two multiple of a unified-memory row
    #: (``lanes * elem_bits``); 256 bits at 1 GHz is 32 GB/s, above ``dram_gbps``
    dma_data_bits: int = 256
    #: longest AXI4 burst of the DMA engine in beats (1 .. 256)
    dma_burst: int = 16
    #: AXI4 bursts the DMA engine keeps in flight per direction (1 .. 16)
    dma_outstanding: int = 4
    #: cycles from an AR handshake to the first R beat of the DRAM (1 .. 256): not a parameter of the
    #: accelerator but of the memory it is attached to; the emulator counts DMA instructions with it
    #: (``gen.design.control.dma_cycles``) and the RTL bench's AXI4 RAM (``sim/host_player.py``)
    #: answers with it
    dram_latency: int = 8

    # --- zero skipping (TensorDash, seed 001; the scheduler block, not yet in the datapath) ----
    #: rows of the zero-skipping staging buffer (2 .. 8; seed 001's preferred point: 4)
    zero_skip_depth: int = 4
    #: lookahead steps of the zero-skipping scheduler (1 .. zero_skip_depth - 1; seed 001: 3)
    zero_skip_lookahead: int = 3
    #: the scheduler's lookaside options (a lane taking its neighbour's pair; seed 001 Fig. 5) in the
    #: scheduler block and the lane group; an OS CE's front end never looks aside (a neighbouring PE
    #: row computes other outputs)
    zero_skip_lookaside: bool = True
    #: (IA, IB) vector pairs per cycle refilling an OS CE's staging buffer (``hdl/zs_rows.py``;
    #: 1 .. zero_skip_depth; 1: what today's distribution networks give a CE, which leaves zero
    #: skipping no speedup, docs/zero_skip.md)
    zero_skip_refill: int = 1

    # -----------------------------------------------------------------------
    def __post_init__(self) -> None:
        self.validate()

    # derived quantities ------------------------------------------------------
    @property
    def macs(self) -> int:
        """Multiply-accumulate units in the whole TCU."""
        return self.num_ces * self.ce_rows * self.ce_cols

    @property
    def elem_bits(self) -> int:
        """Width of one stored operand element (bits)."""
        return BF16_BITS if self.datatype == "bf16" else self.int_width

    @property
    def acc_bits(self) -> int:
        """Width of one accumulator element (bits)."""
        return FP32_BITS if self.datatype == "bf16" else self.int_acc_width

    @property
    def unified_rows_per_bank(self) -> int:
        """Rows of one unified-memory bank (both ping-pong halves)."""
        return (self.unified_kb * 1024 * 8) // (self.banks * self.lanes * self.elem_bits)

    @property
    def accum_rows_per_bank(self) -> int:
        """Rows of one accumulation-unit bank."""
        return (self.accum_kb * 1024 * 8) // (self.banks * self.lanes * self.acc_bits)

    # validation --------------------------------------------------------------
    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first bad field."""
        if self.datatype not in DATATYPES:
            raise ConfigError(f"must be one of {', '.join(DATATYPES)}, got {self.datatype!r}",
                              field="datatype")
        for name in ("int_width", "int_acc_width", "ce_rows", "ce_cols", "num_ces", "net_ports",
                     "banks", "lanes", "unified_kb", "accum_kb", "imem_depth", "vector_lanes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"must be a positive integer, got {value!r}", field=name)
        for name in ("freq_mhz", "dram_gbps"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"must be a positive number, got {value!r}", field=name)
        # zero_skip_depth is checked before the lookahead it bounds
        zs_top = self.zero_skip_depth - 1 if isinstance(self.zero_skip_depth, int) else 1
        for name, low, top in (("mul_latency", 1, MAX_MUL_LATENCY), ("add_latency", 1, MAX_ADD_LATENCY),
                               ("dma_burst", 1, 256), ("dma_outstanding", 1, 16), ("dram_latency", 1, 256),
                               ("zero_skip_depth", 2, 8),
                               ("zero_skip_lookahead", 1, max(1, zs_top)),
                               ("zero_skip_refill", 1, max(1, zs_top + 1))):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= top:
                raise ConfigError(f"must be an integer between {low} and {top}, got {value!r}", field=name)
        if not 2 <= self.int_width <= 32:
            raise ConfigError(f"must be between 2 and 32, got {self.int_width}", field="int_width")
        if self.int_acc_width < 2 * self.int_width:
            raise ConfigError(
                f"must be at least 2 * int_width = {2 * self.int_width} so that products are exact, "
                f"got {self.int_acc_width}", field="int_acc_width")
        if not _is_pow2(self.net_ports) or self.net_ports < 2:
            raise ConfigError(f"must be a power of two >= 2, got {self.net_ports}", field="net_ports")
        if self.num_ces > self.net_ports:
            raise ConfigError(
                f"must not exceed net_ports ({self.net_ports}): every CE needs a network port, "
                f"got {self.num_ces}", field="num_ces")
        if self.banks < self.net_ports:
            raise ConfigError(
                f"must be >= net_ports ({self.net_ports}) so that every network port has a bank, "
                f"got {self.banks}", field="banks")
        if not _is_pow2(self.banks):
            raise ConfigError(f"must be a power of two (bank index XOR sel_vec), got {self.banks}",
                              field="banks")
        if self.unified_rows_per_bank < 2:
            raise ConfigError(
                f"{self.unified_kb} KiB gives fewer than 2 rows per bank (ping-pong needs 2)",
                field="unified_kb")
        if self.accum_rows_per_bank < 1:
            raise ConfigError(f"{self.accum_kb} KiB gives no row per bank", field="accum_kb")
        d = self.dma_data_bits
        if not isinstance(d, int) or isinstance(d, bool) or not 8 <= d <= 1024 or not _is_pow2(d):
            raise ConfigError(f"must be a power of two from 8 to 1024, got {d!r}", field="dma_data_bits")

    # construction ------------------------------------------------------------
    def replace(self, **changes: Any) -> "FettaConfig":
        """A copy with some fields changed (validated)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, source: str = "config") -> "FettaConfig":
        """Build from a mapping; unknown keys and wrong types name the field."""
        known = {f.name: f for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            if key not in known:
                raise ConfigError(f"unknown field in {source} (known: {', '.join(known)})", field=key)
            kwargs[key] = _coerce(known[key], value)
        return cls(**kwargs)


def _coerce(f: dataclasses.Field, value: Any) -> Any:
    """Convert a TOML / command-line value to the field's type."""
    kind = type(f.default)
    if isinstance(value, str) and kind is not str:
        text = value.strip()
        try:
            if kind is bool:
                if text.lower() in ("1", "true", "yes", "on"):
                    return True
                if text.lower() in ("0", "false", "no", "off"):
                    return False
                raise ValueError(text)
            if kind is int:
                return int(text, 0)
            if kind is float:
                return float(text)
        except ValueError:
            raise ConfigError(f"expected {kind.__name__}, got {value!r}", field=f.name) from None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"expected {kind.__name__}, got {value!r}", field=f.name)
    return value


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """Parse ``key=value`` strings from ``--set``."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {item!r}", field=key or item)
        out[key] = value
    return out


def read_toml(path: str | Path, *, field: str) -> dict[str, Any]:
    """Parse a TOML file; a missing or malformed file raises one :class:`ConfigError` naming ``field``."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"file not found: {path}", field=field) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}", field=field) from None


def load_config(path: str | Path | None = None, overrides: Iterable[str] | Mapping[str, Any] = ()) -> FettaConfig:
    """Load a configuration: defaults, then a TOML file, then ``--set`` overrides.

    The TOML file holds the fields either at top level or in a ``[fetta]`` table.
    """
    values: dict[str, Any] = {}
    source = "config"
    if path is not None:
        source = str(path)
        data = read_toml(path, field="--config")
        values.update(data.get("fetta", data))
        values.pop("fetta", None)
    if isinstance(overrides, Mapping):
        values.update(overrides)
    else:
        values.update(parse_overrides(overrides))
    return FettaConfig.from_mapping(values, source=source)


DEFAULT = FettaConfig()

def check_accelerator(config: FettaConfig) -> None:
    """Rules of the whole accelerator beyond :meth:`FettaConfig.validate`-level field checks.

    The TCU maps one memory row onto one CE edge (IA: a PE column, IB: a PE row)."""
    if config.ce_rows != config.lanes:
        raise ConfigError(f"must equal lanes ({config.lanes}): one IA row feeds one PE column, "
                          f"got {config.ce_rows}", field="ce_rows")
    if config.ce_cols != config.lanes:
        raise ConfigError(f"must equal lanes ({config.lanes}): one IB row feeds one PE row, "
                          f"got {config.ce_cols}", field="ce_cols")
    if config.lanes < 2:
        raise ConfigError("must be >= 2: an accumulation row is rewritten at most every 2 cycles",
                          field="lanes")
    if config.banks != config.net_ports:
        raise ConfigError(f"must equal net_ports ({config.net_ports}): network port p is bank p, "
                          f"got {config.banks}", field="banks")
    if config.net_ports > 16:
        raise ConfigError(f"must be <= 16: an instruction holds 64-bit network control words, "
                          f"got {config.net_ports}", field="net_ports")


__all__ = ["FettaConfig", "DEFAULT", "DATATYPES", "BF16_BITS", "FP32_BITS", "MAX_MUL_LATENCY", "MAX_ADD_LATENCY", "load_config", "check_accelerator",
           "parse_overrides", "read_toml", "field"]
