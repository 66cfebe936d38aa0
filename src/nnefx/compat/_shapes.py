"""``infer_shapes`` of the compat API: nnefx's shape pass over an official-style graph.

The official package infers shapes in a separate pass over its graph, so callers may edit
the graph between parsing and inference (e.g. change an ``external``'s ``shape`` attribute,
as the official validator does) and may supply rules for their own operations
(``custom_shapes``).  We therefore work from the compat graph itself, one operation at a
time: standard operations go through :func:`nnefx.semantics.shapes.infer_operation` (the
very code nnefx's front-end uses, with the operator registry's shape rules), the rest
through the caller's function with the official calling convention (shapes as lists,
attributes as keywords).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .. import graph as nx
from ..diagnostics import NNEFXError
from ..ops import registry
from ..semantics.shapes import infer_operation
from ._types import Error, Graph, Identifier, Tensor, no_gc

_BUILTIN = ("external", "variable", "constant", "update")


def _shape_of(graph: Graph, value: Any) -> Any:
    if isinstance(value, Identifier):
        return graph.tensors[value].shape
    if isinstance(value, np.ndarray):
        return list(value.shape)
    if isinstance(value, list):
        return [_shape_of(graph, v) for v in value]
    return []  # a literal: a singleton tensor of rank 0


def _set_shape(graph: Graph, value: Any, shape: Any) -> None:
    if isinstance(value, Identifier):
        t = graph.tensors[value]
        graph.tensors[value] = Tensor(t.name, t.dtype, shape, t.data, t.quantization)
    elif isinstance(value, (list, tuple)):
        if not isinstance(shape, (list, tuple)) or len(shape) != len(value):
            raise AssertionError(f"number of shapes does not match number of outputs ({len(value)})")
        for v, s in zip(value, shape, strict=True):
            _set_shape(graph, v, s)


def _plain(value: Any) -> Any:
    if isinstance(value, Identifier):
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


def _as_list(shape: Any) -> Any:
    if shape is None:
        return None
    if isinstance(shape, tuple):
        # An unspecified extent (an external declared with 0) reads back as the 0 it was
        # written as, which is what the official package reports for it.
        return [0 if d is None else int(d) for d in shape]
    return [_as_list(s) for s in shape]


def _handled_by_nnefx(name: str) -> bool:
    if name in _BUILTIN:
        return True
    entry = registry.find(name)
    return entry is not None and entry.shape_rule is not None


def _freeze(v: Any) -> Any:
    """A hashable, type-exact image of an attribute value (``1``, ``1.0`` and ``True`` differ;
    so do ``0.0`` and ``-0.0``); TypeError for values it cannot vouch for."""
    t = type(v)
    if t is int or t is str or v is None:
        return v if t is not str else ("s", v)
    if t is list or t is tuple:
        return (t, *[_freeze(x) for x in v])
    if t is float:
        return (t, v.hex())
    if t is bool:
        return (t, v)
    if isinstance(v, np.generic):
        return (t, repr(v))  # repr keeps -0.0 apart from 0.0
    raise TypeError("no memo key")


def _input_key(v: Any, tensors: dict[str, nx.Tensor]) -> Any:
    if isinstance(v, str):
        return tensors[v].shape
    if isinstance(v, (list, tuple)):
        return (type(v), *[_input_key(x, tensors) for x in v])
    return ("literal",)  # any literal stands for a rank-0 tensor


def _memo_key(op: Any, tensors: dict[str, nx.Tensor]) -> Any:
    """What the shape pass of a standard operation depends on, or None when that cannot be
    stated (then the operation is not memoised).

    WHY: large documents repeat the same operation on the same shapes thousands of times,
    and shape rules (plus their attribute checks) are pure functions of the input shapes,
    the attributes and the data type.  ``external`` is excluded (its result depends on the
    caller's ``external_shapes``); a variable's shape depends on its ``shape`` attribute only
    (see :func:`nnefx.semantics.shapes.infer_operation`), so its ``label`` is left out.
    """
    name = op.name
    if name == "external":
        return None
    try:
        attribs = op.attribs
        if name == "variable":
            frozen: Any = _freeze(attribs.get("shape"))
        else:
            frozen = tuple([(k, _freeze(v)) for k, v in attribs.items()])
        ins = tuple([tensors[v].shape if isinstance(v, str) else _input_key(v, tensors) for v in op.inputs.values()])
        outs = tuple([len(v) if isinstance(v, (list, tuple)) else -1 for v in op.outputs.values()])
        key = (name, op.dtype, outs, ins, frozen)
        hash(key)
    except (TypeError, KeyError, AttributeError):
        return None
    return key


def _names(values: Any) -> list[str]:
    out: list[str] = []
    for v in values:
        out.extend(_names(v) if isinstance(v, (list, tuple)) else [str(v)])
    return out


def infer_shapes(graph: Graph, external_shapes: Mapping[str, Any] | None = None,
                 custom_shapes: Mapping[str, Callable[..., Any]] | None = None) -> None:
    """Fill in ``graph.tensors[...].shape`` (lists of ints) in place, like ``nnef.infer_shapes``.

    ``external_shapes`` overrides the declared shape of named inputs (same rank required);
    ``custom_shapes`` maps an operation name to ``f(*input_shapes, **attribs)`` returning the
    output shape(s) for operations nnefx has no rule for.  Raises :class:`Error` naming the
    operation and its outputs when a rule rejects its arguments.
    """
    with no_gc():
        _infer(graph, external_shapes, custom_shapes)


def _infer(graph: Graph, external_shapes: Mapping[str, Any] | None,
           custom_shapes: Mapping[str, Callable[..., Any]] | None) -> None:
    overrides = {str(k): tuple(v) for k, v in (external_shapes or {}).items()}
    custom_shapes = custom_shapes or {}
    shadow = nx.Graph(graph.name, list(graph.inputs), list(graph.outputs))
    for name, t in graph.tensors.items():
        shape = None if t.shape is None else tuple(t.shape) if all(isinstance(d, int) for d in t.shape) else None
        shadow.tensors[name] = nx.Tensor(name, t.dtype or "scalar", shape)
    handled: dict[str, bool] = {}
    memo: dict[Any, list] = {}
    for op in graph.operations:
        results = list(op.outputs.values())
        try:
            h = handled.get(op.name)
            if h is None:
                h = handled[op.name] = _handled_by_nnefx(op.name)
            if h:
                key = _memo_key(op, shadow.tensors)
                shapes = memo.get(key) if key is not None else None
                names = _names(results)
                if shapes is None:
                    nx_op = nx.Operation(op.name, {k: _plain(v) for k, v in op.inputs.items()},
                                         {k: _plain(v) for k, v in op.outputs.items()}, dict(op.attribs), op.dtype)
                    infer_operation(shadow, nx_op, overrides)
                    shapes = [shadow.tensors[name].shape for name in names]
                    if key is not None and key == _memo_key(op, shadow.tensors):
                        memo[key] = shapes
                else:
                    for name, shape in zip(names, shapes, strict=True):
                        shadow.tensors[name].shape = shape
                for name, shape in zip(names, shapes, strict=True):
                    t = graph.tensors[name]
                    graph.tensors[name] = Tensor(t.name, t.dtype, _as_list(shape), t.data, t.quantization)
                continue
            func = custom_shapes.get(op.name)
            if func is None:
                raise Error(f"shape inference function is not defined for operation '{op.name}'")
            shapes = func(*[_shape_of(graph, v) for v in op.inputs.values()], **dict(op.attribs))
            if not isinstance(shapes, tuple):
                shapes = (shapes,)
            if len(shapes) != len(results):
                raise AssertionError(f"number of shapes ({len(shapes)}) does not match number of "
                                     f"outputs ({len(results)})")
            for result, shape in zip(results, shapes, strict=True):
                _set_shape(graph, result, shape)
            for name in _names(results):
                shape = graph.tensors[name].shape
                shadow.tensors[name].shape = None if shape is None else tuple(shape)
        except Error:
            raise
        except (AssertionError, NNEFXError, ValueError, TypeError, IndexError, KeyError) as e:
            message = e.message if isinstance(e, NNEFXError) else str(e)
            raise Error(f"while inferring shape of tensor(s) '{', '.join(_names(results))}' "
                        f"(operation '{op.name}'): {message}") from None
