"""The value types of the official ``nnef`` package's Python API, re-created.

The official package builds these in C++ as ``namedtuple`` types; field names, order and
defaults here are the same, so code that unpacks, indexes or ``_replace``\\ s them works
unchanged.
"""

from __future__ import annotations

import gc
from collections import namedtuple
from collections.abc import Iterator
from contextlib import contextmanager

from ..diagnostics import Location, NNEFXError


class Identifier(str):
    """A tensor name used as an argument or result (plain ``str`` values are string literals)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str.__repr__(self)


class Error(NNEFXError):
    """The error raised for invalid documents, like ``nnef.Error``.

    It is also an :class:`~nnefx.diagnostics.NNEFXError`, so nnefx-aware callers keep the
    :class:`~nnefx.diagnostics.Location`.  ``str(error)`` follows the official wording:
    ``Parse error in 'FILE' [LINE:COL] MESSAGE`` (``'input'`` for strings).
    """

    def __init__(self, message: str, location: Location | None = None, *, source: str | None = None):
        super().__init__(message, location)
        self.source = source

    def __str__(self) -> str:
        loc = self.location
        if loc is not None and loc.line is not None:
            where = self.source or loc.file or "input"
            return f"Parse error in '{where}' [{loc.line}:{loc.column or 1}] {self.message}"
        return self.message


class TensorFileError(Error, ValueError):
    """A malformed binary tensor file; also a ``ValueError`` as in the official reader."""


class SessionInputError(Error, ValueError):
    """Inputs a :class:`Session` cannot run with; also a ``ValueError`` as in the official one."""


Graph = namedtuple("Graph", ["name", "tensors", "operations", "inputs", "outputs"])
Tensor = namedtuple("Tensor", ["name", "dtype", "shape", "data", "quantization"], defaults=(None, None, None))
Operation = namedtuple("Operation", ["name", "attribs", "inputs", "outputs", "dtype"], defaults=(None,))


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building a large graph.

    Parsing allocates hundreds of thousands of long-lived objects; every generation-2
    collection then walks all of them, which roughly doubled parse time for 10k-operation
    documents (benchmarks/parse.py).  Nothing built here is garbage, so pausing costs
    nothing; the previous state is restored even on errors.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
