"""Helpers shared by the tract families: argument coercion and numpy-style broadcasting."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import etypes
from .._common import attr_error, op_error

DOMAIN = "tract"


def int_value(op: str, name: str, value: Any) -> int:
    """An integer attribute that tract also accepts as a one-element tensor (a run-time value
    such as ``range``'s bounds or ``topk``'s ``k``)."""
    if isinstance(value, (bool, np.bool_)):
        raise attr_error(op, name, value, "is not an integer")
    if isinstance(value, (int, np.integer)):
        return int(value)
    arr = np.asarray(value)
    if arr.size != 1 or arr.dtype.kind not in "iu":
        raise attr_error(op, name, value, "is not an integer (or a one-element integer tensor)")
    return int(arr.reshape(-1)[0])


def known_int(value: Any) -> int | None:
    """``value`` as an int when it is one now (shape rules), else None (a run-time value)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    return None


def check_axis(op: str, axis: Any, rank: int, name: str = "axis", *, extra: int = 0) -> int:
    """``axis`` checked to lie in ``[0, rank + extra)``: tract reads axes as unsigned integers
    (``usize``), so a negative axis is an error there too."""
    a = known_int(axis)
    n = rank + extra
    if a is None or not 0 <= a < n:
        raise attr_error(op, name, axis, f"is not an axis in 0..{n - 1}")
    return a


def wrap_int(v: int, dtype: np.dtype) -> int:
    """The Python integer ``v`` wrapped around into the range of integer ``dtype`` (two's complement)."""
    width = 1 << (8 * dtype.itemsize)
    w = int(v) % width
    return w - width if dtype.kind == "i" and w >= width // 2 else w


def numpy_broadcast(op: str, *shapes: tuple) -> tuple:
    """The numpy broadcast of shapes (aligned from the last dimension); None = unknown extent."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(rank):
        dims = [s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise op_error(op, f"shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast")
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def etype_of(array: np.ndarray) -> str:
    return etypes.from_numpy(np.asarray(array).dtype)


#: tract's datum-type names (``FromStr for DatumType`` in ``data/src/datum.rs``, both spellings
#: it accepts) -> nnefx element types.  ``TDim`` (a symbolic dimension) is an i64 at run time.
TRACT_DATUM_TYPES = {
    **{name: name for name in ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64")},
    **{name.upper(): name for name in ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64")},
    "Bool": "bool", "bool": "bool", "String": "string", "string": "string", "TDim": "i64", "tdim": "i64",
    "ComplexF32": "c64", "complexf32": "c64", "ComplexF64": "c128", "complexf64": "c128",
}


def parse_etype(op: str, name: str, value: Any) -> str:
    """A tract datum-type name (``f32``, ``I64``, ``bool``, ``TDim``, ...) as an nnefx element type."""
    if not isinstance(value, str):
        raise attr_error(op, name, value, "is not a string")
    try:
        return TRACT_DATUM_TYPES[value]
    except KeyError:
        raise attr_error(op, name, value, "is not a tract datum type (data/src/datum.rs: "
                                          "f32, i64, bool, TDim, ...)") from None
