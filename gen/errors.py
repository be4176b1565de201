"""Error types shared by every part of fetta, and the one safe reader of user text files.

Every user-facing error names the field it is about, so that the CLI can print
one clear line (``fetta: error: spec field 'ranks': ...``) and exit with code 2
(``docs/errors.md``).
"""

from __future__ import annotations

from pathlib import Path

#: largest spec / configuration / grid file read (bytes): these are a few lines of JSON or TOML, and
#: a bound keeps a mistaken argument (``--spec /dev/zero``, a huge binary) from filling the memory
MAX_TEXT_BYTES = 1 << 22


class FettaError(Exception):
    """Base class of errors that the CLI reports as one line with exit code 2."""

    exit_code = 2

    def __init__(self, message: str, *, field: str | None = None):
        self.field = field
        self.message = message
        super().__init__(self.__str__())

    kind = "error"

    def __str__(self) -> str:
        if self.field is None:
            return self.message
        return f"{self.kind} field {self.field!r}: {self.message}"


class ConfigError(FettaError, ValueError):
    """An invalid accelerator configuration (names the bad field)."""

    kind = "config"


class SpecError(FettaError, ValueError):
    """An invalid layer spec (names the bad field)."""

    kind = "spec"


class UsageError(FettaError, ValueError):
    """A bad command-line option or file argument; ``field`` is the option (``--out``)."""

    kind = "argument"

    def __str__(self) -> str:
        if self.field is None:
            return self.message
        return f"argument {self.field}: {self.message}"


class InputError(FettaError, ValueError):
    """An input tensor (``fetta run --inputs F.npz``) that does not fit the spec; ``field`` is its npz key."""

    kind = "inputs"

    def __str__(self) -> str:
        if self.field is None:
            return self.message
        return f"inputs key {self.field!r}: {self.message}"


def read_text_file(path: str | Path, *, field: str, error: type[FettaError] = UsageError,
                   limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of a small user file; every way it can fail is one ``error`` naming ``field``.

    A missing file, a directory, an unreadable file, one larger than ``limit`` bytes and one that is
    not UTF-8 text (an npz passed as ``--spec``, say) each raise ``error(..., field=field)``.
    """
    if str(path) == "":
        raise error("empty file name", field=field)
    p = Path(path)
    try:
        with open(p, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise error(f"file not found: {p}", field=field) from None
    except IsADirectoryError:
        raise error(f"{p} is a directory, not a file", field=field) from None
    except PermissionError:
        raise error(f"permission denied: {p}", field=field) from None
    except OSError as exc:
        raise error(f"cannot read {p}: {exc.strerror or exc}", field=field) from None
    if len(data) > limit:
        raise error(f"{p} is larger than {limit} bytes; expected a small text file", field=field)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        hint = " (it is a zip / npz archive)" if data.startswith(b"PK\x03\x04") else ""
        raise error(f"{p} is not a UTF-8 text file{hint}: byte {exc.start} is {data[exc.start]:#04x}",
                    field=field) from None


__all__ = ["FettaError", "ConfigError", "SpecError", "UsageError", "InputError", "MAX_TEXT_BYTES",
           "read_text_file"]
