"""Parameter lists of NNEF fragment declarations, read from their text.

The official ``nnef`` package reports *every* non-tensor parameter of an operation in
``Operation.attribs`` (defaults included) in declaration order, and every tensor
parameter in ``Operation.inputs``.  To reproduce that layout from an nnefx graph, whose
operations may omit defaulted attributes, we need each declaration's parameter order,
which parameters are tensors and their default values.  The registry keeps declarations
as NNEF text, so this module reads the header of such a text.  Only headers are read;
bodies are never evaluated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

_HEADER = re.compile(r"fragment\s+(?P<name>\w+)\s*(?:<[^>]*>)?\s*\(", re.S)
_TOKEN = re.compile(r"\s*(?:(?P<num>[+-]?(?:\d+\.\d*|\d*\.\d+|\d+)(?:[eE][+-]?\d+)?)"
                    r"|(?P<str>'[^']*'|\"[^\"]*\")|(?P<word>[A-Za-z_]\w*)|(?P<punct>[\[\]\(\),]))")

NO_DEFAULT = object()


@dataclass(frozen=True)
class Param:
    name: str
    type_text: str
    default: Any = NO_DEFAULT

    @property
    def is_tensor(self) -> bool:
        return self.type_text.startswith("tensor")

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside brackets, parentheses, angle brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([<":
            depth += 1
        elif ch in ")]>":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_literal(text: str) -> Any:
    """Value of an NNEF literal default (numbers, strings, logicals, arrays, tuples).

    Returns :data:`NO_DEFAULT` for anything else (an expression), which callers treat as
    "leave it to nnefx".
    """
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos:].strip() == "":
                break
            return NO_DEFAULT
        kind = m.lastgroup or ""
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    value, rest = _parse_value(tokens, 0)
    if value is NO_DEFAULT or rest != len(tokens):
        return NO_DEFAULT
    return value


def _parse_value(tokens: list[tuple[str, str]], i: int) -> tuple[Any, int]:
    if i >= len(tokens):
        return NO_DEFAULT, i
    kind, tok = tokens[i]
    if kind == "num":
        is_float = any(c in tok for c in ".eE")
        return (float(tok) if is_float else int(tok)), i + 1
    if kind == "str":
        return tok[1:-1], i + 1
    if kind == "word":
        if tok in ("true", "false"):
            return tok == "true", i + 1
        return NO_DEFAULT, i + 1
    if tok in "[(":
        close = "]" if tok == "[" else ")"
        items: list[Any] = []
        i += 1
        while i < len(tokens) and tokens[i][1] != close:
            item, i = _parse_value(tokens, i)
            if item is NO_DEFAULT:
                return NO_DEFAULT, i
            items.append(item)
            if i < len(tokens) and tokens[i][1] == ",":
                i += 1
        if i >= len(tokens):
            return NO_DEFAULT, i
        return (items if close == "]" else tuple(items)), i + 1
    return NO_DEFAULT, i + 1


@cache
def params_of(declaration: str) -> tuple[Param, ...] | None:
    """The parameters of a ``fragment`` declaration, in order; None if unreadable."""
    m = _HEADER.search(declaration)
    if m is None:
        return None
    depth, i = 1, m.end()
    while i < len(declaration) and depth:
        if declaration[i] == "(":
            depth += 1
        elif declaration[i] == ")":
            depth -= 1
        i += 1
    if depth:
        return None
    result = []
    for part in _split_top(declaration[m.end():i - 1]):
        name, _, rest = part.partition(":")
        type_text, eq, default = rest.partition("=")
        value = parse_literal(default) if eq else NO_DEFAULT
        result.append(Param(name.strip(), type_text.replace(" ", "").strip(), value))
    return tuple(result)
