"""Tensor-introducing operations (NNEF 1.0.5 §4.1) and ``update`` (§4.8).

The runtime session feeds ``external`` inputs, loads ``variable`` data and applies
``update`` itself (they are about *where* data comes from, not arithmetic), so the kernels
here only cover what is a pure function: filling a ``constant`` and the value side of
``update``.  Shape rules validate the attributes so every front-end gets the same errors.
"""

from __future__ import annotations

from .registry import define

external = define("external", "tensors", """
fragment external<? = scalar>( shape: integer[] ) -> ( output: tensor<?> );
""", generic=True)

variable = define("variable", "tensors", """
fragment variable<? = scalar>( shape: integer[], label: string ) -> ( output: tensor<?> );
""", generic=True)

constant = define("constant", "tensors", """
fragment constant<? = scalar>( shape: integer[], value: ?[] ) -> ( output: tensor<?> );
""", generic=True)

update = define("update", "tensors", """
fragment update<?>( variable: tensor<?>, value: tensor<?> ) -> ( result: tensor<?> );
""", generic=True)


# =============================================================================================
# Shape rules and kernels
# =============================================================================================

import math  # noqa: E402
import re  # noqa: E402

import numpy as np  # noqa: E402

from ._common import attr_error, op_error, storage_dtype  # noqa: E402

_LABEL = re.compile(r"[A-Za-z0-9_\-./\\]+")


def _check_shape(op: str, shape) -> tuple:
    shape = list(shape)
    for d in shape:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d <= 0:
            raise attr_error(op, "shape", shape, "must have positive integer items")
    return tuple(int(d) for d in shape)


@external.shape
def _external_shape(shape=(), **_):
    return _check_shape("external", shape)


@variable.shape
def _variable_shape(shape=(), label="", **_):
    if not isinstance(label, str) or not _LABEL.fullmatch(label):
        raise attr_error("variable", "label", label,
                         "must be a non-empty string of letters, digits and _ - . / \\")
    return _check_shape("variable", shape)


@constant.shape
def _constant_shape(shape=(), value=(), **_):
    shape = _check_shape("constant", shape)
    if any(not isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating)) for v in value):
        raise attr_error("constant", "value", list(value), "must hold numbers or logicals")
    n = len(list(value))
    if n not in (1, math.prod(shape)):
        raise attr_error("constant", "value", list(value),
                         f"must have 1 or {math.prod(shape)} items (the volume of shape {list(shape)})")
    return shape


def _constant_formal(shape=(), value=(), dtype="scalar", **_):
    """Row-major fill; a one-item ``value`` is repeated over the whole tensor."""
    shape = _constant_shape(shape, value)
    values = list(value)
    out = np.empty(shape, dtype=storage_dtype(dtype or "scalar"))
    for k, index in enumerate(np.ndindex(*shape)):
        out[index] = values[0] if len(values) == 1 else values[k]
    return out


def _constant_fast(shape=(), value=(), dtype="scalar", **_):
    shape = _constant_shape(shape, value)
    data = np.asarray(list(value), dtype=storage_dtype(dtype or "scalar"))
    if data.size == 1:
        return np.full(shape, data[0], dtype=data.dtype)
    return data.reshape(shape)


constant.formal(_constant_formal)
constant.fast(_constant_fast)


@update.shape
def _update_shape(variable, value, dtype=None):
    if any(a is not None and b is not None and a != b for a, b in zip(variable, value, strict=False)) \
            or len(variable) != len(value):
        raise op_error("update", f"updated shape {tuple(value)} does not equal the variable's shape "
                                 f"{tuple(variable)}")
    return tuple(b if b is not None else a for a, b in zip(variable, value, strict=True))


def _update_kernel(variable, value, dtype=None):
    """The value side of ``update``: ``result`` reads the new value (the session stores it)."""
    variable = np.asarray(variable)
    value = np.asarray(value, dtype=storage_dtype(dtype) if dtype else variable.dtype)
    _update_shape(variable.shape, value.shape)
    return value.copy()


update.formal(_update_kernel)
update.fast(_update_kernel)
