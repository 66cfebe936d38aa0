"""Shape inference while importing: each emitted operation's registry shape rule, at once.

An importer runs the rule of every operation it emits as it emits it, so a node whose
shapes do not fit is reported at that node (not later, far from its cause), and later nodes
see the best-known shapes of their inputs.
"""

from __future__ import annotations

from typing import Any

from ...diagnostics import NNEFXError
from ...graph import Graph, Operation
from ...ops.contract import Undecided

_RESULT_NAMES: dict[str, list[str]] = {}


def result_names(op: str, default: str) -> list[str]:
    """Names of the results of ``op`` in declaration order (from the registry)."""
    if op in _RESULT_NAMES:
        return _RESULT_NAMES[op]
    from ...ops import registry
    from ...ops.signature import signature

    entry = registry.find(op)
    sig = signature(entry.declaration) if entry is not None else None
    names = [r.name for r in sig.results] if sig is not None and sig.results else [default]
    _RESULT_NAMES[op] = names
    return names


_PARAMS: dict[str, list[str]] = {}


def tensor_params(op: str) -> list[str] | None:
    """Names of the tensor parameters of ``op`` in declaration order (from the registry).

    Read by :mod:`nnefx.ops.signature`, as the planner's, so the importer and the planner
    agree on the order in which an operation takes its tensors.
    """
    if op in _PARAMS:
        return _PARAMS[op]
    from ...ops import registry
    from ...ops.signature import signature

    entry = registry.find(op)
    if entry is None:
        return None
    sig = signature(entry.declaration)
    params = [p.name for p in sig.tensor_params] if sig is not None else []
    _PARAMS[op] = params
    return params


def infer_operation(graph: Graph, op: Operation) -> None:
    """Run the registry shape rule of ``op`` and store result shapes on its tensors.

    A shape rule that rejects the operation (NNEFXError) is a real error in the model and is
    reported at the operation's node; a rule that is missing, or cannot handle unknown
    dimensions, leaves the shapes unknown (the file's declared dims are used instead).
    """
    from ...ops import registry

    entry = registry.find(op.op)
    if entry is None or entry.shape_rule is None:
        return
    params = tensor_params(op.op) or list(op.inputs)
    args = []
    for p in params:
        v = op.inputs.get(p, None)
        if isinstance(v, list):
            shapes = [_shape_of(graph, x) for x in v]
            if any(s is None for s in shapes):
                return
            args.append(shapes)
        elif p not in op.inputs:
            args.append(())
        else:
            s = _shape_of(graph, v)
            if s is None:
                return
            args.append(s)
    dynamic = any(d is None for shape in _flat_shapes(args) for d in shape)
    try:
        results = entry.infer(args, op.attribs, op.dtype or "scalar")
    except Undecided:
        return  # a rule that cannot decide with unknown extents: checked at run time
    except NNEFXError as exc:
        if dynamic:
            return
        # With every extent known a failing rule is a bug or a bad node: never leave the
        # shape silently unknown.
        raise NNEFXError(f"{op.op}: {exc.message}", op.location) from None
    outs = list(op.outputs.values())
    for value, shape in zip(outs, results, strict=False):
        if isinstance(value, list):
            for name, s in zip(value, shape if isinstance(shape, list) else [], strict=False):
                if s is not None:  # None: this result's shape is decided at run time
                    graph.tensors[name].shape = tuple(s)
        elif isinstance(value, str) and shape is not None:
            graph.tensors[value].shape = tuple(shape)


def _flat_shapes(args: list) -> list[tuple]:
    out = []
    for a in args:
        if isinstance(a, list):
            out.extend(a)
        else:
            out.append(a)
    return out


def _shape_of(graph: Graph, v: Any) -> tuple | None:
    if isinstance(v, str):
        t = graph.tensors.get(v)
        return None if t is None else t.shape
    if isinstance(v, (bool, int, float)):
        return ()
    return None


def infer_etypes(graph: Graph, op: Operation, unify: Any = None) -> list[str | None] | None:
    """The concrete element type (:attr:`~nnefx.graph.Tensor.etype`) of each result of ``op``.

    The operation's registry element-type rule decides where it has one (``@op.etypes``:
    called with its tensor inputs' element types, as shape rules are with shapes); otherwise
    a result takes the element type of the first tensor input of its own abstract data type
    that has one (``add`` of two int8 tensors is int8, ``select`` of float16 values is float16,
    ``select`` of a float64 tensor and a reader-made constant float64), and a
    result of a type no input has (``argmax`` indices, comparison results) its type's default.
    ``unify`` replaces "the first": it maps the element types (defaults filled in) of those
    inputs to the result's (tract's common super type, :func:`nnefx.semantics.dialect.carry_etypes`).
    Returns the element-type rule's results as the rule gave them (a default type included:
    ``tract_core_cast`` to 'i64' is an integer result although its ``etype`` stays None), or
    None where the operation has no rule.
    """
    from ... import etypes
    from ...ops import registry

    outs = [n for n in op.output_names() if n in graph.tensors]
    entry = registry.find(op.op)
    if entry is not None and entry.etype_rule is not None:
        params = tensor_params(op.op) or list(op.inputs)
        args = []
        for p in params:
            v = op.inputs.get(p, None)
            if isinstance(v, list):
                args.append([_etype_of(graph, x) for x in v])
            else:
                args.append(_etype_of(graph, v) if p in op.inputs else None)
        try:
            result = entry.etype_rule(*args, **op.attribs)
        except NNEFXError as exc:
            raise NNEFXError(f"{op.op}: {exc.message}", op.location) from None
        results = result if isinstance(result, (list, tuple)) else [result]
        for name, et in zip(outs, results, strict=False):
            t = graph.tensors[name]
            # (a reader may still be setting the result's data type: the plan checks the kinds)
            t.etype = None if et is None or etypes.DEFAULTS.get(etypes.abstract(et) or "") == et else et
        return list(results)
    sources = [graph.tensors[v] for v in _flat_shapes(list(op.inputs.values())) if isinstance(v, str) and v in graph.tensors]
    for name in outs:
        t = graph.tensors[name]
        if unify is None:
            # an input without an element type (a constant the reader made for a literal, in
            # the default storage) does not narrow a typed one: max(x, 0) of float64 x is float64
            t.etype = next((s.etype for s in sources if s.dtype == t.dtype and s.etype is not None), None)
        else:
            et = unify([etypes.of(s) for s in sources if s.dtype == t.dtype])
            t.etype = None if et is None or etypes.DEFAULTS.get(t.dtype) == et else et
    return None


def _etype_of(graph: Graph, v: Any) -> str | None:
    from ... import etypes

    if isinstance(v, str) and v in graph.tensors:
        return etypes.of(graph.tensors[v])
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "i64"
    if isinstance(v, float):
        return "f32"
    return None

