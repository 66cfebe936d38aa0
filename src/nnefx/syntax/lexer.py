"""NNEF tokenizer, shared by both dialects.

The lexer does not know which dialect it reads: words come out as ``NAME`` tokens and the
parser decides which of them are keywords (``extent`` is a keyword only in the provisional
dialect; ``integer``, ``yield``, ``extension`` only in the final one).  That keeps dialect
detection a parser concern and lets one token stream serve both grammars.

Every token carries its 1-based line and column so every later error can point at it.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..diagnostics import Location, NNEFXError

#: Token kinds.
NAME, NUMBER, STRING, OP, EOF = "name", "number", "string", "op", "eof"



class Token(NamedTuple):
    """One lexical element.  ``value`` is the source text (strings: without quotes).

    A named tuple rather than a frozen dataclass: immutable all the same, and built about
    four times faster, which matters because every statement the fast path compiles and
    every document the general pipeline reads is tokenized first."""

    kind: str
    value: str
    line: int
    column: int
    #: For numbers: True when the literal is real (has ``.`` or an exponent).
    real: bool = False
    #: Line/column just past the token, for spans.
    end_line: int = 0
    end_column: int = 0

    def loc(self, file: str | None) -> Location:
        return Location(file, self.line, self.column)

    def describe(self) -> str:
        if self.kind == EOF:
            return "end of input"
        if self.kind == STRING:
            return f"string '{self.value}'"
        return f"'{self.value}'"


# Blanks before a token are consumed by the same match (``lastgroup`` names the token; a
# match of blanks alone, at the end of the text, has none).
_TOKEN_RE = re.compile(r"""
    [ \t\v\f]*
    (?:
      (?P<nl>\r\n|\r|\n)
    | (?P<comment>\#[^\r\n]*)
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<number>[0-9]+(?P<frac>\.[0-9]*)?(?P<exp>[eE][+-]?[0-9]+)?)
    | (?P<op>->|<=|>=|==|!=|&&|\|\||[-+*/^<>!()\[\]{}:=,;?])
    | (?=['"])
    | \Z
    )
""", re.VERBOSE)
#: Characters that may not follow a numeric literal (``1e``, ``12ab``, ``3_``).
_NUMBER_TAIL = re.compile(r"[eE_]|[A-Za-z]")


def tokenize(text: str, file: str | None = None) -> list[Token]:
    """Split ``text`` into tokens; raises :class:`NNEFXError` at the first bad character."""
    tokens: list[Token] = []
    append = tokens.append
    i, n = 0, len(text)
    line, line_start = 1, 0
    match = _TOKEN_RE.match
    tail = _NUMBER_TAIL.match
    # tuple.__new__ skips the named tuple's Python-level __new__ (a quarter of the time per token)
    new = tuple.__new__

    def err(msg: str, pos: int) -> NNEFXError:
        return NNEFXError(msg, Location(file, line, pos - line_start + 1))

    while i < n:
        m = match(text, i)
        if m is None:
            j = i + len(text[i:]) - len(text[i:].lstrip(" \t\v\f"))
            raise err(f"unexpected character {text[j]!r}", j)
        kind = m.lastgroup
        j = m.end()
        if kind == "name" or kind == "op":  # most tokens: they end where the match ends
            value = m.group(kind)
            col = j - len(value) - line_start + 1
            append(new(Token, (NAME if kind == "name" else OP, value, line, col, False, line, col + len(value))))
        elif kind == "nl":
            line += 1
            line_start = j
        elif kind is None:  # blanks, then a string literal or the end of the text
            if j < n:
                j = _string(text, j, text[j], line, line_start, file, append)
        elif kind == "number":
            start = m.start(kind)
            if j < n and tail(text, j):
                if text[j] in "eE":
                    raise err("malformed exponent in numeric literal: expected digits after 'e'", j)
                raise err(f"malformed numeric literal '{text[start:j + 1]}'", start)
            col = start - line_start + 1
            real = m.group("frac") is not None or m.group("exp") is not None
            append(new(Token, (NUMBER, m.group(kind), line, col, real, line, col + j - start)))
        i = j  # (a comment: skipped)
    tokens.append(Token(EOF, "", line, i - line_start + 1, False, line, i - line_start + 1))
    return tokens


def _string(text: str, i: int, quote: str, line: int, line_start: int, file: str | None, append) -> int:
    """Lex the string literal starting at ``i``; returns the index after it.

    Strings end at the first matching quote; a backslash escapes the next character (the
    quote or a backslash), as the final spec describes.
    """
    n = len(text)
    start = i
    col = i - line_start + 1
    i += 1
    chars: list[str] = []
    while True:
        if i >= n or text[i] in "\r\n":
            raise NNEFXError("unterminated string literal (missing closing quote)", Location(file, line, col))
        ch = text[i]
        if ch == quote:
            i += 1
            break
        if ch == "\\" and i + 1 < n and text[i + 1] in (quote, "\\"):
            chars.append(text[i + 1])
            i += 2
            continue
        if not (" " <= ch <= "~") and ch != "\t":
            raise NNEFXError(f"invalid character {ch!r} in string literal (printable ASCII only)",
                             Location(file, line, i - line_start + 1))
        chars.append(ch)
        i += 1
    append(Token(STRING, "".join(chars), line, col, end_line=line, end_column=col + i - start))
    return i
