"""ONNX TopK (opset 11) as an operation of every element type: the ``k`` largest (or smallest)
items along ``axis``, largest first (smallest first), equal values in the order of their
indices, with their int64 indices — exact in the data's own element type.

The reader uses it for integer and boolean data, and for ``k = 0`` (empty results), where the
float ``top_k`` (NNEF extension: values ordered by their negation, ``k >= 1``) cannot answer:
negation neither holds an int64 beyond 2^53 exactly nor applies to unsigned or boolean values.
The order is ONNX's reference one: ascending by (value, index) — by (value, -index) for
``largest``, then reversed — with NaN above every number.
"""

from __future__ import annotations

import math

import numpy as np

from .._common import attr_error
from ..registry import define
from ._common import norm_axis

FAMILY = "onnx_top_k"

onnx_top_k = define("onnx_top_k", FAMILY, """
fragment onnx_top_k<?>( input: tensor<?>, k: integer, axis: integer = -1, largest: logical = true )
-> ( values: tensor<?>, indices: tensor<integer> );
""", domain="onnx", generic=True, doc="ONNX TopK: the k largest (smallest) along `axis`, sorted, equal values by "
                                      "index; int64 indices; k may be 0.")


def _geometry(shape, k: int, axis: int) -> tuple[int, tuple]:
    a = norm_axis("onnx_top_k", axis, len(shape))
    n = shape[a]
    if k < 0 or (n is not None and k > n):
        raise attr_error("onnx_top_k", "k", k, f"must be in [0, {n}] (the extent of axis {a})")
    out = list(shape)
    out[a] = k
    return a, tuple(out)


@onnx_top_k.shape
def _top_k_shape(input, k=1, axis=-1, largest=True, dtype=None):
    _, out = _geometry(tuple(input), k, axis)
    return out, out


@onnx_top_k.etypes
def _top_k_etypes(input, k=1, axis=-1, largest=True):
    return input, "i64"


def _key(v, j: int, largest: bool) -> tuple:
    """The ascending sort key of item ``v`` at index ``j`` (NaN above every number)."""
    if isinstance(v, float) and math.isnan(v):
        return (1, 0, -j if largest else j)
    return (0, v, -j if largest else j)


@onnx_top_k.formal
def _top_k_formal(input, k=1, axis=-1, largest=True, dtype=None):
    """Per line along the axis: indices sorted by (value, index) — (value, -index) then reversed
    for ``largest`` — with values compared as Python numbers (no overflow, no rounding)."""
    x = np.asarray(input)
    a, out_shape = _geometry(x.shape, k, axis)
    values = np.empty(out_shape, x.dtype)
    indices = np.empty(out_shape, np.int64)
    for rest in np.ndindex(x.shape[:a] + x.shape[a + 1:]):
        line = [x[rest[:a] + (j,) + rest[a:]].item() for j in range(x.shape[a])]
        order = sorted(range(len(line)), key=lambda j: _key(line[j], j, largest))
        if largest:
            order.reverse()
        for t, j in enumerate(order[:k]):
            values[rest[:a] + (t,) + rest[a:]] = x[rest[:a] + (j,) + rest[a:]]
            indices[rest[:a] + (t,) + rest[a:]] = j
    return values, indices


@onnx_top_k.fast
def _top_k_fast(input, k=1, axis=-1, largest=True, dtype=None):
    x = np.asarray(input)
    a, _ = _geometry(x.shape, k, axis)
    index = np.indices(x.shape, sparse=True)[a] if x.ndim else np.zeros((), np.int64)
    index = np.broadcast_to(-index if largest else index, x.shape)
    order = np.lexsort((index, x), axis=a)  # by value, then by (signed) index; NaN sorts last
    if largest:
        order = np.flip(order, a)
    idx = np.take(order, np.arange(k), axis=a)
    return np.take_along_axis(x, idx, axis=a), idx.astype(np.int64)
