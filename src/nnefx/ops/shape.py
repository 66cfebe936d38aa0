"""Tensor shape operations (NNEF 1.0.5 §4.5): reshape, squeeze, unsqueeze, transpose, split,
concat, stack, unstack, slice, pad, tile, gather, cast.

All but ``pad`` are generic (``<?>``): they move data without looking at it.
"""

from __future__ import annotations

from .registry import define

reshape = define("reshape", "shape", """
fragment reshape<?>( input: tensor<?>, shape: integer[], axis_start: integer = 0, axis_count: integer = -1 ) -> ( output: tensor<?> );
""", generic=True)

squeeze = define("squeeze", "shape", """
fragment squeeze<?>( input: tensor<?>, axes: integer[] ) -> ( output: tensor<?> );
""", generic=True)

unsqueeze = define("unsqueeze", "shape", """
fragment unsqueeze<?>( input: tensor<?>, axes: integer[] ) -> ( output: tensor<?> );
""", generic=True)

transpose = define("transpose", "shape", """
fragment transpose<?>( input: tensor<?>, axes: integer[] ) -> ( output: tensor<?> );
""", generic=True)

split = define("split", "shape", """
fragment split<?>( value: tensor<?>, axis: integer, ratios: integer[] ) -> ( values: tensor<?>[] );
""", generic=True)

concat = define("concat", "shape", """
fragment concat<?>( values: tensor<?>[], axis: integer ) -> ( value: tensor<?> );
""", generic=True)

stack = define("stack", "shape", """
fragment stack<?>( values: tensor<?>[], axis: integer ) -> ( value: tensor<?> );
""", generic=True)

unstack = define("unstack", "shape", """
fragment unstack<?>( value: tensor<?>, axis: integer ) -> ( values: tensor<?>[] );
""", generic=True)

slice_ = define("slice", "shape", """
fragment slice<?>( input: tensor<?>, axes: integer[], begin: integer[], end: integer[], stride: integer[] = [] ) -> ( output: tensor<?> );
""", generic=True)

pad = define("pad", "shape", """
fragment pad( input: tensor<scalar>, padding: (integer,integer)[], border: string = 'constant', value: scalar = 0.0 ) -> ( output: tensor<scalar> );
""")

tile = define("tile", "shape", """
fragment tile<?>( input: tensor<?>, repeats: integer[] ) -> ( output: tensor<?> );
""", generic=True)

gather = define("gather", "shape", """
fragment gather<?>( input: tensor<?>, indices: tensor<integer>, axis: integer = 0 ) -> ( output: tensor<?> );
""", generic=True)

cast = define("cast", "shape", """
fragment cast<?>( input: tensor<> ) -> ( output: tensor<?> );
""", generic=True)


# =============================================================================================
# Shape rules and kernels
# =============================================================================================
#
# Formal kernels move one element at a time following the index formula of the definition;
# fast kernels use numpy views and copies.  Both are exact (bit-identical) for every dtype.

import math  # noqa: E402

import numpy as np  # noqa: E402

from ..dims import Dim  # noqa: E402
from ._common import (  # noqa: E402
    as_dtype,
    attr_error,
    border_index,
    check_axes,
    check_border,
    float_type,
    op_error,
    pad_array,
    scalar,
    storage_dtype,
)


def _int_list(op, attr, values):
    values = list(values)
    for v in values:
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise attr_error(op, attr, values, "must hold integers")
    return [int(v) for v in values]


def _set_output(fill):
    """Helper for formal kernels: write ``fill(index)`` at every index of a new array."""
    def run(shape, dtype):
        out = np.empty(shape, dtype=dtype)
        for index in np.ndindex(*shape):
            out[index] = fill(index)
        return out
    return run


# --- reshape ------------------------------------------------------------------------------

@reshape.shape
def _reshape_shape(input, shape=(), axis_start=0, axis_count=-1, **_):
    rank = len(input)
    shape = _int_list("reshape", "shape", shape)
    if not 0 <= axis_start <= rank:
        raise attr_error("reshape", "axis_start", axis_start, f"must lie in [0, {rank}]")
    if axis_count < -1:
        raise attr_error("reshape", "axis_count", axis_count, "must be >= -1")
    count = rank - axis_start if axis_count == -1 else axis_count
    if axis_start + count > rank:
        raise attr_error("reshape", "axis_count", axis_count,
                         f"reaches past the rank {rank} from axis_start {axis_start}")
    if any(d < -1 for d in shape) or shape.count(-1) > 1:
        raise attr_error("reshape", "shape", shape, "must have items >= 0 and at most one -1")
    part = list(input[axis_start:axis_start + count])
    new: list = []
    for k, d in enumerate(shape):
        if d == 0:
            if axis_start + k >= rank:
                raise attr_error("reshape", "shape", shape, f"copies (0) a dimension {axis_start + k} "
                                                            f"the input (rank {rank}) does not have")
            new.append(input[axis_start + k])
        else:
            new.append(d)
    # A 0 copies input[s + k], which then divides out of both volumes (even when unknown).
    copied = {k for k, d in enumerate(shape) if d == 0 and k < len(part)}
    rest_in = [d for k, d in enumerate(part) if k not in copied]
    known_in = None if any(d is None for d in rest_in) else math.prod(rest_in)
    others = [d for k, d in enumerate(new) if d != -1 and k not in copied]
    known_others = None if any(d is None for d in others) else math.prod(others)
    if -1 in new:
        k = new.index(-1)
        if known_in is None or known_others is None:
            new[k] = None
        elif known_others == 0 or known_in % known_others:
            raise attr_error("reshape", "shape", shape,
                             f"cannot infer -1: {known_in} elements are not divisible by {known_others}")
        else:
            new[k] = known_in // known_others
    elif known_in is not None and known_others is not None and known_in != known_others:
        raise attr_error("reshape", "shape", shape,
                         f"has volume {known_others} but the reshaped input part {tuple(part)} has {known_in}")
    return tuple(input[:axis_start]) + tuple(new) + tuple(input[axis_start + count:])


def _reshape_formal(input, shape=(), axis_start=0, axis_count=-1, dtype=None):
    x = as_dtype(input, dtype)
    out_shape = _reshape_shape(x.shape, shape, axis_start, axis_count)
    flat = [x[index] for index in np.ndindex(*x.shape)]  # row-major order
    out = np.empty(out_shape, dtype=x.dtype)
    for k, index in enumerate(np.ndindex(*out_shape)):
        out[index] = flat[k]
    return out


def _reshape_fast(input, shape=(), axis_start=0, axis_count=-1, dtype=None):
    x = as_dtype(input, dtype)
    return np.reshape(x, _reshape_shape(x.shape, shape, axis_start, axis_count)).copy()


reshape.formal(_reshape_formal)
reshape.fast(_reshape_fast)


# --- squeeze / unsqueeze ---------------------------------------------------------------------

@squeeze.shape
def _squeeze_shape(input, axes=(), **_):
    axes = check_axes("squeeze", axes, len(input))
    for a in axes:
        if input[a] is not None and input[a] != 1:
            raise attr_error("squeeze", "axes", list(axes), f"names dimension {a} of extent {input[a]} (not 1)")
    return tuple(d for k, d in enumerate(input) if k not in axes)


@unsqueeze.shape
def _unsqueeze_shape(input, axes=(), **_):
    axes = check_axes("unsqueeze", axes, len(input) + len(list(axes)))
    out = list(input)
    for a in sorted(axes):
        out.insert(a, 1)
    return tuple(out)


def _reshaping_kernel(rule):
    """squeeze/unsqueeze only change the shape: formal copies element by element."""
    def formal(input, axes=(), dtype=None):
        x = as_dtype(input, dtype)
        return _reshape_formal(x, list(rule(x.shape, axes)), dtype=None)

    def fast(input, axes=(), dtype=None):
        x = as_dtype(input, dtype)
        return x.reshape(rule(x.shape, axes)).copy()
    return formal, fast


_f, _g = _reshaping_kernel(_squeeze_shape)
squeeze.formal(_f)
squeeze.fast(_g)
_f, _g = _reshaping_kernel(_unsqueeze_shape)
unsqueeze.formal(_f)
unsqueeze.fast(_g)


# --- transpose ----------------------------------------------------------------------------

@transpose.shape
def _transpose_shape(input, axes=(), **_):
    axes = _int_list("transpose", "axes", axes)
    if sorted(axes) != list(range(len(axes))) or len(axes) > len(input):
        raise attr_error("transpose", "axes", axes, f"must be a permutation of 0..n-1 with n <= rank {len(input)}")
    return tuple(input[a] for a in axes) + tuple(input[len(axes):])


def _full_perm(axes, rank):
    return list(axes) + list(range(len(axes), rank))


@transpose.formal
def _transpose_formal(input, axes=(), dtype=None):
    x = as_dtype(input, dtype)
    out_shape = _transpose_shape(x.shape, axes)
    perm = _full_perm(axes, x.ndim)

    def fill(index):  # output dimension k is input dimension perm[k]
        src = [0] * x.ndim
        for k, p in enumerate(perm):
            src[p] = index[k]
        return x[tuple(src)]
    return _set_output(fill)(out_shape, x.dtype)


@transpose.fast
def _transpose_fast(input, axes=(), dtype=None):
    x = as_dtype(input, dtype)
    _transpose_shape(x.shape, axes)
    return np.ascontiguousarray(np.transpose(x, _full_perm(axes, x.ndim)))


# --- split / concat / stack / unstack --------------------------------------------------------

@split.shape
def _split_shape(value, axis=0, ratios=(), **_):
    check_axes("split", [axis], len(value), "axis")
    ratios = _int_list("split", "ratios", ratios)
    if not ratios or any(r <= 0 for r in ratios):
        raise attr_error("split", "ratios", ratios, "must be non-empty with items > 0")
    extent = value[axis]
    total = sum(ratios)
    if extent is None:
        return [tuple(value[:axis]) + (None,) + tuple(value[axis + 1:]) for _ in ratios]
    if extent % total:
        raise attr_error("split", "ratios", ratios, f"sum {total} does not divide the extent {extent} of axis {axis}")
    unit = extent // total
    return [tuple(value[:axis]) + (unit * r,) + tuple(value[axis + 1:]) for r in ratios]


def _split_bounds(extent, ratios):
    unit = extent // sum(ratios)
    start = 0
    for r in ratios:
        yield start, start + unit * r
        start += unit * r


@split.formal
def _split_formal(value, axis=0, ratios=(), dtype=None):
    x = as_dtype(value, dtype)
    shapes = _split_shape(x.shape, axis, ratios)
    outs = []
    for (start, _end), shape in zip(_split_bounds(x.shape[axis], ratios), shapes, strict=True):
        def fill(index, start=start):
            src = list(index)
            src[axis] += start
            return x[tuple(src)]
        outs.append(_set_output(fill)(shape, x.dtype))
    return outs


@split.fast
def _split_fast(value, axis=0, ratios=(), dtype=None):
    x = as_dtype(value, dtype)
    _split_shape(x.shape, axis, ratios)
    cut = [slice(None)] * x.ndim
    outs = []
    for start, end in _split_bounds(x.shape[axis], ratios):
        cut[axis] = slice(start, end)
        outs.append(x[tuple(cut)].copy())
    return outs


@concat.shape
def _concat_shape(values, axis=0, **_):
    values = [tuple(v) for v in values]
    if not values:
        raise op_error("concat", "needs at least one value")
    rank = len(values[0])
    if any(len(v) != rank for v in values):
        raise op_error("concat", "values have different ranks: " + ", ".join(map(str, values)))
    check_axes("concat", [axis], rank, "axis")
    out = list(values[0])
    for v in values[1:]:
        for k in range(rank):
            if k == axis:
                out[k] = None if out[k] is None or v[k] is None else out[k] + v[k]
            elif out[k] is None:
                out[k] = v[k]
            elif v[k] is not None and v[k] != out[k]:
                raise op_error("concat", f"values disagree in dimension {k} (off the axis {axis}): "
                                         + ", ".join(map(str, values)))
    return tuple(out)


@concat.formal
def _concat_formal(values, axis=0, dtype=None):
    xs = [as_dtype(v, dtype) for v in values]
    out_shape = _concat_shape([x.shape for x in xs], axis)
    owner = []  # position along the axis -> (which value, its own index)
    for n, x in enumerate(xs):
        owner += [(n, k) for k in range(x.shape[axis])]

    def fill(index):
        n, k = owner[index[axis]]
        src = list(index)
        src[axis] = k
        return xs[n][tuple(src)]
    return _set_output(fill)(out_shape, np.result_type(*xs))


@concat.fast
def _concat_fast(values, axis=0, dtype=None):
    xs = [as_dtype(v, dtype) for v in values]
    _concat_shape([x.shape for x in xs], axis)
    return np.concatenate(xs, axis=axis)


@stack.shape
def _stack_shape(values, axis=0, **_):
    values = [tuple(v) for v in values]
    if not values:
        raise op_error("stack", "needs at least one value")
    first = values[0]
    for v in values[1:]:
        if len(v) != len(first) or any(a is not None and b is not None and a != b for a, b in zip(v, first, strict=True)):
            raise op_error("stack", "values must have identical shapes: " + ", ".join(map(str, values)))
    check_axes("stack", [axis], len(first) + 1, "axis")
    return first[:axis] + (len(values),) + first[axis:]


@stack.formal
def _stack_formal(values, axis=0, dtype=None):
    xs = [as_dtype(v, dtype) for v in values]
    out_shape = _stack_shape([x.shape for x in xs], axis)

    def fill(index):
        return xs[index[axis]][index[:axis] + index[axis + 1:]]
    return _set_output(fill)(out_shape, np.result_type(*xs))


@stack.fast
def _stack_fast(values, axis=0, dtype=None):
    xs = [as_dtype(v, dtype) for v in values]
    _stack_shape([x.shape for x in xs], axis)
    return np.stack(xs, axis=axis)


@unstack.shape
def _unstack_shape(value, axis=0, **_):
    check_axes("unstack", [axis], len(value), "axis")
    if value[axis] is None:
        raise op_error("unstack", f"the extent of axis {axis} must be known to count the results")
    piece = tuple(value[:axis]) + tuple(value[axis + 1:])
    return [piece] * value[axis]


@unstack.formal
def _unstack_formal(value, axis=0, dtype=None):
    x = as_dtype(value, dtype)
    shapes = _unstack_shape(x.shape, axis)
    return [_set_output(lambda index, n=n: x[index[:axis] + (n,) + index[axis:]])(s, x.dtype)
            for n, s in enumerate(shapes)]


@unstack.fast
def _unstack_fast(value, axis=0, dtype=None):
    x = as_dtype(value, dtype)
    _unstack_shape(x.shape, axis)
    return [np.take(x, n, axis=axis) for n in range(x.shape[axis])]


# --- slice --------------------------------------------------------------------------------

def _slice_plan(shape, axes, begin, end, stride):
    """Per sliced axis: (axis, first index, stride, count); count None if unknown."""
    rank = len(shape)
    axes = check_axes("slice", _int_list("slice", "axes", axes), rank)
    begin = _int_list("slice", "begin", begin)
    end = _int_list("slice", "end", end)
    stride = _int_list("slice", "stride", stride)
    if not len(begin) == len(end) == len(axes):
        raise op_error("slice", f"axes {axes}, begin {begin} and end {end} must have equal lengths")
    if stride and len(stride) != len(axes):
        raise attr_error("slice", "stride", stride, f"must be empty or have {len(axes)} items")
    if any(s == 0 for s in stride):
        raise attr_error("slice", "stride", stride, "must not contain 0")
    legacy = all(s == 1 for s in stride)
    stride = stride or [1] * len(axes)
    plan = []
    for a, b, e, s in zip(axes, begin, end, stride, strict=True):
        x = shape[a]
        if x is None:
            plan.append((a, None, s, None))
            continue
        if e == 0 and legacy:  # deprecated "to the end" (1.0.0-1.0.3); still applied by the tools
            e = x
        # Spec: negative values count from the end; then values above x become x and values
        # below 0 become -1 ("before the first element").  A positive stride needs
        # 0 <= begin <= end, a negative one -1 <= end <= begin < x (the official tools agree).
        b = b + x if b < 0 else b
        e = e + x if e < 0 else e
        b, e = min(max(b, -1), x), min(max(e, -1), x)
        if s > 0 and not 0 <= b <= e:
            raise op_error("slice", f"axis {a}: with stride {s} the normalised range needs 0 <= begin <= end, "
                                    f"got begin {b}, end {e} (extent {x})")
        if s < 0 and not e <= b < x:
            raise op_error("slice", f"axis {a}: with stride {s} the normalised range needs end <= begin < extent, "
                                    f"got begin {b}, end {e} (extent {x})")
        count = -(-(e - b) // s)  # ceil((end - begin) / stride), the spec's input[b:e:s]
        plan.append((a, b, s, count))
    return plan


@slice_.shape
def _slice_shape(input, axes=(), begin=(), end=(), stride=(), **_):
    out = list(input)
    for a, _b, _s, count in _slice_plan(tuple(input), axes, begin, end, stride):
        out[a] = count
    return tuple(out)


@slice_.formal
def _slice_formal(input, axes=(), begin=(), end=(), stride=(), dtype=None):
    x = as_dtype(input, dtype)
    plan = _slice_plan(x.shape, axes, begin, end, stride)
    out_shape = list(x.shape)
    for a, _b, _s, count in plan:
        out_shape[a] = count

    def fill(index):
        src = list(index)
        for a, b, s, _count in plan:
            src[a] = b + index[a] * s
        return x[tuple(src)]
    return _set_output(fill)(tuple(out_shape), x.dtype)


@slice_.fast
def _slice_fast(input, axes=(), begin=(), end=(), stride=(), dtype=None):
    x = as_dtype(input, dtype)
    cut = [slice(None)] * x.ndim
    for a, b, s, count in _slice_plan(x.shape, axes, begin, end, stride):
        last = b + (count - 1) * s
        stop = last + (1 if s > 0 else -1)
        cut[a] = slice(b, stop if stop >= 0 else None, s) if count else slice(0, 0)
    return x[tuple(cut)].copy()


# --- pad / tile ---------------------------------------------------------------------------

_PAD_BORDERS = ("constant", "replicate", "reflect", "reflect-even")


def _pad_pairs(op, padding, rank):
    pads = list(padding)
    if len(pads) != rank:
        raise attr_error(op, "padding", pads, f"must have {rank} (before, after) pairs, one per dimension")
    for p in pads:
        if not (isinstance(p, (tuple, list)) and len(p) == 2):
            raise attr_error(op, "padding", pads, "must hold (before, after) pairs")
    return [(int(p), int(q)) for p, q in pads]


@pad.shape
def _pad_shape(input, padding=(), border="constant", value=0.0):
    check_border("pad", border, _PAD_BORDERS)
    pads = _pad_pairs("pad", padding, len(input))
    out = []
    for k, (d, (p, q)) in enumerate(zip(input, pads, strict=True)):
        if d is None:
            out.append(None)
            continue
        if d + p + q <= 0:
            raise attr_error("pad", "padding", list(padding), f"leaves dimension {k} (extent {d}) empty")
        if border != "constant" and (p > 0 or q > 0) and d + min(p, 0) + min(q, 0) <= 0:
            raise attr_error("pad", "padding", list(padding), f"crops dimension {k} away before extending it")
        out.append(d + p + q)
    return tuple(out)


@pad.formal
def _pad_formal(input, padding=(), border="constant", value=0.0):
    """out[i] = in~[i - p]: in range, the input; outside, by ``border`` (``value`` for constant)."""
    x = scalar(input)
    out_shape = _pad_shape(x.shape, padding, border, value)
    pads = _pad_pairs("pad", padding, x.ndim)
    # Negative padding crops first; the border then reads the cropped tensor.
    crop = x[tuple(slice(max(-p, 0), x.shape[k] - max(-q, 0)) for k, (p, q) in enumerate(pads))]
    shift = [max(p, 0) for p, _q in pads]

    def fill(index):
        src = []
        for k, i in enumerate(index):
            j = border_index(i - shift[k], crop.shape[k], border)
            if j is None:
                return float_type()(value)
            src.append(j)
        return crop[tuple(src)]
    return _set_output(fill)(out_shape, float_type())


@pad.fast
def _pad_fast(input, padding=(), border="constant", value=0.0):
    x = scalar(input)
    _pad_shape(x.shape, padding, border, value)
    return np.ascontiguousarray(pad_array(x, _pad_pairs("pad", padding, x.ndim), border, float_type()(value)))


@tile.shape
def _tile_shape(input, repeats=(), **_):
    # a symbolic repeat (an extent read at load from a symbolic shape, in tract's dialect) stays one
    if not any(isinstance(r, Dim) for r in repeats):
        repeats = _int_list("tile", "repeats", repeats)
    elif not all(isinstance(r, (Dim, int, np.integer)) and not isinstance(r, bool) for r in repeats):
        raise attr_error("tile", "repeats", list(repeats), "must hold integers")
    if len(repeats) != len(input) or any(not isinstance(r, Dim) and r <= 0 for r in repeats):
        raise attr_error("tile", "repeats", repeats, f"must have {len(input)} items > 0")
    return tuple(None if d is None else d * r for d, r in zip(input, repeats, strict=True))


@tile.formal
def _tile_formal(input, repeats=(), dtype=None):
    x = as_dtype(input, dtype)
    out_shape = _tile_shape(x.shape, repeats)
    return _set_output(lambda index: x[tuple(i % d for i, d in zip(index, x.shape, strict=True))])(out_shape, x.dtype)


@tile.fast
def _tile_fast(input, repeats=(), dtype=None):
    x = as_dtype(input, dtype)
    _tile_shape(x.shape, repeats)
    return np.tile(x, list(repeats)) if x.ndim else x.copy()


# --- gather -------------------------------------------------------------------------------

@gather.shape
def _gather_shape(input, indices, axis=0, **_):
    check_axes("gather", [axis], len(input), "axis")
    return tuple(input[:axis]) + tuple(indices) + tuple(input[axis + 1:])


def _check_indices(idx, extent):
    if idx.size and (idx.min() < 0 or idx.max() >= extent):
        bad = int(idx[(idx < 0) | (idx >= extent)].flat[0])
        raise op_error("gather", f"index {bad} is outside [0, {extent})")


@gather.formal
def _gather_formal(input, indices, axis=0, dtype=None):
    x = as_dtype(input, dtype)
    idx = np.asarray(indices, dtype=np.int64)
    out_shape = _gather_shape(x.shape, idx.shape, axis)
    _check_indices(idx, x.shape[axis])
    m = idx.ndim

    def fill(index):  # out[p..., i..., q...] = in[p..., indices[i...], q...]
        p, i, q = index[:axis], index[axis:axis + m], index[axis + m:]
        return x[p + (idx[i],) + q]
    return _set_output(fill)(out_shape, x.dtype)


@gather.fast
def _gather_fast(input, indices, axis=0, dtype=None):
    x = as_dtype(input, dtype)
    idx = np.asarray(indices, dtype=np.int64)
    _gather_shape(x.shape, idx.shape, axis)
    _check_indices(idx, x.shape[axis])
    return np.take(x, idx, axis=axis)


# --- cast ---------------------------------------------------------------------------------

@cast.shape
def _cast_shape(input, **_):
    return tuple(input)


_INT64_LIMIT = 2.0 ** 63


def _to_integer(v):
    """scalar -> integer is the closest smaller integer (floor), as the ``integer()`` builtin."""
    if not math.isfinite(v) or not -_INT64_LIMIT <= math.floor(v) < _INT64_LIMIT:
        raise op_error("cast", f"value {v} has no integer counterpart")
    return math.floor(v)


def _cast_element(v, source, target):
    if target == "logical":
        return bool(v != 0)
    if target == "integer":
        if source == "scalar":
            return _to_integer(float(v))
        return int(v)
    return float(v)


def _source(x):
    if x.dtype == np.bool_:
        return "logical"
    if np.issubdtype(x.dtype, np.integer):
        return "integer"
    return "scalar"


@cast.formal
def _cast_formal(input, dtype="scalar"):
    x = np.asarray(input)
    src = _source(x)
    return _set_output(lambda index: _cast_element(x[index], src, dtype))(x.shape, storage_dtype(dtype))


@cast.fast
def _cast_fast(input, dtype="scalar"):
    x = np.asarray(input)
    src = _source(x)
    if dtype == "logical":
        return x != 0
    if dtype == "integer" and src == "scalar":
        f = np.floor(x.astype(np.float64))
        if not np.all(np.isfinite(f)) or f.size and (f.min() < -_INT64_LIMIT or f.max() >= _INT64_LIMIT):
            bad = x.flat[int(np.flatnonzero(~np.isfinite(f) | (f < -_INT64_LIMIT) | (f >= _INT64_LIMIT))[0])]
            raise op_error("cast", f"value {bad} has no integer counterpart")
        return f.astype(np.int64)
    return x.astype(storage_dtype(dtype))
