"""``infer_shapes`` of the compat API: nnefx's shape rules over an official-style graph.

The official package infers shapes in a separate pass over its graph, so callers may edit
the graph between parsing and inference (e.g. change an ``external``'s ``shape`` attribute,
as the official validator does) and may supply rules for their own operations
(``custom_shapes``).  We therefore work on the compat graph itself, one operation at a
time, calling the shape rule that nnefx's operator registry holds for each standard
operation (the same rules nnefx's own shape pass uses) and the caller's function for the
rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError
from ..ops import registry
from ._types import Error, Graph, Identifier, Tensor


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


def _as_tuples(shape: Any) -> Any:
    """Official shapes are lists of ints; registry rules take tuples (lists for arrays)."""
    if isinstance(shape, list) and all(isinstance(s, int) for s in shape):
        return tuple(shape)
    if isinstance(shape, list):
        return [_as_tuples(s) for s in shape]
    return shape


def _as_lists(shape: Any) -> Any:
    if isinstance(shape, (tuple, list)):
        if all(isinstance(s, (int, np.integer)) for s in shape):
            return [int(s) for s in shape]
        return [_as_lists(s) for s in shape]
    raise AssertionError(f"shape rule returned {shape!r}, not a shape")


def _is_shape(value: Any) -> bool:
    return isinstance(value, tuple) and all(isinstance(s, (int, np.integer)) for s in value)


def _registry_rule(op: Any) -> Callable[..., Any] | None:
    entry = registry.find(op.name)
    if entry is None or entry.shape_rule is None:
        return None
    rule = entry.shape_rule

    def call(*shapes: Any, **attribs: Any) -> Any:
        if entry.generic:
            attribs["dtype"] = op.dtype
        result = rule(*[_as_tuples(s) for s in shapes], **attribs)
        if len(op.outputs) == 1 and (_is_shape(result) or isinstance(result, list)):
            result = (result,)
        return tuple(_as_lists(r) for r in result)

    return call


def infer_shapes(graph: Graph, external_shapes: Mapping[str, Any] | None = None,
                 custom_shapes: Mapping[str, Callable[..., Any]] | None = None) -> None:
    """Fill in ``graph.tensors[...].shape`` (lists of ints) in place, like ``nnef.infer_shapes``.

    ``external_shapes`` overrides the declared shape of named inputs (same rank required);
    ``custom_shapes`` maps an operation name to ``f(*input_shapes, **attribs)`` returning the
    output shape(s) for operations nnefx has no rule for.  Raises :class:`Error` naming the
    operation and its outputs when a rule rejects its arguments.
    """
    external_shapes = external_shapes or {}
    custom_shapes = custom_shapes or {}
    for op in graph.operations:
        func = _registry_rule(op) or custom_shapes.get(op.name)
        if func is None:
            raise Error(f"shape inference function is not defined for operation '{op.name}'")
        results = list(op.outputs.values())
        try:
            if op.name == "external" and results and results[0] in external_shapes:
                override = list(external_shapes[results[0]])
                original = op.attribs["shape"]
                if len(override) != len(original):
                    raise AssertionError(f"overridden external shape rank ({len(override)}) does not "
                                         f"match original rank ({len(original)})")
                _set_shape(graph, results[0], override)
                continue
            shapes = func(*[_shape_of(graph, v) for v in op.inputs.values()], **dict(op.attribs))
            if not isinstance(shapes, tuple):
                shapes = (shapes,)
            if len(shapes) != len(results):
                raise AssertionError(f"number of shapes ({len(shapes)}) does not match number of "
                                     f"outputs ({len(results)})")
            for result, shape in zip(results, shapes, strict=True):
                _set_shape(graph, result, shape)
        except (AssertionError, NNEFXError, ValueError, TypeError, IndexError, KeyError) as e:
            message = e.message if isinstance(e, NNEFXError) else str(e)
            names = ", ".join(str(n) for n in _flat(results))
            raise Error(f"while inferring shape of tensor(s) '{names}' (operation '{op.name}'): "
                        f"{message}") from None


def _flat(values: Any) -> list[Any]:
    out: list[Any] = []
    for v in values:
        out.extend(_flat(v) if isinstance(v, (list, tuple)) else [v])
    return out
