"""Error types shared by every part of fetta.

Every user-facing error names the field it is about, so that the CLI can print
one clear line (``fetta: error: spec field 'ranks': ...``) and exit with code 2.
"""


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
