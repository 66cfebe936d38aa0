"""How NNEF operations are lowered onto the "numpy-style" formats, decided once for all.

The IR v11 and ONNX writers meet the same differences between NNEF and their formats:
NNEF broadcasts from dimension 0 where both formats broadcast from the right, NNEF's
padding may be negative (it crops), NNEF borders include 'reflect-even', NNEF ``round``
breaks ties upwards and ``cast`` of scalars to integers floors, and many NNEF element-wise
operations are compounds (``rcp``, ``silu``, ``log2``, ...) a format may or may not have.
The functions here decide what NNEF means in each case, once, and reach the format only
through a small **spelling** interface each writer's ``ExportContext`` provides:

``dims(v)`` / ``shape(v)``
    a value's dimensions (``None`` where unknown) / static ones;
``type_of(v)``, ``nnef_type(name)``, ``LOGICAL``, ``is_float(t)``
    the format's element types, opaque here;
``live_data(v)``
    load-time data of a literal or a variable/constant not yet written, else ``None``;
``data_ref(v, arr, t)``
    ``arr`` (``v``'s data, possibly reshaped) as a format value;
``const(arr, t)``, ``ints(values)``, ``ref(v)``
    constants and values;
``spell(kind, refs, shape, t, **attrs)``
    one element-wise operation named by its NNEF name (``add``, ``floor``, ``not``, ...);
    returns ``None`` when the format has no single form for it, and the lowering below
    writes it through its NNEF definition instead (:data:`DEFINITIONS`);
``reshape_value``, ``unsqueeze``, ``slice_value``, ``pad_value``, ``convert``
    the structural operations with the format's own attributes.

Everything a writer does beyond that interface is its spelling of one operation (a
convolution's attributes, a layer's version), kept in the family modules
(:mod:`nnefx.formats.families`).  Decisions made here, for every format:

* **Negative padding** crops (NNEF operators §4.5 ``pad``, §4.3 windowed operations: a
  negative padding removes elements): :func:`pad` slices the input first, then pads the rest.
* **Rounding** is ``floor(x) + (x - floor(x) >= 0.5)`` (NNEF ``round``: ties upwards), exact
  where ``floor(x + 0.5)`` is not (``x + 0.5`` itself may round).
* **Casts** of floating values to integers floor first (nnefx's ``cast`` rounds scalars
  down, while both formats' conversions truncate toward zero).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...graph import Operation
from .attrs import window_padding

#: Element-wise NNEF operations the lowering knows by name: binary ones broadcast.
BINARY = ("add", "sub", "mul", "div", "pow", "min", "max", "lt", "gt", "le", "ge", "eq", "ne", "and", "or",
          "mod")
#: Those whose result is logical.
LOGICAL_RESULT = frozenset({"lt", "gt", "le", "ge", "eq", "ne", "and", "or", "not"})


def out(op: Operation, k: int = 0) -> str:
    """Name of output ``k`` of ``op``."""
    return op.output_names()[k]


def first_input(op: Operation, *names: str) -> Any:
    """The first of ``names`` that ``op`` has as an input (parameter names differ by version)."""
    for n in names:
        if n in op.inputs:
            return op.inputs[n]
    raise KeyError(names[0])


def static(ctx: Any, dims: Sequence[Any]) -> tuple:
    """``dims`` as ints; an unknown one is refused (the operation needs it)."""
    if any(d is None for d in dims):
        raise ctx.fail(f"dims {list(dims)} are not static here; give the input shapes when loading")
    return tuple(int(d) for d in dims)


def broadcast_dims(a: Sequence[Any], b: Sequence[Any]) -> tuple:
    """numpy's broadcast of two shapes that may hold ``None`` (unknown) dims: a known dim
    wins over an unknown one (the operation's own shape rule has checked them)."""
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out_dims = []
    for x, y in zip(a, b, strict=True):
        if x == 1:
            out_dims.append(y)
        elif y == 1:
            out_dims.append(x)
        else:
            out_dims.append(x if x is not None else y)
    return tuple(out_dims)


# --- operands -----------------------------------------------------------------------------------

def literal_type(ctx: Any, op: Operation, values: Sequence[Any]) -> Any:
    """Element type for literal operands: that of the first tensor operand, else the op's."""
    for v in values:
        if isinstance(v, str):
            return ctx.type_of(v)
    return ctx.nnef_type(op.dtype)


def aligned(ctx: Any, value: Any, rank: int, etype: Any = None, *, trim: bool = False) -> Any:
    """``value`` with trailing unit dims up to ``rank``: NNEF broadcasting (from dimension 0)
    spelled for a format that broadcasts from the right.  With ``trim`` (another operand
    has the full rank), load-time data of rank ``rank`` also loses its leading unit dims,
    which add nothing to a right-aligned broadcast (:func:`without_leading_units`)."""
    data = ctx.live_data(value)
    if data is not None:
        arr = np.asarray(data)
        reshaped = 0 < arr.ndim < rank
        if reshaped:
            arr = arr.reshape(arr.shape + (1,) * (rank - arr.ndim))
        elif trim and arr.ndim == rank:
            arr = without_leading_units(arr, 0)
            reshaped = arr.ndim < rank
        return ctx.data_ref(value, arr, etype, reshaped)
    ref = ctx.ref(value)
    dims = ctx.dims(ref)
    if 0 < len(dims) < rank:
        return ctx.unsqueeze(ref, list(range(len(dims), rank)), tuple(dims) + (1,) * (rank - len(dims)))
    return ref


def operands(ctx: Any, op: Operation, values: Sequence[Any], etype: Any = None) -> list[Any]:
    """The tensor/literal operands of one NNEF-broadcasting operation, aligned.  Where the
    format's context asks for it (``TRIMS_LEADING_UNITS``) and a run-time operand has the
    full rank, load-time operands drop their leading unit dims: ``[1, 1, C]`` becomes
    ``[C]``, the form engines' fusions match (a layer norm's scale, a product's bias)."""
    rank = max((len(ctx.dims(v)) if isinstance(v, str) else np.ndim(v)) for v in values)
    t = etype if etype is not None else literal_type(ctx, op, values)
    trim = getattr(ctx, "TRIMS_LEADING_UNITS", False) and any(
        isinstance(v, str) and ctx.live_data(v) is None and len(ctx.dims(v)) == rank for v in values)
    return [aligned(ctx, v, rank, None if isinstance(v, str) else t, trim=trim) for v in values]


def without_leading_units(arr: np.ndarray, keep: int) -> np.ndarray:
    """``arr`` without its leading unit dims, keeping at least ``keep`` dims (a view)."""
    k = 0
    while arr.ndim - k > keep and arr.shape[k] == 1:
        k += 1
    return arr.reshape(arr.shape[k:]) if k else arr


def scalar(ctx: Any, v: float, etype: Any = None) -> Any:
    """A rank-0 constant of the format's type ``etype`` (default: NNEF scalar)."""
    return ctx.const(np.asarray(v), etype if etype is not None else ctx.nnef_type("scalar"))


def literal(ctx: Any, op: Operation, name: str, default: float | None = None) -> float:
    """Attribute (or literal input) ``name`` of ``op`` as a float; a tensor there has no
    attribute form (``ctx.fallback``: a compound is then written through its definition)."""
    v = op.attribs.get(name, op.inputs.get(name, default))
    if v is None or isinstance(v, str):
        raise ctx.fallback(f"'{name}' is not a literal")
    return float(v)


def is_zero(ctx: Any, value: Any) -> bool:
    """``value`` is load-time data that is zero everywhere (a bias that need not be added)."""
    data = ctx.live_data(value)
    return data is not None and not np.any(np.asarray(data) != 0)


def reshape(ctx: Any, value: Any, shape: tuple) -> Any:
    """``value`` reshaped to a static ``shape`` (load-time data reshaped directly)."""
    data = ctx.live_data(value)
    if data is not None:
        return ctx.data_ref(value, np.asarray(data).reshape(shape), None, True)
    ref = ctx.ref(value)
    if tuple(ctx.dims(ref)) == tuple(shape):
        return ref
    return ctx.reshape_value(ref, tuple(shape))


# --- element-wise, through definitions where the format has no form -------------------------------

def binop(ctx: Any, kind: str, a: Any, b: Any, **attrs: Any) -> Any:
    """A numpy-broadcasting element-wise operation named by NNEF (``add``, ``lt``, ...)."""
    ra, rb = ctx.ref(a), ctx.ref(b)
    shape = broadcast_dims(ctx.dims(ra), ctx.dims(rb))
    t = ctx.LOGICAL if kind in LOGICAL_RESULT else ctx.type_of(ra)
    got = ctx.spell(kind, [ra, rb], shape, t, **attrs)
    if got is None:
        got = _definition(ctx, kind, [ra, rb])
    return got


def unop(ctx: Any, kind: str, a: Any, **attrs: Any) -> Any:
    """A unary element-wise operation named by NNEF (``floor``, ``rcp``, ``silu``, ...): the
    format's own form, else written through its NNEF definition (:data:`DEFINITIONS`)."""
    ra = ctx.ref(a)
    if kind == "round":
        return round_half_up(ctx, ra)
    t = ctx.LOGICAL if kind in LOGICAL_RESULT else ctx.type_of(ra)
    got = ctx.spell(kind, [ra], ctx.dims(ra), t, **attrs)
    if got is None:
        got = _definition(ctx, kind, [ra], **attrs)
    return got


def _definition(ctx: Any, kind: str, refs: list[Any], **attrs: Any) -> Any:
    if kind not in DEFINITIONS:
        raise ctx.fail(f"'{kind}' has no {ctx.FORMAT} form")
    return DEFINITIONS[kind](ctx, *refs, **attrs)


def _c(ctx: Any, x: Any, v: float) -> Any:
    return scalar(ctx, v, ctx.type_of(x))


#: NNEF compounds as their definitions (NNEF operators §4.2 element-wise, §4.9.1 activations),
#: for the formats that have no single form of them.
DEFINITIONS: dict[str, Callable[..., Any]] = {
    "rcp": lambda ctx, x: binop(ctx, "div", _c(ctx, x, 1.0), x),
    "sqr": lambda ctx, x: binop(ctx, "mul", x, x),
    "rsqrt": lambda ctx, x: (unop(ctx, "rcp", unop(ctx, "sqrt", x)) if ctx.spells("rcp")
                             else binop(ctx, "div", _c(ctx, x, 1.0), unop(ctx, "sqrt", x))),
    "rsqr": lambda ctx, x: binop(ctx, "pow", x, _c(ctx, x, -2.0)),
    "log2": lambda ctx, x: binop(ctx, "div", unop(ctx, "log", x), _c(ctx, x, math.log(2.0))),
    "gelu": lambda ctx, x: binop(ctx, "mul", x, unop(ctx, "sigmoid", binop(ctx, "mul", x, _c(ctx, x, 1.702)))),
    "silu": lambda ctx, x: binop(ctx, "mul", x, unop(ctx, "sigmoid", x)),
    "softabs": lambda ctx, x, epsilon: unop(ctx, "sqrt", binop(ctx, "add", binop(ctx, "mul", x, x),
                                                                _c(ctx, x, epsilon))),
    "ne": lambda ctx, a, b: unop(ctx, "not", binop(ctx, "eq", a, b)),
}


def round_half_up(ctx: Any, x: Any) -> Any:
    """NNEF ``round``: ``floor(x + 0.5)``, ties upwards, written as ``f + (x - f >= 0.5)`` with
    ``f = floor(x)``: ``x - f`` is exact, where ``x + 0.5`` may itself round (0.49999997)."""
    t = ctx.type_of(x)
    f = unop(ctx, "floor", x)
    up = binop(ctx, "ge", binop(ctx, "sub", x, f), _c(ctx, x, 0.5))
    return binop(ctx, "add", f, ctx.convert(up, t))


def cast(ctx: Any, x: Any, target: Any, *, floor: bool = True) -> Any:
    """``x`` converted to ``target``; floating values going to integers are floored first
    (nnefx's ``cast`` rounds scalars down; the formats' conversions truncate toward zero)."""
    ra = ctx.ref(x)
    if floor and ctx.is_float(ctx.type_of(ra)) and ctx.is_integer(target):
        ra = unop(ctx, "floor", ra)
    return ctx.convert(ra, target)


# --- padding and windows --------------------------------------------------------------------------

def crop(ctx: Any, x: Any, pads: Sequence[tuple[int, int]]) -> tuple[Any, list[tuple[int, int]]]:
    """Negative paddings applied as a slice (they remove elements, NNEF ``pad``); returns the
    value and the paddings left, all non-negative."""
    axes, starts, ends = [], [], []
    for k, (p, q) in enumerate(pads):
        if p < 0 or q < 0:
            axes.append(k)
            starts.append(max(-p, 0))
            ends.append(-max(-q, 0) if q < 0 else 2 ** 62)
    if not axes:
        return x, list(pads)
    dims = list(ctx.dims(x))
    for a, s, e in zip(axes, starts, ends, strict=True):
        if dims[a] is not None:
            dims[a] = (dims[a] if e > 0 else dims[a] + e) - s
    y = ctx.slice_value(x, starts, ends, axes, tuple(dims))
    return y, [(max(p, 0), max(q, 0)) for p, q in pads]


def pad(ctx: Any, x: Any, pads: Sequence[tuple[int, int]], border: str, value: float = 0.0) -> Any:
    """A value equal to NNEF ``pad(x, pads, border, value)`` over the leading dims of ``x``
    (missing trailing ones unpadded): negative paddings crop, the rest is the format's pad
    in the border's mode ('constant'/'ignore' pad with ``value``)."""
    x = ctx.ref(x)
    dims = ctx.dims(x)
    pads = [(int(p), int(q)) for p, q in pads] + [(0, 0)] * (len(dims) - len(pads))
    x, pads = crop(ctx, x, pads)
    if not any(p or q for p, q in pads):
        return x
    return ctx.pad_value(x, pads, "constant" if border == "ignore" else border, value)


def window_input(ctx: Any, x: Any, pads: Sequence[tuple[int, int]], border: str, implicit: Sequence[str]
                 ) -> tuple[Any, list[tuple[int, int]]]:
    """The input of a windowed operation over dims 2.. and the spatial padding left to the
    format's own window: negative padding crops (a slice, NNEF's meaning in every format);
    padding in a border the format's window does not reproduce (``implicit`` lists those it
    does: a convolution's or average pool's zeros are 'constant'/'ignore', a max pool never
    reads its padding: 'ignore' only) is written explicitly first."""
    full = [(0, 0), (0, 0)] + [(int(p), int(q)) for p, q in pads]
    xin, full = crop(ctx, ctx.ref(x), full)
    spatial = full[2:]
    if border not in implicit and any(p or q for p, q in spatial):
        return pad(ctx, xin, full, border), [(0, 0)] * len(spatial)
    return xin, spatial


def window(ctx: Any, op: Operation, x: Any, n: int, size: list[int], transposed: bool = False
           ) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Explicit padding (negative where it crops), stride and dilation of a windowed op over
    the last ``n`` dims (:func:`~.attrs.window_padding`); automatic padding needs static
    extents, fixed padding does not."""
    return window_padding(op, n, size, lambda: static(ctx, ctx.dims(x)[-n:]),
                          (lambda: static(ctx, ctx.dims(out(op))[-n:])) if transposed else None)


def bias_add(ctx: Any, op: Operation, y: Any) -> Any:
    """``y + bias`` of a convolution-like op (NNEF broadcasting), nothing for a zero bias."""
    bias = op.inputs.get("bias", 0.0)
    if is_zero(ctx, bias):
        return y
    return binop(ctx, "add", y, aligned(ctx, bias, len(ctx.dims(y)), ctx.type_of(y)))


def channel_vector(ctx: Any, value: Any, channels: int | None, etype: Any) -> Any | None:
    """A per-channel parameter (``[1, C]``, ``[C]`` or one value) as a 1-D ``[C]`` value of
    ``etype``, or None when it is not per-channel load-time data or a ``[C]``-sized tensor."""
    data = ctx.live_data(value)
    if data is not None:
        if channels is None:
            return None
        arr = np.asarray(data)
        if arr.size == channels:
            return ctx.const(arr.reshape(channels), etype)
        if arr.size == 1:
            return ctx.const(np.full((channels,), arr.reshape(-1)[0]), etype)
        return None
    dims = ctx.dims(value)
    if channels is not None and None not in dims and int(np.prod(dims, dtype=np.int64)) == channels and \
            (len(dims) <= 1 or dims[1] == channels):
        return reshape(ctx, value, (channels,))
    return None
