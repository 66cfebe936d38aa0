"""ONNX ReduceSum, ReduceProd, ReduceMax and ReduceMin (opset 18) of integer data as one
operation: NNEF's reductions hold ``scalar`` data, so an int64 sum beyond 2^24 (or a uint64 one)
would not survive them.

``onnx_reduce`` reduces ``axes`` keeping them with extent 1 (as NNEF's reductions do; the
reader squeezes them for ``keepdims = 0``) in the input's own integer type: sums and products
wrap in its width, as ONNX's reference computes them in numpy.  Over an empty set the result is
the operation's identity — 0, 1, and for the maximum (minimum) the type's lowest (highest) value,
as ONNX's ReduceMax/ReduceMin define it for integers.
"""

from __future__ import annotations

import math

import numpy as np

from .._common import attr_error, check_axes
from ..reduce import reduction_groups
from ..registry import define

FAMILY = "onnx_reduce"
_OPS = ("sum", "prod", "max", "min")

onnx_reduce = define("onnx_reduce", FAMILY, """
fragment onnx_reduce<?>( input: tensor<?>, axes: integer[], op: string ) -> ( output: tensor<?> );
""", domain="onnx", generic=True, doc="ONNX ReduceSum/ReduceProd/ReduceMax/ReduceMin of integer data (op = 'sum', "
                                      "'prod', 'max', 'min'): reduced axes kept with extent 1, integers wrap.")


def _check(shape, axes, op) -> tuple:
    if op not in _OPS:
        raise attr_error("onnx_reduce", "op", op, f"must be one of {', '.join(_OPS)}")
    axes = check_axes("onnx_reduce", axes, len(shape))
    return tuple(1 if k in axes else d for k, d in enumerate(shape))


@onnx_reduce.shape
def _reduce_shape(input, axes=(), op="sum", dtype=None):
    return _check(tuple(input), axes, op)


def _integers(input) -> np.ndarray:
    x = np.asarray(input)
    if x.dtype.kind not in "iu":
        raise attr_error("onnx_reduce", "input", str(x.dtype), "must be integer data")
    return x


def _identity(op: str, dtype: np.dtype) -> int:
    info = np.iinfo(dtype)
    return {"sum": 0, "prod": 1, "max": int(info.min), "min": int(info.max)}[op]


@onnx_reduce.formal
def _reduce_formal(input, axes=(), op="sum", dtype=None):
    """Per output item, the reduced items as Python integers (exact), wrapped once into the width."""
    x = _integers(input)
    out_shape = _check(x.shape, axes, op)
    bits = x.dtype.itemsize * 8
    signed = x.dtype.kind == "i"
    fold = {"sum": sum, "prod": math.prod, "max": max, "min": min}[op]
    out = np.empty(out_shape, x.dtype)
    for index, items in reduction_groups(x, axes):
        items = [int(v) for v in items]
        value = fold(items) if items else _identity(op, x.dtype)
        value %= 1 << bits  # wrap-around: the value modulo 2^bits, read back as signed where the type is
        if signed and value >= 1 << (bits - 1):
            value -= 1 << bits
        out[index] = value
    return out


@onnx_reduce.fast
def _reduce_fast(input, axes=(), op="sum", dtype=None):
    x = _integers(input)
    out_shape = _check(x.shape, axes, op)
    if not axes:
        return x.copy()
    if op in ("max", "min") and x.size == 0:
        return np.full(out_shape, _identity(op, x.dtype), x.dtype)
    fn = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[op]
    kw = {"dtype": x.dtype} if op in ("sum", "prod") else {}
    return fn(x, axis=tuple(axes), keepdims=True, **kw)
