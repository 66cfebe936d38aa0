"""Transform operators (the CVM runtime's "Operator Math Formalization", "Transform Operators"): values are moved, never computed.

``cvm_repeat``, ``cvm_tile``, ``cvm_flatten``, ``cvm_concatenate``, ``cvm_transpose``,
``cvm_strided_slice`` (seed: slice), ``cvm_slice_like``, ``cvm_take``, ``cvm_cvm_lut``,
``cvm_expand_dims``, ``cvm_reshape``, ``cvm_squeeze``, ``cvm_where``.

Attribute names are the runtime's (``axis`` for squeeze/slice_like, ``shape`` for reshape,
``stride`` for strided_slice).  Departures from the seed, following the runtime (cvm.md §3.3.4):

* repeat and concatenate accept negative axes (seed: [0, N)).
* flatten is 2-D ``(d0, d1*...*dk)`` (seed: 1-D); squeezing every dimension gives ``(1,)``
  (seed: 0-d); expand_dims maps a negative axis to ``axis + N + 1``.
* strided_slice clips ``begin``/``end`` to ``[lo, hi]`` rather than ``[lo, hi - 1]``, its
  ``end`` defaults to ``(1,)``, and empty slices are errors.
* take / cvm_lut clamp indices into range; cvm_lut takes the **indices first** and its
  output precision is the table's.
* where with a 1-D condition: the runtime copies only ``row_size`` *bytes* per row (a bug:
  the rest of each row is uninitialised memory).  nnefx implements the documented row
  selection instead -- the one place where the runtime's behaviour is not deterministic
  and so cannot be followed.
* take's optional ``axis`` is spelled as an integer list in NNEF: ``[]`` = None, ``[a]`` = a.
* tile: the seed's index ranges ``[K-N, K-1)`` are a typo for ``[K-N, K)``; reps must each be
  in 1..4096 (the runtime's default ``(0,)`` is therefore refused).
* transpose checks that ``axes`` is empty or a permutation (negatives allowed), as the seed says.
"""

from __future__ import annotations

import itertools

import numpy as np

from ._int import (
    MAX_ATTR,
    as_int32,
    bad,
    check_int,
    check_ints,
    cvm_define,
    normalize_axes,
    precision_rule,
    same_precision,
    shape_error,
    size_of,
)

_X = "x: tensor<integer>"


def _define(name, params, doc, shape, formal, fast, precision=same_precision, results="y: tensor<integer>"):
    op = cvm_define(name, "integer.transform", params, results, doc=doc)
    op.shape(shape)
    op.formal(formal)
    op.fast(fast)
    precision_rule(op)(precision)
    return op


def _indices(shape):
    return itertools.product(*(range(int(d)) for d in shape))


# --- repeat --------------------------------------------------------------------------------------

def _repeat_geo(x, repeats=None, axis=0):
    op = "cvm_repeat"
    repeats = check_int(op, "repeats", repeats, 1)
    axis = check_int(op, "axis", axis)
    (a,) = normalize_axes(op, "axis", (axis,), len(x))
    return a, tuple(d * repeats if i == a else d for i, d in enumerate(x))


def repeat_formal(x, repeats=None, axis=0):
    """Y[.., d_axis, ..] = X[.., d_axis div repeats, ..]."""
    x = as_int32(x, "cvm_repeat", "x")
    a, shape = _repeat_geo(x.shape, repeats, axis)
    y = np.zeros(shape, np.int32)
    for d in _indices(shape):
        src = list(d)
        src[a] = d[a] // repeats
        y[d] = x[tuple(src)]
    return y


def repeat_fast(x, repeats=None, axis=0):
    x = as_int32(x, "cvm_repeat", "x")
    a, _ = _repeat_geo(x.shape, repeats, axis)
    return np.repeat(x, repeats, axis=a)


_define("repeat", _X + ", repeats: integer, axis: integer = 0", "Repeat each element along an axis.",
        lambda x, **at: _repeat_geo(x, **at)[1], repeat_formal, repeat_fast)


# --- tile ----------------------------------------------------------------------------------------

def _tile_geo(x, reps=None):
    reps = check_ints("cvm_tile", "reps", reps, None, 1, MAX_ATTR)
    k = max(len(x), len(reps))
    sx = (1,) * (k - len(x)) + tuple(x)
    sr = (1,) * (k - len(reps)) + reps
    return sx, sr, tuple(a * b for a, b in zip(sx, sr, strict=True))


def tile_formal(x, reps=None):
    """Y[k_0..k_{K-1}] = X[k_{K-N} mod n_0, ..., k_{K-1} mod n_{N-1}]."""
    x = as_int32(x, "cvm_tile", "x")
    _, _, shape = _tile_geo(x.shape, reps)
    k, n = len(shape), x.ndim
    y = np.zeros(shape, np.int32)
    for d in _indices(shape):
        y[d] = x[tuple(d[k - n + i] % x.shape[i] for i in range(n))]
    return y


def tile_fast(x, reps=None):
    x = as_int32(x, "cvm_tile", "x")
    sx, sr, _ = _tile_geo(x.shape, reps)
    return np.tile(x.reshape(sx), sr)


_define("tile", _X + ", reps: integer[]", "Tile the whole tensor along each axis.",
        lambda x, **at: _tile_geo(x, **at)[2], tile_formal, tile_fast)


# --- flatten -------------------------------------------------------------------------------------

def _flatten_shape(x):
    if len(x) == 0:
        return (1, 1)
    return (x[0], size_of(x[1:]))


def flatten_formal(x):
    """Y[d0, flatten_index(d1..dk)] = X[d0, d1, ..., dk] (row-major)."""
    x = as_int32(x, "cvm_flatten", "x")
    shape = _flatten_shape(x.shape)
    y = np.zeros(shape, np.int32)
    for d in _indices(x.shape):
        rest = 0
        for i in range(1, x.ndim):
            rest = rest * x.shape[i] + d[i]
        y[d[0] if d else 0, rest] = x[d]
    return y


def flatten_fast(x):
    x = as_int32(x, "cvm_flatten", "x")
    return x.reshape(_flatten_shape(x.shape)).copy()


_define("flatten", _X, "Flatten to 2-D (d0, d1*...*dk).", _flatten_shape, flatten_formal, flatten_fast)


# --- concatenate ---------------------------------------------------------------------------------

def _concat_geo(xs, axis=1):
    op = "cvm_concatenate"
    if len(xs) < 1:
        raise shape_error(op, "needs at least one input")
    axis = check_int(op, "axis", axis)
    first = tuple(xs[0])
    (a,) = normalize_axes(op, "axis", (axis,), len(first))
    total = 0
    for k, s in enumerate(xs):
        s = tuple(s)
        if len(s) != len(first) or any(s[i] != first[i] for i in range(len(s)) if i != a):
            raise shape_error(op, f"input {k} has shape {s}, incompatible with {first} along axis {a}")
        total += s[a]
    return a, first[:a] + (total,) + first[a + 1:]


def concat_formal(xs, axis=1):
    """Y[.., sum_{j<i} n^j_axis + d_axis, ..] = I^i[.., d_axis, ..]."""
    xs = [as_int32(x, "cvm_concatenate", f"x[{k}]") for k, x in enumerate(xs)]
    a, shape = _concat_geo([x.shape for x in xs], axis)
    y = np.zeros(shape, np.int32)
    offset = 0
    for x in xs:
        for d in _indices(x.shape):
            t = list(d)
            t[a] += offset
            y[tuple(t)] = x[d]
        offset += x.shape[a]
    return y


def concat_fast(xs, axis=1):
    xs = [as_int32(x, "cvm_concatenate", f"x[{k}]") for k, x in enumerate(xs)]
    a, _ = _concat_geo([x.shape for x in xs], axis)
    return np.concatenate(xs, axis=a)


_define("concatenate", "x: tensor<integer>[], axis: integer = 1", "Concatenate along an axis.",
        lambda xs, **at: _concat_geo(xs, **at)[1], concat_formal, concat_fast,
        lambda precs, shapes, out_shapes, **at: [max(precs)])


# --- transpose -----------------------------------------------------------------------------------

def _transpose_geo(x, axes=()):
    op = "cvm_transpose"
    axes = check_ints(op, "axes", axes)
    n = len(x)
    if not axes:
        perm = tuple(range(n - 1, -1, -1))
    else:
        if len(axes) != n:
            raise bad(op, "axes", axes, f"must be empty or a permutation of {n} axes")
        perm = normalize_axes(op, "axes", axes, n)
    return perm, tuple(x[p] for p in perm)


def transpose_formal(x, axes=()):
    """Y[d_0..d_{N-1}] = X[e] with e[real_axes_i] = d_i."""
    x = as_int32(x, "cvm_transpose", "x")
    perm, shape = _transpose_geo(x.shape, axes)
    y = np.zeros(shape, np.int32)
    for d in _indices(shape):
        e = [0] * x.ndim
        for i, p in enumerate(perm):
            e[p] = d[i]
        y[d] = x[tuple(e)]
    return y


def transpose_fast(x, axes=()):
    x = as_int32(x, "cvm_transpose", "x")
    perm, _ = _transpose_geo(x.shape, axes)
    return np.transpose(x, perm).copy()


_define("transpose", _X + ", axes: integer[] = []", "Permute axes (empty: reverse).",
        lambda x, **at: _transpose_geo(x, **at)[1], transpose_formal, transpose_fast)


# --- strided_slice -------------------------------------------------------------------------------

def _slice_plan(x, begin=(0,), end=(1,), stride=()):
    """Per axis (b, s, extent); follows the runtime's clipping (see module docstring)."""
    op = "cvm_strided_slice"
    n = len(x)
    begin = check_ints(op, "begin", begin)
    end = check_ints(op, "end", end)
    stride = check_ints(op, "stride", stride)
    for attr, v in (("begin", begin), ("end", end), ("stride", stride)):
        if len(v) > n:
            raise bad(op, attr, v, f"has more elements than the input's rank {n}")
    plan = []
    for i in range(n):
        dim = x[i]
        s = stride[i] if i < len(stride) else 1
        if s == 0:
            raise bad(op, "stride", stride, "must not contain 0")
        b = begin[i] if i < len(begin) else 0
        e = end[i] if i < len(end) else dim
        lo, hi = (-1, dim - 1) if s < 0 else (0, dim)
        b = b + dim if b < 0 else b
        e = e + dim if e < 0 else e
        b = min(max(b, lo), hi)
        e = min(max(e, lo), hi)
        if (s > 0 and not b < e) or (s < 0 and not e < b):
            raise shape_error(op, f"axis {i} selects nothing (begin {b}, end {e}, stride {s})")
        plan.append((b, s, -(-abs(e - b) // abs(s))))
    return plan


def slice_formal(x, **attribs):
    """Y[d] = X[K] with K[i] = b_vec[i] + s_arr[i] * d_i."""
    x = as_int32(x, "cvm_strided_slice", "x")
    plan = _slice_plan(x.shape, **attribs)
    shape = tuple(p[2] for p in plan)
    y = np.zeros(shape, np.int32)
    for d in _indices(shape):
        y[d] = x[tuple(b + s * di for (b, s, _), di in zip(plan, d, strict=True))]
    return y


def slice_fast(x, **attribs):
    x = as_int32(x, "cvm_strided_slice", "x")
    plan = _slice_plan(x.shape, **attribs)
    return x[np.ix_(*(b + s * np.arange(k) for b, s, k in plan))]


_define("strided_slice", _X + ", begin: integer[] = [0], end: integer[] = [1], stride: integer[] = []",
        "Strided slice (seed: slice).", lambda x, **at: tuple(p[2] for p in _slice_plan(x, **at)),
        slice_formal, slice_fast)


# --- slice_like ----------------------------------------------------------------------------------

def _slice_like_shape(x, s, axis=()):
    op = "cvm_slice_like"
    axes = check_ints(op, "axis", axis)
    x, s = tuple(x), tuple(s)
    if not axes:
        if len(x) != len(s):
            raise shape_error(op, f"with axis=() both inputs need the same rank, got {x} and {s}")
        cut = range(len(x))
    else:
        cut = []
        for a in axes:
            r = a + len(x) if a < 0 else a
            if not 0 <= r < min(len(x), len(s)):
                raise bad(op, "axis", axes, f"has axis {a} outside both inputs' ranks ({len(x)}, {len(s)})")
            cut.append(r)
    out = list(x)
    for r in cut:
        if s[r] > x[r]:
            raise shape_error(op, f"shape_like dimension {r} ({s[r]}) exceeds the input's ({x[r]})")
        out[r] = s[r]
    return tuple(out)


def slice_like_formal(x, shape_like, axis=()):
    """Y[d] = X[d] for d inside shape_like's extent on the sliced axes."""
    x = as_int32(x, "cvm_slice_like", "x")
    shape = _slice_like_shape(x.shape, np.shape(shape_like), axis)
    y = np.zeros(shape, np.int32)
    for d in _indices(shape):
        y[d] = x[d]
    return y


def slice_like_fast(x, shape_like, axis=()):
    x = as_int32(x, "cvm_slice_like", "x")
    shape = _slice_like_shape(x.shape, np.shape(shape_like), axis)
    return x[tuple(slice(0, d) for d in shape)].copy()


_define("slice_like", _X + ", shape_like: tensor<integer>, axis: integer[] = []",
        "Cut the leading corner shaped like the second input.", _slice_like_shape,
        slice_like_formal, slice_like_fast)


# --- take, cvm_lut -------------------------------------------------------------------------------

def _take_axis(x, axis):
    """None or the normalised axis; accepts None, an int, [] or [a]."""
    op = "cvm_take"
    if axis is None:
        return None
    if isinstance(axis, (list, tuple)):
        if len(axis) == 0:
            return None
        if len(axis) != 1:
            raise bad(op, "axis", axis, "must be empty (None) or one axis")
        axis = axis[0]
    axis = check_int(op, "axis", axis)
    return normalize_axes(op, "axis", (axis,), len(x))[0]


def _take_shape(x, indices, axis=()):
    a = _take_axis(x, axis)
    if a is None:
        return tuple(indices)
    return tuple(x[:a]) + tuple(indices) + tuple(x[a + 1:])


def take_formal(x, indices, axis=()):
    """axis None: Y[d] = flat(X)[clip(I[d], 0, |X|-1)];
    axis a: Y[d] = X[d_0..d_{a-1}, clip(I[d_a..d_{a+M-1}], 0, n_a-1), d_{a+M}..]."""
    x = as_int32(x, "cvm_take", "x")
    ind = as_int32(indices, "cvm_take", "indices")
    a = _take_axis(x.shape, axis)
    shape = _take_shape(x.shape, ind.shape, axis)
    y = np.zeros(shape, np.int32)
    flat = x.reshape(-1)
    m = ind.ndim
    for d in _indices(shape):
        if a is None:
            y[d] = flat[min(max(int(ind[d]), 0), flat.size - 1)]
        else:
            i = min(max(int(ind[d[a:a + m]]), 0), x.shape[a] - 1)
            y[d] = x[d[:a] + (i,) + d[a + m:]]
    return y


def take_fast(x, indices, axis=()):
    x = as_int32(x, "cvm_take", "x")
    ind = as_int32(indices, "cvm_take", "indices")
    a = _take_axis(x.shape, axis)
    if a is None:
        return x.reshape(-1)[np.clip(ind, 0, x.size - 1)]
    return np.take(x, np.clip(ind, 0, x.shape[a] - 1), axis=a)


_define("take", _X + ", indices: tensor<integer>, axis: integer[] = []",
        "Gather with clamped indices; axis [] flattens the input.", _take_shape, take_formal, take_fast)


def _lut_shape(indices, table, in_dim=None):
    in_dim = check_int("cvm_cvm_lut", "in_dim", in_dim, 1)
    if size_of(table) != in_dim:
        raise bad("cvm_cvm_lut", "in_dim", in_dim, f"must equal the table's size {size_of(table)}")
    return tuple(indices)


def lut_formal(indices, table, in_dim=None):
    """Y = take(T, I, axis=None)."""
    _lut_shape(np.shape(indices), np.shape(table), in_dim)
    return take_formal(table, indices, ())


def lut_fast(indices, table, in_dim=None):
    _lut_shape(np.shape(indices), np.shape(table), in_dim)
    return take_fast(table, indices, ())


_define("cvm_lut", "indices: tensor<integer>, table: tensor<integer>, in_dim: integer",
        "Look-up table: take(table, indices, axis=None), indices first.", _lut_shape,
        lut_formal, lut_fast, lambda precs, shapes, out_shapes, **at: [precs[1]])


# --- expand_dims, reshape, squeeze -------------------------------------------------------------

def _expand_shape(x, axis=None, num_newaxis=1):
    op = "cvm_expand_dims"
    axis = check_int(op, "axis", axis)
    num = check_int(op, "num_newaxis", num_newaxis, 1, MAX_ATTR)
    (a,) = normalize_axes(op, "axis", (axis,), len(x), extra=1)
    return tuple(x[:a]) + (1,) * num + tuple(x[a:])


def _reshape_shape(x, shape=None):
    """MXNet reshape codes: >0 value, 0 copy, -1 infer, -2 copy rest, -3 merge two, -4 split."""
    op = "cvm_reshape"
    target = check_ints(op, "shape", shape)
    if not target:
        raise bad(op, "shape", target, "must not be empty")
    x = tuple(x)
    out: list[int] = []
    src = 0
    infer = -1
    i = 0

    def need(k):
        if src + k > len(x):
            raise bad(op, "shape", target, f"refers past the input's rank {len(x)}")

    while i < len(target):
        v = target[i]
        if v > 0:
            out.append(v)
            src += 1
        elif v == 0:
            need(1)
            out.append(x[src])
            src += 1
        elif v == -1:
            if infer >= 0:
                raise bad(op, "shape", target, "has more than one -1")
            infer = len(out)
            out.append(1)
            src += 1
        elif v == -2:
            out.extend(x[src:])
            src = len(x)
        elif v == -3:
            need(2)
            out.append(x[src] * x[src + 1])
            src += 2
        elif v == -4:
            need(1)
            if i + 2 >= len(target):
                raise bad(op, "shape", target, "has -4 without two following values")
            d0, d1 = target[i + 1], target[i + 2]
            dim = x[src]
            if d0 == -1 and d1 == -1 or d0 == 0 or d1 == 0 or d0 < -1 or d1 < -1:
                raise bad(op, "shape", target, "has an invalid -4 split")
            if d0 == -1:
                d0 = dim // d1
            if d1 == -1:
                d1 = dim // d0
            if d0 * d1 != dim:
                raise bad(op, "shape", target, f"splits dimension {dim} into {d0} x {d1}")
            out += [d0, d1]
            src += 1
            i += 2
        else:
            raise bad(op, "shape", target, f"has invalid code {v}")
        i += 1
    total = size_of(x)
    if infer >= 0:
        rest = size_of(out)
        if rest == 0 or total % rest:
            raise bad(op, "shape", target, f"cannot infer -1 for {total} elements")
        out[infer] = total // rest
    if size_of(out) != total:
        raise bad(op, "shape", target, f"gives {size_of(out)} elements, the input has {total}")
    return tuple(out)


def _squeeze_shape(x, axis=()):
    op = "cvm_squeeze"
    axes = check_ints(op, "axis", axis)
    x = tuple(x)
    if axes:
        drop = normalize_axes(op, "axis", axes, len(x))
        for a in drop:
            if x[a] != 1:
                raise bad(op, "axis", axes, f"names dimension {a} of size {x[a]} (must be 1)")
    else:
        drop = tuple(i for i, d in enumerate(x) if d == 1)
    out = tuple(d for i, d in enumerate(x) if i not in drop)
    return out if out else (1,)


def _copy_formal(name, rule):
    def formal(x, **attribs):
        """Y[unflatten(k)] = X[unflatten(k)]: same row-major order, new shape."""
        x = as_int32(x, name, "x")
        shape = rule(x.shape, **attribs)
        y = np.zeros(shape, np.int32)
        flat = y.reshape(-1)
        for k, d in enumerate(_indices(x.shape)):
            flat[k] = x[d]
        return y
    return formal


def _copy_fast(name, rule):
    def fast(x, **attribs):
        x = as_int32(x, name, "x")
        return x.reshape(rule(x.shape, **attribs)).copy()
    return fast


for _name, _params, _rule, _doc in (
        ("expand_dims", _X + ", axis: integer, num_newaxis: integer = 1", _expand_shape,
         "Insert num_newaxis size-1 axes at axis (negative: axis + N + 1)."),
        ("reshape", _X + ", shape: integer[]", _reshape_shape, "Reshape with MXNet codes 0, -1..-4."),
        ("squeeze", _X + ", axis: integer[] = []", _squeeze_shape,
         "Drop size-1 axes (all of them: shape (1,)).")):
    _define(_name, _params, _doc, _rule, _copy_formal("cvm_" + _name, _rule),
            _copy_fast("cvm_" + _name, _rule))


# --- where ---------------------------------------------------------------------------------------

def _where_shape(c, x, y):
    op = "cvm_where"
    c, x, y = tuple(c), tuple(x), tuple(y)
    if x != y:
        raise shape_error(op, f"x and y must have the same shape, got {x} and {y}")
    if c != x and not (len(c) == 1 and len(x) >= 1 and c[0] == x[0]):
        raise shape_error(op, f"condition shape {c} must be {x} or ({x[0] if x else '?'},)")
    return x


def where_formal(condition, x, y):
    """Y[d] = X[d] if Cond[d] != 0 (or Cond[d_0] for a 1-D condition) else Y[d]."""
    c = as_int32(condition, "cvm_where", "condition")
    x = as_int32(x, "cvm_where", "x")
    y = as_int32(y, "cvm_where", "y")
    shape = _where_shape(c.shape, x.shape, y.shape)
    out = np.zeros(shape, np.int32)
    for d in _indices(shape):
        cond = c[d] if c.shape == x.shape else c[d[0]]
        out[d] = x[d] if cond != 0 else y[d]
    return out


def where_fast(condition, x, y):
    c = as_int32(condition, "cvm_where", "condition")
    x = as_int32(x, "cvm_where", "x")
    y = as_int32(y, "cvm_where", "y")
    _where_shape(c.shape, x.shape, y.shape)
    if c.shape != x.shape:
        c = c.reshape((-1,) + (1,) * (x.ndim - 1))
    return np.where(c != 0, x, y).astype(np.int32)


# Output precision = the CONDITION's (runtime, ex09): outputs may exceed it.  The result is
# named ``z`` because ``y`` is already the name of the third parameter (NNEF forbids the clash).
_define("where", "condition: tensor<integer>, x: tensor<integer>, y: tensor<integer>",
        "Select x where condition != 0 else y.", _where_shape, where_formal, where_fast,
        results="z: tensor<integer>")
