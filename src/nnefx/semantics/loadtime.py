"""Values tract's dialect knows when a model loads: integer tensors computed from shapes.

torch-to-nnef writes attributes that depend on an input's extents as tensors
(``tile(h0, repeats = [1, batch, 1])`` with ``batch`` sliced out of
``tract_core_shape_of(input)``); tract evaluates those sub-graphs while it loads (its
``TDim`` values, symbolic where a dimension is).  :func:`load_time_value` does the same for
the expander: the value of a tensor produced by ``tract_core_shape_of``, a ``constant`` or a
small set of index and integer operations over such values, as a numpy object array of
``int`` and :class:`nnefx.dims.Dim` items.  Anything else (a value that needs the inputs' data)
is a located error: the attribute cannot be decided before the model runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dims
from ..diagnostics import Location, NNEFXError
from ..graph import Graph, Operation

#: operations whose result is computed here from known values (their formal kernels index
#: and combine object arrays exactly: no floating point on the way)
_INDEXING = ("slice", "squeeze", "unsqueeze", "reshape", "concat", "stack", "copy", "transpose",
             "tract_core_gather")
_ARITHMETIC = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}
#: most nested producers followed for one value (a longer chain is refused, not walked)
MAX_DEPTH = 64


def load_time_value(graph: Graph, name: str, shape_of: Callable[[str], tuple | None], loc: Location | None,
                    _depth: int = 0) -> np.ndarray:
    """The value of tensor ``name`` as an object array (items ``int`` or ``Dim``)."""
    op = _producer(graph, name)
    why = f"'{name}' is computed at run time"
    if op is None or _depth > MAX_DEPTH:
        raise NNEFXError(f"{why}: tract's dialect needs its value when the model loads", loc)
    if op.op in ("tract_core_shape_of", "shape_of", "tensor_shape"):
        source = next(iter(op.inputs.values()))
        shape = shape_of(source) if isinstance(source, str) else np.shape(source)
        if shape is None or any(d is None for d in shape):
            raise NNEFXError(f"{why}: the shape of '{source}' is not known when the model loads", loc)
        return _objects(list(shape))
    if op.op == "constant":
        value = op.attribs.get("value")
        shape = op.attribs.get("shape") or []
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(v, (int, dims.Dim)) and not isinstance(v, bool) for v in items):
            raise NNEFXError(f"{why}: constant '{name}' is not an integer tensor", loc)
        count = int(np.prod(shape)) if shape else 1
        if len(items) == 1 and count != 1:
            items = items * count
        return _objects(items).reshape(shape)

    def value(v: Any) -> Any:
        if isinstance(v, str):
            return load_time_value(graph, v, shape_of, loc, _depth + 1)
        if isinstance(v, list):
            return [value(x) for x in v]
        if isinstance(v, (int, dims.Dim)) and not isinstance(v, bool):
            return _objects([v]).reshape(())
        raise NNEFXError(f"{why}: '{op.op}' reads a non-integer value", loc)

    if op.op in _INDEXING:
        from ..ops import registry

        args = [value(v) for v in op.inputs.values()]
        try:
            result = registry.get(op.op).kernel("formal")(*args, **op.attribs)
        except NNEFXError as exc:
            raise NNEFXError(f"{why}: '{op.op}' on its load-time value: {exc.message}", loc) from None
        return _objects(np.asarray(result, dtype=object).reshape(-1).tolist()).reshape(np.shape(result))
    if op.op in _ARITHMETIC:
        a, b = (value(v) for v in op.inputs.values())
        fn = _ARITHMETIC[op.op]
        a, b = np.broadcast_arrays(a, b)
        return _objects([fn(x, y) for x, y in zip(a.reshape(-1), b.reshape(-1), strict=True)]).reshape(a.shape)
    if op.op == "tract_core_cast" and str(op.attribs.get("to", "")).startswith(("i", "u", "tdim")):
        return value(next(iter(op.inputs.values())))
    raise NNEFXError(f"{why} by '{op.op}': tract's dialect needs its value when the model loads", loc)


def to_attribute(value: np.ndarray, want_array: bool) -> Any:
    """An attribute value from a load-time tensor: one item for ``integer``, a list for
    ``integer[]`` (a rank-0 or one-item tensor is one item of it)."""
    items = [v if isinstance(v, dims.Dim) else int(v) for v in value.reshape(-1)]
    if want_array:
        return items
    if len(items) != 1:
        raise ValueError(f"a tensor of {len(items)} items where one integer is declared")
    return items[0]


def _objects(items: list) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    for i, v in enumerate(items):
        out[i] = v if isinstance(v, dims.Dim) else int(v)
    return out


def _producer(graph: Graph, name: str) -> Operation | None:
    for op in reversed(graph.operations):
        if name in op.output_names():
            return op
    return None
