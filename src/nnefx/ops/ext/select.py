"""Selections whose result size depends on the data: nonzero, compress, unique.

Part of the nnefx extension operations (see :mod:`nnefx.ops.ext`).  Their shape rules give
the data-dependent extents as unknown (``None``) — a number would be a guess — and the
session takes the shapes the kernels return (as for ``non_max_suppression``).  The formal
kernels follow the definitions element by element; the fast ones are numpy's.

Specifications: ONNX operator docs: NonZero-13, Compress-11, Unique-11.
"""

from __future__ import annotations

import numpy as np

from ...diagnostics import NNEFXError
from ..registry import define

# --- nonzero -------------------------------------------------------------------------------------

nonzero_op = define("nonzero", "ext", """
fragment nonzero<?>( input: tensor<?> ) -> ( output: tensor<integer> );
""", domain="nnefx", generic=True, doc="The indices of the non-zero items, one row per axis, in row-major "
                                      "order (ONNX NonZero): shape [rank, count].")


@nonzero_op.shape
def _nonzero_shape(x, dtype=None):
    return (len(x), None)


@nonzero_op.formal
def _nonzero_formal(x, dtype=None):
    x = np.asarray(x)
    found = [index for index in np.ndindex(*x.shape) if x[index] != 0]
    out = np.zeros((x.ndim, len(found)), np.int64)
    for k, index in enumerate(found):
        out[:, k] = index
    return out


@nonzero_op.fast
def _nonzero_fast(x, dtype=None):
    x = np.asarray(x)
    if x.ndim == 0:
        return np.zeros((0, int(x != 0)), np.int64)
    return np.asarray(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


# --- compress ------------------------------------------------------------------------------------

compress_op = define("compress", "ext", """
fragment compress<?>( input: tensor<?>, condition: tensor<logical>, axis: integer ) -> ( output: tensor<?> );
""", domain="nnefx", generic=True, doc="The slices along axis whose condition is true (ONNX Compress with an "
                                      "axis); a condition shorter than the axis drops the slices past its end.")


@compress_op.shape
def _compress_shape(x, c, axis=0, dtype=None):
    if len(c) != 1:
        raise NNEFXError(f"compress: the condition must be 1-D, has rank {len(c)}")
    if not 0 <= axis < len(x):
        raise NNEFXError(f"compress: axis {axis} is out of range for rank {len(x)}")
    if c[0] is not None and x[axis] is not None and c[0] > x[axis]:
        raise NNEFXError(f"compress: the condition has {c[0]} items, more than the {x[axis]} slices of axis {axis}")
    return tuple(x[:axis]) + (None,) + tuple(x[axis + 1:])


def _check_condition(x: np.ndarray, c: np.ndarray, axis: int) -> None:
    if c.shape[0] > x.shape[axis]:
        raise NNEFXError(f"compress: the condition has {c.shape[0]} items, more than the {x.shape[axis]} slices "
                         f"of axis {axis}")


@compress_op.formal
def _compress_formal(x, c, axis=0, dtype=None):
    x, c = np.asarray(x), np.asarray(c).astype(bool)
    _check_condition(x, c, axis)
    picked = [k for k in range(c.shape[0]) if c[k]]
    shape = x.shape[:axis] + (len(picked),) + x.shape[axis + 1:]
    out = np.empty(shape, x.dtype)
    for j, k in enumerate(picked):
        out[(slice(None),) * axis + (j,)] = x[(slice(None),) * axis + (k,)]
    return out


@compress_op.fast
def _compress_fast(x, c, axis=0, dtype=None):
    x, c = np.asarray(x), np.asarray(c).astype(bool)
    _check_condition(x, c, axis)
    return np.compress(c, x, axis=axis)


# --- unique --------------------------------------------------------------------------------------

unique_op = define("unique", "ext", """
fragment unique<?>( input: tensor<?>, axis: integer, sorted: logical = true )
    -> ( output: tensor<?>, indices: tensor<integer>, inverse: tensor<integer>, counts: tensor<integer> );
""", domain="nnefx", generic=True, doc="The distinct slices along axis (ONNX Unique with an axis; flatten first "
                                      "for none): sorted ascending or in order of first occurrence, the index of "
                                      "each one's first occurrence, each slice's position in the output, counts.")


@unique_op.shape
def _unique_shape(x, axis=0, sorted=True, dtype=None):
    if not 0 <= axis < len(x):
        raise NNEFXError(f"unique: axis {axis} is out of range for rank {len(x)}")
    return tuple(x[:axis]) + (None,) + tuple(x[axis + 1:]), (None,), (x[axis],), (None,)


def sorted_by(keys: list[tuple]) -> list[int]:
    """Positions of ``keys`` in ascending (lexicographic) order."""
    return [k for _, k in sorted((key, k) for k, key in enumerate(keys))]


@unique_op.formal
def _unique_formal(x, axis=0, sorted=True, dtype=None):
    x = np.asarray(x)
    moved = np.moveaxis(x, axis, 0)
    firsts: list[int] = []
    keys: list[tuple] = []
    seen: dict[bytes, int] = {}
    inverse = []
    for k in range(moved.shape[0]):
        key = np.ascontiguousarray(moved[k]).tobytes()
        if key not in seen:
            seen[key] = len(firsts)
            firsts.append(k)
            keys.append(tuple(moved[k].reshape(-1).tolist()))
        inverse.append(seen[key])
    order = sorted_by(keys) if sorted else list(range(len(firsts)))
    position = {old: new for new, old in enumerate(order)}
    counts = [0] * len(firsts)
    for u in inverse:
        counts[u] += 1
    out = np.stack([moved[firsts[u]] for u in order]) if order else np.empty((0,) + moved.shape[1:], x.dtype)
    return (np.moveaxis(out, 0, axis).astype(x.dtype), np.array([firsts[u] for u in order], np.int64),
            np.array([position[u] for u in inverse], np.int64), np.array([counts[u] for u in order], np.int64))


@unique_op.fast
def _unique_fast(x, axis=0, sorted=True, dtype=None):
    x = np.asarray(x)
    if x.shape[axis] == 0:
        return _unique_formal(x, axis, sorted)
    out, first, inverse, counts = np.unique(x, axis=axis, return_index=True, return_inverse=True,
                                            return_counts=True)
    inverse = inverse.reshape(-1)
    if not sorted:  # numpy sorts: reorder by first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        out = np.take(out, order, axis=axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return out, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)
