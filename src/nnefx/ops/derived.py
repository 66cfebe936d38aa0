"""Formal kernels of compound operations, derived from their NNEF bodies.

A standard compound is *defined* by its body (NNEF spec §4 gives each compound as a
fragment over primitives; §2.3 "compound operations ... are defined in terms of other
operations").  So its formal kernel — the arbiter — need not be written a second time:
:func:`formal_from_body` runs the body itself.  For given argument shapes, data types and
attributes it writes a one-invocation NNEF document, compiles it with every compound
expanded down to primitives (the front-end's expander, so exactly what a lowering reader
gets) and runs the result on the formal backend, i.e. through the primitives' formal
kernels.  Compiled plans are kept per (shapes, types, attributes), bounded.

A compound keeps a hand-written formal kernel only where one is shown to be needed; each
such kernel says why next to it (see ``tests/test_ops_derived.py``, which checks that
every compound's formal kernel agrees with its body).

Layering: this module reaches *up* into the front-end and the runtime (imported when a
derived kernel first runs, not when the registry loads), because running the body is
what the front-end and the planner do; nothing below the registry imports it.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError
from ._common import float_type
from .signature import signature

#: Compiled bodies kept (per operation, shapes, types and attributes), least recently used out.
CACHE_SIZE = 256

_TYPE_OF = {"f": "scalar", "i": "integer", "u": "integer", "b": "logical"}


def _literal(value: Any) -> str:
    """``value`` as NNEF literal text (attributes and rank-0 tensor arguments): the graph
    builder's writer, so both spell values alike."""
    from ..io.builder import _literal as literal

    return literal(value, "derived kernel")


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *[_freeze(v) for v in value])
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, float):
        return ("float", value.hex() if math.isfinite(value) else repr(value))
    return (type(value).__name__, value)


class _Body:
    """One compiled body: the plan of a one-invocation document and its result names."""

    def __init__(self, op: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
        from ..runtime.session import Session
        from ..semantics.frontend import compile_document

        sig = signature(op.declaration)
        if sig is None:
            raise NNEFXError(f"operation '{op.name}': declaration unreadable, no body to run")
        lines: list[str] = []
        refs: list[str] = []
        self.feeds: list[tuple[str, int, int | None]] = []  # (name, argument, item)
        # an NNEF graph lists at least one input: when every argument is of rank 0, the first
        # one is fed as a rank-0 external instead of a literal
        all_scalars = all(np.asarray(item).ndim == 0 for value in args
                          for item in (value if isinstance(value, list) else [value]))
        for k, value in enumerate(args):
            items = value if isinstance(value, list) else [value]
            names = []
            for j, item in enumerate(items):
                arr = np.asarray(item)
                if arr.ndim == 0 and not (all_scalars and not self.feeds):
                    names.append(_literal(arr.item()))  # rank 0: a literal, as the front-end passes it
                    continue
                name = f"t{len(self.feeds)}"
                dtype = _TYPE_OF.get(arr.dtype.kind)
                if dtype is None:
                    raise NNEFXError(f"operation '{op.name}': argument of numpy type {arr.dtype} has no NNEF type")
                lines.append(f"{name} = external<{dtype}>(shape = {list(arr.shape)});")
                self.feeds.append((name, k, j if isinstance(value, list) else None))
                names.append(name)
            refs.append("[" + ", ".join(names) + "]" if isinstance(value, list) else names[0])
        generic = kwargs.get("dtype")
        attrs = [f"{k} = {_literal(v)}" for k, v in kwargs.items() if k != "dtype"]
        outs = [f"r{k}" for k in range(len(sig.results))]
        call = f"{op.name}<{generic}>" if generic and op.generic else op.name
        lines.append(f"{', '.join(outs)} = {call}({', '.join(refs + attrs)});")
        inputs = ", ".join(name for name, _, _ in self.feeds)
        text = ("version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"
                f"graph G( {inputs} ) -> ( {', '.join(outs)} )\n{{\n    " + "\n    ".join(lines) + "\n}\n")
        graph = compile_document(text, expand_all=True)
        if float_type() is np.float64:
            # a float64 operation: its body computes and keeps every scalar tensor in float64
            for tensor in graph.tensors.values():
                if tensor.dtype == "scalar" and tensor.etype is None:
                    tensor.etype = "f64"
        self.session = Session(graph, "formal")
        self.outs = outs
        self.array_results = [p.is_array for p in sig.results]

    def run(self, args: list[Any]) -> Any:
        feeds = {}
        for name, k, j in self.feeds:
            feeds[name] = np.asarray(args[k] if j is None else args[k][j])
        results = self.session.run(feeds)
        values = tuple(results[name] for name in self.outs)
        return values[0] if len(values) == 1 else values


def formal_from_body(op: Any) -> Any:
    """A formal kernel for compound ``op`` that runs its NNEF body through the primitives'
    formal kernels (see the module docstring)."""
    cache: OrderedDict[Any, _Body] = OrderedDict()

    sig = signature(op.declaration)
    params = sig.params if sig is not None else ()

    def kernel(*args: Any, **kwargs: Any) -> Any:
        if len(args) > sum(p.is_tensor for p in params):
            # called as kernels call each other: attributes by position, in declaration order
            kwargs = dict(kwargs)
            tensors = []
            for k, a in enumerate(args):
                if k < len(params) and not params[k].is_tensor:
                    kwargs[params[k].name] = a
                else:
                    tensors.append(a)
            args = tuple(tensors)
        args = list(args)
        key = (tuple(_arg_key(a) for a in args), tuple((k, _freeze(v)) for k, v in sorted(kwargs.items())),
               float_type())
        body = cache.get(key)
        if body is None:
            try:
                body = _Body(op, args, kwargs)
            except NNEFXError as exc:  # the synthetic document's position means nothing to a user
                raise NNEFXError(exc.message) from None
            cache[key] = body
            if len(cache) > CACHE_SIZE:
                cache.popitem(last=False)
        else:
            cache.move_to_end(key)
        try:
            return body.run(args)
        except NNEFXError as exc:
            raise NNEFXError(exc.message) from None

    kernel.__name__ = f"{op.name}_body"
    kernel.__doc__ = f"``{op.name}`` as its NNEF body, run through the primitives' formal kernels."
    kernel.derived = True  # type: ignore[attr-defined]
    return kernel


def _arg_key(a: Any) -> Any:
    if isinstance(a, list):
        return ("list", *[_arg_key(x) for x in a])
    arr = np.asarray(a)
    if arr.ndim == 0:  # rank 0 travels as a literal: its value is part of the document
        return ("literal", arr.dtype.str, _freeze(arr.item()))  # (the first of all-scalar arguments too: exact)
    return (arr.dtype.str, arr.shape)
