"""Up- and down-sampling (NNEF 1.0.5 §4.3): ``factor`` has one entry per spatial dimension.

``nearest_downsample``, ``area_downsample`` and ``nearest_upsample`` are compounds over
``box``/``debox``; ``multilinear_upsample`` is primitive.
"""

from __future__ import annotations

from .registry import define

nearest_downsample = define("nearest_downsample", "resize", """
fragment nearest_downsample( input: tensor<scalar>, factor: integer[] ) -> ( output: tensor<scalar> )
{
    dims = 2 + length_of(factor);
    output = box(input, size = [1] * dims, stride = [1,1] + factor, padding = [(0,0)] * dims);
}
""", compound=True)

area_downsample = define("area_downsample", "resize", """
fragment area_downsample( input: tensor<scalar>, factor: integer[] ) -> ( output: tensor<scalar> )
{
    dims = 2 + length_of(factor);
    output = box(input, size = [1,1] + factor, stride = [1,1] + factor, padding = [(0,0)] * dims, normalize = true);
}
""", compound=True)

nearest_upsample = define("nearest_upsample", "resize", """
fragment nearest_upsample( input: tensor<scalar>, factor: integer[] ) -> ( output: tensor<scalar> )
{
    dims = 2 + length_of(factor);
    output = debox(input, size = [1,1] + factor, stride = [1,1] + factor, padding = [(0,0)] * dims);
}
""", compound=True)

multilinear_upsample = define("multilinear_upsample", "resize", """
fragment multilinear_upsample(
    input: tensor<scalar>,
    factor: integer[],
    method: string = 'symmetric',
    border: string = 'replicate' )
-> ( output: tensor<scalar> );
""")


# =============================================================================================
# Shape rules and kernels
# =============================================================================================
#
# ``multilinear_upsample``, one dimension, output index i, input extent x, factor f:
# out[i] = (1 - u) * in~[j] + u * in~[j + 1], with
#   'asymmetric': j + u = i / f
#   'symmetric':  j + u = (i - (f - 1) / 2) / f        (half-pixel centres)
#   'aligned':    j + u = i * (x - 1) / (x * f - 1)    (corners aligned; x = 1 gives in[0])
# j = floor, u = fraction, computed exactly in rationals; in~ reads outside the input by
# ``border``.  Several dimensions multiply the 1-D weights (separable).  Formal: for each
# output element, sum over the 2^n corners in float64; fast: one axis at a time in float64.
# Both round to float32 once; they agree within 1e-6 relative.

import itertools  # noqa: E402
import math  # noqa: E402

import numpy as np  # noqa: E402

from ._common import attr_error, border_index, check_border, float_type, scalar  # noqa: E402

UPSAMPLE_METHODS = ("symmetric", "asymmetric", "aligned")


def _factor(op, input, factor):
    factor = list(factor)
    if len(input) < 2 or len(factor) != len(input) - 2:
        raise attr_error(op, "factor", factor, f"must have {len(input) - 2} items (one per spatial dimension)")
    if any(not isinstance(f, (int, np.integer)) or isinstance(f, bool) or f < 1 for f in factor):
        raise attr_error(op, "factor", factor, "must have integer items >= 1")
    return [int(f) for f in factor]


def _down_rule(op):
    def rule(input, factor=()):
        factor = _factor(op, input, factor)
        out = list(input[:2])
        for k, (X, f) in enumerate(zip(input[2:], factor, strict=True)):
            if X is not None and X % f:
                raise attr_error(op, "factor", factor, f"item {f} does not divide the extent {X} of dimension {k + 2}")
            out.append(None if X is None else X // f)
        return tuple(out)
    return rule


def _up_rule(op):
    def rule(input, factor=(), **attribs):
        factor = _factor(op, input, factor)
        return tuple(input[:2]) + tuple(None if x is None else x * f for x, f in zip(input[2:], factor, strict=True))
    return rule


nearest_downsample.shape(_down_rule("nearest_downsample"))
area_downsample.shape(_down_rule("area_downsample"))
nearest_upsample.shape(_up_rule("nearest_upsample"))


@nearest_downsample.fast
def _nd_fast(input, factor=()):
    x = scalar(input)
    _down_rule("nearest_downsample")(x.shape, factor)
    return x[(slice(None), slice(None)) + tuple(slice(None, None, f) for f in factor)].copy()


@area_downsample.fast
def _ad_fast(input, factor=()):
    x = scalar(input)
    out = _down_rule("area_downsample")(x.shape, factor)
    blocks = list(x.shape[:2])
    for o, f in zip(out[2:], factor, strict=True):
        blocks += [o, f]
    n = len(factor)
    mean = x.reshape(blocks).astype(np.float64).sum(axis=tuple(3 + 2 * k for k in range(n))) / math.prod(factor)
    return mean.astype(float_type())


@nearest_upsample.fast
def _nu_fast(input, factor=()):
    x = scalar(input)
    _up_rule("nearest_upsample")(x.shape, factor)
    for k, f in enumerate(factor):
        x = np.repeat(x, f, axis=k + 2)
    return np.ascontiguousarray(x)


UPSAMPLE_BORDERS = ("constant", "replicate", "reflect", "reflect-even")


@multilinear_upsample.shape
def _mu_shape(input, factor=(), method="symmetric", border="replicate"):
    if method not in UPSAMPLE_METHODS:
        raise attr_error("multilinear_upsample", "method", method, "is not one of " + ", ".join(map(repr, UPSAMPLE_METHODS)))
    check_border("multilinear_upsample", border, UPSAMPLE_BORDERS)
    return _up_rule("multilinear_upsample")(input, factor)


def linear_taps(i: int, x: int, f: int, method: str) -> tuple[int, float]:
    """(j, u) for output index ``i``: out = (1-u)*in[j] + u*in[j+1] (exact rationals)."""
    if method == "asymmetric":
        num, den = i, f
    elif method == "symmetric":
        num, den = 2 * i - f + 1, 2 * f
    else:  # aligned
        if x == 1:
            return 0, 0.0
        num, den = i * (x - 1), x * f - 1
    j = num // den
    return j, (num - j * den) / den


def _tap_value(line_value, j, x, border):
    m = border_index(j, x, border)
    return 0.0 if m is None else line_value(m)


@multilinear_upsample.formal
def _mu_formal(input, factor=(), method="symmetric", border="replicate"):
    x = scalar(input)
    out_shape = _mu_shape(x.shape, factor, method, border)
    n = x.ndim - 2
    out = np.zeros(out_shape, float_type())
    for index in np.ndindex(*out_shape):
        taps = [linear_taps(index[k + 2], x.shape[k + 2], factor[k], method) for k in range(n)]
        acc = 0.0
        for corner in itertools.product((0, 1), repeat=n):
            weight = 1.0
            src = list(index[:2])
            for k, (j, u) in enumerate(taps):
                weight *= u if corner[k] else 1.0 - u
                src.append(j + corner[k])
            if weight == 0.0:
                continue
            mapped = [border_index(src[k + 2], x.shape[k + 2], border) for k in range(n)]
            if any(m is None for m in mapped):
                continue  # 'constant': zeros
            acc += weight * float(x[tuple(src[:2] + mapped)])
        out[index] = acc
    return out


def _axis_interp(y, axis, f, method, border):
    x = y.shape[axis]
    X = x * f
    j = np.empty(X, np.int64)
    u = np.empty(X, np.float64)
    for i in range(X):  # per output index along one axis, not per element
        j[i], u[i] = linear_taps(i, x, f, method)
    parts = []
    for jj in (j, j + 1):
        mapped = np.array([border_index(int(v), x, border) for v in jj], dtype=object)
        valid = np.array([m is not None for m in mapped])
        idx = np.array([m if m is not None else 0 for m in mapped], np.int64)
        vals = np.take(y, idx, axis=axis)
        if not valid.all():
            shape = [1] * y.ndim
            shape[axis] = X
            vals = vals * valid.reshape(shape)
        parts.append(vals)
    shape = [1] * y.ndim
    shape[axis] = X
    uu = u.reshape(shape)
    return (1.0 - uu) * parts[0] + uu * parts[1]


@multilinear_upsample.fast
def _mu_fast(input, factor=(), method="symmetric", border="replicate"):
    x = scalar(input)
    _mu_shape(x.shape, factor, method, border)
    y = x.astype(np.float64)
    for k, f in enumerate(factor):
        y = _axis_interp(y, k + 2, f, method, border)
    return y.astype(float_type())


