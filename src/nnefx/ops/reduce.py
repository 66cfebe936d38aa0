"""Reduce operations (NNEF 1.0.5 §4.4) and ``moments`` (§4.9.6).

Reduced axes keep extent 1 (the rank never changes); ``axes = []`` is the identity.
A reduction over an empty set (a reduced axis of extent 0) gives the operation's identity, as
ONNX's Reduce* define it: 0 for ``sum_reduce``, -inf for ``max_reduce``, +inf for
``min_reduce``, true for ``all_reduce``, false for ``any_reduce`` (``mean_reduce`` is 0/0, NaN);
``argmax_reduce``/``argmin_reduce`` have no answer there and refuse.
Arg-reductions over several axes return the row-major linear index inside the reduced
sub-volume; ties go to the first index.
"""

from __future__ import annotations

from .registry import define

sum_reduce = define("sum_reduce", "reduce", """
fragment sum_reduce( input: tensor<scalar>, axes: integer[], normalize: logical = false ) -> ( output: tensor<scalar> );
""")

max_reduce = define("max_reduce", "reduce", """
fragment max_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<scalar> );
""")

min_reduce = define("min_reduce", "reduce", """
fragment min_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<scalar> );
""")

argmax_reduce = define("argmax_reduce", "reduce", """
fragment argmax_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<integer> );
""")

argmin_reduce = define("argmin_reduce", "reduce", """
fragment argmin_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<integer> );
""")

all_reduce = define("all_reduce", "reduce", """
fragment all_reduce( input: tensor<logical>, axes: integer[] ) -> ( output: tensor<logical> );
""")

any_reduce = define("any_reduce", "reduce", """
fragment any_reduce( input: tensor<logical>, axes: integer[] ) -> ( output: tensor<logical> );
""")

mean_reduce = define("mean_reduce", "reduce", """
fragment mean_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<scalar> )
{
    output = sum_reduce(input, axes = axes, normalize = true);
}
""", compound=True)

moments = define("moments", "reduce", """
fragment moments( input: tensor<scalar>, axes: integer[] ) -> ( mean: tensor<scalar>, variance: tensor<scalar> )
{
    mean = mean_reduce(input, axes = axes);
    variance = mean_reduce(sqr(input - mean), axes = axes);
}
""", compound=True)


# =============================================================================================
# Shape rules and kernels
# =============================================================================================
#
# Formal: for every output element, visit the reduced sub-volume in row-major order; sums are
# exact (``math.fsum``) and rounded to float32 once.  Fast: numpy reductions accumulating in
# float64, rounded to float32 once, so both agree to within 1 ulp for sums.  max/min
# propagate NaN (as numpy does); arg-reductions take the first maximum/minimum (a NaN counts
# as the extreme, as in numpy).

import math  # noqa: E402

import numpy as np  # noqa: E402

from ._common import check_axes, float_type, op_error, scalar  # noqa: E402


def reduced_shape(op: str, shape, axes) -> tuple:
    axes = check_axes(op, axes, len(shape))
    return tuple(1 if k in axes else d for k, d in enumerate(shape))


def _shape_for(name):
    def rule(input, axes=(), **_):
        return reduced_shape(name, input, axes)
    return rule


def reduction_groups(x: np.ndarray, axes):
    """Yield (output index, list of the reduced elements in row-major order)."""
    axes = sorted(axes)
    out_shape = tuple(1 if k in axes else d for k, d in enumerate(x.shape))
    for index in np.ndindex(*out_shape):
        items = []
        for sub in np.ndindex(*(x.shape[a] for a in axes)):
            full = list(index)
            for a, i in zip(axes, sub, strict=True):
                full[a] = i
            items.append(x[tuple(full)])
        yield index, items
    return


def _formal_reduce(name, x, axes, fn, dtype):
    reduced_shape(name, x.shape, axes)
    out = np.empty(tuple(1 if k in axes else d for k, d in enumerate(x.shape)), dtype=dtype)
    for index, items in reduction_groups(x, axes):
        out[index] = fn(items)
    return out


def _fmax(items):
    if not items:
        return -math.inf  # the empty set's maximum: the identity of max
    best = items[0]
    for v in items[1:]:
        if math.isnan(best):
            break
        if math.isnan(v) or v > best:
            best = v
    return best


def _fmin(items):
    if not items:
        return math.inf
    best = items[0]
    for v in items[1:]:
        if math.isnan(best):
            break
        if math.isnan(v) or v < best:
            best = v
    return best


def _farg(items, better):
    best = 0
    for k in range(1, len(items)):
        if math.isnan(items[best]):
            break
        if math.isnan(items[k]) or better(items[k], items[best]):
            best = k
    return best


@sum_reduce.formal
def _sum_formal(input, axes=(), normalize=False):
    x = scalar(input)
    reduced_shape("sum_reduce", x.shape, axes)
    count = math.prod(x.shape[a] for a in axes)

    def total(items):
        s = math.fsum(float(v) for v in items) if all(math.isfinite(v) for v in items) else sum(float(v) for v in items)
        return s / count if normalize else s
    return _formal_reduce("sum_reduce", x, axes, total, float_type())


@sum_reduce.fast
def _sum_fast(input, axes=(), normalize=False):
    x = scalar(input)
    reduced_shape("sum_reduce", x.shape, axes)
    s = np.sum(x, axis=tuple(axes), keepdims=True, dtype=np.float64)
    if normalize:
        s = s / math.prod(x.shape[a] for a in axes)
    return s.astype(float_type())


max_reduce.formal(lambda input, axes=(): _formal_reduce("max_reduce", scalar(input), axes, _fmax, float_type()))
min_reduce.formal(lambda input, axes=(): _formal_reduce("min_reduce", scalar(input), axes, _fmin, float_type()))


def _extreme_fast(name, fn, identity):
    def fast(input, axes=()):
        x = scalar(input)
        out_shape = reduced_shape(name, x.shape, axes)
        if not axes:
            return x.copy()
        if x.size == 0:  # every reduced set is empty (or there is no output item at all)
            return np.full(out_shape, identity, float_type())
        return fn(x, axis=tuple(axes), keepdims=True)
    return fast


max_reduce.fast(_extreme_fast("max_reduce", np.max, -np.inf))
min_reduce.fast(_extreme_fast("min_reduce", np.min, np.inf))

def _no_empty_arg(name, x, out_shape):
    """An arg-reduction has no index to give for an empty reduced set."""
    if x.size == 0 and math.prod(out_shape):
        raise op_error(name, f"the reduced axes of an input of shape {list(x.shape)} are empty: no index to give")


def _arg_formal(name, better):
    def formal(input, axes=()):
        x = scalar(input)
        _no_empty_arg(name, x, reduced_shape(name, x.shape, axes))
        return _formal_reduce(name, x, axes, lambda items: _farg(items, better), np.int64)
    return formal


argmax_reduce.formal(_arg_formal("argmax_reduce", lambda a, b: a > b))
argmin_reduce.formal(_arg_formal("argmin_reduce", lambda a, b: a < b))


def _arg_fast(name, fn):
    def fast(input, axes=()):
        x = scalar(input)
        out_shape = reduced_shape(name, x.shape, axes)
        _no_empty_arg(name, x, out_shape)
        if x.size == 0:
            return np.zeros(out_shape, np.int64)
        axes_ = sorted(axes)
        kept = [k for k in range(x.ndim) if k not in axes_]
        moved = np.transpose(x, kept + axes_).reshape([x.shape[k] for k in kept] + [-1])
        return fn(moved, axis=-1).astype(np.int64).reshape(out_shape)
    return fast


argmax_reduce.fast(_arg_fast("argmax_reduce", np.argmax))
argmin_reduce.fast(_arg_fast("argmin_reduce", np.argmin))

all_reduce.formal(lambda input, axes=(): _formal_reduce(
    "all_reduce", np.asarray(input, np.bool_), axes, lambda items: all(bool(v) for v in items), np.bool_))
any_reduce.formal(lambda input, axes=(): _formal_reduce(
    "any_reduce", np.asarray(input, np.bool_), axes, lambda items: any(bool(v) for v in items), np.bool_))


def _logic_fast(name, fn):
    def fast(input, axes=()):
        x = np.asarray(input, np.bool_)
        reduced_shape(name, x.shape, axes)
        return fn(x, axis=tuple(axes), keepdims=True)
    return fast


all_reduce.fast(_logic_fast("all_reduce", np.all))
any_reduce.fast(_logic_fast("any_reduce", np.any))

for _op in (sum_reduce, max_reduce, min_reduce, argmax_reduce, argmin_reduce, all_reduce, any_reduce, mean_reduce):
    _op.shape(_shape_for(_op.name))

mean_reduce.fast(lambda input, axes=(): _sum_fast(input, axes, normalize=True))


@moments.shape
def _moments_shape(input, axes=()):
    s = reduced_shape("moments", input, axes)
    return s, s


@moments.fast
def _moments_fast(input, axes=()):
    x = scalar(input)
    reduced_shape("moments", x.shape, axes)
    mean = np.mean(x, axis=tuple(axes), keepdims=True, dtype=np.float64).astype(float_type())
    d = (x - mean).astype(np.float64)
    var = np.mean(d * d, axis=tuple(axes), keepdims=True)
    return mean, var.astype(float_type())
