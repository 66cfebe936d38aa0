"""Reduce operators: ``cvm_sum``, ``cvm_max`` (the CVM runtime's "Operator Math Formalization", "Reduce Operators").

Axis handling follows the runtime: each axis ``a < 0`` becomes ``a + N``, must lie in
``[0, N)`` and may not repeat.  The reduced set ``R`` is every axis when ``axis = ()``
(whatever ``exclude`` says), else ``axis`` or, with ``exclude``, its complement.  ``R`` = all
gives shape ``(1,)`` (``(1,)*N`` with keepdims); ``R`` empty gives ``Y = X``.
"""

from __future__ import annotations

import itertools

import numpy as np

from ._int import (
    as_int32,
    bitlen,
    check_bool,
    check_ints,
    cost_rule,
    cvm_define,
    normalize_axes,
    precision_rule,
    same_precision,
    size_of,
    wrap32,
    wrap32_int,
)

_PARAMS = ("x: tensor<integer>, axis: integer[] = [], keepdims: logical = false, "
           "exclude: logical = false")


def reduced_axes(op: str, shape, axis, keepdims, exclude) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(sorted reduced axes R, output shape) after validating the attributes."""
    n = len(shape)
    axes = check_ints(op, "axis", axis)
    check_bool(op, "keepdims", keepdims)
    check_bool(op, "exclude", exclude)
    norm = normalize_axes(op, "axis", axes, n)
    if not axes:
        r = tuple(range(n))
    elif exclude:
        r = tuple(i for i in range(n) if i not in norm)
    else:
        r = tuple(sorted(norm))
    if len(r) == n:
        out = (1,) * n if keepdims else (1,)
    elif keepdims:
        out = tuple(1 if i in r else d for i, d in enumerate(shape))
    else:
        out = tuple(d for i, d in enumerate(shape) if i not in r)
    return r, out


def _shape(name):
    def rule(x, axis=(), keepdims=False, exclude=False):
        return reduced_axes(name, tuple(x), axis, keepdims, exclude)[1]
    return rule


def _formal_reduce(name, func, x, axis, keepdims, exclude):
    """Y[d_I] = REDUCE_FUNC({X[d] | d agrees with d_I on the kept axes}), loops as in the seed."""
    x = as_int32(x, name, "x")
    r, out_shape = reduced_axes(name, x.shape, axis, keepdims, exclude)
    kept = [i for i in range(x.ndim) if i not in r]
    y = np.zeros(out_shape, np.int32)
    flat = y.reshape(-1)
    for k, kept_index in enumerate(itertools.product(*(range(x.shape[i]) for i in kept))):
        z = []
        for red_index in itertools.product(*(range(x.shape[i]) for i in r)):
            d = [0] * x.ndim
            for i, v in zip(kept, kept_index, strict=True):
                d[i] = v
            for i, v in zip(r, red_index, strict=True):
                d[i] = v
            z.append(int(x[tuple(d)]))
        flat[k] = func(z)
    return y


def _fast_reduce(name, npfunc, x, axis, keepdims, exclude):
    x = as_int32(x, name, "x")
    r, out_shape = reduced_axes(name, x.shape, axis, keepdims, exclude)
    if not r:
        return x.reshape(out_shape).copy()
    return wrap32(npfunc(x.astype(np.int64), axis=r)).reshape(out_shape)


# --- sum ----------------------------------------------------------------------------------------

SUM = cvm_define("sum", "integer.reduce", _PARAMS,
                 doc="Sum over the reduced axes; int32 accumulation (wraps like the runtime).")
SUM.shape(_shape("cvm_sum"))


@SUM.formal
def sum_formal(x, axis=(), keepdims=False, exclude=False):
    return _formal_reduce("cvm_sum", lambda z: wrap32_int(sum(z)), x, axis, keepdims, exclude)


@SUM.fast
def sum_fast(x, axis=(), keepdims=False, exclude=False):
    return _fast_reduce("cvm_sum", np.sum, x, axis, keepdims, exclude)


@precision_rule(SUM)
def sum_precision(precs, shapes, out_shapes, **attribs):
    """p0 + bitlen(size(X) / size(Y)): one bit per doubling of the summed count."""
    return [precs[0] + bitlen(size_of(shapes[0]) // size_of(out_shapes[0]))]


@cost_rule(SUM)
def sum_cost(shapes, out_shapes, **attribs):
    # Runtime: size(X)/size(Y) per output element (docs table says x3*x4 -- it differs).
    return size_of(shapes[0]) // size_of(out_shapes[0])


# --- max ----------------------------------------------------------------------------------------

MAX = cvm_define("max", "integer.reduce", _PARAMS,
                 doc="Maximum over the reduced axes (runtime quirk with axis=(): see kernel).")
MAX.shape(_shape("cvm_max"))
precision_rule(MAX)(same_precision)


def _zero_start(axis, exclude) -> bool:
    # DEPARTURE (runtime, cvm.md §3.3.1, fixture ex05): with axis=() and exclude=False the
    # runtime starts the accumulator at 0, so the result is max(0, max X).  Listing every
    # axis explicitly, or exclude=True with axis=(), gives the true maximum.
    return len(tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)) == 0 and not exclude


@MAX.formal
def max_formal(x, axis=(), keepdims=False, exclude=False):
    start = [0] if _zero_start(axis, exclude) else []
    return _formal_reduce("cvm_max", lambda z: max(start + z), x, axis, keepdims, exclude)


@MAX.fast
def max_fast(x, axis=(), keepdims=False, exclude=False):
    y = _fast_reduce("cvm_max", np.max, x, axis, keepdims, exclude)
    return np.maximum(y, 0) if _zero_start(axis, exclude) else y
