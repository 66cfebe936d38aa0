"""Normalization operations (NNEF 1.0.5 §4.9.4, all compound).

``size`` arrays are full-rank (cross-channel LRN is ``size = [1, n, 1, 1]``); the inner
``box`` uses its defaults, i.e. automatic padding and a zero (``'constant'``) border.
"""

from __future__ import annotations

from .registry import define

local_response_normalization = define("local_response_normalization", "normalization", """
fragment local_response_normalization(
    input: tensor<scalar>,
    size: integer[],
    alpha: scalar = 1.0,
    beta: scalar = 0.5,
    bias: scalar = 1.0 )
-> ( output: tensor<scalar> )
{
    sigma = bias + alpha * box(sqr(input), size = size, normalize = true);
    output = input / (sigma ^ beta);
}
""", compound=True)

local_mean_normalization = define("local_mean_normalization", "normalization", """
fragment local_mean_normalization( input: tensor<scalar>, size: integer[] ) -> ( output: tensor<scalar> )
{
    mean = box(input, size = size, normalize = true);
    output = sub(input, mean);
}
""", compound=True)

local_variance_normalization = define("local_variance_normalization", "normalization", """
fragment local_variance_normalization(
    input: tensor<scalar>,
    size: integer[],
    bias: scalar = 0.0,
    epsilon: scalar = 0.0 )
-> ( output: tensor<scalar> )
{
    sigma = sqrt(box(sqr(input), size = size, normalize = true));
    output = input / max(sigma + bias, epsilon);
}
""", compound=True)

local_contrast_normalization = define("local_contrast_normalization", "normalization", """
fragment local_contrast_normalization(
    input: tensor<scalar>,
    size: integer[],
    bias: scalar = 0.0,
    epsilon: scalar = 0.0 )
-> ( output: tensor<scalar> )
{
    centered = local_mean_normalization(input, size = size);
    output = local_variance_normalization(centered, size = size, bias = bias, epsilon = epsilon);
}
""", compound=True)

l1_normalization = define("l1_normalization", "normalization", """
fragment l1_normalization(
    input: tensor<scalar>,
    axes: integer[],
    bias: scalar = 0.0,
    epsilon: scalar = 0.0 )
-> ( output: tensor<scalar> )
{
    sigma = sum_reduce(abs(input), axes = axes);
    output = input / max(sigma + bias, epsilon);
}
""", compound=True)

l2_normalization = define("l2_normalization", "normalization", """
fragment l2_normalization(
    input: tensor<scalar>,
    axes: integer[],
    bias: scalar = 0.0,
    epsilon: scalar = 0.0 )
-> ( output: tensor<scalar> )
{
    sigma = sqrt(sum_reduce(sqr(input), axes = axes));
    output = input / max(sigma + bias, epsilon);
}
""", compound=True)

batch_normalization = define("batch_normalization", "normalization", """
fragment batch_normalization(
    input: tensor<scalar>,
    mean: tensor<scalar>,
    variance: tensor<scalar>,
    offset: tensor<scalar>,
    scale: tensor<scalar>,
    epsilon: scalar )
-> ( output: tensor<scalar> )
{
    output = offset + scale * (input - mean) / sqrt(variance + epsilon);
}
""", compound=True)


# =============================================================================================
# Shape rules and kernels
# =============================================================================================
#
# Formal kernels run each body through the primitives' formal kernels; fast kernels fuse the
# body with numpy, using the fast ``box`` for the local windows.  Agreement: a few float32 ulp
# relative to the result (the box sums are accumulated in float64 by both).

import numpy as np  # noqa: E402

from ._common import attr_error, broadcast_shapes, check_axes, float_type, op_error, scalar  # noqa: E402
from .sliding import box  # noqa: E402


def _local_shape(op):
    def rule(input, size=(), **_):
        size = list(size)
        if len(size) != len(input) or any(not isinstance(s, (int, np.integer)) or s < 1 for s in size):
            raise attr_error(op, "size", size, f"must have {len(input)} items >= 1")
        box.shape_rule(input, size, normalize=True)
        return tuple(input)
    return rule


for _op in (local_response_normalization, local_mean_normalization, local_variance_normalization,
            local_contrast_normalization):
    _op.shape(_local_shape(_op.name))


def _axes_shape(op):
    def rule(input, axes=(), **_):
        check_axes(op, axes, len(input))
        return tuple(input)
    return rule


l1_normalization.shape(_axes_shape("l1_normalization"))
l2_normalization.shape(_axes_shape("l2_normalization"))


def _box_avg(kernel, x, size):
    return kernel(x, size=size, normalize=True)


@local_response_normalization.fast
def _lrn_fast(input, size=(), alpha=1.0, beta=0.5, bias=1.0):
    x = scalar(input)
    _local_shape("local_response_normalization")(x.shape, size)
    sigma = float_type()(bias) + float_type()(alpha) * _box_avg(box.fast_kernel, np.square(x), size)
    with np.errstate(all="ignore"):
        return (x / np.power(sigma, float_type()(beta))).astype(float_type())


@local_mean_normalization.fast
def _lmn_fast(input, size=()):
    x = scalar(input)
    _local_shape("local_mean_normalization")(x.shape, size)
    return (x - _box_avg(box.fast_kernel, x, size)).astype(float_type())


def _guarded_div(x, sigma_plus_bias, epsilon):
    d = np.where(sigma_plus_bias > float_type()(epsilon), sigma_plus_bias, float_type()(epsilon))  # max() as select(a > b, a, b)
    with np.errstate(all="ignore"):
        return (x / d).astype(float_type())


def _lvn_fast(input, size=(), bias=0.0, epsilon=0.0):
    x = scalar(input)
    _local_shape("local_variance_normalization")(x.shape, size)
    sigma = np.sqrt(_box_avg(box.fast_kernel, np.square(x), size))
    return _guarded_div(x, sigma + float_type()(bias), epsilon)


local_variance_normalization.fast(_lvn_fast)
local_contrast_normalization.fast(lambda input, size=(), bias=0.0, epsilon=0.0:
                                  _lvn_fast(_lmn_fast(input, size), size, bias, epsilon))


@l1_normalization.fast
def _l1_fast(input, axes=(), bias=0.0, epsilon=0.0):
    x = scalar(input)
    check_axes("l1_normalization", axes, x.ndim)
    sigma = np.sum(np.abs(x), axis=tuple(axes), keepdims=True, dtype=np.float64).astype(float_type())
    return _guarded_div(x, sigma + float_type()(bias), epsilon)


@l2_normalization.fast
def _l2_fast(input, axes=(), bias=0.0, epsilon=0.0):
    x = scalar(input)
    check_axes("l2_normalization", axes, x.ndim)
    sq = np.square(x).astype(np.float64)
    sigma = np.sqrt(np.sum(sq, axis=tuple(axes), keepdims=True).astype(float_type()))
    return _guarded_div(x, sigma + float_type()(bias), epsilon)


@batch_normalization.shape
def _bn_shape(input, mean, variance, offset, scale, epsilon=0.0):
    for name, shape in (("mean", mean), ("variance", variance), ("offset", offset), ("scale", scale)):
        out = broadcast_shapes("batch_normalization", input, shape)
        if len(out) != len(input) or any(a is not None and b is not None and a != b
                                         for a, b in zip(out, input, strict=True)):
            raise op_error("batch_normalization", f"{name} of shape {tuple(shape)} does not broadcast to the "
                                                  f"input shape {tuple(input)}")
    return tuple(input)


@batch_normalization.fast
def _bn_fast(input, mean, variance, offset, scale, epsilon):
    from ._common import checked_broadcast
    x, m, v, o, s = checked_broadcast("batch_normalization", scalar(input), scalar(mean), scalar(variance),
                                      scalar(offset), scalar(scale))
    _bn_shape(np.shape(input), np.shape(mean), np.shape(variance), np.shape(offset), np.shape(scale), epsilon)
    with np.errstate(all="ignore"):
        return (o + (s * (x - m)) / np.sqrt(v + float_type()(epsilon))).astype(float_type())
