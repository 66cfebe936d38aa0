"""NNEF tokenizer, shared by both dialects.

The lexer does not know which dialect it reads: words come out as ``NAME`` tokens and the
parser decides which of them are keywords (``extent`` is a keyword only in the provisional
dialect; ``integer``, ``yield``, ``extension`` only in the final one).  That keeps dialect
detection a parser concern and lets one token stream serve both grammars.

Every token carries its 1-based line and column so every later error can point at it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..diagnostics import Location, NNEFXError

#: Token kinds.
NAME, NUMBER, STRING, OP, EOF = "name", "number", "string", "op", "eof"

#: Multi-character operators first so that the longest match wins.
_OPERATORS = ("->", "<=", ">=", "==", "!=", "&&", "||",
              "+", "-", "*", "/", "^", "<", ">", "!", "(", ")", "[", "]", "{", "}",
              ":", "=", ",", ";", "?")

_WHITESPACE = " \t\r\n\v\f"


@dataclass(frozen=True)
class Token:
    """One lexical element.  ``value`` is the source text (strings: without quotes)."""

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


def tokenize(text: str, file: str | None = None) -> list[Token]:
    """Split ``text`` into tokens; raises :class:`NNEFXError` at the first bad character."""
    tokens: list[Token] = []
    i, n = 0, len(text)
    line, line_start = 1, 0

    def err(msg: str, pos: int) -> NNEFXError:
        return NNEFXError(msg, Location(file, line, pos - line_start + 1))

    while i < n:
        c = text[i]
        if c in _WHITESPACE:
            if c == "\n":
                line += 1
                line_start = i + 1
            elif c == "\r":
                # CR LF counts as one line break, a lone CR as one too.
                if i + 1 < n and text[i + 1] == "\n":
                    i += 1
                line += 1
                line_start = i + 1
            i += 1
            continue
        if c == "#":
            while i < n and text[i] not in "\r\n":
                i += 1
            continue
        col = i - line_start + 1
        start = i
        if c.isascii() and (c.isalpha() or c == "_"):
            while i < n and text[i].isascii() and (text[i].isalnum() or text[i] == "_"):
                i += 1
            tokens.append(Token(NAME, text[start:i], line, col, end_line=line, end_column=col + i - start))
            continue
        if c.isascii() and c.isdigit():
            while i < n and text[i].isascii() and text[i].isdigit():
                i += 1
            real = False
            if i < n and text[i] == ".":
                real = True
                i += 1
                while i < n and text[i].isascii() and text[i].isdigit():
                    i += 1
            if i < n and text[i] in "eE":
                j = i + 1
                if j < n and text[j] in "+-":
                    j += 1
                if j < n and text[j].isascii() and text[j].isdigit():
                    real = True
                    i = j
                    while i < n and text[i].isascii() and text[i].isdigit():
                        i += 1
                else:
                    raise err("malformed exponent in numeric literal: expected digits after 'e'", i)
            if i < n and text[i].isascii() and (text[i].isalpha() or text[i] == "_"):
                raise err(f"malformed numeric literal '{text[start:i + 1]}'", start)
            tokens.append(Token(NUMBER, text[start:i], line, col, real=real,
                                end_line=line, end_column=col + i - start))
            continue
        if c in "'\"":
            # Strings end at the first matching quote; a backslash escapes the next
            # character (the quote or a backslash), as the final spec describes.
            i += 1
            chars: list[str] = []
            while True:
                if i >= n or text[i] in "\r\n":
                    raise NNEFXError("unterminated string literal (missing closing quote)",
                                     Location(file, line, col))
                ch = text[i]
                if ch == c:
                    i += 1
                    break
                if ch == "\\" and i + 1 < n and text[i + 1] in (c, "\\"):
                    chars.append(text[i + 1])
                    i += 2
                    continue
                if not (" " <= ch <= "~") and ch != "\t":
                    raise err(f"invalid character {ch!r} in string literal (printable ASCII only)", i)
                chars.append(ch)
                i += 1
            tokens.append(Token(STRING, "".join(chars), line, col, end_line=line, end_column=col + i - start))
            continue
        for op in _OPERATORS:
            if text.startswith(op, i):
                i += len(op)
                tokens.append(Token(OP, op, line, col, end_line=line, end_column=col + len(op)))
                break
        else:
            raise err(f"unexpected character {c!r}", i)
    tokens.append(Token(EOF, "", line, i - line_start + 1, end_line=line, end_column=i - line_start + 1))
    return tokens
