"""Binding a graph's symbolic extents (:mod:`nnefx.dims`) when a session runs.

A graph whose shapes name symbols (tract's ``tract_symbol B``) is planned once per set of
values its inputs give the symbols: :func:`bind_inputs` reads the values off the input
arrays (a mismatch names the symbol and both values; the graph's assertions are checked),
:func:`specialize` writes them into a copy of the graph (attributes such as a ``reshape``
shape ``[B, 4]`` and every tensor shape), which the planner then compiles like any other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import dims
from ..diagnostics import NNEFXError
from ..graph import Graph, Operation

#: plans kept per session, one per distinct binding of the symbols
MAX_BINDINGS = 16


def bind_inputs(graph: Graph, inputs: Mapping[str, Any]) -> dict[str, int]:
    """The symbols' values given by ``inputs`` (arrays by input name)."""
    values: dict[str, int] = {}
    origin: dict[str, str] = {}
    for name in graph.inputs:
        declared = graph.tensors[name].shape
        if declared is None or name not in inputs or not dims.has_symbols(declared):
            continue
        shape = np.shape(inputs[name])
        if len(shape) != len(declared):
            raise NNEFXError(f"input '{name}' must have shape {dims.fmt_shape(declared)}, got {list(shape)}")
        dims.bind(tuple(declared), tuple(shape), values, f"input '{name}'", origin=origin)
    for a in graph.assertions:
        if a.holds(values) is False:
            bound = ", ".join(f"{s} = {values[s]}" for s in sorted(a.symbols()) if s in values)
            raise NNEFXError(f"the inputs violate tract_assert '{a}' ({bound})", a.loc)
    return values


def specialize(graph: Graph, values: Mapping[str, int]) -> Graph:
    """A copy of ``graph`` with ``values`` written for its symbols: in attributes and shapes;
    a symbol left unbound is an unknown extent in shapes (and ``0``, unspecified, in an
    ``external`` shape) and stays in ``symbols``."""
    tensors = {}
    for name, t in graph.tensors.items():
        shape = t.shape
        if dims.has_symbols(shape):
            shape = dims.concrete(dims.substitute(shape, values))
            t = dataclasses.replace(t, shape=shape)
        tensors[name] = t
    ops = []
    for op in graph.operations:
        if not _has_dim(op.attribs):
            ops.append(op)
            continue
        attribs = {k: dims.substitute_in(v, values) for k, v in op.attribs.items()}
        if op.op == "external":   # an input extent still unbound: NNEF's unspecified (0)
            attribs["shape"] = [0 if isinstance(d, dims.Dim) else d for d in attribs.get("shape", [])]
        ops.append(Operation(op.op, op.inputs, op.outputs, attribs, op.dtype, op.location))
    left = [s for s in graph.symbols if s not in values]
    return dataclasses.replace(graph, tensors=tensors, operations=ops, symbols=left,
                               assertions=[a for a in graph.assertions if a.holds(values) is None])


def _has_dim(v: Any) -> bool:
    if isinstance(v, dims.Dim):
        return True
    if isinstance(v, dict):
        return any(_has_dim(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return any(_has_dim(x) for x in v)
    return False


def without_symbols(graph: Graph, fmt: str) -> Graph:
    """``graph`` for a writer without symbolic extents: shapes' symbols become unknown
    (``None``); a symbol inside an attribute cannot be written and is a located error."""
    for op in graph.operations:
        for key, value in op.attribs.items():
            if _has_dim(value) and not (op.op == "external" and key == "shape"):
                raise NNEFXError(f"cannot write '{op.op}' as {fmt}: attribute '{key}' holds a symbolic extent "
                                 f"({', '.join(sorted(_symbols(value)))}); give the inputs fixed shapes "
                                 "(input_shapes=...) first", op.location)
    return specialize(graph, {})


def _symbols(v: Any) -> set[str]:
    if isinstance(v, dims.Dim):
        return v.symbols()
    if isinstance(v, (list, tuple)):
        return set().union(*(_symbols(x) for x in v)) if v else set()
    return set()
