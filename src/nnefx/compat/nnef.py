"""Drop-in replacement for the Python API of the official Khronos ``nnef`` package.

Code written for ``import nnef`` runs unchanged with ``import nnefx.compat.nnef as nnef``:
the same functions (``parse_string``, ``parse_file``, ``load_graph``, ``save_graph``,
``infer_shapes``, ``read_tensor``, ``write_tensor``, ``format_graph`` & co.) and the same
types (``Graph``, ``Tensor``, ``Operation`` namedtuples, ``Identifier``, ``Error``) with the
same fields, orders and conventions.  Everything is pure Python on top of nnefx: the
document is parsed and checked by nnefx's front-end, shapes come from nnefx's operator
registry, tensor files from :mod:`nnefx.io.binary`.

Like the official package, operations stay atomic (standard compounds and document-defined
fragments alike) unless their names are listed in ``lowered``, in which case they are
expanded into their bodies and the tensors this creates are named ``<op><n>`` as the
official parser names them.

Differences, all deliberate (see README "Drop-in for the official nnef Python API"):

* ``stdlib`` (an alternative standard library text) is not supported: nnefx's standard
  library is its operator registry.  Passing a non-empty ``stdlib`` raises :class:`Error`.
* nnefx checks more than the official parser (e.g. non-positive extents in ``external``
  shapes, ``constant`` value counts), so a few documents the official package accepts are
  rejected here with an error naming the position.
* ``read_tensor``/``write_tensor`` also accept a path, and raise :class:`Error` (also a
  ``ValueError``) for malformed files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError
from ..io import binary as _binary
from ..ops import registry as _registry
from ..semantics.expander import Expander
from ..semantics.fastpath import compile_if_flat
from ..semantics.frontend import attach_quant, check_document
from ..semantics.types import TensorT
from ..syntax import ast
from ..syntax.parser import FINAL, deep_recursion, parse_document
from . import _convert
from ._printer import (
    format_argument,
    format_extensions,
    format_graph,
    format_invocation,
    format_result,
    format_shapes,
    format_version,
)
from ._shapes import infer_shapes
from ._types import Error, Graph, Identifier, Operation, SessionInputError, Tensor, TensorFileError, no_gc

__all__ = [
    "Error", "Graph", "Identifier", "Operation", "Tensor", "StandardOperations", "Session",
    "parse_string", "parse_file", "load_graph", "save_graph", "infer_shapes",
    "read_tensor", "write_tensor", "format_version", "format_extensions", "format_argument",
    "format_result", "format_shapes", "format_invocation", "format_graph",
]

#: Names of the NNEF standard operations (what ``nnef.StandardOperations`` lists).
StandardOperations = frozenset(op.name for op in _registry.all_ops("nnef"))


class _OfficialExpander(Expander):
    """nnefx's expander with the official package's choice of what to expand.

    The official parser keeps *every* invocation atomic, document-defined fragments
    included, unless its name is in ``lowered``; fragments that compute only attributes
    (compile-time functions) are always evaluated.  nnefx's own default expands
    document-defined fragments, so only this decision differs.
    """

    def _expands(self, frag: ast.Fragment) -> bool:
        if frag.body is None:
            return False
        if not any(r.type.type.is_tensor() for r in frag.results):
            return True
        return frag.name in self.lowered


def _param_kinds(table: dict[str, ast.Fragment]) -> dict[str, dict[str, str | None]]:
    class Kinds(dict):
        def __missing__(self, name: str) -> dict[str, str | None]:
            frag = table.get(name)
            kinds = {} if frag is None else {
                p.name: (p.type.type.dtype or "scalar") if isinstance(p.type.type, TensorT) else None
                for p in frag.params}
            self[name] = kinds
            return kinds

        def get(self, name: str, default: Any = None) -> Any:
            return self[name]

    return Kinds()


def _build(text: str, quant: str | None, lowered: Iterable[str] | None, source: str,
           file: str | None) -> tuple[Any, dict[str, ast.Fragment]]:
    """nnefx graph plus fragment table; the syntax tree is garbage once this returns."""
    with no_gc(), deep_recursion():
        low = [n for n in lowered or () if n]
        fast = compile_if_flat(text, file=file or source, dialect=FINAL, lowered=low, expand_all=False, atomic=None,
                               input_shapes=None, shapes=False, expander_class=_OfficialExpander)
        if fast is not None:  # a flat document: the same graph, built without a syntax tree
            graph, table = fast
            if quant:
                attach_quant(graph, quant, table, file="quantization", dialect=FINAL)
            return graph, table
        doc = parse_document(text, file or source, FINAL)
        table = check_document(doc)
        if doc.graph is None:
            raise NNEFXError("the document defines no graph", doc.loc)
        expander = _OfficialExpander(table, doc.dialect, lowered=low)
        graph = expander.expand_graph(doc.graph)
        graph.validate_structure()
        if quant:
            attach_quant(graph, quant, table, file="quantization", dialect=doc.dialect)
    return graph, table


def _parse(text: str, quant: str | None, stdlib: str | None, lowered: Iterable[str] | None, source: str,
           file: str | None) -> Graph:
    if stdlib:
        raise Error("nnefx.compat.nnef does not support a custom 'stdlib': the standard operations "
                    "come from nnefx's operator registry")
    try:
        graph, table = _build(text, quant, lowered, source, file)
    except NNEFXError as exc:
        where = exc.location.file if exc.location is not None and exc.location.file == "quantization" else source
        raise Error(exc.message, exc.location, source=where) from None
    except RecursionError:
        raise Error("document nests too deeply") from None
    with no_gc():
        return _convert.convert_graph(graph, _param_kinds(table))


def parse_string(graph_str: str, quant_str: str | None = None, stdlib: str | None = None,
                 lowered: Iterable[str] | None = None) -> Graph:
    """Parse and check an NNEF document given as text; shapes are left to :func:`infer_shapes`."""
    return _parse(graph_str, quant_str, stdlib, lowered, "input", None)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        raise Error(f"Could not open file: {path}") from None


def parse_file(graph_fn: str, quant_fn: str | None = None, stdlib: str | None = None,
               lowered: Iterable[str] | None = None) -> Graph:
    """Parse and check an NNEF document file (plus an optional ``graph.quant`` file)."""
    text = _read_text(graph_fn)
    quant = _read_text(quant_fn) if quant_fn else None
    return _parse(text, quant, stdlib, lowered, graph_fn, graph_fn)


def _variable_path(folder: str, label: str) -> str:
    filename = label + ".dat"
    if filename.startswith("/"):
        filename = filename[1:]
    return os.path.join(folder, filename)


def load_graph(path: str, stdlib: str | None = None, lowered: Iterable[str] | None = None,
               load_variables: bool = True) -> Graph:
    """Load a model: a single ``.nnef`` file, or a folder with ``graph.nnef``, ``graph.quant``
    and one ``<label>.dat`` per variable (read when ``load_variables``)."""
    if os.path.isfile(path):
        return parse_file(path, stdlib=stdlib, lowered=lowered)
    graph_fn = os.path.join(path, "graph.nnef")
    quant_fn = os.path.join(path, "graph.quant")
    graph = parse_file(graph_fn, quant_fn if os.path.isfile(quant_fn) else None, stdlib=stdlib,
                       lowered=lowered)
    if load_variables:
        for op in graph.operations:
            if op.name != "variable":
                continue
            name = op.outputs["output"]
            filename = _variable_path(path, op.attribs["label"])
            data = read_tensor(filename)
            shape = op.attribs["shape"]
            if list(data.shape) != list(shape):
                raise Error(f"shape {list(data.shape)} in variable file does not match shape {shape} "
                            "defined in network structure")
            t = graph.tensors[name]
            graph.tensors[name] = Tensor(t.name, t.dtype, list(data.shape), data, t.quantization)
    return graph


def save_graph(graph: Graph, path: str, annotate_shapes: bool = False) -> None:
    """Write ``graph`` as a model folder (``graph.nnef`` + variable data that is present)."""
    if os.path.exists(path):
        raise RuntimeError(f"folder already exists: '{path}'")
    os.makedirs(path)
    text = "version 1.0;\n\n" + format_graph(graph.name, graph.inputs, graph.outputs, graph.operations,
                                             graph.tensors, annotate_shapes=annotate_shapes)
    _binary.write_atomic(os.path.join(path, "graph.nnef"), [text.encode("utf-8")])
    for op in graph.operations:
        if op.name != "variable":
            continue
        filename = _variable_path(path, op.attribs["label"])
        os.makedirs(os.path.dirname(filename), exist_ok=True)
        tensor = graph.tensors[op.outputs["output"]]
        if tensor.data is not None:
            write_tensor(filename, tensor.data, quantized=bool(tensor.quantization))


def read_tensor(file: Any, return_quantization: bool = False) -> Any:
    """Read a tensor file: the array, or ``(array, quantized)`` with ``return_quantization``.

    ``file`` is a binary (or, as the official loader passes it, text-mode) file object, or a
    path.  Quantized data comes back as its integer codes, as with the official package.
    """
    if hasattr(file, "buffer") and not hasattr(file, "readinto"):
        file = file.buffer  # a text-mode file object: read its bytes
    try:
        array, quant = _binary.read_tensor(file, mmap=False)
    except NNEFXError as exc:
        raise TensorFileError(exc.message, exc.location) from None
    quantized = np.bool_(bool(quant))
    return (array, quantized) if return_quantization else array


def write_tensor(file: Any, tensor: np.ndarray, quantized: bool = False, version: tuple[int, int] = (1, 0)) -> None:
    """Write ``tensor`` in the NNEF binary format (bytes identical to the official writer)."""
    tensor = np.asarray(tensor)
    try:
        _binary.write_tensor(file, tensor, quant=bool(quantized) or None, version=tuple(version))
    except NNEFXError as exc:
        raise TensorFileError(exc.message, exc.location) from None


class Session:
    """Run a model like ``nnef.Session``: ``Session(path)(*inputs) -> tuple of outputs``.

    The official class drives the C++ reference runtime; this one drives
    :class:`nnefx.runtime.session.Session` (fast kernels) on the model that
    :func:`nnefx.load` reads from ``path`` (folder, archive or document).  Inputs are given
    positionally in the graph's input order, outputs come back as a tuple in its output
    order, and variables keep their updated values from one call to the next.
    """

    def __init__(self, path: str, stdlib: str | None = None, lowered: Iterable[str] | None = None):
        if stdlib:
            raise Error("nnefx.compat.nnef does not support a custom 'stdlib'")
        from ..api import load
        from ..runtime.session import Session as _Session

        try:
            self._session = _Session(load(path))
        except NNEFXError as exc:
            raise Error(exc.message, exc.location) from None
        self._inputs = [t.name for t in self._session.inputs]
        self._outputs = [t.name for t in self._session.outputs]

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        return None

    def __call__(self, *inputs: Any) -> tuple[np.ndarray, ...]:
        if len(inputs) != len(self._inputs):
            raise SessionInputError(f"expected {len(self._inputs)} inputs ({', '.join(self._inputs)}), "
                                    f"got {len(inputs)}")
        try:
            results = self._session.run(dict(zip(self._inputs, inputs, strict=True)))
        except NNEFXError as exc:
            raise SessionInputError(exc.message, exc.location) from None
        return tuple(results[name] for name in self._outputs)
