"""An operation's signature, read once from its NNEF declaration.

The registry keeps each operation's declaration as NNEF text because the front-end's
standard library is built from exactly that text.  Layers below the front-end (the
kernel guard, the planner, the IR mapping) still need the parameter list — which
parameters are tensors and in what order, the declared type of each attribute, the result
names — without compiling a document.  They all read it here, so there is one reader of
declaration headers, not one per consumer.

Only the header is read: ``fragment name<generics>( params ) -> ( results )``.  Types are
kept as their text without blanks (``(integer,integer)[]``, ``tensor<scalar>``); a default
is kept as text and, when it is a plain literal, also as a value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

_HEADER = re.compile(
    r"fragment\s+(?P<name>\w+)\s*(?:<[^>]*>)?\s*\((?P<params>.*?)\)\s*->\s*\((?P<results>.*?)\)", re.S)
_TENSOR_TYPE = re.compile(r"tensor<(?P<dtype>[\w?]*)>(?P<array>\[\])?$")

#: Marks a parameter without a default, or one whose default is not a plain literal.
NO_DEFAULT: Any = object()


@dataclass(frozen=True)
class Param:
    """One declared parameter or result."""

    name: str
    #: The declared type with blanks removed: ``integer[]``, ``tensor<scalar>``, ``(integer,integer)[]``.
    type: str
    #: The default's source text, or None when the parameter has none.
    default_text: str | None = None

    @property
    def is_tensor(self) -> bool:
        return _TENSOR_TYPE.match(self.type) is not None

    @property
    def tensor_dtype(self) -> str | None:
        """``scalar``/``integer``/``logical`` of a tensor parameter; None for the generic ``?``
        (bound per invocation); ``""`` for ``tensor<>``, a tensor of any type not tied to it."""
        m = _TENSOR_TYPE.match(self.type)
        return None if m is None or m.group("dtype") == "?" else m.group("dtype")

    @property
    def is_array(self) -> bool:
        return self.type.endswith("[]")

    @property
    def default(self) -> Any:
        """The default as a value when it is a plain literal, else :data:`NO_DEFAULT`."""
        return NO_DEFAULT if self.default_text is None else _literal(self.default_text)


@dataclass(frozen=True)
class Signature:
    name: str
    params: tuple[Param, ...]
    results: tuple[Param, ...]

    @property
    def tensor_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.is_tensor)

    @property
    def attribute_types(self) -> dict[str, str]:
        """Non-tensor parameter name -> declared type text."""
        return {p.name: p.type for p in self.params if not p.is_tensor}

    @property
    def attribute_defaults(self) -> dict[str, Any]:
        """Non-tensor parameter name -> its declared default as a value (strings, arrays and
        tuples included), for the attributes whose default is a literal."""
        out = {}
        for p in self.params:
            if not p.is_tensor and p.default_text is not None:
                value = literal_value(p.default_text)
                if value is not NO_DEFAULT:
                    out[p.name] = value
        return out


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside ``()``, ``[]`` and ``<>`` so ``(integer,integer)[]`` stays whole."""
    pieces, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([<":
            depth += 1
        elif ch in ")]>":
            depth -= 1
        elif ch == "," and depth == 0:
            pieces.append(text[start:i])
            start = i + 1
    pieces.append(text[start:])
    return [p for p in pieces if p.strip()]


def _param(piece: str) -> Param | None:
    if ":" not in piece:
        return None
    name, rest = piece.split(":", 1)
    typ, eq, default = rest.partition("=")
    return Param(name.strip(), "".join(typ.split()), default.strip() if eq else None)


def _literal(text: str) -> Any:
    text = text.strip()
    if text == "true":
        return True
    if text == "false":
        return False
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return NO_DEFAULT  # an expression or array default: the kernel's own default applies


_NNEF_WORD = re.compile(r"""('[^']*'|"[^"]*")|\b(true|false)\b""")


def literal_value(text: str) -> Any:
    """An NNEF literal (number, ``true``/``false``, string, ``[...]`` array, ``(...)`` tuple,
    nested) as a Python value — arrays as lists, tuples as tuples — or :data:`NO_DEFAULT`
    for anything else (an expression).  Reads declaration text only; evaluates nothing."""
    import ast

    def word(m: re.Match) -> str:
        return m.group(1) or ("True" if m.group(2) == "true" else "False")

    try:
        value = ast.literal_eval(_NNEF_WORD.sub(word, text.strip()))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return NO_DEFAULT
    ok = (bool, int, float, str, list, tuple)

    def plain(v: Any) -> bool:
        return isinstance(v, ok) and (not isinstance(v, (list, tuple)) or all(plain(x) for x in v))

    return value if plain(value) else NO_DEFAULT


@cache
def signature(declaration: str) -> Signature | None:
    """The signature of a ``fragment`` declaration, or None if its header cannot be read."""
    m = _HEADER.search(declaration)
    if m is None:
        return None
    params = tuple(p for p in map(_param, _split_top_level(m.group("params"))) if p is not None)
    results = tuple(p for p in map(_param, _split_top_level(m.group("results"))) if p is not None)
    return Signature(m.group("name"), params, results)
