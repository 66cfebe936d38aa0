"""The tensor parameters of an operation, read from its NNEF declaration.

Kernels take tensor arguments positionally in declaration order (see
:mod:`nnefx.ops.registry`).  ``Operation.inputs`` should already be in that order, but the
declaration is the authority: reading it lets the planner put arguments in the right place,
fill in a defaulted tensor argument that a graph left out (``conv``'s ``bias = 0.0``) and
give a literal argument (``add(x, 1.0)``) the declared data type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

_HEADER = re.compile(r"fragment\s+\w+\s*(?:<[^>]*>)?\s*\((?P<params>.*?)\)\s*->", re.S)
_TENSOR_PARAM = re.compile(
    r"(?P<name>\w+)\s*:\s*tensor\s*<\s*(?P<dtype>[\w?]*)\s*>(?P<array>\s*\[\s*\])?"
    r"(?:\s*=\s*(?P<default>[^,]+?))?\s*(?:,|$)")
_NO_DEFAULT = object()


@dataclass(frozen=True)
class TensorParam:
    name: str
    #: ``scalar``/``integer``/``logical``, or None for the generic ``?``.
    dtype: str | None
    is_array: bool
    default: Any = _NO_DEFAULT
    #: True when the declaration gives a default, even one too complex to evaluate here.
    declared_default: bool = False

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT


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
        return _NO_DEFAULT  # an expression or array default: leave it to the kernel


@cache
def tensor_params(declaration: str) -> tuple[TensorParam, ...] | None:
    """The declaration's tensor parameters in order, or None if the header is unreadable."""
    match = _HEADER.search(declaration)
    if match is None:
        return None
    params = match.group("params")
    result = []
    # Split on top-level commas so that tuple types like (integer,integer)[] stay whole.
    depth = 0
    start = 0
    pieces = []
    for i, ch in enumerate(params):
        if ch in "([<":
            depth += 1
        elif ch in ")]>":
            depth -= 1
        elif ch == "," and depth == 0:
            pieces.append(params[start:i])
            start = i + 1
    pieces.append(params[start:])
    for piece in pieces:
        m = _TENSOR_PARAM.match(piece.strip())
        if m is None:
            continue
        dtype = m.group("dtype")
        default = _literal(m.group("default")) if m.group("default") else _NO_DEFAULT
        result.append(TensorParam(m.group("name"), None if dtype == "?" else dtype,
                                  bool(m.group("array")), default, bool(m.group("default"))))
    return tuple(result)
