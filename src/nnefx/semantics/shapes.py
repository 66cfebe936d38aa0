"""Shape propagation over a flat graph (NNEF 1.0 §2.2 and §3.3.4).

Tensor-introducing operations give shapes directly (``external``, ``variable``,
``constant``); ``update`` keeps its variable's shape; every other operation's result shapes
come from its registry shape rule ``rule(*input_shapes, **attribs[, dtype=...])``.

Unspecified extents (``0`` in a provisional ``external``) are ``None``.  They stay ``None``
until ``input_shapes`` supplies them; rules see the ``None`` dimensions, and whatever a rule
cannot decide yet is left unknown and checked when the shapes are given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..diagnostics import NNEFXError
from ..dims import Dim
from ..graph import Graph, Operation
from ..ops.contract import Undecided


def infer_shapes(graph: Graph, input_shapes: dict[str, tuple] | None = None,
                 custom_shapes: Mapping[str, Callable[..., Any]] | None = None) -> Graph:
    """Fill ``Tensor.shape`` of every tensor of ``graph`` (in place; returns the graph).

    ``input_shapes`` maps external tensor names to shapes that replace the declared ones
    (same rank); use it to fill unspecified extents.  ``custom_shapes`` gives shape
    functions for the graph's declaration-only fragments (``graph.declarations``), called
    as the official tools call theirs: ``f(*input_shapes, **attribs)`` with shapes as lists,
    returning the result's shape (a list) or a tuple of shapes, one per result; an
    exception it raises is reported at the invocation.  Results of a custom primitive
    without a function stay unknown (``None``).
    """
    if input_shapes:
        externals = {n for op in graph.operations if op.op == "external" for n in op.output_names()}
        for name in input_shapes:
            if name not in externals:
                raise NNEFXError(f"a shape is given for '{name}', which is not an input of graph "
                                 f"'{graph.name}' (inputs: {', '.join(sorted(externals)) or 'none'})")
    for op in graph.operations:
        infer_operation(graph, op, input_shapes, custom_shapes)
    return graph


def _shape_attr(op: Operation, allow_unknown: bool) -> tuple:
    shape = op.attribs.get("shape")
    if not isinstance(shape, (list, tuple)) or not all(isinstance(d, int) and not isinstance(d, bool)
                                                       or isinstance(d, Dim) for d in shape):
        raise NNEFXError(f"'{op.op}' needs a 'shape' given as an array of integers", op.location)
    out = []
    for d in shape:
        if isinstance(d, Dim):
            if not allow_unknown:
                raise NNEFXError(f"'{op.op}' shape must be known numbers, found symbolic {d}", op.location)
            out.append(d)
            continue
        if d < 0 or (d == 0 and not allow_unknown):
            raise NNEFXError(f"'{op.op}' shape items must be positive, found {list(shape)}", op.location)
        out.append(None if d == 0 else d)
    return tuple(out)


def _input_shape(graph: Graph, v: Any) -> Any:
    if isinstance(v, str):
        return graph.tensors[v].shape
    if isinstance(v, list):
        return [_input_shape(graph, x) for x in v]
    if isinstance(v, tuple):
        return tuple(_input_shape(graph, x) for x in v)
    return ()  # a literal stands for a singleton constant tensor (rank 0)


def _unknown(s: Any) -> bool:
    if s is None:
        return True
    if isinstance(s, list):
        return any(_unknown(x) for x in s)
    return False


def _set(graph: Graph, names: Any, shapes: Any, op: Operation) -> None:
    if isinstance(names, str) and graph.tensors[names].kind != "tensor":
        return  # a sequence or optional keeps the shape its elements were given (no rule computes it)
    if isinstance(names, str):
        if shapes is not None:
            if not isinstance(shapes, (tuple, list)) or not _dims(shapes):
                raise NNEFXError(f"shape rule of '{op.op}' returned an invalid shape {shapes!r}", op.location)
            shapes = tuple(shapes)
        graph.tensors[names].shape = shapes
        return
    if isinstance(names, list):
        if shapes is None:
            for n in names:
                _set(graph, n, None, op)
            return
        if not isinstance(shapes, (list, tuple)) or len(shapes) != len(names):
            n = len(shapes) if isinstance(shapes, (list, tuple)) else 1
            raise NNEFXError(f"'{op.op}' produces {n} tensors here but {len(names)} names receive them",
                             op.location)
        for name, s in zip(names, shapes, strict=False):
            _set(graph, name, s, op)


def infer_operation(graph: Graph, op: Operation, input_shapes: dict[str, tuple] | None,
                    custom_shapes: Mapping[str, Callable[..., Any]] | None = None) -> None:
    """Shape one operation (its inputs must be shaped already)."""
    outs = list(op.outputs.values())
    if op.op in ("external", "variable", "constant"):
        name = op.output_names()[0]
        if op.op == "external":
            declared = _shape_attr(op, allow_unknown=True)
            if input_shapes and name in input_shapes:
                given = tuple(input_shapes[name])
                if len(given) != len(declared):
                    raise NNEFXError(f"input '{name}' is declared with rank {len(declared)} "
                                     f"{_fmt(declared)} but given shape {list(given)}", op.location)
                if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in given):
                    raise NNEFXError(f"input shape for '{name}' must be positive integers, found {list(given)}",
                                     op.location)
                declared = given
            _set(graph, name, declared, op)
            return
        shape = _shape_attr(op, allow_unknown=False)
        if op.op == "constant":
            value = op.attribs.get("value")
            volume = 1
            for d in shape:
                volume *= d
            if isinstance(value, list) and len(value) not in (1, volume):
                raise NNEFXError(f"constant of shape {list(shape)} needs 1 or {volume} values, found {len(value)}",
                                 op.location)
        _set(graph, name, shape, op)
        return
    if op.op == "update":
        vals = list(op.inputs.values())
        var_shape = _input_shape(graph, vals[0]) if vals else None
        if len(vals) > 1:
            val_shape = _input_shape(graph, vals[1])
            if (var_shape is not None and val_shape not in (None, ()) and not _unknown(val_shape)
                    and None not in var_shape and tuple(val_shape) != tuple(var_shape)):
                raise NNEFXError(f"update: value shape {list(val_shape)} differs from the variable's shape "
                                 f"{list(var_shape)}", op.location)
        for n in outs:
            _set(graph, n, var_shape, op)
        return
    entry = _find(op.op)
    if entry is None and op.op in graph.declarations:
        _custom_primitive(graph, op, outs, (custom_shapes or {}).get(op.op))
        return
    if entry is None:
        raise NNEFXError(f"operation '{op.op}' is not supported: no registered operation of that name "
                         "(custom primitives have no shape rule)", op.location)
    if entry.shape_rule is None:
        raise NNEFXError(f"operation '{op.op}' has no shape rule yet", op.location)
    tensors = graph.tensors
    # (plain loops: this runs once per operation of every document)
    args = [tensors[v].shape if type(v) is str else _input_shape(graph, v) for v in op.inputs.values()]
    for a in args:
        if a is None or type(a) is not tuple and _unknown(a):
            for n in outs:
                _set(graph, n, None, op)
            return
    attribs = op.attribs
    if "body" in attribs and "body_shapes" in entry.extra.get("runtime_keywords", ()) \
            and attribs["body"] in graph.subgraphs:
        from .tract_scan import body_shapes_hook

        attribs = {**attribs, "body_shapes": body_shapes_hook(graph)}
    if any(_symbolic(a) for a in args) or any(_symbolic(v) for v in attribs.values() if isinstance(v, (list, tuple))):
        # symbols first; a rule that cannot decide with them (UnknownDim, or any failure)
        # is run again with the symbolic extents unknown (None): unknown, never a wrong number
        try:
            result = _checked_result(entry.infer(args, attribs, op.dtype), outs)
        except Exception:
            args = [_unsymbolic(a) for a in args]
            attribs = {k: _unsymbolic(v) if isinstance(v, (list, tuple)) else v for k, v in attribs.items()}
            if any(_unknown_attr(v) for v in attribs.values()):
                # an attribute itself is symbolic (reshape to [B, 4]): nothing to learn without it
                for n in outs:
                    _set(graph, n, None, op)
                return
        else:
            for names, shape in zip(outs, result, strict=False):
                _set(graph, names, shape, op)
            return
    try:
        result = entry.infer(args, attribs, op.dtype)
    except Undecided:  # a rule that cannot handle unknown extents defers
        for n in outs:
            _set(graph, n, None, op)
        return
    except NNEFXError as exc:
        if exc.location is None or exc.location.line is None and op.location is not None:
            exc.location = op.location
        raise
    if len(result) != len(outs):
        raise NNEFXError(f"shape rule of '{op.op}' returned {len(result)} results for {len(outs)} outputs",
                         op.location)
    for names, shape in zip(outs, result, strict=False):
        _set(graph, names, shape, op)


def _custom_primitive(graph: Graph, op: Operation, outs: list[Any], func: Callable[..., Any] | None) -> None:
    """Results of a declaration-only fragment: from the caller's shape function, else unknown."""
    args = [_input_shape(graph, v) for v in op.inputs.values()]
    if func is None or any(_unknown(a) for a in args):
        for n in outs:
            _set(graph, n, None, op)
        return
    try:
        result = func(*[_listed(a) for a in args], **dict(op.attribs))
    except Exception as exc:  # the user's function: any failure is a verdict on this invocation
        text = str(exc) or type(exc).__name__
        raise NNEFXError(f"shape function of '{op.op}' rejects its arguments: {text}", op.location) from None
    if not isinstance(result, tuple):
        result = (result,)
    if len(result) != len(outs):
        raise NNEFXError(f"shape function of '{op.op}' returned {len(result)} shapes for {len(outs)} results",
                         op.location)
    for names, shape in zip(outs, result, strict=True):
        _set(graph, names, _tupled(shape, op), op)


def _listed(shape: Any) -> Any:
    """A shape (or nested list of shapes) as lists, the official calling convention."""
    return [_listed(s) for s in shape] if isinstance(shape, list) else list(shape)


def _tupled(shape: Any, op: Operation) -> Any:
    if isinstance(shape, (list, tuple)) and all(isinstance(d, (list, tuple)) for d in shape) and shape:
        return [_tupled(s, op) for s in shape]
    if (not isinstance(shape, (list, tuple))
            or not all(hasattr(d, "__index__") and not isinstance(d, bool) and d >= 1 for d in shape)):
        raise NNEFXError(f"shape function of '{op.op}' returned {shape!r}, not a list of positive extents",
                         op.location)
    return tuple(d.__index__() for d in shape)


def _symbolic(v: Any) -> bool:
    if isinstance(v, Dim):
        return True
    if isinstance(v, (list, tuple)):
        return any(_symbolic(x) for x in v)
    return False


def _unknown_attr(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, (list, tuple)):
        return any(_unknown_attr(x) for x in v)
    return False


def _unsymbolic(v: Any) -> Any:
    if isinstance(v, Dim):
        return None
    if isinstance(v, list):
        return [_unsymbolic(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_unsymbolic(x) for x in v)
    return v


def _checked_result(result: Any, outs: list) -> tuple:
    """A symbolic run's result in the form ``_set`` takes, or an exception (then rerun)."""
    if not isinstance(result, tuple) or (len(outs) == 1 and _is_shape(result)):
        result = (result,)
    if len(result) != len(outs):
        raise ValueError("result count")
    for shape in result:
        for s in (shape if isinstance(shape, list) else [shape]):
            if s is not None and (not isinstance(s, (tuple, list)) or not _dims(s)):
                raise ValueError("invalid shape")
            for d in s or ():
                if isinstance(d, int) and d < 0:
                    raise ValueError("negative extent")
    return result


def _find(name: str) -> Any:
    """``registry.find`` (imported on first use: the registry imports the operator families)."""
    global _find
    from ..ops.registry import find

    _find = find
    return find(name)


def _dims(v: Any) -> bool:
    """Whether every item of ``v`` is an extent: None or an int that is not a bool (a plain
    loop, exact ``int`` first: it runs for every result shape)."""
    for d in v:
        if type(d) is not int and d is not None and (not isinstance(d, (int, Dim)) or isinstance(d, bool)):
            return False
    return True


def _is_shape(v: Any) -> bool:
    return isinstance(v, tuple) and _dims(v)


def _fmt(shape: tuple) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def check_assertions(graph: Graph) -> None:
    """The graph's symbol assertions that extents known at load already decide."""
    for a in graph.assertions:
        if a.holds({}) is False:
            raise NNEFXError(f"tract_assert '{a}' does not hold", a.loc)
