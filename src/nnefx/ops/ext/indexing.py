"""Indexing with run-time (possibly negative) indices and batch dimensions: gather, gather_elements, gather_nd, scatter, one_hot.

Part of the nnefx extension operations (see :mod:`nnefx.ops.ext`).
"""

from __future__ import annotations

import numpy as np

from ...diagnostics import NNEFXError
from ..registry import define

# --- Gather ------------------------------------------------------------------------------------

gather_axis_op = define("gather_axis", "ext", """
fragment gather_axis<?>( input: tensor<?>, indices: tensor<integer>, axis: integer, batch_dims: integer = 0 ) -> ( output: tensor<?> );
""", domain="nnefx", generic=True, doc="IR Gather (v8): negative indices count from the end; batch_dims.")


@gather_axis_op.shape
def _gather_shape(x, i, axis=0, batch_dims=0, dtype=None):
    r = len(x)
    if not 0 <= batch_dims <= axis < r or batch_dims > len(i):
        raise NNEFXError(f"gather_axis: need 0 <= batch_dims ({batch_dims}) <= axis ({axis}) < rank ({r})")
    return tuple(x[:axis]) + tuple(i[batch_dims:]) + tuple(x[axis + 1:])


def gather(x: np.ndarray, idx: np.ndarray, axis: int, batch_dims: int) -> np.ndarray:
    x = np.asarray(x)
    idx = np.asarray(idx).astype(np.int64)
    n = x.shape[axis]
    if np.any((idx < -n) | (idx >= n)):
        raise NNEFXError(f"gather: index out of range for extent {n}")
    idx = np.where(idx < 0, idx + n, idx)
    if batch_dims == 0:
        return np.take(x, idx, axis=axis)
    # Loop over the shared batch dims (formal definition: out[b..., i..., q...] = x[b..., idx[b..., i...], q...]).
    bshape = x.shape[:batch_dims]
    out = None
    for b in np.ndindex(*bshape):
        piece = np.take(x[b], idx[b], axis=axis - batch_dims)
        if out is None:
            out = np.empty(bshape + piece.shape, dtype=x.dtype)
        out[b] = piece
    if out is None:
        return np.empty(tuple(x.shape[:axis]) + idx.shape[batch_dims:] + x.shape[axis + 1:], x.dtype)
    return out


@gather_axis_op.fast
def _gather_formal(x, i, axis=0, batch_dims=0, dtype=None):
    return gather(x, i, axis, batch_dims)



@gather_axis_op.formal
def _gather_def(x, i, axis=0, batch_dims=0, dtype=None):
    x = np.asarray(x)
    i = np.asarray(i).astype(np.int64)
    n = x.shape[axis]
    out = np.empty(_gather_shape(x.shape, i.shape, axis, batch_dims), dtype=x.dtype)
    for pos in np.ndindex(*out.shape):
        # out[b.., p.., j.., q..] = x[b.., p.., indices[b.., j..], q..]
        b = pos[:batch_dims]
        p = pos[batch_dims:axis]
        j = pos[axis:axis + i.ndim - batch_dims]
        q = pos[axis + i.ndim - batch_dims:]
        k = int(i[b + j])
        if not -n <= k < n:
            raise NNEFXError(f"gather: index {k} out of range for extent {n}")
        out[pos] = x[b + p + (k % n,) + q]
    return out



# --- gathers and scatters ----------------------------------------------------------------------------


def _norm_index(idx: np.ndarray, n: int, what: str) -> np.ndarray:
    idx = np.asarray(idx).astype(np.int64)
    if np.any((idx < -n) | (idx >= n)):
        raise NNEFXError(f"{what}: index out of range for extent {n}")
    return np.where(idx < 0, idx + n, idx)


gather_elements_op = define("gather_elements", "ext", """
fragment gather_elements<?>( input: tensor<?>, indices: tensor<integer>, axis: integer ) -> ( output: tensor<?> );
""", domain="nnefx", generic=True, doc="IR GatherElements: out[i..] = input[i.. with i_axis = indices[i..]].")


@gather_elements_op.shape
def _ge_shape(x, i, axis=0, dtype=None):
    if len(x) != len(i) or not 0 <= axis < len(x):
        raise NNEFXError("gather_elements: input and indices must have equal ranks and a valid axis")
    return tuple(i)


@gather_elements_op.fast
def _ge_formal(x, i, axis=0, dtype=None):
    x = np.asarray(x)
    return np.take_along_axis(x, _norm_index(i, x.shape[axis], "gather_elements"), axis=axis)


gather_nd_op = define("gather_nd", "ext", """
fragment gather_nd<?>( input: tensor<?>, indices: tensor<integer>, batch_dims: integer = 0 ) -> ( output: tensor<?> );
""", domain="nnefx", generic=True, doc="IR GatherND (v8): slices of input addressed by the last axis of indices.")


@gather_nd_op.shape
def _gnd_shape(x, i, batch_dims=0, dtype=None):
    k = i[-1] if i else None
    if not i or k is None or batch_dims + k > len(x) or tuple(x[:batch_dims]) != tuple(i[:batch_dims]):
        raise NNEFXError("gather_nd: indices do not fit the input")
    return tuple(i[:-1]) + tuple(x[batch_dims + k:])


@gather_nd_op.formal
def _gnd_formal(x, i, batch_dims=0, dtype=None):
    x = np.asarray(x)
    i = np.asarray(i).astype(np.int64)
    k = i.shape[-1]
    out_shape = i.shape[:-1] + x.shape[batch_dims + k:]
    out = np.empty(out_shape, dtype=x.dtype)
    for pos in np.ndindex(*i.shape[:-1]):
        b = pos[:batch_dims]
        idx = tuple(int(_norm_index(v, x.shape[batch_dims + j], "gather_nd")) for j, v in enumerate(i[pos]))
        out[pos] = x[b + idx]
    return out


scatter_op = define("scatter", "ext", """
fragment scatter<?>( data: tensor<?>, indices: tensor<integer>, updates: tensor<?>, kind: string,
                        axis: integer = 0, reduction: string = 'none', use_init_val: logical = true )
    -> ( output: tensor<?> );
""", domain="nnefx", generic=True,
    doc="IR ScatterUpdate / ScatterNDUpdate / ScatterElementsUpdate (kind 'update', 'nd', 'elements'); "
        "ONNX Scatter / ScatterND / ScatterElements, their reductions ('nd': none, sum, prod, min, max).")


@scatter_op.shape
def _scatter_shape(d, i, u, kind="update", axis=0, reduction="none", use_init_val=True, dtype=None):
    if kind not in ("update", "nd", "elements"):
        raise NNEFXError(f"scatter: unknown kind '{kind}'")
    if reduction not in ("none", "sum", "prod", "min", "max", "mean"):
        raise NNEFXError(f"scatter: unknown reduction '{reduction}'")
    return tuple(d)


_ND_REDUCE = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}


@scatter_op.formal
def _scatter_formal(d, i, u, kind="update", axis=0, reduction="none", use_init_val=True, dtype=None):
    d = np.array(d, copy=True)
    i = np.asarray(i).astype(np.int64)
    u = np.asarray(u)
    if kind == "update":  # data[..., indices[j..], ...] along axis = updates[..., j.., ...]
        idx = _norm_index(i, d.shape[axis], "ScatterUpdate")
        moved = np.moveaxis(d, axis, 0)
        upd = u.reshape(d.shape[:axis] + idx.shape + d.shape[axis + 1:])
        upd = np.moveaxis(upd.reshape(d.shape[:axis] + (idx.size,) + d.shape[axis + 1:]), axis, 0)
        for j, t in enumerate(idx.reshape(-1)):
            moved[t] = upd[j]
        return np.moveaxis(moved, 0, axis)
    if kind == "nd":  # one update after another, each combined with what is there by the reduction
        if reduction == "mean":
            raise NNEFXError("scatter: kind 'nd' has no reduction 'mean'")
        for pos in np.ndindex(*i.shape[:-1]):
            idx = tuple(int(_norm_index(v, d.shape[j], "ScatterNDUpdate")) for j, v in enumerate(i[pos]))
            d[idx] = u[pos] if reduction == "none" else _ND_REDUCE[reduction](d[idx], u[pos])
        return d
    # elements, with an optional reduction (ScatterElementsUpdate-12)
    idx = _norm_index(i, d.shape[axis], "ScatterElementsUpdate")
    acc: dict[tuple, list] = {}
    for pos in np.ndindex(*idx.shape):
        target = pos[:axis] + (int(idx[pos]),) + pos[axis + 1:]
        acc.setdefault(target, []).append(u[pos])
    for target, vals in acc.items():
        if reduction == "none":
            d[target] = vals[-1]
            continue
        pool = ([d[target]] if use_init_val else []) + vals
        if reduction == "sum":
            v = sum(pool[1:], pool[0])
        elif reduction == "prod":
            v = pool[0]
            for p in pool[1:]:
                v = v * p
        elif reduction == "min":
            v = min(pool)
        elif reduction == "max":
            v = max(pool)
        else:
            v = sum(pool[1:], pool[0]) / len(pool)
            if d.dtype.kind in "iu":
                v = np.floor(v)
        d[target] = v
    return d


one_hot_op = define("one_hot", "ext", """
fragment one_hot<?>( indices: tensor<integer>, on_value: tensor<?>, off_value: tensor<?>, depth: integer,
                        axis: integer ) -> ( output: tensor<?> );
""", domain="nnefx", generic=True, doc="IR OneHot: on_value where the index equals the position along axis.")


@one_hot_op.etypes
def _one_hot_etypes(indices, on_value, off_value, **_):
    """The values' element type (the indices, an integer type too, come first but decide nothing)."""
    return on_value


@one_hot_op.shape
def _one_hot_shape(i, on, off, depth=1, axis=-1, dtype=None):
    if depth < 1 or not 0 <= axis <= len(i):
        raise NNEFXError(f"one_hot: bad depth {depth} or axis {axis}")
    s = list(i)
    s.insert(axis, depth)
    return tuple(s)


@one_hot_op.fast
def _one_hot_formal(i, on, off, depth=1, axis=-1, dtype=None):
    i = np.asarray(i).astype(np.int64)
    pos = np.arange(depth).reshape((1,) * axis + (depth,) + (1,) * (i.ndim - axis))
    hit = np.expand_dims(i, axis) == pos
    return np.where(hit, np.asarray(on).reshape(()), np.asarray(off).reshape(()))



@gather_elements_op.formal
def _gather_elements_def(x, i, axis=0, dtype=None):
    x = np.asarray(x)
    i = np.asarray(i).astype(np.int64)
    n = x.shape[axis]
    out = np.empty(i.shape, dtype=x.dtype)
    for pos in np.ndindex(*i.shape):
        k = int(i[pos])
        if not -n <= k < n:
            raise NNEFXError(f"gather_elements: index {k} out of range for extent {n}")
        out[pos] = x[pos[:axis] + (k % n,) + pos[axis + 1:]]
    return out



@one_hot_op.formal
def _one_hot_def(i, on, off, depth=1, axis=-1, dtype=None):
    i = np.asarray(i).astype(np.int64)
    on_v, off_v = np.asarray(on).reshape(()), np.asarray(off).reshape(())
    shape = list(i.shape)
    shape.insert(axis, depth)
    out = np.empty(shape, dtype=np.result_type(on_v, off_v))
    for pos in np.ndindex(*shape):
        d = pos[axis]
        out[pos] = on_v if int(i[pos[:axis] + pos[axis + 1:]]) == d else off_v
    return out


