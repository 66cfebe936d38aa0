"""The one error type of nnefx.

Every layer (lexer, checker, binary reader, XML reader, runtime) raises :class:`NNEFXError`
with a :class:`Location`, so the CLI can print ``FILE:LINE:COL: error: MESSAGE`` for text
inputs, or ``FILE: error: [FIELD] MESSAGE`` for binary and XML inputs, and exit 1 without a
traceback.  Any other exception reaching the user is a bug in nnefx.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Location:
    """Where something is: a file plus either a text position or a named field.

    ``line``/``column`` are 1-based and used for text documents; ``field`` names a place in
    structured inputs (a binary header field, an XML layer, a JSON node) where lines mean
    little.  Slotted: the parser keeps one per syntax node, so its size matters.
    """

    file: str | None = None
    line: int | None = None
    column: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        parts = [self.file or "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            parts.append(str(self.column if self.column is not None else 1))
        text = ":".join(parts)
        if self.field:
            text += f": [{self.field}]" if self.line is None else f" [{self.field}]"
        return text

    def with_file(self, file: str | None) -> Location:
        return Location(file, self.line, self.column, self.field)


class NNEFXError(Exception):
    """A user-facing error: what went wrong and where.

    ``location`` may be None while the error travels up through code that does not know
    the file; callers that do know it attach it with :meth:`at_file`.
    """

    def __init__(self, message: str, location: Location | None = None):
        super().__init__(message)
        self.message = message
        self.location = location

    def at_file(self, file: str) -> NNEFXError:
        """Fill in the file name if the location has none yet; returns self for ``raise``."""
        if self.location is None:
            self.location = Location(file)
        elif self.location.file is None:
            self.location = self.location.with_file(file)
        return self

    def __str__(self) -> str:
        if self.location is None:
            return f"error: {self.message}"
        return f"{self.location}: error: {self.message}"


def error(message: str, file: str | None = None, line: int | None = None, column: int | None = None,
          field: str | None = None) -> NNEFXError:
    """Shorthand to build an :class:`NNEFXError` with a location."""
    return NNEFXError(message, Location(file, line, column, field))


class NNEFXWarning(UserWarning):
    """Something nnefx accepted although the specification would not (``lenient=True``), or
    checked and found doubtful: what and where, printed as ``FILE:LINE:COL: warning: MESSAGE``."""

    def __init__(self, message: str, location: Location | None = None):
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        if self.location is None:
            return f"warning: {self.message}"
        return f"{self.location}: warning: {self.message}"
